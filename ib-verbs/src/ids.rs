//! InfiniBand identities as newtypes: GUIDs, GIDs, LIDs, P_Keys, Q_Keys, QPNs and PSNs.
//!
//! Keys ([`Rkey`], [`Lkey`]) are 32-bit. Each type carries the width rules of IBTA Vol 1 (QPN and PSN are 24-bit) so a value that
//! cannot exist on the wire cannot be built. Wire byte order is big-endian everywhere.

use alloc::borrow::ToOwned;
use alloc::string::String;
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::str::FromStr;

/// Errors building or parsing an identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// A 24-bit field (QPN, PSN) was given a value that does not fit.
    #[error("{what} {value:#x} does not fit in 24 bits")]
    Over24Bits {
        /// Which identity.
        what: &'static str,
        /// The offending value.
        value: u32,
    },
    /// A GUID string is not 16 hex digits (colons and a `0x` prefix allowed).
    #[error("not a GUID: {0:?} (want 16 hex digits, e.g. 0002:c903:0001:0a2b)")]
    BadGuid(
        /// The rejected text.
        String,
    ),
    /// A P_Key string is not 16 bits in hex, or names partition 0.
    #[error("not a P_Key: {0:?} (want 16 bits in hex, as 0x8001; partition not 0)")]
    BadPkey(
        /// The rejected text.
        String,
    ),
}

/// A 64-bit EUI-64 GUID (node, port, or I/O controller).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Guid(pub u64);

impl Guid {
    /// The GUID as 8 big-endian bytes, as it appears on the wire.
    pub fn to_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }

    /// A GUID from 8 big-endian wire bytes.
    pub fn from_bytes(b: [u8; 8]) -> Self {
        Guid(u64::from_be_bytes(b))
    }
}

/// `xxxx:xxxx:xxxx:xxxx`, the form LIO uses to name SRP target ports.
impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:04x}:{:04x}:{:04x}:{:04x}",
            (v >> 48) & 0xffff,
            (v >> 32) & 0xffff,
            (v >> 16) & 0xffff,
            v & 0xffff
        )
    }
}

/// Accepts `0002:c903:0001:0a2b`, `0002c90300010a2b` and `0x0002c90300010a2b`.
impl FromStr for Guid {
    type Err = IdError;

    /// Exactly 16 hex digits ([`parse_id64`] with `exact`).
    fn from_str(s: &str) -> Result<Self, IdError> {
        parse_id64(s, true)
            .map(Guid)
            .ok_or_else(|| IdError::BadGuid(s.to_owned()))
    }
}

/// The one parser of 64-bit identifiers in configuration files and on command lines
/// (GUIDs, identifier extensions, service IDs): hex digits, `0x` optional, colons allowed
/// anywhere (`0x0002c90300a1b2c3`, `0002:c903:00a1:b2c3`); `exact`: exactly 16 digits
/// (a GUID as written everywhere), else 1 to 16 (`initiator_ext = "0x0"`). `None`: not
/// such a number.
pub fn parse_id64(s: &str, exact: bool) -> Option<u64> {
    let t = s.trim();
    let body = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let mut value: u64 = 0;
    let mut digits = 0;
    for c in body.chars() {
        if c == ':' {
            continue;
        }
        let d = c.to_digit(16)?;
        digits += 1;
        if digits > 16 {
            return None;
        }
        value = (value << 4) | u64::from(d);
    }
    match digits {
        16 => Some(value),
        1..=15 if !exact => Some(value),
        _ => None,
    }
}

