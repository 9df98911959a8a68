//! A logical unit's backing store as the engine sees it: [`Store`] reads, sizes and
//! flushes freely, and has no way to write; the only way to change the medium is a
//! `MediumWrites`, which [`super::rules`] makes from a command's rule. It notes every
//! write to the copy watches, refuses on a write-protected LU, refuses a durable write
//! while a failed flush is latched (`durability.rs`), and `MediumWrites::finish` flushes
//! what was written when the rule asks for it. A forgotten `finish` still flushes on drop.

use super::{LogicalUnit, Stop, backend_sense};
use crate::backend::{AsyncIo, Backend, BackendError, BlockSize, LbaExtent, MemSpan, OwnedSpan};
use crate::exec::rules::Durability;
use scsi::{BlockCount, Lba, SenseCode};
use std::cell::Cell;
use std::sync::Arc;

/// The backend without its writes.
#[derive(Debug)]
pub struct Store(Box<dyn Backend>);

impl Store {
    pub(super) fn new(backend: Box<dyn Backend>) -> Store {
        Store(backend)
    }

    /// Logical block size.
    pub fn block_size(&self) -> BlockSize {
        self.0.block_size()
    }

    /// Capacity in blocks.
    pub fn blocks(&self) -> u64 {
        self.0.blocks()
    }

    /// Grows (or shrinks) the store: an operator's resize.
    pub fn resize(&self, blocks: u64) -> Result<(), BackendError> {
        self.0.resize(blocks)
    }

    /// Reads `buf.len()` bytes at `lba`.
    pub fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        self.0.read_at(lba, buf)
    }

    /// Reads into registered memory.
    pub fn read_into(&self, lba: Lba, dst: MemSpan<'_>) -> Result<(), BackendError> {
        self.0.read_into(lba, dst)
    }

    /// Whether UNMAP deallocates.
    pub fn supports_unmap(&self) -> bool {
        self.0.supports_unmap()
    }

    /// Mapped or deallocated from `lba` on.
    pub fn lba_status(&self, lba: Lba, max: u64) -> Result<LbaExtent, BackendError> {
        self.0.lba_status(lba, max)
    }

    /// Starts reading a range into the cache.
    pub fn prefetch(&self, lba: Lba, blocks: u64) -> Result<(), BackendError> {
        self.0.prefetch(lba, blocks)
    }

    /// Whether the store is lost with the process (RAM).
    pub fn is_volatile(&self) -> bool {
        self.0.is_volatile()
    }

    /// The most blocks COMPARE AND WRITE may name here.
    pub fn max_compare_and_write_blocks(&self) -> u8 {
        self.0.max_compare_and_write_blocks()
    }

    /// Whether every call returns without blocking.
    pub fn never_blocks(&self) -> bool {
        self.0.never_blocks()
    }

    /// The store's asynchronous I/O, if it has some (`aio.rs`). Its writes go through
    /// [`AsyncWrite`] only.
    pub(super) fn async_io(&self) -> Option<&dyn AsyncIo> {
        self.0.async_io()
    }

    /// Calls `listener` when the store changes size by itself.
    pub(super) fn watch_capacity(&self, listener: crate::backend::CapacityListener) {
        self.0.watch_capacity(listener);
    }

    /// Makes completed writes durable (`durability.rs` latches its failure).
    pub(super) fn flush(&self) -> Result<(), BackendError> {
        self.0.flush()
    }
}

/// The door to one LU's medium for one command's writes (module doc).
#[derive(Debug)]
pub(crate) struct MediumWrites<'lu> {
    lu: &'lu LogicalUnit,
    durable: bool,
    /// Written since the last flush.
    dirty: Cell<bool>,
    /// The first block written: what a failed flush names (INFORMATION).
    first: Cell<Option<Lba>>,
    finished: bool,
}

impl<'lu> MediumWrites<'lu> {
    /// For a command that writes `lu` with `durability` (only [`super::rules`] and the
    /// dispatcher make one).
    pub(super) fn new(lu: &'lu LogicalUnit, durability: Durability) -> MediumWrites<'lu> {
        MediumWrites {
            lu,
            durable: durability.durable(lu.write_cache()),
            dirty: Cell::new(false),
            first: Cell::new(None),
            finished: false,
        }
    }

    /// The LU written.
    pub(crate) fn lu(&self) -> &'lu LogicalUnit {
        self.lu
    }

