//! BTH opcodes and the one table that says what each one carries (IBTA Vol 1 9.2.3 and
//! table 39; Linux `include/rdma/ib_pack.h`, `rxe_opcode.c`).
//!
//! The opcode's top three bits name the transport (RC 0x00, UC 0x20, RD 0x40, UD 0x60,
//! CNP 0x80), the low five the operation. RC and UC share the operation numbers, so one
//! 24-row table indexed by the low five bits serves both (UC has only the SEND and
//! RDMA WRITE rows); UD has two SEND opcodes and CNP one. RD, XRC, FLUSH and ATOMIC WRITE
//! are not implemented: [`Opcode::info`] returns `None` for them.

use super::WireError;
use bitflags::bitflags;

wirekit::open_enum! {
    /// A BTH opcode.
    pub enum Opcode(u8) {
        /// RC SEND First.
        RcSendFirst = 0x00,
        /// RC SEND Middle.
        RcSendMiddle = 0x01,
        /// RC SEND Last.
        RcSendLast = 0x02,
        /// RC SEND Last with Immediate.
        RcSendLastWithImmediate = 0x03,
        /// RC SEND Only.
        RcSendOnly = 0x04,
        /// RC SEND Only with Immediate.
        RcSendOnlyWithImmediate = 0x05,
        /// RC RDMA WRITE First.
        RcRdmaWriteFirst = 0x06,
        /// RC RDMA WRITE Middle.
        RcRdmaWriteMiddle = 0x07,
        /// RC RDMA WRITE Last.
        RcRdmaWriteLast = 0x08,
        /// RC RDMA WRITE Last with Immediate.
        RcRdmaWriteLastWithImmediate = 0x09,
        /// RC RDMA WRITE Only.
        RcRdmaWriteOnly = 0x0a,
        /// RC RDMA WRITE Only with Immediate.
        RcRdmaWriteOnlyWithImmediate = 0x0b,
        /// RC RDMA READ Request.
        RcRdmaReadRequest = 0x0c,
        /// RC RDMA READ Response First.
        RcRdmaReadResponseFirst = 0x0d,
        /// RC RDMA READ Response Middle.
        RcRdmaReadResponseMiddle = 0x0e,
        /// RC RDMA READ Response Last.
        RcRdmaReadResponseLast = 0x0f,
        /// RC RDMA READ Response Only.
        RcRdmaReadResponseOnly = 0x10,
        /// RC Acknowledge.
        RcAcknowledge = 0x11,
        /// RC ATOMIC Acknowledge.
        RcAtomicAcknowledge = 0x12,
        /// RC CmpSwap.
        RcCompareSwap = 0x13,
        /// RC FetchAdd.
        RcFetchAdd = 0x14,
        /// RC SEND Last with Invalidate.
        RcSendLastWithInvalidate = 0x16,
        /// RC SEND Only with Invalidate.
        RcSendOnlyWithInvalidate = 0x17,
        /// UC SEND First.
        UcSendFirst = 0x20,
        /// UC SEND Middle.
        UcSendMiddle = 0x21,
        /// UC SEND Last.
        UcSendLast = 0x22,
        /// UC SEND Last with Immediate.
        UcSendLastWithImmediate = 0x23,
        /// UC SEND Only.
        UcSendOnly = 0x24,
        /// UC SEND Only with Immediate.
        UcSendOnlyWithImmediate = 0x25,
        /// UC RDMA WRITE First.
        UcRdmaWriteFirst = 0x26,
        /// UC RDMA WRITE Middle.
        UcRdmaWriteMiddle = 0x27,
        /// UC RDMA WRITE Last.
        UcRdmaWriteLast = 0x28,
        /// UC RDMA WRITE Last with Immediate.
        UcRdmaWriteLastWithImmediate = 0x29,
        /// UC RDMA WRITE Only.
        UcRdmaWriteOnly = 0x2a,
        /// UC RDMA WRITE Only with Immediate.
        UcRdmaWriteOnlyWithImmediate = 0x2b,
        /// UD SEND Only.
        UdSendOnly = 0x64,
        /// UD SEND Only with Immediate.
        UdSendOnlyWithImmediate = 0x65,
        /// RoCEv2 Congestion Notification Packet (annex A17.9.3).
        Cnp = 0x81,
    }
}

