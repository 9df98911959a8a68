//! MAD services on the General Services Interface (QP1): the transaction layer every GSI
//! class (DM, CM, SA) sits on (IBTA Vol1 13.5; Linux `ib_mad`).
//!
//! - [`agent::GsiAgent`], sans-IO: class registration (this node serves a class, or is a
//!   client of it), TID allocation (agent id in the high 32 bits, as Linux's `hi_tid`),
//!   request retries on a per-request timeout, response matching by TID, class, attribute
//!   and peer GID, `Timeout` events when the retries run out, a bounded pool of outstanding
//!   requests, and the answer to a Get/Set of a class nobody serves.
//! - [`port::GsiPort`], the glue to a port's QP1 through the channel interface: receive
//!   buffers in registered memory, UD SENDs to QP1 with Q_Key 0x80010000, receive
//!   completions turned into `(MadAddress, MadBuf)` with the GRH stripped.
//!
//! # Driving it
//! One agent per node (one TID space), one [`port::GsiPort`] per port. A driver loops:
//! 1. for every MAD [`port::GsiPort::recv`] yields: [`agent::GsiAgent::handle_mad`];
//! 2. when `now` reaches [`agent::GsiAgent::poll_timeout`]:
//!    [`agent::GsiAgent::handle_timeout`];
//! 3. drain [`agent::GsiAgent::poll_event`] and hand each event to the class that owns it
//!    (requests of a served class to its server, responses and timeouts to the client
//!    whose TID it is); those call [`agent::GsiAgent::send_request`] /
//!    [`agent::GsiAgent::send`];
//! 4. drain [`agent::GsiAgent::poll_transmit`] into [`port::GsiPort::send`] of the port
//!    the [`crate::mad::MadOut`] names;
//! 5. sleep until a MAD arrives or the earliest `poll_timeout` of the agent and its clients.

pub mod agent;
pub mod port;
#[cfg(test)]
pub(crate) mod tests;

pub use agent::{GsiAgent, GsiConfig, GsiEvent, GsiStats, RequestOptions};
pub use port::{GsiPort, GsiPortConfig, GsiPortStats};

use crate::mad::{MadError, MgmtClass};

/// Why a MAD service call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GsiError {
    /// Every slot of the outstanding-request pool is taken; retry after a response or timeout.
    #[error("all {capacity} outstanding-request slots are in use")]
    PoolFull {
        /// Size of the pool.
        capacity: usize,
    },
    /// The transmit queue is full (the driver is not draining `poll_transmit`).
    #[error("the transmit queue is full ({capacity} MADs)")]
    TransmitQueueFull {
        /// Size of the queue.
        capacity: usize,
    },
    /// A request was sent for a class this agent is not registered as a client of.
    #[error("not registered as a client of class {0:?}")]
    NotClient(MgmtClass),
    /// `send_request` was given a MAD with the response bit set.
    #[error("a request must not carry the response bit")]
    NotARequest,
    /// The MAD does not parse or could not be built.
    #[error(transparent)]
    Mad(#[from] MadError),
    /// A verb on the GSI QP failed.
    #[error(transparent)]
    Verbs(#[from] crate::verbs::VerbsError),
    /// The GSI QP's memory could not be read or written.
    #[error(transparent)]
    Mem(#[from] ib_verbs::mem::MemError),
    /// A MAD was handed to the glue of another port.
    #[error("MAD for port {want} handed to the GSI of port {have}")]
    WrongPort {
        /// The port the MAD names.
        want: u8,
        /// The port of this GSI.
        have: u8,
    },
    /// Every send buffer of the GSI QP is in flight.
    #[error("all {capacity} send buffers of the GSI QP are in flight")]
    SendBuffersBusy {
        /// Send buffers of the port.
        capacity: usize,
    },
}
