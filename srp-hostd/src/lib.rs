//! The SRP host daemon: `srpctl host run -c host.toml`.
//!
//! It sweeps the configured portals over Device Management, logs in to each SRP IOC found
//! through the StorPort-model SRP miniport or the iSCSI-model SRP driver (`[host] driver`;
//! one emulated adapter per login, one local address per adapter), scans each login's LUNs (REPORT LUNS, INQUIRY, VPD 0x83, READ
//! CAPACITY) and exposes every LUN as a FUSE block file in the disks directory; reads,
//! writes and flushes become SCSI commands (flush → SYNCHRONIZE CACHE, O_DSYNC → FUA). A
//! session whose device-loss timer expires loses its disks cleanly (their open handles get
//! EIO) and is logged in again when its portal answers. Operators talk to it over a control
//! socket (`srpctl sessions|disks|login|logout`).
//!
//! # Architecture
//! - [`config`]: `host.toml` (portals, local addresses, identity, registration mode,
//!   timers), validated with every error at once.
//! - [`discover`]: one Device Management sweep of a portal from a local address.
//! - [`command`]: one SCSI command through a port, waited on, its outcome classified.
//! - [`scan`]: a login's LUNs and their identities.
//! - [`disk`]: [`disk::SrpDisk`], the block device over a port's LU.
//! - [`adapter`]: a login's adapter under the StorPort or the iSCSI driver model.
//! - [`persist`]: the persistent logins, kept across restarts.
//! - [`session`]: one login: its adapter, its disks, its state.
//! - [`daemon`]: [`HostDaemon`]: sessions, the supervisor, the block files, the socket.
//! - [`control`]: the control socket's messages, service and client.

pub mod adapter;
pub mod command;
pub mod config;
pub mod control;
pub mod daemon;
pub mod discover;
pub mod disk;
pub mod metrics;
pub mod persist;
pub mod rules;
pub mod saved;
pub mod scan;
pub mod session;

pub use config::{ConfigError, HostConfig};
pub use daemon::{HostDaemon, HostError};
pub use srp_host::{BlockDevice, DeviceError};
