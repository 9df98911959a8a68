//! SRP_CMD: a SCSI command, 48 fixed bytes + additional CDB + data-out descriptor + data-in
//! descriptor, and with SRP-2 immediate data the data-out bytes at the negotiated offset
//! (SRP r16a; Linux `struct srp_cmd`, ib_srp `srp_map_data`, ib_srpt `srpt_get_desc_tbl`).

use super::desc::{DataDesc, DescFormat, emit_desc, parse_desc};
use super::error::{expect_type, out_buf, read_fixed};
use super::{IuType, SolicitFlags, Tag, WireError};
use scsi::Lun;
use wirekit::WireRepr;
use zerocopy::network_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

const IU: &str = "SRP_CMD";

/// Where immediate data starts when no other offset was negotiated: Linux ib_srp's
/// `SRP_IMM_DATA_OFFSET` = 48 + 16 + 4, "such that a 32-byte CDB still fits".
pub const DEFAULT_IMM_DATA_OFFSET: u16 = 68;

/// The longest additional CDB the ADDITIONAL CDB LENGTH field can express (63 words).
pub const MAX_ADD_CDB_LEN: usize = 252;

wirekit::open_enum! {
    /// TASK ATTRIBUTE, bits 2:0 of SRP_CMD byte 29.
    ///
    /// Sources disagree on ACA: Linux ib_srpt.h and the 2005 WinOF stack use 0x04 (the SAM
    /// task attribute code), iPXE uses 0x08. We emit 0x04, which our Linux peers decode, and
    /// read a whole byte of 0x08 as ACA too: an initiator that means ACA gets ACA.
    pub enum TaskAttr(u8) {
        /// SIMPLE.
        Simple = 0,
        /// HEAD OF QUEUE.
        HeadOfQueue = 1,
        /// ORDERED.
        Ordered = 2,
        /// ACA.
        Aca = 4,
    }
}

/// Byte 2, bit 0 of SRP_CMD (reserved in SRP r16a and SRP-2): this stack's request that
/// the SRP_RSP be sent with SEND WITH INVALIDATE of the R_Key the command's data buffer
/// descriptors share (see [`Cmd::remote_invalidate`]).
pub const REMOTE_INVALIDATE: u8 = 0x01;

/// iPXE's ACA code, accepted on input.
const ACA_IPXE: u8 = 0x08;

/// SRP_CMD fixed part as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CmdHdr {
    /// 0x02.
    pub iu_type: u8,
    /// SCSOLNT / UCSOLNT.
    pub flags: u8,
    /// Bit 0 of the first byte: [`REMOTE_INVALIDATE`] (this stack's extension); the rest
    /// reserved.
    pub reserved1: [u8; 3],
    /// DATA-OUT format (high nibble) and DATA-IN format (low nibble).
    pub buf_fmt: u8,
    /// DATA-OUT BUFFER DESCRIPTOR COUNT.
    pub data_out_desc_cnt: u8,
    /// DATA-IN BUFFER DESCRIPTOR COUNT.
    pub data_in_desc_cnt: u8,
    /// Tag.
    pub tag: U64,
    /// Reserved.
    pub reserved2: [u8; 4],
    /// LUN (only 4-byte aligned in the IU).
    pub lun: [u8; 8],
    /// Reserved.
    pub reserved3: u8,
    /// TASK ATTRIBUTE in bits 2:0.
    pub task_attr: u8,
    /// Reserved.
    pub reserved4: u8,
    /// ADDITIONAL CDB LENGTH: bits 7:2 in 4-byte words, i.e. the byte value is the length.
    pub add_cdb_len: u8,
    /// The first 16 bytes of the CDB (zero-padded when shorter).
    pub cdb: [u8; 16],
}
const _: () = assert!(size_of::<CmdHdr>() == 48);

