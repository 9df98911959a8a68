//! SRP_AER_REQ (target reports an asynchronous event with sense data, 36 bytes + sense) and
//! SRP_AER_RSP (initiator acknowledges, 16 bytes). Linux ib_srp only logs AERs but must answer
//! them; no Linux target sends one.

use super::cred::{TagOnlyHdr, emit_tag_only, parse_tag_only};
use super::error::{expect_type, out_buf, read_fixed};
use super::logout::FLAG_SOLNT;
use super::{IuType, Tag, WireError};
use scsi::Lun;
use wirekit::WireRepr;
use zerocopy::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

const IU: &str = "SRP_AER_REQ";

/// SRP_AER_REQ fixed part as laid out on the wire; sense data follows.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct AerReqHdr {
    /// 0x82.
    pub iu_type: u8,
    /// Bit 0: SOLNT.
    pub flags: u8,
    /// Reserved.
    pub reserved1: [u8; 2],
    /// REQUEST LIMIT DELTA.
    pub req_lim_delta: U32,
    /// Tag.
    pub tag: U64,
    /// Reserved.
    pub reserved2: [u8; 4],
    /// LUN the event concerns.
    pub lun: [u8; 8],
    /// SENSE DATA LIST LENGTH.
    pub sense_len: U32,
    /// Reserved.
    pub reserved3: [u8; 4],
}
const _: () = assert!(size_of::<AerReqHdr>() == 36);

/// SRP_AER_REQ: an asynchronous event for a LUN, described by sense data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AerReq<'a> {
    /// Solicited notification (AESOLNT was requested at login).
    pub solicited: bool,
    /// Credits granted with the event.
    pub req_lim_delta: u32,
    /// Tag.
    pub tag: Tag,
    /// The LUN.
    pub lun: Lun,
    /// Sense data describing the event.
    pub sense: &'a [u8],
}

impl<'a> WireRepr<'a> for AerReq<'a> {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: AerReqHdr = read_fixed(IU, buf)?;
        expect_type(IU, IuType::AerReq.into(), h.iu_type)?;
        let sense_len = h.sense_len.get() as usize;
        let start = size_of::<AerReqHdr>();
        let sense = start
            .checked_add(sense_len)
            .and_then(|end| buf.get(start..end))
            .ok_or(WireError::Truncated {
                iu: IU,
                need: start.saturating_add(sense_len),
                have: buf.len(),
            })?;
        Ok(AerReq {
            solicited: h.flags & FLAG_SOLNT != 0,
            req_lim_delta: h.req_lim_delta.get(),
            tag: Tag(h.tag.get()),
            lun: Lun(h.lun),
            sense,
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<AerReqHdr>() + self.sense.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let sense_len = u32::try_from(self.sense.len()).map_err(|_| WireError::BadField {
            iu: IU,
            field: "sense data length",
            value: self.sense.len() as u64,
            why: "does not fit in 32 bits",
        })?;
        let need = self.buffer_len();
        let out = out_buf(IU, buf, need)?;
        let h = AerReqHdr {
            iu_type: IuType::AerReq.into(),
            flags: if self.solicited { FLAG_SOLNT } else { 0 },
            reserved1: [0; 2],
            req_lim_delta: U32::new(self.req_lim_delta),
            tag: U64::new(self.tag.0),
            reserved2: [0; 4],
            lun: self.lun.0,
            sense_len: U32::new(sense_len),
            reserved3: [0; 4],
        };
        let (head, tail) = out.split_at_mut(size_of::<AerReqHdr>());
        head.copy_from_slice(h.as_bytes());
        tail.copy_from_slice(self.sense);
        Ok(need)
    }
}

/// SRP_AER_RSP: the initiator acknowledges an SRP_AER_REQ. Consumes no credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AerRsp {
    /// Tag of the SRP_AER_REQ.
    pub tag: Tag,
}

impl<'a> WireRepr<'a> for AerRsp {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        parse_tag_only("SRP_AER_RSP", IuType::AerRsp, buf).map(|tag| AerRsp { tag })
    }

    fn buffer_len(&self) -> usize {
        size_of::<TagOnlyHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        emit_tag_only("SRP_AER_RSP", IuType::AerRsp, self.tag, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// Fixed-format sense: UNIT ATTENTION, REPORTED LUNS DATA HAS CHANGED (3Fh/0Eh).
    const SENSE: [u8; 18] = [
        0x70, 0, 0x06, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x3f, 0x0e, 0, 0, 0, 0,
    ];

    /// SRP_AER_REQ for LUN 1 (layout: iPXE `struct srp_aer_req`).
    const AER_REQ: [u8; 54] = [
        0x82, // 0: IU type SRP_AER_REQ
        0x00, // 1: flags
        0, 0, // 2..3: reserved
        0x00, 0x00, 0x00, 0x01, // 4..7: request limit delta 1
        0, 0, 0, 0, 0, 0, 0, 0x33, // 8..15: tag
        0, 0, 0, 0, // 16..19: reserved
        0x00, 0x01, 0, 0, 0, 0, 0, 0, // 20..27: LUN 1 (peripheral addressing)
        0x00, 0x00, 0x00, 0x12, // 28..31: sense data list length 18
        0, 0, 0, 0, // 32..35: reserved
        // 36..53: sense data
        0x70, 0, 0x06, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x3f, 0x0e, 0, 0, 0, 0,
    ];

    fn aer_req() -> AerReq<'static> {
        AerReq {
            solicited: false,
            req_lim_delta: 1,
            tag: Tag(0x33),
            lun: Lun([0, 1, 0, 0, 0, 0, 0, 0]),
            sense: &SENSE,
        }
    }

    #[test]
    fn aer_req_decodes_known_bytes() {
        check::decodes(&AER_REQ, &aer_req());
    }

    #[test]
    fn aer_req_emits_known_bytes() {
        check::emits(&aer_req(), &AER_REQ);
    }

    #[test]
    fn aer_req_round_trips() {
        check::round_trips(&aer_req(), &mut Vec::new());
    }

    #[test]
    fn aer_req_truncated_errors() {
        check::truncation_errors::<AerReq<'_>>(&AER_REQ);
    }

    /// SRP_AER_RSP (layout: iPXE `struct srp_aer_rsp`).
    const AER_RSP: [u8; 16] = [
        0x42, // IU type SRP_AER_RSP
        0, 0, 0, 0, 0, 0, 0, // reserved
        0, 0, 0, 0, 0, 0, 0, 0x33, // tag echoed
    ];

    #[test]
    fn aer_rsp_decodes_known_bytes() {
        check::decodes(&AER_RSP, &AerRsp { tag: Tag(0x33) });
    }

    #[test]
    fn aer_rsp_emits_known_bytes() {
        check::emits(&AerRsp { tag: Tag(0x33) }, &AER_RSP);
    }

    #[test]
    fn aer_rsp_round_trips() {
        check::round_trips(&AerRsp { tag: Tag(0x33) }, &mut Vec::new());
    }

    #[test]
    fn aer_rsp_truncated_errors() {
        check::truncation_errors::<AerRsp>(&AER_RSP);
    }
}
