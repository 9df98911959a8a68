//! READ and WRITE (6/10/12/16), VERIFY (10/12/16) and COMPARE AND WRITE (SBC-3).

use super::{CdbError, Command, LongCdb, RwCdb, fit, flag, put, read};
use crate::units::{BlockCount, Lba};
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// DPO: disable page out (byte 1 bit 4).
pub const DPO: u8 = 0x10;
/// FUA: force unit access (byte 1 bit 3).
pub const FUA: u8 = 0x08;

/// READ(6)/WRITE(6) as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Rw6Cdb {
    /// OPERATION CODE.
    pub opcode: u8,
    /// Bits 4:0: LBA bits 20:16.
    pub lba_hi: u8,
    /// LBA bits 15:0.
    pub lba_lo: U16,
    /// TRANSFER LENGTH (0 means 256).
    pub length: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<Rw6Cdb>() == 6);

/// The 10-byte LBA/length CDB layout (READ, WRITE, VERIFY, SYNCHRONIZE CACHE, WRITE SAME).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Rw10Cdb {
    /// OPERATION CODE.
    pub opcode: u8,
    /// PROTECT bits 7:5 and command flags.
    pub flags: u8,
    /// LOGICAL BLOCK ADDRESS.
    pub lba: U32,
    /// GROUP NUMBER.
    pub group: u8,
    /// TRANSFER LENGTH / VERIFICATION LENGTH / NUMBER OF LOGICAL BLOCKS.
    pub length: U16,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<Rw10Cdb>() == 10);

/// READ(12)/WRITE(12) as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Rw12Cdb {
    /// OPERATION CODE.
    pub opcode: u8,
    /// RDPROTECT/WRPROTECT, DPO, FUA.
    pub flags: u8,
    /// LOGICAL BLOCK ADDRESS.
    pub lba: U32,
    /// TRANSFER LENGTH.
    pub length: U32,
    /// GROUP NUMBER.
    pub group: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<Rw12Cdb>() == 12);

/// The 16-byte LBA/length CDB layout (READ, WRITE, VERIFY, SYNCHRONIZE CACHE, WRITE SAME).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Rw16Cdb {
    /// OPERATION CODE.
    pub opcode: u8,
    /// PROTECT bits 7:5 and command flags.
    pub flags: u8,
    /// LOGICAL BLOCK ADDRESS.
    pub lba: U64,
    /// TRANSFER LENGTH / VERIFICATION LENGTH / NUMBER OF LOGICAL BLOCKS.
    pub length: U32,
    /// GROUP NUMBER.
    pub group: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<Rw16Cdb>() == 16);

/// COMPARE AND WRITE as laid out on the wire (SBC-3).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CompareAndWriteCdb {
    /// OPERATION CODE (89h).
    pub opcode: u8,
    /// WRPROTECT, DPO, FUA.
    pub flags: u8,
    /// LOGICAL BLOCK ADDRESS.
    pub lba: U64,
    /// Reserved.
    pub reserved: [u8; 3],
    /// NUMBER OF LOGICAL BLOCKS.
    pub blocks: u8,
    /// GROUP NUMBER.
    pub group: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<CompareAndWriteCdb>() == 16);

/// A READ or WRITE of any size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadWrite {
    /// Which CDB.
    pub cdb: RwCdb,
    /// First block.
    pub lba: Lba,
    /// TRANSFER LENGTH in blocks (READ(6)'s 0 decodes as 256).
    pub blocks: BlockCount,
    /// DPO: do not keep the data in cache.
    pub dpo: bool,
    /// FUA: read from / write to the medium, not the cache.
    pub fua: bool,
}

impl ReadWrite {
    /// The operation code of a READ (`read`) or WRITE of this size.
    pub(super) fn opcode(&self, read: bool) -> u8 {
        match (self.cdb, read) {
            (RwCdb::Six, true) => 0x08,
            (RwCdb::Six, false) => 0x0a,
            (RwCdb::Ten, true) => 0x28,
            (RwCdb::Ten, false) => 0x2a,
            (RwCdb::Twelve, true) => 0xa8,
            (RwCdb::Twelve, false) => 0xaa,
            (RwCdb::Sixteen, true) => 0x88,
            (RwCdb::Sixteen, false) => 0x8a,
        }
    }

