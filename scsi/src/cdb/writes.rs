//! The writes beyond WRITE (SBC-4): WRITE AND VERIFY (10/12/16), ORWRITE(16) and WRITE
//! ATOMIC(16).

use super::rw::{DPO, FUA, Rw16Cdb, lba_len, put_long};
use super::{CdbError, Command, LongCdb, RwCdb, flag, put, read};
use crate::units::{BlockCount, Lba};
use zerocopy::network_endian::{U16, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// BYTCHK of WRITE AND VERIFY (byte 1 bits 2:1; SBC-4 defines 00b and 01b only).
const BYTCHK_SHIFT: u8 = 1;

/// WRITE AND VERIFY(10/12/16): write, then verify the written blocks on the medium.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteAndVerify {
    /// Which CDB.
    pub cdb: LongCdb,
    /// First block.
    pub lba: Lba,
    /// TRANSFER LENGTH in blocks.
    pub blocks: BlockCount,
    /// DPO.
    pub dpo: bool,
    /// BYTCHK 01b: compare what the medium holds afterwards with the data-out; 00b: only
    /// read it back.
    pub bytchk: bool,
}

impl WriteAndVerify {
    fn decode(cdb: LongCdb, c: &[u8]) -> Result<Command, CdbError> {
        let (flags, lba, blocks) = lba_len(cdb, c)?;
        let bytchk = match (flags >> BYTCHK_SHIFT) & 0x03 {
            0b00 => false,
            0b01 => true,
            // 10b and 11b are reserved for WRITE AND VERIFY: the usage data leaves BYTCHK's
            // most-significant bit clear, so the table rejects them before decoding.
            _ => return Err(CdbError::InvalidField { byte: 1, bit: 2 }),
        };
        Ok(Command::WriteAndVerify(WriteAndVerify {
            cdb,
            lba,
            blocks,
            dpo: flags & DPO != 0,
            bytchk,
        }))
    }

    /// The operation code of this size.
    pub(super) fn opcode(&self) -> u8 {
        match self.cdb {
            LongCdb::Ten => 0x2e,
            LongCdb::Twelve => 0xae,
            LongCdb::Sixteen => 0x8e,
        }
    }

    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let flags = flag(self.dpo, DPO) | u8::from(self.bytchk) << BYTCHK_SHIFT;
        put_long(out, self.cdb, self.opcode(), flags, self.lba, self.blocks)
    }
}

pub(super) fn write_and_verify10(c: &[u8]) -> Result<Command, CdbError> {
    WriteAndVerify::decode(LongCdb::Ten, c)
}
pub(super) fn write_and_verify12(c: &[u8]) -> Result<Command, CdbError> {
    WriteAndVerify::decode(LongCdb::Twelve, c)
}
pub(super) fn write_and_verify16(c: &[u8]) -> Result<Command, CdbError> {
    WriteAndVerify::decode(LongCdb::Sixteen, c)
}

/// ORWRITE(16): the data-out is ORed into the blocks, atomically (SBC-4). Its fields are
/// READ(16)'s ([`super::ReadWrite`] with [`RwCdb::Sixteen`]).
pub(super) fn orwrite16(c: &[u8]) -> Result<Command, CdbError> {
    let (flags, lba, blocks) = lba_len(LongCdb::Sixteen, c)?;
    Ok(Command::OrWrite(super::ReadWrite {
        cdb: RwCdb::Sixteen,
        lba,
        blocks,
        dpo: flags & DPO != 0,
        fua: flags & FUA != 0,
    }))
}

pub(super) fn emit_orwrite(rw: &super::ReadWrite, out: &mut [u8]) -> Result<(), CdbError> {
    if rw.cdb != RwCdb::Sixteen {
        return Err(CdbError::OutOfRange {
            field: "CDB size (ORWRITE has a 16-byte form only)",
            value: 0,
        });
    }
    let flags = flag(rw.dpo, DPO) | flag(rw.fua, FUA);
    put_long(out, LongCdb::Sixteen, 0x8b, flags, rw.lba, rw.blocks)
}

/// WRITE ATOMIC(16) as laid out on the wire (SBC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct WriteAtomic16Cdb {
    /// OPERATION CODE (9Ch).
    pub opcode: u8,
    /// WRPROTECT, DPO, FUA.
    pub flags: u8,
    /// LOGICAL BLOCK ADDRESS.
    pub lba: U64,
    /// ATOMIC BOUNDARY.
    pub boundary: U16,
    /// TRANSFER LENGTH.
    pub length: U16,
    /// GROUP NUMBER.
    pub group: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<WriteAtomic16Cdb>() == size_of::<Rw16Cdb>());

/// WRITE ATOMIC(16): a write that completes as a whole or not at all (SBC-4 4.29).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteAtomic {
    /// First block.
    pub lba: Lba,
    /// ATOMIC BOUNDARY in blocks (0: the whole transfer is one atomic write).
    pub boundary: u16,
    /// TRANSFER LENGTH in blocks.
    pub blocks: BlockCount,
    /// DPO.
    pub dpo: bool,
    /// FUA.
    pub fua: bool,
}

