//! Commands that ask about or prepare the medium rather than move data (SBC-4): PRE-FETCH
//! (10/16), GET LBA STATUS, READ DEFECT DATA (10/12) and PREVENT ALLOW MEDIUM REMOVAL.

use super::rw::lba_len;
use super::{CdbError, Command, LongCdb, flag, put, read};
use crate::units::{BlockCount, Lba};
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// IMMED of PRE-FETCH (byte 1 bit 1).
const PREFETCH_IMMED: u8 = 0x02;

/// PRE-FETCH(10)/(16): bring blocks into the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreFetch {
    /// Which CDB (10 or 16 bytes).
    pub cdb: LongCdb,
    /// First block.
    pub lba: Lba,
    /// PREFETCH LENGTH; 0 means through the last block.
    pub blocks: BlockCount,
    /// IMMED: return status once the CDB is checked.
    pub immed: bool,
    /// GROUP NUMBER (5 bits; a hint, no grouping function behind it here).
    pub group: u8,
}

impl PreFetch {
    fn decode(cdb: LongCdb, c: &[u8]) -> Result<Command, CdbError> {
        let (flags, lba, blocks) = lba_len(cdb, c)?;
        // GROUP NUMBER: byte 6 of the 10-byte CDB, byte 14 of the 16-byte one.
        let group = if cdb == LongCdb::Ten { c[6] } else { c[14] } & 0x1f;
        Ok(Command::PreFetch(PreFetch {
            cdb,
            lba,
            blocks,
            immed: flags & PREFETCH_IMMED != 0,
            group,
        }))
    }

    pub(super) fn opcode(&self) -> u8 {
        if self.cdb == LongCdb::Ten { 0x34 } else { 0x90 }
    }

    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        if self.group > 0x1f {
            let value = self.group.into();
            return Err(CdbError::OutOfRange {
                field: "GROUP NUMBER",
                value,
            });
        }
        let flags = flag(self.immed, PREFETCH_IMMED);
        super::block::put_ten_or_sixteen(
            out,
            self.cdb,
            self.opcode(),
            flags,
            self.lba,
            self.blocks,
        )?;
        let at = if self.cdb == LongCdb::Ten { 6 } else { 14 };
        out[at] = self.group;
        Ok(())
    }
}

pub(super) fn prefetch10(c: &[u8]) -> Result<Command, CdbError> {
    PreFetch::decode(LongCdb::Ten, c)
}
pub(super) fn prefetch16(c: &[u8]) -> Result<Command, CdbError> {
    PreFetch::decode(LongCdb::Sixteen, c)
}

/// SERVICE ACTION IN(16) / GET LBA STATUS as laid out on the wire (SBC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct GetLbaStatusCdb {
    /// OPERATION CODE (9Eh).
    pub opcode: u8,
    /// SERVICE ACTION (12h).
    pub service_action: u8,
    /// STARTING LOGICAL BLOCK ADDRESS.
    pub lba: U64,
    /// ALLOCATION LENGTH.
    pub alloc_len: U32,
    /// REPORT TYPE (bits 1:0; the rest reserved). Use [`LbaReportType`].
    pub report_type: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<GetLbaStatusCdb>() == 16);

/// SERVICE ACTION 12h of SERVICE ACTION IN(16).
pub const SA_GET_LBA_STATUS: u8 = 0x12;

/// REPORT TYPE of GET LBA STATUS(16) (SBC-4, byte 14 bits 1:0): which LBAs the
/// descriptors cover, by PROVISIONING STATUS. The four values sg3_utils'
/// `sg_get_lba_status --report-type` sends as 0..=3 (SBC-5 widens the field for anchored
/// and unrecovered-error reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LbaReportType {
    /// 00b: all LBAs.
    #[default]
    All,
    /// 01b: LBAs whose PROVISIONING STATUS is not 0h (not mapped: deallocated or anchored).
    NonZero,
    /// 10b: mapped LBAs.
    Mapped,
    /// 11b: deallocated LBAs.
    Deallocated,
}

/// REPORT TYPE's bits in byte 14.
const REPORT_TYPE_MASK: u8 = 0x03;

