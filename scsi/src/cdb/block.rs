//! SYNCHRONIZE CACHE, WRITE SAME, UNMAP, START STOP UNIT and READ CAPACITY (SBC-3).

use super::rw::{Rw10Cdb, lba_len, put_long};
use super::{CdbError, Command, LongCdb, flag, put, read};
use crate::units::{BlockCount, Lba};
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// IMMED of SYNCHRONIZE CACHE (byte 1 bit 1).
const SYNC_IMMED: u8 = 0x02;
/// ANCHOR of WRITE SAME (byte 1 bit 4).
const WS_ANCHOR: u8 = 0x10;
/// UNMAP of WRITE SAME (byte 1 bit 3).
const WS_UNMAP: u8 = 0x08;

/// SYNCHRONIZE CACHE(10)/(16): write cached blocks to the medium.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynchronizeCache {
    /// Which CDB.
    pub cdb: LongCdb,
    /// First block.
    pub lba: Lba,
    /// NUMBER OF LOGICAL BLOCKS; 0 means through the last block.
    pub blocks: BlockCount,
    /// IMMED: return status before the cache is flushed.
    pub immed: bool,
}

impl SynchronizeCache {
    fn decode(cdb: LongCdb, c: &[u8]) -> Result<Command, CdbError> {
        let (flags, lba, blocks) = lba_len(cdb, c)?;
        Ok(Command::SynchronizeCache(SynchronizeCache {
            cdb,
            lba,
            blocks,
            immed: flags & SYNC_IMMED != 0,
        }))
    }

    pub(super) fn emit(&self, opcode: u8, out: &mut [u8]) -> Result<(), CdbError> {
        let flags = flag(self.immed, SYNC_IMMED);
        put_ten_or_sixteen(out, self.cdb, opcode, flags, self.lba, self.blocks)
    }
}

/// A command with only 10- and 16-byte forms: its CDB, or `OutOfRange` for a 12-byte one.
pub(super) fn put_ten_or_sixteen(
    out: &mut [u8],
    cdb: LongCdb,
    opcode: u8,
    flags: u8,
    lba: Lba,
    n: BlockCount,
) -> Result<(), CdbError> {
    if cdb == LongCdb::Twelve {
        return Err(CdbError::OutOfRange {
            field: "CDB size (this command has no 12-byte form)",
            value: 12,
        });
    }
    put_long(out, cdb, opcode, flags, lba, n)
}

pub(super) fn sync_cache10(c: &[u8]) -> Result<Command, CdbError> {
    SynchronizeCache::decode(LongCdb::Ten, c)
}
pub(super) fn sync_cache16(c: &[u8]) -> Result<Command, CdbError> {
    SynchronizeCache::decode(LongCdb::Sixteen, c)
}

/// WRITE SAME(10)/(16): write one block of data-out to a range, or unmap it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteSame {
    /// Which CDB.
    pub cdb: LongCdb,
    /// First block.
    pub lba: Lba,
    /// NUMBER OF LOGICAL BLOCKS; 0 means through the last block (if WSNZ=0).
    pub blocks: BlockCount,
    /// UNMAP: the blocks may be unmapped.
    pub unmap: bool,
    /// ANCHOR: unmapped blocks become anchored (requires UNMAP).
    pub anchor: bool,
}

impl WriteSame {
    fn decode(cdb: LongCdb, c: &[u8]) -> Result<Command, CdbError> {
        let (flags, lba, blocks) = lba_len(cdb, c)?;
        let (unmap, anchor) = (flags & WS_UNMAP != 0, flags & WS_ANCHOR != 0);
        // SBC-3: ANCHOR=1 with UNMAP=0 is INVALID FIELD IN CDB.
        if anchor && !unmap {
            return Err(CdbError::InvalidField { byte: 1, bit: 4 });
        }
        Ok(Command::WriteSame(WriteSame {
            cdb,
            lba,
            blocks,
            unmap,
            anchor,
        }))
    }

