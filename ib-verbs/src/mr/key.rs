//! Memory keys: `index << 8 | variant`, as rxe and siw.
//!
//! The index names the table slot; the 8-bit variant (rxe's "key") changes on each fast
//! registration and on slot reuse, so a stale key stops matching.

use core::fmt;

use crate::ids::{Lkey, Rkey};

/// The largest MR index: keys have 24 index bits.
pub const MAX_MR_INDEX: u32 = 0x00ff_ffff;

/// The table slot of a memory region: the upper 24 bits of its keys. Index 0 is never used.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct MrIndex(pub u32);

/// A 32-bit L_Key or R_Key seen as `index << 8 | variant`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MrKey(pub u32);

impl MrKey {
    /// The key of `index` with `variant` in the low 8 bits (index bits above 24 are dropped).
    pub fn new(index: MrIndex, variant: u8) -> MrKey {
        MrKey(((index.0 & MAX_MR_INDEX) << 8) | u32::from(variant))
    }

    /// The table slot this key names.
    pub fn index(self) -> MrIndex {
        MrIndex(self.0 >> 8)
    }

    /// The low 8 bits.
    pub fn variant(self) -> u8 {
        self.0.to_le_bytes()[0]
    }

    /// The same index with another variant.
    pub fn with_variant(self, variant: u8) -> MrKey {
        MrKey((self.0 & !0xff) | u32::from(variant))
    }

    /// The same index with the variant incremented modulo 256 (Linux `ib_inc_rkey`).
    pub fn next_variant(self) -> MrKey {
        self.with_variant(self.variant().wrapping_add(1))
    }
}

impl fmt::Debug for MrKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MrKey({:#x})", self.0)
    }
}

impl fmt::Display for MrKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

impl From<u32> for MrKey {
    fn from(v: u32) -> Self {
        MrKey(v)
    }
}

impl From<Lkey> for MrKey {
    fn from(k: Lkey) -> Self {
        MrKey(k.0)
    }
}

impl From<Rkey> for MrKey {
    fn from(k: Rkey) -> Self {
        MrKey(k.0)
    }
}

impl From<MrKey> for Lkey {
    fn from(k: MrKey) -> Self {
        Lkey(k.0)
    }
}

impl From<MrKey> for Rkey {
    fn from(k: MrKey) -> Self {
        Rkey(k.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_variant() {
        let k = MrKey::new(MrIndex(0x12_3456), 0xfe);
        assert_eq!(k.0, 0x1234_56fe);
        assert_eq!(k.index(), MrIndex(0x12_3456));
        assert_eq!(k.variant(), 0xfe);
        assert_eq!(k.next_variant().0, 0x1234_56ff);
        assert_eq!(k.next_variant().next_variant().0, 0x1234_5600);
        assert_eq!(k.with_variant(7).0, 0x1234_5607);
        assert_eq!(MrKey::from(Rkey(5)), MrKey(5));
        assert_eq!(Lkey::from(MrKey(9)), Lkey(9));
    }
}
