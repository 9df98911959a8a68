//! The base transport header: 12 bytes at the start of every RoCEv2 UDP payload (IBTA Vol 1
//! 9.2; Linux `rxe_hdr.h`).

use super::error::{fit, read_fixed, write_fixed};
use super::{Opcode, WireError};
use crate::ids::{PKey, Psn, Qpn};
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Size of the BTH.
pub const BTH_LEN: usize = 12;

const SE: u8 = 0x80;
const MIG_REQ: u8 = 0x40;
const PAD_SHIFT: u8 = 4;
const TVER_MASK: u8 = 0x0f;
const FECN: u32 = 0x8000_0000;
const BECN: u32 = 0x4000_0000;
const ACK_REQ: u32 = 0x8000_0000;
const MASK_24: u32 = 0x00ff_ffff;

/// The BTH as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct BthHdr {
    /// Opcode.
    pub opcode: u8,
    /// SE(0x80) | MigReq(0x40) | PadCnt(0x30) | TVer(0x0f).
    pub flags: u8,
    /// Partition key.
    pub pkey: U16,
    /// FECN(bit 31) | BECN(bit 30) | reserved(29:24) | DestQP(23:0).
    pub fecn_becn_dest_qp: U32,
    /// AckReq(bit 31) | reserved(30:24) | PSN(23:0).
    pub ack_req_psn: U32,
}
const _: () = assert!(size_of::<BthHdr>() == BTH_LEN);

impl BthHdr {
    /// Solicited event.
    pub fn solicited(&self) -> bool {
        self.flags & SE != 0
    }

    /// Migration request.
    pub fn mig_req(&self) -> bool {
        self.flags & MIG_REQ != 0
    }

    /// Pad count (0..=3).
    pub fn pad_count(&self) -> u8 {
        (self.flags >> PAD_SHIFT) & 3
    }

    /// Transport header version (0 is the only one defined).
    pub fn tver(&self) -> u8 {
        self.flags & TVER_MASK
    }

    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.fecn_becn_dest_qp.get() & FECN != 0
    }

    /// Backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.fecn_becn_dest_qp.get() & BECN != 0
    }

    /// Destination QP.
    pub fn dest_qp(&self) -> Qpn {
        Qpn::from_wire(self.fecn_becn_dest_qp.get())
    }

    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.ack_req_psn.get() & ACK_REQ != 0
    }

    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::from_wire(self.ack_req_psn.get())
    }
}

/// A base transport header.
///
/// Reserved bits are dropped on parse and written as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bth {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited event: the responder raises a solicited completion event.
    pub solicited: bool,
    /// Migration request (APM; we never set it, ConnectX may, see softrdma.md §1.2).
    pub mig_req: bool,
    /// Pad bytes between payload and ICRC (0..=3). [`super::Packet`] computes it on emit.
    pub pad_count: u8,
    /// Transport header version (0..=15; only 0 is defined).
    pub tver: u8,
    /// Partition key.
    pub pkey: PKey,
    /// Forward ECN: congestion seen on the way here.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Destination QP.
    pub dest_qp: Qpn,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number.
    pub psn: Psn,
}

impl Bth {
    /// A BTH with the default P_Key and every flag clear.
    pub fn new(opcode: Opcode, dest_qp: Qpn, psn: Psn) -> Self {
        Bth {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: PKey::DEFAULT,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: false,
            psn,
        }
    }

    /// The raw header of this BTH; fails on a pad count or TVer too wide for its field.
    pub fn to_hdr(&self) -> Result<BthHdr, WireError> {
        let pad = fit("BTH", "PadCnt", self.pad_count.into(), 2)? as u8;
        let tver = fit("BTH", "TVer", self.tver.into(), 4)? as u8;
        let bit = |b: bool, v: u8| if b { v } else { 0 };
        let bit32 = |b: bool, v: u32| if b { v } else { 0 };
        Ok(BthHdr {
            opcode: self.opcode.into(),
            flags: bit(self.solicited, SE) | bit(self.mig_req, MIG_REQ) | pad << PAD_SHIFT | tver,
            pkey: U16::new(self.pkey.0),
            fecn_becn_dest_qp: U32::new(
                bit32(self.fecn, FECN) | bit32(self.becn, BECN) | (self.dest_qp.get() & MASK_24),
            ),
            ack_req_psn: U32::new(bit32(self.ack_req, ACK_REQ) | (self.psn.get() & MASK_24)),
        })
    }

