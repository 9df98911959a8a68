//! The one opcode table: it dispatches parsing, validates every reserved bit, and answers
//! REPORT SUPPORTED OPERATION CODES ([`super::rsoc`]).
//!
//! Each entry carries the CDB USAGE DATA SPC-4 defines for the one-command format:
//! byte 0 is the operation code, the SERVICE ACTION field holds the service action, and
//! every other bit is one exactly when this implementation evaluates that bit. Parsing
//! rejects any CDB bit that is set where the usage data is clear, naming that byte and bit
//! (INVALID FIELD IN CDB), so the table and the parser cannot disagree. Usage choices:
//! - CONTROL byte: 00h. NACA is clear because we do not support ACA (SAM-5; a CDB with
//!   NACA=1 is then INVALID FIELD IN CDB); LINK is obsolete and the
//!   vendor-specific bits mean nothing to us.
//! - GROUP NUMBER, RDPROTECT/WRPROTECT/VRPROTECT: clear (no grouping, no protection
//!   information), as SBC-3 requires for a logical unit without them — except PRE-FETCH's
//!   GROUP NUMBER, accepted and ignored (a hint to a cache; libiscsi's Prefetch tests send
//!   one and expect GOOD).
//! - Obsolete fields (READ CAPACITY's LBA and PMI, SYNC_NV, FUA_NV): clear, as in SBC-4.

use super::{CdbError, Command, block, copy, maint, medium, mode, pr, reserve, rw, spc, writes};

/// One supported command: operation code, service action, name and CDB usage data.
#[derive(Clone, Copy, Debug)]
pub struct OpcodeInfo {
    /// OPERATION CODE.
    pub opcode: u8,
    /// SERVICE ACTION (bits 4:0 of byte 1) for commands that have one.
    pub service_action: Option<u8>,
    /// The command's name in SPC-4/SBC-3.
    pub name: &'static str,
    /// CDB USAGE DATA (SPC-4); its length is the CDB length.
    pub usage: &'static [u8],
    /// Decodes a CDB of exactly `usage.len()` bytes whose reserved bits were checked.
    pub(super) decode: fn(&[u8]) -> Result<Command, CdbError>,
}

impl OpcodeInfo {
    /// CDB length in bytes.
    pub fn cdb_len(&self) -> usize {
        self.usage.len()
    }
}

/// CONTROL byte usage: see the module doc.
const C: u8 = 0x00;
/// A 32-bit field, all bits used.
const W: [u8; 4] = [0xff; 4];

const fn e(
    opcode: u8,
    service_action: Option<u8>,
    name: &'static str,
    usage: &'static [u8],
    decode: fn(&[u8]) -> Result<Command, CdbError>,
) -> OpcodeInfo {
    OpcodeInfo {
        opcode,
        service_action,
        name,
        usage,
        decode,
    }
}

