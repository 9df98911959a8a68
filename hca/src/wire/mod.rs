//! RoCEv2 packets, byte-exact: what the software HCA puts in, and reads from, UDP datagrams
//! to port 4791 (IBTA Vol 1 ch. 9 and annex A17; Linux rxe; softrdma.md §1).
//!
//! Contract: every header is a zerocopy struct (`#[repr(C)]`, byte and big-endian fields, size
//! asserted at compile time) under a validated representation implementing
//! [`wirekit::WireRepr`]; sub-byte and 24-bit fields are reached through accessors. Parsing
//! never panics and never allocates; emitting writes every byte (reserved bits as zero) and
//! fails on a short buffer or a value too wide for its field. Code points are open enums.
//! [`Packet`] is a whole UDP payload `BTH ‖ ext headers ‖ payload ‖ pad ‖ ICRC`; the ICRC
//! needs the IP/UDP context a socket sees ([`IcrcContext`]).
//!
//! Files: [`opcode`] (opcodes and the table of what each carries), [`bth`], [`aeth`] (AETH,
//! syndromes, RNR timer), [`ext`] (RETH, DETH, ImmDt, IETH, AtomicETH, AtomicAckETH),
//! [`packet`], [`icrc`], `error` ([`WireError`]). This file: ports, path MTU, UDP source port.
//!
//! Receive path: `icrc::verify(&ctx, dgram)` then [`Packet::parse`] (or
//! [`Packet::parse_verified`], both in one); send path: [`Packet::emit_with`] with a `fill`
//! that gathers the payload from memory regions.

pub mod aeth;
pub mod bth;
mod error;
pub mod ext;
pub mod icrc;
pub mod opcode;
pub mod packet;
#[cfg(test)]
mod packet_random_tests;
#[cfg(test)]
mod packet_tests;

pub use aeth::{Aeth, CREDITS_UNLIMITED, NakCode, Syndrome, rnr_timer_us};
pub use bth::{BTH_LEN, Bth};
pub use error::WireError;
pub use ext::{AtomicAckEth, AtomicEth, Deth, Ieth, ImmDt, Reth};
pub use icrc::IcrcContext;
pub use opcode::{Headers, Kind, Opcode, OpcodeInfo, Position, Transport};
pub use packet::{MAX_UDP_PAYLOAD, Packet, pad_len};

use crate::ids::Qpn;

/// The RoCEv2 UDP destination port (IANA; rxe `ROCE_V2_UDP_DPORT`).
pub const ROCE_V2_UDP_PORT: u16 = 4791;

/// Size of the invariant CRC that ends every packet.
pub const ICRC_LEN: usize = 4;

pub use ib_verbs::mtu::PathMtu;

/// The 20-bit flow label of a connection (`ib_verbs.h rdma_calc_flow_label`).
pub fn flow_label(lqpn: Qpn, rqpn: Qpn) -> u32 {
    let mut v = u64::from(lqpn.get()) * u64::from(rqpn.get());
    v ^= v >> 20;
    v ^= v >> 40;
    (v & 0xf_ffff) as u32
}

/// The UDP source port of a connection: its flow label folded to 14 bits in 0xC000..=0xFFFF
/// (`ib_verbs.h rdma_flow_label_to_udp_sport`). One QP pair keeps one 5-tuple, so packets stay
/// in order; different QPs spread over ECMP paths.
pub fn udp_sport(lqpn: Qpn, rqpn: Qpn) -> u16 {
    let fl = flow_label(lqpn, rqpn);
    (((fl & 0x3fff) ^ ((fl & 0xf_c000) >> 14)) | 0xc000) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_sport_follows_ib_verbs_h() {
        // By hand: 0x11 * 0x12 = 0x132, no high bits to fold; 0x132 | 0xc000.
        assert_eq!(
            udp_sport(Qpn::from_wire(0x11), Qpn::from_wire(0x12)),
            0xc132
        );
        // 0xffffff^2 = 0xfffffe000001; ^>>20 = 0xfffffe000001 ^ 0xfffffe0 = 0xfffff1ffffe1;
        // ^>>40 ^= 0xff -> 0xfffff1ffff1e; fl = 0xfff1e; (0x3f1e ^ 0x3f) | 0xc000 = 0xff21.
        let top = Qpn::from_wire(0xff_ffff);
        assert_eq!(flow_label(top, top), 0xf_ff1e);
        assert_eq!(udp_sport(top, top), 0xff21);
        assert_eq!(udp_sport(Qpn::SMI, Qpn::GSI), 0xc000);
    }
}