/// The transport service an opcode belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// Congestion notification (RoCEv2 annex; no QP semantics beyond the destination QP).
    Cnp,
}

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message (also every ACK, READ request, atomic and CNP).
    Only,
}

/// The operation a packet belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// SEND (with or without immediate or invalidate).
    Send,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// RDMA READ request.
    ReadRequest,
    /// RDMA READ response.
    ReadResponse,
    /// Acknowledge (ACK or NAK).
    Ack,
    /// Atomic acknowledge.
    AtomicAck,
    /// Compare and swap.
    CompareSwap,
    /// Fetch and add.
    FetchAdd,
    /// Congestion notification.
    Cnp,
}

bitflags! {
    /// The extension headers that follow the BTH. On the wire they appear in the order of
    /// [`Headers::WIRE_ORDER`] (IBTA 9.2): DETH, RETH, AtomicETH, AETH, AtomicAckETH,
    /// ImmDt, IETH.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Headers: u8 {
        /// RDMA extended transport header (16 bytes).
        const RETH = 0x01;
        /// ACK extended transport header (4 bytes).
        const AETH = 0x02;
        /// Datagram extended transport header (8 bytes).
        const DETH = 0x04;
        /// Immediate data (4 bytes).
        const IMMDT = 0x08;
        /// Invalidate extended transport header (4 bytes).
        const IETH = 0x10;
        /// Atomic extended transport header (28 bytes).
        const ATOMIC_ETH = 0x20;
        /// Atomic acknowledge extended transport header (8 bytes).
        const ATOMIC_ACK_ETH = 0x40;
    }
}

impl Headers {
    /// Each header with its name and size, in the order they follow the BTH.
    pub const WIRE_ORDER: [(Headers, &'static str, usize); 7] = [
        (Headers::DETH, "DETH", 8),
        (Headers::RETH, "RETH", 16),
        (Headers::ATOMIC_ETH, "AtomicETH", 28),
        (Headers::AETH, "AETH", 4),
        (Headers::ATOMIC_ACK_ETH, "AtomicAckETH", 8),
        (Headers::IMMDT, "ImmDt", 4),
        (Headers::IETH, "IETH", 4),
    ];

    /// The total size of these headers in bytes.
    pub const fn len_bytes(self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < Self::WIRE_ORDER.len() {
            if self.contains(Self::WIRE_ORDER[i].0) {
                n += Self::WIRE_ORDER[i].2;
            }
            i += 1;
        }
        n
    }
}

/// What an opcode carries, from the table in this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpcodeInfo {
    /// Its transport.
    pub transport: Transport,
    /// The operation.
    pub kind: Kind,
    /// Where the packet sits in its message.
    pub position: Position,
    /// The extension headers after the BTH.
    pub headers: Headers,
    /// Whether the packet may carry payload bytes.
    pub has_payload: bool,
}

impl OpcodeInfo {
    /// BTH plus extension headers, in bytes.
    pub const fn header_len(&self) -> usize {
        super::bth::BTH_LEN + self.headers.len_bytes()
    }

    /// The responder's length rule (rxe `rxe_resp.c check_length`): First and Middle
    /// packets carry exactly one MTU, Last 1..=MTU, Only 0..=MTU; no payload where the opcode
    /// has none.
    pub fn check_payload_len(&self, len_bytes: usize, mtu_bytes: usize) -> Result<(), WireError> {
        let ok = match (self.has_payload, self.position) {
            (false, _) => len_bytes == 0,
            (true, Position::First | Position::Middle) => len_bytes == mtu_bytes,
            (true, Position::Last) => (1..=mtu_bytes).contains(&len_bytes),
            (true, Position::Only) => len_bytes <= mtu_bytes,
        };
        if ok {
            Ok(())
        } else {
            Err(WireError::BadField {
                what: "packet",
                field: "payload length",
                value: len_bytes as u64,
                why: "breaks the MTU rule for its position in the message",
            })
        }
    }
}