#[rustfmt::skip]
const TABLE: &[OpcodeInfo] = &[
    e(0x00, None, "TEST UNIT READY", &[0x00, 0, 0, 0, 0, C], spc::test_unit_ready),
    // DESC.
    e(0x03, None, "REQUEST SENSE", &[0x03, 0x01, 0, 0, 0xff, C], spc::request_sense),
    // LBA 20:16, LBA, TRANSFER LENGTH.
    e(0x08, None, "READ(6)", &[0x08, 0x1f, 0xff, 0xff, 0xff, C], rw::read6),
    e(0x0a, None, "WRITE(6)", &[0x0a, 0x1f, 0xff, 0xff, 0xff, C], rw::write6),
    // EVPD (CMDDT is obsolete); PAGE CODE; ALLOCATION LENGTH.
    e(0x12, None, "INQUIRY", &[0x12, 0x01, 0xff, 0xff, 0xff, C], spc::inquiry),
    // PF, SP; PARAMETER LIST LENGTH.
    e(0x15, None, "MODE SELECT(6)", &[0x15, 0x11, 0, 0, 0xff, C], mode::mode_select6),
    // Logical unit reservations only: no 3RDPTY, no extents (cdb/reserve.rs).
    e(0x16, None, "RESERVE(6)", &[0x16, 0, 0, 0, 0, C], reserve::reserve6),
    e(0x17, None, "RELEASE(6)", &[0x17, 0, 0, 0, 0, C], reserve::release6),
    // DBD; PC, PAGE CODE; SUBPAGE CODE; ALLOCATION LENGTH.
    e(0x1a, None, "MODE SENSE(6)", &[0x1a, 0x08, 0xff, 0xff, 0xff, C], mode::mode_sense6),
    // IMMED; POWER CONDITION MODIFIER; POWER CONDITION, NO_FLUSH, LOEJ, START.
    e(0x1b, None, "START STOP UNIT", &[0x1b, 0x01, 0, 0x0f, 0xf7, C], block::start_stop_unit),
    // PREVENT.
    e(0x1e, None, "PREVENT ALLOW MEDIUM REMOVAL", &[0x1e, 0, 0, 0, 0x03, C], medium::prevent_allow),
    // LBA and PMI are obsolete (SBC-4).
    e(0x25, None, "READ CAPACITY(10)", &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, C], block::read_capacity10),
    // DPO, FUA; LBA; (GROUP NUMBER); TRANSFER LENGTH.
    e(0x28, None, "READ(10)", &[0x28, 0x18, W[0], W[1], W[2], W[3], 0, 0xff, 0xff, C], rw::read10),
    e(0x2a, None, "WRITE(10)", &[0x2a, 0x18, W[0], W[1], W[2], W[3], 0, 0xff, 0xff, C], rw::write10),
    // DPO, BYTCHK bit 1 (its 10b and 11b are reserved); LBA; TRANSFER LENGTH.
    e(0x2e, None, "WRITE AND VERIFY(10)", &[0x2e, 0x12, W[0], W[1], W[2], W[3], 0, 0xff, 0xff, C], writes::write_and_verify10),
    // DPO, BYTCHK; LBA; VERIFICATION LENGTH.
    e(0x2f, None, "VERIFY(10)", &[0x2f, 0x16, W[0], W[1], W[2], W[3], 0, 0xff, 0xff, C], rw::verify10),
    // IMMED; LBA; GROUP NUMBER (accepted, no grouping); PREFETCH LENGTH.
    e(0x34, None, "PRE-FETCH(10)", &[0x34, 0x02, W[0], W[1], W[2], W[3], 0x1f, 0xff, 0xff, C], medium::prefetch10),
    // IMMED; LBA; NUMBER OF LOGICAL BLOCKS.
    e(0x35, None, "SYNCHRONIZE CACHE(10)", &[0x35, 0x02, W[0], W[1], W[2], W[3], 0, 0xff, 0xff, C],
        block::sync_cache10),
    // REQ_PLIST, REQ_GLIST, DEFECT LIST FORMAT; ALLOCATION LENGTH.
    e(0x37, None, "READ DEFECT DATA(10)", &[0x37, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, C], medium::read_defect_data10),
    // ANCHOR, UNMAP; LBA; NUMBER OF LOGICAL BLOCKS.
    e(0x41, None, "WRITE SAME(10)", &[0x41, 0x18, W[0], W[1], W[2], W[3], 0, 0xff, 0xff, C],
        block::write_same10),
    // ANCHOR; PARAMETER LIST LENGTH.
    e(0x42, None, "UNMAP", &[0x42, 0x01, 0, 0, 0, 0, 0, 0xff, 0xff, C], block::unmap),
    // PF, SP; PARAMETER LIST LENGTH.
    e(0x55, None, "MODE SELECT(10)", &[0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, C], mode::mode_select10),
    // Logical unit form only: 3RDPTY, LONGID and the parameter list clear.
    e(0x56, None, "RESERVE(10)", &[0x56, 0, 0, 0, 0, 0, 0, 0, 0, C], reserve::reserve10),
    e(0x57, None, "RELEASE(10)", &[0x57, 0, 0, 0, 0, 0, 0, 0, 0, C], reserve::release10),
    // LLBAA, DBD; PC, PAGE CODE; SUBPAGE CODE; ALLOCATION LENGTH.
    e(0x5a, None, "MODE SENSE(10)", &[0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, C], mode::mode_sense10),
    // SERVICE ACTION; ALLOCATION LENGTH.
    e(0x5e, Some(0x00), "PERSISTENT RESERVE IN/READ KEYS", &[0x5e, 0x00, 0, 0, 0, 0, 0, 0xff, 0xff, C], pr::pr_in),
    e(0x5e, Some(0x01), "PERSISTENT RESERVE IN/READ RESERVATION", &[0x5e, 0x01, 0, 0, 0, 0, 0, 0xff, 0xff, C], pr::pr_in),
    e(0x5e, Some(0x02), "PERSISTENT RESERVE IN/REPORT CAPABILITIES", &[0x5e, 0x02, 0, 0, 0, 0, 0, 0xff, 0xff, C], pr::pr_in),
    e(0x5e, Some(0x03), "PERSISTENT RESERVE IN/READ FULL STATUS", &[0x5e, 0x03, 0, 0, 0, 0, 0, 0xff, 0xff, C], pr::pr_in),
    // SERVICE ACTION; SCOPE, TYPE; PARAMETER LIST LENGTH (32 bits).
    e(0x5f, Some(0x00), "PERSISTENT RESERVE OUT/REGISTER", &[0x5f, 0x00, 0xff, 0, 0, W[0], W[1], W[2], W[3], C], pr::pr_out),
    e(0x5f, Some(0x01), "PERSISTENT RESERVE OUT/RESERVE", &[0x5f, 0x01, 0xff, 0, 0, W[0], W[1], W[2], W[3], C], pr::pr_out),
    e(0x5f, Some(0x02), "PERSISTENT RESERVE OUT/RELEASE", &[0x5f, 0x02, 0xff, 0, 0, W[0], W[1], W[2], W[3], C], pr::pr_out),
    e(0x5f, Some(0x03), "PERSISTENT RESERVE OUT/CLEAR", &[0x5f, 0x03, 0xff, 0, 0, W[0], W[1], W[2], W[3], C], pr::pr_out),
    e(0x5f, Some(0x04), "PERSISTENT RESERVE OUT/PREEMPT", &[0x5f, 0x04, 0xff, 0, 0, W[0], W[1], W[2], W[3], C], pr::pr_out),
    e(0x5f, Some(0x05), "PERSISTENT RESERVE OUT/PREEMPT AND ABORT", &[0x5f, 0x05, 0xff, 0, 0, W[0], W[1], W[2], W[3], C], pr::pr_out),
    e(0x5f, Some(0x06), "PERSISTENT RESERVE OUT/REGISTER AND IGNORE EXISTING KEY", &[0x5f, 0x06, 0xff, 0, 0, W[0], W[1], W[2], W[3], C], pr::pr_out),
    e(0x5f, Some(0x07), "PERSISTENT RESERVE OUT/REGISTER AND MOVE", &[0x5f, 0x07, 0xff, 0, 0, W[0], W[1], W[2], W[3], C], pr::pr_out),
    // THIRD-PARTY COPY OUT: EXTENDED COPY (LID1) (PARAMETER LIST LENGTH); POPULATE TOKEN
    // and WRITE USING TOKEN (LIST IDENTIFIER; PARAMETER LIST LENGTH; GROUP NUMBER clear).
    e(0x83, Some(0x00), "EXTENDED COPY(LID1)", &[0x83, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, W[0], W[1], W[2], W[3], 0, C], copy::copy_out),
    e(0x83, Some(0x10), "POPULATE TOKEN", &[0x83, 0x10, 0, 0, 0, 0, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], copy::copy_out),
    e(0x83, Some(0x11), "WRITE USING TOKEN", &[0x83, 0x11, 0, 0, 0, 0, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], copy::copy_out),
    // THIRD-PARTY COPY IN: LIST IDENTIFIER (byte 2, or 2..=5); ALLOCATION LENGTH.
    e(0x84, Some(0x00), "RECEIVE COPY STATUS(LID1)", &[0x84, 0x00, 0xff, 0, 0, 0, 0, 0, 0, 0, W[0], W[1], W[2], W[3], 0, C], copy::copy_in),
    e(0x84, Some(0x03), "RECEIVE COPY OPERATING PARAMETERS", &[0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, W[0], W[1], W[2], W[3], 0, C], copy::copy_in),
    e(0x84, Some(0x04), "RECEIVE COPY FAILURE DETAILS(LID1)", &[0x84, 0x04, 0xff, 0, 0, 0, 0, 0, 0, 0, W[0], W[1], W[2], W[3], 0, C], copy::copy_in),
    e(0x84, Some(0x07), "RECEIVE ROD TOKEN INFORMATION", &[0x84, 0x07, W[0], W[1], W[2], W[3], 0, 0, 0, 0, W[0], W[1], W[2], W[3], 0, C], copy::copy_in),
    // DPO, FUA; LBA (64); TRANSFER LENGTH (32); (GROUP NUMBER).
    e(0x88, None, "READ(16)", &[0x88, 0x18, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], rw::read16),
    // DPO, FUA; LBA; NUMBER OF LOGICAL BLOCKS in byte 13 (SBC-3).
    e(0x89, None, "COMPARE AND WRITE", &[0x89, 0x18, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, 0, 0, 0xff, 0, C], rw::compare_and_write),
    e(0x8a, None, "WRITE(16)", &[0x8a, 0x18, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], rw::write16),
    // DPO, FUA; LBA; TRANSFER LENGTH.
    e(0x8b, None, "ORWRITE(16)", &[0x8b, 0x18, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], writes::orwrite16),
    // DPO, BYTCHK bit 1; LBA; TRANSFER LENGTH.
    e(0x8e, None, "WRITE AND VERIFY(16)", &[0x8e, 0x12, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], writes::write_and_verify16),
    e(0x8f, None, "VERIFY(16)", &[0x8f, 0x16, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], rw::verify16),
    // IMMED; LBA; PREFETCH LENGTH; GROUP NUMBER (accepted, no grouping).
    e(0x90, None, "PRE-FETCH(16)", &[0x90, 0x02, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0x1f, C], medium::prefetch16),
    e(0x91, None, "SYNCHRONIZE CACHE(16)", &[0x91, 0x02, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], block::sync_cache16),
    // ANCHOR, UNMAP (NDOB unsupported); LBA; NUMBER OF LOGICAL BLOCKS.
    e(0x93, None, "WRITE SAME(16)", &[0x93, 0x18, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], block::write_same16),
    // DPO, FUA; LBA; ATOMIC BOUNDARY; TRANSFER LENGTH (16 bits).
    e(0x9c, None, "WRITE ATOMIC(16)", &[0x9c, 0x18, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0xff, 0xff, 0xff, 0xff, 0, C], writes::write_atomic16),
    // SERVICE ACTION 10h; LBA and PMI obsolete (SBC-4); ALLOCATION LENGTH.
    e(0x9e, Some(0x10), "READ CAPACITY(16)", &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, W[0], W[1], W[2], W[3], 0, C], block::read_capacity16),
    // SERVICE ACTION 12h; STARTING LBA; ALLOCATION LENGTH; REPORT TYPE (bits 1:0).
    e(0x9e, Some(0x12), "GET LBA STATUS", &[0x9e, 0x12, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0x03, C], medium::get_lba_status),
    // SELECT REPORT; ALLOCATION LENGTH.
    e(0xa0, None, "REPORT LUNS", &[0xa0, 0, 0xff, 0, 0, 0, W[0], W[1], W[2], W[3], 0, C], spc::report_luns),
    // PARAMETER DATA FORMAT 000b/001b (bit 5), SERVICE ACTION 0Ah; ALLOCATION LENGTH.
    e(0xa3, Some(0x0a), "REPORT TARGET PORT GROUPS", &[0xa3, 0x2a, 0, 0, 0, 0, W[0], W[1], W[2], W[3], 0, C], maint::report_target_port_groups),
    // SERVICE ACTION 0Ch; RCTD, REPORTING OPTIONS 000b-011b (bits 1:0); REQUESTED
    // OPERATION CODE; REQUESTED SERVICE ACTION; ALLOCATION LENGTH.
    e(0xa3, Some(0x0c), "REPORT SUPPORTED OPERATION CODES", &[0xa3, 0x0c, 0x83, 0xff, 0xff, 0xff, W[0], W[1], W[2], W[3], 0, C], maint::report_supported_opcodes),
    e(0xa8, None, "READ(12)", &[0xa8, 0x18, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], rw::read12),
    e(0xaa, None, "WRITE(12)", &[0xaa, 0x18, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], rw::write12),
    // DPO, BYTCHK bit 1; LBA; TRANSFER LENGTH.
    e(0xae, None, "WRITE AND VERIFY(12)", &[0xae, 0x12, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], writes::write_and_verify12),
    // DPO, BYTCHK; LBA; VERIFICATION LENGTH.
    e(0xaf, None, "VERIFY(12)", &[0xaf, 0x16, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], rw::verify12),
    // REQ_PLIST, REQ_GLIST, DEFECT LIST FORMAT; ADDRESS DESCRIPTOR INDEX; ALLOCATION LENGTH.
    e(0xb7, None, "READ DEFECT DATA(12)", &[0xb7, 0x1f, W[0], W[1], W[2], W[3], W[0], W[1], W[2], W[3], 0, C], medium::read_defect_data12),
];

