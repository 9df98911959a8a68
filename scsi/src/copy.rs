//! Third-party copy parameter data (SPC-4 6.4, 6.5): the EXTENDED COPY (LID1) parameter
//! list — its header, the Identification CSCD descriptor (E4h) and the block device to block
//! device segment descriptor (02h) — and the ODX block device range descriptor.
//!
//! Each is a zerocopy layout with a validated value type. [`CopyParamError::sense`] names the
//! answer for each rejection; the copy manager adds the field pointer.

use alloc::vec;
use alloc::vec::Vec;
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::sense::{Sense, SenseCode};

/// Why copy parameter data was rejected (parse) or could not be written (emit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CopyParamError {
    /// Fewer bytes than the structure: PARAMETER LIST LENGTH ERROR.
    #[error("copy parameter data truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A CSCD descriptor type other than Identification (E4h).
    #[error("CSCD descriptor type {0:#04x} is not supported (E4h only)")]
    UnsupportedCscdType(u8),
    /// A segment descriptor type other than block to block (02h).
    #[error("segment descriptor type {0:#04x} is not supported (02h only)")]
    UnsupportedSegmentType(u8),
    /// A descriptor whose DESCRIPTOR LENGTH (or DESIGNATOR LENGTH) is not its type's.
    #[error("{what} length {len} is not valid")]
    BadLength {
        /// Which length.
        what: &'static str,
        /// Its value.
        len: usize,
    },
    /// The output buffer is too small (emit).
    #[error("output buffer is {have} bytes, need {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

impl CopyParamError {
    /// The CHECK CONDITION a copy manager answers for this parse error.
    pub fn sense(&self) -> Sense {
        Sense::new(match self {
            CopyParamError::Truncated { .. } => SenseCode::PARAMETER_LIST_LENGTH_ERROR,
            CopyParamError::UnsupportedCscdType(_) => {
                SenseCode::UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE
            }
            CopyParamError::UnsupportedSegmentType(_) => {
                SenseCode::UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE
            }
            CopyParamError::BadLength { .. } | CopyParamError::BufferTooSmall { .. } => {
                SenseCode::INVALID_FIELD_IN_PARAMETER_LIST
            }
        })
    }
}

fn take<T: FromBytes + KnownLayout + Immutable>(buf: &[u8]) -> Result<T, CopyParamError> {
    T::read_from_prefix(buf)
        .map(|(t, _)| t)
        .map_err(|_| CopyParamError::Truncated {
            need: size_of::<T>(),
            have: buf.len(),
        })
}

fn place<T: IntoBytes + Immutable>(buf: &mut [u8], t: &T) -> Result<usize, CopyParamError> {
    let need = size_of::<T>();
    let have = buf.len();
    let out = buf
        .get_mut(..need)
        .ok_or(CopyParamError::BufferTooSmall { need, have })?;
    out.copy_from_slice(t.as_bytes());
    Ok(need)
}

/// The EXTENDED COPY (LID1) parameter list header as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct XcopyHeaderWire {
    /// LIST IDENTIFIER.
    pub list_id: u8,
    /// Bit 5 STR, bits 4:3 LIST ID USAGE, bits 2:0 PRIORITY.
    pub flags: u8,
    /// CSCD DESCRIPTOR LIST LENGTH.
    pub cscd_len: U16,
    /// Reserved.
    pub reserved: [u8; 4],
    /// SEGMENT DESCRIPTOR LIST LENGTH.
    pub segment_len: U32,
    /// INLINE DATA LENGTH.
    pub inline_len: U32,
}
const _: () = assert!(size_of::<XcopyHeaderWire>() == 16);

/// LIST ID USAGE 11b: the list identifier is not tracked (no RECEIVE COPY STATUS).
pub const LIST_ID_USAGE_NONE: u8 = 0b11;

/// The EXTENDED COPY (LID1) parameter list header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XcopyHeader {
    /// LIST IDENTIFIER.
    pub list_id: u8,
    /// STR: sequential striped.
    pub striped: bool,
    /// LIST ID USAGE (2 bits).
    pub list_id_usage: u8,
    /// PRIORITY (3 bits).
    pub priority: u8,
    /// CSCD DESCRIPTOR LIST LENGTH in bytes.
    pub cscd_len: u16,
    /// SEGMENT DESCRIPTOR LIST LENGTH in bytes.
    pub segment_len: u32,
    /// INLINE DATA LENGTH in bytes.
    pub inline_len: u32,
}

