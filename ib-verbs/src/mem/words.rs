//! A block's backing store: zeroed `AtomicU64` words starting on a page boundary.
//!
//! Page alignment is what a device registration needs: the kernel's `ibv_reg_mr` requires
//! a region's start and its I/O address to share their offset within a page (Linux
//! `ib_uverbs_reg_mr`: `(start & ~PAGE_MASK) != (hca_va & ~PAGE_MASK)` is `EINVAL`), and
//! every consumer picks page-aligned I/O addresses. The system allocator hands large
//! allocations out 16 bytes into a page, so the words are allocated with an explicit
//! layout and freed with the same one (a `Box<[AtomicU64]>` would free with the slice's own
//! alignment: undefined behaviour).

use alloc::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;

/// The alignment of every block's first byte.
pub const BLOCK_ALIGN: usize = 4096;

/// `n` zeroed words, page-aligned.
pub(super) struct Words {
    ptr: NonNull<AtomicU64>,
    n: usize,
}

// SAFETY: `Words` owns its allocation outright (as a `Box<[AtomicU64]>` would), and
// `AtomicU64` is `Send + Sync`: sharing or moving the words between threads is sound.
#[allow(unsafe_code)]
unsafe impl Send for Words {}
// SAFETY: as above; `&Words` only gives out `&[AtomicU64]`.
#[allow(unsafe_code)]
unsafe impl Sync for Words {}

impl Words {
    fn layout(n: usize) -> Layout {
        Layout::array::<AtomicU64>(n)
            .and_then(|l| l.align_to(BLOCK_ALIGN))
            .unwrap_or_else(|_| panic!("a memory block of {n} words is larger than memory"))
    }

    /// `n` zeroed words, the first on a [`BLOCK_ALIGN`] boundary.
    pub(super) fn zeroed(n: usize) -> Words {
        if n == 0 {
            return Words {
                ptr: NonNull::dangling(),
                n,
            };
        }
        let layout = Self::layout(n);
        // SAFETY: the layout has a non-zero size (`n > 0` words of 8 bytes).
        #[allow(unsafe_code)]
        let p = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p.cast::<AtomicU64>()) else {
            handle_alloc_error(layout)
        };
        Words { ptr, n }
    }
}

impl Deref for Words {
    type Target = [AtomicU64];

    fn deref(&self) -> &[AtomicU64] {
        // SAFETY: `ptr` points at `n` initialised words (all-zero bytes are a valid
        // `AtomicU64`) that live until `drop`, or is dangling and aligned with `n == 0`;
        // only shared references are ever made (mutation goes through the atomics).
        #[allow(unsafe_code)]
        unsafe {
            core::slice::from_raw_parts(self.ptr.as_ptr(), self.n)
        }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if self.n > 0 {
            // SAFETY: allocated in `zeroed` with exactly this layout, freed once.
            #[allow(unsafe_code)]
            unsafe {
                dealloc(self.ptr.as_ptr().cast(), Self::layout(self.n))
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::Ordering::Relaxed;

    #[test]
    fn words_are_zeroed_and_page_aligned_at_every_size() {
        for n in [0, 1, 7, 512, 40_000] {
            let w = Words::zeroed(n);
            assert_eq!(w.len(), n);
            if n > 0 {
                assert_eq!(w.as_ptr() as usize % BLOCK_ALIGN, 0, "{n} words");
            }
            assert!(w.iter().all(|x| x.load(Relaxed) == 0));
        }
    }
}
