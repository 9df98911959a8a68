//! A lock over ranges of blocks.
//!
//! Contract: [`RangeLock::lock`] returns once no other guard covers any block of the requested
//! range, and the range stays exclusively held until the guard drops. Writers through a block
//! file take the blocks they touch, so a read-modify-write of an edge block never interleaves
//! with another write to that block. Ranges are few (one per in-flight write), so a list
//! scanned under one mutex is enough.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The ranges `[first, last]` (inclusive block numbers) currently held.
#[derive(Debug, Default)]
pub(crate) struct RangeLock {
    held: Mutex<Vec<(u64, u64)>>,
    released: Condvar,
}

/// Holds `[first, last]` until dropped.
#[derive(Debug)]
pub(crate) struct RangeGuard<'a> {
    lock: &'a RangeLock,
    range: (u64, u64),
}

impl RangeLock {
    /// Wait until `[first, last]` overlaps no held range, then hold it.
    pub(crate) fn lock(&self, first: u64, last: u64) -> RangeGuard<'_> {
        debug_assert!(first <= last);
        let mut held = self.held();
        while held.iter().any(|&(a, b)| a <= last && first <= b) {
            held = self
                .released
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        held.push((first, last));
        RangeGuard {
            lock: self,
            range: (first, last),
        }
    }

    // A panic while holding the mutex leaves the list consistent (push and remove are single
    // steps), so poisoning is ignored rather than spreading the panic to every writer.
    fn held(&self) -> MutexGuard<'_, Vec<(u64, u64)>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.lock.held();
        if let Some(i) = held.iter().position(|&r| r == self.range) {
            held.swap_remove(i);
        }
        debug_assert!(held.len() < 1 << 20, "range lock leak");
        drop(held);
        self.lock.released.notify_all();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn disjoint_ranges_do_not_wait() {
        let lock = RangeLock::default();
        let _a = lock.lock(0, 3);
        let _b = lock.lock(4, 7);
    }

    #[test]
    fn overlapping_range_waits_for_release() {
        let lock = Arc::new(RangeLock::default());
        let done = Arc::new(AtomicBool::new(false));
        let guard = lock.lock(2, 5);
        let t = {
            let (lock, done) = (lock.clone(), done.clone());
            std::thread::spawn(move || {
                let _g = lock.lock(5, 9);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "overlapping lock was granted");
        drop(guard);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
    }
}