/// A 128-bit GID. On RoCEv2 it is the port's IP address (IPv4-mapped IPv6 for IPv4).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The GID of an IPv4 address: `::ffff:a.b.c.d` (RoCEv2 over IPv4).
    pub fn from_ipv4(addr: Ipv4Addr) -> Self {
        Gid(addr.to_ipv6_mapped().octets())
    }

    /// The GID of an IPv6 address: the address itself.
    pub fn from_ipv6(addr: Ipv6Addr) -> Self {
        Gid(addr.octets())
    }

    /// The GID of either address family.
    pub fn from_ip(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(a) => Self::from_ipv4(a),
            IpAddr::V6(a) => Self::from_ipv6(a),
        }
    }

    /// The IP address this GID names: IPv4 for an IPv4-mapped GID, IPv6 otherwise.
    pub fn to_ip(self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.0);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    /// The upper 64 bits (subnet prefix in IB terms).
    pub fn subnet_prefix(self) -> u64 {
        u64::from_be_bytes([
            self.0[0], self.0[1], self.0[2], self.0[3], self.0[4], self.0[5], self.0[6], self.0[7],
        ])
    }

    /// The lower 64 bits (the port GUID in IB terms).
    pub fn interface_id(self) -> Guid {
        Guid(u64::from_be_bytes([
            self.0[8], self.0[9], self.0[10], self.0[11], self.0[12], self.0[13], self.0[14],
            self.0[15],
        ]))
    }
}

/// Printed as an IPv6 address (`::ffff:127.0.0.2` for RoCEv2 over IPv4).
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Ipv6Addr::from(self.0), f)
    }
}

/// A 16-bit local identifier. RoCE has no LIDs; CM messages carry the permissive LID there.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Lid(pub u16);

impl Lid {
    /// The permissive LID, 0xFFFF (what Linux puts in CM REQ paths on RoCE).
    pub const PERMISSIVE: Lid = Lid(0xffff);
}

/// A 16-bit partition key; bit 15 is the full-membership bit.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PKey(pub u16);

impl PKey {
    /// The default partition, full member (0xFFFF).
    pub const DEFAULT: PKey = PKey(0xffff);

    /// Whether the full-membership bit is set.
    pub fn is_full_member(self) -> bool {
        self.0 & 0x8000 != 0
    }

    /// The partition, without the membership bit.
    pub fn base(self) -> u16 {
        self.0 & 0x7fff
    }

    /// Whether a packet carrying `self` may reach a QP holding `other` (IBTA 10.9.3): the
    /// same partition, a valid one (base 0 is not), and at least one of the two a full
    /// member — two limited members of a partition cannot talk to each other.
    pub fn matches(self, other: PKey) -> bool {
        self.base() == other.base()
            && self.base() != 0
            && (self.is_full_member() || other.is_full_member())
    }
}

/// A P_Key as configs write it: hex, `0x` optional (`"0x8001"`, `"ffff"`); the partition
/// (low 15 bits) must not be 0.
impl FromStr for PKey {
    type Err = IdError;

    fn from_str(text: &str) -> Result<Self, IdError> {
        let t = text.trim();
        let digits = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        match u16::from_str_radix(digits, 16) {
            Ok(v) if v & 0x7fff != 0 => Ok(PKey(v)),
            _ => Err(IdError::BadPkey(text.to_owned())),
        }
    }
}

impl Default for PKey {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A 32-bit queue key checked on UD receives.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct QKey(pub u32);

impl QKey {
    /// The well-known Q_Key of the GSI (QP1): 0x80010000.
    pub const GSI: QKey = QKey(0x8001_0000);
}

/// A remote key: names a memory region (or window) to a peer's RDMA READ/WRITE.
/// Format as rxe: `index << 8 | variant`, the low 8 bits rolled on each fast registration.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Rkey(pub u32);

/// A local key: names a memory region to the local HCA in scatter/gather entries.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Lkey(pub u32);

const MASK_24: u32 = 0x00ff_ffff;

/// A 24-bit queue pair number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Qpn(u32);

impl Qpn {
    /// QP0, the subnet management interface (unused on RoCE).
    pub const SMI: Qpn = Qpn(0);
    /// QP1, the general services interface that carries CM, SA and DM MADs.
    pub const GSI: Qpn = Qpn(1);

    /// A QPN, if `value` fits in 24 bits.
    pub fn new(value: u32) -> Result<Self, IdError> {
        if value > MASK_24 {
            return Err(IdError::Over24Bits { what: "QPN", value });
        }
        Ok(Qpn(value))
    }

