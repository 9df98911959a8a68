//! Tests of [`Packet`]: the four wire tests per opcode family on known bytes, error cases, and
//! a seeded random round trip.
//!
//! Known bytes: the two golden vectors of softrdma.md §1.7 (scapy-accepted, tshark-decoded),
//! and hand-built packets whose ICRC was computed independently with Python `zlib.crc32` over
//! the scapy recipe, with the context [`lab`] (10.0.0.1:0xc123 -> 10.0.0.2:4791, IPv4 ID 0).

use super::icrc::{self, IcrcContext};
use super::*;
use crate::ids::{Psn, QKey, Qpn, Rkey};
use core::marker::PhantomData;
use core::net::Ipv4Addr;
use wirekit::WireRepr;
use wirekit::wire_repr::check;

/// Where a test's ICRC context comes from.
trait Ctx {
    fn ctx() -> IcrcContext;
}

/// Our own traffic: IPv4 ID 0.
#[derive(Debug, PartialEq)]
struct Lab;
impl Ctx for Lab {
    fn ctx() -> IcrcContext {
        lab()
    }
}

/// The golden RDMA WRITE Only's IPv4/UDP header (ID 0x1234).
#[derive(Debug, PartialEq)]
struct GoldenWrite;
impl Ctx for GoldenWrite {
    fn ctx() -> IcrcContext {
        icrc::tests::from_ipv4_udp(&icrc::tests::hex(icrc::tests::GOLDEN_WRITE)).0
    }
}

/// The golden ACK's IPv4/UDP header (ID 0x1234).
#[derive(Debug, PartialEq)]
struct GoldenAck;
impl Ctx for GoldenAck {
    fn ctx() -> IcrcContext {
        icrc::tests::from_ipv4_udp(&icrc::tests::hex(icrc::tests::GOLDEN_ACK)).0
    }
}

pub(super) fn lab() -> IcrcContext {
    IcrcContext::new(
        Ipv4Addr::new(10, 0, 0, 1).into(),
        Ipv4Addr::new(10, 0, 0, 2).into(),
        0xc123,
    )
}

/// A packet in a fixed IP context, so the `wirekit` checks apply: parse verifies the ICRC.
#[derive(Debug, PartialEq)]
struct Framed<'a, C>(Packet<'a>, PhantomData<C>);

impl<'a, C: Ctx + core::fmt::Debug + PartialEq> WireRepr<'a> for Framed<'a, C> {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        Packet::parse_verified(buf, &C::ctx()).map(|p| Framed(p, PhantomData))
    }

    fn buffer_len(&self) -> usize {
        self.0.buffer_len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.0.emit(buf, &C::ctx())
    }
}

/// The four wire tests of one packet.
macro_rules! four_tests {
    ($name:ident, $ctx:ty, $bytes:expr, $value:expr) => {
        mod $name {
            use super::*;

            fn framed() -> Framed<'static, $ctx> {
                Framed($value, PhantomData)
            }

            #[test]
            fn decodes_known_bytes() {
                check::decodes(&$bytes, &framed());
                // Structure alone, without the ICRC.
                assert_eq!(Packet::parse(&$bytes), Ok($value));
            }

            #[test]
            fn emits_known_bytes() {
                check::emits(&framed(), &$bytes);
            }

            #[test]
            fn round_trips() {
                check::round_trips(&framed(), &mut Vec::new());
            }

            #[test]
            fn truncated_errors() {
                check::truncation_errors::<Framed<'_, $ctx>>(&$bytes);
            }
        }
    };
}

fn bth(opcode: Opcode, qp: u32, psn: u32, ack_req: bool) -> Bth {
    Bth {
        ack_req,
        ..Bth::new(opcode, Qpn::from_wire(qp), Psn::from_wire(psn))
    }
}

