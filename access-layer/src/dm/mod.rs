//! Device Management (class 0x06, version 1): the I/O unit a target presents and the
//! discovery a host runs (IBTA Vol1 16.3; Linux ib_srpt's DM service; rdma-core
//! `srp_daemon`; WinOF `al_ioc_pnp.c`). Sits on the [GSI agent](crate::gsi).
//!
//! - [`agent::DmAgent`], sans-IO: a registry of IOCs (slot → profile + service entries)
//!   answering Get ClassPortInfo, IOUnitInfo, IOControllerProfile and ServiceEntries, with
//!   the status codes ib_srpt uses (srp-linux.md §4.5).
//! - [`client::DmClient`], sans-IO: sweeps configured portal addresses (RoCE has no SM to ask
//!   which ports support DM), IOUnitInfo → each present slot's IOControllerProfile → its
//!   ServiceEntries four at a time, keeps an [`client::IouRecord`] per portal, and reports
//!   the difference from the previous sweep as [`client::DmEvent`]s; rescans periodically;
//!   a portal that stops answering loses its IOCs.
//!
//! # Driving them
//! With a [`GsiAgent`](crate::gsi::GsiAgent) that has DM registered as a server (for the
//! agent) and as a client (for the client), a driver, after feeding the GSI agent its input:
//! 1. when `now` reaches [`client::DmClient::poll_timeout`]:
//!    [`client::DmClient::handle_timeout`]`(now, &mut gsi)` (starts sweeps);
//! 2. for each [`GsiEvent`](crate::gsi::GsiEvent) from `gsi.poll_event()`: a DM `Request`
//!    goes to [`agent::DmAgent::handle_request`]; anything else to
//!    [`client::DmClient::handle_event`]`(now, &mut gsi, ev)` (which sends the next query);
//! 3. drain [`agent::DmAgent::poll_transmit`] into `gsi.send`, then the GSI agent's
//!    transmits onto the wire;
//! 4. drain [`client::DmClient::poll_event`];
//! 5. sleep until a MAD arrives or the earliest `poll_timeout` of the GSI agent and client.

pub mod agent;
pub mod client;
#[cfg(test)]
mod tests;

pub use agent::{DmAgent, DmAgentConfig};
pub use client::{DmClient, DmClientConfig, DmClientStats, DmEvent, IocRecord, IouRecord};

use crate::gsi::GsiError;
use crate::mad::MadError;

/// Why a DM call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DmError {
    /// The slot is 0 or beyond the unit's `max_controllers`.
    #[error("slot {slot} is outside 1..={max}")]
    BadSlot {
        /// The slot asked for.
        slot: u8,
        /// The unit's last slot.
        max: u8,
    },
    /// The slot already holds an IOC.
    #[error("slot {0} already holds an IOC")]
    SlotInUse(u8),
    /// The slot holds no IOC.
    #[error("slot {0} holds no IOC")]
    NoIoc(u8),
    /// An IOC has more service entries than its profile can count (255).
    #[error("{0} service entries; an IOC has at most 255")]
    TooManyEntries(usize),
    /// The portal is already configured.
    #[error("portal already configured")]
    DuplicatePortal,
    /// A MAD could not be built.
    #[error(transparent)]
    Mad(#[from] MadError),
    /// The GSI agent refused a request.
    #[error(transparent)]
    Gsi(#[from] GsiError),
}