    /// The low 24 bits of `value` (for fields that are 24 bits wide on the wire).
    pub fn from_wire(value: u32) -> Self {
        Qpn(value & MASK_24)
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

/// A 24-bit packet sequence number with modulo-2^24 arithmetic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// A PSN, if `value` fits in 24 bits.
    pub fn new(value: u32) -> Result<Self, IdError> {
        if value > MASK_24 {
            return Err(IdError::Over24Bits { what: "PSN", value });
        }
        Ok(Psn(value))
    }

    /// The low 24 bits of `value`.
    pub fn from_wire(value: u32) -> Self {
        Psn(value & MASK_24)
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    pub fn wrapping_add(self, n: u32) -> Self {
        Psn(self.0.wrapping_add(n) & MASK_24)
    }

    /// Signed distance `self - other` in the 24-bit circle (rxe's `(a - b) << 8` compare):
    /// positive when `self` is after `other`.
    pub fn diff(self, other: Psn) -> i32 {
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }
}

wirekit::debug_as_hex!(Lid, PKey, QKey, Rkey, Lkey, Qpn, Psn);

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_identifier_parser_exact_or_short() {
        assert_eq!(
            parse_id64("0x0002c90300a1b2c3", true),
            Some(0x0002_c903_00a1_b2c3)
        );
        assert_eq!(
            parse_id64("0002:c903:00a1:b2c3", true),
            Some(0x0002_c903_00a1_b2c3)
        );
        assert_eq!(parse_id64("0x1", true), None);
        assert_eq!(parse_id64("0x1", false), Some(1));
        assert_eq!(parse_id64(" 0x0 ", false), Some(0));
        for bad in ["", "0x", "0xzz", "0x00000000000000001", "::"] {
            assert_eq!(parse_id64(bad, false), None, "{bad:?}");
        }
    }

    use super::*;
    use alloc::string::ToString;

    #[test]
    fn guid_text_forms() {
        let g: Guid = "0002:c903:0001:0a2b".parse().expect("colon form");
        assert_eq!(g, Guid(0x0002_c903_0001_0a2b));
        assert_eq!(g.to_string(), "0002:c903:0001:0a2b");
        assert_eq!("0x0002c90300010a2b".parse::<Guid>(), Ok(g));
        assert_eq!("0002c90300010a2b".parse::<Guid>(), Ok(g));
        assert!("0002c9030001".parse::<Guid>().is_err());
        assert!("0002c90300010a2bff".parse::<Guid>().is_err());
        assert!("zz02c90300010a2b".parse::<Guid>().is_err());
        assert_eq!(Guid::from_bytes(g.to_bytes()), g);
    }

    #[test]
    fn gid_from_ipv4_is_mapped() {
        let gid = Gid::from_ipv4(Ipv4Addr::new(127, 0, 0, 2));
        assert_eq!(gid.0[10..12], [0xff, 0xff]);
        assert_eq!(gid.0[12..], [127, 0, 0, 2]);
        assert_eq!(gid.to_ip(), IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
        assert_eq!(gid.to_string(), "::ffff:127.0.0.2");
        assert_eq!(gid.subnet_prefix(), 0);
        assert_eq!(gid.interface_id(), Guid(0x0000_ffff_7f00_0002));
        let v6 = Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0202, 0xc9ff, 0xfe03, 0x0a2b);
        assert_eq!(Gid::from_ipv6(v6).to_ip(), IpAddr::V6(v6));
    }

    #[test]
    fn qpn_and_psn_are_24_bit() {
        assert!(Qpn::new(0x00ff_ffff).is_ok());
        assert_eq!(
            Qpn::new(0x0100_0000),
            Err(IdError::Over24Bits {
                what: "QPN",
                value: 0x0100_0000
            })
        );
        assert_eq!(Qpn::from_wire(0xab12_3456).get(), 0x12_3456);
        assert!(Psn::new(0x0100_0000).is_err());
        let top = Psn::new(0x00ff_fffe).expect("fits");
        assert_eq!(top.wrapping_add(3).get(), 1);
        assert_eq!(top.wrapping_add(3).diff(top), 3);
        assert_eq!(top.diff(top.wrapping_add(3)), -3);
    }
}