/// Every command this crate parses, sorted by operation code and service action.
pub static OPCODES: &[OpcodeInfo] = TABLE;

/// The CDB length SPC-4 assigns to an operation code's group, where fixed.
const fn group_len(opcode: u8) -> usize {
    match opcode >> 5 {
        0 => 6,
        1 | 2 => 10,
        4 => 16,
        5 => 12,
        _ => 0,
    }
}

const fn sort_key(opcode: u8, service_action: Option<u8>) -> u16 {
    let sa = match service_action {
        Some(sa) => sa as u16,
        None => 0,
    };
    (opcode as u16) << 8 | sa
}

// The table's invariants, checked at compile time: usage byte 0 is the opcode, the length
// is the group's, the service action sits in byte 1, and entries are sorted and unique.
const _: () = {
    let mut i = 0;
    while i < TABLE.len() {
        let e = &TABLE[i];
        assert!(e.usage.len() == group_len(e.opcode));
        assert!(e.usage[0] == e.opcode);
        assert!(e.usage[e.usage.len() - 1] == C);
        if let Some(sa) = e.service_action {
            assert!(sa <= 0x1f && e.usage[1] & 0x1f == sa);
        }
        if i > 0 {
            let p = &TABLE[i - 1];
            assert!(sort_key(p.opcode, p.service_action) < sort_key(e.opcode, e.service_action));
        }
        i += 1;
    }
};