    /// The BTH of a raw header.
    pub fn from_hdr(h: &BthHdr) -> Self {
        Bth {
            opcode: h.opcode.into(),
            solicited: h.solicited(),
            mig_req: h.mig_req(),
            pad_count: h.pad_count(),
            tver: h.tver(),
            pkey: PKey(h.pkey.get()),
            fecn: h.fecn(),
            becn: h.becn(),
            dest_qp: h.dest_qp(),
            ack_req: h.ack_req(),
            psn: h.psn(),
        }
    }
}

impl<'a> WireRepr<'a> for Bth {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: BthHdr = read_fixed("BTH", buf)?;
        Ok(Bth::from_hdr(&h))
    }

    fn buffer_len(&self) -> usize {
        BTH_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        write_fixed("BTH", &self.to_hdr()?, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// BTH of the golden RDMA WRITE Only in softrdma.md §1.7 (tshark-decoded there).
    const WRITE_ONLY_BTH: [u8; 12] = [
        0x0a, // opcode: RC RDMA WRITE Only
        0x30, // SE 0, MigReq 0, PadCnt 3, TVer 0
        0xff, 0xff, // P_Key: default
        0x00, // FECN 0, BECN 0, reserved
        0x00, 0x00, 0x11, // DestQP 0x11
        0x80, // AckReq 1, reserved
        0x00, 0x00, 0x64, // PSN 100
    ];

    fn write_only_bth() -> Bth {
        Bth {
            pad_count: 3,
            ack_req: true,
            ..Bth::new(
                Opcode::RcRdmaWriteOnly,
                Qpn::from_wire(0x11),
                Psn::from_wire(100),
            )
        }
    }

    /// Every flag set, widest values (built by hand from the rxe_hdr.h masks).
    const ALL_SET_BTH: [u8; 12] = [
        0x81, // opcode: CNP
        0xf0, // SE 1, MigReq 1, PadCnt 3, TVer 0
        0x7f, 0xfe, // P_Key 0x7ffe (limited member)
        0xc0, // FECN 1, BECN 1, reserved 0
        0xff, 0xff, 0xff, // DestQP 0xffffff
        0x80, // AckReq 1
        0xff, 0xff, 0xff, // PSN 0xffffff
    ];

    fn all_set_bth() -> Bth {
        Bth {
            solicited: true,
            mig_req: true,
            pad_count: 3,
            tver: 0,
            pkey: PKey(0x7ffe),
            fecn: true,
            becn: true,
            ack_req: true,
            ..Bth::new(
                Opcode::Cnp,
                Qpn::from_wire(0xff_ffff),
                Psn::from_wire(0xff_ffff),
            )
        }
    }

    #[test]
    fn bth_decodes_known_bytes() {
        check::decodes(&WRITE_ONLY_BTH, &write_only_bth());
        check::decodes(&ALL_SET_BTH, &all_set_bth());
    }

    #[test]
    fn bth_emits_known_bytes() {
        check::emits(&write_only_bth(), &WRITE_ONLY_BTH);
        check::emits(&all_set_bth(), &ALL_SET_BTH);
    }

    #[test]
    fn bth_round_trips() {
        check::round_trips(&write_only_bth(), &mut Vec::new());
        let odd = Bth {
            tver: 0xf,
            ..Bth::new(Opcode::Unknown(0x55), Qpn::GSI, Psn::from_wire(7))
        };
        check::round_trips(&odd, &mut Vec::new());
    }

    #[test]
    fn bth_truncated_errors() {
        check::truncation_errors::<Bth>(&WRITE_ONLY_BTH);
    }

    #[test]
    fn bth_reserved_bits_ignored_and_wide_values_rejected() {
        let mut b = WRITE_ONLY_BTH;
        b[4] |= 0x3f; // resv6
        b[8] |= 0x7f; // resv7
        check::decodes(&b, &write_only_bth());
        let wide = Bth {
            pad_count: 4,
            ..write_only_bth()
        };
        assert!(wide.emit(&mut [0; 12]).is_err());
        let wide = Bth {
            tver: 16,
            ..write_only_bth()
        };
        assert!(wide.emit(&mut [0; 12]).is_err());
    }
}
