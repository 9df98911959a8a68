//! REPORT SUPPORTED OPERATION CODES parameter data (SPC-4), built from the opcode
//! table so what a target reports is exactly what it parses.
//!
//! Command timeouts descriptors (RCTD=1) carry what the caller's `timeouts` says for each
//! command ([`no_timeouts`]: zeros, which SPC-4 defines as "no timeout information").

use super::{CdbError, OpcodeInfo, ReportSupportedOpcodes, ReportingOptions};
use alloc::vec;
use alloc::vec::Vec;
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// A command descriptor of the all-commands format (SPC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CommandDescriptor {
    /// OPERATION CODE.
    pub opcode: u8,
    /// Reserved.
    pub reserved: u8,
    /// SERVICE ACTION.
    pub service_action: U16,
    /// Reserved.
    pub reserved2: u8,
    /// Bit 1 CTDP (a timeouts descriptor follows), bit 0 SERVACTV.
    pub flags: u8,
    /// CDB LENGTH.
    pub cdb_len: U16,
}
const _: () = assert!(size_of::<CommandDescriptor>() == 8);

/// A command timeouts descriptor (SPC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct TimeoutsDescriptor {
    /// DESCRIPTOR LENGTH: 000Ah.
    pub len: U16,
    /// Reserved.
    pub reserved: u8,
    /// COMMAND SPECIFIC.
    pub command_specific: u8,
    /// NOMINAL COMMAND PROCESSING TIMEOUT in seconds (0: no information).
    pub nominal_s: U32,
    /// RECOMMENDED COMMAND TIMEOUT in seconds (0: no information).
    pub recommended_s: U32,
}
const _: () = assert!(size_of::<TimeoutsDescriptor>() == 12);

/// The header of the one-command format (SPC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct OneCommandHdr {
    /// Reserved.
    pub reserved: u8,
    /// Bit 7 CTDP, bits 2:0 SUPPORT.
    pub support: u8,
    /// CDB SIZE.
    pub cdb_size: U16,
}
const _: () = assert!(size_of::<OneCommandHdr>() == 4);

const CTDP_ALL: u8 = 0x02;
const SERVACTV: u8 = 0x01;
const CTDP_ONE: u8 = 0x80;
/// SUPPORT 001b: the command is not supported.
pub const SUPPORT_NOT_SUPPORTED: u8 = 0b001;
/// SUPPORT 011b: supported in conformance with a SCSI standard.
pub const SUPPORT_STANDARD: u8 = 0b011;

/// A command's timeouts, in seconds (0: no information).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CommandTimeouts {
    /// NOMINAL COMMAND PROCESSING TIMEOUT: how long the command normally takes at most.
    pub nominal_s: u32,
    /// RECOMMENDED COMMAND TIMEOUT: how long to wait before giving it up.
    pub recommended_s: u32,
}

/// What a device without timeout figures reports: no information.
pub fn no_timeouts(_: &OpcodeInfo) -> CommandTimeouts {
    CommandTimeouts::default()
}

fn timeouts_descriptor(t: CommandTimeouts) -> TimeoutsDescriptor {
    TimeoutsDescriptor {
        len: U16::new(0x0a),
        reserved: 0,
        command_specific: 0,
        nominal_s: U32::new(t.nominal_s),
        recommended_s: U32::new(t.recommended_s),
    }
}

/// The all-commands format (REPORTING OPTIONS 000b): a 4-byte COMMAND DATA LENGTH, then an
/// 8-byte descriptor per entry of `table`, each followed by a 12-byte timeouts descriptor
/// when `rctd` (from `timeouts`). Truncating to the ALLOCATION LENGTH is the caller's job.
pub fn all_commands(
    table: &[OpcodeInfo],
    rctd: bool,
    timeouts: fn(&OpcodeInfo) -> CommandTimeouts,
) -> Vec<u8> {
    let mut out = vec![0u8; 4];
    for e in table {
        let d = CommandDescriptor {
            opcode: e.opcode,
            reserved: 0,
            service_action: U16::new(e.service_action.unwrap_or(0).into()),
            reserved2: 0,
            flags: if rctd { CTDP_ALL } else { 0 }
                | if e.service_action.is_some() {
                    SERVACTV
                } else {
                    0
                },
            // CDB lengths are 6..=16.
            cdb_len: U16::new(e.cdb_len() as u16),
        };
        out.extend_from_slice(d.as_bytes());
        if rctd {
            out.extend_from_slice(timeouts_descriptor(timeouts(e)).as_bytes());
        }
    }
    // At most a few hundred entries of 20 bytes: far below u32::MAX.
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    out
}

