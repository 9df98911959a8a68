//! Durability of a logical unit's writes. Every flush — SYNCHRONIZE CACHE, START STOP UNIT,
//! and the flush after any command whose rule (`rules.rs`) asks for durability, made by
//! its door for writes (`store.rs`) — goes through [`LogicalUnit::flush`].
//!
//! A flush that fails is **latched**. After a failed `fdatasync` Linux may have dropped the
//! dirty pages it could not write and marked them clean, so the next `fdatasync` succeeds
//! although the data is lost (the PostgreSQL "fsyncgate" of 2018). So once a flush has
//! failed, every later flush and every write that must be durable is answered MEDIUM ERROR,
//! WRITE ERROR (03h/0Ch/00h) without touching the backend, until an operator, having dealt
//! with the cause, clears it (`srpctl target lun clear-flush-error NAME`). Writes the
//! initiator did not ask to be durable (write cache on, no FUA) still complete: nothing was
//! promised about them, and the next flush will fail. Each failed flush is counted and
//! logged; the latch and its reason show in `srpctl target luns`.

use super::{LogicalUnit, Stop, backend_sense};
use crate::backend::{BackendError, Op};
use scsi::{Lba, Sense, SenseCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A logical unit's flush state.
#[derive(Debug, Default)]
pub(crate) struct FlushLatch {
    /// Why the first failed flush since the last clear failed; `None` while none has.
    failed: Mutex<Option<String>>,
    /// Failed flushes since the LU was built (not reset by a clear).
    errors: AtomicU64,
}

impl FlushLatch {
    fn reason(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The sense of a flush refused by the latch.
fn latched() -> Stop {
    Stop::Check(Sense::new(SenseCode::WRITE_ERROR))
}

impl LogicalUnit {
    /// Makes every completed write durable, or fails with MEDIUM ERROR, WRITE ERROR: when
    /// the backend's flush fails (latched from then on) or a flush failed before.
    ///
    /// With an intent log (WRITE ATOMIC, `crate::atomic`), the log is held across the flush
    /// and emptied after it — every record's blocks are durable in place then — so no
    /// atomic write lands between the two; a log that cannot be emptied fails the flush
    /// (latched): a record left behind, replayed after a crash, would overwrite writes this
    /// flush made durable.
    pub(crate) fn flush(&self, lba: Lba) -> Result<(), Stop> {
        self.check_flushable()?;
        let mut log = self
            .atomic_log
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(PoisonError::into_inner));
        let failed = |e: BackendError| {
            self.latch(&e);
            backend_sense(&e, SenseCode::WRITE_ERROR, lba)
        };
        self.backend.flush().map_err(failed)?;
        if let Some(log) = log.as_mut() {
            log.retire().map_err(|e| {
                failed(BackendError::Io {
                    op: Op::Flush,
                    path: log.path().to_path_buf(),
                    source: std::io::Error::other(e.to_string()),
                })
            })?;
        }
        Ok(())
    }

    /// [`LogicalUnit::flush`] on a store with asynchronous I/O (`aio.rs`): `done` gets the
    /// result on the store's thread; a failure is latched as a synchronous one is. An LU
    /// without asynchronous I/O, or with WRITE ATOMIC's intent log (retired under its lock),
    /// flushes synchronously here.
    pub(crate) fn flush_async(
        self: Arc<Self>,
        lba: Lba,
        done: Box<dyn FnOnce(Result<(), Stop>) + Send>,
    ) {
        if let Err(s) = self.check_flushable() {
            return done(Err(s));
        }
        let aio = match self.backend.async_io() {
            Some(aio) if self.atomic_log.is_none() => aio,
            _ => return done(self.flush(lba)),
        };
        let lu = self.clone();
        aio.flush(Box::new(move |r| {
            done(r.map_err(|e| {
                lu.latch(&e);
                backend_sense(&e, SenseCode::WRITE_ERROR, lba)
            }));
        }));
    }

    /// Fails as a flush would if one failed before (latched); for a durable write, before
    /// it touches the medium (`store.rs`).
    pub(super) fn check_flushable(&self) -> Result<(), Stop> {
        let failed = self
            .flush_latch
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if failed.is_some() {
            Err(latched())
        } else {
            Ok(())
        }
    }

    fn latch(&self, e: &BackendError) {
        self.flush_latch.errors.fetch_add(1, Ordering::Relaxed);
        let mut failed = self
            .flush_latch
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let first = failed.is_none();
        if first {
            *failed = Some(e.to_string());
        }
        drop(failed);
        tracing::error!(
            lun = %self.identity.unique_name(),
            error = %e,
            "a flush failed: writes acknowledged before it may be lost; every flush and durable \
             write now fails until an operator clears it (srpctl target lun clear-flush-error NAME)"
        );
    }

    /// Why flushes are refused, while a failed flush is latched.
    pub fn flush_error(&self) -> Option<String> {
        self.flush_latch.reason()
    }

    /// Failed flushes since the LU was built.
    pub fn flush_errors(&self) -> u64 {
        self.flush_latch.errors.load(Ordering::Relaxed)
    }

    /// Clears a latched flush error (the operator has dealt with its cause); returns the
    /// reason that was latched, if any.
    pub fn clear_flush_error(&self) -> Option<String> {
        let was = self
            .flush_latch
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(why) = &was {
            tracing::warn!(
                lun = %self.identity.unique_name(),
                was = %why,
                "flush error cleared by the operator: flushes and durable writes are served again"
            );
        }
        was
    }
}