    /// Before touching the medium: write protect, and a latched flush failure when this
    /// command promises durability.
    fn admit(&self, lba: Lba) -> Result<(), Stop> {
        self.lu.check_writable()?;
        if self.durable && !self.dirty.get() {
            self.lu.check_flushable()?;
        }
        if self.first.get().is_none() {
            self.first.set(Some(lba));
        }
        Ok(())
    }

    /// Writes `buf` at `lba` (WRITE ERROR at `lba` on a backend failure).
    pub(crate) fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), Stop> {
        self.write_at_by(None, lba, buf)
            .map_err(|e| e.into_stop(SenseCode::WRITE_ERROR, lba))
    }

    /// Writes `buf` at `lba` for the copy `owner` (its own watches not touched); the
    /// backend's error as it is, for the copy's own sense.
    pub(crate) fn write_at_by(
        &self,
        owner: Option<u64>,
        lba: Lba,
        buf: &[u8],
    ) -> Result<(), WriteError> {
        self.admit(lba).map_err(WriteError::Refused)?;
        let blocks = (buf.len() / self.lu.block_bytes() as usize) as u64;
        self.lu.note_write_by(owner, lba, blocks);
        self.dirty.set(true);
        self.lu
            .backend
            .0
            .write_at(lba, buf)
            .map_err(WriteError::Backend)
    }

    /// WRITE ATOMIC's write of `buf` at `lba`: through the LU's intent log when it has one
    /// (`crate::atomic`: logged and synced, then written in place, the log held across
    /// both so a flush cannot empty it in between), else a plain write (the caller keeps
    /// it to what the medium writes whole).
    pub(crate) fn write_atomic(&self, lba: Lba, buf: &[u8]) -> Result<(), Stop> {
        let Some(log) = &self.lu.atomic_log else {
            return self.write_at(lba, buf);
        };
        self.admit(lba)?;
        let mut log = log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        log.log(lba.0, buf).map_err(|e| {
            tracing::error!(lu = %self.lu.identity().unique_name(), lba = lba.0, error = %e,
                "WRITE ATOMIC: the intent log could not be written; the blocks are untouched");
            Stop::Check(scsi::Sense::with_information(SenseCode::WRITE_ERROR, lba.0))
        })?;
        let blocks = (buf.len() / self.lu.block_bytes() as usize) as u64;
        self.lu.note_write(lba, blocks);
        self.dirty.set(true);
        self.lu
            .backend
            .0
            .write_at(lba, buf)
            .map_err(|e| backend_sense(&e, SenseCode::WRITE_ERROR, lba))
    }

    /// COMPARE AND WRITE by the store itself (`Backend::compare_and_write`): `None` when
    /// the store leaves it to the target; `Some(Ok(Some(offset)))` a miscompare (nothing
    /// written).
    pub(crate) fn compare_and_write_at(
        &self,
        lba: Lba,
        verify: &[u8],
        write: &[u8],
    ) -> Option<Result<Option<usize>, Stop>> {
        if let Err(stop) = self.admit(lba) {
            return Some(Err(stop));
        }
        let blocks = (write.len() / self.lu.block_bytes() as usize) as u64;
        let r = self.lu.backend.0.compare_and_write(lba, verify, write)?;
        if matches!(r, Ok(None)) {
            self.lu.note_write(lba, blocks);
            self.dirty.set(true);
        }
        Some(r.map_err(|e| backend_sense(&e, SenseCode::WRITE_ERROR, lba)))
    }

    /// Writes from registered memory at `lba`.
    pub(crate) fn write_from(&self, lba: Lba, src: MemSpan<'_>) -> Result<(), Stop> {
        self.admit(lba)?;
        let blocks = (src.len / self.lu.block_bytes() as usize) as u64;
        self.lu.note_write(lba, blocks);
        self.dirty.set(true);
        self.lu
            .backend
            .0
            .write_from(lba, src)
            .map_err(|e| backend_sense(&e, SenseCode::WRITE_ERROR, lba))
    }

    /// Deallocates `blocks` at `lba` (they read as zeros).
    pub(crate) fn unmap(&self, lba: Lba, blocks: BlockCount) -> Result<(), Stop> {
        self.admit(lba)?;
        self.lu.note_write(lba, blocks.0.into());
        self.dirty.set(true);
        self.lu
            .backend
            .0
            .unmap(lba, blocks)
            .map_err(|e| backend_sense(&e, SenseCode::WRITE_ERROR, lba))
    }

    /// Flushes now what was written (WRITE AND VERIFY, before it reads the medium back).
    pub(crate) fn flush_now(&self) -> Result<(), Stop> {
        self.lu.flush(self.first.get().unwrap_or(Lba(0)))?;
        self.dirty.set(false);
        Ok(())
    }

    /// Ends the command's writes: flushes what was written when the rule asks for
    /// durability. A handler's own failure stands (the flush is still made); a failed flush
    /// fails a command that had succeeded.
    pub(crate) fn finish<T>(mut self, r: Result<T, Stop>) -> Result<T, Stop> {
        self.finished = true;
        if !(self.durable && self.dirty.get()) {
            return r;
        }
        let flushed = self.flush_now();
        r.and_then(|v| flushed.map(|()| v))
    }
}