/// The one-command format (REPORTING OPTIONS 001b-011b) for the command `req` asks about:
/// SUPPORT 011b with the CDB USAGE DATA when `table` has it, else SUPPORT 001b. Errors with
/// INVALID FIELD IN CDB at REPORTING OPTIONS when the option contradicts whether the
/// operation code has service actions (SPC-4).
pub fn one_command(
    table: &[OpcodeInfo],
    req: &ReportSupportedOpcodes,
    timeouts: fn(&OpcodeInfo) -> CommandTimeouts,
) -> Result<Vec<u8>, CdbError> {
    let has_sa = table
        .iter()
        .any(|e| e.opcode == req.opcode && e.service_action.is_some());
    let known = table.iter().any(|e| e.opcode == req.opcode);
    let bad_option = CdbError::InvalidField { byte: 2, bit: 2 };
    let sa = match req.options {
        ReportingOptions::All => return Ok(all_commands(table, req.rctd, timeouts)),
        ReportingOptions::OneCommand if has_sa => return Err(bad_option),
        ReportingOptions::OneCommandWithServiceAction if known && !has_sa => {
            return Err(bad_option);
        }
        ReportingOptions::OneCommand => None,
        _ if !has_sa && known => None,
        // A service action above 1Fh is not one of ours: reported as not supported.
        _ => Some(u8::try_from(req.service_action).unwrap_or(u8::MAX)),
    };
    let entry = table
        .iter()
        .find(|e| e.opcode == req.opcode && e.service_action == sa);
    let Some(e) = entry else {
        let h = OneCommandHdr {
            reserved: 0,
            support: SUPPORT_NOT_SUPPORTED,
            cdb_size: U16::new(0),
        };
        return Ok(h.as_bytes().to_vec());
    };
    let ctdp = if req.rctd { CTDP_ONE } else { 0 };
    let h = OneCommandHdr {
        reserved: 0,
        support: ctdp | SUPPORT_STANDARD,
        cdb_size: U16::new(e.cdb_len() as u16),
    };
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(e.usage);
    if req.rctd {
        out.extend_from_slice(timeouts_descriptor(timeouts(e)).as_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdb::OPCODES;
    use crate::cdb::opcodes::lookup;

    fn pick(keys: &[(u8, Option<u8>)]) -> Vec<OpcodeInfo> {
        keys.iter()
            .filter_map(|&(o, sa)| lookup(o, sa).copied())
            .collect()
    }

    fn req(
        options: ReportingOptions,
        opcode: u8,
        service_action: u16,
        rctd: bool,
    ) -> ReportSupportedOpcodes {
        ReportSupportedOpcodes {
            rctd,
            options,
            opcode,
            service_action,
            alloc_len: 4096,
        }
    }

    #[test]
    fn all_commands_format() {
        let table = pick(&[(0x00, None), (0x9e, Some(0x10))]);
        #[rustfmt::skip]
        let want = [
            0, 0, 0, 16, // COMMAND DATA LENGTH 16
            0x00, 0, 0x00, 0x00, 0, 0x00, 0x00, 0x06, // TEST UNIT READY, no SA, CDB LENGTH 6
            0x9e, 0, 0x00, 0x10, 0, 0x01, 0x00, 0x10, // 9Eh SA 10h, SERVACTV, CDB LENGTH 16
        ];
        assert_eq!(all_commands(&table, false, no_timeouts), want);
    }

    #[test]
    fn all_commands_with_timeouts() {
        let table = pick(&[(0x28, None)]);
        #[rustfmt::skip]
        let want = [
            0, 0, 0, 20, // COMMAND DATA LENGTH 20
            0x28, 0, 0, 0, 0, 0x02, 0, 10, // READ(10), CTDP, CDB LENGTH 10
            0x00, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // timeouts: length 10, no information
        ];
        assert_eq!(all_commands(&table, true, no_timeouts), want);
        let full = all_commands(OPCODES, true, no_timeouts);
        assert_eq!(full.len(), 4 + 20 * OPCODES.len());
    }

    #[test]
    fn one_command_format() {
        #[rustfmt::skip]
        let want = [
            0x00, // reserved
            0x03, // CTDP 0, SUPPORT 011b
            0x00, 0x0a, // CDB SIZE 10
            0x28, 0x18, 0xff, 0xff, 0xff, 0xff, 0x00, 0xff, 0xff, 0x00, // READ(10) usage data
        ];
        assert_eq!(
            one_command(
                OPCODES,
                &req(ReportingOptions::OneCommand, 0x28, 0, false),
                no_timeouts
            ),
            Ok(want.to_vec())
        );
        let rc16 = one_command(
            OPCODES,
            &req(
                ReportingOptions::OneCommandWithServiceAction,
                0x9e,
                0x10,
                true,
            ),
            no_timeouts,
        );
        let rc16 = rc16.expect("supported");
        assert_eq!(&rc16[..4], &[0x00, 0x83, 0x00, 0x10]);
        assert_eq!(rc16.len(), 4 + 16 + 12);
        assert_eq!(&rc16[4..6], &[0x9e, 0x10]);
    }

    #[test]
    fn one_command_unsupported_and_contradictions() {
        let not_supported = vec![0x00, 0x01, 0x00, 0x00];
        assert_eq!(
            one_command(
                OPCODES,
                &req(ReportingOptions::OneCommand, 0x04, 0, false),
                no_timeouts
            ),
            Ok(not_supported.clone())
        );
        let sa12 = req(
            ReportingOptions::OneCommandWithServiceAction,
            0x9e,
            0x13,
            false,
        );
        assert_eq!(one_command(OPCODES, &sa12, no_timeouts), Ok(not_supported));
        let bad = CdbError::InvalidField { byte: 2, bit: 2 };
        assert_eq!(
            one_command(
                OPCODES,
                &req(ReportingOptions::OneCommand, 0x5e, 0, false),
                no_timeouts
            ),
            Err(bad)
        );
        let no_sa = req(
            ReportingOptions::OneCommandWithServiceAction,
            0x28,
            0,
            false,
        );
        assert_eq!(one_command(OPCODES, &no_sa, no_timeouts), Err(bad));
        // 011b: the service action is ignored for an opcode without them.
        let optional = req(
            ReportingOptions::OneCommandServiceActionOptional,
            0x28,
            7,
            false,
        );
        assert_eq!(
            one_command(OPCODES, &optional, no_timeouts).map(|v| v[1]),
            Ok(SUPPORT_STANDARD)
        );
        let all = req(ReportingOptions::All, 0, 0, false);
        assert_eq!(
            one_command(OPCODES, &all, no_timeouts),
            Ok(all_commands(OPCODES, false, no_timeouts))
        );
    }
}
