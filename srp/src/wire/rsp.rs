//! SRP_RSP: a command's or task management request's completion, 36 fixed bytes + response
//! data + sense data (SRP r16a; Linux `struct srp_rsp`, packed). Every SRP_RSP returns
//! credits in REQUEST LIMIT DELTA.

use super::error::{expect_type, out_buf, read_fixed};
use super::logout::FLAG_SOLNT;
use super::{IuType, Tag, WireError};
use bitflags::bitflags;
use scsi::status::Status;
use wirekit::WireRepr;
use zerocopy::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

const IU: &str = "SRP_RSP";

bitflags! {
    /// The valid-fields byte (offset 18).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct RspValid: u8 {
        /// RSPVALID: response data present.
        const RSPVALID = 0x01;
        /// SNSVALID: sense data present.
        const SNSVALID = 0x02;
        /// DOOVER: data-out residual is an overflow.
        const DOOVER = 0x04;
        /// DOUNDER: data-out residual is an underflow.
        const DOUNDER = 0x08;
        /// DIOVER: data-in residual is an overflow.
        const DIOVER = 0x10;
        /// DIUNDER: data-in residual is an underflow.
        const DIUNDER = 0x20;
    }
}

/// A residual count and what kind it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Residual {
    /// The transfer moved exactly what the descriptors described.
    #[default]
    None,
    /// This many described bytes were not transferred.
    Underflow(u32),
    /// The command wanted this many bytes more than the descriptors described.
    Overflow(u32),
}

impl Residual {
    fn parse(over: bool, under: bool, count: u32, field: &'static str) -> Result<Self, WireError> {
        match (over, under) {
            (false, false) => Ok(Residual::None),
            (true, false) => Ok(Residual::Overflow(count)),
            (false, true) => Ok(Residual::Underflow(count)),
            (true, true) => Err(WireError::BadField {
                iu: IU,
                field,
                value: count.into(),
                why: "both overflow and underflow flagged",
            }),
        }
    }

    fn count(self) -> u32 {
        match self {
            Residual::None => 0,
            Residual::Underflow(n) | Residual::Overflow(n) => n,
        }
    }
}

wirekit::open_enum! {
    /// RSP_CODE in byte 3 of the 4-byte response data of a task management response
    /// (SRP r16a table 24; ib_srpt.h; WinOF).
    pub enum TmfResponse(u8) {
        /// No failure: task management function complete.
        Complete = 0x00,
        /// Request fields invalid.
        InvalidFields = 0x02,
        /// Task management function not supported.
        NotSupported = 0x04,
        /// Task management function failed.
        Failed = 0x05,
    }
}

impl TmfResponse {
    /// The 4 bytes of response data carrying this code.
    pub fn response_data(self) -> [u8; 4] {
        [0, 0, 0, self.into()]
    }
}

/// SRP_RSP fixed part as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RspHdr {
    /// 0xC1.
    pub iu_type: u8,
    /// Bit 0: SOLNT.
    pub flags: u8,
    /// Reserved.
    pub reserved1: [u8; 2],
    /// REQUEST LIMIT DELTA.
    pub req_lim_delta: U32,
    /// Tag of the request.
    pub tag: U64,
    /// Reserved.
    pub reserved2: [u8; 2],
    /// Valid-fields flags.
    pub valid: u8,
    /// SCSI status.
    pub status: u8,
    /// DATA-OUT RESIDUAL COUNT.
    pub data_out_res: U32,
    /// DATA-IN RESIDUAL COUNT.
    pub data_in_res: U32,
    /// SENSE DATA LIST LENGTH.
    pub sense_len: U32,
    /// RESPONSE DATA LIST LENGTH.
    pub resp_len: U32,
}
const _: () = assert!(size_of::<RspHdr>() == 36);

/// SRP_RSP: status, residuals, and optional response and sense data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rsp<'a> {
    /// Solicited notification.
    pub solicited: bool,
    /// Credits returned.
    pub req_lim_delta: u32,
    /// Tag of the request.
    pub tag: Tag,
    /// SCSI status.
    pub status: Status,
    /// Data-out residual.
    pub data_out_residual: Residual,
    /// Data-in residual.
    pub data_in_residual: Residual,
    /// Response data (RSPVALID when non-empty): 4 bytes for task management.
    pub resp_data: &'a [u8],
    /// Sense data (SNSVALID when non-empty).
    pub sense: &'a [u8],
}

