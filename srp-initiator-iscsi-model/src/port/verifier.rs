//! The port's verifier (Driver Verifier for this model, in miniature): the entry points it
//! watches and what counts as a rule violation.
//!
//! Every violation bugchecks the port (see the module doc of [`super`]). How a blocking
//! call at dispatch level is recognised (the `ke` primitives' note, access-layer's
//! verifier panicking in debug builds or counting its refusals in release builds) is
//! `win_port::entry`, shared with the StorPort port.

use super::driver::Level;
use super::request::{FlushCause, QueueTag};
use super::{LuAddress, SrbId, SrbStatus};
use std::fmt;

/// A driver entry point, as the port calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryPoint {
    /// [`Driver::initialize`](super::Driver::initialize).
    Initialize,
    /// [`Driver::start_request`](super::Driver::start_request).
    StartRequest,
    /// [`Driver::reset`](super::Driver::reset).
    Reset,
    /// [`Driver::remove`](super::Driver::remove).
    Remove,
    /// [`Driver::power`](super::Driver::power).
    Power,
    /// [`Driver::unload`](super::Driver::unload).
    Unload,
}

impl EntryPoint {
    /// The level the port calls it at.
    pub fn level(self) -> Level {
        match self {
            EntryPoint::StartRequest | EntryPoint::Reset => Level::Dispatch,
            EntryPoint::Initialize
            | EntryPoint::Remove
            | EntryPoint::Power
            | EntryPoint::Unload => Level::Passive,
        }
    }
}

impl fmt::Display for EntryPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            EntryPoint::Initialize => "initialize",
            EntryPoint::StartRequest => "start_request",
            EntryPoint::Reset => "reset",
            EntryPoint::Remove => "remove",
            EntryPoint::Power => "power",
            EntryPoint::Unload => "unload",
        };
        f.write_str(name)
    }
}

/// A rule the driver broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// Rule a: a blocking call in a dispatch-level entry.
    #[error("{entry} made blocking call `{call}` at dispatch level")]
    BlockingAtDispatch {
        /// The entry running.
        entry: EntryPoint,
        /// The call (as the verifier named it).
        call: String,
    },
    /// Rule a: an entry stayed at dispatch level past the watchdog's limit.
    #[error("{entry} ran over {limit_ms} ms at dispatch level (watchdog)")]
    DispatchWatchdog {
        /// The entry running.
        entry: EntryPoint,
        /// The limit.
        limit_ms: u64,
    },
    /// An entry panicked.
    #[error("{entry} panicked: {message}")]
    DriverPanic {
        /// The entry.
        entry: EntryPoint,
        /// The panic message.
        message: String,
    },
    /// Rule b: a completion naming a tag with no request of it outstanding.
    #[error("completion for tag {tag} on LU {lu}, which has no such request outstanding")]
    UnknownTag {
        /// The LU.
        lu: LuAddress,
        /// The tag.
        tag: QueueTag,
        /// The request the driver named, if it named one.
        id: Option<SrbId>,
    },
    /// Rule c: a completion of a request the port had already completed (flushed).
    #[error("request {id} completed after the port flushed it ({cause:?})")]
    CompletionAfterFlush {
        /// The request.
        id: SrbId,
        /// Why the port had flushed it.
        cause: FlushCause,
    },
    /// Rule d: a request completed twice.
    #[error("request {id} completed twice")]
    DoubleCompletion {
        /// The request.
        id: SrbId,
    },
    /// A completion with a status a driver must not return (PENDING, INTERNAL_ERROR).
    #[error("request {id} completed with status {status}")]
    BadStatus {
        /// The request.
        id: SrbId,
        /// The status.
        status: SrbStatus,
    },
    /// Rule e: requests the driver still held when its removal entry returned.
    #[error("{} requests still held by the driver after remove(surprise: {surprise})", ids.len())]
    IoLeftAtRemoval {
        /// Surprise removal.
        surprise: bool,
        /// The requests (the port failed them with the removal status).
        ids: Vec<SrbId>,
    },
    /// The driver called the port after its unload entry returned.
    #[error("the driver called `{call}` after unload")]
    CallAfterUnload {
        /// The service.
        call: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_have_their_levels() {
        assert_eq!(EntryPoint::Reset.level(), Level::Dispatch);
        assert_eq!(EntryPoint::Remove.level(), Level::Passive);
    }
}
