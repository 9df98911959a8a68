//! The supported-command table of docs/target.md, made from the one opcode table
//! ([`super::supported_opcodes`], which also answers REPORT SUPPORTED OPERATION CODES), so
//! the documentation cannot drift from what the target serves: `srp-target/tests/
//! command_table.rs` compares the table in docs/target.md with [`markdown`] and with the
//! target's own REPORT SUPPORTED OPERATION CODES answer.
//!
//! [`describe`] says what each command does here; a supported command without a
//! description fails that test.

use scsi::OpcodeInfo;

/// What (opcode, service action) does on this target, in a line.
pub fn describe(opcode: u8, service_action: Option<u8>) -> Option<&'static str> {
    Some(match (opcode, service_action) {
        (0x00, None) => "GOOD when the LU is ready (unit attentions first)",
        (0x03, None) => "NO SENSE, fixed or descriptor format (errors are autosensed)",
        (0x08, None) => "reads the blocks straight into the initiator's registered memory",
        (0x28 | 0xa8 | 0x88, None) => {
            "reads the blocks straight into the initiator's registered memory (DPO, FUA accepted)"
        }
        (0x0a, None) => "writes from the initiator's memory; write-protect checked",
        (0x2a | 0xaa | 0x8a, None) => {
            "writes from the initiator's memory; FUA: durable before GOOD; write-protect checked"
        }
        (0x12, None) => "standard data and VPD pages 00h, 80h, 83h, B0h, B1h, B2h",
        (0x15 | 0x55, None) => {
            "caching page (WCE, where configured changeable; SP=1 saves it), control page"
        }
        (0x1a | 0x5a, None) => {
            "caching (08h) and control (0Ah) pages, current/changeable/default/saved"
        }
        (0x1b, None) => "GOOD: a fixed disk with no power conditions and no medium to eject",
        (0x25, None) => "last LBA (FFFFFFFFh past 2 TiB) and block size",
        (0x2f | 0x8f, None) => {
            "BYTCHK=0: the range; BYTCHK=1/3: compares with the data-out (MISCOMPARE)"
        }
        (0x35 | 0x91, None) => "makes written data durable (fdatasync); a failed flush is latched",
        (0x41 | 0x93, None) => "writes one block over a range; UNMAP=1 with zeros deallocates",
        (0x42, None) => "deallocates ranges (holes punched; they read as zeros, LBPRZ=1)",
        (0x5e, Some(0x00)) => "the registered reservation keys",
        (0x5e, Some(0x01)) => "the persistent reservation, if any",
        (0x5e, Some(0x02)) => "what persistent reservations support here (types, APTPL, ALL_TG_PT)",
        (0x5e, Some(0x03)) => "every registration with its transport ID",
        (0x5f, Some(0x00)) => "registers or unregisters a key (APTPL persisted)",
        (0x5f, Some(0x01)) => "takes the reservation (six types)",
        (0x5f, Some(0x02)) => "gives the reservation up",
        (0x5f, Some(0x03)) => "removes every registration and the reservation",
        (0x5f, Some(0x04)) => "removes another key's registrations, takes its reservation",
        (0x5f, Some(0x05)) => "as PREEMPT, and aborts the preempted nexuses' tasks",
        (0x5f, Some(0x06)) => "registers whatever key was registered before",
        (0x89, None) => {
            "compares, then writes, atomic against the LU's other writes (MISCOMPARE with the offset)"
        }
        (0x9e, Some(0x10)) => "last LBA, block size; LBPME and LBPRZ when the backend unmaps",
        (0xa0, None) => "the LUNs of this I_T nexus (the IOC's exports)",
        (0xa3, Some(0x0a)) => "one target port group per IOC, with its ALUA state",
        (0xa3, Some(0x0c)) => "this table: all commands, or one with its CDB usage map",
        _ => return None,
    })
}

/// One row's cells: operation code, service action, name, CDB length, what it does here.
fn row(info: &OpcodeInfo) -> [String; 5] {
    [
        format!("{:02X}h", info.opcode),
        info.service_action
            .map_or_else(|| "–".to_owned(), |sa| format!("{sa:02X}h")),
        info.name.to_owned(),
        info.usage.len().to_string(),
        describe(info.opcode, info.service_action)
            .unwrap_or("(undescribed)")
            .to_owned(),
    ]
}

/// The supported-command table in Markdown, one row per supported (opcode, service
/// action), in the order REPORT SUPPORTED OPERATION CODES lists them.
pub fn markdown() -> String {
    let mut out = String::from(
        "| opcode | service action | command | CDB bytes | here |\n|---|---|---|---|---|\n",
    );
    for info in super::supported_opcodes() {
        out.push_str(&format!("| {} |\n", row(info).join(" | ")));
    }
    out
}
