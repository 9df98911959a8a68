//! PERSISTENT RESERVE IN and OUT (SPC-4).
//!
//! The service actions are closed enums: [`super::OPCODES`] lists every one we accept, and
//! any other is INVALID FIELD IN CDB at parse, so an `Unknown` could never be produced.
//! SCOPE and TYPE are open enums: their checks depend on the service action and belong to
//! the device server.

use super::{CdbError, Command, put, read};
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// PERSISTENT RESERVE IN service actions (SPC-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrInAction {
    /// READ KEYS.
    ReadKeys = 0x00,
    /// READ RESERVATION.
    ReadReservation = 0x01,
    /// REPORT CAPABILITIES.
    ReportCapabilities = 0x02,
    /// READ FULL STATUS.
    ReadFullStatus = 0x03,
}

/// PERSISTENT RESERVE OUT service actions (SPC-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrOutAction {
    /// REGISTER.
    Register = 0x00,
    /// RESERVE.
    Reserve = 0x01,
    /// RELEASE.
    Release = 0x02,
    /// CLEAR.
    Clear = 0x03,
    /// PREEMPT.
    Preempt = 0x04,
    /// PREEMPT AND ABORT.
    PreemptAndAbort = 0x05,
    /// REGISTER AND IGNORE EXISTING KEY.
    RegisterAndIgnoreExistingKey = 0x06,
    /// REGISTER AND MOVE.
    RegisterAndMove = 0x07,
}

wirekit::open_enum! {
    /// SCOPE of PERSISTENT RESERVE OUT (SPC-4): only LU_SCOPE is defined.
    pub enum PrScope(u8) {
        /// LU_SCOPE: the reservation applies to the whole logical unit.
        LogicalUnit = 0x0,
    }
}

wirekit::open_enum! {
    /// TYPE of a persistent reservation (SPC-4).
    pub enum PrType(u8) {
        /// Write Exclusive.
        WriteExclusive = 0x1,
        /// Exclusive Access.
        ExclusiveAccess = 0x3,
        /// Write Exclusive - Registrants Only.
        WriteExclusiveRegistrantsOnly = 0x5,
        /// Exclusive Access - Registrants Only.
        ExclusiveAccessRegistrantsOnly = 0x6,
        /// Write Exclusive - All Registrants.
        WriteExclusiveAllRegistrants = 0x7,
        /// Exclusive Access - All Registrants.
        ExclusiveAccessAllRegistrants = 0x8,
    }
}

/// PERSISTENT RESERVE IN as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PrInCdb {
    /// OPERATION CODE (5Eh).
    pub opcode: u8,
    /// Bits 4:0: SERVICE ACTION.
    pub action: u8,
    /// Reserved.
    pub reserved: [u8; 5],
    /// ALLOCATION LENGTH.
    pub alloc_len: U16,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<PrInCdb>() == 10);

/// PERSISTENT RESERVE IN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrIn {
    /// SERVICE ACTION.
    pub action: PrInAction,
    /// ALLOCATION LENGTH.
    pub alloc_len: u16,
}

impl PrIn {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let h = PrInCdb {
            opcode: 0x5e,
            action: self.action as u8,
            reserved: [0; 5],
            alloc_len: U16::new(self.alloc_len),
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn pr_in(c: &[u8]) -> Result<Command, CdbError> {
    let h: PrInCdb = read(c)?;
    let action = match h.action & 0x1f {
        0x00 => PrInAction::ReadKeys,
        0x01 => PrInAction::ReadReservation,
        0x02 => PrInAction::ReportCapabilities,
        0x03 => PrInAction::ReadFullStatus,
        _ => return Err(CdbError::InvalidField { byte: 1, bit: 4 }),
    };
    Ok(Command::PersistentReserveIn(PrIn {
        action,
        alloc_len: h.alloc_len.get(),
    }))
}

/// PERSISTENT RESERVE OUT as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PrOutCdb {
    /// OPERATION CODE (5Fh).
    pub opcode: u8,
    /// Bits 4:0: SERVICE ACTION.
    pub action: u8,
    /// Bits 7:4 SCOPE, bits 3:0 TYPE.
    pub scope_type: u8,
    /// Reserved.
    pub reserved: [u8; 2],
    /// PARAMETER LIST LENGTH.
    pub param_len: U32,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<PrOutCdb>() == 10);

/// PERSISTENT RESERVE OUT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrOut {
    /// SERVICE ACTION.
    pub action: PrOutAction,
    /// SCOPE (4 bits).
    pub scope: PrScope,
    /// TYPE (4 bits).
    pub pr_type: PrType,
    /// PARAMETER LIST LENGTH (24 for the basic parameter list).
    pub param_len: u32,
}

impl PrOut {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let (scope, pr_type) = (u8::from(self.scope), u8::from(self.pr_type));
        if scope > 0x0f {
            return Err(CdbError::OutOfRange {
                field: "SCOPE",
                value: scope.into(),
            });
        }
        if pr_type > 0x0f {
            return Err(CdbError::OutOfRange {
                field: "TYPE",
                value: pr_type.into(),
            });
        }
        let h = PrOutCdb {
            opcode: 0x5f,
            action: self.action as u8,
            scope_type: scope << 4 | pr_type,
            reserved: [0; 2],
            param_len: U32::new(self.param_len),
            control: 0,
        };
        put(out, &h)
    }
}

