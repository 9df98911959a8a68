//! The emulated machine's DMA-able memory: a block of pages the HCA can reach (through
//! fast-registration regions only — no region covers it otherwise).
//!
//! Contract: the port's SRB buffers are not HCA memory (they live in the SRB), so each
//! scatter-gather element is given one arena page, at the same offset within the page as
//! its physical address, and data moves between the SRB and its pages with the SRB's DMA
//! accessors (a write before registration, a read after the response). Pages are handed
//! out all-or-none and never block: exhaustion is `None` (the caller answers BUSY).
//! Consecutive hand-outs are deliberately not contiguous, so multi-page buffers exercise
//! page-list registration.

use hca::mem::MemBlock;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes per arena page (the port's page size).
pub(crate) const PAGE: usize = crate::port::PAGE_SIZE;

/// The arena: memory plus a free list of page indices.
#[derive(Debug)]
pub(crate) struct DmaArena {
    block: Arc<MemBlock>,
    free: Mutex<Vec<usize>>,
}

impl DmaArena {
    /// An arena of `pages` pages; the free list interleaves halves so neighbours differ.
    pub(crate) fn new(pages: usize) -> DmaArena {
        let half = pages / 2;
        let mut free: Vec<usize> = (0..half)
            .flat_map(|i| [i, half + i])
            .chain(2 * half..pages)
            .collect();
        free.reverse();
        DmaArena {
            block: MemBlock::new(pages * PAGE),
            free: Mutex::new(free),
        }
    }

    /// The memory.
    pub(crate) fn block(&self) -> &Arc<MemBlock> {
        &self.block
    }

    /// `n` pages, or `None` (nothing taken).
    pub(crate) fn alloc(&self, n: usize) -> Option<Vec<usize>> {
        let mut f = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if f.len() < n {
            return None;
        }
        let at = f.len() - n;
        Some(f.split_off(at))
    }

    /// Gives pages back.
    pub(crate) fn free(&self, pages: &[usize]) {
        if pages.is_empty() {
            return;
        }
        let mut f = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        f.extend_from_slice(pages);
    }

    /// Free pages now.
    pub(crate) fn available(&self) -> usize {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}