/// softrdma.md §1.7 golden RC RDMA WRITE Only (UDP payload of the vector).
const GOLDEN_WRITE_ONLY: [u8; 48] = [
    0x0a, 0x30, 0xff, 0xff, // BTH: WRITE Only; PadCnt 3; P_Key 0xffff
    0x00, 0x00, 0x00, 0x11, // BTH: FECN/BECN 0; DestQP 0x11
    0x80, 0x00, 0x00, 0x64, // BTH: AckReq; PSN 100
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, // RETH: VA 0x7f0000001000
    0x00, 0x00, 0x12, 0x34, // RETH: R_Key 0x1234
    0x00, 0x00, 0x00, 0x0d, // RETH: DMA length 13
    b'h', b'e', b'l', b'l', b'o', b',', b' ', b'r', b'd', b'm', b'a', b'!', b'!', // payload
    0x00, 0x00, 0x00, // pad
    0x0d, 0x2c, 0x91, 0xc5, // ICRC (little-endian 0xc5912c0d)
];

fn golden_write_only() -> Packet<'static> {
    Packet {
        bth: Bth {
            pad_count: 3,
            ..bth(Opcode::RcRdmaWriteOnly, 0x11, 100, true)
        },
        reth: Some(Reth {
            va: 0x7f00_0000_1000,
            rkey: Rkey(0x1234),
            dma_len: 13,
        }),
        payload: b"hello, rdma!!",
        ..Packet::new(Bth::new(Opcode::RcSendOnly, Qpn::GSI, Psn::default()))
    }
}
four_tests!(
    rc_write_only_golden,
    GoldenWrite,
    GOLDEN_WRITE_ONLY,
    golden_write_only()
);

/// softrdma.md §1.7 golden RC ACK.
const GOLDEN_ACK: [u8; 20] = [
    0x11, 0x00, 0xff, 0xff, // BTH: ACKNOWLEDGE; PadCnt 0; P_Key 0xffff
    0x00, 0x00, 0x00, 0x12, // BTH: DestQP 0x12
    0x00, 0x00, 0x00, 0x64, // BTH: AckReq 0; PSN 100
    0x1f, 0x00, 0x00, 0x01, // AETH: ACK, credits unlimited; MSN 1
    0x57, 0xb7, 0x61, 0xb1, // ICRC
];

fn golden_ack() -> Packet<'static> {
    Packet {
        aeth: Some(Aeth {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 1,
        }),
        ..Packet::new(bth(Opcode::RcAcknowledge, 0x12, 100, false))
    }
}
four_tests!(rc_ack_golden, GoldenAck, GOLDEN_ACK, golden_ack());

/// RC SEND Only, solicited, 5-byte payload.
const SEND_ONLY: [u8; 24] = [
    0x04, 0xb0, 0xff, 0xff, // BTH: SEND Only; SE, PadCnt 3; P_Key
    0x00, 0x00, 0x00, 0x11, // BTH: DestQP 0x11
    0x80, 0x00, 0x01, 0x00, // BTH: AckReq; PSN 0x100
    b'h', b'e', b'l', b'l', b'o', // payload
    0x00, 0x00, 0x00, // pad
    0x1c, 0x70, 0x0d, 0x0d, // ICRC
];

fn send_only() -> Packet<'static> {
    Packet {
        bth: Bth {
            solicited: true,
            pad_count: 3,
            ..bth(Opcode::RcSendOnly, 0x11, 0x100, true)
        },
        payload: b"hello",
        ..Packet::new(Bth::new(Opcode::RcSendOnly, Qpn::GSI, Psn::default()))
    }
}
four_tests!(rc_send_only, Lab, SEND_ONLY, send_only());

/// RC RDMA WRITE First of an 8 KiB message (payload shortened to 8 bytes: parse does not
/// know the MTU).
const WRITE_FIRST: [u8; 40] = [
    0x06, 0x00, 0xff, 0xff, // BTH: WRITE First; PadCnt 0; P_Key
    0x00, 0x00, 0x00, 0x11, // BTH: DestQP 0x11
    0x00, 0x00, 0x01, 0x01, // BTH: AckReq 0; PSN 0x101
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, // RETH: VA
    0x00, 0x00, 0x12, 0x34, // RETH: R_Key
    0x00, 0x00, 0x20, 0x00, // RETH: DMA length 8192
    0, 1, 2, 3, 4, 5, 6, 7, // payload
    0x70, 0x1d, 0xe3, 0x48, // ICRC
];

