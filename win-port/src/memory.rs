//! The emulated machine's physical memory ([`SystemMemory`]) and the data buffers requests
//! carry in it ([`DataBuffer`]).
//!
//! Contract: an SRB's data buffer lives in system memory, as a Windows buffer lives in RAM
//! the HCA can reach by physical address. The port hands the miniport the buffer's pages
//! as scatter-gather elements whose physical addresses are byte offsets of
//! [`SystemMemory::block`], so a miniport registers the caller's own pages (a
//! fast-registration page list, or the all-physical-memory region) and the HCA moves data
//! straight between them and the wire: no bounce buffer, no copy in the miniport.
//!
//! - One `SystemMemory` per machine: every port of a host shares it (a request failed over
//!   to another adapter keeps its buffer). A port started without one gets its own.
//! - Buffers are page runs, taken whole or not at all. A buffer's pages are laid out in
//!   *descending* frame order (element 0 is the run's last frame), so consecutive elements
//!   are never physically contiguous: a miniport that treats a buffer as one flat range is
//!   caught by the first multi-page transfer.
//! - [`SystemMemory::alloc`] waits for pages (a submitter's thread may block; refused at
//!   dispatch level); [`SystemMemory::try_alloc`] never waits. A buffer's pages go back when
//!   it drops — after its SRB completed and every holder (the submitter, the miniport)
//!   let go, so a late DMA can never land in someone else's buffer.
//! - Nothing here allocates per buffer: a buffer is a page run, its element list computed.
#[allow(unused_imports)]
use crate::prelude::*;

use crate::sgl::ScatterGatherList;
use alloc::sync::Arc;
use ib_verbs::mem::MemBlock;
use ib_verbs::sync::{Lock, LockGuard};
#[cfg(feature = "std")]
use std::sync::{Condvar, PoisonError};

/// The page size of the emulated machine.
pub const PAGE_SIZE: usize = 4096;

/// Pages a port's own memory has when none is given (16 MiB).
pub const DEFAULT_PAGES: usize = 4096;

/// Why a buffer could not be had or accessed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// More pages than the machine has.
    #[error("a buffer of {len} bytes needs more than the {total_pages} pages of system memory")]
    TooLarge {
        /// Bytes asked for.
        len: usize,
        /// Pages of system memory.
        total_pages: usize,
    },
    /// No run of free pages that long right now (only from [`SystemMemory::try_alloc`]).
    #[error("no {pages} free contiguous pages of system memory now ({free} free)")]
    Exhausted {
        /// Pages asked for.
        pages: usize,
        /// Pages free.
        free: usize,
    },
    /// [`SystemMemory::alloc`] would have to wait, and the caller runs at dispatch level.
    #[error("waiting for system memory at dispatch level")]
    AtDispatch,
    /// A range outside the buffer.
    #[error("range {offset}+{len} is outside a buffer of {total} bytes")]
    OutOfBuffer {
        /// Offset into the buffer.
        offset: usize,
        /// Bytes.
        len: usize,
        /// The buffer's length.
        total: usize,
    },
}

/// Which frames are in use: a bitmap searched first-fit from where the last run ended.
#[derive(Debug)]
struct Frames {
    used: Vec<u64>,
    total: usize,
    free: usize,
    cursor: usize,
}

impl Frames {
    fn is_used(&self, f: usize) -> bool {
        self.used[f / 64] & (1 << (f % 64)) != 0
    }

    fn set(&mut self, first: usize, n: usize, used: bool) {
        for f in first..first + n {
            if used {
                self.used[f / 64] |= 1 << (f % 64);
            } else {
                self.used[f / 64] &= !(1 << (f % 64));
            }
        }
    }

    /// The first frame of a free run of `n` (`n >= 1`), marked used.
    fn take(&mut self, n: usize) -> Option<usize> {
        if n > self.free {
            return None;
        }
        // Two passes at most: from the cursor to the end, then from the start.
        for (from, to) in [(self.cursor, self.total), (0, self.cursor + n - 1)] {
            let mut run = 0;
            let mut f = from;
            while f < to.min(self.total) {
                // A whole used word is skipped at once.
                if f % 64 == 0 && run == 0 && self.used[f / 64] == u64::MAX {
                    f += 64;
                    continue;
                }
                if self.is_used(f) {
                    run = 0;
                } else {
                    run += 1;
                    if run == n {
                        let first = f + 1 - n;
                        self.set(first, n, true);
                        self.free -= n;
                        self.cursor = (f + 1) % self.total;
                        return Some(first);
                    }
                }
                f += 1;
            }
        }
        None
    }

