//! What became of one SCSI command on one path, as the path reports it: the device's
//! answer (GOOD, CHECK CONDITION with its sense, BUSY, RESERVATION CONFLICT, another
//! status), a transport failure of the path, or the path's device gone for good.
#[allow(unused_imports)]
use crate::prelude::*;

use core::fmt;

/// How the transport failed a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// Timed out and aborted by error recovery (the command may not have run).
    Timeout,
    /// Swept by a LUN, target or channel reset.
    Reset,
    /// The path failed (fast I/O fail: the channel is down and reconnecting).
    PathFailed,
    /// Anything else the transport reports (resources, protocol).
    Other,
}

/// What became of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// GOOD: the data (a read's, trimmed to what was transferred).
    Good(Vec<u8>),
    /// CHECK CONDITION: sense key, ASC, ASCQ (0, 0, 0 if the target sent no sense).
    Check {
        /// Sense key.
        key: u8,
        /// Additional sense code.
        asc: u8,
        /// Its qualifier.
        ascq: u8,
    },
    /// BUSY or TASK SET FULL: try again shortly.
    Busy,
    /// RESERVATION CONFLICT.
    ReservationConflict,
    /// Another SCSI status.
    Status(u8),
    /// The transport did not complete the command.
    Transport {
        /// How.
        kind: TransportKind,
        /// The transport's own words (an SRB status name).
        detail: String,
    },
    /// The path's device is gone for good (device loss, adapter removed).
    NoDevice(String),
}

impl Outcome {
    /// Whether the path's device is gone for good.
    pub fn is_gone(&self) -> bool {
        matches!(self, Outcome::NoDevice(_))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Good(d) => write!(f, "GOOD ({} bytes)", d.len()),
            Outcome::Check { key, asc, ascq } => write!(
                f,
                "CHECK CONDITION {}",
                scsi::sense::SenseCode::new(scsi::sense::SenseKey::from(*key), *asc, *ascq)
            ),
            Outcome::Busy => f.write_str("BUSY"),
            Outcome::ReservationConflict => f.write_str("RESERVATION CONFLICT"),
            Outcome::Status(s) => write!(f, "SCSI status {s:#04x}"),
            Outcome::Transport { kind, detail } => write!(f, "transport {kind:?}: {detail}"),
            Outcome::NoDevice(why) => write!(f, "device gone: {why}"),
        }
    }
}
