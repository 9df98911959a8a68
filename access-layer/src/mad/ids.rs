//! Identities and code points that several management classes share.

/// A 64-bit service ID (CM REQ, SA PathRecord, DM ServiceEntries). RDMA-CM IDs are built by
/// [`ServiceId::rdma_ip`] (in [`crate::mad::cm::cma`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ServiceId(pub u64);

/// A 32-bit CM communication ID (Local/RemoteCommID; IBTA Vol1 12.6).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CommId(pub u32);

/// A 64-bit MAD transaction ID. Linux puts the agent's `hi_tid` in the upper 32 bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Tid(pub u64);

wirekit::open_enum! {
    /// Path MTU code (IBTA Vol1 table 205 "MTU"; Linux `enum ib_mtu`), 4 bits in CM REQ,
    /// 6 bits in PathRecord.
    pub enum Mtu(u8) {
        /// 256 bytes.
        Mtu256 = 1,
        /// 512 bytes.
        Mtu512 = 2,
        /// 1024 bytes.
        Mtu1024 = 3,
        /// 2048 bytes.
        Mtu2048 = 4,
        /// 4096 bytes.
        Mtu4096 = 5,
    }
}

impl Mtu {
    /// The MTU in bytes, if the code is known.
    pub fn bytes(self) -> Option<u32> {
        match self {
            Mtu::Mtu256 => Some(256),
            Mtu::Mtu512 => Some(512),
            Mtu::Mtu1024 => Some(1024),
            Mtu::Mtu2048 => Some(2048),
            Mtu::Mtu4096 => Some(4096),
            Mtu::Unknown(_) => None,
        }
    }
}

wirekit::debug_as_hex!(ServiceId, CommId, Tid);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_codes_follow_ib_mtu() {
        assert_eq!(Mtu::from(1u8), Mtu::Mtu256);
        assert_eq!(Mtu::from(5u8), Mtu::Mtu4096);
        assert_eq!(Mtu::Mtu1024.bytes(), Some(1024));
        assert_eq!(Mtu::from(6u8).bytes(), None);
    }
}
