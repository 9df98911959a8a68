//! The Communication Manager (IBTA Vol 1 ch. 12): connection establishment and release for
//! RC queue pairs, sans-IO.
//!
//! [`CmEndpoint`] is one port's CM. The consumer asks it to `connect`, `listen`, `accept`,
//! `reject`, `confirm` (RTU after a REP it liked), `send_mra` and `disconnect`; a driver feeds
//! it received CM MADs ([`CmEndpoint::handle_mad`]) and the time
//! ([`CmEndpoint::handle_timeout`]) and drains [`CmEndpoint::poll_transmit`] (MADs to send on
//! the GSI), [`CmEndpoint::poll_event`] and [`CmEndpoint::poll_timeout`]. Call order per
//! step: inputs, then transmits, then events, then the next deadline.
//!
//! Both forms of SRP login ride on it: the native IB form (any service ID, SRP_LOGIN_REQ as the
//! REQ's private data) and the RDMA-CM form (service ID `0x0000000001060000 | port`, the
//! 36-byte RDMA-CM header first in the private data; [`crate::mad::cm::CmaHeader`]). The QP
//! attributes each side needs (QPN, starting PSN, responder resources, initiator depth, MTU,
//! timeouts) travel in the REQ and REP and come out in the events; [`QpPsns`] says which
//! PSN each side sends from (as Linux reads the Starting PSN: the sender's receive PSN).
//!
//! The seam consumers use ([`seam`], [`ConnectionManager`]) is at the level of
//! connections; this CM is one implementation of it, over QP1 (`crate::mads::MadService`),
//! and rdma-core's librdmacm is the other.
//!
//! Files: `conn` (one connection's state and the transition table), `endpoint` (demultiplexing,
//! listens, timers, MAD building), `psn` (the QP PSNs a CM exchange sets), `seam` (the
//! connection-manager interface every provider's CM offers).
#[allow(unused_imports)]
use crate::prelude::*;

mod conn;
mod endpoint;
mod psn;
pub mod seam;

pub use conn::{ConnState, Role};
pub use endpoint::{AcceptParams, CmConfig, CmEndpoint, CmEvent, ConnId, ConnectParams};
pub use psn::QpPsns;
pub use seam::{
    AcceptRequest, CmSetup, CmStats, ConnEvent, ConnRequest, ConnectRequest, ConnectionManager,
    DeviceManagement,
};

/// A random first communication ID for [`CmSetup::first_comm_id`] from the system's
/// randomness (a simulated run draws from its fabric instead; a kernel driver from the
/// kernel's generator).
#[cfg(feature = "std")]
pub fn random_comm_id() -> u32 {
    (crate::verbs::device::system_random() as u32).max(1)
}

/// Why a CM request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CmError {
    /// No such connection (it may have closed already).
    #[error("no such connection {0:?}")]
    NoSuchConn(ConnId),
    /// The connection is not in a state where this makes sense.
    #[error("connection {conn:?} is {state:?}; cannot {what}")]
    WrongState {
        /// The connection.
        conn: ConnId,
        /// Its state.
        state: ConnState,
        /// What was asked.
        what: &'static str,
    },
    /// Private data longer than the message carries.
    #[error("{what} private data is {len} bytes; at most {max}")]
    PrivateDataTooLong {
        /// The message.
        what: &'static str,
        /// Given.
        len: usize,
        /// Allowed.
        max: usize,
    },
    /// A MAD could not be built.
    #[error("cannot build a CM MAD: {0}")]
    Mad(#[from] crate::mad::MadError),
    /// The service ID is already listened on.
    #[error("service ID {0:?} is already listened on")]
    AlreadyListening(crate::mad::ServiceId),
    /// A connection asked for a partition (P_Key index) the port's table does not have.
    #[error("P_Key index {0} is not in the port's P_Key table")]
    NoSuchPartition(u16),
    /// The provider's connection manager cannot do this (rdma-core: the IB CM login
    /// form, which user space cannot reach since Linux removed `ib_ucm`).
    #[error("{0}")]
    Unsupported(String),
    /// The connection manager could not be set up (its QP1, its event channel).
    #[error("cannot set up the connection manager: {0}")]
    Setup(String),
    /// The provider's connection manager refused the call.
    #[error("{0}")]
    Provider(String),
}