impl LbaReportType {
    /// From byte 14 (bits 1:0; the others are the table's reserved-bit check's).
    pub fn from_bits(b: u8) -> LbaReportType {
        match b & REPORT_TYPE_MASK {
            0 => LbaReportType::All,
            1 => LbaReportType::NonZero,
            2 => LbaReportType::Mapped,
            _ => LbaReportType::Deallocated,
        }
    }

    /// The field's value.
    pub fn bits(self) -> u8 {
        match self {
            LbaReportType::All => 0,
            LbaReportType::NonZero => 1,
            LbaReportType::Mapped => 2,
            LbaReportType::Deallocated => 3,
        }
    }
}

/// GET LBA STATUS: the provisioning status of the blocks from `lba` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetLbaStatus {
    /// STARTING LOGICAL BLOCK ADDRESS.
    pub lba: Lba,
    /// ALLOCATION LENGTH.
    pub alloc_len: u32,
    /// REPORT TYPE.
    pub report_type: LbaReportType,
}

impl GetLbaStatus {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = GetLbaStatusCdb {
            opcode: 0x9e,
            service_action: SA_GET_LBA_STATUS,
            lba: U64::new(self.lba.0),
            alloc_len: U32::new(self.alloc_len),
            report_type: self.report_type.bits(),
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn get_lba_status(c: &[u8]) -> Result<Command, CdbError> {
    let h: GetLbaStatusCdb = read(c)?;
    Ok(Command::GetLbaStatus(GetLbaStatus {
        lba: Lba(h.lba.get()),
        alloc_len: h.alloc_len.get(),
        report_type: LbaReportType::from_bits(h.report_type),
    }))
}

/// REQ_PLIST (bit 4), REQ_GLIST (bit 3), DEFECT LIST FORMAT (bits 2:0).
const REQ_PLIST: u8 = 0x10;
const REQ_GLIST: u8 = 0x08;
const FORMAT_MASK: u8 = 0x07;

/// READ DEFECT DATA(10) as laid out on the wire (SBC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ReadDefectData10Cdb {
    /// OPERATION CODE (37h).
    pub opcode: u8,
    /// Reserved.
    pub reserved: u8,
    /// REQ_PLIST, REQ_GLIST, DEFECT LIST FORMAT.
    pub flags: u8,
    /// Reserved.
    pub reserved2: [u8; 4],
    /// ALLOCATION LENGTH.
    pub alloc_len: U16,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<ReadDefectData10Cdb>() == 10);

/// READ DEFECT DATA(12) as laid out on the wire (SBC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ReadDefectData12Cdb {
    /// OPERATION CODE (B7h).
    pub opcode: u8,
    /// REQ_PLIST, REQ_GLIST, DEFECT LIST FORMAT.
    pub flags: u8,
    /// ADDRESS DESCRIPTOR INDEX.
    pub index: U32,
    /// ALLOCATION LENGTH.
    pub alloc_len: U32,
    /// Reserved.
    pub reserved: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<ReadDefectData12Cdb>() == 12);

/// READ DEFECT DATA(10)/(12): the medium's primary and grown defect lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadDefectData {
    /// 12-byte CDB (32-bit lengths, an address descriptor index, an 8-byte header).
    pub twelve: bool,
    /// REQ_PLIST.
    pub plist: bool,
    /// REQ_GLIST.
    pub glist: bool,
    /// DEFECT LIST FORMAT (3 bits).
    pub format: u8,
    /// ADDRESS DESCRIPTOR INDEX (12-byte CDB only; 0 for the 10-byte one).
    pub index: u32,
    /// ALLOCATION LENGTH.
    pub alloc_len: u32,
}

impl ReadDefectData {
    fn flags(&self) -> Result<u8, CdbError> {
        if self.format > FORMAT_MASK {
            let value = self.format.into();
            return Err(CdbError::OutOfRange {
                field: "DEFECT LIST FORMAT",
                value,
            });
        }
        Ok(flag(self.plist, REQ_PLIST) | flag(self.glist, REQ_GLIST) | self.format)
    }

    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let flags = self.flags()?;
        if self.twelve {
            return put(
                out,
                &ReadDefectData12Cdb {
                    opcode: 0xb7,
                    flags,
                    index: U32::new(self.index),
                    alloc_len: U32::new(self.alloc_len),
                    reserved: 0,
                    control: 0,
                },
            );
        }
        if self.index != 0 {
            let value = self.index.into();
            return Err(CdbError::OutOfRange {
                field: "ADDRESS DESCRIPTOR INDEX of READ DEFECT DATA(10)",
                value,
            });
        }
        put(
            out,
            &ReadDefectData10Cdb {
                opcode: 0x37,
                reserved: 0,
                flags,
                reserved2: [0; 4],
                alloc_len: U16::new(super::fit("ALLOCATION LENGTH", self.alloc_len)?),
                control: 0,
            },
        )
    }
}

