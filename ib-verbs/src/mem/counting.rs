//! [`CountingAlloc`]: the system allocator with a count of allocations, to prove what the
//! data path allocates per I/O (`srpctl bench disk` reports it; a test holds the line).
//!
//! Counting is off until [`counting`] turns it on, so a binary that installs the allocator
//! pays one relaxed load per allocation otherwise. Reallocations count as allocations (a
//! growing buffer is an allocation on the I/O path all the same).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

static ON: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting. Install with
/// `#[global_allocator] static A: ib_verbs::mem::CountingAlloc = ib_verbs::mem::CountingAlloc;`.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

/// Allocations counted so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AllocCount {
    /// Calls to allocate or reallocate.
    pub allocations: u64,
    /// Bytes asked for by them.
    pub bytes: u64,
}

impl AllocCount {
    /// What was counted between `earlier` and this count.
    pub fn since(self, earlier: AllocCount) -> AllocCount {
        AllocCount {
            allocations: self.allocations.saturating_sub(earlier.allocations),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }
}

/// Turns counting on or off (process-wide).
pub fn counting(on: bool) {
    ON.store(on, Relaxed);
}

/// The counts so far (zero unless [`CountingAlloc`] is the global allocator and counting is on).
pub fn allocations() -> AllocCount {
    AllocCount {
        allocations: ALLOCS.load(Relaxed),
        bytes: BYTES.load(Relaxed),
    }
}

fn count(size: usize) {
    if ON.load(Relaxed) {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(size as u64, Relaxed);
    }
}

#[allow(unsafe_code)]
// SAFETY: every method forwards to `System` with the caller's own arguments, so `System`'s
// guarantees are this allocator's; the counters are atomics and never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
