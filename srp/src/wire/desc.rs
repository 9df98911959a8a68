//! Data buffer descriptors of SRP_CMD: direct (one 16-byte memory descriptor), indirect (a
//! table descriptor, a total length and a possibly partial inline list), and SRP-2 immediate
//! (a 4-byte length; the data rides in the IU itself).
//!
//! Validation here is structural only: lengths consistent with counts and totals, sums
//! computed with checked arithmetic. Fetching a partial list's remainder by RDMA READ and
//! checking descriptors against registered memory are the target's job.

use super::WireError;
use core::fmt;
use ib_verbs::Rkey;
use zerocopy::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

const IU: &str = "SRP_CMD";

wirekit::open_enum! {
    /// DATA-OUT / DATA-IN BUFFER DESCRIPTOR FORMAT, one nibble each in SRP_CMD byte 5.
    pub enum DescFormat(u8) {
        /// No data transfer in this direction.
        None = 0,
        /// One direct descriptor.
        Direct = 1,
        /// An indirect descriptor table.
        Indirect = 2,
        /// Immediate data (SRP-2; data-out only).
        Immediate = 3,
    }
}

/// A direct data buffer descriptor (`struct srp_direct_buf`): virtual address, R_Key, length.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct DirectBuf {
    va: U64,
    key: U32,
    len: U32,
}
const _: () = assert!(size_of::<DirectBuf>() == 16);

impl DirectBuf {
    /// A descriptor of `len` bytes at `va` in the region named by `rkey`.
    pub fn new(va: u64, rkey: Rkey, len: u32) -> Self {
        DirectBuf {
            va: U64::new(va),
            key: U32::new(rkey.0),
            len: U32::new(len),
        }
    }

    /// [`DirectBuf::new`] for constants.
    pub const fn new_const(va: u64, rkey: u32, len: u32) -> Self {
        DirectBuf {
            va: U64::new(va),
            key: U32::new(rkey),
            len: U32::new(len),
        }
    }

    /// Virtual address in the initiator's registered memory.
    pub fn va(&self) -> u64 {
        self.va.get()
    }

    /// Remote key of the region.
    pub fn rkey(&self) -> Rkey {
        Rkey(self.key.get())
    }

    /// Length in bytes.
    pub fn len(&self) -> u32 {
        self.len.get()
    }

    /// Whether the descriptor describes no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for DirectBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DirectBuf {{ va: {:#x}, rkey: {:#x}, len: {} }}",
            self.va(),
            self.rkey().0,
            self.len()
        )
    }
}

/// The fixed part of an indirect descriptor (`struct srp_indirect_buf` before `desc_list`).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct IndirectHdr {
    /// Where the complete descriptor table lives in initiator memory (len = entries × 16).
    pub table: DirectBuf,
    /// Sum of the lengths of all descriptors in the table.
    pub total_len: U32,
}
const _: () = assert!(size_of::<IndirectHdr>() == 20);

/// An indirect data buffer descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indirect<'a> {
    /// The complete descriptor table in initiator memory.
    pub table: DirectBuf,
    /// Total data length described by the table.
    pub total_len: u32,
    /// The descriptors carried inline: all of the table, or its first part ("partial memory
    /// descriptor list"; the target then fetches the table by RDMA READ).
    pub inline: &'a [DirectBuf],
}

impl Indirect<'_> {
    /// Number of descriptors in the complete table.
    pub fn table_entries(&self) -> usize {
        self.table.len() as usize / size_of::<DirectBuf>()
    }

    /// Whether some descriptors are only in the external table.
    pub fn is_partial(&self) -> bool {
        self.inline.len() < self.table_entries()
    }

    /// Checks that the table length is a whole number of descriptors, that the inline list
    /// is not longer than the table, and, when the list is complete, that it sums to the total.
    pub fn validate(&self) -> Result<(), WireError> {
        let bad = |field, value: u64, why| WireError::BadField {
            iu: IU,
            field,
            value,
            why,
        };
        if self.table.len() as usize % size_of::<DirectBuf>() != 0 {
            return Err(bad(
                "indirect table length",
                self.table.len().into(),
                "not a multiple of 16 (descriptor size)",
            ));
        }
        if self.inline.len() > self.table_entries() {
            return Err(bad(
                "descriptor count",
                self.inline.len() as u64,
                "more inline descriptors than the table holds",
            ));
        }
        if self.inline.len() > usize::from(u8::MAX) {
            return Err(bad(
                "descriptor count",
                self.inline.len() as u64,
                "more than 255",
            ));
        }
        if !self.is_partial() {
            let sum: u64 = self.inline.iter().map(|d| u64::from(d.len())).sum();
            if sum != u64::from(self.total_len) {
                return Err(bad(
                    "indirect total length",
                    self.total_len.into(),
                    "differs from the sum of the descriptor lengths",
                ));
            }
        }
        Ok(())
    }
}

/// The data buffer descriptor for one direction of an SRP_CMD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DataDesc<'a> {
    /// No data in this direction.
    #[default]
    None,
    /// One direct descriptor.
    Direct(DirectBuf),
    /// An indirect descriptor.
    Indirect(Indirect<'a>),
    /// Immediate data (data-out only): the bytes are `Cmd::imm_data`.
    Immediate,
}