pub(super) fn read_defect_data10(c: &[u8]) -> Result<Command, CdbError> {
    let h: ReadDefectData10Cdb = read(c)?;
    Ok(Command::ReadDefectData(ReadDefectData {
        twelve: false,
        plist: h.flags & REQ_PLIST != 0,
        glist: h.flags & REQ_GLIST != 0,
        format: h.flags & FORMAT_MASK,
        index: 0,
        alloc_len: h.alloc_len.get().into(),
    }))
}

pub(super) fn read_defect_data12(c: &[u8]) -> Result<Command, CdbError> {
    let h: ReadDefectData12Cdb = read(c)?;
    Ok(Command::ReadDefectData(ReadDefectData {
        twelve: true,
        plist: h.flags & REQ_PLIST != 0,
        glist: h.flags & REQ_GLIST != 0,
        format: h.flags & FORMAT_MASK,
        index: h.index.get(),
        alloc_len: h.alloc_len.get(),
    }))
}

/// PREVENT ALLOW MEDIUM REMOVAL: PREVENT (byte 4 bits 1:0).
pub(super) fn prevent_allow(c: &[u8]) -> Result<Command, CdbError> {
    let h: [u8; 6] = read(c)?;
    Ok(Command::PreventAllowMediumRemoval {
        prevent: h[4] & 0x03,
    })
}

