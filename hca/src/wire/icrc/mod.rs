//! The invariant CRC: CRC-32 over a masked pseudo IP/UDP header and the whole RoCEv2 packet
//! (IBTA annex A17.4.1; Linux `rxe_icrc.c`, scapy `contrib/roce.py`; softrdma.md §1.7).
//!
//! The CRC runs over `8 × 0xff` (the masked LRH of native IB) ‖ the IP header with its
//! variant fields set to ones ‖ the UDP header with checksum 0xffff ‖ the BTH with byte 4
//! (FECN, BECN, reserved) set to 0xff ‖ the rest of the packet up to the ICRC. It is stored
//! little-endian (rxe writes the CPU-order `u32`).
//!
//! We talk UDP through ordinary sockets and never see the IP header, so [`IcrcContext`]
//! rebuilds it from what a socket does know: the addresses, ports and datagram length.
//! - IPv6 is always reconstructible: everything not masked (version, payload length, next
//!   header, addresses) follows from the context.
//! - IPv4 is not quite: the Identification field is covered by the CRC but not masked, and
//!   a receiving UDP socket cannot read it. We send from unconnected sockets with
//!   `IP_PMTUDISC_DO`, on which Linux writes ID 0 and DF (`ip_select_ident_segs`), and GSO
//!   segments get IDs 0, 1, 2, … (`driver::socket` stamps each ICRC accordingly). Linux
//!   rxe sends DF with a non-zero, hashed ID on every packet. On receive,
//!   [`verify_received`] therefore checks ID 0 first and otherwise solves for the one ID
//!   that makes the ICRC match (`ipv4_id.rs`: CRC-32 is linear, so this keeps a 16-bit
//!   check, and no single flipped bit outside the ID passes). [`IcrcContext::ipv4_id`]
//!   is the ID to send with (0) or to check exactly, as the golden vectors of softrdma.md
//!   §1.7 need (computed with ID 0x1234).
//!   The rebuilt IPv4 header has no options (IHL 5), flags DF and protocol UDP: a packet
//!   sent without DF fails the check (rxe and we always set it).

mod ipv4_id;

use super::ICRC_LEN;
use core::net::IpAddr;

/// The IP and UDP facts the ICRC covers, as a socket sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IcrcContext {
    /// Source address. Mixed families are treated as IPv6 with the IPv4 one mapped.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// UDP source port (the flow entropy, [`super::udp_sport`]).
    pub src_port: u16,
    /// UDP destination port, normally [`super::ROCE_V2_UDP_PORT`].
    pub dst_port: u16,
    /// IPv4 Identification: 0 for our traffic and rxe's (see the module doc). Ignored for
    /// IPv6.
    pub ipv4_id: u16,
}

impl IcrcContext {
    /// A context for a packet to the RoCEv2 port with IPv4 ID 0.
    pub fn new(src: IpAddr, dst: IpAddr, src_port: u16) -> Self {
        IcrcContext {
            src,
            dst,
            src_port,
            dst_port: super::ROCE_V2_UDP_PORT,
            ipv4_id: 0,
        }
    }
}

const IPV4_HDR_LEN: usize = 20;
const IPV6_HDR_LEN: usize = 40;
const UDP_HDR_LEN: usize = 8;
const UDP_PROTO: u8 = 17;
const BTH_VARIANT_BYTE: usize = 4;

