//! READ, WRITE and SYNCHRONIZE CACHE on a store whose I/O completes asynchronously
//! ([`crate::backend::AsyncIo`]: a Ceph image through librbd), with their data in the
//! command slot's registered memory. A backend worker makes the command's checks — unit
//! attention, the reservation, write protect, the transfer and range limits, a latched
//! flush failure, a copy holding the range — as the synchronous path does and under the
//! same rule ([`super::rules`]), starts the operation and goes on to its next job; the
//! store's completion finishes the command on the store's thread (the flush a durable
//! write's rule asks for, counters, status) and hands it to its channel, whose loop the
//! reply wakes. So the number of commands in flight on a LUN is bounded by the initiators'
//! credits, not by the workers, and no thread waits for an operation.
//!
//! Ordering: an asynchronous read or write enters the LU's gate while it holds the LU's
//! order shared, and leaves it when the store is done with it; a command that takes the
//! order exclusive (COMPARE AND WRITE, ORWRITE, WRITE ATOMIC, a copy's hold) then waits
//! until the gate is empty (`LogicalUnit::atomic_order`), so it sees every asynchronous
//! write that started before it whole, and none starts while it runs. A command whose rule
//! or data the asynchronous path does not cover runs the ordinary way.

use super::store::AsyncWrite;
use super::{CmdOutput, Exec, LogicalUnit, Nexus, Stop, TransportError, backend_sense};
use super::{io, pr, rules};
use crate::backend::OwnedSpan;
use scsi::cdb::{ReadWrite, SynchronizeCache};
use scsi::{Command, Lba, Sense, SenseCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

/// What the engine calls with the command's result, once, when it has ended (on the
/// store's thread, or on the caller's when it ended before reaching the store).
pub type Finish = Box<dyn FnOnce(Result<CmdOutput, TransportError>) + Send>;

/// A command the asynchronous path runs ([`LogicalUnit::async_command`]).
#[derive(Clone, Copy, Debug)]
pub enum AsyncCmd {
    /// READ (6/10/12/16) into the slot's memory.
    Read(ReadWrite),
    /// WRITE (6/10/12/16) from the slot's memory.
    Write(ReadWrite),
    /// SYNCHRONIZE CACHE (10/16).
    Sync(SynchronizeCache),
}

impl AsyncCmd {
    fn command(self) -> Command {
        match self {
            AsyncCmd::Read(rw) => Command::Read(rw),
            AsyncCmd::Write(rw) => Command::Write(rw),
            AsyncCmd::Sync(s) => Command::SynchronizeCache(s),
        }
    }
}

/// The LU's asynchronous operations in flight (module doc, "Ordering").
#[derive(Debug, Default)]
pub(crate) struct Gate {
    inside: Mutex<usize>,
    empty: Condvar,
    /// Commands started asynchronously.
    started: AtomicU64,
    /// The most reads and writes in flight at once.
    peak: AtomicU64,
    /// Failed operations, logged at most once per kind per interval with the count since
    /// (a dead cluster fails every command: counted each, one line per 10 s).
    errors: Mutex<Option<opskit::ratelog::RateLog<&'static str>>>,
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        self.inside.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn enter(&self) {
        let mut n = self.lock();
        *n += 1;
        self.peak.fetch_max(*n as u64, Ordering::Relaxed);
    }

    fn leave(&self) {
        let mut n = self.lock();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.empty.notify_all();
        }
    }

    /// Waits until no asynchronous read or write is in flight (called with the LU's order
    /// held exclusive: none can enter meanwhile).
    pub(super) fn wait_empty(&self) {
        let mut n = self.lock();
        while *n > 0 {
            n = self.empty.wait(n).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Logs a failed operation of kind `what` on `lu` (rate-limited; every one is counted
    /// by the LU's counters as a CHECK CONDITION).
    fn failed(&self, lu: &LogicalUnit, what: &'static str, e: &crate::backend::BackendError) {
        let mut g = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
        let log = g.get_or_insert_with(|| {
            opskit::ratelog::RateLog::new(
                opskit::ratelog::DEFAULT_INTERVAL,
                opskit::ratelog::DEFAULT_CAPACITY,
            )
        });
        if let Some(line) = log.event(Instant::now(), what) {
            tracing::warn!(lu = %lu.identity().unique_name(), op = what, error = %e,
                failed = line.count, "the store failed commands (answered with sense data, counted)");
        }
    }

    /// Commands started asynchronously, and the most in flight at once.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.started.load(Ordering::Relaxed),
            self.peak.load(Ordering::Relaxed),
        )
    }
}

/// One read or write in the gate; leaves it when dropped.
struct InGate(Arc<LogicalUnit>);

impl Drop for InGate {
    fn drop(&mut self) {
        self.0.gate.leave();
    }
}

/// A command that passed its checks: what to start.
enum Launch {
    Read {
        lba: Lba,
        dst: OwnedSpan,
        _in: InGate,
    },
    Write {
        write: AsyncWrite,
        _in: InGate,
    },
    Flush {
        lba: Lba,
    },
}

/// The end of one asynchronous command: its result to the engine's form, counted, handed
/// on. Dropped without an end (a store that lost its completion, a panic on its thread),
/// the command is still answered: INTERNAL TARGET FAILURE, logged.
struct Ending {
    lu: Arc<LogicalUnit>,
    opcode: Option<u8>,
    started: Instant,
    finish: Option<Finish>,
}

impl Ending {
    fn end(mut self, r: Exec) {
        if let Some(f) = self.finish.take() {
            self.answer(f, r);
        }
    }

    fn answer(&self, f: Finish, r: Exec) {
        let out = super::finish(r, &mut Vec::new());
        self.lu.counters.record(self.opcode, &out);
        let us = self
            .started
            .elapsed()
            .as_micros()
            .try_into()
            .unwrap_or(u64::MAX);
        self.lu.counters.latency(self.opcode, us);
        f(out);
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        if let Some(f) = self.finish.take() {
            tracing::error!(lu = %self.lu.identity().unique_name(), opcode = ?self.opcode,
                "an asynchronous command ended without its completion (a target bug or a lost \
                 store completion): answered INTERNAL TARGET FAILURE");
            self.answer(
                f,
                Err(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE).into()),
            );
        }
    }
}