pub(super) fn emit_prevent_allow(prevent: u8, out: &mut [u8]) -> Result<(), CdbError> {
    if prevent > 0x03 {
        let value = prevent.into();
        return Err(CdbError::OutOfRange {
            field: "PREVENT",
            value,
        });
    }
    put(out, &[0x1e, 0, 0, 0, prevent, 0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    /// PRE-FETCH(10) with IMMED, 0x800 blocks at LBA 0x100, group 3.
    const PREFETCH10: [u8; 10] = [
        0x34, // PRE-FETCH(10)
        0x02, // IMMED 1
        0x00, 0x00, 0x01, 0x00, // LBA
        0x03, // GROUP NUMBER 3
        0x08, 0x00, // PREFETCH LENGTH
        0x00, // CONTROL
    ];
    fn pf(cdb: LongCdb, lba: u64, blocks: u32, immed: bool) -> Command {
        Command::PreFetch(PreFetch {
            cdb,
            lba: Lba(lba),
            blocks: BlockCount(blocks),
            immed,
            group: 0,
        })
    }
    fn pf10() -> Command {
        Command::PreFetch(PreFetch {
            cdb: LongCdb::Ten,
            lba: Lba(0x100),
            blocks: BlockCount(0x800),
            immed: true,
            group: 3,
        })
    }
    wire_tests!(prefetch10: Command, PREFETCH10, pf10());

    /// PRE-FETCH(16) of the rest of the medium (length 0) from LBA 2^33.
    const PREFETCH16: [u8; 16] = [
        0x90, // PRE-FETCH(16)
        0x00, // IMMED 0
        0, 0, 0, 0x02, 0, 0, 0, 0, // LBA 2^33
        0, 0, 0, 0,    // PREFETCH LENGTH 0
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    wire_tests!(prefetch16: Command, PREFETCH16, pf(LongCdb::Sixteen, 1 << 33, 0, false));

    /// GET LBA STATUS from LBA 0x1000, allocation length 4 KiB.
    const GET_LBA_STATUS: [u8; 16] = [
        0x9e, // SERVICE ACTION IN(16)
        0x12, // GET LBA STATUS
        0, 0, 0, 0, 0, 0, 0x10, 0x00, // STARTING LBA
        0x00, 0x00, 0x10, 0x00, // ALLOCATION LENGTH
        0x00, // REPORT TYPE 00b: all LBAs
        0x00, // CONTROL
    ];
    fn gls() -> Command {
        Command::GetLbaStatus(GetLbaStatus {
            lba: Lba(0x1000),
            alloc_len: 0x1000,
            report_type: LbaReportType::All,
        })
    }
    wire_tests!(get_lba_status: Command, GET_LBA_STATUS, gls());

    /// GET LBA STATUS of the deallocated LBAs from LBA 0, allocation length 24.
    const GET_LBA_STATUS_DEALLOCATED: [u8; 16] = [
        0x9e, // SERVICE ACTION IN(16)
        0x12, // GET LBA STATUS
        0, 0, 0, 0, 0, 0, 0, 0, // STARTING LBA
        0x00, 0x00, 0x00, 0x18, // ALLOCATION LENGTH
        0x03, // REPORT TYPE 11b: deallocated LBAs
        0x00, // CONTROL
    ];
    fn gls_deallocated() -> Command {
        Command::GetLbaStatus(GetLbaStatus {
            lba: Lba(0),
            alloc_len: 24,
            report_type: LbaReportType::Deallocated,
        })
    }
    wire_tests!(
        get_lba_status_deallocated: Command,
        GET_LBA_STATUS_DEALLOCATED,
        gls_deallocated()
    );

    #[test]
    fn lba_report_type_round_trips_and_reserved_bits_are_refused() {
        for b in 0..4 {
            assert_eq!(LbaReportType::from_bits(b).bits(), b);
        }
        let mut c = GET_LBA_STATUS;
        c[14] = 0x04;
        assert!(Command::parse(&c).is_err(), "byte 14 bit 2 is reserved");
    }

    /// READ DEFECT DATA(10) of both lists in the long block format, 512 bytes allowed.
    const RDD10: [u8; 10] = [
        0x37, // READ DEFECT DATA(10)
        0x00, // reserved
        0x1b, // REQ_PLIST 1, REQ_GLIST 1, DEFECT LIST FORMAT 011b
        0, 0, 0, 0, // reserved
        0x02, 0x00, // ALLOCATION LENGTH 512
        0x00, // CONTROL
    ];
    fn rdd10() -> Command {
        Command::ReadDefectData(ReadDefectData {
            twelve: false,
            plist: true,
            glist: true,
            format: 3,
            index: 0,
            alloc_len: 512,
        })
    }
    wire_tests!(read_defect_data10: Command, RDD10, rdd10());

    /// READ DEFECT DATA(12) of the grown list, short block format, from index 5.
    const RDD12: [u8; 12] = [
        0xb7, // READ DEFECT DATA(12)
        0x08, // REQ_GLIST 1, DEFECT LIST FORMAT 000b
        0, 0, 0, 5, // ADDRESS DESCRIPTOR INDEX
        0, 0, 0x01, 0,    // ALLOCATION LENGTH 256
        0x00, // reserved
        0x00, // CONTROL
    ];
    fn rdd12() -> Command {
        Command::ReadDefectData(ReadDefectData {
            twelve: true,
            plist: false,
            glist: true,
            format: 0,
            index: 5,
            alloc_len: 256,
        })
    }
    wire_tests!(read_defect_data12: Command, RDD12, rdd12());

    /// PREVENT ALLOW MEDIUM REMOVAL with PREVENT 01b.
    const PAMR: [u8; 6] = [
        0x1e, // PREVENT ALLOW MEDIUM REMOVAL
        0, 0, 0,    // reserved
        0x01, // PREVENT 01b
        0x00, // CONTROL
    ];
    wire_tests!(prevent_allow: Command, PAMR, Command::PreventAllowMediumRemoval { prevent: 1 });

    #[test]
    fn emit_refuses_what_the_cdb_cannot_hold() {
        let mut out = [0u8; 16];
        let mut r = rdd10();
        if let Command::ReadDefectData(d) = &mut r {
            d.alloc_len = 0x1_0000;
        }
        assert!(r.emit(&mut out).is_err());
        let twelve = pf(LongCdb::Twelve, 0, 1, false);
        assert!(twelve.emit(&mut out).is_err());
        assert!(
            Command::PreventAllowMediumRemoval { prevent: 4 }
                .emit(&mut out)
                .is_err()
        );
    }
}
