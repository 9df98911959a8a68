//! How an LU's logical blocks sit on the medium below it, as READ CAPACITY(16) (LOGICAL
//! BLOCKS PER PHYSICAL BLOCK EXPONENT, LOWEST ALIGNED LBA) and VPD B0h (OPTIMAL TRANSFER
//! LENGTH GRANULARITY, OPTIMAL UNMAP GRANULARITY, UNMAP GRANULARITY ALIGNMENT) report it
//! (SBC-4 5.20.2, 6.6.4). The appliance fills [`Alignment`] from a block device's queue
//! limits or a file's filesystem block (`appliance/geometry.rs`).

use super::LogicalUnit;

/// Where the medium's physical blocks and unmap units start, and how large an unmap unit
/// is, in the LU's logical blocks. The default: both aligned at LBA 0, the default unmap
/// granularity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Alignment {
    /// LOWEST ALIGNED LBA: the first LBA that starts a physical block (a partition that
    /// does not start on one; Linux's `alignment_offset`). Less than a physical block.
    pub lowest_aligned_lba: u16,
    /// OPTIMAL UNMAP GRANULARITY in logical blocks (a device's `discard_granularity`, a
    /// file's filesystem block); `None`: a physical block, at least 4 KiB.
    pub unmap_granularity_blocks: Option<u32>,
    /// UNMAP GRANULARITY ALIGNMENT in logical blocks (a device's `discard_alignment`).
    pub unmap_alignment_blocks: u32,
    /// The unit the medium writes whole, in logical blocks, when it is smaller than the
    /// reported physical block (a `physical_block_size` configured above the device's, or
    /// a file's filesystem block): what WRITE ATOMIC may cover. `None`: the physical block.
    pub atomic_blocks: Option<u32>,
}

impl LogicalUnit {
    /// Physical blocks hold this many logical blocks (a power of two).
    pub(crate) fn blocks_per_physical(&self) -> u32 {
        self.physical_block_bytes / self.block_bytes()
    }

    /// The unit a power loss cannot tear on a file or device, in logical blocks: the
    /// medium's own (see [`Alignment::atomic_blocks`]), at most a physical block.
    pub(crate) fn medium_atomic_blocks(&self) -> u32 {
        let per = self.blocks_per_physical();
        self.alignment
            .atomic_blocks
            .map_or(per, |a| a.clamp(1, per))
    }

    /// LOWEST ALIGNED LBA (14 bits in READ CAPACITY(16)).
    pub(crate) fn lowest_aligned_lba(&self) -> u16 {
        self.alignment.lowest_aligned_lba & 0x3fff
    }

    /// OPTIMAL UNMAP GRANULARITY and UNMAP GRANULARITY ALIGNMENT in logical blocks. By
    /// default a physical block, at least 4 KiB (a hole is punched in whole filesystem
    /// blocks, the usual one being 4 KiB), aligned at LBA 0.
    pub(crate) fn unmap_granularity(&self) -> (u32, u32) {
        let default = (4096 / self.block_bytes()).max(self.blocks_per_physical());
        let g = self
            .alignment
            .unmap_granularity_blocks
            .unwrap_or(default)
            .max(1);
        (g, self.alignment.unmap_alignment_blocks % g)
    }
}
