//! The one error enum of memory registration: pool exhaustion (busy, retry later), buffers
//! that cannot be described under the page rules, misuse of a mapping, and unusable
//! configurations (the strategies make no verb calls: their callers do).

use ib_verbs::mr::MrKey;
use thiserror::Error;

/// Why a buffer could not be mapped or unmapped.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RegError {
    /// Not enough free fast-registration regions now; the caller reports busy and retries
    /// once earlier commands have been unmapped and their invalidations completed.
    #[error("busy: the command needs {needed} memory regions and {free} are free")]
    Busy {
        /// Regions the command needs.
        needed: usize,
        /// Regions free now.
        free: usize,
    },
    /// A scatter-gather segment of zero bytes.
    #[error("segment {index} is empty")]
    EmptySegment {
        /// Position in the list.
        index: usize,
    },
    /// A segment reaches outside its memory block.
    #[error("segment {index} ({offset:#x}+{len:#x}) is outside a block of {block_len:#x} bytes")]
    SegmentOutOfBlock {
        /// Position in the list.
        index: usize,
        /// Offset in the block.
        offset: u64,
        /// Length.
        len: u32,
        /// The block's length.
        block_len: usize,
    },
    /// A page the region needs does not lie wholly inside its block (the HCA maps whole
    /// pages).
    #[error("page at {offset:#x} (size {page_size:#x}) is outside a block of {block_len:#x}")]
    PageOutOfBlock {
        /// Offset of the page's start in the block.
        offset: u64,
        /// Page size.
        page_size: u64,
        /// The block's length.
        block_len: usize,
    },
    /// The buffer is longer than an SRP descriptor can say (32 bits).
    #[error("buffer of {total} bytes is longer than 4 GiB - 1")]
    TooLong {
        /// Sum of the segment lengths.
        total: u64,
    },
    /// The buffer needs more regions than a command may use; retrying cannot help.
    #[error("buffer needs {regions} memory regions, a command may use {max}")]
    TooFragmented {
        /// Regions needed.
        regions: usize,
        /// The per-command limit.
        max: usize,
    },
    /// The all-memory strategy was given a segment outside the block it registered.
    #[error("segment {index} is not in the block the all-memory region covers")]
    ForeignBlock {
        /// Position in the list.
        index: usize,
    },
    /// A handle names a region that is not registered for it (already unmapped).
    #[error("memory region {key} is not mapped for this handle")]
    StaleHandle {
        /// The key the handle carried.
        key: MrKey,
    },
    /// A strategy's configuration is unusable.
    #[error("bad registration configuration: {0}")]
    BadConfig(&'static str),
    /// The caller's allocation of a region failed while a pool was built.
    #[error("allocating a memory region: {0}")]
    Allocation(alloc::string::String),
}
