//! MODE SELECT and MODE SENSE, 6- and 10-byte (SPC-4).

use super::spc::{Cdb6, cdb6};
use super::{CdbError, Command, ModeCdb, fit, flag, put, read};
use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// MODE SELECT(6)/(10) flag PF (bit 4): the data follows the SPC page format.
const PF: u8 = 0x10;
/// MODE SELECT(6)/(10) flag SP (bit 0): save the pages.
const SP: u8 = 0x01;
/// MODE SENSE flag DBD (bit 3): no block descriptors.
const DBD: u8 = 0x08;
/// MODE SENSE(10) flag LLBAA (bit 4): long LBA block descriptors allowed.
const LLBAA: u8 = 0x10;

/// MODE SELECT(10)/MODE SENSE(10) as laid out on the wire (SPC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Mode10Cdb {
    /// OPERATION CODE (55h/5Ah).
    pub opcode: u8,
    /// PF, SP (select); LLBAA, DBD (sense).
    pub flags: u8,
    /// MODE SENSE: PC and PAGE CODE; MODE SELECT: reserved.
    pub page: u8,
    /// MODE SENSE: SUBPAGE CODE; MODE SELECT: reserved.
    pub subpage: u8,
    /// Reserved.
    pub reserved: [u8; 3],
    /// ALLOCATION LENGTH or PARAMETER LIST LENGTH.
    pub length: U16,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<Mode10Cdb>() == 10);

/// MODE SELECT(6)/(10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeSelect {
    /// Which CDB.
    pub cdb: ModeCdb,
    /// PF: page format.
    pub pf: bool,
    /// SP: save pages (we answer SAVING PARAMETERS NOT SUPPORTED when unsupported).
    pub sp: bool,
    /// PARAMETER LIST LENGTH (at most 255 in the 6-byte CDB).
    pub param_len: u16,
}

impl ModeSelect {
    pub(super) fn emit(&self, opcode: u8, out: &mut [u8]) -> Result<(), CdbError> {
        let flags = flag(self.pf, PF) | flag(self.sp, SP);
        match self.cdb {
            ModeCdb::Six => put(
                out,
                &cdb6(
                    opcode,
                    flags,
                    0,
                    0,
                    fit("PARAMETER LIST LENGTH", self.param_len)?,
                ),
            ),
            ModeCdb::Ten => put(out, &mode10(opcode, flags, 0, 0, self.param_len)),
        }
    }
}

fn mode10(opcode: u8, flags: u8, page: u8, subpage: u8, length: u16) -> Mode10Cdb {
    Mode10Cdb {
        opcode,
        flags,
        page,
        subpage,
        reserved: [0; 3],
        length: U16::new(length),
        control: 0,
    }
}

pub(super) fn mode_select6(c: &[u8]) -> Result<Command, CdbError> {
    let h: Cdb6 = read(c)?;
    let (pf, sp) = (h.flags & PF != 0, h.flags & SP != 0);
    Ok(Command::ModeSelect(ModeSelect {
        cdb: ModeCdb::Six,
        pf,
        sp,
        param_len: h.length.into(),
    }))
}

pub(super) fn mode_select10(c: &[u8]) -> Result<Command, CdbError> {
    let h: Mode10Cdb = read(c)?;
    let (pf, sp) = (h.flags & PF != 0, h.flags & SP != 0);
    Ok(Command::ModeSelect(ModeSelect {
        cdb: ModeCdb::Ten,
        pf,
        sp,
        param_len: h.length.get(),
    }))
}

/// PC, the page control field of MODE SENSE (SPC-4): which values to return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageControl {
    /// 00b: current values.
    Current,
    /// 01b: changeable values (a mask).
    Changeable,
    /// 10b: default values.
    Default,
    /// 11b: saved values.
    Saved,
}

impl PageControl {
    fn from_bits(bits: u8) -> PageControl {
        match bits & 0x03 {
            0 => PageControl::Current,
            1 => PageControl::Changeable,
            2 => PageControl::Default,
            _ => PageControl::Saved,
        }
    }
}

/// MODE SENSE(6)/(10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeSense {
    /// Which CDB.
    pub cdb: ModeCdb,
    /// DBD: do not return block descriptors.
    pub dbd: bool,
    /// LLBAA: long LBA block descriptors allowed (10-byte CDB only).
    pub llbaa: bool,
    /// PC.
    pub pc: PageControl,
    /// PAGE CODE (6 bits; 3Fh = all pages).
    pub page: u8,
    /// SUBPAGE CODE (FFh = all subpages).
    pub subpage: u8,
    /// ALLOCATION LENGTH (at most 255 in the 6-byte CDB).
    pub alloc_len: u16,
}

impl ModeSense {
    fn decode(cdb: ModeCdb, flags: u8, page: u8, subpage: u8, alloc_len: u16) -> Command {
        Command::ModeSense(ModeSense {
            cdb,
            dbd: flags & DBD != 0,
            llbaa: flags & LLBAA != 0 && cdb == ModeCdb::Ten,
            pc: PageControl::from_bits(page >> 6),
            page: page & 0x3f,
            subpage,
            alloc_len,
        })
    }

