//! Crash-consistency testing of the target, the way dm-log-writes and CrashMonkey do it for
//! filesystems: a recording layer beneath the file backend logs every write, flush and
//! discard that reaches the medium ([`Recorded`], a [`crate::backend::medium::Medium`]);
//! [`check()`] replays the log to every flush point and to seeded arbitrary crash points —
//! writes not covered by a completed flush dropped, reordered or torn at block
//! granularity — and asserts that every write acknowledged as durable (FUA, before a
//! SYNCHRONIZE CACHE that returned GOOD, or with the write cache off) is there, whole.
//!
//! Because the log sits beneath the backend, a flush that the logical unit forgets to ask
//! for, or that the backend forgets to pass to the kernel, is simply absent from it, and
//! the checker finds the acknowledged writes a crash could lose.
//!
//! A LUN records when its config says `record_writes = "<log file>"` (file and device
//! backings; docs/target.md). Times are CLOCK_MONOTONIC, shared by every process on the
//! host, so an initiator's acknowledgement times compare with the log's.
//!
//! Files: [`record`] (the file format), [`recorder`] ([`Recorded`]), [`log`] ([`WriteLog`],
//! reading a log back and replaying it), [`check`](mod@check) (the crash-point checker).

pub mod check;
pub mod log;
pub mod record;
pub mod recorder;

pub use check::{Ack, CheckReport, CrashPoints, Violation, check};
pub use log::WriteLog;
pub use recorder::Recorded;

use std::path::PathBuf;

/// Why a write log could not be written, read or checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteLogError {
    /// The bytes end before the header or record does.
    #[error("{what}: truncated: need {need} bytes, have {have}")]
    Truncated {
        /// What was being parsed.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The file does not start with the write log magic.
    #[error("not a write log (no SRPWLOG1 magic)")]
    NotALog,
    /// A field holds a value the format does not allow.
    #[error("{what}: {field} = {value:#x} is invalid: {why}")]
    BadField {
        /// What was being parsed.
        what: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The rule it breaks.
        why: &'static str,
    },
    /// The output buffer is smaller than the record.
    #[error("{what}: output buffer is {have} bytes, need {need}")]
    BufferTooSmall {
        /// What was being emitted.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A record's sequence number is not its position: records lost or reordered.
    #[error("record {index} has sequence number {seq}: the log is not contiguous")]
    OutOfSequence {
        /// Its position in the file.
        index: u64,
        /// The sequence number it carries.
        seq: u64,
    },
    /// A record reaches past the medium's end.
    #[error("record {seq}: {offset} + {len} bytes is past the medium's {size_bytes} bytes")]
    OutOfRange {
        /// The record.
        seq: u64,
        /// Its offset.
        offset: u64,
        /// Its length.
        len: u64,
        /// The medium size.
        size_bytes: u64,
    },
    /// An acknowledgement given to the checker is not whole blocks inside the medium.
    #[error("acknowledgement {index}: {why}")]
    BadAck {
        /// Its position in the list.
        index: usize,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Reading or writing the log file failed.
    #[error("write log {path}: {source}", path = path.display())]
    Io {
        /// The log file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn read_fixed<T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable>(
    what: &'static str,
    buf: &[u8],
) -> Result<T, WriteLogError> {
    wirekit::read_fixed(buf).map_err(|s| WriteLogError::Truncated {
        what,
        need: s.need,
        have: s.have,
    })
}

fn write_fixed<T: zerocopy::IntoBytes + zerocopy::Immutable>(
    what: &'static str,
    fixed: &T,
    buf: &mut [u8],
) -> Result<usize, WriteLogError> {
    wirekit::write_fixed(fixed, buf).map_err(|s| WriteLogError::BufferTooSmall {
        what,
        need: s.need,
        have: s.have,
    })
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of the log and of acknowledgements.
pub fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always available on Linux");
    // Both fields are non-negative for CLOCK_MONOTONIC.
    (t.tv_sec() as u64) * 1_000_000_000 + t.tv_nsec() as u64
}
