//! REPORT LUNS (SPC-4 6.33), REPORT SUPPORTED OPERATION CODES (6.35), REPORT TARGET PORT
//! GROUPS (6.36), and the commands addressed to a LUN that does not exist.

use super::{
    CmdOutput, Exec, Nexus, TransportError, finish, good_data, inquiry, parse, request_sense_data,
    supported_opcodes,
};
use scsi::cdb::{ReportLuns, ReportSupportedOpcodes, ReportTargetPortGroups, SelectReport, rsoc};
use scsi::{Command, Sense, SenseCode};

fn alloc(len: u32) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}

/// REPORT LUNS: the LUNs of this I_T nexus. We have no well-known LUNs.
pub(crate) fn report_luns(nexus: &Nexus<'_>, r: &ReportLuns, din: &mut Vec<u8>) -> Exec {
    // SPC-4: an ALLOCATION LENGTH below 16 is INVALID FIELD IN CDB.
    if r.alloc_len < 16 {
        return Err(Sense::invalid_field_in_cdb(6, Some(7)).into());
    }
    let luns = match r.select {
        SelectReport::AllExceptWellKnown | SelectReport::All => nexus.luns,
        SelectReport::WellKnownOnly => &[],
        _ => return Err(Sense::invalid_field_in_cdb(2, Some(7)).into()),
    };
    let list_len = u32::try_from(luns.len() * 8).unwrap_or(u32::MAX);
    din.extend(list_len.to_be_bytes());
    din.extend([0; 4]);
    for lun in luns {
        din.extend(lun.0);
    }
    good_data(din, alloc(r.alloc_len))
}

/// REPORT SUPPORTED OPERATION CODES, from [`supported_opcodes`].
pub(crate) fn report_supported_opcodes(r: &ReportSupportedOpcodes, din: &mut Vec<u8>) -> Exec {
    *din = rsoc::one_command(supported_opcodes(), r, super::commands::timeouts)?;
    good_data(din, alloc(r.alloc_len))
}

/// Supported-states byte of a group descriptor: T_SUP, U_SUP, S_SUP, AN_SUP, AO_SUP.
const SUPPORTED_STATES: u8 = 0x80 | 0x08 | 0x04 | 0x02 | 0x01;

/// REPORT TARGET PORT GROUPS: every group the caller configured.
pub(crate) fn report_target_port_groups(
    nexus: &Nexus<'_>,
    r: &ReportTargetPortGroups,
    din: &mut Vec<u8>,
) -> Exec {
    let hdr = if r.extended { 8 } else { 4 };
    din.resize(hdr, 0);
    if r.extended {
        // FORMAT TYPE 001b; IMPLICIT TRANSITION TIME 0 (transitions are instant).
        din[4] = 0x10;
    }
    for g in nexus.groups {
        let pref = if g.preferred { 0x80 } else { 0 };
        din.push(pref | g.state as u8);
        din.push(SUPPORTED_STATES);
        din.extend(g.id.0.to_be_bytes());
        // Reserved, STATUS CODE (no change), vendor specific.
        din.extend([0, 0, 0]);
        din.push(u8::try_from(g.ports.len()).unwrap_or(u8::MAX));
        for p in g.ports.iter().take(usize::from(u8::MAX)) {
            din.extend([0, 0]);
            din.extend(p.0.to_be_bytes());
        }
    }
    let len = u32::try_from(din.len() - 4).unwrap_or(u32::MAX);
    din[..4].copy_from_slice(&len.to_be_bytes());
    good_data(din, alloc(r.alloc_len))
}

/// Executes `cdb` addressed to a LUN that this I_T nexus does not have (SPC-4 / SAM-5):
/// INQUIRY answers peripheral qualifier 011b, REPORT LUNS and REQUEST SENSE work (the
/// latter with LOGICAL UNIT NOT SUPPORTED), everything else is CHECK CONDITION, LOGICAL
/// UNIT NOT SUPPORTED.
pub fn execute_unknown_lun(
    nexus: &Nexus<'_>,
    cdb: &[u8],
    data_in: &mut Vec<u8>,
) -> Result<CmdOutput, TransportError> {
    data_in.clear();
    let r = parse(cdb).and_then(|cmd| match cmd {
        Command::Inquiry(q) if q.page.is_none() => {
            *data_in = inquiry::standard(0x7f, "");
            good_data(data_in, q.alloc_len.into())
        }
        Command::ReportLuns(r) => report_luns(nexus, &r, data_in),
        Command::RequestSense(r) => request_sense_data(
            &Sense::new(SenseCode::LUN_NOT_SUPPORTED),
            r.desc,
            data_in,
            r.alloc_len,
        ),
        _ => Err(SenseCode::LUN_NOT_SUPPORTED.into()),
    });
    finish(r, data_in)
}