    pub(super) fn emit(&self, opcode: u8, out: &mut [u8]) -> Result<(), CdbError> {
        if self.page > 0x3f {
            return Err(CdbError::OutOfRange {
                field: "PAGE CODE",
                value: self.page.into(),
            });
        }
        let page = (self.pc as u8) << 6 | self.page;
        match self.cdb {
            ModeCdb::Six => {
                if self.llbaa {
                    return Err(CdbError::OutOfRange {
                        field: "LLBAA in MODE SENSE(6)",
                        value: 1,
                    });
                }
                let alloc_len = fit("ALLOCATION LENGTH", self.alloc_len)?;
                put(
                    out,
                    &cdb6(opcode, flag(self.dbd, DBD), page, self.subpage, alloc_len),
                )
            }
            ModeCdb::Ten => {
                let flags = flag(self.dbd, DBD) | flag(self.llbaa, LLBAA);
                put(
                    out,
                    &mode10(opcode, flags, page, self.subpage, self.alloc_len),
                )
            }
        }
    }
}

pub(super) fn mode_sense6(c: &[u8]) -> Result<Command, CdbError> {
    let h: Cdb6 = read(c)?;
    Ok(ModeSense::decode(
        ModeCdb::Six,
        h.flags,
        h.page,
        h.subpage,
        h.length.into(),
    ))
}

pub(super) fn mode_sense10(c: &[u8]) -> Result<Command, CdbError> {
    let h: Mode10Cdb = read(c)?;
    Ok(ModeSense::decode(
        ModeCdb::Ten,
        h.flags,
        h.page,
        h.subpage,
        h.length.get(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    /// MODE SELECT(6), PF=1, 12-byte parameter list.
    const MODE_SELECT6: [u8; 6] = [
        0x15, // MODE SELECT(6)
        0x10, // PF 1, SP 0
        0, 0,    // reserved
        0x0c, // PARAMETER LIST LENGTH 12
        0x00, // CONTROL
    ];
    fn mode_select6_value() -> Command {
        Command::ModeSelect(ModeSelect {
            cdb: ModeCdb::Six,
            pf: true,
            sp: false,
            param_len: 12,
        })
    }
    wire_tests!(mode_select6: Command, MODE_SELECT6, mode_select6_value());

    /// MODE SELECT(10), PF=1 SP=1, 0x114-byte parameter list.
    const MODE_SELECT10: [u8; 10] = [
        0x55, // MODE SELECT(10)
        0x11, // PF 1, SP 1
        0, 0, 0, 0, 0, // reserved
        0x01, 0x14, // PARAMETER LIST LENGTH 276
        0x00, // CONTROL
    ];
    fn mode_select10_value() -> Command {
        Command::ModeSelect(ModeSelect {
            cdb: ModeCdb::Ten,
            pf: true,
            sp: true,
            param_len: 0x114,
        })
    }
    wire_tests!(mode_select10: Command, MODE_SELECT10, mode_select10_value());

    /// MODE SENSE(6) of the Caching page (08h), current values, DBD.
    const MODE_SENSE6: [u8; 6] = [
        0x1a, // MODE SENSE(6)
        0x08, // DBD 1
        0x08, // PC 00b (current), PAGE CODE 08h (caching)
        0x00, // SUBPAGE CODE
        0xff, // ALLOCATION LENGTH 255
        0x00, // CONTROL
    ];
    fn mode_sense6_value() -> Command {
        Command::ModeSense(ModeSense {
            cdb: ModeCdb::Six,
            dbd: true,
            llbaa: false,
            pc: PageControl::Current,
            page: 0x08,
            subpage: 0,
            alloc_len: 255,
        })
    }
    wire_tests!(mode_sense6: Command, MODE_SENSE6, mode_sense6_value());

    /// MODE SENSE(10) of all pages and subpages, changeable values, LLBAA.
    const MODE_SENSE10: [u8; 10] = [
        0x5a, // MODE SENSE(10)
        0x10, // LLBAA 1, DBD 0
        0x7f, // PC 01b (changeable), PAGE CODE 3Fh (all)
        0xff, // SUBPAGE CODE FFh (all)
        0, 0, 0, // reserved
        0x02, 0x00, // ALLOCATION LENGTH 512
        0x00, // CONTROL
    ];
    fn mode_sense10_value() -> Command {
        Command::ModeSense(ModeSense {
            cdb: ModeCdb::Ten,
            dbd: false,
            llbaa: true,
            pc: PageControl::Changeable,
            page: 0x3f,
            subpage: 0xff,
            alloc_len: 512,
        })
    }
    wire_tests!(mode_sense10: Command, MODE_SENSE10, mode_sense10_value());

    #[test]
    fn six_byte_mode_lengths_are_checked_on_emit() {
        let mut m = match mode_sense6_value() {
            Command::ModeSense(m) => m,
            other => panic!("{other:?}"),
        };
        m.alloc_len = 256;
        assert!(Command::ModeSense(m).emit(&mut [0; 6]).is_err());
        let s = ModeSelect {
            cdb: ModeCdb::Six,
            pf: true,
            sp: false,
            param_len: 300,
        };
        assert!(Command::ModeSelect(s).emit(&mut [0; 6]).is_err());
    }
}