impl XcopyHeader {
    /// The header's size.
    pub const LEN: usize = 16;
}

impl WireRepr<'_> for XcopyHeader {
    type Error = CopyParamError;

    fn parse(buf: &[u8]) -> Result<Self, CopyParamError> {
        let w: XcopyHeaderWire = take(buf)?;
        Ok(XcopyHeader {
            list_id: w.list_id,
            striped: w.flags & 0x20 != 0,
            list_id_usage: (w.flags >> 3) & 0x03,
            priority: w.flags & 0x07,
            cscd_len: w.cscd_len.get(),
            segment_len: w.segment_len.get(),
            inline_len: w.inline_len.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        Self::LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, CopyParamError> {
        let flags =
            u8::from(self.striped) << 5 | (self.list_id_usage & 0x03) << 3 | (self.priority & 0x07);
        place(
            buf,
            &XcopyHeaderWire {
                list_id: self.list_id,
                flags,
                cscd_len: U16::new(self.cscd_len),
                reserved: [0; 4],
                segment_len: U32::new(self.segment_len),
                inline_len: U32::new(self.inline_len),
            },
        )
    }
}

/// The Identification CSCD descriptor (E4h) as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct IdCscdWire {
    /// DESCRIPTOR TYPE CODE (E4h).
    pub kind: u8,
    /// Bits 7:6 LU ID TYPE, bit 5 NUL, bits 4:0 PERIPHERAL DEVICE TYPE.
    pub device: u8,
    /// RELATIVE INITIATOR PORT IDENTIFIER.
    pub ripi: U16,
    /// CODE SET (bits 3:0; the protocol identifier nibble above is not used here).
    pub code_set: u8,
    /// PIV (bit 7), ASSOCIATION (bits 5:4), DESIGNATOR TYPE (bits 3:0).
    pub assoc_type: u8,
    /// Reserved.
    pub reserved: u8,
    /// DESIGNATOR LENGTH (at most 20).
    pub designator_len: u8,
    /// DESIGNATOR, zero padded.
    pub designator: [u8; 20],
    /// Block device parameters: byte 0 bit 2 PAD; bytes 1..=3 DISK BLOCK LENGTH.
    pub device_params: [u8; 4],
}
const _: () = assert!(size_of::<IdCscdWire>() == 32);

/// CSCD descriptor type code of the Identification descriptor.
pub const CSCD_IDENTIFICATION: u8 = 0xe4;
/// Segment descriptor type code of block device to block device.
pub const SEGMENT_BLOCK_TO_BLOCK: u8 = 0x02;
/// A CSCD descriptor's size.
pub const CSCD_LEN: usize = 32;
/// The block to block segment descriptor's size.
pub const SEGMENT_LEN: usize = 28;
/// CSCD descriptor ID FFFFh: the logical unit the EXTENDED COPY was sent to.
pub const CSCD_ID_THIS_LU: u16 = 0xffff;

/// An Identification CSCD descriptor: a logical unit named by a designator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdCscd {
    /// LU ID TYPE (2 bits).
    pub lu_id_type: u8,
    /// NUL.
    pub nul: bool,
    /// PERIPHERAL DEVICE TYPE (00h: a block device).
    pub device_type: u8,
    /// RELATIVE INITIATOR PORT IDENTIFIER.
    pub ripi: u16,
    /// CODE SET (4 bits).
    pub code_set: u8,
    /// ASSOCIATION (2 bits).
    pub association: u8,
    /// DESIGNATOR TYPE (4 bits).
    pub designator_type: u8,
    /// DESIGNATOR LENGTH.
    pub designator_len: u8,
    /// The designator, zero padded to 20 bytes.
    pub designator: [u8; 20],
    /// PAD.
    pub pad: bool,
    /// DISK BLOCK LENGTH (24 bits; for a block device).
    pub block_len: u32,
}

impl IdCscd {
    /// The descriptor naming a block device LU by its NAA designator (binary, LU
    /// association), with its block length (0: not given).
    pub fn for_naa(naa: &[u8; 16], block_len: u32) -> IdCscd {
        let mut designator = [0u8; 20];
        designator[..16].copy_from_slice(naa);
        IdCscd {
            lu_id_type: 0,
            nul: false,
            device_type: 0,
            ripi: 0,
            code_set: 1,
            association: 0,
            designator_type: 3,
            designator_len: 16,
            designator,
            pad: false,
            block_len,
        }
    }