    fn give(&mut self, first: usize, n: usize) {
        debug_assert!((first..first + n).all(|f| self.is_used(f)), "double free");
        self.set(first, n, false);
        self.free += n;
    }
}

/// The machine's physical memory: one registered-able block and its page allocator.
#[derive(Debug)]
pub struct SystemMemory {
    block: Arc<MemBlock>,
    frames: Lock<Frames>,
    /// Wakes submitters waiting for pages (`std`: without it a wait is refused).
    #[cfg(feature = "std")]
    freed: Condvar,
}

impl SystemMemory {
    /// A machine with `pages` pages of memory (at least one).
    pub fn new(pages: usize) -> Arc<SystemMemory> {
        let pages = pages.max(1);
        Arc::new(SystemMemory {
            block: MemBlock::new(pages * PAGE_SIZE),
            frames: Lock::new(Frames {
                used: vec![0; pages.div_ceil(64)],
                total: pages,
                free: pages,
                cursor: 0,
            }),
            #[cfg(feature = "std")]
            freed: Condvar::new(),
        })
    }

    /// The memory itself: physical address `a` is byte `a` of this block.
    pub fn block(&self) -> &Arc<MemBlock> {
        &self.block
    }

    /// Pages of memory.
    pub fn pages(&self) -> usize {
        self.block.len() / PAGE_SIZE
    }

    /// Pages free now.
    pub fn free_pages(&self) -> usize {
        self.frames().free
    }

    fn frames(&self) -> LockGuard<'_, Frames> {
        self.frames.lock()
    }

    fn pages_for(&self, len: usize) -> Result<usize, MemoryError> {
        let pages = len.div_ceil(PAGE_SIZE);
        if pages > self.pages() {
            return Err(MemoryError::TooLarge {
                len,
                total_pages: self.pages(),
            });
        }
        Ok(pages)
    }

    /// A zeroed buffer of `len` bytes now, or why not. Never waits.
    pub fn try_alloc(self: &Arc<Self>, len: usize) -> Result<DataBuffer, MemoryError> {
        let pages = self.pages_for(len)?;
        if pages == 0 {
            return Ok(DataBuffer::empty());
        }
        let mut f = self.frames();
        let first = f.take(pages).ok_or(MemoryError::Exhausted {
            pages,
            free: f.free,
        })?;
        drop(f);
        Ok(self.buffer(first, pages, len, true))
    }

    /// A zeroed buffer of `len` bytes, waiting for pages while others hold them (never at
    /// dispatch level: there it is [`MemoryError::AtDispatch`] when it would wait).
    pub fn alloc(self: &Arc<Self>, len: usize) -> Result<DataBuffer, MemoryError> {
        self.alloc_with(len, true)
    }

    /// [`SystemMemory::alloc`] without the zeroing: the contents are whatever the pages
    /// last held (this process's own data). For a buffer the device fills — a read's,
    /// whose caller takes only the bytes the request transferred — so a read does not pay
    /// a `memset` of its whole buffer first. Under per-I/O registration the target can only
    /// write such a buffer, never read it.
    pub fn alloc_for_read(self: &Arc<Self>, len: usize) -> Result<DataBuffer, MemoryError> {
        self.alloc_with(len, false)
    }

    fn alloc_with(self: &Arc<Self>, len: usize, zero: bool) -> Result<DataBuffer, MemoryError> {
        let pages = self.pages_for(len)?;
        if pages == 0 {
            return Ok(DataBuffer::empty());
        }
        let mut f = self.frames();
        loop {
            if let Some(first) = f.take(pages) {
                drop(f);
                return Ok(self.buffer(first, pages, len, zero));
            }
            f = self.wait_freed(f, pages)?;
        }
    }

    /// Waits until pages are given back (a submitter's thread; refused at dispatch level).
    /// With no `std` there is no waiting here: the request is refused as exhausted (a
    /// kernel submitter's buffer is the OS's own, never this emulated memory).
    fn wait_freed<'a>(
        &'a self,
        f: LockGuard<'a, Frames>,
        pages: usize,
    ) -> Result<LockGuard<'a, Frames>, MemoryError> {
        #[cfg(feature = "std")]
        {
            let _ = pages;
            if access_layer::verbs::verifier::may_block("SystemMemory::alloc").is_err() {
                return Err(MemoryError::AtDispatch);
            }
            Ok(self.freed.wait(f).unwrap_or_else(PoisonError::into_inner))
        }
        #[cfg(not(feature = "std"))]
        {
            Err(MemoryError::Exhausted {
                pages,
                free: f.free,
            })
        }
    }

    /// A buffer holding a copy of `bytes` ([`SystemMemory::alloc`]'s rules; every byte is
    /// written, so nothing is zeroed first).
    pub fn alloc_from(self: &Arc<Self>, bytes: &[u8]) -> Result<DataBuffer, MemoryError> {
        let b = self.alloc_with(bytes.len(), false)?;
        b.write(0, bytes)?;
        Ok(b)
    }

    fn buffer(self: &Arc<Self>, first: usize, pages: usize, len: usize, zero: bool) -> DataBuffer {
        if zero {
            // In range: the frames are ours.
            let _ = self.block.fill(first * PAGE_SIZE, pages * PAGE_SIZE, 0);
        }
        DataBuffer {
            memory: Some(Arc::clone(self)),
            first,
            pages,
            len,
        }
    }

    fn give(&self, first: usize, pages: usize) {
        self.frames().give(first, pages);
        #[cfg(feature = "std")]
        self.freed.notify_all();
    }
}

