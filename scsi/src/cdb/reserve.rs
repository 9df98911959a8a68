//! RESERVE and RELEASE (6) and (10): the SCSI-2 logical unit reservation (SPC-2 7.21 and
//! 7.16; obsolete since SPC-3 but what Windows Server 2003 clusters use).
//!
//! Only the logical unit form is served: the third-party (3RDPTY, LONGID) and extent forms
//! are evaluated by no bit of the usage data, so a CDB that asks for them is INVALID FIELD
//! IN CDB at that bit, and the PARAMETER LIST LENGTH of the 10-byte forms (meaningful only
//! with LONGID) must be zero.

use super::{CdbError, Command, put, read};

/// Which CDB carries a RESERVE or RELEASE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReserveCdb {
    /// RESERVE(6) 16h / RELEASE(6) 17h.
    Six,
    /// RESERVE(10) 56h / RELEASE(10) 57h.
    Ten,
}

impl ReserveCdb {
    /// The operation code of RESERVE (`reserve`) or RELEASE of this size.
    pub(super) fn opcode(self, reserve: bool) -> u8 {
        match (self, reserve) {
            (ReserveCdb::Six, true) => 0x16,
            (ReserveCdb::Six, false) => 0x17,
            (ReserveCdb::Ten, true) => 0x56,
            (ReserveCdb::Ten, false) => 0x57,
        }
    }

    pub(super) fn emit(self, reserve: bool, out: &mut [u8]) -> Result<(), CdbError> {
        match self {
            ReserveCdb::Six => put(out, &[self.opcode(reserve), 0, 0, 0, 0, 0]),
            ReserveCdb::Ten => put(out, &[self.opcode(reserve), 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        }
    }
}

pub(super) fn reserve6(c: &[u8]) -> Result<Command, CdbError> {
    let _: [u8; 6] = read(c)?;
    Ok(Command::Reserve(ReserveCdb::Six))
}
pub(super) fn release6(c: &[u8]) -> Result<Command, CdbError> {
    let _: [u8; 6] = read(c)?;
    Ok(Command::Release(ReserveCdb::Six))
}
pub(super) fn reserve10(c: &[u8]) -> Result<Command, CdbError> {
    let _: [u8; 10] = read(c)?;
    Ok(Command::Reserve(ReserveCdb::Ten))
}
pub(super) fn release10(c: &[u8]) -> Result<Command, CdbError> {
    let _: [u8; 10] = read(c)?;
    Ok(Command::Release(ReserveCdb::Ten))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    /// RESERVE(6) as Windows Server 2003's cluster disk driver sends it.
    const RESERVE6: [u8; 6] = [0x16, 0, 0, 0, 0, 0];
    wire_tests!(reserve6: Command, RESERVE6, Command::Reserve(ReserveCdb::Six));

    /// RELEASE(6).
    const RELEASE6: [u8; 6] = [0x17, 0, 0, 0, 0, 0];
    wire_tests!(release6: Command, RELEASE6, Command::Release(ReserveCdb::Six));

    /// RESERVE(10), logical unit form (3RDPTY 0, LONGID 0, PARAMETER LIST LENGTH 0).
    const RESERVE10: [u8; 10] = [0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    wire_tests!(reserve10: Command, RESERVE10, Command::Reserve(ReserveCdb::Ten));

    /// RELEASE(10), logical unit form.
    const RELEASE10: [u8; 10] = [0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    wire_tests!(release10: Command, RELEASE10, Command::Release(ReserveCdb::Ten));

    #[test]
    fn third_party_and_extent_forms_are_invalid_fields() {
        // 3RDPTY (byte 1 bit 4) of RESERVE(10).
        let mut c = RESERVE10;
        c[1] = 0x10;
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 1, bit: 4 })
        );
        // LONGID (byte 1 bit 1) of RELEASE(10).
        let mut c = RELEASE10;
        c[1] = 0x02;
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 1, bit: 1 })
        );
        // A parameter list with neither.
        let mut c = RESERVE10;
        c[8] = 8;
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 8, bit: 3 })
        );
        // The obsolete EXTENT bit of RESERVE(6).
        let mut c = RESERVE6;
        c[1] = 0x01;
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 1, bit: 0 })
        );
    }
}