/// A row of the RC/UC table: (kind, position, headers, payload, exists on UC).
type Row = (Kind, Position, Headers, bool, bool);

const NONE: Headers = Headers::empty();
const IMM: Headers = Headers::IMMDT;
const RETH: Headers = Headers::RETH;
const RETH_IMM: Headers = Headers::RETH.union(Headers::IMMDT);
const AETH: Headers = Headers::AETH;
const AETH_ATOMIC_ACK: Headers = Headers::AETH.union(Headers::ATOMIC_ACK_ETH);
const ATOMIC: Headers = Headers::ATOMIC_ETH;
const IETH: Headers = Headers::IETH;

/// RC/UC operations by the opcode's low five bits (IBTA table 39; 0x15 is reserved).
#[rustfmt::skip]
const RC_UC: [Option<Row>; 24] = {
    use Kind::*;
    use Position::*;
    [
        //    kind          position headers          payload UC
        Some((Send,         First,  NONE,            true,  true)),  // 0x00
        Some((Send,         Middle, NONE,            true,  true)),  // 0x01
        Some((Send,         Last,   NONE,            true,  true)),  // 0x02
        Some((Send,         Last,   IMM,             true,  true)),  // 0x03
        Some((Send,         Only,   NONE,            true,  true)),  // 0x04
        Some((Send,         Only,   IMM,             true,  true)),  // 0x05
        Some((RdmaWrite,    First,  RETH,            true,  true)),  // 0x06
        Some((RdmaWrite,    Middle, NONE,            true,  true)),  // 0x07
        Some((RdmaWrite,    Last,   NONE,            true,  true)),  // 0x08
        Some((RdmaWrite,    Last,   IMM,             true,  true)),  // 0x09
        Some((RdmaWrite,    Only,   RETH,            true,  true)),  // 0x0a
        Some((RdmaWrite,    Only,   RETH_IMM,        true,  true)),  // 0x0b
        Some((ReadRequest,  Only,   RETH,            false, false)), // 0x0c
        Some((ReadResponse, First,  AETH,            true,  false)), // 0x0d
        Some((ReadResponse, Middle, NONE,            true,  false)), // 0x0e
        Some((ReadResponse, Last,   AETH,            true,  false)), // 0x0f
        Some((ReadResponse, Only,   AETH,            true,  false)), // 0x10
        Some((Ack,          Only,   AETH,            false, false)), // 0x11
        Some((AtomicAck,    Only,   AETH_ATOMIC_ACK, false, false)), // 0x12
        Some((CompareSwap,  Only,   ATOMIC,          false, false)), // 0x13
        Some((FetchAdd,     Only,   ATOMIC,          false, false)), // 0x14
        None,                                                        // 0x15 reserved
        Some((Send,         Last,   IETH,            true,  false)), // 0x16
        Some((Send,         Only,   IETH,            true,  false)), // 0x17
    ]
};

