//! MAINTENANCE IN (A3h): REPORT TARGET PORT GROUPS (SPC-4) and REPORT SUPPORTED
//! OPERATION CODES (SPC-4).

use super::{CdbError, Command, flag, put, read};
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// MAINTENANCE IN service action REPORT TARGET PORT GROUPS.
pub const SA_REPORT_TARGET_PORT_GROUPS: u8 = 0x0a;
/// MAINTENANCE IN service action REPORT SUPPORTED OPERATION CODES.
pub const SA_REPORT_SUPPORTED_OPCODES: u8 = 0x0c;

/// PARAMETER DATA FORMAT 001b (extended header), bits 7:5 of byte 1.
const EXTENDED_FORMAT: u8 = 0x20;
/// RCTD, byte 2 bit 7.
const RCTD: u8 = 0x80;

/// REPORT TARGET PORT GROUPS as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RtpgCdb {
    /// OPERATION CODE (A3h).
    pub opcode: u8,
    /// Bits 7:5 PARAMETER DATA FORMAT, bits 4:0 SERVICE ACTION (0Ah).
    pub action: u8,
    /// Reserved.
    pub reserved: [u8; 4],
    /// ALLOCATION LENGTH.
    pub alloc_len: U32,
    /// Reserved.
    pub reserved2: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<RtpgCdb>() == 12);

/// REPORT TARGET PORT GROUPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportTargetPortGroups {
    /// PARAMETER DATA FORMAT 001b: the extended header (with the implicit transition time).
    /// Other formats are reserved and rejected at parse.
    pub extended: bool,
    /// ALLOCATION LENGTH.
    pub alloc_len: u32,
}

impl ReportTargetPortGroups {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = RtpgCdb {
            opcode: 0xa3,
            action: flag(self.extended, EXTENDED_FORMAT) | SA_REPORT_TARGET_PORT_GROUPS,
            reserved: [0; 4],
            alloc_len: U32::new(self.alloc_len),
            reserved2: 0,
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn report_target_port_groups(c: &[u8]) -> Result<Command, CdbError> {
    let h: RtpgCdb = read(c)?;
    Ok(Command::ReportTargetPortGroups(ReportTargetPortGroups {
        extended: h.action & EXTENDED_FORMAT != 0,
        alloc_len: h.alloc_len.get(),
    }))
}

/// REPORTING OPTIONS of REPORT SUPPORTED OPERATION CODES (SPC-4). 100b-111b are
/// reserved; the usage data leaves bit 2 clear so they are INVALID FIELD IN CDB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReportingOptions {
    /// 000b: every command, all-commands format.
    All = 0b000,
    /// 001b: one command by operation code; an operation code with service actions is
    /// INVALID FIELD IN CDB.
    OneCommand = 0b001,
    /// 010b: one command by operation code and service action; an operation code without
    /// service actions is INVALID FIELD IN CDB.
    OneCommandWithServiceAction = 0b010,
    /// 011b: one command; the service action is used only if the operation code has them.
    OneCommandServiceActionOptional = 0b011,
}

/// REPORT SUPPORTED OPERATION CODES as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RsocCdb {
    /// OPERATION CODE (A3h).
    pub opcode: u8,
    /// Bits 4:0: SERVICE ACTION (0Ch).
    pub action: u8,
    /// Bit 7 RCTD, bits 2:0 REPORTING OPTIONS.
    pub options: u8,
    /// REQUESTED OPERATION CODE.
    pub requested_opcode: u8,
    /// REQUESTED SERVICE ACTION.
    pub requested_sa: U16,
    /// ALLOCATION LENGTH.
    pub alloc_len: U32,
    /// Reserved.
    pub reserved: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<RsocCdb>() == 12);

/// REPORT SUPPORTED OPERATION CODES.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportSupportedOpcodes {
    /// RCTD: return command timeouts descriptors.
    pub rctd: bool,
    /// REPORTING OPTIONS.
    pub options: ReportingOptions,
    /// REQUESTED OPERATION CODE (ignored for [`ReportingOptions::All`]).
    pub opcode: u8,
    /// REQUESTED SERVICE ACTION.
    pub service_action: u16,
    /// ALLOCATION LENGTH.
    pub alloc_len: u32,
}

impl ReportSupportedOpcodes {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = RsocCdb {
            opcode: 0xa3,
            action: SA_REPORT_SUPPORTED_OPCODES,
            options: flag(self.rctd, RCTD) | self.options as u8,
            requested_opcode: self.opcode,
            requested_sa: U16::new(self.service_action),
            alloc_len: U32::new(self.alloc_len),
            reserved: 0,
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn report_supported_opcodes(c: &[u8]) -> Result<Command, CdbError> {
    let h: RsocCdb = read(c)?;
    let options = match h.options & 0x07 {
        0b000 => ReportingOptions::All,
        0b001 => ReportingOptions::OneCommand,
        0b010 => ReportingOptions::OneCommandWithServiceAction,
        0b011 => ReportingOptions::OneCommandServiceActionOptional,
        _ => return Err(CdbError::InvalidField { byte: 2, bit: 2 }),
    };
    Ok(Command::ReportSupportedOpcodes(ReportSupportedOpcodes {
        rctd: h.options & RCTD != 0,
        options,
        opcode: h.requested_opcode,
        service_action: h.requested_sa.get(),
        alloc_len: h.alloc_len.get(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    /// REPORT TARGET PORT GROUPS, extended header, 4 KiB.
    const RTPG: [u8; 12] = [
        0xa3, // MAINTENANCE IN
        0x2a, // PARAMETER DATA FORMAT 001b, SERVICE ACTION 0Ah
        0, 0, 0, 0, // reserved
        0x00, 0x00, 0x10, 0x00, // ALLOCATION LENGTH 4096
        0x00, // reserved
        0x00, // CONTROL
    ];
    fn rtpg() -> Command {
        Command::ReportTargetPortGroups(ReportTargetPortGroups {
            extended: true,
            alloc_len: 4096,
        })
    }
    wire_tests!(report_target_port_groups: Command, RTPG, rtpg());

    /// REPORT SUPPORTED OPERATION CODES, one command READ CAPACITY(16) by opcode and
    /// service action, with RCTD.
    const RSOC: [u8; 12] = [
        0xa3, // MAINTENANCE IN
        0x0c, // SERVICE ACTION 0Ch
        0x82, // RCTD 1, REPORTING OPTIONS 010b
        0x9e, // REQUESTED OPERATION CODE
        0x00, 0x10, // REQUESTED SERVICE ACTION
        0x00, 0x00, 0x02, 0x00, // ALLOCATION LENGTH 512
        0x00, // reserved
        0x00, // CONTROL
    ];
    fn rsoc() -> Command {
        Command::ReportSupportedOpcodes(ReportSupportedOpcodes {
            rctd: true,
            options: ReportingOptions::OneCommandWithServiceAction,
            opcode: 0x9e,
            service_action: 0x10,
            alloc_len: 512,
        })
    }
    wire_tests!(report_supported_opcodes: Command, RSOC, rsoc());

    #[test]
    fn reserved_formats_and_options_are_invalid_fields() {
        let mut c = RTPG;
        c[1] = 0x4a; // PARAMETER DATA FORMAT 010b
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 1, bit: 6 })
        );
        let mut c = RSOC;
        c[2] = 0x04; // REPORTING OPTIONS 100b
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 2, bit: 2 })
        );
    }
}
