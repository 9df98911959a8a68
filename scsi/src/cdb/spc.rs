//! SPC-4 primary commands: TEST UNIT READY, REQUEST SENSE, INQUIRY and REPORT LUNS.

use super::{CdbError, Command, flag, put, read};
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The generic 6-byte CDB: TEST UNIT READY, REQUEST SENSE, MODE SELECT(6), MODE SENSE(6).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct Cdb6 {
    /// OPERATION CODE.
    pub opcode: u8,
    /// Command flags (DESC; PF, SP; DBD).
    pub flags: u8,
    /// MODE SENSE: PC and PAGE CODE; otherwise reserved.
    pub page: u8,
    /// MODE SENSE: SUBPAGE CODE; otherwise reserved.
    pub subpage: u8,
    /// ALLOCATION LENGTH or PARAMETER LIST LENGTH.
    pub length: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<Cdb6>() == 6);

pub(super) fn cdb6(opcode: u8, flags: u8, page: u8, subpage: u8, length: u8) -> Cdb6 {
    Cdb6 {
        opcode,
        flags,
        page,
        subpage,
        length,
        control: 0,
    }
}

pub(super) fn test_unit_ready(c: &[u8]) -> Result<Command, CdbError> {
    let _: Cdb6 = read(c)?;
    Ok(Command::TestUnitReady)
}

pub(super) fn emit_test_unit_ready(out: &mut [u8]) -> Result<(), CdbError> {
    put(out, &cdb6(0x00, 0, 0, 0, 0))
}

/// REQUEST SENSE (SPC-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestSense {
    /// DESC: return descriptor-format sense.
    pub desc: bool,
    /// ALLOCATION LENGTH.
    pub alloc_len: u8,
}

impl RequestSense {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        put(
            out,
            &cdb6(0x03, flag(self.desc, 0x01), 0, 0, self.alloc_len),
        )
    }
}

pub(super) fn request_sense(c: &[u8]) -> Result<Command, CdbError> {
    let h: Cdb6 = read(c)?;
    Ok(Command::RequestSense(RequestSense {
        desc: h.flags & 0x01 != 0,
        alloc_len: h.length,
    }))
}

wirekit::open_enum! {
    /// VPD page codes a block target serves (SPC-4, SBC-3).
    pub enum VpdPage(u8) {
        /// Supported VPD Pages.
        SupportedPages = 0x00,
        /// Unit Serial Number.
        UnitSerialNumber = 0x80,
        /// Device Identification.
        DeviceIdentification = 0x83,
        /// 8Fh Third-party Copy (SPC-4).
        ThirdPartyCopy = 0x8f,
        /// Block Limits (SBC).
        BlockLimits = 0xb0,
        /// Block Device Characteristics (SBC).
        BlockDeviceCharacteristics = 0xb1,
        /// Logical Block Provisioning (SBC).
        LogicalBlockProvisioning = 0xb2,
    }
}

/// INQUIRY as laid out on the wire (SPC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct InquiryCdb {
    /// OPERATION CODE (12h).
    pub opcode: u8,
    /// Bit 0: EVPD.
    pub flags: u8,
    /// PAGE CODE.
    pub page: u8,
    /// ALLOCATION LENGTH.
    pub alloc_len: U16,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<InquiryCdb>() == 6);

/// INQUIRY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inquiry {
    /// `Some(page)` when EVPD=1; `None` asks for standard INQUIRY data.
    pub page: Option<VpdPage>,
    /// ALLOCATION LENGTH.
    pub alloc_len: u16,
}

impl Inquiry {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let (flags, page) = match self.page {
            Some(p) => (0x01, p.into()),
            None => (0, 0),
        };
        put(
            out,
            &InquiryCdb {
                opcode: 0x12,
                flags,
                page,
                alloc_len: U16::new(self.alloc_len),
                control: 0,
            },
        )
    }
}

pub(super) fn inquiry(c: &[u8]) -> Result<Command, CdbError> {
    let h: InquiryCdb = read(c)?;
    let page = match (h.flags & 0x01 != 0, h.page) {
        (true, p) => Some(VpdPage::from(p)),
        (false, 0) => None,
        // SPC-4: PAGE CODE nonzero with EVPD=0 is INVALID FIELD IN CDB.
        (false, _) => return Err(CdbError::InvalidField { byte: 2, bit: 7 }),
    };
    Ok(Command::Inquiry(Inquiry {
        page,
        alloc_len: h.alloc_len.get(),
    }))
}

wirekit::open_enum! {
    /// SELECT REPORT of REPORT LUNS (SPC-4; 10h-12h from SPC-5).
    pub enum SelectReport(u8) {
        /// 00h: all logical units except well-known ones.
        AllExceptWellKnown = 0x00,
        /// 01h: well-known logical units only.
        WellKnownOnly = 0x01,
        /// 02h: all logical units.
        All = 0x02,
        /// 10h: administrative logical units only.
        Administrative = 0x10,
        /// 11h: administrative and their subsidiary logical units.
        AdministrativeAndSubsidiary = 0x11,
        /// 12h: subsidiary logical units of the addressed administrative one.
        Subsidiary = 0x12,
    }
}