    pub(super) fn emit(&self, opcode: u8, out: &mut [u8]) -> Result<(), CdbError> {
        let flags = flag(self.dpo, DPO) | flag(self.fua, FUA);
        match self.cdb {
            RwCdb::Six => {
                if flags != 0 {
                    return Err(CdbError::OutOfRange {
                        field: "DPO/FUA of READ(6)/WRITE(6)",
                        value: flags.into(),
                    });
                }
                let lba = match self.lba.0 {
                    l @ 0..=0x1f_ffff => l as u32,
                    l => {
                        return Err(CdbError::OutOfRange {
                            field: "LOGICAL BLOCK ADDRESS",
                            value: l,
                        });
                    }
                };
                let length = match self.blocks.0 {
                    n @ 1..=255 => n as u8,
                    256 => 0,
                    n => {
                        return Err(CdbError::OutOfRange {
                            field: "TRANSFER LENGTH",
                            value: n.into(),
                        });
                    }
                };
                let lba_lo = U16::new(lba as u16);
                put(
                    out,
                    &Rw6Cdb {
                        opcode,
                        lba_hi: (lba >> 16) as u8,
                        lba_lo,
                        length,
                        control: 0,
                    },
                )
            }
            RwCdb::Ten => put(out, &rw10(opcode, flags, self.lba, self.blocks)?),
            RwCdb::Twelve => put_long(out, LongCdb::Twelve, opcode, flags, self.lba, self.blocks),
            RwCdb::Sixteen => put(out, &rw16(opcode, flags, self.lba, self.blocks)),
        }
    }
}

/// A 10-byte LBA/length CDB; errors when the LBA or count does not fit.
pub(super) fn rw10(opcode: u8, flags: u8, lba: Lba, n: BlockCount) -> Result<Rw10Cdb, CdbError> {
    Ok(Rw10Cdb {
        opcode,
        flags,
        lba: U32::new(fit("LOGICAL BLOCK ADDRESS", lba.0)?),
        group: 0,
        length: U16::new(fit("TRANSFER LENGTH", n.0)?),
        control: 0,
    })
}

/// A 16-byte LBA/length CDB.
pub(super) fn rw16(opcode: u8, flags: u8, lba: Lba, n: BlockCount) -> Rw16Cdb {
    Rw16Cdb {
        opcode,
        flags,
        lba: U64::new(lba.0),
        length: U32::new(n.0),
        group: 0,
        control: 0,
    }
}

/// Writes the 10-, 12- or 16-byte LBA/length CDB `cdb` to `out`.
pub(super) fn put_long(
    out: &mut [u8],
    cdb: LongCdb,
    opcode: u8,
    flags: u8,
    lba: Lba,
    n: BlockCount,
) -> Result<(), CdbError> {
    match cdb {
        LongCdb::Ten => put(out, &rw10(opcode, flags, lba, n)?),
        LongCdb::Twelve => put(
            out,
            &Rw12Cdb {
                opcode,
                flags,
                lba: U32::new(fit("LOGICAL BLOCK ADDRESS", lba.0)?),
                length: U32::new(n.0),
                group: 0,
                control: 0,
            },
        ),
        LongCdb::Sixteen => put(out, &rw16(opcode, flags, lba, n)),
    }
}

/// (flags, LBA, length) of a 10-, 12- or 16-byte LBA/length CDB.
pub(super) fn lba_len(cdb: LongCdb, c: &[u8]) -> Result<(u8, Lba, BlockCount), CdbError> {
    Ok(match cdb {
        LongCdb::Ten => {
            let h: Rw10Cdb = read(c)?;
            (
                h.flags,
                Lba(h.lba.get().into()),
                BlockCount(h.length.get().into()),
            )
        }
        LongCdb::Twelve => {
            let h: Rw12Cdb = read(c)?;
            (h.flags, Lba(h.lba.get().into()), BlockCount(h.length.get()))
        }
        LongCdb::Sixteen => {
            let h: Rw16Cdb = read(c)?;
            (h.flags, Lba(h.lba.get()), BlockCount(h.length.get()))
        }
    })
}

fn read_write(cdb: RwCdb, c: &[u8]) -> Result<ReadWrite, CdbError> {
    let (flags, lba, blocks) = match cdb {
        RwCdb::Six => {
            let h: Rw6Cdb = read(c)?;
            let lba = (u64::from(h.lba_hi & 0x1f) << 16) | u64::from(h.lba_lo.get());
            // SBC-3: a TRANSFER LENGTH of zero means 256 blocks.
            let n = if h.length == 0 { 256 } else { h.length.into() };
            (0, Lba(lba), BlockCount(n))
        }
        RwCdb::Ten => lba_len(LongCdb::Ten, c)?,
        RwCdb::Twelve => lba_len(LongCdb::Twelve, c)?,
        RwCdb::Sixteen => lba_len(LongCdb::Sixteen, c)?,
    };
    Ok(ReadWrite {
        cdb,
        lba,
        blocks,
        dpo: flags & DPO != 0,
        fua: flags & FUA != 0,
    })
}