/// A request's data buffer: a run of pages of [`SystemMemory`], in descending frame order
/// (see the module contract). Its pages go back when it drops.
pub struct DataBuffer {
    memory: Option<Arc<SystemMemory>>,
    first: usize,
    pages: usize,
    len: usize,
}

impl core::fmt::Debug for DataBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DataBuffer")
            .field("len", &self.len)
            .field("first_frame", &self.first)
            .field("pages", &self.pages)
            .finish()
    }
}

impl Default for DataBuffer {
    fn default() -> Self {
        DataBuffer::empty()
    }
}

impl Drop for DataBuffer {
    fn drop(&mut self) {
        if let Some(m) = self.memory.take() {
            m.give(self.first, self.pages);
        }
    }
}

impl DataBuffer {
    /// No buffer (a request without data).
    pub fn empty() -> DataBuffer {
        DataBuffer {
            memory: None,
            first: 0,
            pages: 0,
            len: 0,
        }
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory it lives in (`None` for an empty buffer).
    pub fn memory(&self) -> Option<&Arc<SystemMemory>> {
        self.memory.as_ref()
    }

    /// Pages (scatter-gather elements) it spans.
    pub fn page_count(&self) -> usize {
        self.pages
    }

    /// Its scatter-gather list (computed; valid while the buffer lives).
    pub fn sg_list(&self) -> ScatterGatherList {
        ScatterGatherList::new(self.first, self.pages, self.len)
    }

    /// Element `i`: its physical address and length in bytes.
    pub fn element(&self, i: usize) -> Option<(u64, usize)> {
        self.sg_list()
            .element(i)
            .map(|e| (e.physical_address, e.length as usize))
    }

    /// Copies bytes `offset..offset + out.len()` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), MemoryError> {
        let sg = self.sg_list();
        let pieces = sg
            .pieces(offset, out.len())
            .map_err(|_| self.out_of(offset, out.len()))?;
        let Some(m) = &self.memory else {
            return Ok(());
        };
        for (at, phys, n) in pieces {
            let dst = &mut out[at - offset..at - offset + n];
            m.block
                .read(phys as usize, dst)
                .map_err(|_| self.out_of(at, n))?;
        }
        Ok(())
    }

    /// Copies `data` into the buffer at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), MemoryError> {
        let sg = self.sg_list();
        let pieces = sg
            .pieces(offset, data.len())
            .map_err(|_| self.out_of(offset, data.len()))?;
        let Some(m) = &self.memory else {
            return Ok(());
        };
        for (at, phys, n) in pieces {
            let src = &data[at - offset..at - offset + n];
            m.block
                .write(phys as usize, src)
                .map_err(|_| self.out_of(at, n))?;
        }
        Ok(())
    }

    fn out_of(&self, offset: usize, len: usize) -> MemoryError {
        MemoryError::OutOfBuffer {
            offset,
            len,
            total: self.len,
        }
    }

    /// The bytes, copied out.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len];
        // In range by construction.
        let _ = self.read(0, &mut v);
        v
    }
}

impl PartialEq<[u8]> for DataBuffer {
    fn eq(&self, other: &[u8]) -> bool {
        self.len == other.len() && self.to_vec() == other
    }
}

