//! The RDMA-CM private-data header and RDMA-CM service IDs (Linux `drivers/infiniband/core/
//! cma.c` / `cma_priv.h`: `struct cma_hdr`, `cma_get_service_id`, `RDMA_IB_IP_PS_*`).
//!
//! When the service ID is in the TCP or UDP port space, the first 36 bytes of a REQ's
//! private data are a `cma_hdr`, leaving 92 − 36 = 56 bytes to the consumer.
#[allow(unused_imports)]
use crate::prelude::*;

use super::req::REQ_PRIVATE_DATA_LEN;
use crate::mad::{MadError, PrivateData, ServiceId, read_fixed, write_fixed};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wirekit::WireRepr;
use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes in the cma header.
pub const CMA_HEADER_LEN: usize = 36;
/// The only cma_version Linux sends and accepts (`CMA_VERSION`).
pub const CMA_VERSION: u8 = 0x00;
/// Bytes of REQ private data left to the consumer after the cma header.
pub const CMA_REQ_USER_DATA_LEN: usize = REQ_PRIVATE_DATA_LEN - CMA_HEADER_LEN;
/// Mask of the port-space part of an RDMA-CM service ID (`RDMA_IB_IP_PS_MASK`).
pub const RDMA_IP_PS_MASK: u64 = 0xffff_ffff_ffff_0000;

/// `struct cma_hdr` as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CmaHdr {
    /// cma_version, 0x00.
    pub cma_version: u8,
    /// IP version in bits 7:4 (4 or 6); bits 3:0 reserved.
    pub ip_version: u8,
    /// Source port of the active side.
    pub port: U16,
    /// Source address; IPv4 in the last 4 bytes.
    pub src_addr: [u8; 16],
    /// Destination address; IPv4 in the last 4 bytes.
    pub dst_addr: [u8; 16],
}
const _: () = assert!(size_of::<CmaHdr>() == CMA_HEADER_LEN);

/// The validated cma header. Source and destination are of the same family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmaHeader {
    /// The active side's source port (its destination port is in the service ID).
    pub src_port: u16,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
}

impl CmaHeader {
    /// REQ private data: this header followed by `user` (at most 56 bytes), zero-padded.
    pub fn req_private_data(
        &self,
        user: &[u8],
    ) -> Result<PrivateData<REQ_PRIVATE_DATA_LEN>, MadError> {
        let mut pd = [0u8; REQ_PRIVATE_DATA_LEN];
        self.emit(&mut pd)?;
        let have = user.len();
        pd.get_mut(CMA_HEADER_LEN..CMA_HEADER_LEN + have)
            .ok_or(MadError::BadField {
                what: "RDMA-CM REQ private data",
                field: "user data length",
                value: have as u64,
                why: "at most 56 bytes follow the cma header",
            })?
            .copy_from_slice(user);
        Ok(PrivateData(pd))
    }

    /// The consumer's bytes after the cma header in REQ private data.
    pub fn user_data(private_data: &[u8]) -> &[u8] {
        private_data.get(CMA_HEADER_LEN..).unwrap_or(&[])
    }
}

fn addr(bytes: [u8; 16], v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15]))
    } else {
        IpAddr::V6(Ipv6Addr::from(bytes))
    }
}

fn addr_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => {
            // Linux `union cma_ip_addr`: pad[3] (zero) then the address.
            let mut b = [0u8; 16];
            b[12..].copy_from_slice(&v4.octets());
            b
        }
        IpAddr::V6(v6) => v6.octets(),
    }
}

impl<'a> WireRepr<'a> for CmaHeader {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let h: CmaHdr = read_fixed("cma header", buf)?;
        if h.cma_version != CMA_VERSION {
            return Err(MadError::BadField {
                what: "cma header",
                field: "cma_version",
                value: h.cma_version.into(),
                why: "only version 0 is defined (cma_save_ip_info)",
            });
        }
        let v4 = match h.ip_version >> 4 {
            4 => true,
            6 => false,
            other => {
                return Err(MadError::BadField {
                    what: "cma header",
                    field: "ip_version",
                    value: other.into(),
                    why: "not 4 or 6",
                });
            }
        };
        Ok(CmaHeader {
            src_port: h.port.get(),
            src: addr(h.src_addr, v4),
            dst: addr(h.dst_addr, v4),
        })
    }

    fn buffer_len(&self) -> usize {
        CMA_HEADER_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        let version = match (self.src, self.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => 4u8,
            (IpAddr::V6(_), IpAddr::V6(_)) => 6,
            _ => {
                return Err(MadError::BadField {
                    what: "cma header",
                    field: "dst_addr",
                    value: 0,
                    why: "source and destination must be of the same IP family",
                });
            }
        };
        let h = CmaHdr {
            cma_version: CMA_VERSION,
            ip_version: version << 4,
            port: U16::new(self.src_port),
            src_addr: addr_bytes(self.src),
            dst_addr: addr_bytes(self.dst),
        };
        write_fixed("cma header", &h, buf)
    }
}