    /// The designator's bytes.
    pub fn designator(&self) -> &[u8] {
        &self.designator[..usize::from(self.designator_len).min(20)]
    }

    /// The designator when it is a logical unit's NAA designator (binary code set, LU
    /// association, type NAA), the only form a copy manager here resolves.
    pub fn lu_naa(&self) -> Option<&[u8]> {
        (self.code_set == 1 && self.association == 0 && self.designator_type == 3)
            .then(|| self.designator())
    }
}

impl WireRepr<'_> for IdCscd {
    type Error = CopyParamError;

    fn parse(buf: &[u8]) -> Result<Self, CopyParamError> {
        let kind = *buf.first().ok_or(CopyParamError::Truncated {
            need: CSCD_LEN,
            have: 0,
        })?;
        if kind != CSCD_IDENTIFICATION {
            return Err(CopyParamError::UnsupportedCscdType(kind));
        }
        let w: IdCscdWire = take(buf)?;
        if w.designator_len > 20 {
            return Err(CopyParamError::BadLength {
                what: "DESIGNATOR LENGTH",
                len: w.designator_len.into(),
            });
        }
        let p = w.device_params;
        Ok(IdCscd {
            lu_id_type: w.device >> 6,
            nul: w.device & 0x20 != 0,
            device_type: w.device & 0x1f,
            ripi: w.ripi.get(),
            code_set: w.code_set & 0x0f,
            association: (w.assoc_type >> 4) & 0x03,
            designator_type: w.assoc_type & 0x0f,
            designator_len: w.designator_len,
            designator: w.designator,
            pad: p[0] & 0x04 != 0,
            block_len: u32::from_be_bytes([0, p[1], p[2], p[3]]),
        })
    }

    fn buffer_len(&self) -> usize {
        CSCD_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, CopyParamError> {
        if self.designator_len > 20 || self.block_len > 0x00ff_ffff {
            return Err(CopyParamError::BadLength {
                what: "DESIGNATOR LENGTH or DISK BLOCK LENGTH",
                len: self.designator_len.into(),
            });
        }
        let b = self.block_len.to_be_bytes();
        place(
            buf,
            &IdCscdWire {
                kind: CSCD_IDENTIFICATION,
                device: (self.lu_id_type & 0x03) << 6
                    | u8::from(self.nul) << 5
                    | (self.device_type & 0x1f),
                ripi: U16::new(self.ripi),
                code_set: self.code_set & 0x0f,
                assoc_type: (self.association & 0x03) << 4 | (self.designator_type & 0x0f),
                reserved: 0,
                designator_len: self.designator_len,
                designator: self.designator,
                device_params: [u8::from(self.pad) << 2, b[1], b[2], b[3]],
            },
        )
    }
}

/// The block device to block device segment descriptor (02h) as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct BlockSegmentWire {
    /// DESCRIPTOR TYPE CODE (02h).
    pub kind: u8,
    /// Bit 1 DC, bit 0 CAT.
    pub flags: u8,
    /// DESCRIPTOR LENGTH (0018h).
    pub desc_len: U16,
    /// SOURCE CSCD DESCRIPTOR ID.
    pub source: U16,
    /// DESTINATION CSCD DESCRIPTOR ID.
    pub destination: U16,
    /// Reserved.
    pub reserved: [u8; 2],
    /// BLOCK DEVICE NUMBER OF BLOCKS.
    pub blocks: U16,
    /// SOURCE BLOCK DEVICE LOGICAL BLOCK ADDRESS.
    pub source_lba: U64,
    /// DESTINATION BLOCK DEVICE LOGICAL BLOCK ADDRESS.
    pub destination_lba: U64,
}
const _: () = assert!(size_of::<BlockSegmentWire>() == SEGMENT_LEN);

/// A block device to block device segment: copy `blocks` blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSegment {
    /// DC: NUMBER OF BLOCKS counts destination blocks (else source blocks).
    pub dc: bool,
    /// CAT: residual data may be held.
    pub cat: bool,
    /// SOURCE CSCD DESCRIPTOR ID.
    pub source: u16,
    /// DESTINATION CSCD DESCRIPTOR ID.
    pub destination: u16,
    /// BLOCK DEVICE NUMBER OF BLOCKS.
    pub blocks: u16,
    /// First source block.
    pub source_lba: u64,
    /// First destination block.
    pub destination_lba: u64,
}

