//! The host daemon's control interface: sessions, disks and their paths, login and logout,
//! persistent logins, the targets and portals found, policies and administrative path
//! switches (the MS iSCSI initiator's management classes, over a socket).
//!
//! Contract:
//! - [`model`]: requests and answers as plain data, and [`HostControl`], what the daemon
//!   implements.
//! - [`wire`]: the same on the control socket, as service messages of the access layer's
//!   control protocol ([`access_layer::ctl`]) whose bodies are JSON.
//! - [`service`]: the socket side, a [`access_layer::ctl::CtlService`] over a
//!   [`HostControl`]; [`client`]: srpctl's side.

pub mod client;
pub mod model;
pub mod service;
pub mod wire;

pub use client::{ClientError, HostClient};
pub use model::{
    DiskInfo, HostAnswer, HostControl, HostControlError, HostRequest, LoginSpec, PathInfo,
    PortalInfo, ResetInfo, SessionInfo, TargetInfo, hca_counters,
};
pub use service::HostService;
