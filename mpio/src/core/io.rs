//! A command's way through the core: [`MpCore::acquire`] a path, send it there (the
//! driver's part), [`MpCore::complete`] with its outcome; wait for a path meanwhile with
//! [`MpCore::wait_begin`], [`MpCore::no_path_wait`] and [`MpCore::wait_end`].
#[allow(unused_imports)]
use crate::prelude::*;

use super::{MpCore, no_path_error};
use crate::clock::Instant;
use crate::dsm::Verdict;
use crate::outcome::Outcome;
use crate::path::{PathEvent, PathState};
use core::time::Duration;
use srp_host::DeviceError;

/// Where a command goes now ([`MpCore::acquire`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire<D> {
    /// Send it on path `key` through `device`; it is counted in flight there until
    /// [`MpCore::complete`].
    Path {
        /// The path's key.
        key: u32,
        /// Its device handle.
        device: D,
    },
    /// No path is usable now: wait for one (see [`MpCore::no_path_wait`]) and acquire
    /// again.
    NoPath,
    /// The disk has no path at all (its last one was removed): fail with
    /// [`DeviceError::Gone`] (counted as an error).
    Gone,
}

/// What a command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// READ.
    Read,
    /// WRITE.
    Write,
    /// SYNCHRONIZE CACHE.
    Flush,
}

/// A command sent on a path, as its driver keeps it until [`MpCore::complete`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    /// The path's key, from [`Acquire::Path`].
    pub key: u32,
    /// What it is.
    pub kind: IoKind,
    /// Blocks it moves: what was passed to [`MpCore::acquire`].
    pub blocks: u64,
    /// Bytes it moves.
    pub bytes: u64,
    /// When it was sent on the path (its service time ends at `complete`'s `now`).
    pub started: Instant,
    /// How many times it was sent before and retried: 0 at first, then what the last
    /// [`Completion::Retry`] or [`Completion::Failover`] said.
    pub tries: u32,
}

/// What to do with a command after its outcome on a path ([`MpCore::complete`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// It succeeded: the caller's call returns Ok (counted as a read, write or flush).
    Done,
    /// It failed: the caller's call returns this error (counted as an error).
    Failed(DeviceError),
    /// Send it again, after `pause`, on whatever path [`MpCore::acquire`] picks, with
    /// `tries`.
    Retry {
        /// The DSM's pause (zero: at once).
        pause: Duration,
        /// [`Issued::tries`] of the next send.
        tries: u32,
    },
    /// Its path was taken out of service (counted as a failover): send it at once on
    /// another path ([`MpCore::acquire`]) with `tries`.
    Failover {
        /// [`Issued::tries`] of the next send (0: a new path's retries start afresh).
        tries: u32,
    },
}

impl<D: Clone> MpCore<D> {
    /// The path for a command of `blocks` blocks, counted in flight on it; never waits.
    /// [`Acquire::Gone`] is counted as an error.
    pub fn acquire(&mut self, blocks: u64) -> Acquire<D> {
        if self.paths.is_empty() {
            self.counters.errors += 1;
            return Acquire::Gone;
        }
        match self.pick() {
            Some(i) => {
                let p = &mut self.paths[i];
                p.in_flight += 1;
                p.blocks_in_flight += blocks;
                Acquire::Path {
                    key: p.key,
                    device: p.device.clone(),
                }
            }
            None => Acquire::NoPath,
        }
    }

    /// After [`Acquire::NoPath`], for a command waiting since `waiting_since` (when it
    /// first got `NoPath`): how much longer it may wait for a path, or, once
    /// [`crate::MpConfig::no_path_retry`] has passed, its error (counted as an error).
    pub fn no_path_wait(
        &mut self,
        waiting_since: Instant,
        now: Instant,
    ) -> Result<Duration, DeviceError> {
        let waited = crate::clock::since(now, waiting_since);
        if waited >= self.config.no_path_retry {
            self.counters.errors += 1;
            return Err(no_path_error(&self.identity, &self.config));
        }
        Ok(self.config.no_path_retry - waited)
    }

    /// A command starts waiting for a path (shown as queued in the snapshot).
    pub fn wait_begin(&mut self) {
        self.queued += 1;
    }

    /// A command stops waiting for a path.
    pub fn wait_end(&mut self) {
        self.queued = self.queued.saturating_sub(1);
    }

    /// Command `io` ended on its path with `outcome` at `now`: the DSM's verdict applied
    /// (the path's counters, a failed path taken out of service) and what to do next.
    pub fn complete(&mut self, io: &Issued, outcome: &Outcome, now: Instant) -> Completion {
        let verdict = self.dsm.interpret_error(outcome, io.tries);
        self.release(io, verdict == Verdict::Done, now);
        match verdict {
            Verdict::Done => {
                let c = &mut self.counters;
                let kind = match io.kind {
                    IoKind::Read => {
                        c.reads += 1;
                        0
                    }
                    IoKind::Write => {
                        c.writes += 1;
                        1
                    }
                    IoKind::Flush => {
                        c.flushes += 1;
                        2
                    }
                };
                let us = crate::clock::since(now, io.started).as_micros();
                c.latency[kind].record(u64::try_from(us).unwrap_or(u64::MAX));
                Completion::Done
            }
            Verdict::Surface => {
                self.counters.errors += 1;
                Completion::Failed(DeviceError::Io(outcome.to_string()))
            }
            Verdict::Retry(pause) => Completion::Retry {
                pause,
                tries: io.tries + 1,
            },
            Verdict::Failover => {
                self.counters.failovers += 1;
                self.path_failed(io.key, outcome, now);
                Completion::Failover { tries: 0 }
            }
        }
    }

    /// Accounts a command's end on its path.
    fn release(&mut self, io: &Issued, ok: bool, now: Instant) {
        let Some(p) = self.path_mut(io.key) else {
            return;
        };
        p.in_flight = p.in_flight.saturating_sub(1);
        p.blocks_in_flight = p.blocks_in_flight.saturating_sub(io.blocks);
        if ok {
            let us = crate::clock::since(now, io.started).as_micros() as u64;
            p.service_us = if p.service_us == 0 {
                us
            } else {
                (p.service_us * 7 + us) / 8
            };
            p.bytes += io.bytes;
            match io.kind {
                IoKind::Read => p.reads += 1,
                IoKind::Write => p.writes += 1,
                IoKind::Flush => {}
            }
        } else {
            p.errors += 1;
        }
    }

    /// Path `key` failed an I/O: out of service.
    fn path_failed(&mut self, key: u32, why: &Outcome, now: Instant) {
        let disk = &self.identity.identity;
        if let Some(p) = self.paths.iter_mut().find(|p| p.key == key)
            && p.path.state() == PathState::Active
        {
            tracing::warn!(disk, path = key, %why, "path failed; I/O moves to another path");
            p.path.handle(PathEvent::IoFailed, now);
        }
    }
}
