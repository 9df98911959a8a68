//! Per-LUN counters: what the control socket reports for each LUN. Updated once per
//! executed command with relaxed atomics (they are statistics, not synchronisation).

use super::{CmdOutput, TransportError};
use opskit::metrics::{AtomicHistogram, Histogram};
use scsi::Status;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a command did to the medium, by operation code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// READ (6/10/12/16): data-in from the medium.
    Read,
    /// WRITE (6/10/12/16), WRITE SAME, COMPARE AND WRITE, UNMAP: the medium changes.
    Write,
    /// Everything else.
    Other,
}

fn kind(opcode: u8) -> Kind {
    match opcode {
        0x08 | 0x28 | 0xa8 | 0x88 => Kind::Read,
        0x0a | 0x2a | 0xaa | 0x8a | 0x41 | 0x93 | 0x89 | 0x42 => Kind::Write,
        _ => Kind::Other,
    }
}

/// Live counters of one LUN, across every I_T nexus.
#[derive(Debug, Default)]
pub struct LuCounters {
    commands: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    check_conditions: AtomicU64,
    reservation_conflicts: AtomicU64,
    /// How long READs, medium-modifying commands and SYNCHRONIZE CACHE took to execute
    /// here (from the backend worker picking them up to their status: the LU's service
    /// time, without the transport's).
    read_latency: AtomicHistogram,
    write_latency: AtomicHistogram,
    flush_latency: AtomicHistogram,
}

/// A LUN's service-time histograms at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LuLatency {
    /// READs.
    pub read: Histogram,
    /// Medium-modifying commands.
    pub write: Histogram,
    /// SYNCHRONIZE CACHE (10/16).
    pub flush: Histogram,
}

/// A copy of [`LuCounters`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LuCountersSnapshot {
    /// Commands executed (any status).
    pub commands: u64,
    /// READ commands.
    pub reads: u64,
    /// Medium-modifying commands (WRITE, WRITE SAME, COMPARE AND WRITE, UNMAP).
    pub writes: u64,
    /// Data-in bytes of successful READs.
    pub bytes_read: u64,
    /// Data-out bytes of successful medium-modifying commands.
    pub bytes_written: u64,
    /// Commands answered CHECK CONDITION (or failed in the transport).
    pub check_conditions: u64,
    /// Commands answered RESERVATION CONFLICT.
    pub reservation_conflicts: u64,
    /// Flushes the backend failed (each latches the LU's flush error; `durability.rs`).
    pub flush_errors: u64,
    /// Writes that waited for a copy holding their range (`exec/copy/watch.rs`).
    pub writes_held: u64,
    /// Writes answered BUSY: a copy held their range and they ran on the daemon's loop.
    pub writes_busy_for_copies: u64,
    /// Held copies that failed because another copy wrote their source (COPY ABORTED).
    pub copy_collisions: u64,
    /// Commands run asynchronously on a store with asynchronous I/O (`exec/aio.rs`).
    pub async_commands: u64,
    /// The most asynchronous reads and writes in flight at once.
    pub async_peak: u64,
}

impl LuCounters {
    /// Counts one command with operation code `opcode` and its result.
    pub(crate) fn record(&self, opcode: Option<u8>, out: &Result<CmdOutput, TransportError>) {
        let add = |c: &AtomicU64, n: u64| {
            c.fetch_add(n, Ordering::Relaxed);
        };
        add(&self.commands, 1);
        let kind = opcode.map_or(Kind::Other, kind);
        match kind {
            Kind::Read => add(&self.reads, 1),
            Kind::Write => add(&self.writes, 1),
            Kind::Other => {}
        }
        match out {
            Ok(o) if o.status == Status::Good => match kind {
                Kind::Read => add(&self.bytes_read, o.data_in_len as u64),
                Kind::Write => add(&self.bytes_written, o.data_out_len as u64),
                Kind::Other => {}
            },
            Ok(o) if o.status == Status::ReservationConflict => {
                add(&self.reservation_conflicts, 1);
            }
            Ok(_) | Err(_) => add(&self.check_conditions, 1),
        }
    }

    /// Records how long a command with operation code `opcode` took (`us` µs).
    pub(crate) fn latency(&self, opcode: Option<u8>, us: u64) {
        match opcode {
            Some(0x35 | 0x91) => self.flush_latency.record(us),
            Some(op) => match kind(op) {
                Kind::Read => self.read_latency.record(us),
                Kind::Write => self.write_latency.record(us),
                Kind::Other => {}
            },
            None => {}
        }
    }

    /// The latency histograms now.
    pub fn latency_snapshot(&self) -> LuLatency {
        LuLatency {
            read: self.read_latency.snapshot(),
            write: self.write_latency.snapshot(),
            flush: self.flush_latency.snapshot(),
        }
    }

    /// The counters now.
    pub fn snapshot(&self) -> LuCountersSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LuCountersSnapshot {
            commands: get(&self.commands),
            reads: get(&self.reads),
            writes: get(&self.writes),
            bytes_read: get(&self.bytes_read),
            bytes_written: get(&self.bytes_written),
            check_conditions: get(&self.check_conditions),
            reservation_conflicts: get(&self.reservation_conflicts),
            // The LU fills these from its own state (`LogicalUnit::counters`).
            flush_errors: 0,
            writes_held: 0,
            writes_busy_for_copies: 0,
            copy_collisions: 0,
            async_commands: 0,
            async_peak: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scsi::{Sense, SenseCode};

    #[test]
    fn classifies_and_counts() {
        let c = LuCounters::default();
        c.record(Some(0x28), &Ok(CmdOutput::good(4096)));
        let mut w = CmdOutput::good(0);
        w.data_out_len = 512;
        c.record(Some(0x2a), &Ok(w));
        c.record(
            Some(0x2a),
            &Ok(super::super::check_condition(Sense::new(
                SenseCode::LBA_OUT_OF_RANGE,
            ))),
        );
        c.record(Some(0x00), &Ok(super::super::pr::reservation_conflict()));
        c.record(None, &Ok(CmdOutput::good(0)));
        let s = c.snapshot();
        assert_eq!(
            s,
            LuCountersSnapshot {
                commands: 5,
                reads: 1,
                writes: 2,
                bytes_read: 4096,
                bytes_written: 512,
                check_conditions: 1,
                reservation_conflicts: 1,
                ..LuCountersSnapshot::default()
            }
        );
        c.latency(Some(0x28), 80);
        c.latency(Some(0x2a), 700);
        c.latency(Some(0x35), 3_000);
        c.latency(Some(0x12), 1);
        let l = c.latency_snapshot();
        assert_eq!((l.read.count, l.write.count, l.flush.count), (1, 1, 1));
        assert_eq!(
            (l.read.sum_us, l.write.sum_us, l.flush.sum_us),
            (80, 700, 3_000)
        );
    }
}