impl LogicalUnit {
    /// [`Gate::failed`] for the write door (`store.rs`).
    pub(super) fn gate_failed(&self, what: &'static str, e: &crate::backend::BackendError) {
        self.gate.failed(self, what, e);
    }

    /// `cdb` as an asynchronous command, when this LU's store has asynchronous I/O and it is
    /// a READ whose data fits the slot's `staged_len` bytes, a WRITE whose `data_out_len`
    /// bytes are in the slot, or a SYNCHRONIZE CACHE; `None`: run it the ordinary way
    /// ([`LogicalUnit::execute_io`]), which answers a malformed CDB too.
    pub fn async_command(
        &self,
        cdb: &[u8],
        staged_len: usize,
        data_out_len: Option<usize>,
    ) -> Option<AsyncCmd> {
        // The WRITE ATOMIC intent log's flush retires the log under its lock: synchronous.
        if self.backend.async_io().is_none() || self.atomic_log.is_some() {
            return None;
        }
        match (super::parse(cdb).ok()?, data_out_len) {
            (Command::Read(rw), None) if self.bytes_of(rw.blocks) <= staged_len => {
                Some(AsyncCmd::Read(rw))
            }
            (Command::Write(rw), Some(_)) => Some(AsyncCmd::Write(rw)),
            (Command::SynchronizeCache(s), None) => Some(AsyncCmd::Sync(s)),
            _ => None,
        }
    }

