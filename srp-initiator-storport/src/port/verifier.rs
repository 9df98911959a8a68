//! The port's verifier (Driver Verifier for StorPort miniports, in miniature): the routines
//! it watches and what counts as a rule violation. How a routine is run under it — at
//! dispatch level, panics caught, a blocking call recognised — is `win_port::entry`,
//! shared with the iSCSI-model port.
//!
//! Every violation bugchecks the port (see [`super::Port`]): it is recorded, every request
//! still queued or held is completed with `SRB_STATUS_INTERNAL_ERROR`, and no request is
//! accepted any more — submitters never hang on a broken miniport.

use super::srb::SrbId;
use super::status::SrbStatus;
use std::fmt;

/// A miniport routine, as the port calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Routine {
    /// HwFindAdapter.
    FindAdapter,
    /// HwInitialize.
    Initialize,
    /// HwBuildIo.
    BuildIo,
    /// HwStartIo.
    StartIo,
    /// HwResetBus.
    ResetBus,
    /// HwAdapterControl.
    AdapterControl,
    /// The miniport's DPC routine.
    Dpc,
    /// HwTimer.
    Timer,
}

impl fmt::Display for Routine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Routine::FindAdapter => "HwFindAdapter",
            Routine::Initialize => "HwInitialize",
            Routine::BuildIo => "HwBuildIo",
            Routine::StartIo => "HwStartIo",
            Routine::ResetBus => "HwResetBus",
            Routine::AdapterControl => "HwAdapterControl",
            Routine::Dpc => "HwDpcRoutine",
            Routine::Timer => "HwTimer",
        };
        f.write_str(name)
    }
}

/// A rule the miniport broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// A blocking call at dispatch level (KeWaitForSingleObject at DISPATCH_LEVEL).
    #[error("{routine} made blocking call `{call}` at dispatch level")]
    BlockingAtDispatch {
        /// The routine running.
        routine: Routine,
        /// The blocking call (as the verifier named it).
        call: String,
    },
    /// A routine ran at dispatch level longer than the DPC watchdog allows (bugcheck 0x133).
    #[error("{routine} ran over {limit_ms} ms at dispatch level (DPC watchdog)")]
    DpcWatchdog {
        /// The routine running.
        routine: Routine,
        /// The watchdog's limit.
        limit_ms: u64,
    },
    /// A routine panicked.
    #[error("{routine} panicked: {message}")]
    MiniportPanic {
        /// The routine.
        routine: Routine,
        /// The panic message.
        message: String,
    },
    /// RequestComplete for an SRB already completed.
    #[error("SRB {id} completed twice")]
    DoubleCompletion {
        /// The SRB.
        id: SrbId,
    },
    /// RequestComplete for an SRB the miniport was never given.
    #[error("SRB {id} completed before the port gave it to the miniport")]
    NotOwned {
        /// The SRB.
        id: SrbId,
    },
    /// RequestComplete with a status a miniport must not return (PENDING, INTERNAL_ERROR).
    #[error("SRB {id} completed with status {status}")]
    BadStatus {
        /// The SRB.
        id: SrbId,
        /// Its status.
        status: SrbStatus,
    },
    /// HwBuildIo returned false without completing the SRB.
    #[error("HwBuildIo returned FALSE without completing SRB {id}")]
    BuildIoDropped {
        /// The SRB.
        id: SrbId,
    },
    /// SRBs on the path were still held by the miniport after HwResetBus returned.
    #[error("{} SRBs on path {path} still outstanding after HwResetBus", ids.len())]
    OutstandingAfterReset {
        /// The path reset.
        path: u8,
        /// The SRBs left (the port completed them with BUS_RESET).
        ids: Vec<SrbId>,
    },
}