fn write_first() -> Packet<'static> {
    Packet {
        reth: Some(Reth {
            va: 0x7f00_0000_1000,
            rkey: Rkey(0x1234),
            dma_len: 0x2000,
        }),
        payload: &[0, 1, 2, 3, 4, 5, 6, 7],
        ..Packet::new(bth(Opcode::RcRdmaWriteFirst, 0x11, 0x101, false))
    }
}
four_tests!(rc_write_first, Lab, WRITE_FIRST, write_first());

/// RC RDMA READ Request for 4 KiB.
const READ_REQUEST: [u8; 32] = [
    0x0c, 0x00, 0xff, 0xff, // BTH: READ Request; P_Key
    0x00, 0x00, 0x00, 0x11, // BTH: DestQP 0x11
    0x80, 0x00, 0x02, 0x00, // BTH: AckReq; PSN 0x200
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x30, 0x00, // RETH: VA 0x7f0000003000
    0x00, 0x00, 0x12, 0x34, // RETH: R_Key
    0x00, 0x00, 0x10, 0x00, // RETH: DMA length 4096
    0x21, 0xe1, 0xf3, 0x9d, // ICRC
];

fn read_request() -> Packet<'static> {
    Packet {
        reth: Some(Reth {
            va: 0x7f00_0000_3000,
            rkey: Rkey(0x1234),
            dma_len: 0x1000,
        }),
        ..Packet::new(bth(Opcode::RcRdmaReadRequest, 0x11, 0x200, true))
    }
}
four_tests!(rc_read_request, Lab, READ_REQUEST, read_request());

/// RC RDMA READ Response Middle (no AETH).
const READ_RESPONSE_MIDDLE: [u8; 24] = [
    0x0e, 0x00, 0xff, 0xff, // BTH: READ Response Middle; P_Key
    0x00, 0x00, 0x00, 0x22, // BTH: DestQP 0x22
    0x00, 0x00, 0x02, 0x01, // BTH: PSN 0x201
    0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, // payload
    0xc0, 0x93, 0x52, 0x87, // ICRC
];

fn read_response_middle() -> Packet<'static> {
    Packet {
        payload: &[0xaa; 8],
        ..Packet::new(bth(Opcode::RcRdmaReadResponseMiddle, 0x22, 0x201, false))
    }
}
four_tests!(
    rc_read_response_middle,
    Lab,
    READ_RESPONSE_MIDDLE,
    read_response_middle()
);

/// UD SEND Only to QP1 (a GSI MAD, shortened to 4 bytes).
const UD_SEND_ONLY: [u8; 28] = [
    0x64, 0x00, 0xff, 0xff, // BTH: UD SEND Only; P_Key
    0x00, 0x00, 0x00, 0x01, // BTH: DestQP 1
    0x00, 0x00, 0x00, 0x0a, // BTH: PSN 10
    0x80, 0x01, 0x00, 0x00, // DETH: Q_Key 0x80010000 (GSI)
    0x00, 0x00, 0x00, 0x01, // DETH: reserved; source QP 1
    b'M', b'A', b'D', b'!', // payload
    0xe0, 0xc2, 0x2c, 0x23, // ICRC
];

fn ud_send_only() -> Packet<'static> {
    Packet {
        deth: Some(Deth {
            qkey: QKey::GSI,
            src_qp: Qpn::GSI,
        }),
        payload: b"MAD!",
        ..Packet::new(bth(Opcode::UdSendOnly, 1, 10, false))
    }
}
four_tests!(ud_send_only_to_qp1, Lab, UD_SEND_ONLY, ud_send_only());

/// RC SEND Only with Invalidate, 3-byte payload.
const SEND_ONLY_INV: [u8; 24] = [
    0x17, 0x10, 0xff, 0xff, // BTH: SEND Only with Invalidate; PadCnt 1; P_Key
    0x00, 0x00, 0x00, 0x11, // BTH: DestQP 0x11
    0x80, 0x00, 0x03, 0x00, // BTH: AckReq; PSN 0x300
    0x00, 0x01, 0x2a, 0x05, // IETH: R_Key 0x00012a05
    b'S', b'R', b'P', // payload
    0x00, // pad
    0xac, 0x27, 0xa8, 0xa4, // ICRC
];

