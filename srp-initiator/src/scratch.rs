//! Spare lists for the data path, so a round allocates no list: with `std` each thread
//! keeps its own (`thread_local!`); a kernel has no thread-local storage, so without `std`
//! a few spares sit in a shared [`Stash`] under a spin lock held for a push or a pop.

#[cfg(not(feature = "std"))]
use alloc::vec::Vec;
#[cfg(not(feature = "std"))]
use ib_verbs::sync::Lock;

/// Spare lists a stash keeps at most (about one per processor in flight).
#[cfg(not(feature = "std"))]
const STASH_DEPTH: usize = 8;

/// Emptied lists, kept for reuse.
#[cfg(not(feature = "std"))]
pub(crate) struct Stash<T> {
    lists: Lock<Vec<Vec<T>>>,
}

#[cfg(not(feature = "std"))]
impl<T> Stash<T> {
    /// Empty.
    pub(crate) const fn new() -> Stash<T> {
        Stash {
            lists: Lock::new(Vec::new()),
        }
    }

    /// An empty list, with memory from an earlier use when one is spare.
    pub(crate) fn take(&self) -> Vec<T> {
        self.lists.lock().pop().unwrap_or_default()
    }

    /// Gives `list` back (emptied), unless the stash is full.
    pub(crate) fn give(&self, mut list: Vec<T>) {
        list.clear();
        let mut lists = self.lists.lock();
        if lists.len() < STASH_DEPTH {
            lists.push(list);
        }
    }
}