impl Opcode {
    /// What this opcode carries; `None` for reserved and unimplemented opcodes.
    pub fn info(self) -> Option<OpcodeInfo> {
        let raw = u8::from(self);
        let op = usize::from(raw & 0x1f);
        let row = |transport, (kind, position, headers, has_payload, _): Row| OpcodeInfo {
            transport,
            kind,
            position,
            headers,
            has_payload,
        };
        match raw >> 5 {
            0 => RC_UC
                .get(op)
                .copied()
                .flatten()
                .map(|r| row(Transport::Rc, r)),
            1 => match RC_UC.get(op).copied().flatten() {
                Some(r) if r.4 => Some(row(Transport::Uc, r)),
                _ => None,
            },
            // UD: the two SEND Only rows, with a DETH before any ImmDt.
            3 if op == 0x04 || op == 0x05 => RC_UC[op].map(|r| {
                let mut info = row(Transport::Ud, r);
                info.headers |= Headers::DETH;
                info
            }),
            // CNP: BTH and 16 reserved bytes, which arrive as payload (annex A17.9.3).
            4 if op == 0x01 => Some(OpcodeInfo {
                transport: Transport::Cnp,
                kind: Kind::Cnp,
                position: Position::Only,
                headers: NONE,
                has_payload: true,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_opcode_has_info_and_unknown_ones_none() {
        for raw in 0..=255u8 {
            let op = Opcode::from(raw);
            assert_eq!(op.is_known(), op.info().is_some(), "opcode {raw:#04x}");
        }
        assert_eq!(Opcode::from(0x15).info(), None);
        assert_eq!(Opcode::from(0x2c).info(), None, "UC has no READ");
        assert_eq!(Opcode::from(0x60).info(), None, "UD has no SEND First");
    }

    #[test]
    fn header_composition_matches_ib_pack_h() {
        let len = |raw: u8| Opcode::from(raw).info().map(|i| i.header_len());
        // Header lengths as hfi1 hdr_len_by_opcode minus LRH(8) and ICRC(4).
        assert_eq!(len(0x04), Some(12)); // SEND_ONLY
        assert_eq!(len(0x05), Some(16)); // SEND_ONLY_WITH_IMMEDIATE
        assert_eq!(len(0x06), Some(28)); // RDMA_WRITE_FIRST
        assert_eq!(len(0x0b), Some(32)); // RDMA_WRITE_ONLY_WITH_IMMEDIATE
        assert_eq!(len(0x0c), Some(28)); // RDMA_READ_REQUEST
        assert_eq!(len(0x0e), Some(12)); // RDMA_READ_RESPONSE_MIDDLE
        assert_eq!(len(0x11), Some(16)); // ACKNOWLEDGE
        assert_eq!(len(0x12), Some(24)); // ATOMIC_ACKNOWLEDGE
        assert_eq!(len(0x13), Some(40)); // COMPARE_SWAP
        assert_eq!(len(0x17), Some(16)); // SEND_ONLY_WITH_INVALIDATE
        assert_eq!(len(0x2b), Some(32)); // UC RDMA_WRITE_ONLY_WITH_IMMEDIATE
        assert_eq!(len(0x64), Some(20)); // UD SEND_ONLY
        assert_eq!(len(0x65), Some(24)); // UD SEND_ONLY_WITH_IMMEDIATE
        let ud = Opcode::UdSendOnlyWithImmediate.info().expect("UD");
        assert_eq!(ud.transport, Transport::Ud);
        assert_eq!(ud.headers, Headers::DETH | Headers::IMMDT);
        let ack = Opcode::RcAcknowledge.info().expect("ACK");
        assert_eq!((ack.kind, ack.has_payload), (Kind::Ack, false));
    }

    #[test]
    fn payload_length_rule() {
        let first = Opcode::RcSendFirst.info().expect("known");
        assert!(first.check_payload_len(1024, 1024).is_ok());
        assert!(first.check_payload_len(1000, 1024).is_err());
        let last = Opcode::RcRdmaWriteLast.info().expect("known");
        assert!(last.check_payload_len(0, 1024).is_err());
        assert!(last.check_payload_len(1024, 1024).is_ok());
        let only = Opcode::RcSendOnly.info().expect("known");
        assert!(only.check_payload_len(0, 1024).is_ok());
        assert!(only.check_payload_len(1025, 1024).is_err());
        let read = Opcode::RcRdmaReadRequest.info().expect("known");
        assert!(read.check_payload_len(4, 1024).is_err());
    }
}