    /// Runs `cmd` (from [`LogicalUnit::async_command`] for `cdb`) with its data in `span`
    /// (the data-out's bytes for a WRITE; room for the data-in for a READ): checked here,
    /// started on the store, and `finish` called with its result when it ends — here at once
    /// when a check stops it.
    pub fn start_async(
        self: &Arc<Self>,
        nexus: &Nexus<'_>,
        cdb: &[u8],
        cmd: AsyncCmd,
        span: OwnedSpan,
        finish: Finish,
    ) {
        let ending = Ending {
            lu: self.clone(),
            opcode: cdb.first().copied(),
            started: Instant::now(),
            finish: Some(finish),
        };
        let begin = std::panic::AssertUnwindSafe(|| self.begin(nexus, cdb, cmd, span));
        match std::panic::catch_unwind(begin) {
            Ok(Ok(launch)) => self.launch(launch, ending),
            Ok(Err(r)) => ending.end(r),
            Err(_) => {
                tracing::error!(lu = %self.identity().unique_name(), cdb = ?cdb,
                    "a command panicked in the target (a bug): answered INTERNAL TARGET FAILURE");
                ending.end(Err(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE).into()));
            }
        }
    }

    /// The checks, in the synchronous path's order; `Err` is the command's answer.
    fn begin(
        self: &Arc<Self>,
        nexus: &Nexus<'_>,
        cdb: &[u8],
        cmd: AsyncCmd,
        span: OwnedSpan,
    ) -> Result<Launch, Exec> {
        if let Some(ua) = self.check_unit_attention(nexus, cdb, &mut Vec::new()) {
            return Err(ua);
        }
        let nexus = &Nexus {
            pr_epoch: Some(self.pr_epoch()),
            ..*nexus
        };
        let command = cmd.command();
        let rule = rules::rule(&command);
        if self
            .pr_read()
            .conflicts_with(nexus.it_nexus(), &command, rule.access)
        {
            return Err(Ok(pr::reservation_conflict()));
        }
        match cmd {
            AsyncCmd::Read(rw) => self.begin_read(&rw, span),
            AsyncCmd::Write(rw) => {
                let rules::Writes::ThisLu(durability) = rule.writes else {
                    tracing::error!("WRITE's rule does not write its LU (a target bug)");
                    return Err(Err(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE).into()));
                };
                self.begin_write(nexus, &rw, span, durability)
            }
            AsyncCmd::Sync(s) => {
                if s.lba > self.last_lba() {
                    return Err(Err(SenseCode::LBA_OUT_OF_RANGE.into()));
                }
                self.check_range(s.lba, s.blocks).map_err(Err)?;
                self.check_flushable().map_err(Err)?;
                Ok(Launch::Flush { lba: s.lba })
            }
        }
    }

    fn begin_read(self: &Arc<Self>, rw: &ReadWrite, span: OwnedSpan) -> Result<Launch, Exec> {
        io::check_transfer(self, rw.blocks, io::length_byte(rw.cdb)).map_err(Err)?;
        self.check_range(rw.lba, rw.blocks).map_err(Err)?;
        let n = self.bytes_of(rw.blocks);
        if n == 0 {
            return Err(Ok(CmdOutput {
                data_in_staged: true,
                ..CmdOutput::good(0)
            }));
        }
        let entered = {
            let _order = self.read_order();
            self.enter_gate()
        };
        Ok(Launch::Read {
            lba: rw.lba,
            dst: OwnedSpan { len: n, ..span },
            _in: entered,
        })
    }

    fn begin_write(
        self: &Arc<Self>,
        nexus: &Nexus<'_>,
        rw: &ReadWrite,
        span: OwnedSpan,
        durability: rules::Durability,
    ) -> Result<Launch, Exec> {
        self.check_writable().map_err(Err)?;
        io::check_transfer(self, rw.blocks, io::length_byte(rw.cdb)).map_err(Err)?;
        self.check_range(rw.lba, rw.blocks).map_err(Err)?;
        let need = self.bytes_of(rw.blocks);
        if span.len < need {
            return Err(Err(Stop::Transport(TransportError::DataOutUnderrun {
                need_bytes: need,
                have_bytes: span.len,
            })));
        }
        if need == 0 {
            return Err(Ok(CmdOutput::good(0)));
        }
        let order = self
            .write_order_at(nexus, rw.lba, rw.blocks.0.into())
            .map_err(Err)?;
        // Admitted and noted to the copy watches under the order, as `MediumWrites` does.
        let src = OwnedSpan { len: need, ..span };
        let write = AsyncWrite::admit(self, durability, rw.lba, src).map_err(Err)?;
        let entered = self.enter_gate();
        drop(order);
        Ok(Launch::Write {
            write,
            _in: entered,
        })
    }

    /// Enters the gate (call with the order held).
    fn enter_gate(self: &Arc<Self>) -> InGate {
        self.gate.enter();
        self.gate.started.fetch_add(1, Ordering::Relaxed);
        InGate(self.clone())
    }

    fn launch(self: &Arc<Self>, launch: Launch, ending: Ending) {
        let Some(aio) = self.backend.async_io() else {
            // `async_command` checked it; the store cannot lose it.
            ending.end(Err(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE).into()));
            return;
        };
        match launch {
            Launch::Read { lba, dst, _in } => {
                let n = dst.len;
                aio.read_into(
                    lba,
                    dst,
                    Box::new(move |r| {
                        drop(_in);
                        if let Err(e) = &r {
                            ending.lu.gate.failed(&ending.lu, "read", e);
                        }
                        ending.end(
                            r.map(|()| CmdOutput {
                                data_in_staged: true,
                                ..CmdOutput::good(n)
                            })
                            .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, lba)),
                        );
                    }),
                );
            }
            Launch::Write { write, _in } => {
                let n = write.len();
                write.start(
                    aio,
                    Box::new(move |r| {
                        drop(_in);
                        ending.end(r.map(|()| CmdOutput {
                            data_out_len: n,
                            ..CmdOutput::good(0)
                        }));
                    }),
                );
            }
            Launch::Flush { lba } => {
                self.clone().flush_async(
                    lba,
                    Box::new(move |r| ending.end(r.map(|()| CmdOutput::good(0)))),
                );
            }
        }
    }
}