impl WriteAtomic {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = WriteAtomic16Cdb {
            opcode: 0x9c,
            flags: flag(self.dpo, DPO) | flag(self.fua, FUA),
            lba: U64::new(self.lba.0),
            boundary: U16::new(self.boundary),
            length: U16::new(super::fit("TRANSFER LENGTH", self.blocks.0)?),
            group: 0,
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn write_atomic16(c: &[u8]) -> Result<Command, CdbError> {
    let h: WriteAtomic16Cdb = read(c)?;
    Ok(Command::WriteAtomic(WriteAtomic {
        lba: Lba(h.lba.get()),
        boundary: h.boundary.get(),
        blocks: BlockCount(h.length.get().into()),
        dpo: h.flags & DPO != 0,
        fua: h.flags & FUA != 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdb::ReadWrite;
    use wirekit::WireRepr;

    /// WRITE AND VERIFY(10) with BYTCHK=1, 8 blocks at LBA 0x20.
    const WAV10: [u8; 10] = [
        0x2e, // WRITE AND VERIFY(10)
        0x02, // WRPROTECT 0, DPO 0, BYTCHK 01b
        0x00, 0x00, 0x00, 0x20, // LBA
        0x00, // GROUP NUMBER
        0x00, 0x08, // TRANSFER LENGTH 8
        0x00, // CONTROL
    ];
    fn wav(cdb: LongCdb, lba: u64, blocks: u32, dpo: bool, bytchk: bool) -> Command {
        Command::WriteAndVerify(WriteAndVerify {
            cdb,
            lba: Lba(lba),
            blocks: BlockCount(blocks),
            dpo,
            bytchk,
        })
    }
    wire_tests!(write_and_verify10: Command, WAV10, wav(LongCdb::Ten, 0x20, 8, false, true));

    /// WRITE AND VERIFY(12) with DPO, BYTCHK=0, 0x10000 blocks at LBA 1.
    const WAV12: [u8; 12] = [
        0xae, // WRITE AND VERIFY(12)
        0x10, // DPO 1, BYTCHK 00b
        0, 0, 0, 1, // LBA 1
        0x00, 0x01, 0x00, 0x00, // TRANSFER LENGTH
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    wire_tests!(write_and_verify12: Command, WAV12, wav(LongCdb::Twelve, 1, 0x1_0000, true, false));

    /// WRITE AND VERIFY(16), one block at LBA 2^40.
    const WAV16: [u8; 16] = [
        0x8e, // WRITE AND VERIFY(16)
        0x02, // BYTCHK 01b
        0, 0, 0x01, 0, 0, 0, 0, 0, // LBA 2^40
        0, 0, 0, 1,    // TRANSFER LENGTH 1
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    wire_tests!(write_and_verify16: Command, WAV16, wav(LongCdb::Sixteen, 1 << 40, 1, false, true));

    /// ORWRITE(16) with FUA, 4 blocks at LBA 0x1000.
    const ORWRITE: [u8; 16] = [
        0x8b, // ORWRITE(16)
        0x08, // ORPROTECT 0, DPO 0, FUA 1
        0, 0, 0, 0, 0, 0, 0x10, 0x00, // LBA
        0, 0, 0, 4,    // TRANSFER LENGTH 4
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    fn orw() -> Command {
        Command::OrWrite(ReadWrite {
            cdb: RwCdb::Sixteen,
            lba: Lba(0x1000),
            blocks: BlockCount(4),
            dpo: false,
            fua: true,
        })
    }
    wire_tests!(orwrite16: Command, ORWRITE, orw());

    /// WRITE ATOMIC(16) with FUA, 16 blocks at LBA 0x40, no boundary.
    const WRITE_ATOMIC: [u8; 16] = [
        0x9c, // WRITE ATOMIC(16)
        0x08, // WRPROTECT 0, DPO 0, FUA 1
        0, 0, 0, 0, 0, 0, 0, 0x40, // LBA
        0x00, 0x00, // ATOMIC BOUNDARY 0
        0x00, 0x10, // TRANSFER LENGTH 16
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    fn atomic() -> Command {
        Command::WriteAtomic(WriteAtomic {
            lba: Lba(0x40),
            boundary: 0,
            blocks: BlockCount(16),
            dpo: false,
            fua: true,
        })
    }
    wire_tests!(write_atomic16: Command, WRITE_ATOMIC, atomic());

    #[test]
    fn reserved_bytchk_values_are_invalid_fields() {
        for bytchk in [0x04, 0x06] {
            let mut c = WAV10;
            c[1] = bytchk;
            assert_eq!(
                Command::parse(&c),
                Err(CdbError::InvalidField { byte: 1, bit: 2 })
            );
        }
    }

    #[test]
    fn emit_refuses_what_the_cdb_cannot_hold() {
        let mut out = [0u8; 16];
        let mut a = atomic();
        if let Command::WriteAtomic(w) = &mut a {
            w.blocks = BlockCount(0x1_0000);
        }
        assert!(matches!(a.emit(&mut out), Err(CdbError::OutOfRange { .. })));
        let mut o = orw();
        if let Command::OrWrite(rw) = &mut o {
            rw.cdb = RwCdb::Ten;
        }
        assert!(o.emit(&mut out).is_err());
    }
}