pub(super) fn read6(c: &[u8]) -> Result<Command, CdbError> {
    read_write(RwCdb::Six, c).map(Command::Read)
}
pub(super) fn read10(c: &[u8]) -> Result<Command, CdbError> {
    read_write(RwCdb::Ten, c).map(Command::Read)
}
pub(super) fn read12(c: &[u8]) -> Result<Command, CdbError> {
    read_write(RwCdb::Twelve, c).map(Command::Read)
}
pub(super) fn read16(c: &[u8]) -> Result<Command, CdbError> {
    read_write(RwCdb::Sixteen, c).map(Command::Read)
}
pub(super) fn write6(c: &[u8]) -> Result<Command, CdbError> {
    read_write(RwCdb::Six, c).map(Command::Write)
}
pub(super) fn write10(c: &[u8]) -> Result<Command, CdbError> {
    read_write(RwCdb::Ten, c).map(Command::Write)
}
pub(super) fn write12(c: &[u8]) -> Result<Command, CdbError> {
    read_write(RwCdb::Twelve, c).map(Command::Write)
}
pub(super) fn write16(c: &[u8]) -> Result<Command, CdbError> {
    read_write(RwCdb::Sixteen, c).map(Command::Write)
}

/// BYTCHK of VERIFY (SBC-3): what the device compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteCheck {
    /// 00b: verify the medium only; no data-out.
    Medium,
    /// 01b: compare the data-out buffer with the blocks.
    Compare,
    /// 11b: compare one block of data-out with each block.
    CompareOne,
}

const BYTCHK_SHIFT: u8 = 1;

/// VERIFY(10)/VERIFY(16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verify {
    /// Which CDB.
    pub cdb: LongCdb,
    /// First block.
    pub lba: Lba,
    /// VERIFICATION LENGTH in blocks.
    pub blocks: BlockCount,
    /// DPO.
    pub dpo: bool,
    /// BYTCHK.
    pub bytchk: ByteCheck,
}

impl Verify {
    fn decode(cdb: LongCdb, c: &[u8]) -> Result<Command, CdbError> {
        let (flags, lba, blocks) = lba_len(cdb, c)?;
        let bytchk = match (flags >> BYTCHK_SHIFT) & 0x03 {
            0b00 => ByteCheck::Medium,
            0b01 => ByteCheck::Compare,
            0b11 => ByteCheck::CompareOne,
            // 10b is reserved: point at BYTCHK's most-significant bit.
            _ => return Err(CdbError::InvalidField { byte: 1, bit: 2 }),
        };
        Ok(Command::Verify(Verify {
            cdb,
            lba,
            blocks,
            dpo: flags & DPO != 0,
            bytchk,
        }))
    }

    pub(super) fn emit(&self, opcode: u8, out: &mut [u8]) -> Result<(), CdbError> {
        let bytchk = match self.bytchk {
            ByteCheck::Medium => 0b00,
            ByteCheck::Compare => 0b01,
            ByteCheck::CompareOne => 0b11,
        };
        let flags = flag(self.dpo, DPO) | bytchk << BYTCHK_SHIFT;
        put_long(out, self.cdb, opcode, flags, self.lba, self.blocks)
    }
}

pub(super) fn verify10(c: &[u8]) -> Result<Command, CdbError> {
    Verify::decode(LongCdb::Ten, c)
}
pub(super) fn verify12(c: &[u8]) -> Result<Command, CdbError> {
    Verify::decode(LongCdb::Twelve, c)
}
pub(super) fn verify16(c: &[u8]) -> Result<Command, CdbError> {
    Verify::decode(LongCdb::Sixteen, c)
}

/// COMPARE AND WRITE: compare `blocks` blocks, write them if equal (SBC-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompareAndWrite {
    /// First block.
    pub lba: Lba,
    /// NUMBER OF LOGICAL BLOCKS (at most 255; the data-out holds twice as many).
    pub blocks: BlockCount,
    /// DPO.
    pub dpo: bool,
    /// FUA.
    pub fua: bool,
}