/// SRP_CMD: a SCSI command with its data buffer descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cmd<'a> {
    /// Solicited notification requests.
    pub flags: SolicitFlags,
    /// Tag, echoed in the SRP_RSP.
    pub tag: Tag,
    /// The LUN.
    pub lun: Lun,
    /// SAM task attribute.
    pub task_attr: TaskAttr,
    /// The first 16 CDB bytes, zero-padded.
    pub cdb: [u8; 16],
    /// CDB bytes beyond 16 (a multiple of 4, at most [`MAX_ADD_CDB_LEN`]).
    pub add_cdb: &'a [u8],
    /// Where the data to the target is.
    pub data_out: DataDesc<'a>,
    /// Where the data from the target goes.
    pub data_in: DataDesc<'a>,
    /// The immediate data when `data_out` is [`DataDesc::Immediate`], else empty.
    pub imm_data: &'a [u8],
    /// This stack's extension (byte 2, bit 0; reserved in SRP r16a): the initiator asks the
    /// target to answer with SEND WITH INVALIDATE of the R_Key every data buffer descriptor
    /// of the command carries (one fast-registration region per command), sparing it a
    /// local invalidation. A target that ignores it (Linux ib_srpt) sends a plain SEND, and
    /// the initiator, seeing no invalidation in its receive completion, invalidates
    /// locally. Other reserved bits are ignored, as ib_srpt does.
    pub remote_invalidate: bool,
}

impl<'a> Cmd<'a> {
    fn bad(field: &'static str, value: u64, why: &'static str) -> WireError {
        WireError::BadField {
            iu: IU,
            field,
            value,
            why,
        }
    }

    /// Bytes up to the end of the descriptors.
    fn desc_end(&self) -> usize {
        size_of::<CmdHdr>()
            + self.add_cdb.len()
            + self.data_out.wire_len()
            + self.data_in.wire_len()
    }

    /// Parses an SRP_CMD whose immediate data, if any, starts `imm_data_offset` bytes into
    /// the IU (the offset negotiated at login).
    pub fn parse_with(buf: &'a [u8], imm_data_offset: u16) -> Result<Self, WireError> {
        let h: CmdHdr = read_fixed(IU, buf)?;
        expect_type(IU, IuType::Cmd.into(), h.iu_type)?;
        // Bits 1:0 of ADDITIONAL CDB LENGTH are reserved; ignore them as ib_srpt does.
        let add_len = usize::from(h.add_cdb_len & 0xfc);
        let mut at = size_of::<CmdHdr>();
        let add_cdb = buf.get(at..at + add_len).ok_or(WireError::Truncated {
            iu: IU,
            need: at + add_len,
            have: buf.len(),
        })?;
        at += add_len;
        let out_fmt = DescFormat::from(h.buf_fmt >> 4);
        let in_fmt = DescFormat::from(h.buf_fmt & 0x0f);
        if in_fmt == DescFormat::Immediate {
            return Err(Self::bad(
                "data-in format",
                3,
                "immediate data is for data-out only",
            ));
        }
        let rest = buf.get(at..).unwrap_or_default();
        let (data_out, imm_len, used) =
            parse_desc(out_fmt, h.data_out_desc_cnt, rest, buf.len(), at)?;
        at += used;
        let rest = buf.get(at..).unwrap_or_default();
        let (data_in, _, used) = parse_desc(in_fmt, h.data_in_desc_cnt, rest, buf.len(), at)?;
        at += used;
        let imm_data = match imm_len {
            None => &[][..],
            Some(len) => {
                let start = usize::from(imm_data_offset);
                if start < at {
                    return Err(Self::bad(
                        "immediate data offset",
                        start as u64,
                        "overlaps the CDB and descriptors",
                    ));
                }
                let end = start.saturating_add(len as usize);
                buf.get(start..end).ok_or(WireError::Truncated {
                    iu: IU,
                    need: end,
                    have: buf.len(),
                })?
            }
        };
        let task_attr = match h.task_attr {
            ACA_IPXE => TaskAttr::Aca,
            raw => TaskAttr::from(raw & 0x07),
        };
        Ok(Cmd {
            flags: SolicitFlags::from_bits_retain(h.flags),
            tag: Tag(h.tag.get()),
            lun: Lun(h.lun),
            task_attr,
            cdb: h.cdb,
            add_cdb,
            data_out,
            data_in,
            imm_data,
            remote_invalidate: h.reserved1[0] & REMOTE_INVALIDATE != 0,
        })
    }

    /// Bytes [`Cmd::emit_with`] writes for this offset.
    pub fn buffer_len_with(&self, imm_data_offset: u16) -> usize {
        match self.data_out {
            DataDesc::Immediate => {
                usize::from(imm_data_offset).max(self.desc_end()) + self.imm_data.len()
            }
            _ => self.desc_end(),
        }
    }