impl Rsp<'_> {
    /// The task management response code, when the response data is the 4-byte TMF form.
    pub fn tmf_response(&self) -> Option<TmfResponse> {
        match self.resp_data {
            [_, _, _, code] => Some(TmfResponse::from(*code)),
            _ => None,
        }
    }

    fn valid(&self) -> RspValid {
        let mut v = RspValid::empty();
        v.set(RspValid::RSPVALID, !self.resp_data.is_empty());
        v.set(RspValid::SNSVALID, !self.sense.is_empty());
        v.set(
            RspValid::DOOVER,
            matches!(self.data_out_residual, Residual::Overflow(_)),
        );
        v.set(
            RspValid::DOUNDER,
            matches!(self.data_out_residual, Residual::Underflow(_)),
        );
        v.set(
            RspValid::DIOVER,
            matches!(self.data_in_residual, Residual::Overflow(_)),
        );
        v.set(
            RspValid::DIUNDER,
            matches!(self.data_in_residual, Residual::Underflow(_)),
        );
        v
    }
}

fn len32(field: &'static str, n: usize) -> Result<u32, WireError> {
    u32::try_from(n).map_err(|_| WireError::BadField {
        iu: IU,
        field,
        value: n as u64,
        why: "does not fit in 32 bits",
    })
}

impl<'a> WireRepr<'a> for Rsp<'a> {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: RspHdr = read_fixed(IU, buf)?;
        expect_type(IU, IuType::Rsp.into(), h.iu_type)?;
        let valid = RspValid::from_bits_retain(h.valid);
        // A length whose valid bit is clear is ignored (iPXE `srp_rsp_*_len`).
        let resp_len = if valid.contains(RspValid::RSPVALID) {
            h.resp_len.get() as usize
        } else {
            0
        };
        let sense_len = if valid.contains(RspValid::SNSVALID) {
            h.sense_len.get() as usize
        } else {
            0
        };
        let start = size_of::<RspHdr>();
        let end = start.saturating_add(resp_len).saturating_add(sense_len);
        let body = buf.get(start..end).ok_or(WireError::Truncated {
            iu: IU,
            need: end,
            have: buf.len(),
        })?;
        let (resp_data, sense) = body.split_at(resp_len);
        Ok(Rsp {
            solicited: h.flags & FLAG_SOLNT != 0,
            req_lim_delta: h.req_lim_delta.get(),
            tag: Tag(h.tag.get()),
            status: Status::from(h.status),
            data_out_residual: Residual::parse(
                valid.contains(RspValid::DOOVER),
                valid.contains(RspValid::DOUNDER),
                h.data_out_res.get(),
                "data-out residual",
            )?,
            data_in_residual: Residual::parse(
                valid.contains(RspValid::DIOVER),
                valid.contains(RspValid::DIUNDER),
                h.data_in_res.get(),
                "data-in residual",
            )?,
            resp_data,
            sense,
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<RspHdr>() + self.resp_data.len() + self.sense.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let resp_len = len32("response data length", self.resp_data.len())?;
        let sense_len = len32("sense data length", self.sense.len())?;
        let need = self.buffer_len();
        let out = out_buf(IU, buf, need)?;
        let h = RspHdr {
            iu_type: IuType::Rsp.into(),
            flags: if self.solicited { FLAG_SOLNT } else { 0 },
            reserved1: [0; 2],
            req_lim_delta: U32::new(self.req_lim_delta),
            tag: U64::new(self.tag.0),
            reserved2: [0; 2],
            valid: self.valid().bits(),
            status: self.status.into(),
            data_out_res: U32::new(self.data_out_residual.count()),
            data_in_res: U32::new(self.data_in_residual.count()),
            sense_len: U32::new(sense_len),
            resp_len: U32::new(resp_len),
        };
        let start = size_of::<RspHdr>();
        let mid = start + self.resp_data.len();
        out[..start].copy_from_slice(h.as_bytes());
        out[start..mid].copy_from_slice(self.resp_data);
        out[mid..].copy_from_slice(self.sense);
        Ok(need)
    }
}

#[cfg(test)]
#[path = "rsp_tests.rs"]
mod tests;