impl WireRepr<'_> for BlockSegment {
    type Error = CopyParamError;

    fn parse(buf: &[u8]) -> Result<Self, CopyParamError> {
        let kind = *buf.first().ok_or(CopyParamError::Truncated {
            need: SEGMENT_LEN,
            have: 0,
        })?;
        if kind != SEGMENT_BLOCK_TO_BLOCK {
            return Err(CopyParamError::UnsupportedSegmentType(kind));
        }
        let w: BlockSegmentWire = take(buf)?;
        if usize::from(w.desc_len.get()) != SEGMENT_LEN - 4 {
            return Err(CopyParamError::BadLength {
                what: "segment DESCRIPTOR LENGTH",
                len: w.desc_len.get().into(),
            });
        }
        Ok(BlockSegment {
            dc: w.flags & 0x02 != 0,
            cat: w.flags & 0x01 != 0,
            source: w.source.get(),
            destination: w.destination.get(),
            blocks: w.blocks.get(),
            source_lba: w.source_lba.get(),
            destination_lba: w.destination_lba.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        SEGMENT_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, CopyParamError> {
        place(
            buf,
            &BlockSegmentWire {
                kind: SEGMENT_BLOCK_TO_BLOCK,
                flags: u8::from(self.dc) << 1 | u8::from(self.cat),
                desc_len: U16::new((SEGMENT_LEN - 4) as u16),
                source: U16::new(self.source),
                destination: U16::new(self.destination),
                reserved: [0; 2],
                blocks: U16::new(self.blocks),
                source_lba: U64::new(self.source_lba),
                destination_lba: U64::new(self.destination_lba),
            },
        )
    }
}

/// A block device range descriptor (SBC-4, POPULATE TOKEN / WRITE USING TOKEN) as laid out
/// on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RangeWire {
    /// LOGICAL BLOCK ADDRESS.
    pub lba: U64,
    /// NUMBER OF LOGICAL BLOCKS.
    pub blocks: U32,
    /// Reserved.
    pub reserved: [u8; 4],
}
const _: () = assert!(size_of::<RangeWire>() == 16);

/// A block device range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// First block.
    pub lba: u64,
    /// Blocks.
    pub blocks: u32,
}

impl WireRepr<'_> for Range {
    type Error = CopyParamError;

    fn parse(buf: &[u8]) -> Result<Self, CopyParamError> {
        let w: RangeWire = take(buf)?;
        Ok(Range {
            lba: w.lba.get(),
            blocks: w.blocks.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        16
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, CopyParamError> {
        place(
            buf,
            &RangeWire {
                lba: U64::new(self.lba),
                blocks: U32::new(self.blocks),
                reserved: [0; 4],
            },
        )
    }
}

/// The POPULATE TOKEN parameter list header (SBC-4 5.11.2) as laid out on the wire;
/// block device range descriptors follow.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PopulateTokenWire {
    /// POPULATE TOKEN DATA LENGTH: the bytes after this field.
    pub data_len: U16,
    /// Bit 1 RTV, bit 0 IMMED.
    pub flags: u8,
    /// Reserved.
    pub reserved: u8,
    /// INACTIVITY TIMEOUT in seconds (0: the device's default).
    pub inactivity: U32,
    /// ROD TYPE (when RTV).
    pub rod_type: U32,
    /// Reserved.
    pub reserved2: [u8; 2],
    /// BLOCK DEVICE RANGE DESCRIPTOR LIST LENGTH.
    pub ranges_len: U16,
}
const _: () = assert!(size_of::<PopulateTokenWire>() == PopulateToken::LEN);

/// The POPULATE TOKEN parameter list header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PopulateToken {
    /// POPULATE TOKEN DATA LENGTH.
    pub data_len: u16,
    /// RTV: ROD TYPE is valid.
    pub rtv: bool,
    /// IMMED.
    pub immed: bool,
    /// INACTIVITY TIMEOUT in seconds.
    pub inactivity_s: u32,
    /// ROD TYPE.
    pub rod_type: u32,
    /// BLOCK DEVICE RANGE DESCRIPTOR LIST LENGTH in bytes.
    pub ranges_len: u16,
}