    pub(super) fn emit(&self, opcode: u8, out: &mut [u8]) -> Result<(), CdbError> {
        if self.anchor && !self.unmap {
            return Err(CdbError::OutOfRange {
                field: "ANCHOR without UNMAP",
                value: 1,
            });
        }
        let flags = flag(self.unmap, WS_UNMAP) | flag(self.anchor, WS_ANCHOR);
        put_ten_or_sixteen(out, self.cdb, opcode, flags, self.lba, self.blocks)
    }
}

pub(super) fn write_same10(c: &[u8]) -> Result<Command, CdbError> {
    WriteSame::decode(LongCdb::Ten, c)
}
pub(super) fn write_same16(c: &[u8]) -> Result<Command, CdbError> {
    WriteSame::decode(LongCdb::Sixteen, c)
}

/// UNMAP as laid out on the wire (SBC-3).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct UnmapCdb {
    /// OPERATION CODE (42h).
    pub opcode: u8,
    /// Bit 0: ANCHOR.
    pub flags: u8,
    /// Reserved.
    pub reserved: [u8; 4],
    /// GROUP NUMBER.
    pub group: u8,
    /// PARAMETER LIST LENGTH.
    pub param_len: U16,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<UnmapCdb>() == 10);

/// UNMAP: the block descriptors come in the parameter list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unmap {
    /// ANCHOR.
    pub anchor: bool,
    /// PARAMETER LIST LENGTH in bytes.
    pub param_len: u16,
}

impl Unmap {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = UnmapCdb {
            opcode: 0x42,
            flags: flag(self.anchor, 0x01),
            reserved: [0; 4],
            group: 0,
            param_len: U16::new(self.param_len),
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn unmap(c: &[u8]) -> Result<Command, CdbError> {
    let h: UnmapCdb = read(c)?;
    Ok(Command::Unmap(Unmap {
        anchor: h.flags & 0x01 != 0,
        param_len: h.param_len.get(),
    }))
}

/// START STOP UNIT as laid out on the wire (SBC-3).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct StartStopUnitCdb {
    /// OPERATION CODE (1Bh).
    pub opcode: u8,
    /// Bit 0: IMMED.
    pub immed: u8,
    /// Reserved.
    pub reserved: u8,
    /// Bits 3:0: POWER CONDITION MODIFIER.
    pub modifier: u8,
    /// Bits 7:4 POWER CONDITION, bit 2 NO_FLUSH, bit 1 LOEJ, bit 0 START.
    pub condition: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<StartStopUnitCdb>() == 6);

/// START STOP UNIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartStopUnit {
    /// IMMED: return status before the operation completes.
    pub immed: bool,
    /// POWER CONDITION MODIFIER (4 bits).
    pub power_condition_modifier: u8,
    /// POWER CONDITION (4 bits; 0 = START_VALID, use START and LOEJ).
    pub power_condition: u8,
    /// NO_FLUSH: do not flush the cache before stopping.
    pub no_flush: bool,
    /// LOEJ: load (START=1) or eject (START=0) the medium.
    pub loej: bool,
    /// START: make the unit ready (1) or stop it (0).
    pub start: bool,
}

