//! The emulated StorPort port driver (design §3 item 8: port-driver models are enforced,
//! not described).
//!
//! Contract:
//! - A miniport implements [`Miniport`] exactly as a StorPort miniport implements its
//!   HW_INITIALIZATION_DATA routines; [`Port::start`] runs HwFindAdapter and HwInitialize.
//! - Submitters (a class driver's role) [`Port::submit`] an [`SrbRequest`] and get an
//!   `access-layer` [`Completion`](access_layer::verbs::Completion) of the [`SrbResult`]:
//!   wait on it from a thread that may block, or register a routine (run at dispatch
//!   level). Every accepted request completes exactly once.
//! - The port queues per LU (at most 255 — or the depth set — outstanding in the miniport
//!   per LU, the rest held), calls HwBuildIo concurrently and unlocked and HwStartIo
//!   serialized, both at dispatch level with the verifier on, honours the miniport's
//!   notifications ([`PortServices`]), re-issues a request completed with
//!   `SRB_STATUS_BUSY` as a new SRB (through HwBuildIo again), times requests out into
//!   HwResetBus (no ABORT_COMMAND first, as the 2003 StorPort), stops sending
//!   to a removed LU without telling the miniport, and bugchecks on any [`Violation`]:
//!   everything pending completes with `SRB_STATUS_INTERNAL_ERROR`, submissions are
//!   refused, nothing hangs.
//!
//! Modules: [`status`] (SRB status codes), [`sgl`] (scatter-gather lists), [`srb`] (SRBs),
//! [`miniport`] (the trait), [`services`] (notifications), [`ke`] (kernel primitives with
//! verifier hooks), [`verifier`] (violations); inside: `queue` (per-LU queues and holds),
//! `shared` (state, call wrapper, completion, bugcheck), `pump` (BuildIo/StartIo),
//! `reset` (bus reset, timeouts, DPC watchdog), `worker` (DPC and timer passes, and the
//! threads around them), `driver` ([`Port`]).
//!
//! Time and threads: the port reads the time only from [`PortConfig::clock`] (the system
//! clock by default). In [`PortMode::Threads`] (the default) it runs two threads, the DPC
//! and the timer. In [`PortMode::Manual`] it runs none: the whole-stack simulator drives
//! the port in virtual time, single-threaded, calling [`Port::run_due`] for what is due at
//! the clock's `now()` and [`Port::next_due`] to learn when to advance the clock next; the
//! same calls at the same clock values give the same miniport calls.

mod driver;
pub use win_port::{ke, memory, sgl, srb, status};
pub mod miniport;
mod pump;
mod queue;
mod reset;
pub mod services;
mod shared;
pub mod verifier;
mod worker;

pub use driver::{LuStats, Port};
pub use memory::{DataBuffer, MemoryError, SystemMemory};
pub use miniport::{
    AdapterControl, AdapterControlStatus, FindAdapterStatus, Miniport, PortConfigurationInfo,
    SupportedControlTypes, SynchronizationModel,
};
pub use queue::MAX_LU_QUEUE_DEPTH;
pub use services::PortServices;
pub use sgl::{PAGE_SIZE, ScatterGatherList, SgElement};
pub use srb::{
    DataDirection, LuAddress, Srb, SrbData, SrbFunction, SrbId, SrbOwner, SrbRequest, SrbResult,
};
pub use status::SrbStatus;
pub use verifier::{Routine, Violation};

use std::sync::Arc;
use std::time::Duration;

/// How the port's DPC and timer run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PortMode {
    /// Two threads (`storport-dpc`, `storport-timer`) run them, waiting in real time.
    #[default]
    Threads,
    /// No thread: the owner calls [`Port::run_due`] whenever [`Port::next_due`] says (the
    /// whole-stack simulator drives the port in virtual time). Nothing blocks or sleeps:
    /// notifications only mark work, timeouts reset the bus inline, and
    /// [`Port::stop_adapter`] does not wait for the drain.
    Manual,
}

/// The port's own knobs.
#[derive(Debug, Clone)]
pub struct PortConfig {
    /// How long a routine may run at dispatch level before the DPC watchdog bugchecks.
    pub dpc_watchdog: Duration,
    /// The timer resolution (StorPort's is about 10 ms).
    pub tick: Duration,
    /// How long a Busy/DeviceBusy hold lasts once the miniport holds no request.
    pub busy_retry: Duration,
    /// The per-LU queue depth (1 to 255).
    pub lu_queue_depth: u32,
    /// The machine's memory, shared by every port of a host (request buffers live in it);
    /// `None`: the port gets its own of [`memory::DEFAULT_PAGES`] pages.
    pub memory: Option<std::sync::Arc<SystemMemory>>,
    /// Where the port reads the time (every timeout, hold, timer and watchdog): the
    /// system clock by default, a virtual one under the simulator (then with
    /// [`PortMode::Manual`]: the threads of [`PortMode::Threads`] wait in real time, so a
    /// clock given to them must advance by itself).
    pub clock: Arc<dyn ib_verbs::time::Clock>,
    /// Threads, or driven by its owner.
    pub mode: PortMode,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            dpc_watchdog: Duration::from_millis(500),
            tick: Duration::from_millis(10),
            busy_retry: Duration::from_millis(250),
            lu_queue_depth: MAX_LU_QUEUE_DEPTH,
            memory: None,
            clock: ib_verbs::time::system_clock(),
            mode: PortMode::Threads,
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
    /// The miniport said the bus changed: rescan.
    BusChangeDetected {
        /// The bus.
        path_id: u8,
    },
    /// A request the miniport held ran past its timeout.
    RequestTimedOut {
        /// The request.
        id: SrbId,
        /// Its LU.
        lu: LuAddress,
    },
    /// HwResetBus ran.
    BusReset {
        /// The bus.
        path: u8,
        /// Why.
        cause: ResetCause,
        /// What HwResetBus returned.
        success: bool,
    },
    /// The verifier stopped the port.
    BugCheck(Violation),
}

/// Why the port refused something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// HwFindAdapter did not find the adapter.
    #[error("HwFindAdapter returned {0:?}")]
    AdapterNotFound(FindAdapterStatus),
    /// HwFindAdapter left a required configuration field unset.
    #[error("HwFindAdapter left {field} unset")]
    BadConfig {
        /// The field.
        field: &'static str,
    },
    /// HwInitialize returned false.
    #[error("HwInitialize failed")]
    InitializeFailed,
    /// The request's buffer is not in this port's system memory.
    #[error("the data buffer is not in this port's system memory")]
    ForeignBuffer,
    /// No system memory for the request's bytes.
    #[error("system memory for the data: {0}")]
    Memory(#[from] MemoryError),
    /// A request that no SRB can carry.
    #[error("malformed request: {0}")]
    BadRequest(&'static str),
    /// The verifier stopped the port.
    #[error("the port bugchecked: {0}")]
    BugCheck(Violation),
    /// The verifier stopped the port (the violation is in [`Port::violations`]).
    #[error("the port bugchecked")]
    BugChecked,
    /// The adapter did not drain in time.
    #[error("{outstanding} requests still outstanding")]
    DrainTimeout {
        /// How many.
        outstanding: u32,
    },
    /// The adapter is not in a state for this.
    #[error("the adapter is {0}")]
    WrongState(&'static str),
    /// A blocking call from dispatch level.
    #[error("blocking call `{0}` at dispatch level")]
    BlockingAtDispatch(&'static str),
    /// A thread could not be started.
    #[error("cannot spawn the port's threads: {0}")]
    Spawn(String),
}
