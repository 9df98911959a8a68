//! SRP_CRED_REQ (target grants credits, 16 bytes) and SRP_CRED_RSP (initiator acknowledges,
//! 16 bytes). An initiator that ignores CRED_REQ stalls forever once the target returns
//! credits only this way (the Linux "Implement SRP_CRED_REQ" fix).

use super::error::{expect_type, read_fixed, write_fixed};
use super::logout::FLAG_SOLNT;
use super::{IuType, Tag, WireError};
use wirekit::WireRepr;
use zerocopy::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// SRP_CRED_REQ as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CredReqHdr {
    /// 0x81.
    pub iu_type: u8,
    /// Bit 0: SOLNT.
    pub flags: u8,
    /// Reserved.
    pub reserved: [u8; 2],
    /// REQUEST LIMIT DELTA.
    pub req_lim_delta: U32,
    /// Tag.
    pub tag: U64,
}
const _: () = assert!(size_of::<CredReqHdr>() == 16);

/// SRP_CRED_REQ: the target adds credits; the initiator answers SRP_CRED_RSP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CredReq {
    /// Solicited notification (CRSOLNT was requested at login).
    pub solicited: bool,
    /// Credits granted.
    pub req_lim_delta: u32,
    /// Tag.
    pub tag: Tag,
}

impl<'a> WireRepr<'a> for CredReq {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: CredReqHdr = read_fixed("SRP_CRED_REQ", buf)?;
        expect_type("SRP_CRED_REQ", IuType::CredReq.into(), h.iu_type)?;
        Ok(CredReq {
            solicited: h.flags & FLAG_SOLNT != 0,
            req_lim_delta: h.req_lim_delta.get(),
            tag: Tag(h.tag.get()),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<CredReqHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = CredReqHdr {
            iu_type: IuType::CredReq.into(),
            flags: if self.solicited { FLAG_SOLNT } else { 0 },
            reserved: [0; 2],
            req_lim_delta: U32::new(self.req_lim_delta),
            tag: U64::new(self.tag.0),
        };
        write_fixed("SRP_CRED_REQ", &h, buf)
    }
}

/// The 16-byte layout shared by SRP_CRED_RSP and SRP_AER_RSP: type, 7 reserved, tag.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct TagOnlyHdr {
    /// 0x41 (CRED_RSP) or 0x42 (AER_RSP).
    pub iu_type: u8,
    /// Reserved.
    pub reserved: [u8; 7],
    /// Tag of the request answered.
    pub tag: U64,
}
const _: () = assert!(size_of::<TagOnlyHdr>() == 16);

/// Parses a type-and-tag IU.
pub(crate) fn parse_tag_only(iu: &'static str, code: IuType, buf: &[u8]) -> Result<Tag, WireError> {
    let h: TagOnlyHdr = read_fixed(iu, buf)?;
    expect_type(iu, code.into(), h.iu_type)?;
    Ok(Tag(h.tag.get()))
}

/// Emits a type-and-tag IU.
pub(crate) fn emit_tag_only(
    iu: &'static str,
    code: IuType,
    tag: Tag,
    buf: &mut [u8],
) -> Result<usize, WireError> {
    let h = TagOnlyHdr {
        iu_type: code.into(),
        reserved: [0; 7],
        tag: U64::new(tag.0),
    };
    write_fixed(iu, &h, buf)
}

/// SRP_CRED_RSP: the initiator acknowledges an SRP_CRED_REQ. Consumes no credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CredRsp {
    /// Tag of the SRP_CRED_REQ.
    pub tag: Tag,
}

impl<'a> WireRepr<'a> for CredRsp {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        parse_tag_only("SRP_CRED_RSP", IuType::CredRsp, buf).map(|tag| CredRsp { tag })
    }

    fn buffer_len(&self) -> usize {
        size_of::<TagOnlyHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        emit_tag_only("SRP_CRED_RSP", IuType::CredRsp, self.tag, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// SRP_CRED_REQ granting 16 credits (layout: iPXE `struct srp_cred_req`).
    const CRED_REQ: [u8; 16] = [
        0x81, // IU type SRP_CRED_REQ
        0x01, // flags: SOLNT
        0, 0, // reserved
        0x00, 0x00, 0x00, 0x10, // request limit delta 16
        0, 0, 0, 0, 0x80, 0, 0, 0x01, // tag
    ];

    fn cred_req() -> CredReq {
        CredReq {
            solicited: true,
            req_lim_delta: 16,
            tag: Tag(0x8000_0001),
        }
    }

    #[test]
    fn cred_req_decodes_known_bytes() {
        check::decodes(&CRED_REQ, &cred_req());
    }

    #[test]
    fn cred_req_emits_known_bytes() {
        check::emits(&cred_req(), &CRED_REQ);
    }

    #[test]
    fn cred_req_round_trips() {
        check::round_trips(&cred_req(), &mut Vec::new());
    }

    #[test]
    fn cred_req_truncated_errors() {
        check::truncation_errors::<CredReq>(&CRED_REQ);
    }

    /// SRP_CRED_RSP answering the request above (layout: iPXE `struct srp_cred_rsp`).
    const CRED_RSP: [u8; 16] = [
        0x41, // IU type SRP_CRED_RSP
        0, 0, 0, 0, 0, 0, 0, // reserved
        0, 0, 0, 0, 0x80, 0, 0, 0x01, // tag echoed
    ];

    fn cred_rsp() -> CredRsp {
        CredRsp {
            tag: Tag(0x8000_0001),
        }
    }

    #[test]
    fn cred_rsp_decodes_known_bytes() {
        check::decodes(&CRED_RSP, &cred_rsp());
    }

    #[test]
    fn cred_rsp_emits_known_bytes() {
        check::emits(&cred_rsp(), &CRED_RSP);
    }

    #[test]
    fn cred_rsp_round_trips() {
        check::round_trips(&cred_rsp(), &mut Vec::new());
    }

    #[test]
    fn cred_rsp_truncated_errors() {
        check::truncation_errors::<CredRsp>(&CRED_RSP);
    }
}