pub(super) fn pr_out(c: &[u8]) -> Result<Command, CdbError> {
    use PrOutAction as A;
    let h: PrOutCdb = read(c)?;
    let action = match h.action & 0x1f {
        0x00 => A::Register,
        0x01 => A::Reserve,
        0x02 => A::Release,
        0x03 => A::Clear,
        0x04 => A::Preempt,
        0x05 => A::PreemptAndAbort,
        0x06 => A::RegisterAndIgnoreExistingKey,
        0x07 => A::RegisterAndMove,
        _ => return Err(CdbError::InvalidField { byte: 1, bit: 4 }),
    };
    Ok(Command::PersistentReserveOut(PrOut {
        action,
        scope: (h.scope_type >> 4).into(),
        pr_type: (h.scope_type & 0x0f).into(),
        param_len: h.param_len.get(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    fn pr_in_cdb(sa: u8) -> [u8; 10] {
        [
            0x5e, // PERSISTENT RESERVE IN
            sa,   // SERVICE ACTION
            0, 0, 0, 0, 0, // reserved
            0x10, 0x00, // ALLOCATION LENGTH 4096
            0x00, // CONTROL
        ]
    }
    fn pr_in_value(action: PrInAction) -> Command {
        Command::PersistentReserveIn(PrIn {
            action,
            alloc_len: 0x1000,
        })
    }

    wire_tests!(pr_in_read_keys: Command, pr_in_cdb(0x00), pr_in_value(PrInAction::ReadKeys));
    wire_tests!(pr_in_read_reservation: Command, pr_in_cdb(0x01), pr_in_value(PrInAction::ReadReservation));
    wire_tests!(pr_in_report_capabilities: Command, pr_in_cdb(0x02), pr_in_value(PrInAction::ReportCapabilities));
    wire_tests!(pr_in_read_full_status: Command, pr_in_cdb(0x03), pr_in_value(PrInAction::ReadFullStatus));

    fn pr_out_cdb(sa: u8, scope_type: u8) -> [u8; 10] {
        [
            0x5f,       // PERSISTENT RESERVE OUT
            sa,         // SERVICE ACTION
            scope_type, // SCOPE (7:4), TYPE (3:0)
            0, 0, // reserved
            0x00, 0x00, 0x00, 0x18, // PARAMETER LIST LENGTH 24
            0x00, // CONTROL
        ]
    }
    fn pr_out_value(action: PrOutAction, pr_type: PrType) -> Command {
        Command::PersistentReserveOut(PrOut {
            action,
            scope: PrScope::LogicalUnit,
            pr_type,
            param_len: 24,
        })
    }

    // REGISTER ignores TYPE; Linux sends 0 there.
    wire_tests!(pr_out_register: Command, pr_out_cdb(0x00, 0x00), pr_out_value(PrOutAction::Register, PrType::Unknown(0)));
    // RESERVE, LU_SCOPE, Write Exclusive.
    wire_tests!(pr_out_reserve: Command, pr_out_cdb(0x01, 0x01), pr_out_value(PrOutAction::Reserve, PrType::WriteExclusive));
    // RELEASE, LU_SCOPE, Exclusive Access.
    wire_tests!(pr_out_release: Command, pr_out_cdb(0x02, 0x03), pr_out_value(PrOutAction::Release, PrType::ExclusiveAccess));
    // CLEAR.
    wire_tests!(pr_out_clear: Command, pr_out_cdb(0x03, 0x00), pr_out_value(PrOutAction::Clear, PrType::Unknown(0)));
    // PREEMPT, Write Exclusive - Registrants Only.
    wire_tests!(pr_out_preempt: Command, pr_out_cdb(0x04, 0x05), pr_out_value(PrOutAction::Preempt, PrType::WriteExclusiveRegistrantsOnly));
    // PREEMPT AND ABORT, Exclusive Access - Registrants Only.
    wire_tests!(pr_out_preempt_and_abort: Command, pr_out_cdb(0x05, 0x06), pr_out_value(PrOutAction::PreemptAndAbort, PrType::ExclusiveAccessRegistrantsOnly));
    // REGISTER AND IGNORE EXISTING KEY, Write Exclusive - All Registrants.
    wire_tests!(pr_out_register_ignore: Command, pr_out_cdb(0x06, 0x07), pr_out_value(PrOutAction::RegisterAndIgnoreExistingKey, PrType::WriteExclusiveAllRegistrants));
    // REGISTER AND MOVE, Exclusive Access - All Registrants.
    wire_tests!(pr_out_register_and_move: Command, pr_out_cdb(0x07, 0x08), pr_out_value(PrOutAction::RegisterAndMove, PrType::ExclusiveAccessAllRegistrants));

    #[test]
    fn type_codes_follow_spc4() {
        let table = [
            (1u8, PrType::WriteExclusive),
            (3, PrType::ExclusiveAccess),
            (5, PrType::WriteExclusiveRegistrantsOnly),
            (6, PrType::ExclusiveAccessRegistrantsOnly),
            (7, PrType::WriteExclusiveAllRegistrants),
            (8, PrType::ExclusiveAccessAllRegistrants),
        ];
        for (code, t) in table {
            assert_eq!(PrType::from(code), t);
        }
    }

    #[test]
    fn unknown_service_actions_are_invalid_fields() {
        assert_eq!(
            Command::parse(&pr_in_cdb(0x04)),
            Err(CdbError::InvalidField { byte: 1, bit: 4 })
        );
        assert_eq!(
            Command::parse(&pr_out_cdb(0x08, 0)),
            Err(CdbError::InvalidField { byte: 1, bit: 4 })
        );
    }

    #[test]
    fn wide_scope_or_type_fails_emit() {
        let p = PrOut {
            action: PrOutAction::Reserve,
            scope: PrScope::Unknown(0x10),
            pr_type: PrType::WriteExclusive,
            param_len: 24,
        };
        assert!(Command::PersistentReserveOut(p).emit(&mut [0; 10]).is_err());
    }
}