fn send_only_inv() -> Packet<'static> {
    Packet {
        bth: Bth {
            pad_count: 1,
            ..bth(Opcode::RcSendOnlyWithInvalidate, 0x11, 0x300, true)
        },
        ieth: Some(Ieth {
            rkey: Rkey(0x0001_2a05),
        }),
        payload: b"SRP",
        ..Packet::new(Bth::new(Opcode::RcSendOnly, Qpn::GSI, Psn::default()))
    }
}
four_tests!(
    rc_send_only_with_invalidate,
    Lab,
    SEND_ONLY_INV,
    send_only_inv()
);

/// RC RDMA WRITE Only with Immediate, 2-byte payload.
const WRITE_ONLY_IMM: [u8; 40] = [
    0x0b, 0x20, 0xff, 0xff, // BTH: WRITE Only with Immediate; PadCnt 2; P_Key
    0x00, 0x00, 0x00, 0x11, // BTH: DestQP 0x11
    0x80, 0x00, 0x03, 0x01, // BTH: AckReq; PSN 0x301
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, // RETH: VA 0x1000
    0x00, 0x00, 0x12, 0x34, // RETH: R_Key
    0x00, 0x00, 0x00, 0x02, // RETH: DMA length 2
    0xde, 0xad, 0xbe, 0xef, // ImmDt
    0xca, 0xfe, // payload
    0x00, 0x00, // pad
    0xb3, 0xb6, 0xb9, 0x67, // ICRC
];

fn write_only_imm() -> Packet<'static> {
    Packet {
        bth: Bth {
            pad_count: 2,
            ..bth(Opcode::RcRdmaWriteOnlyWithImmediate, 0x11, 0x301, true)
        },
        reth: Some(Reth {
            va: 0x1000,
            rkey: Rkey(0x1234),
            dma_len: 2,
        }),
        imm: Some(ImmDt { imm: 0xdead_beef }),
        payload: &[0xca, 0xfe],
        ..Packet::new(Bth::new(Opcode::RcSendOnly, Qpn::GSI, Psn::default()))
    }
}
four_tests!(
    rc_write_only_with_immediate,
    Lab,
    WRITE_ONLY_IMM,
    write_only_imm()
);

/// RC ATOMIC Acknowledge (AETH then AtomicAckETH).
const ATOMIC_ACK: [u8; 28] = [
    0x12, 0x00, 0xff, 0xff, // BTH: ATOMIC Acknowledge; P_Key
    0x00, 0x00, 0x00, 0x22, // BTH: DestQP 0x22
    0x00, 0x00, 0x04, 0x00, // BTH: PSN 0x400
    0x1f, 0x00, 0x00, 0x05, // AETH: ACK unlimited; MSN 5
    0, 0, 0, 0, 0, 0, 0, 0x01, // AtomicAckETH: original data 1
    0x8d, 0x08, 0xd5, 0x75, // ICRC
];

fn atomic_ack() -> Packet<'static> {
    Packet {
        aeth: Some(Aeth {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 5,
        }),
        atomic_ack: Some(AtomicAckEth { orig: 1 }),
        ..Packet::new(bth(Opcode::RcAtomicAcknowledge, 0x22, 0x400, false))
    }
}
four_tests!(rc_atomic_ack, Lab, ATOMIC_ACK, atomic_ack());

/// RC CmpSwap.
const CMP_SWAP: [u8; 44] = [
    0x13, 0x00, 0xff, 0xff, // BTH: CmpSwap; P_Key
    0x00, 0x00, 0x00, 0x11, // BTH: DestQP 0x11
    0x80, 0x00, 0x04, 0x01, // BTH: AckReq; PSN 0x401
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x20, 0x08, // AtomicETH: VA
    0x00, 0x00, 0x56, 0x78, // AtomicETH: R_Key
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // AtomicETH: swap
    0, 0, 0, 0, 0, 0, 0, 0x01, // AtomicETH: compare
    0xfa, 0x1b, 0xfa, 0x14, // ICRC
];

fn cmp_swap() -> Packet<'static> {
    Packet {
        atomic: Some(AtomicEth {
            va: 0x7f00_0000_2008,
            rkey: Rkey(0x5678),
            swap_add: 0x1122_3344_5566_7788,
            compare: 1,
        }),
        ..Packet::new(bth(Opcode::RcCompareSwap, 0x11, 0x401, true))
    }
}
four_tests!(rc_compare_swap, Lab, CMP_SWAP, cmp_swap());

