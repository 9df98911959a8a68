//! Block units as types: a logical block address and a count of logical blocks.
//!
//! `Lba` is 64 bits because READ(16) and READ CAPACITY(16) carry 64-bit addresses.
//! `BlockCount` is 32 bits because every SBC TRANSFER LENGTH / NUMBER OF LOGICAL BLOCKS /
//! VERIFICATION LENGTH field is at most 32 bits (READ(12)/(16)); a device's capacity is not a
//! `BlockCount` but the last LBA (READ CAPACITY's RETURNED LOGICAL BLOCK ADDRESS). A count of
//! blocks times a block size in bytes always fits a `u64`, so [`BlockCount::bytes`] cannot fail.

use core::fmt;

/// A logical block address (SBC-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Lba(pub u64);

/// A number of logical blocks, as in a CDB's TRANSFER LENGTH field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct BlockCount(pub u32);

impl Lba {
    /// The address `n` blocks past this one, or `None` on 64-bit overflow.
    pub fn checked_add(self, n: BlockCount) -> Option<Lba> {
        self.0.checked_add(u64::from(n.0)).map(Lba)
    }

    /// The last address of the range of `n` blocks starting here, or `None` when the range is
    /// empty or runs past `u64::MAX`.
    pub fn last_of(self, n: BlockCount) -> Option<Lba> {
        let n = n.0.checked_sub(1)?;
        self.0.checked_add(u64::from(n)).map(Lba)
    }

    /// Whether the range of `n` blocks starting here lies within a medium whose last block is
    /// `last` (READ CAPACITY's RETURNED LOGICAL BLOCK ADDRESS). An empty range is within the
    /// medium when its start is at most one past `last`, as SBC-3 compares
    /// `lba + transfer length` with the capacity. `false` means LBA OUT OF RANGE.
    pub fn range_within(self, n: BlockCount, last: Lba) -> bool {
        // u128: lba + n and last + 1 can both exceed u64.
        u128::from(self.0) + u128::from(n.0) <= u128::from(last.0) + 1
    }
}

impl BlockCount {
    /// The length in bytes of this many blocks of `block_size_bytes` each (never overflows:
    /// both factors are 32-bit).
    pub fn bytes(self, block_size_bytes: u32) -> u64 {
        u64::from(self.0) * u64::from(block_size_bytes)
    }

    /// Whether the count is zero (SBC: a zero transfer length is not an error, except READ(6)
    /// where it means 256).
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for Lba {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LBA {:#x}", self.0)
    }
}

impl fmt::Display for BlockCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} blocks", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_add_overflows_to_none() {
        assert_eq!(Lba(10).checked_add(BlockCount(5)), Some(Lba(15)));
        assert_eq!(
            Lba(u64::MAX).checked_add(BlockCount(0)),
            Some(Lba(u64::MAX))
        );
        assert_eq!(Lba(u64::MAX).checked_add(BlockCount(1)), None);
    }

    #[test]
    fn last_of_range() {
        assert_eq!(Lba(10).last_of(BlockCount(1)), Some(Lba(10)));
        assert_eq!(Lba(10).last_of(BlockCount(8)), Some(Lba(17)));
        assert_eq!(Lba(10).last_of(BlockCount(0)), None);
        assert_eq!(Lba(u64::MAX).last_of(BlockCount(1)), Some(Lba(u64::MAX)));
        assert_eq!(Lba(u64::MAX).last_of(BlockCount(2)), None);
    }

    #[test]
    fn range_within_capacity() {
        let last = Lba(99); // 100 blocks
        assert!(Lba(0).range_within(BlockCount(100), last));
        assert!(Lba(99).range_within(BlockCount(1), last));
        assert!(!Lba(99).range_within(BlockCount(2), last));
        assert!(Lba(100).range_within(BlockCount(0), last));
        assert!(!Lba(101).range_within(BlockCount(0), last));
        assert!(Lba(u64::MAX).range_within(BlockCount(1), Lba(u64::MAX)));
        assert!(!Lba(u64::MAX).range_within(BlockCount(u32::MAX), Lba(u64::MAX)));
    }

    #[test]
    fn bytes_and_display() {
        assert_eq!(BlockCount(u32::MAX).bytes(u32::MAX), 0xffff_fffe_0000_0001);
        assert_eq!(BlockCount(8).bytes(512), 4096);
        assert!(BlockCount(0).is_zero());
        assert_eq!(Lba(0x10).to_string(), "LBA 0x10");
        assert_eq!(BlockCount(8).to_string(), "8 blocks");
    }
}
