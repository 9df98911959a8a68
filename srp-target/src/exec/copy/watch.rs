//! Watching a source range while it is copied (or while a token represents it): every
//! medium-modifying command notes the range it is about to change
//! ([`LogicalUnit::note_write`]), and a watch over an overlapping range is marked touched.
//!
//! A copy that finds its source touched read a mix of old and new data, so it copies again
//! with the source's writers held off (`xcopy.rs`): the copy is always of one point in time.
//! A token whose range is touched is revoked (`token.rs`).
//!
//! Registration waits for the writes in flight (the LU's order, exclusive, for an instant),
//! so a write either finished before the watch began or is noted by it. With no watch on
//! the LU, noting costs one atomic load.

use super::super::LogicalUnit;
use scsi::Lba;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One watched range.
#[derive(Debug)]
struct Watch {
    id: u64,
    lba: u64,
    blocks: u64,
    touched: Arc<AtomicBool>,
}

/// A LU's watched ranges.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    count: AtomicUsize,
    next: AtomicU64,
    list: Mutex<Vec<Watch>>,
}

/// A command-scoped watch: removed when dropped.
pub(crate) struct WatchGuard<'a> {
    lu: &'a LogicalUnit,
    id: u64,
    touched: Arc<AtomicBool>,
}

impl WatchGuard<'_> {
    /// Whether a write overlapped the range since the watch began.
    pub(crate) fn touched(&self) -> bool {
        self.touched.load(Ordering::Acquire)
    }
}

impl Drop for WatchGuard<'_> {
    fn drop(&mut self) {
        self.lu.unwatch(self.id);
    }
}

fn overlaps(a: u64, an: u64, b: u64, bn: u64) -> bool {
    a < b.saturating_add(bn) && b < a.saturating_add(an)
}

impl LogicalUnit {
    /// A medium-modifying command is about to change `blocks` blocks at `lba` (called
    /// with the LU's order held shared, or exclusive).
    pub(crate) fn note_write(&self, lba: Lba, blocks: u64) {
        if self.watches.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let list = self
            .watches
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for w in list
            .iter()
            .filter(|w| overlaps(w.lba, w.blocks, lba.0, blocks))
        {
            w.touched.store(true, Ordering::Release);
        }
    }

    /// Starts watching `blocks` blocks at `lba`: its id and its touched flag.
    pub(crate) fn watch_range(&self, lba: Lba, blocks: u64) -> (u64, Arc<AtomicBool>) {
        let touched = Arc::new(AtomicBool::new(false));
        let id = self.watches.next.fetch_add(1, Ordering::Relaxed);
        // Writes in flight finish first: each is then before the watch, or noted by it.
        let _quiet = self.atomic_order();
        let mut list = self
            .watches
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        list.push(Watch {
            id,
            lba: lba.0,
            blocks,
            touched: touched.clone(),
        });
        self.watches.count.store(list.len(), Ordering::Release);
        (id, touched)
    }

    /// Ends watch `id`.
    pub(crate) fn unwatch(&self, id: u64) {
        let mut list = self
            .watches
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        list.retain(|w| w.id != id);
        self.watches.count.store(list.len(), Ordering::Release);
    }

    /// A watch for the duration of one command.
    pub(crate) fn watch(&self, lba: Lba, blocks: u64) -> WatchGuard<'_> {
        let (id, touched) = self.watch_range(lba, blocks);
        WatchGuard {
            lu: self,
            id,
            touched,
        }
    }

    /// Ranges watched now (tests, counters).
    pub fn watched_ranges(&self) -> usize {
        self.watches.count.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_half_open() {
        assert!(overlaps(0, 8, 7, 1));
        assert!(!overlaps(0, 8, 8, 1));
        assert!(!overlaps(8, 1, 0, 8));
        assert!(overlaps(5, 1, 0, 8));
        assert!(!overlaps(0, 0, 0, 8));
        assert!(overlaps(u64::MAX - 1, 10, u64::MAX - 1, 1));
    }
}
