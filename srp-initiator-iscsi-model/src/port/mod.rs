//! The emulated SCSIport-era port of the Windows XP iSCSI driver model (windows.md §3).
//!
//! Contract — how this model differs from StorPort (crate `srp-initiator-storport`, its
//! sibling over the shared port primitives of `win-port`):
//! - The driver is **not a miniport called at dispatch level for every step**. The port
//!   hands it each request through one StartIo-like entry,
//!   [`Driver::start_request`], at dispatch level: it must not block, and a correct driver
//!   only queues the request for its own worker threads. Those threads own the transport
//!   (an iSCSI connection, later the SRP channel), run at **passive level**, may block, and
//!   hand each finished request back through [`PortHandle::complete_request`] (or
//!   [`PortHandle::complete_tagged`], for a transport that carries only the tag).
//! - The port owns the queues: per LU, at most [`DriverInfo::tags_per_lu`] requests are
//!   outstanding in the driver, each under its own [`QueueTag`] (SRB `QueueTag`); the rest
//!   wait in the port. A submitter may choose the tag ([`Port::submit_tagged`]); a tag in
//!   use on that LU is refused.
//! - The driver sees its device's life, which StorPort hid: [`Driver::reset`] (a request
//!   timed out, or the owner asked), [`Driver::remove`] (`surprise` or not),
//!   [`Driver::power`] and [`Driver::unload`].
//!
//! Rules the port enforces; each break is a [`Violation`] that **bugchecks** the port: the
//! violation is recorded, every request queued or outstanding completes at once with
//! `SRB_STATUS_INTERNAL_ERROR`, nothing more is accepted, and no submitter hangs.
//! - (a) No blocking call in a dispatch-level entry ([`Driver::start_request`],
//!   [`Driver::reset`]): a wait through any primitive that asks access-layer's verifier
//!   ([`access_layer::verbs::verifier::may_block`]: `Completion::wait`, the StorPort
//!   crate's `ke` events, waits and delays, `SystemMemory::alloc`) is trapped as
//!   [`Violation::BlockingAtDispatch`]; an entry that stays at dispatch level past
//!   [`PortConfig::dispatch_watchdog`] (a spin, a plain sleep) as
//!   [`Violation::DispatchWatchdog`].
//! - (b) One request per tag: a submission naming a tag in use is refused
//!   ([`PortError::TagInUse`]); a completion naming a tag with no request outstanding is
//!   [`Violation::UnknownTag`].
//! - (c) After a reset, the requests it flushed are the port's: a completion of one is
//!   [`Violation::CompletionAfterFlush`].
//! - (d) A request completed twice is [`Violation::DoubleCompletion`].
//! - (e) At removal the port first fails its own queued requests with
//!   [`REMOVAL_STATUS`]; once [`Driver::remove`] returns, a request the driver still holds
//!   is [`Violation::IoLeftAtRemoval`] (the port fails it with [`REMOVAL_STATUS`]).
//!
//! Besides: a request the driver holds past its SRB `TimeOutValue` makes the port reset its
//! bus ([`Driver::reset`]) and complete what the reset flushed with
//! `SRB_STATUS_BUS_RESET`; the queue pauses and resumes ([`Port::pause`], [`Port::resume`],
//! [`Port::set_power`]); the driver may report devices arriving and leaving
//! ([`PortHandle::notify_device_arrival`], [`PortHandle::notify_device_removal`]); after
//! [`Port::unload`] no entry point is called again, and a driver still calling the port
//! is [`Violation::CallAfterUnload`]. The port's life is a table-driven state machine
//! ([`lifecycle`]).
//!
//! Shared with the StorPort port through `win-port` (the SCSI_REQUEST_BLOCK is the same
//! structure in both models): [`Srb`], [`SrbOwner`], [`SrbRequest`], [`SrbResult`], [`SrbStatus`],
//! [`LuAddress`], [`SrbId`], [`SrbFunction`], [`DataDirection`], [`SrbData`], the machine's
//! [`SystemMemory`] and its [`DataBuffer`]s; the submitter's handle is access-layer's
//! [`Completion`](access_layer::verbs::Completion).
//!
//! Time and threads: the port reads the time only from [`PortConfig::clock`] (the system
//! clock by default). It runs two threads: `iscsiport-dpc` (delivers completions to
//! submitters, starts the requests completions and resumes release) and `iscsiport-timer`
//! (request timeouts and the dispatch watchdog; each timeout's reset on a thread of its
//! own, so a reset stuck in the driver cannot stop the watchdog). Submitters start
//! requests from their own thread too. The driver's worker threads are the driver's.
//!
//! Modules: [`driver`] (the trait), [`handle`] (the services the driver calls; the
//! [`IscsiPortCalls`](crate::model::IscsiPortCalls) of the SRP driver among them), the
//! levels, limits and [`request`] handles of [`crate::model`] re-exported, [`lifecycle`] (the port's states),
//! [`verifier`] (violations); inside: `queue` (per-LU queues and tag tables), `shared`
//! (state, the entry-point wrapper, completion, flush, bugcheck), `owner` ([`Port`]),
//! `timer` (the two threads, timeouts, resets).