wirekit::open_enum! {
    /// RDMA-CM port space (Linux `enum rdma_ucm_port_space`), bits 31:16 of a service ID.
    pub enum RdmaPortSpace(u16) {
        /// IPoIB.
        Ipoib = 0x0002,
        /// TCP (RC connections; what ib_srp, NVMe-oF and iSER use).
        Tcp = 0x0106,
        /// UDP.
        Udp = 0x0111,
        /// Native IB addressing (AF_IB).
        Ib = 0x013f,
    }
}

impl ServiceId {
    /// The RDMA-CM service ID of `port` in `ps` (`cma_get_service_id`):
    /// TCP 5555 → 0x0000_0000_0106_15b3.
    pub fn rdma_ip(ps: RdmaPortSpace, port: u16) -> Self {
        ServiceId((u64::from(u16::from(ps)) << 16) | u64::from(port))
    }

    /// The port space and port of an RDMA-CM service ID (`cma_port_from_service_id`), or
    /// `None` when the upper 32 bits are not zero.
    pub fn rdma_ip_parts(self) -> Option<(RdmaPortSpace, u16)> {
        if self.0 >> 32 != 0 {
            return None;
        }
        Some((RdmaPortSpace::from((self.0 >> 16) as u16), self.0 as u16))
    }

    /// Whether a REQ to this service ID starts its private data with a cma header: the TCP
    /// and UDP port spaces (`(id & RDMA_IB_IP_PS_MASK) == RDMA_IB_IP_PS_TCP/UDP`).
    pub fn carries_cma_header(self) -> bool {
        let ps = self.0 & RDMA_IP_PS_MASK;
        ps == ServiceId::rdma_ip(RdmaPortSpace::Tcp, 0).0
            || ps == ServiceId::rdma_ip(RdmaPortSpace::Udp, 0).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// IPv4 cma header, 192.168.1.10:40000 → 192.168.1.20 (layout: Linux `struct cma_hdr`).
    const CMA: [u8; 36] = [
        0x00, // cma_version
        0x40, // ip_version 4 << 4
        0x9c, 0x40, // port 40000
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 168, 1, 10, // src_addr
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 168, 1, 20, // dst_addr
    ];

    fn cma() -> CmaHeader {
        CmaHeader {
            src_port: 40000,
            src: IpAddr::V4(Ipv4Addr::new(192, 168, 1, 10)),
            dst: IpAddr::V4(Ipv4Addr::new(192, 168, 1, 20)),
        }
    }

    #[test]
    fn cma_decodes_known_bytes() {
        check::decodes(&CMA, &cma());
    }

    #[test]
    fn cma_emits_known_bytes() {
        check::emits(&cma(), &CMA);
    }

    #[test]
    fn cma_round_trips() {
        check::round_trips(&cma(), &mut Vec::new());
        let v6 = CmaHeader {
            src_port: 1,
            src: IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1)),
            dst: IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2)),
        };
        check::round_trips(&v6, &mut Vec::new());
    }

    #[test]
    fn cma_truncated_errors() {
        check::truncation_errors::<CmaHeader>(&CMA);
    }

    #[test]
    fn cma_rejects_bad_versions_and_mixed_families() {
        let mut b = CMA;
        b[0] = 1;
        assert!(matches!(
            CmaHeader::parse(&b),
            Err(MadError::BadField {
                field: "cma_version",
                ..
            })
        ));
        let mut b = CMA;
        b[1] = 0x50;
        assert!(matches!(
            CmaHeader::parse(&b),
            Err(MadError::BadField {
                field: "ip_version",
                ..
            })
        ));
        let mixed = CmaHeader {
            dst: IpAddr::V6(Ipv6Addr::LOCALHOST),
            ..cma()
        };
        assert!(mixed.emit(&mut [0u8; 36]).is_err());
    }

    #[test]
    fn req_private_data_is_header_then_user_data() {
        let pd = cma().req_private_data(&[0xaa; 56]).expect("56 bytes fit");
        assert_eq!(&pd.0[..36], &CMA);
        assert_eq!(CmaHeader::user_data(&pd.0), &[0xaa; 56]);
        assert!(cma().req_private_data(&[0; 57]).is_err());
        // The REQ vector in req.rs carries this header.
        assert_eq!(
            CmaHeader::parse(&crate::mad::cm::req::tests::REQ[140..]),
            Ok(cma())
        );
    }

    #[test]
    fn service_ids_follow_cma_get_service_id() {
        assert_eq!(
            ServiceId::rdma_ip(RdmaPortSpace::Tcp, 0x1144),
            ServiceId(0x0000_0000_0106_1144)
        );
        assert_eq!(
            ServiceId(0x0000_0000_0106_15b3).rdma_ip_parts(),
            Some((RdmaPortSpace::Tcp, 5555))
        );
        assert_eq!(ServiceId(0x0002_c903_0001_0a2b).rdma_ip_parts(), None);
        assert!(ServiceId(0x0000_0000_0106_15b3).carries_cma_header());
        assert!(ServiceId::rdma_ip(RdmaPortSpace::Udp, 7).carries_cma_header());
        assert!(!ServiceId::rdma_ip(RdmaPortSpace::Ib, 7).carries_cma_header());
        assert_eq!(u16::from(RdmaPortSpace::Ib), 0x013f);
    }
}
