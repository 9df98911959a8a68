//! What the iSCSI model gives a driver, with no `std`: the levels its entry points run at
//! ([`Level`]), the power states it sees ([`PowerState`]), the limits it returns at start
//! ([`DriverInfo`]), the requests it holds ([`Request`], [`QueueTag`]) and the port calls
//! the SRP driver makes from its worker ([`IscsiPortCalls`]). The emulated port
//! ([`crate::port`], `std`) implements the calls with its [`PortHandle`](crate::port::PortHandle);
//! a kernel driver's glue would implement them over `ScsiPortNotification` and the port's
//! SRB queue. This module is the driver-facing half of the model's contract, as
//! `srp-initiator-storport::hw` is StorPort's.
//!
//! Files: this one, [`request`] (request handles, tags and their lifecycle).

pub mod request;

use crate::prelude::*;
use alloc::sync::Arc;
use core::fmt;
use win_port::{SrbStatus, SystemMemory};

pub use request::{FlushCause, QueueTag, Request, RequestState};

/// The status the port fails requests with at device removal (its own queued ones, and
/// those the driver left behind), and the SRP driver fails what it holds with:
/// `SRB_STATUS_NO_DEVICE`, as SCSIport does for a device that is gone.
pub const REMOVAL_STATUS: SrbStatus = SrbStatus::NO_DEVICE;

/// The level an entry point runs at (the IRQL, in two values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// PASSIVE_LEVEL: may block.
    Passive,
    /// DISPATCH_LEVEL: must not block.
    Dispatch,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Passive => "PASSIVE_LEVEL",
            Level::Dispatch => "DISPATCH_LEVEL",
        })
    }
}

/// A device power state (D0 working, D3 off; XP's D1/D2 are not used by storage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerState {
    /// Working.
    D0,
    /// Off: the port holds the queue and the driver holds no request.
    D3,
}

/// The driver's limits, returned when it starts (what an iSCSI HBA's
/// PORT_CONFIGURATION_INFORMATION says in this model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverInfo {
    /// Buses (PathId values 0..n).
    pub number_of_buses: u8,
    /// Targets per bus.
    pub max_targets: u8,
    /// LUNs per target.
    pub max_luns: u8,
    /// The largest transfer, in bytes.
    pub max_transfer_bytes: usize,
    /// Requests outstanding in the driver per LU, each under its own tag (1 to 255).
    pub tags_per_lu: u16,
}

impl Default for DriverInfo {
    fn default() -> Self {
        DriverInfo {
            number_of_buses: 1,
            max_targets: 1,
            max_luns: 1,
            max_transfer_bytes: 1 << 20,
            tags_per_lu: 32,
        }
    }
}

/// Why a driver failed to start (the driver's own words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InitializeError(pub String);

/// The port calls the SRP driver makes, from its worker thread at passive level or inside
/// an entry point at dispatch level; none blocks and none calls into the driver.
pub trait IscsiPortCalls<X>: Send + Sync {
    /// `ScsiPortNotification(RequestComplete)`: the request, with the status, SCSI status,
    /// sense and transfer length the driver set on it, goes back to its submitter; the
    /// driver does not touch it again.
    fn complete_request(&self, request: &Request<X>);
    /// The machine's memory request buffers live in (the scatter-gather lists' physical
    /// addresses are byte offsets of its block); `None` once the port is gone.
    fn system_memory(&self) -> Option<Arc<SystemMemory>>;
}