impl Drop for MediumWrites<'_> {
    fn drop(&mut self) {
        if !self.finished && self.durable && self.dirty.get() {
            // A path that did not finish (a bug): the promise is kept, the failure latched.
            tracing::error!(lu = %self.lu.identity().unique_name(),
                "durable writes ended without their flush (a target bug): flushed now");
            let _ = self.flush_now();
        }
    }
}

/// The door for one asynchronous WRITE from registered memory (`aio.rs`): what
/// [`MediumWrites`] does for a write, owned, so that it ends on the store's thread —
/// admitted (write protect, a latched flush failure when durable) and noted to the copy
/// watches before the write starts, and flushed after it when the rule asks for durability
/// (after a failed write too, as `MediumWrites::finish` does; the write's failure stands).
#[derive(Debug)]
pub(crate) struct AsyncWrite {
    lu: Arc<LogicalUnit>,
    durable: bool,
    lba: Lba,
    src: OwnedSpan,
}

impl AsyncWrite {
    /// Admits a write of `src` at `lba` under `durability` and notes it (call with the
    /// LU's order held).
    pub(super) fn admit(
        lu: &Arc<LogicalUnit>,
        durability: Durability,
        lba: Lba,
        src: OwnedSpan,
    ) -> Result<AsyncWrite, Stop> {
        let durable = durability.durable(lu.write_cache());
        lu.check_writable()?;
        if durable {
            lu.check_flushable()?;
        }
        let blocks = (src.len / lu.block_bytes() as usize) as u64;
        lu.note_write(lba, blocks);
        Ok(AsyncWrite {
            lu: lu.clone(),
            durable,
            lba,
            src,
        })
    }

    /// Bytes it writes.
    pub(super) fn len(&self) -> usize {
        self.src.len
    }

    /// Starts the write on `aio`; `done` gets its result once the flush the rule asks for
    /// has ended.
    pub(super) fn start(self, aio: &dyn AsyncIo, done: Box<dyn FnOnce(Result<(), Stop>) + Send>) {
        let AsyncWrite {
            lu,
            durable,
            lba,
            src,
        } = self;
        aio.write_from(
            lba,
            src,
            Box::new(move |r| {
                if let Err(e) = &r {
                    lu.gate_failed("write", e);
                }
                let written = r.map_err(|e| backend_sense(&e, SenseCode::WRITE_ERROR, lba));
                if !durable {
                    return done(written);
                }
                lu.clone()
                    .flush_async(lba, Box::new(move |flushed| done(written.and(flushed))));
            }),
        );
    }
}

/// A copy's write that failed.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// Refused before the medium was touched (write protect, latched flush failure).
    Refused(Stop),
    /// The backend failed.
    Backend(BackendError),
}

impl WriteError {
    /// As a command's stop: a backend failure as `code` at `lba`.
    pub(crate) fn into_stop(self, code: SenseCode, lba: Lba) -> Stop {
        match self {
            WriteError::Refused(s) => s,
            WriteError::Backend(e) => backend_sense(&e, code, lba),
        }
    }
}
