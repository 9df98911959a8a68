//! The supported-command table of docs/target.md, made from the one opcode table
//! ([`super::supported_opcodes`], which also answers REPORT SUPPORTED OPERATION CODES), so
//! the documentation cannot drift from what the target serves: `srp-target/tests/
//! command_table.rs` compares the table in docs/target.md with [`markdown`] and with the
//! target's own REPORT SUPPORTED OPERATION CODES answer.
//!
//! [`describe`] says what each command does here; a supported command without a
//! description fails that test.

use scsi::OpcodeInfo;
use scsi::cdb::rsoc::CommandTimeouts;

/// RECOMMENDED COMMAND TIMEOUT, by what a command does: what REPORT SUPPORTED OPERATION
/// CODES reports with RCTD=1 and the table of docs/target.md shows. A command that moves
/// data (at most the 8 MiB transfer limit) or asks about the LU answers within a second
/// when the backing store is healthy; the recommendation leaves room for a slow or busy
/// one, as Linux sd's 30 s default does. Flushes and range operations get more.
pub fn timeouts(info: &OpcodeInfo) -> CommandTimeouts {
    let recommended_s = match (info.opcode, info.service_action) {
        // SYNCHRONIZE CACHE, WRITE SAME, UNMAP, START STOP UNIT (a flush), PRE-FETCH:
        // a whole-device fdatasync or up to 32 MiB of zeros.
        (0x35 | 0x91 | 0x41 | 0x93 | 0x42 | 0x1b | 0x34 | 0x90, None) => 60,
        // A copy of up to 16 segments of 256 MiB, or a token's 256 MiB.
        (0x83, Some(0x00 | 0x11)) => 120,
        // Commands that answer from the LU's state only.
        (0x00 | 0x03 | 0x12 | 0x1e | 0xa0 | 0xa3 | 0x5e | 0x37 | 0xb7 | 0x84, _) => 10,
        _ => 30,
    };
    CommandTimeouts {
        nominal_s: 1,
        recommended_s,
    }
}

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
        (0x12, None) => "standard data (3PC) and VPD pages 00h, 80h, 83h, 8Fh, B0h, B1h, B2h",
        (0x16 | 0x56, None) => {
            "SCSI-2 reservation of the LU by this I_T nexus (conflict if another holds it; with PR registrations, CRH rules)"
        }
        (0x17 | 0x57, None) => {
            "ends this nexus's SCSI-2 reservation (GOOD and no effect from others)"
        }
        (0x1e, None) => "GOOD: a fixed disk's medium cannot be removed (RMB=0)",
        (0x2e | 0xae | 0x8e, None) => {
            "writes durably, reads back; BYTCHK=1 compares (MISCOMPARE with the offset)"
        }
        (0x34 | 0x90, None) => {
            "starts reading the range into the page cache; GOOD (the cache promises nothing)"
        }
        (0x37 | 0xb7, None) => "an empty defect list in the format asked for",
        (0x8b, None) => "ORs the data-out into the blocks, atomically",
        (0x9c, None) => {
            "writes whole or not at all, atomic against every other command and a power cut (up to the transfer limit; a file or device through its intent log)"
        }
        (0x9e, Some(0x12)) => {
            "mapped and deallocated runs from the backing file's holes; REPORT TYPE picks all, not mapped, mapped or deallocated"
        }
        (0xaf, None) => {
            "BYTCHK=0: reads the range (MEDIUM ERROR where it cannot); BYTCHK=1/3: compares with the data-out (MISCOMPARE)"
        }
        (0x15 | 0x55, None) => {
            "caching page (WCE, where configured changeable; SP=1 saves it), control page"
        }
        (0x1a | 0x5a, None) => {
            "caching (08h) and control (0Ah) pages, current/changeable/default/saved"
        }
        (0x1b, None) => {
            "START=0 flushes (unless NO_FLUSH); the unit stays ready for every initiator; no LOEJ, no power conditions"
        }
        (0x25, None) => "last LBA (FFFFFFFFh past 2 TiB) and block size",
        (0x2f | 0x8f, None) => {
            "BYTCHK=0: reads the range (MEDIUM ERROR where it cannot); BYTCHK=1/3: compares with the data-out (MISCOMPARE)"
        }
        (0x35 | 0x91, None) => "makes written data durable (fdatasync); a failed flush is latched",
        (0x41 | 0x93, None) => "writes one block over a range; UNMAP=1 with zeros deallocates",
        (0x42, None) => "deallocates ranges (holes punched; they read as zeros, LBPRZ=1)",
        (0x5e, Some(0x00)) => "the registered reservation keys",
        (0x5e, Some(0x01)) => "the persistent reservation, if any",
        (0x5e, Some(0x02)) => {
            "what persistent reservations support here (types, APTPL, ALL_TG_PT, CRH)"
        }
        (0x5e, Some(0x03)) => "every registration with its transport ID",
        (0x5f, Some(0x00)) => "registers or unregisters a key (APTPL persisted)",
        (0x5f, Some(0x01)) => "takes the reservation (six types)",
        (0x5f, Some(0x02)) => "gives the reservation up",
        (0x5f, Some(0x03)) => "removes every registration and the reservation",
        (0x5f, Some(0x04)) => "removes another key's registrations, takes its reservation",
        (0x5f, Some(0x05)) => "as PREEMPT, and aborts the preempted nexuses' tasks",
        (0x5f, Some(0x06)) => "registers whatever key was registered before",
        (0x83, Some(0x00)) => {
            "copies block to block segments between LUs of this target (CSCDs by NAA), one point in time of the source"
        }
        (0x83, Some(0x10)) => {
            "makes a 512-byte ROD token for ranges of this LU (revoked by writes to them, expires)"
        }
        (0x83, Some(0x11)) => {
            "writes the blocks a token of this target stands for (or zeros), on any LU and IOC"
        }
        (0x84, Some(0x00)) => "how an EXTENDED COPY of this I_T nexus ended (by list identifier)",
        (0x84, Some(0x03)) => "the copy manager's limits and descriptor types (02h, E4h)",
        (0x84, Some(0x04)) => "the sense an EXTENDED COPY of this I_T nexus failed with",
        (0x84, Some(0x07)) => "a token operation's status and the token POPULATE TOKEN made",
        (0x89, None) => {
            "compares, then writes, atomic against the LU's other writes (MISCOMPARE with the offset)"
        }
        (0x9e, Some(0x10)) => {
            "last LBA, block size, physical block exponent; LBPME and LBPRZ when the backend unmaps"
        }
        (0xa0, None) => "the LUNs of this I_T nexus (the IOC's exports)",
        (0xa3, Some(0x0a)) => "one target port group per IOC, with its ALUA state",
        (0xa3, Some(0x0c)) => "this table: all commands, or one with its CDB usage map",
        _ => return None,
    })
}

/// One row's cells: operation code, service action, name, CDB length, recommended
/// timeout, what it does here.
fn row(info: &OpcodeInfo) -> [String; 6] {
    [
        format!("{:02X}h", info.opcode),
        info.service_action
            .map_or_else(|| "–".to_owned(), |sa| format!("{sa:02X}h")),
        info.name.to_owned(),
        info.usage.len().to_string(),
        format!("{} s", timeouts(info).recommended_s),
        describe(info.opcode, info.service_action)
            .unwrap_or("(undescribed)")
            .to_owned(),
    ]
}

/// The supported-command table in Markdown, one row per supported (opcode, service
/// action), in the order REPORT SUPPORTED OPERATION CODES lists them.
pub fn markdown() -> String {
    let mut out = String::from(
        "| opcode | service action | command | CDB bytes | timeout | here |\n|---|---|---|---|---|---|\n",
    );
    for info in super::supported_opcodes() {
        out.push_str(&format!("| {} |\n", row(info).join(" | ")));
    }
    out
}
