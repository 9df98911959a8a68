//! The path MTU: the largest payload one packet of a connection carries.

wirekit::open_enum! {
    /// The IB path MTU code (IBTA 9.7.5.1.4 `enum ib_mtu`): the largest payload of one packet.
    pub enum PathMtu(u8) {
        /// 256 bytes.
        Mtu256 = 1,
        /// 512 bytes.
        Mtu512 = 2,
        /// 1024 bytes (what rxe picks on a 1500-byte Ethernet).
        Mtu1024 = 3,
        /// 2048 bytes.
        Mtu2048 = 4,
        /// 4096 bytes (rxe on a 9000-byte Ethernet).
        Mtu4096 = 5,
    }
}

impl PathMtu {
    /// The MTU in bytes; `None` for an unknown code.
    pub fn bytes(self) -> Option<usize> {
        match self {
            PathMtu::Mtu256 => Some(256),
            PathMtu::Mtu512 => Some(512),
            PathMtu::Mtu1024 => Some(1024),
            PathMtu::Mtu2048 => Some(2048),
            PathMtu::Mtu4096 => Some(4096),
            PathMtu::Unknown(_) => None,
        }
    }

    /// The largest MTU that fits a link MTU of `link_mtu_bytes`, leaving rxe's 80 bytes for
    /// headers (`RXE_MAX_HDR_LENGTH`); `None` below 256 + 80.
    pub fn for_link_mtu(link_mtu_bytes: usize) -> Option<Self> {
        let room = link_mtu_bytes.checked_sub(80)?;
        [
            PathMtu::Mtu4096,
            PathMtu::Mtu2048,
            PathMtu::Mtu1024,
            PathMtu::Mtu512,
            PathMtu::Mtu256,
        ]
        .into_iter()
        .find(|m| m.bytes().is_some_and(|b| b <= room))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_mtu_codes() {
        assert_eq!(PathMtu::from(3).bytes(), Some(1024));
        assert_eq!(PathMtu::from(5).bytes(), Some(4096));
        assert_eq!(PathMtu::from(6).bytes(), None);
        assert_eq!(PathMtu::for_link_mtu(1500), Some(PathMtu::Mtu1024));
        assert_eq!(PathMtu::for_link_mtu(9000), Some(PathMtu::Mtu4096));
        assert_eq!(PathMtu::for_link_mtu(300), None);
    }
}
