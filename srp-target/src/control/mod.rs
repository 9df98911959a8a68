//! The target's control interface: what an operator (or a failover drill) asks a running
//! daemon, and the run-time switches it turns.
//!
//! Contract:
//! - [`model`]: the requests and answers as plain data — lists of IOCs, ports (with live
//!   device objects), LUNs (with per-LUN counters) and sessions (with per-session
//!   counters); enabling or disabling an IOC (its sessions get SRP_T_LOGOUT then a DREQ,
//!   or are dropped without a word) or a port (down: nothing in or out).
//! - [`handle`]: [`ControlHandle`], the in-process way in: requests go to the daemon's
//!   loop, which owns every session and answers between turns; callers wait, bounded.
//! - [`wire`]: the same requests and answers on the control socket, as service messages
//!   of the access layer's control protocol ([`access_layer::ctl`]: "SRPC" header,
//!   version negotiation), with JSON bodies ([`access_layer::ctl::json`], as the host
//!   daemon's); lists come in pages.
//! - [`service`]: the socket side, a [`access_layer::ctl::CtlService`] over a handle;
//!   [`client`]: srpctl's side.

pub mod client;
pub mod handle;
pub mod metrics;
pub mod model;
pub mod service;
pub mod wire;

pub use client::{ClientError, TargetClient};
pub use handle::ControlHandle;
pub use model::{
    ControlAnswer, ControlError, ControlRequest, DisableMode, IocStatus, LoginForm, LunStatus,
    PortStatus, ReloadReport, SessionStatus,
};
pub use service::TargetService;