impl PopulateToken {
    /// The header's size: where the range descriptors start.
    pub const LEN: usize = 16;
}

impl WireRepr<'_> for PopulateToken {
    type Error = CopyParamError;

    fn parse(buf: &[u8]) -> Result<Self, CopyParamError> {
        let w: PopulateTokenWire = take(buf)?;
        Ok(PopulateToken {
            data_len: w.data_len.get(),
            rtv: w.flags & 0x02 != 0,
            immed: w.flags & 0x01 != 0,
            inactivity_s: w.inactivity.get(),
            rod_type: w.rod_type.get(),
            ranges_len: w.ranges_len.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        Self::LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, CopyParamError> {
        place(
            buf,
            &PopulateTokenWire {
                data_len: U16::new(self.data_len),
                flags: u8::from(self.rtv) << 1 | u8::from(self.immed),
                reserved: 0,
                inactivity: U32::new(self.inactivity_s),
                rod_type: U32::new(self.rod_type),
                reserved2: [0; 2],
                ranges_len: U16::new(self.ranges_len),
            },
        )
    }
}

/// A ROD token's size.
pub const ROD_TOKEN_LEN: usize = 512;

/// The WRITE USING TOKEN parameter list header (SBC-4 5.53.2) as laid out on the wire;
/// block device range descriptors follow.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct WriteUsingTokenWire {
    /// WRITE USING TOKEN DATA LENGTH: the bytes after this field.
    pub data_len: U16,
    /// Bit 1 DEL_TKN, bit 0 IMMED.
    pub flags: u8,
    /// Reserved.
    pub reserved: [u8; 5],
    /// OFFSET INTO ROD, in logical blocks.
    pub offset: U64,
    /// ROD TOKEN.
    pub token: [u8; ROD_TOKEN_LEN],
    /// Reserved.
    pub reserved2: [u8; 6],
    /// BLOCK DEVICE RANGE DESCRIPTOR LIST LENGTH.
    pub ranges_len: U16,
}
const _: () = assert!(size_of::<WriteUsingTokenWire>() == WriteUsingToken::LEN);

/// The WRITE USING TOKEN parameter list header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteUsingToken {
    /// WRITE USING TOKEN DATA LENGTH.
    pub data_len: u16,
    /// DEL_TKN: the token is deleted once used.
    pub del_tkn: bool,
    /// IMMED.
    pub immed: bool,
    /// OFFSET INTO ROD in blocks.
    pub offset: u64,
    /// The ROD token.
    pub token: [u8; ROD_TOKEN_LEN],
    /// BLOCK DEVICE RANGE DESCRIPTOR LIST LENGTH in bytes.
    pub ranges_len: u16,
}

impl WriteUsingToken {
    /// The header's size: where the range descriptors start.
    pub const LEN: usize = 536;
}