/// The masked pseudo header: IP then UDP, for a UDP payload of `udp_payload_len` bytes.
/// Lengths wrap at 16 bits; [`super::Packet`] never emits a datagram that large.
fn pseudo_header(ctx: &IcrcContext, udp_payload_len: usize) -> ([u8; IPV6_HDR_LEN + 8], usize) {
    let mut h = [0u8; IPV6_HDR_LEN + UDP_HDR_LEN];
    let udp_len = (UDP_HDR_LEN + udp_payload_len) as u16;
    let ip_len = match (ctx.src, ctx.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (IPV4_HDR_LEN + UDP_HDR_LEN + udp_payload_len) as u16;
            h[0] = 0x45; // version 4, IHL 5
            h[1] = 0xff; // TOS: masked
            h[2..4].copy_from_slice(&total.to_be_bytes()); // total length
            h[4..6].copy_from_slice(&ctx.ipv4_id.to_be_bytes()); // identification: NOT masked
            h[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // flags DF, fragment offset 0
            h[8] = 0xff; // TTL: masked
            h[9] = UDP_PROTO;
            h[10..12].copy_from_slice(&[0xff, 0xff]); // header checksum: masked
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            IPV4_HDR_LEN
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            h[0..4].copy_from_slice(&[0x6f, 0xff, 0xff, 0xff]); // version 6; TC, flow label: masked
            h[4..6].copy_from_slice(&udp_len.to_be_bytes()); // payload length
            h[6] = UDP_PROTO; // next header
            h[7] = 0xff; // hop limit: masked
            h[8..24].copy_from_slice(&v6(s).octets());
            h[24..40].copy_from_slice(&v6(d).octets());
            IPV6_HDR_LEN
        }
    };
    let udp = &mut h[ip_len..ip_len + UDP_HDR_LEN];
    udp[0..2].copy_from_slice(&ctx.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&ctx.dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0xff, 0xff]); // checksum: masked
    (h, ip_len + UDP_HDR_LEN)
}

/// The ICRC of a packet: `roce` is the UDP payload without its last four bytes (BTH to the
/// end of the pad). The wire bytes are `compute(..).to_le_bytes()`.
pub fn compute(ctx: &IcrcContext, roce: &[u8]) -> u32 {
    let (pseudo, pseudo_len) = pseudo_header(ctx, roce.len() + ICRC_LEN);
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]); // masked LRH
    h.update(&pseudo[..pseudo_len]);
    match roce.split_at_checked(BTH_VARIANT_BYTE + 1) {
        Some((head, rest)) => {
            let mut head5 = [0u8; BTH_VARIANT_BYTE + 1];
            head5.copy_from_slice(head);
            head5[BTH_VARIANT_BYTE] = 0xff; // FECN, BECN, resv6: masked
            h.update(&head5);
            h.update(rest);
        }
        // Shorter than a BTH: no valid packet, but the function stays total.
        None => h.update(roce),
    }
    h.finalize()
}

/// The bytes an ICRC covers (all of the UDP payload but the ICRC) and the ICRC it carries,
/// read little-endian as computed; `None` if the payload is shorter than an ICRC.
pub fn split(udp_payload: &[u8]) -> Option<(&[u8], u32)> {
    let at = udp_payload.len().checked_sub(ICRC_LEN)?;
    let (covered, icrc) = udp_payload.split_at(at);
    let icrc: [u8; ICRC_LEN] = icrc.try_into().ok()?;
    Some((covered, u32::from_le_bytes(icrc)))
}

/// Whether the ICRC at the end of `udp_payload` is right for the packet and its context.
pub fn verify(ctx: &IcrcContext, udp_payload: &[u8]) -> bool {
    match split(udp_payload) {
        Some((covered, got)) => compute(ctx, covered) == got,
        None => false,
    }
}

/// Bytes of the covered stream before the IPv4 ID: the masked LRH and the IPv4 header's
/// version, TOS and total length.
const IPV4_ID_AT: usize = 8 + 4;
/// The IPv4 ID field's length.
const IPV4_ID_LEN: usize = 2;

/// How a received packet's ICRC matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// It verifies with the IPv4 ID given (always 0 for IPv6).
    Verified {
        /// The IPv4 Identification the sender used.
        ipv4_id: u16,
    },
    /// No IPv4 ID makes it verify: the packet is corrupt (or was sent without DF).
    Mismatch {
        /// The ICRC computed with ID 0.
        expected: u32,
        /// The ICRC the packet carries.
        got: u32,
    },
    /// Shorter than an ICRC.
    Truncated,
}