impl StartStopUnit {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        if self.power_condition_modifier > 0x0f {
            let value = self.power_condition_modifier.into();
            return Err(CdbError::OutOfRange {
                field: "POWER CONDITION MODIFIER",
                value,
            });
        }
        if self.power_condition > 0x0f {
            return Err(CdbError::OutOfRange {
                field: "POWER CONDITION",
                value: self.power_condition.into(),
            });
        }
        let condition = self.power_condition << 4
            | flag(self.no_flush, 0x04)
            | flag(self.loej, 0x02)
            | flag(self.start, 0x01);
        let h = StartStopUnitCdb {
            opcode: 0x1b,
            immed: flag(self.immed, 0x01),
            reserved: 0,
            modifier: self.power_condition_modifier,
            condition,
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn start_stop_unit(c: &[u8]) -> Result<Command, CdbError> {
    let h: StartStopUnitCdb = read(c)?;
    Ok(Command::StartStopUnit(StartStopUnit {
        immed: h.immed & 0x01 != 0,
        power_condition_modifier: h.modifier & 0x0f,
        power_condition: h.condition >> 4,
        no_flush: h.condition & 0x04 != 0,
        loej: h.condition & 0x02 != 0,
        start: h.condition & 0x01 != 0,
    }))
}

/// READ CAPACITY(10) has no fields left in SBC-4 (LBA and PMI are obsolete), so it is the
/// 10-byte layout with everything zero.
pub(super) fn read_capacity10(c: &[u8]) -> Result<Command, CdbError> {
    let _: Rw10Cdb = read(c)?;
    Ok(Command::ReadCapacity10)
}

pub(super) fn emit_read_capacity10(out: &mut [u8]) -> Result<(), CdbError> {
    put(
        out,
        &Rw10Cdb {
            opcode: 0x25,
            flags: 0,
            lba: U32::new(0),
            group: 0,
            length: U16::new(0),
            control: 0,
        },
    )
}

/// READ CAPACITY(16) as laid out on the wire (SBC-3).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ReadCapacity16Cdb {
    /// OPERATION CODE (9Eh).
    pub opcode: u8,
    /// Bits 4:0: SERVICE ACTION (10h).
    pub action: u8,
    /// LOGICAL BLOCK ADDRESS (obsolete).
    pub lba: U64,
    /// ALLOCATION LENGTH.
    pub alloc_len: U32,
    /// Bit 0: PMI (obsolete).
    pub pmi: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<ReadCapacity16Cdb>() == 16);

/// SERVICE ACTION IN(16) / READ CAPACITY(16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadCapacity16 {
    /// ALLOCATION LENGTH in bytes.
    pub alloc_len: u32,
}