/// REPORT LUNS as laid out on the wire (SPC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ReportLunsCdb {
    /// OPERATION CODE (A0h).
    pub opcode: u8,
    /// Reserved.
    pub reserved: u8,
    /// SELECT REPORT.
    pub select: u8,
    /// Reserved.
    pub reserved2: [u8; 3],
    /// ALLOCATION LENGTH.
    pub alloc_len: U32,
    /// Reserved.
    pub reserved3: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<ReportLunsCdb>() == 12);

/// REPORT LUNS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportLuns {
    /// SELECT REPORT.
    pub select: SelectReport,
    /// ALLOCATION LENGTH.
    pub alloc_len: u32,
}

impl ReportLuns {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = ReportLunsCdb {
            opcode: 0xa0,
            reserved: 0,
            select: self.select.into(),
            reserved2: [0; 3],
            alloc_len: U32::new(self.alloc_len),
            reserved3: 0,
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn report_luns(c: &[u8]) -> Result<Command, CdbError> {
    let h: ReportLunsCdb = read(c)?;
    Ok(Command::ReportLuns(ReportLuns {
        select: h.select.into(),
        alloc_len: h.alloc_len.get(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    /// TEST UNIT READY.
    const TUR: [u8; 6] = [
        0x00, // TEST UNIT READY
        0, 0, 0, 0,    // reserved
        0x00, // CONTROL
    ];
    wire_tests!(test_unit_ready: Command, TUR, Command::TestUnitReady);

    /// REQUEST SENSE, DESC=1, 252 bytes (the SPC-4 maximum sense length).
    const REQUEST_SENSE: [u8; 6] = [
        0x03, // REQUEST SENSE
        0x01, // DESC 1
        0, 0,    // reserved
        0xfc, // ALLOCATION LENGTH 252
        0x00, // CONTROL
    ];
    wire_tests!(request_sense: Command, REQUEST_SENSE, Command::RequestSense(RequestSense { desc: true, alloc_len: 252 }));

    /// Standard INQUIRY, 36 bytes, as Linux scsi_scan sends it.
    const INQUIRY_STD: [u8; 6] = [
        0x12, // INQUIRY
        0x00, // EVPD 0
        0x00, // PAGE CODE 0
        0x00, 0x24, // ALLOCATION LENGTH 36
        0x00, // CONTROL
    ];
    wire_tests!(inquiry_standard: Command, INQUIRY_STD, Command::Inquiry(Inquiry { page: None, alloc_len: 36 }));

    /// INQUIRY for the Device Identification VPD page (83h), 0x1000 bytes.
    const INQUIRY_83: [u8; 6] = [
        0x12, // INQUIRY
        0x01, // EVPD 1
        0x83, // PAGE CODE: Device Identification
        0x10, 0x00, // ALLOCATION LENGTH 4096
        0x00, // CONTROL
    ];
    fn inquiry_83() -> Command {
        Command::Inquiry(Inquiry {
            page: Some(VpdPage::DeviceIdentification),
            alloc_len: 0x1000,
        })
    }
    wire_tests!(inquiry_vpd: Command, INQUIRY_83, inquiry_83());

    /// REPORT LUNS, SELECT REPORT 00h, 8 KiB.
    const REPORT_LUNS: [u8; 12] = [
        0xa0, // REPORT LUNS
        0x00, // reserved
        0x00, // SELECT REPORT 00h
        0, 0, 0, // reserved
        0x00, 0x00, 0x20, 0x00, // ALLOCATION LENGTH 8192
        0x00, // reserved
        0x00, // CONTROL
    ];
    fn report_luns_value() -> Command {
        Command::ReportLuns(ReportLuns {
            select: SelectReport::AllExceptWellKnown,
            alloc_len: 0x2000,
        })
    }
    wire_tests!(report_luns: Command, REPORT_LUNS, report_luns_value());

    #[test]
    fn page_code_without_evpd_is_an_invalid_field() {
        let c = [0x12, 0x00, 0x80, 0x00, 0xff, 0x00];
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 2, bit: 7 })
        );
    }

    #[test]
    fn unknown_vpd_page_and_select_report_survive() {
        let c = [0x12, 0x01, 0xc0, 0x00, 0xff, 0x00];
        let cmd = Command::Inquiry(Inquiry {
            page: Some(VpdPage::Unknown(0xc0)),
            alloc_len: 255,
        });
        assert_eq!(Command::parse(&c), Ok(cmd));
        wirekit::wire_repr::check::round_trips(&cmd, &mut Vec::new());
        let r = Command::ReportLuns(ReportLuns {
            select: SelectReport::Unknown(0x42),
            alloc_len: 16,
        });
        wirekit::wire_repr::check::round_trips(&r, &mut Vec::new());
    }
}