impl PartialEq<Vec<u8>> for DataBuffer {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_descend_and_data_round_trips() {
        let m = SystemMemory::new(8);
        let b = m.alloc(2 * PAGE_SIZE + 100).expect("fits");
        assert_eq!(b.page_count(), 3);
        let (p0, l0) = b.element(0).expect("element 0");
        let (p1, _) = b.element(1).expect("element 1");
        let (_, l2) = b.element(2).expect("element 2");
        assert_eq!((l0, l2), (PAGE_SIZE, 100));
        assert_ne!(p0 + PAGE_SIZE as u64, p1, "elements are not contiguous");
        let data: Vec<u8> = (0..b.len()).map(|i| (i % 251) as u8).collect();
        b.write(0, &data).expect("in range");
        assert!(b == data);
        let mut mid = [0u8; 20];
        b.read(PAGE_SIZE - 10, &mut mid).expect("crosses a page");
        assert_eq!(mid[..], data[PAGE_SIZE - 10..PAGE_SIZE + 10]);
        assert!(b.read(b.len() - 1, &mut [0; 2]).is_err(), "past the end");
        assert_eq!(m.free_pages(), 5);
        drop(b);
        assert_eq!(m.free_pages(), 8);
    }

    #[test]
    fn exhaustion_is_reported_and_freed_pages_are_zeroed() {
        let m = SystemMemory::new(4);
        let a = m.try_alloc(3 * PAGE_SIZE).expect("fits");
        a.write(0, &[0xee; 3 * PAGE_SIZE]).expect("in range");
        assert_eq!(
            m.try_alloc(2 * PAGE_SIZE).map(|_| ()),
            Err(MemoryError::Exhausted { pages: 2, free: 1 })
        );
        assert!(matches!(
            m.try_alloc(5 * PAGE_SIZE),
            Err(MemoryError::TooLarge { .. })
        ));
        drop(a);
        let b = m.try_alloc(4 * PAGE_SIZE).expect("all free again");
        assert!(b.to_vec().iter().all(|&x| x == 0), "no stale data");
        assert!(m.try_alloc(0).expect("empty").is_empty());
        b.write(0, &[0x5a; 4 * PAGE_SIZE]).expect("in range");
        drop(b);
        // A read's buffer is not zeroed first (the device fills it).
        let r = m.alloc_for_read(4 * PAGE_SIZE).expect("fits");
        assert!(r.to_vec().iter().all(|&x| x == 0x5a), "left as it was");
    }

    #[test]
    fn a_waiting_alloc_wakes_when_pages_free() {
        let m = SystemMemory::new(2);
        let a = m.alloc(2 * PAGE_SIZE).expect("fits");
        let m2 = Arc::clone(&m);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(m2.alloc(PAGE_SIZE).map(|b| b.len()));
        });
        // Nothing while every page is held (it waits, it does not fail or spin out)...
        assert!(
            rx.recv_timeout(core::time::Duration::from_millis(50))
                .is_err(),
            "no pages: the allocation waits"
        );
        // ...and the page given back wakes it.
        drop(a);
        let got = rx.recv_timeout(core::time::Duration::from_secs(5));
        assert_eq!(got, Ok(Ok(PAGE_SIZE)), "woken by the free");
    }

    #[test]
    fn runs_are_found_around_holes() {
        let m = SystemMemory::new(130);
        let bufs: Vec<_> = (0..130).map(|_| m.try_alloc(1).expect("fits")).collect();
        // Free every even frame but 70, and frame 71: the only free run of two is 71-72.
        let mut kept = Vec::new();
        for (i, b) in bufs.into_iter().enumerate() {
            if (i % 2 == 0 && i != 70) || i == 71 {
                drop(b);
            } else {
                kept.push(b);
            }
        }
        assert_eq!(m.free_pages(), 65);
        assert!(matches!(
            m.try_alloc(3 * PAGE_SIZE),
            Err(MemoryError::Exhausted { pages: 3, free: 65 })
        ));
        let two = m.try_alloc(2 * PAGE_SIZE).expect("the gap at 71");
        assert_eq!(two.element(0).map(|e| e.0), Some(72 * PAGE_SIZE as u64));
        assert_eq!(two.element(1).map(|e| e.0), Some(71 * PAGE_SIZE as u64));
        assert_eq!(m.free_pages(), 63);
    }
}