/// Checks the ICRC of a received packet whose IPv4 ID the receiver cannot see
/// (`ctx.ipv4_id` is ignored): ID 0 first (our traffic, one CRC pass), else the one ID that
/// explains the difference, if any (`ipv4_id.rs`).
pub fn verify_received(ctx: &IcrcContext, udp_payload: &[u8]) -> Received {
    let Some((covered, got)) = split(udp_payload) else {
        return Received::Truncated;
    };
    let ctx0 = IcrcContext { ipv4_id: 0, ..*ctx };
    let expected = compute(&ctx0, covered);
    if expected == got {
        return Received::Verified { ipv4_id: 0 };
    }
    if let (IpAddr::V4(_), IpAddr::V4(_)) = (ctx.src, ctx.dst) {
        let after = bytes_after_ipv4_id(covered.len());
        if let Some(ipv4_id) = ipv4_id::IdBasis::with_cached(after, |b| b.solve(expected ^ got)) {
            return Received::Verified { ipv4_id };
        }
    }
    Received::Mismatch { expected, got }
}

/// Bytes of the covered stream after the IPv4 ID, for a packet whose ICRC covers `covered`
/// bytes of the UDP payload.
fn bytes_after_ipv4_id(covered: usize) -> usize {
    8 + IPV4_HDR_LEN + UDP_HDR_LEN + covered - IPV4_ID_AT - IPV4_ID_LEN
}