impl DataDesc<'_> {
    /// The format nibble.
    pub fn format(&self) -> DescFormat {
        match self {
            DataDesc::None => DescFormat::None,
            DataDesc::Direct(_) => DescFormat::Direct,
            DataDesc::Indirect(_) => DescFormat::Indirect,
            DataDesc::Immediate => DescFormat::Immediate,
        }
    }

    /// The descriptor count byte: inline entries for indirect, 0 otherwise (as Linux ib_srp
    /// writes for direct and immediate; ib_srpt ignores it there).
    pub fn count(&self) -> u8 {
        match self {
            DataDesc::Indirect(i) => i.inline.len().min(255) as u8,
            _ => 0,
        }
    }

    /// Bytes this descriptor occupies in the IU.
    pub fn wire_len(&self) -> usize {
        match self {
            DataDesc::None => 0,
            DataDesc::Direct(_) => size_of::<DirectBuf>(),
            DataDesc::Indirect(i) => size_of::<IndirectHdr>() + size_of_val(i.inline),
            DataDesc::Immediate => 4,
        }
    }

    /// Total bytes described: the descriptor length, the indirect total, or `imm_len`.
    pub fn data_len(&self, imm_len: usize) -> u64 {
        match self {
            DataDesc::None => 0,
            DataDesc::Direct(d) => d.len().into(),
            DataDesc::Indirect(i) => i.total_len.into(),
            DataDesc::Immediate => imm_len as u64,
        }
    }
}

/// Parses one descriptor of format `fmt` with `count` inline entries at the start of `buf`.
/// Returns the descriptor, the immediate-data length if any, and the bytes consumed.
pub(crate) fn parse_desc(
    fmt: DescFormat,
    count: u8,
    buf: &[u8],
    have_total: usize,
    at: usize,
) -> Result<(DataDesc<'_>, Option<u32>, usize), WireError> {
    let truncated = |need: usize| WireError::Truncated {
        iu: IU,
        need: at + need,
        have: have_total,
    };
    match fmt {
        DescFormat::None => Ok((DataDesc::None, None, 0)),
        DescFormat::Direct => {
            let (d, _) = DirectBuf::read_from_prefix(buf).map_err(|_| truncated(16))?;
            Ok((DataDesc::Direct(d), None, 16))
        }
        DescFormat::Indirect => {
            let (h, rest) = IndirectHdr::read_from_prefix(buf).map_err(|_| truncated(20))?;
            let n = usize::from(count);
            let (inline, _) = <[DirectBuf]>::ref_from_prefix_with_elems(rest, n)
                .map_err(|_| truncated(20 + n * 16))?;
            let ind = Indirect {
                table: h.table,
                total_len: h.total_len.get(),
                inline,
            };
            ind.validate()?;
            Ok((DataDesc::Indirect(ind), None, 20 + n * 16))
        }
        DescFormat::Immediate => {
            let (len, _) = U32::read_from_prefix(buf).map_err(|_| truncated(4))?;
            Ok((DataDesc::Immediate, Some(len.get()), 4))
        }
        DescFormat::Unknown(code) => Err(WireError::BadField {
            iu: IU,
            field: "buffer descriptor format",
            value: code.into(),
            why: "not none, direct, indirect or immediate",
        }),
    }
}

/// Writes one descriptor at the start of `out` (sized by the caller to `wire_len`).
pub(crate) fn emit_desc(desc: &DataDesc<'_>, imm_len: u32, out: &mut [u8]) {
    match desc {
        DataDesc::None => {}
        DataDesc::Direct(d) => out.copy_from_slice(d.as_bytes()),
        DataDesc::Indirect(i) => {
            let h = IndirectHdr {
                table: i.table,
                total_len: U32::new(i.total_len),
            };
            let (head, list) = out.split_at_mut(size_of::<IndirectHdr>());
            head.copy_from_slice(h.as_bytes());
            list.copy_from_slice(i.inline.as_bytes());
        }
        DataDesc::Immediate => out.copy_from_slice(&imm_len.to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ib_verbs::Rkey;

    #[test]
    fn direct_buf_layout_is_va_key_len() {
        let d = DirectBuf::new(0x0102_0304_0506_0708, Rkey(0x1122_3344), 0x5566_7788);
        assert_eq!(
            d.as_bytes(),
            &[
                1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88
            ]
        );
        assert_eq!(d.va(), 0x0102_0304_0506_0708);
        assert_eq!(d.rkey(), Rkey(0x1122_3344));
        assert_eq!(d.len(), 0x5566_7788);
    }

    #[test]
    fn indirect_validation_names_the_problem() {
        let a = DirectBuf::new(0x1000, Rkey(1), 512);
        let list = [a, a];
        let ok = Indirect {
            table: DirectBuf::new(0x9000, Rkey(2), 32),
            total_len: 1024,
            inline: &list,
        };
        assert_eq!(ok.validate(), Ok(()));
        assert!(!ok.is_partial());
        let partial = Indirect {
            table: DirectBuf::new(0x9000, Rkey(2), 48),
            total_len: 4096,
            inline: &list,
        };
        assert_eq!(partial.validate(), Ok(()));
        assert!(partial.is_partial());
        let odd = Indirect {
            table: DirectBuf::new(0x9000, Rkey(2), 33),
            ..ok
        };
        assert!(matches!(
            odd.validate(),
            Err(WireError::BadField {
                field: "indirect table length",
                ..
            })
        ));
        let short = Indirect {
            table: DirectBuf::new(0x9000, Rkey(2), 16),
            ..ok
        };
        assert!(matches!(
            short.validate(),
            Err(WireError::BadField {
                field: "descriptor count",
                ..
            })
        ));
        let sum = Indirect {
            total_len: 1000,
            ..ok
        };
        assert!(matches!(
            sum.validate(),
            Err(WireError::BadField {
                field: "indirect total length",
                ..
            })
        ));
    }

    #[test]
    fn unknown_format_is_rejected() {
        let err = parse_desc(DescFormat::from(5), 0, &[0; 32], 80, 48).expect_err("format 5");
        assert!(matches!(
            err,
            WireError::BadField {
                field: "buffer descriptor format",
                value: 5,
                ..
            }
        ));
    }
}