impl ReadCapacity16 {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = ReadCapacity16Cdb {
            opcode: 0x9e,
            action: 0x10,
            lba: U64::new(0),
            alloc_len: U32::new(self.alloc_len),
            pmi: 0,
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn read_capacity16(c: &[u8]) -> Result<Command, CdbError> {
    let h: ReadCapacity16Cdb = read(c)?;
    Ok(Command::ReadCapacity16(ReadCapacity16 {
        alloc_len: h.alloc_len.get(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    /// SYNCHRONIZE CACHE(10) of the whole medium, as Linux sd sends it.
    const SYNC10: [u8; 10] = [
        0x35, // SYNCHRONIZE CACHE(10)
        0x00, // IMMED 0
        0, 0, 0, 0,    // LBA 0
        0x00, // GROUP NUMBER
        0, 0,    // NUMBER OF LOGICAL BLOCKS 0: to the end
        0x00, // CONTROL
    ];
    fn sync10() -> Command {
        Command::SynchronizeCache(SynchronizeCache {
            cdb: LongCdb::Ten,
            lba: Lba(0),
            blocks: BlockCount(0),
            immed: false,
        })
    }
    wire_tests!(sync_cache10: Command, SYNC10, sync10());

    /// SYNCHRONIZE CACHE(16) with IMMED, 16 blocks at LBA 0x1_0000_0000.
    const SYNC16: [u8; 16] = [
        0x91, // SYNCHRONIZE CACHE(16)
        0x02, // IMMED 1
        0, 0, 0, 1, 0, 0, 0, 0, // LBA
        0, 0, 0, 0x10, // NUMBER OF LOGICAL BLOCKS 16
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    fn sync16() -> Command {
        Command::SynchronizeCache(SynchronizeCache {
            cdb: LongCdb::Sixteen,
            lba: Lba(1 << 32),
            blocks: BlockCount(16),
            immed: true,
        })
    }
    wire_tests!(sync_cache16: Command, SYNC16, sync16());

    /// WRITE SAME(10) of 32 blocks at LBA 0x800, plain write (zeroing).
    const WS10: [u8; 10] = [
        0x41, // WRITE SAME(10)
        0x00, // WRPROTECT 0, ANCHOR 0, UNMAP 0
        0, 0, 0x08, 0x00, // LBA 0x800
        0x00, // GROUP NUMBER
        0x00, 0x20, // NUMBER OF LOGICAL BLOCKS 32
        0x00, // CONTROL
    ];
    fn ws10() -> Command {
        Command::WriteSame(WriteSame {
            cdb: LongCdb::Ten,
            lba: Lba(0x800),
            blocks: BlockCount(32),
            unmap: false,
            anchor: false,
        })
    }
    wire_tests!(write_same10: Command, WS10, ws10());

    /// WRITE SAME(16) with UNMAP and ANCHOR, 0x400000 blocks at LBA 0.
    const WS16: [u8; 16] = [
        0x93, // WRITE SAME(16)
        0x18, // ANCHOR 1, UNMAP 1
        0, 0, 0, 0, 0, 0, 0, 0, // LBA 0
        0x00, 0x40, 0x00, 0x00, // NUMBER OF LOGICAL BLOCKS 0x400000
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    fn ws16() -> Command {
        Command::WriteSame(WriteSame {
            cdb: LongCdb::Sixteen,
            lba: Lba(0),
            blocks: BlockCount(0x40_0000),
            unmap: true,
            anchor: true,
        })
    }
    wire_tests!(write_same16: Command, WS16, ws16());

    /// UNMAP with a 24-byte parameter list (8-byte header + one block descriptor).
    const UNMAP: [u8; 10] = [
        0x42, // UNMAP
        0x00, // ANCHOR 0
        0, 0, 0, 0,    // reserved
        0x00, // GROUP NUMBER
        0x00, 0x18, // PARAMETER LIST LENGTH 24
        0x00, // CONTROL
    ];
    wire_tests!(unmap: Command, UNMAP, Command::Unmap(Unmap { anchor: false, param_len: 24 }));

    /// START STOP UNIT: START=1 with IMMED (Linux sd spin-up).
    const SSU: [u8; 6] = [
        0x1b, // START STOP UNIT
        0x01, // IMMED 1
        0x00, // reserved
        0x00, // POWER CONDITION MODIFIER 0
        0x01, // POWER CONDITION 0 (START_VALID), NO_FLUSH 0, LOEJ 0, START 1
        0x00, // CONTROL
    ];
    fn ssu() -> Command {
        Command::StartStopUnit(StartStopUnit {
            immed: true,
            power_condition_modifier: 0,
            power_condition: 0,
            no_flush: false,
            loej: false,
            start: true,
        })
    }
    wire_tests!(start_stop_unit: Command, SSU, ssu());

    /// READ CAPACITY(10), all fields zero.
    const RC10: [u8; 10] = [
        0x25, // READ CAPACITY(10)
        0x00, // reserved
        0, 0, 0, 0, // LBA (obsolete)
        0, 0,    // reserved
        0x00, // PMI (obsolete)
        0x00, // CONTROL
    ];
    wire_tests!(read_capacity10: Command, RC10, Command::ReadCapacity10);

    /// READ CAPACITY(16) with a 32-byte allocation length, as Linux sd sends it.
    const RC16: [u8; 16] = [
        0x9e, // SERVICE ACTION IN(16)
        0x10, // SERVICE ACTION: READ CAPACITY(16)
        0, 0, 0, 0, 0, 0, 0, 0, // LBA (obsolete)
        0x00, 0x00, 0x00, 0x20, // ALLOCATION LENGTH 32
        0x00, // PMI (obsolete)
        0x00, // CONTROL
    ];
    wire_tests!(read_capacity16: Command, RC16, Command::ReadCapacity16(ReadCapacity16 { alloc_len: 32 }));

    #[test]
    fn anchor_without_unmap_is_an_invalid_field() {
        let mut c = WS10;
        c[1] = 0x10;
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 1, bit: 4 })
        );
        let bad = WriteSame {
            cdb: LongCdb::Ten,
            lba: Lba(0),
            blocks: BlockCount(1),
            unmap: false,
            anchor: true,
        };
        assert!(Command::WriteSame(bad).emit(&mut [0; 10]).is_err());
    }

    #[test]
    fn pmi_is_rejected_as_obsolete() {
        let mut c = RC10;
        c[8] = 0x01;
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 8, bit: 0 })
        );
    }
}