    fn check_emittable(&self, imm_data_offset: u16) -> Result<(), WireError> {
        if self.add_cdb.len() % 4 != 0 || self.add_cdb.len() > MAX_ADD_CDB_LEN {
            return Err(Self::bad(
                "additional CDB length",
                self.add_cdb.len() as u64,
                "must be a multiple of 4 and at most 252",
            ));
        }
        if self.data_in == DataDesc::Immediate {
            return Err(Self::bad(
                "data-in format",
                3,
                "immediate data is for data-out only",
            ));
        }
        for d in [&self.data_out, &self.data_in] {
            if let DataDesc::Indirect(i) = d {
                i.validate()?;
            }
        }
        let immediate = self.data_out == DataDesc::Immediate;
        if !immediate && !self.imm_data.is_empty() {
            return Err(Self::bad(
                "immediate data",
                self.imm_data.len() as u64,
                "present but the data-out format is not immediate",
            ));
        }
        if immediate && usize::from(imm_data_offset) < self.desc_end() {
            return Err(Self::bad(
                "immediate data offset",
                imm_data_offset.into(),
                "overlaps the CDB and descriptors",
            ));
        }
        if u32::try_from(self.imm_data.len()).is_err() {
            return Err(Self::bad(
                "immediate data",
                self.imm_data.len() as u64,
                "longer than 2^32-1",
            ));
        }
        Ok(())
    }

    /// Writes the IU with immediate data, if any, at `imm_data_offset`; the gap between the
    /// descriptors and the data is zeroed.
    pub fn emit_with(&self, buf: &mut [u8], imm_data_offset: u16) -> Result<usize, WireError> {
        self.check_emittable(imm_data_offset)?;
        let need = self.buffer_len_with(imm_data_offset);
        let out = out_buf(IU, buf, need)?;
        let h = CmdHdr {
            iu_type: IuType::Cmd.into(),
            flags: self.flags.bits(),
            reserved1: [
                if self.remote_invalidate {
                    REMOTE_INVALIDATE
                } else {
                    0
                },
                0,
                0,
            ],
            buf_fmt: (u8::from(self.data_out.format()) << 4) | u8::from(self.data_in.format()),
            data_out_desc_cnt: self.data_out.count(),
            data_in_desc_cnt: self.data_in.count(),
            tag: U64::new(self.tag.0),
            reserved2: [0; 4],
            lun: self.lun.0,
            reserved3: 0,
            task_attr: self.task_attr.into(),
            reserved4: 0,
            add_cdb_len: self.add_cdb.len() as u8,
            cdb: self.cdb,
        };
        let mut at = size_of::<CmdHdr>();
        out[..at].copy_from_slice(h.as_bytes());
        out[at..at + self.add_cdb.len()].copy_from_slice(self.add_cdb);
        at += self.add_cdb.len();
        let imm_len = self.imm_data.len() as u32;
        for d in [&self.data_out, &self.data_in] {
            let n = d.wire_len();
            emit_desc(d, imm_len, &mut out[at..at + n]);
            at += n;
        }
        if self.data_out == DataDesc::Immediate {
            let start = usize::from(imm_data_offset);
            out[at..start].fill(0);
            out[start..].copy_from_slice(self.imm_data);
        }
        Ok(need)
    }

    /// The whole CDB: the 16-byte field followed by the additional CDB, without padding
    /// removed (a 10-byte CDB comes back as 16 bytes, the last six zero).
    pub fn cdb_bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.cdb.iter().chain(self.add_cdb.iter()).copied()
    }
}

/// Parses and emits with [`DEFAULT_IMM_DATA_OFFSET`]; channels that negotiated another
/// offset use [`Cmd::parse_with`] / [`Cmd::emit_with`].
impl<'a> WireRepr<'a> for Cmd<'a> {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        Self::parse_with(buf, DEFAULT_IMM_DATA_OFFSET)
    }

    fn buffer_len(&self) -> usize {
        self.buffer_len_with(DEFAULT_IMM_DATA_OFFSET)
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.emit_with(buf, DEFAULT_IMM_DATA_OFFSET)
    }
}

#[cfg(test)]
#[path = "cmd_tests.rs"]
mod tests;