impl WireRepr<'_> for WriteUsingToken {
    type Error = CopyParamError;

    fn parse(buf: &[u8]) -> Result<Self, CopyParamError> {
        let w: WriteUsingTokenWire = take(buf)?;
        Ok(WriteUsingToken {
            data_len: w.data_len.get(),
            del_tkn: w.flags & 0x02 != 0,
            immed: w.flags & 0x01 != 0,
            offset: w.offset.get(),
            token: w.token,
            ranges_len: w.ranges_len.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        Self::LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, CopyParamError> {
        place(
            buf,
            &WriteUsingTokenWire {
                data_len: U16::new(self.data_len),
                flags: u8::from(self.del_tkn) << 1 | u8::from(self.immed),
                reserved: [0; 5],
                offset: U64::new(self.offset),
                token: self.token,
                reserved2: [0; 6],
                ranges_len: U16::new(self.ranges_len),
            },
        )
    }
}

/// A token operation's parameter list: `header` (its DATA LENGTH and RANGE DESCRIPTOR
/// LIST LENGTH set here from `ranges`), then `ranges` — what an initiator sends.
pub fn token_param_list<'a, H: WireRepr<'a, Error = CopyParamError>>(
    header: &H,
    ranges: &[Range],
) -> Result<Vec<u8>, CopyParamError> {
    let head = header.buffer_len();
    let mut out = vec![0u8; head + 16 * ranges.len()];
    header.emit(&mut out)?;
    for (r, at) in ranges.iter().zip((head..).step_by(16)) {
        r.emit(&mut out[at..])?;
    }
    let too_long = |len: usize| CopyParamError::BadLength {
        what: "token parameter list",
        len,
    };
    let data_len = u16::try_from(out.len() - 2).map_err(|_| too_long(out.len()))?;
    let ranges_len = u16::try_from(16 * ranges.len()).map_err(|_| too_long(out.len()))?;
    out[..2].copy_from_slice(&data_len.to_be_bytes());
    out[head - 2..head].copy_from_slice(&ranges_len.to_be_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sg_xcopy's header: list 1, LIST ID USAGE 10b, PRIORITY 1, two CSCDs, one segment.
    const HEADER: [u8; 16] = [
        0x01, // LIST IDENTIFIER
        0x11, // STR 0, LIST ID USAGE 10b, PRIORITY 1
        0x00, 0x40, // CSCD DESCRIPTOR LIST LENGTH 64
        0, 0, 0, 0, // reserved
        0x00, 0x00, 0x00, 0x1c, // SEGMENT DESCRIPTOR LIST LENGTH 28
        0x00, 0x00, 0x00, 0x00, // INLINE DATA LENGTH
    ];
    fn header() -> XcopyHeader {
        XcopyHeader {
            list_id: 1,
            striped: false,
            list_id_usage: 0b10,
            priority: 1,
            cscd_len: 64,
            segment_len: 28,
            inline_len: 0,
        }
    }
    wire_tests!(xcopy_header: XcopyHeader, HEADER, header());

    /// An Identification CSCD naming a LU by its NAA 6 designator, 512-byte blocks.
    const CSCD: [u8; 32] = [
        0xe4, // Identification
        0x00, // LU ID TYPE 00b, NUL 0, PERIPHERAL DEVICE TYPE 0
        0x00, 0x00, // RELATIVE INITIATOR PORT IDENTIFIER
        0x01, // CODE SET binary
        0x03, // PIV 0, ASSOCIATION LU, DESIGNATOR TYPE NAA
        0x00, // reserved
        0x10, // DESIGNATOR LENGTH 16
        0x60, 0x01, 0x40, 0x51, 0x23, 0x45, 0x67, 0x89, // NAA 6 ...
        0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, // ... IEEE registered extended
        0, 0, 0, 0,    // padding to 20
        0x00, // PAD 0
        0x00, 0x02, 0x00, // DISK BLOCK LENGTH 512
    ];
    fn cscd() -> IdCscd {
        let mut designator = [0u8; 20];
        designator[..16].copy_from_slice(&CSCD[8..24]);
        IdCscd {
            lu_id_type: 0,
            nul: false,
            device_type: 0,
            ripi: 0,
            code_set: 1,
            association: 0,
            designator_type: 3,
            designator_len: 16,
            designator,
            pad: false,
            block_len: 512,
        }
    }
    wire_tests!(id_cscd: IdCscd, CSCD, cscd());

    /// A segment copying 0xffff blocks from LBA 0 of CSCD 0 to LBA 2^32 of CSCD 1.
    const SEGMENT: [u8; 28] = [
        0x02, // block to block
        0x00, // DC 0, CAT 0
        0x00, 0x18, // DESCRIPTOR LENGTH
        0x00, 0x00, // SOURCE CSCD DESCRIPTOR ID
        0x00, 0x01, // DESTINATION CSCD DESCRIPTOR ID
        0, 0, // reserved
        0xff, 0xff, // BLOCK DEVICE NUMBER OF BLOCKS
        0, 0, 0, 0, 0, 0, 0, 0, // SOURCE LBA
        0, 0, 0, 1, 0, 0, 0, 0, // DESTINATION LBA
    ];
    fn segment() -> BlockSegment {
        BlockSegment {
            dc: false,
            cat: false,
            source: 0,
            destination: 1,
            blocks: 0xffff,
            source_lba: 0,
            destination_lba: 1 << 32,
        }
    }
    wire_tests!(block_segment: BlockSegment, SEGMENT, segment());

    /// A range of 2048 blocks at LBA 0x10000.
    const RANGE: [u8; 16] = [
        0, 0, 0, 0, 0, 0x01, 0x00, 0x00, // LBA
        0x00, 0x00, 0x08, 0x00, // NUMBER OF LOGICAL BLOCKS
        0, 0, 0, 0, // reserved
    ];
    wire_tests!(range: Range, RANGE, Range { lba: 0x1_0000, blocks: 2048 });

    /// POPULATE TOKEN with RTV (access upon reference), a 10 s inactivity timeout, one range.
    const POPULATE: [u8; 16] = [
        0x00, 0x1e, // POPULATE TOKEN DATA LENGTH 30
        0x02, // RTV 1, IMMED 0
        0x00, // reserved
        0, 0, 0, 10, // INACTIVITY TIMEOUT
        0x00, 0x01, 0x00, 0x00, // ROD TYPE: access upon reference
        0, 0, // reserved
        0x00, 0x10, // BLOCK DEVICE RANGE DESCRIPTOR LIST LENGTH 16
    ];
    fn populate() -> PopulateToken {
        PopulateToken {
            data_len: 30,
            rtv: true,
            immed: false,
            inactivity_s: 10,
            rod_type: 0x0001_0000,
            ranges_len: 16,
        }
    }
    wire_tests!(populate_token: PopulateToken, POPULATE, populate());

    /// WRITE USING TOKEN with DEL_TKN, offset 8 into the ROD, a token of 0x5a, one range.
    fn wut_bytes() -> [u8; 536] {
        let mut b = [0u8; 536];
        b[..2].copy_from_slice(&[0x02, 0x26]); // DATA LENGTH 550
        b[2] = 0x02; // DEL_TKN 1, IMMED 0
        b[15] = 8; // OFFSET INTO ROD
        b[16..528].fill(0x5a); // ROD TOKEN
        b[534..].copy_from_slice(&[0x00, 0x10]); // RANGE DESCRIPTOR LIST LENGTH 16
        b
    }
    fn wut() -> WriteUsingToken {
        WriteUsingToken {
            data_len: 550,
            del_tkn: true,
            immed: false,
            offset: 8,
            token: [0x5a; ROD_TOKEN_LEN],
            ranges_len: 16,
        }
    }
    wire_tests!(write_using_token: WriteUsingToken, wut_bytes(), wut());

    #[test]
    fn token_lists_carry_their_lengths() {
        let r = [Range {
            lba: 0x1_0000,
            blocks: 2048,
        }];
        let header = PopulateToken {
            data_len: 0,
            ranges_len: 0,
            ..populate()
        };
        let l = token_param_list(&header, &r).expect("fits");
        assert_eq!(l[..16], POPULATE);
        assert_eq!(l[16..], RANGE);
        let header = WriteUsingToken {
            data_len: 0,
            ranges_len: 0,
            ..wut()
        };
        let l = token_param_list(&header, &r).expect("fits");
        assert_eq!(l[..536], wut_bytes());
        assert_eq!(l[536..], RANGE);
    }

    #[test]
    fn a_cscd_for_a_naa_round_trips_and_names_it() {
        let naa: [u8; 16] = CSCD[8..24].try_into().expect("16");
        assert_eq!(IdCscd::for_naa(&naa, 512), cscd());
        assert_eq!(cscd().lu_naa(), Some(&naa[..]));
        let t10 = IdCscd {
            designator_type: 1,
            ..cscd()
        };
        assert_eq!(t10.lu_naa(), None);
    }

    #[test]
    fn rejections_name_their_sense() {
        let mut c = CSCD;
        c[0] = 0xe0;
        let e = IdCscd::parse(&c).expect_err("type E0h");
        assert_eq!(
            e.sense().code(),
            SenseCode::UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE
        );
        c = CSCD;
        c[7] = 21;
        assert!(matches!(
            IdCscd::parse(&c),
            Err(CopyParamError::BadLength { .. })
        ));
        let mut s = SEGMENT;
        s[0] = 0x03;
        let e = BlockSegment::parse(&s).expect_err("type 03h");
        assert_eq!(
            e.sense().code(),
            SenseCode::UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE
        );
        s = SEGMENT;
        s[3] = 0x1c;
        assert!(matches!(
            BlockSegment::parse(&s),
            Err(CopyParamError::BadLength { .. })
        ));
        let e = XcopyHeader::parse(&HEADER[..15]).expect_err("short");
        assert_eq!(e.sense().code(), SenseCode::PARAMETER_LIST_LENGTH_ERROR);
    }
}
