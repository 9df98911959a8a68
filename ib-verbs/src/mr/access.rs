//! Access rights of a memory region, with the values of Linux `ib_access_flags`.

bitflags::bitflags! {
    /// What a memory region allows beyond local reads, which are always allowed.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Access: u32 {
        /// The local HCA may write (receive buffers, RDMA READ responses land here).
        const LOCAL_WRITE = 1;
        /// A peer may RDMA WRITE.
        const REMOTE_WRITE = 2;
        /// A peer may RDMA READ.
        const REMOTE_READ = 4;
        /// A peer may issue atomics.
        const REMOTE_ATOMIC = 8;
        /// Memory windows may be bound over the region.
        const MW_BIND = 16;
    }
}

impl Access {
    /// The rights a peer can exercise; an MR gets an R_Key only if it has one of them.
    pub const REMOTE: Access = Access::REMOTE_WRITE
        .union(Access::REMOTE_READ)
        .union(Access::REMOTE_ATOMIC);

    /// Whether any remote right is present.
    pub fn is_remote(self) -> bool {
        self.intersects(Access::REMOTE)
    }

    /// The registration rule: remote write or atomic requires local write (IBTA; Linux
    /// `ib_check_mr_access`).
    pub fn is_valid_for_registration(self) -> bool {
        let needs_local = Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        !self.intersects(needs_local) || self.contains(Access::LOCAL_WRITE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_ib_verbs() {
        assert_eq!(Access::LOCAL_WRITE.bits(), 1);
        assert_eq!(Access::REMOTE_WRITE.bits(), 2);
        assert_eq!(Access::REMOTE_READ.bits(), 4);
        assert_eq!(Access::REMOTE_ATOMIC.bits(), 8);
        assert_eq!(Access::MW_BIND.bits(), 16);
    }

    #[test]
    fn remote_write_and_atomic_need_local_write() {
        assert!(Access::REMOTE_READ.is_valid_for_registration());
        assert!(Access::empty().is_valid_for_registration());
        assert!(!Access::REMOTE_WRITE.is_valid_for_registration());
        assert!(!Access::REMOTE_ATOMIC.is_valid_for_registration());
        assert!((Access::REMOTE_WRITE | Access::LOCAL_WRITE).is_valid_for_registration());
        assert!(Access::REMOTE_READ.is_remote());
        assert!(!(Access::LOCAL_WRITE | Access::MW_BIND).is_remote());
    }
}