#[test]
fn parse_rejects_what_the_opcode_forbids() {
    let err = |b: &[u8]| Packet::parse(b).expect_err("must not parse");
    let mut b = SEND_ONLY;
    b[0] = 0x15; // reserved opcode
    assert_eq!(err(&b), WireError::UnknownOpcode(0x15));
    let mut b = SEND_ONLY;
    b[1] |= 0x01; // TVer 1
    assert!(matches!(err(&b), WireError::BadField { field: "TVer", .. }));
    // An ACK with four payload bytes.
    let mut b = GOLDEN_ACK.to_vec();
    b.splice(16..16, [1, 2, 3, 4]);
    assert_eq!(
        err(&b),
        WireError::UnexpectedPayload {
            opcode: 0x11,
            len: 4
        }
    );
    // PadCnt 3 with no room for pad: a READ Response Middle of 0 bytes + ICRC.
    let mut b = READ_RESPONSE_MIDDLE[..12].to_vec();
    b[1] = 0x30;
    b.extend_from_slice(&[0; 4]);
    assert!(matches!(err(&b), WireError::Truncated { .. }));
    // BTH to ICRC not a multiple of 4.
    let b = &SEND_ONLY[..SEND_ONLY.len() - 1];
    assert!(matches!(
        err(b),
        WireError::BadField {
            field: "length",
            ..
        }
    ));
    assert!(matches!(err(&[]), WireError::Truncated { what: "BTH", .. }));
}

#[test]
fn emit_rejects_headers_payload_and_short_buffers() {
    let ctx = lab();
    let mut buf = [0u8; 128];
    let p = Packet {
        reth: None,
        ..read_request()
    };
    assert_eq!(
        p.emit(&mut buf, &ctx),
        Err(WireError::HeaderMismatch {
            opcode: 0x0c,
            header: "RETH",
            required: true
        })
    );
    let p = Packet {
        imm: Some(ImmDt { imm: 1 }),
        ..send_only()
    };
    assert_eq!(
        p.emit(&mut buf, &ctx),
        Err(WireError::HeaderMismatch {
            opcode: 0x04,
            header: "ImmDt",
            required: false
        })
    );
    let p = Packet {
        payload: b"x",
        ..golden_ack()
    };
    assert!(matches!(
        p.emit(&mut buf, &ctx),
        Err(WireError::UnexpectedPayload { .. })
    ));
    let p = Packet::new(bth(Opcode::Unknown(0x15), 1, 1, false));
    assert_eq!(p.emit(&mut buf, &ctx), Err(WireError::UnknownOpcode(0x15)));
    let big = vec![0u8; MAX_UDP_PAYLOAD];
    let p = Packet {
        payload: &big,
        ..send_only()
    };
    let mut out = vec![0u8; MAX_UDP_PAYLOAD + 64];
    assert!(p.emit(&mut out, &ctx).is_err());
    assert!(matches!(
        send_only().emit(&mut buf[..23], &ctx),
        Err(WireError::BufferTooSmall { need: 24, .. })
    ));
}

#[test]
fn emit_with_fills_in_place_and_matches_emit() {
    let ctx = lab();
    let template = Packet {
        payload: &[],
        ..send_only()
    };
    let mut buf = [0xa5u8; 64];
    let n = template
        .emit_with(&mut buf, 5, |out| out.copy_from_slice(b"hello"), &ctx)
        .expect("emit_with");
    assert_eq!(&buf[..n], &SEND_ONLY);
    assert_eq!(template.buffer_len_with(5), n);
}

#[test]
fn verify_and_parse_verified_agree() {
    let mut b = SEND_ONLY;
    assert!(icrc::verify(&lab(), &b));
    b[12] ^= 0x20; // payload 'h' -> 'H'
    assert!(!icrc::verify(&lab(), &b));
    assert!(matches!(
        Packet::parse_verified(&b, &lab()),
        Err(WireError::BadIcrc { .. })
    ));
    // FECN set by a switch on the way: still verifies (byte 4 is masked).
    let mut b = SEND_ONLY;
    b[4] |= 0x80;
    let p = Packet::parse_verified(&b, &lab()).expect("FECN is masked");
    assert!(p.bth.fecn);
}