/// The table entry for `opcode` and `service_action` (`None` for commands without one).
pub fn lookup(opcode: u8, service_action: Option<u8>) -> Option<&'static OpcodeInfo> {
    OPCODES
        .iter()
        .find(|e| e.opcode == opcode && e.service_action == service_action)
}

/// Whether any entry for `opcode` has a service action.
pub fn has_service_actions(opcode: u8) -> bool {
    OPCODES
        .iter()
        .any(|e| e.opcode == opcode && e.service_action.is_some())
}

/// Finds the entry for a CDB and checks its length and every bit against the usage data.
pub(super) fn dispatch(cdb: &[u8]) -> Result<&'static OpcodeInfo, CdbError> {
    let opcode = *cdb
        .first()
        .ok_or(CdbError::Truncated { need: 1, have: 0 })?;
    let first = OPCODES
        .iter()
        .find(|e| e.opcode == opcode)
        .ok_or(CdbError::InvalidOpcode(opcode))?;
    let info = match first.service_action {
        None => first,
        Some(_) => {
            let truncated = CdbError::Truncated {
                need: first.cdb_len(),
                have: cdb.len(),
            };
            let sa = cdb.get(1).ok_or(truncated)? & 0x1f;
            // An unsupported service action is INVALID FIELD IN CDB at the SERVICE ACTION field.
            lookup(opcode, Some(sa)).ok_or(CdbError::InvalidField { byte: 1, bit: 4 })?
        }
    };
    let need = info.cdb_len();
    let cdb = cdb.get(..need).ok_or(CdbError::Truncated {
        need,
        have: cdb.len(),
    })?;
    check_usage(info.usage, cdb)?;
    Ok(info)
}

