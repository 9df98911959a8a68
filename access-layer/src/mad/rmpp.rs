//! The 12-byte RMPP header that follows the common header in SA and DM MADs, active or not
//! (IBTA Vol1 13.6.2, table 169; Linux `struct ib_rmpp_hdr`).
#[allow(unused_imports)]
use crate::prelude::*;

use super::{MadError, check_width, read_fixed, write_fixed};
use wirekit::WireRepr;
use zerocopy::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes in the RMPP header.
pub const RMPP_HEADER_LEN: usize = 12;
/// RMPPVersion of an active transfer (Linux `IB_MGMT_RMPP_VERSION`).
pub const RMPP_VERSION: u8 = 1;
/// RRespTime meaning "no time given" (Linux `IB_MGMT_RMPP_NO_RESPTIME`).
pub const RMPP_NO_RESPTIME: u8 = 0x1f;

/// The RMPP header as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RmppHdr {
    /// RMPPVersion (0 when RMPP is not used).
    pub version: u8,
    /// RMPPType.
    pub rmpp_type: u8,
    /// RRespTime (bits 7:3) and RMPPFlags (bits 2:0).
    pub rtime_flags: u8,
    /// RMPPStatus.
    pub status: u8,
    /// SegmentNumber (DATA, ACK) or reserved.
    pub seg_num: U32,
    /// PayloadLength (DATA) or NewWindowLast (ACK).
    pub paylen_newwin: U32,
}
const _: () = assert!(size_of::<RmppHdr>() == RMPP_HEADER_LEN);

wirekit::open_enum! {
    /// RMPPType (Linux `IB_MGMT_RMPP_TYPE_*`); 0 when RMPP is inactive.
    pub enum RmppType(u8) {
        /// No RMPP.
        None = 0,
        /// DATA segment.
        Data = 1,
        /// ACK.
        Ack = 2,
        /// STOP.
        Stop = 3,
        /// ABORT.
        Abort = 4,
    }
}

bitflags::bitflags! {
    /// RMPPFlags, the low 3 bits of byte 2 (Linux `IB_MGMT_RMPP_FLAG_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct RmppFlags: u8 {
        /// The transfer is RMPP-active.
        const ACTIVE = 0x01;
        /// First segment.
        const FIRST = 0x02;
        /// Last segment.
        const LAST = 0x04;
    }
}

/// The validated RMPP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmppHeader {
    /// RMPPVersion.
    pub version: u8,
    /// RMPPType.
    pub rmpp_type: RmppType,
    /// RRespTime, 5 bits.
    pub resp_time: u8,
    /// RMPPFlags (3 bits).
    pub flags: RmppFlags,
    /// RMPPStatus (0 normal; 1 resources exhausted; 118–127 abort reasons).
    pub status: u8,
    /// SegmentNumber.
    pub seg_num: u32,
    /// PayloadLength (DATA) or NewWindowLast (ACK).
    pub paylen_newwin: u32,
}

impl RmppHeader {
    /// The header of a MAD that does not use RMPP: all zero (what ib_srpt and srp_daemon send).
    pub const INACTIVE: RmppHeader = RmppHeader {
        version: 0,
        rmpp_type: RmppType::None,
        resp_time: 0,
        flags: RmppFlags::empty(),
        status: 0,
        seg_num: 0,
        paylen_newwin: 0,
    };
}

impl Default for RmppHeader {
    fn default() -> Self {
        Self::INACTIVE
    }
}

impl<'a> WireRepr<'a> for RmppHeader {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let h: RmppHdr = read_fixed("RMPP header", buf)?;
        Ok(RmppHeader {
            version: h.version,
            rmpp_type: h.rmpp_type.into(),
            resp_time: h.rtime_flags >> 3,
            flags: RmppFlags::from_bits_retain(h.rtime_flags & 0x07),
            status: h.status,
            seg_num: h.seg_num.get(),
            paylen_newwin: h.paylen_newwin.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        RMPP_HEADER_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        check_width("RMPP header", "RRespTime", self.resp_time.into(), 5)?;
        check_width("RMPP header", "RMPPFlags", self.flags.bits().into(), 3)?;
        let h = RmppHdr {
            version: self.version,
            rmpp_type: self.rmpp_type.into(),
            rtime_flags: (self.resp_time << 3) | self.flags.bits(),
            status: self.status,
            seg_num: U32::new(self.seg_num),
            paylen_newwin: U32::new(self.paylen_newwin),
        };
        write_fixed("RMPP header", &h, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// First and last DATA segment of a 3-record SA GetTableResp (layout: `struct ib_rmpp_hdr`).
    const RMPP: [u8; 12] = [
        0x01, // RMPPVersion 1
        0x01, // RMPPType DATA
        0xe7, // RRespTime 0x1c (<<3) | flags ACTIVE|FIRST|LAST
        0x00, // RMPPStatus
        0x00, 0x00, 0x00, 0x01, // SegmentNumber 1
        0x00, 0x00, 0x00, 0xd4, // PayloadLength: 20 (SA hdr) + 3 * 64
    ];

    fn rmpp() -> RmppHeader {
        RmppHeader {
            version: 1,
            rmpp_type: RmppType::Data,
            resp_time: 0x1c,
            flags: RmppFlags::all(),
            status: 0,
            seg_num: 1,
            paylen_newwin: 212,
        }
    }

    #[test]
    fn rmpp_decodes_known_bytes() {
        check::decodes(&RMPP, &rmpp());
    }

    #[test]
    fn rmpp_emits_known_bytes() {
        check::emits(&rmpp(), &RMPP);
    }

    #[test]
    fn rmpp_round_trips() {
        check::round_trips(&rmpp(), &mut Vec::new());
        check::round_trips(&RmppHeader::INACTIVE, &mut Vec::new());
    }

    #[test]
    fn rmpp_truncated_errors() {
        check::truncation_errors::<RmppHeader>(&RMPP);
    }

    #[test]
    fn rmpp_types_match_ib_mad_h() {
        assert_eq!(RmppType::from(1u8), RmppType::Data);
        assert_eq!(u8::from(RmppType::Abort), 4);
        assert_eq!(RmppFlags::LAST.bits(), 1 << 2);
    }
}