pub mod driver;
pub mod handle;
pub mod lifecycle;
mod owner;
mod queue;
pub use crate::model::request;
mod shared;
mod timer;
pub mod verifier;

pub use crate::model::{DriverInfo, InitializeError, Level, PowerState, REMOVAL_STATUS};
pub use driver::Driver;
pub use handle::PortHandle;
pub use lifecycle::{LifeEvent, Lifecycle};
pub use owner::{LuStats, Port};
pub use request::{FlushCause, QueueTag, Request, RequestState};
pub use verifier::{EntryPoint, Violation};
pub use win_port::{
    DataBuffer, DataDirection, LuAddress, MemoryError, Srb, SrbData, SrbFunction, SrbId, SrbOwner,
    SrbRequest, SrbResult, SrbStatus, SystemMemory,
};

use std::sync::Arc;
use std::time::Duration;

/// The port's own knobs.
#[derive(Debug, Clone)]
pub struct PortConfig {
    /// How long an entry may run at dispatch level before the watchdog bugchecks.
    pub dispatch_watchdog: Duration,
    /// The timer's resolution (timeouts are checked every tick).
    pub tick: Duration,
    /// The machine's memory, shared by every port of a host (request buffers live in it);
    /// `None`: the port gets its own of 4096 pages.
    pub memory: Option<Arc<SystemMemory>>,
    /// Where the port reads the time: the system clock by default. The threads wait in
    /// real time, so a clock given here must advance by itself.
    pub clock: Arc<dyn ib_verbs::time::Clock>,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            dispatch_watchdog: Duration::from_millis(500),
            tick: Duration::from_millis(10),
            memory: None,
            clock: ib_verbs::time::system_clock(),
        }
    }
}

/// Why a bus reset happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetCause {
    /// A request timed out.
    Timeout,
    /// [`Port::reset_bus`] was called.
    Requested,
}

/// Something the port reports to its owner ([`Port::take_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortEvent {
    /// A request the driver held ran past its timeout.
    RequestTimedOut {
        /// The request.
        id: SrbId,
        /// Its LU.
        lu: LuAddress,
        /// Its tag.
        tag: QueueTag,
    },
    /// [`Driver::reset`] ran and the port flushed what the driver held on the bus.
    BusReset {
        /// The bus.
        path_id: u8,
        /// Why.
        cause: ResetCause,
        /// What the entry returned.
        success: bool,
        /// The requests the port completed with `SRB_STATUS_BUS_RESET`.
        flushed: Vec<SrbId>,
    },
    /// The driver reported a device ([`PortHandle::notify_device_arrival`]).
    DeviceArrived(LuAddress),
    /// The driver reported a device gone ([`PortHandle::notify_device_removal`]).
    DeviceRemoved(LuAddress),
    /// The queue paused or resumed.
    QueuePaused(bool),
    /// [`Driver::power`] ran.
    PowerChanged(PowerState),
    /// [`Driver::remove`] ran.
    Removed {
        /// A surprise removal.
        surprise: bool,
        /// Requests the port failed from its own queue, before the entry.
        failed_queued: usize,
    },
    /// [`Driver::unload`] ran.
    Unloaded,
    /// The verifier stopped the port.
    BugCheck(Violation),
}

/// Why the port refused something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// [`Driver::initialize`] failed.
    #[error("the driver's initialize failed: {0}")]
    Initialize(#[from] InitializeError),
    /// [`Driver::initialize`] returned limits the port cannot use.
    #[error("the driver's limits are unusable: {0}")]
    BadInfo(&'static str),
    /// A request that no SRB can carry.
    #[error("malformed request: {0}")]
    BadRequest(&'static str),
    /// The request's buffer is not in this port's system memory.
    #[error("the data buffer is not in this port's system memory")]
    ForeignBuffer,
    /// No system memory for the request's bytes.
    #[error("system memory for the data: {0}")]
    Memory(#[from] MemoryError),
    /// The tag the submitter chose is in use on the LU (rule b).
    #[error("queue tag {tag} is in use on LU {lu}")]
    TagInUse {
        /// The LU.
        lu: LuAddress,
        /// The tag.
        tag: QueueTag,
    },
    /// The port takes no request in this state (removal, unload).
    #[error("the port accepts no request while {0:?}")]
    NotAccepting(Lifecycle),
    /// An owner call the port's state does not allow.
    #[error("illegal in state {from:?}: {event:?}")]
    IllegalTransition {
        /// The state.
        from: Lifecycle,
        /// What was asked.
        event: LifeEvent,
    },
    /// The verifier stopped the port (with this violation).
    #[error("the port bugchecked: {0}")]
    BugCheck(Violation),
    /// The verifier stopped the port earlier (see [`Port::violations`]).
    #[error("the port bugchecked")]
    BugChecked,
    /// The driver did not finish its outstanding requests in time.
    #[error("{outstanding} requests still outstanding after the drain")]
    DrainTimeout {
        /// How many.
        outstanding: usize,
    },
    /// A blocking owner call from dispatch level.
    #[error("blocking call `{0}` at dispatch level")]
    BlockingAtDispatch(&'static str),
    /// A thread could not be started.
    #[error("cannot spawn the port's threads: {0}")]
    Spawn(String),
}