impl CompareAndWrite {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = CompareAndWriteCdb {
            opcode: 0x89,
            flags: flag(self.dpo, DPO) | flag(self.fua, FUA),
            lba: U64::new(self.lba.0),
            reserved: [0; 3],
            blocks: fit("NUMBER OF LOGICAL BLOCKS", self.blocks.0)?,
            group: 0,
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn compare_and_write(c: &[u8]) -> Result<Command, CdbError> {
    let h: CompareAndWriteCdb = read(c)?;
    Ok(Command::CompareAndWrite(CompareAndWrite {
        lba: Lba(h.lba.get()),
        blocks: BlockCount(h.blocks.into()),
        dpo: h.flags & DPO != 0,
        fua: h.flags & FUA != 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    fn rw(cdb: RwCdb, lba: u64, blocks: u32, dpo: bool, fua: bool) -> ReadWrite {
        ReadWrite {
            cdb,
            lba: Lba(lba),
            blocks: BlockCount(blocks),
            dpo,
            fua,
        }
    }

    /// READ(6) of 256 blocks at LBA 0x12345 (SBC-3).
    const READ6: [u8; 6] = [
        0x08, // READ(6)
        0x01, 0x23, 0x45, // LBA 0x012345 (bits 20:16 in byte 1)
        0x00, // TRANSFER LENGTH 0 = 256 blocks
        0x00, // CONTROL
    ];
    wire_tests!(read6: Command, READ6, Command::Read(rw(RwCdb::Six, 0x12345, 256, false, false)));

    /// WRITE(6) of 8 blocks at the largest 21-bit LBA.
    const WRITE6: [u8; 6] = [
        0x0a, // WRITE(6)
        0x1f, 0xff, 0xff, // LBA 0x1fffff
        0x08, // TRANSFER LENGTH 8
        0x00, // CONTROL
    ];
    wire_tests!(write6: Command, WRITE6, Command::Write(rw(RwCdb::Six, 0x1f_ffff, 8, false, false)));

    /// READ(10) of 8 blocks at LBA 0x3c with FUA.
    const READ10: [u8; 10] = [
        0x28, // READ(10)
        0x08, // RDPROTECT 0, DPO 0, FUA 1
        0x00, 0x00, 0x00, 0x3c, // LBA 0x3c
        0x00, // GROUP NUMBER
        0x00, 0x08, // TRANSFER LENGTH 8
        0x00, // CONTROL
    ];
    wire_tests!(read10: Command, READ10, Command::Read(rw(RwCdb::Ten, 0x3c, 8, false, true)));

    /// WRITE(10) with DPO and FUA, 0xffff blocks at LBA 0xfffffffe.
    const WRITE10: [u8; 10] = [
        0x2a, // WRITE(10)
        0x18, // WRPROTECT 0, DPO 1, FUA 1
        0xff, 0xff, 0xff, 0xfe, // LBA
        0x00, // GROUP NUMBER
        0xff, 0xff, // TRANSFER LENGTH 65535
        0x00, // CONTROL
    ];
    wire_tests!(write10: Command, WRITE10, Command::Write(rw(RwCdb::Ten, 0xffff_fffe, 0xffff, true, true)));

    /// READ(12) of 0x10000 blocks at LBA 0x01020304 with DPO.
    const READ12: [u8; 12] = [
        0xa8, // READ(12)
        0x10, // DPO 1
        0x01, 0x02, 0x03, 0x04, // LBA
        0x00, 0x01, 0x00, 0x00, // TRANSFER LENGTH 65536
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    wire_tests!(read12: Command, READ12, Command::Read(rw(RwCdb::Twelve, 0x0102_0304, 0x1_0000, true, false)));

    /// WRITE(12) of one block at LBA 0.
    const WRITE12: [u8; 12] = [
        0xaa, // WRITE(12)
        0x00, // flags
        0, 0, 0, 0, // LBA 0
        0, 0, 0, 1,    // TRANSFER LENGTH 1
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    wire_tests!(write12: Command, WRITE12, Command::Write(rw(RwCdb::Twelve, 0, 1, false, false)));

    /// READ(16) of 128 blocks at LBA 0x0000_0001_0000_0000 (above 2 TiB of 512-byte blocks).
    const READ16: [u8; 16] = [
        0x88, // READ(16)
        0x00, // flags
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // LBA 2^32
        0x00, 0x00, 0x00, 0x80, // TRANSFER LENGTH 128
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    wire_tests!(read16: Command, READ16, Command::Read(rw(RwCdb::Sixteen, 1 << 32, 128, false, false)));

    /// WRITE(16) with FUA, 0xffffffff blocks at the last 64-bit LBA.
    const WRITE16: [u8; 16] = [
        0x8a, // WRITE(16)
        0x08, // FUA 1
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // LBA
        0xff, 0xff, 0xff, 0xff, // TRANSFER LENGTH
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    wire_tests!(write16: Command, WRITE16, Command::Write(rw(RwCdb::Sixteen, u64::MAX, u32::MAX, false, true)));

    /// VERIFY(10) with BYTCHK=01b (compare), 4 blocks at LBA 0x100.
    const VERIFY10: [u8; 10] = [
        0x2f, // VERIFY(10)
        0x02, // VRPROTECT 0, DPO 0, BYTCHK 01b
        0x00, 0x00, 0x01, 0x00, // LBA 0x100
        0x00, // GROUP NUMBER
        0x00, 0x04, // VERIFICATION LENGTH 4
        0x00, // CONTROL
    ];
    fn verify10_value() -> Command {
        Command::Verify(Verify {
            cdb: LongCdb::Ten,
            lba: Lba(0x100),
            blocks: BlockCount(4),
            dpo: false,
            bytchk: ByteCheck::Compare,
        })
    }
    wire_tests!(verify10: Command, VERIFY10, verify10_value());

    /// VERIFY(16) with DPO and BYTCHK=11b, 1 block at LBA 7.
    const VERIFY16: [u8; 16] = [
        0x8f, // VERIFY(16)
        0x16, // DPO 1, BYTCHK 11b
        0, 0, 0, 0, 0, 0, 0, 7, // LBA 7
        0, 0, 0, 1,    // VERIFICATION LENGTH 1
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    fn verify16_value() -> Command {
        Command::Verify(Verify {
            cdb: LongCdb::Sixteen,
            lba: Lba(7),
            blocks: BlockCount(1),
            dpo: true,
            bytchk: ByteCheck::CompareOne,
        })
    }
    wire_tests!(verify16: Command, VERIFY16, verify16_value());

    /// COMPARE AND WRITE of 1 block at LBA 0x2000 with FUA (the VMware ATS lock).
    const COMPARE_AND_WRITE: [u8; 16] = [
        0x89, // COMPARE AND WRITE
        0x08, // WRPROTECT 0, DPO 0, FUA 1
        0, 0, 0, 0, 0, 0, 0x20, 0x00, // LBA 0x2000
        0, 0, 0,    // reserved
        0x01, // NUMBER OF LOGICAL BLOCKS 1
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    fn caw() -> Command {
        Command::CompareAndWrite(CompareAndWrite {
            lba: Lba(0x2000),
            blocks: BlockCount(1),
            dpo: false,
            fua: true,
        })
    }
    wire_tests!(compare_and_write: Command, COMPARE_AND_WRITE, caw());

    #[test]
    fn reserved_bytchk_is_an_invalid_field() {
        let mut c = VERIFY10;
        c[1] = 0x04; // BYTCHK 10b
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 1, bit: 2 })
        );
    }

    #[test]
    fn rw6_limits_on_emit() {
        let mut out = [0u8; 6];
        let too_far = Command::Read(rw(RwCdb::Six, 0x20_0000, 1, false, false));
        assert!(matches!(
            too_far.emit(&mut out),
            Err(CdbError::OutOfRange { .. })
        ));
        let zero = Command::Read(rw(RwCdb::Six, 0, 0, false, false));
        assert!(matches!(
            zero.emit(&mut out),
            Err(CdbError::OutOfRange { .. })
        ));
        let fua = Command::Write(rw(RwCdb::Six, 0, 1, false, true));
        assert!(matches!(
            fua.emit(&mut out),
            Err(CdbError::OutOfRange { .. })
        ));
        let big = Command::Read(rw(RwCdb::Ten, 0, 0x1_0000, false, false));
        assert!(matches!(
            big.emit(&mut [0u8; 10]),
            Err(CdbError::OutOfRange { .. })
        ));
    }

    #[test]
    fn rdprotect_is_rejected() {
        let mut c = READ10;
        c[1] |= 0x20; // RDPROTECT 001b
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 1, bit: 5 })
        );
        let mut c = READ6;
        c[1] |= 0x80; // reserved bits 7:5 of READ(6) byte 1
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 1, bit: 7 })
        );
    }
}