/// Rewrites the ICRC at the end of an IPv4 packet's `udp_payload`, computed for IPv4 ID
/// `from`, to the one for ID `to` — without a pass over the packet: the CRC changes by a
/// value that depends only on `from ^ to` and the packet's length (`ipv4_id.rs`). A GSO
/// send needs it: the kernel numbers a run's segments 0, 1, 2, … Does nothing to a
/// payload shorter than an ICRC.
pub fn restamp_ipv4_id(udp_payload: &mut [u8], from: u16, to: u16) {
    let Some(at) = udp_payload.len().checked_sub(ICRC_LEN) else {
        return;
    };
    let after = bytes_after_ipv4_id(at);
    let delta = ipv4_id::IdBasis::with_cached(after, |b| b.delta(from ^ to));
    let icrc = &mut udp_payload[at..];
    let old = u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]]);
    icrc.copy_from_slice(&(old ^ delta).to_le_bytes());
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// Golden RC RDMA WRITE Only from softrdma.md §1.7 (IPv4 header, UDP header, RoCE).
    pub(crate) const GOLDEN_WRITE: &str = "4500004c123440004011146b0a0000010a000002c12312b70038\
        00000a30ffff000000118000006400007f0000001000000012340000000d68656c6c6f2c2072646d6121\
        210000000d2c91c5";
    /// Golden RC ACK from softrdma.md §1.7.
    pub(crate) const GOLDEN_ACK: &str = "4500003012344000401114870a0000020a000001c45612b7001c\
        00001100ffff00000012000000641f00000157b761b1";

    /// Captured on 2026-11-25 from Linux 6.1.0-56 `rdma_rxe` (QEMU guest, tests/interop):
    /// ib_srp's RDMA-CM REQ to QP1, the whole IPv4 datagram. DF set and IPv4 ID 0x2980:
    /// rxe numbers its packets, and the ICRC covers the ID.
    pub(crate) const LINUX_RXE_CM_REQ: &str = "45000134298040004011f3e8c0a84d01c0a84dfed87212b7012000006400ffff0000000180000000800100000000\
        0001010702030000000000000002b9e9e93d00100000000000003de9e9b90000000000000000010615b3505400ff\
        fe77000100000000000000000000110400000000000000a17bacf4a7ffff37f0ffffffff00000000000000000000\
        ffffc0a84d0100000000000000000000ffffc0a84dfecabe10000040009800000000000000000000000000000000\
        000000000000000000000000000000000000000000000000000000000040ec12000000000000000000000000c0a8\
        4d01000000000000000000000000c0a84dfe000000000000000000068000000020440000000000000000505400ff\
        fe7700010002c90300c0ff010002c90300c0ff01004400000000000050febf77";
    /// The same run: ib_srp's first SRP_CMD (INQUIRY), an RC SEND Only with IPv4 ID 0x2993.
    pub(crate) const LINUX_RXE_SRP_CMD: &str = "4500006c299340004011f49dc0a84d01c0a84dfeebd312b7005800000400ffff0000001180009e37020000000001\
        00001c000000000000000000000000000000000000000000000012000000240000000000000000000000ff24915f\
        3fed9a00000003510000002468f88cb4";

    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        s.chunks(2)
            .map(|p| u8::from_str_radix(core::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
            .collect()
    }

    /// The context of a captured IPv4/UDP datagram, read from its headers, and its UDP
    /// payload.
    pub(crate) fn from_ipv4_udp(dgram: &[u8]) -> (IcrcContext, &[u8]) {
        let ip = |i: usize| Ipv4Addr::new(dgram[i], dgram[i + 1], dgram[i + 2], dgram[i + 3]);
        let be16 = |i: usize| u16::from_be_bytes([dgram[i], dgram[i + 1]]);
        assert_eq!(dgram[0], 0x45, "IPv4 without options");
        assert_eq!(usize::from(be16(2)), dgram.len(), "IP total length");
        assert_eq!(usize::from(be16(24)), dgram.len() - 20, "UDP length");
        let ctx = IcrcContext {
            src: ip(12).into(),
            dst: ip(16).into(),
            src_port: be16(20),
            dst_port: be16(22),
            ipv4_id: be16(4),
        };
        (ctx, &dgram[28..])
    }

    #[test]
    fn golden_vectors_verify_with_their_own_ip_id() {
        for v in [GOLDEN_WRITE, GOLDEN_ACK] {
            let d = hex(v);
            let (ctx, udp) = from_ipv4_udp(&d);
            assert_eq!(ctx.ipv4_id, 0x1234);
            assert_eq!(ctx.dst_port, crate::wire::ROCE_V2_UDP_PORT);
            assert!(verify(&ctx, udp), "{v}");
            // The vectors were computed with ID 0x1234: ID 0 does not verify them.
            assert!(!verify(&IcrcContext { ipv4_id: 0, ..ctx }, udp));
        }
        let d = hex(GOLDEN_WRITE);
        let (ctx, udp) = from_ipv4_udp(&d);
        let (covered, icrc) = split(udp).expect("long enough");
        assert_eq!(icrc.to_le_bytes(), [0x0d, 0x2c, 0x91, 0xc5]);
        assert_eq!(compute(&ctx, covered), icrc);
    }

    /// Calls `f(byte, bit, packet)` with each single bit of `udp` flipped.
    fn each_bit_flipped(udp: &[u8], mut f: impl FnMut(usize, u8, &[u8])) {
        let mut b = udp.to_vec();
        for i in 0..udp.len() {
            for bit in 0..8 {
                b[i] ^= 1 << bit;
                f(i, bit, &b);
                b[i] ^= 1 << bit;
            }
        }
    }

    #[test]
    fn flipping_any_covered_byte_fails_but_the_bth_variant_byte() {
        for v in [GOLDEN_WRITE, GOLDEN_ACK] {
            let d = hex(v);
            let (ctx, udp) = from_ipv4_udp(&d);
            each_bit_flipped(udp, |i, bit, b| {
                // BTH byte 4 (FECN, BECN, resv6) is masked: switches may set FECN.
                assert_eq!(verify(&ctx, b), i == BTH_VARIANT_BYTE, "byte {i} bit {bit}");
            });
            let other = |c: IcrcContext| assert!(!verify(&c, udp));
            other(IcrcContext {
                src: Ipv4Addr::new(10, 0, 0, 9).into(),
                ..ctx
            });
            other(IcrcContext {
                src_port: ctx.src_port ^ 1,
                ..ctx
            });
            other(IcrcContext {
                dst_port: 4792,
                ..ctx
            });
            assert!(!verify(&ctx, &udp[..udp.len() - 1]));
            assert!(!verify(&ctx, &[]));
        }
    }

    #[test]
    fn a_receiver_finds_the_senders_ipv4_id() {
        for v in [GOLDEN_WRITE, GOLDEN_ACK] {
            let d = hex(v);
            let (ctx, udp) = from_ipv4_udp(&d);
            // The receiver does not know the ID: whatever it passes is ignored.
            let blind = IcrcContext { ipv4_id: 0, ..ctx };
            assert_eq!(
                verify_received(&blind, udp),
                Received::Verified { ipv4_id: 0x1234 }
            );
        }
        // Our own traffic (ID 0) takes the first pass.
        let d = hex(GOLDEN_ACK);
        let (ctx, udp) = from_ipv4_udp(&d);
        let (covered, _) = split(udp).expect("long enough");
        let ours = IcrcContext { ipv4_id: 0, ..ctx };
        let mut b = udp.to_vec();
        let at = b.len() - ICRC_LEN;
        b[at..].copy_from_slice(&compute(&ours, covered).to_le_bytes());
        assert_eq!(
            verify_received(&ours, &b),
            Received::Verified { ipv4_id: 0 }
        );
        assert_eq!(verify_received(&ours, &b[..3]), Received::Truncated);
    }

    #[test]
    fn a_restamped_icrc_is_the_one_computed_with_the_new_id() {
        let dgram = hex(GOLDEN_WRITE);
        let (ctx, udp) = from_ipv4_udp(&dgram);
        let mut pkt = udp.to_vec();
        let (covered, _) = split(udp).expect("long enough");
        for (from, to) in [
            (0x1234u16, 0u16),
            (0, 1),
            (1, 63),
            (63, 0x1234),
            (0x1234, 0xffff),
        ] {
            let want_from = compute(
                &IcrcContext {
                    ipv4_id: from,
                    ..ctx
                },
                covered,
            );
            let at = pkt.len() - ICRC_LEN;
            pkt[at..].copy_from_slice(&want_from.to_le_bytes());
            restamp_ipv4_id(&mut pkt, from, to);
            let want = compute(&IcrcContext { ipv4_id: to, ..ctx }, covered);
            assert_eq!(
                split(&pkt).expect("long enough").1,
                want,
                "{from:#x} -> {to:#x}"
            );
        }
        let mut short = [1u8, 2, 3];
        restamp_ipv4_id(&mut short, 0, 5);
        assert_eq!(short, [1, 2, 3]);
    }

    #[test]
    fn real_rxe_packets_verify_by_solving_their_ipv4_id() {
        for (v, id) in [(LINUX_RXE_CM_REQ, 0x2980), (LINUX_RXE_SRP_CMD, 0x2993)] {
            let d = hex(v);
            let (ctx, udp) = from_ipv4_udp(&d);
            assert_eq!(ctx.ipv4_id, id);
            assert_eq!(d[6] & 0x40, 0x40, "DF");
            // The exact check with the header's ID passes; ID 0 (the assumption a receiver
            // without the IP header used to make) does not: every rxe packet was dropped.
            assert!(verify(&ctx, udp));
            assert!(!verify(&IcrcContext { ipv4_id: 0, ..ctx }, udp));
            let blind = IcrcContext { ipv4_id: 0, ..ctx };
            assert_eq!(
                verify_received(&blind, udp),
                Received::Verified { ipv4_id: id }
            );
            for i in 0..udp.len() {
                for bit in 0..8 {
                    let mut b = udp.to_vec();
                    b[i] ^= 1 << bit;
                    let got = verify_received(&blind, &b);
                    assert_eq!(
                        matches!(got, Received::Mismatch { .. }),
                        i != BTH_VARIANT_BYTE,
                        "byte {i} bit {bit}: {got:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn any_id_is_found_and_whatever_verifies_verifies_exactly() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let ctx = IcrcContext::new(
            core::net::Ipv4Addr::new(192, 168, 77, 1).into(),
            core::net::Ipv4Addr::new(192, 168, 77, 254).into(),
            0xd872,
        );
        let (mut found, mut junk_passed) = (0, 0);
        for _ in 0..2000 {
            let len = 16 + (next() % 600) as usize;
            let mut p: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let id = next() as u16;
            let at = len - ICRC_LEN;
            let crc = compute(&IcrcContext { ipv4_id: id, ..ctx }, &p[..at]);
            p[at..].copy_from_slice(&crc.to_le_bytes());
            // A sender's ID, whatever it was, is found.
            assert_eq!(
                verify_received(&ctx, &p),
                Received::Verified { ipv4_id: id }
            );
            found += 1;
            // Junk ICRCs: when one passes, it passes exactly with the ID returned.
            p[at..].copy_from_slice(&(next() as u32).to_le_bytes());
            if let Received::Verified { ipv4_id } = verify_received(&ctx, &p) {
                assert!(verify(&IcrcContext { ipv4_id, ..ctx }, &p));
                junk_passed += 1;
            }
        }
        assert_eq!(found, 2000);
        assert!(
            junk_passed < 5,
            "{junk_passed} of 2000 random ICRCs passed (2^-16 each)"
        );
    }

    #[test]
    fn with_the_id_unknown_every_flipped_bit_still_fails() {
        for v in [GOLDEN_WRITE, GOLDEN_ACK] {
            let d = hex(v);
            let (ctx, udp) = from_ipv4_udp(&d);
            each_bit_flipped(udp, |i, bit, b| {
                let got = verify_received(&ctx, b);
                if i == BTH_VARIANT_BYTE {
                    assert_eq!(got, Received::Verified { ipv4_id: 0x1234 });
                } else {
                    assert!(
                        matches!(got, Received::Mismatch { .. }),
                        "byte {i} bit {bit}: {got:?}"
                    );
                }
            });
            // Every bit of the covered context the receiver knows: addresses, ports.
            for bit in 0..32 {
                let flip = |a: IpAddr| match a {
                    IpAddr::V4(a) => IpAddr::V4((u32::from(a) ^ (1 << bit)).into()),
                    a => a,
                };
                let rejects = |c: IcrcContext| {
                    assert!(matches!(
                        verify_received(&c, udp),
                        Received::Mismatch { .. }
                    ))
                };
                rejects(IcrcContext {
                    src: flip(ctx.src),
                    ..ctx
                });
                rejects(IcrcContext {
                    dst: flip(ctx.dst),
                    ..ctx
                });
                if bit < 16 {
                    rejects(IcrcContext {
                        src_port: ctx.src_port ^ (1 << bit),
                        ..ctx
                    });
                    rejects(IcrcContext {
                        dst_port: ctx.dst_port ^ (1 << bit),
                        ..ctx
                    });
                }
            }
            // One byte less or more changes the lengths the CRC covers.
            assert!(matches!(
                verify_received(&ctx, &udp[..udp.len() - 1]),
                Received::Mismatch { .. }
            ));
        }
    }

    #[test]
    fn ipv6_matches_the_scapy_recipe() {
        // The golden ACK's RoCE bytes over fe80::1 -> fe80::2, ICRC computed with Python
        // zlib.crc32 over 8*ff | 6fffffff 001c 11 ff src dst | c456 12b7 001c ffff | BTH(byte
        // 4 = ff) AETH.
        let d = hex(GOLDEN_ACK);
        let (ctx, udp) = from_ipv4_udp(&d);
        let ctx = IcrcContext {
            src: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1).into(),
            dst: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2).into(),
            ..ctx
        };
        let (covered, _) = split(udp).expect("long enough");
        assert_eq!(compute(&ctx, covered).to_le_bytes(), IPV6_ACK_ICRC);
        // The IPv4 ID plays no part in IPv6.
        let no_id = IcrcContext { ipv4_id: 0, ..ctx };
        assert_eq!(compute(&no_id, covered), compute(&ctx, covered));
    }

    const IPV6_ACK_ICRC: [u8; 4] = [0x6a, 0x79, 0x6b, 0x08];

    #[test]
    fn seeded_hasher_equals_the_ff_prefix() {
        // softrdma.md §0: crc32 state after 8 x 0xff is 0x2144DF1C.
        let mut a = crc32fast::Hasher::new();
        a.update(&[0xff; 8]);
        a.update(b"rest");
        let mut b = crc32fast::Hasher::new_with_initial(0x2144_df1c);
        b.update(b"rest");
        assert_eq!(a.finalize(), b.finalize());
    }
}