/// The first CDB bit set where `usage` is clear, as INVALID FIELD IN CDB.
fn check_usage(usage: &[u8], cdb: &[u8]) -> Result<(), CdbError> {
    for (i, (&b, &u)) in cdb.iter().zip(usage).enumerate().skip(1) {
        let extra = b & !u;
        if extra != 0 {
            // i < 16 and the bit < 8: both fit u8.
            return Err(CdbError::InvalidField {
                byte: i as u8,
                bit: 7 - extra.leading_zeros() as u8,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_opcode_and_service_action() {
        assert_eq!(
            dispatch(&[0xff; 16]).map(|e| e.name),
            Err(CdbError::InvalidOpcode(0xff))
        );
        // FORMAT UNIT: valid SPC opcode we do not implement.
        assert_eq!(
            dispatch(&[0x04, 0, 0, 0, 0, 0]).map(|e| e.name),
            Err(CdbError::InvalidOpcode(0x04))
        );
        // SERVICE ACTION IN(16) with REPORT REFERRALS (13h), which we do not implement.
        let mut cdb = [0u8; 16];
        cdb[0] = 0x9e;
        cdb[1] = 0x13;
        assert_eq!(
            dispatch(&cdb).map(|e| e.name),
            Err(CdbError::InvalidField { byte: 1, bit: 4 })
        );
        cdb[1] = 0x10;
        assert_eq!(dispatch(&cdb).map(|e| e.name), Ok("READ CAPACITY(16)"));
    }

    #[test]
    fn every_reserved_bit_is_rejected_where_usage_is_clear() {
        for e in OPCODES {
            let mut cdb = e.usage.to_vec();
            assert!(
                dispatch(&cdb).is_ok(),
                "{}: its own usage data parses",
                e.name
            );
            for byte in 1..cdb.len() {
                for bit in 0..8u8 {
                    let mask = 1u8 << bit;
                    let sa_bit = byte == 1 && e.service_action.is_some() && bit < 5;
                    if e.usage[byte] & mask != 0 || sa_bit {
                        continue;
                    }
                    cdb[byte] |= mask;
                    let want = CdbError::InvalidField {
                        byte: byte as u8,
                        bit,
                    };
                    assert_eq!(
                        dispatch(&cdb).err(),
                        Some(want),
                        "{} byte {byte} bit {bit}",
                        e.name
                    );
                    cdb[byte] &= !mask;
                }
            }
        }
    }

    #[test]
    fn naca_is_an_invalid_field() {
        // READ(10) with NACA=1 in the CONTROL byte (bit 2).
        let cdb = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0x04];
        assert_eq!(
            dispatch(&cdb).err(),
            Some(CdbError::InvalidField { byte: 9, bit: 2 })
        );
    }

    #[test]
    fn lookup_finds_service_actions() {
        assert_eq!(lookup(0x28, None).map(|e| e.cdb_len()), Some(10));
        assert_eq!(
            lookup(0x5f, Some(7)).map(|e| e.name),
            Some("PERSISTENT RESERVE OUT/REGISTER AND MOVE")
        );
        assert!(lookup(0x5f, None).is_none());
        assert!(has_service_actions(0xa3));
        assert!(!has_service_actions(0x28));
    }
}
