//! The one error type of CDB parsing and emitting, and the sense data each parse error calls for.

use crate::sense::{Sense, SenseCode};

/// Why a CDB was rejected (parse), or could not be written (emit).
///
/// The parse errors name the SPC response exactly; see [`CdbError::sense`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CdbError {
    /// The CDB is shorter than its operation code requires (SPC-4 group code).
    #[error("CDB truncated: the operation code needs {need} bytes, have {have}")]
    Truncated {
        /// Bytes the CDB needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The operation code is not one this crate implements: INVALID COMMAND OPERATION CODE.
    #[error("operation code {0:#04x} is not supported")]
    InvalidOpcode(u8),
    /// A reserved or unsupported bit is set, or a field holds a value we reject:
    /// INVALID FIELD IN CDB, with this byte and bit as the field pointer (for a multi-bit
    /// field, its most-significant bit, SPC-4).
    #[error("invalid field in CDB byte {byte}, bit {bit}")]
    InvalidField {
        /// The CDB byte in error.
        byte: u8,
        /// The bit in error, 0..=7.
        bit: u8,
    },
    /// A field of the command does not fit its CDB field (emit).
    #[error("{field} = {value:#x} does not fit the CDB")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// The output buffer is smaller than the CDB (emit).
    #[error("output buffer is {have} bytes, the CDB needs {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

impl CdbError {
    /// The sense data a device server returns with CHECK CONDITION for a parse error; `None`
    /// for the emit errors ([`CdbError::OutOfRange`], [`CdbError::BufferTooSmall`]), which are
    /// the caller's bug, not the initiator's.
    ///
    /// [`CdbError::Truncated`] has no SPC code of its own; we answer INVALID FIELD
    /// IN CDB, without a field pointer since no byte of the CDB is wrong. (Over SRP it only
    /// arises from a bad ADDITIONAL CDB LENGTH: SRP_CMD always carries 16 CDB bytes.)
    pub fn sense(&self) -> Option<Sense> {
        match *self {
            CdbError::InvalidOpcode(_) => {
                Some(Sense::new(SenseCode::INVALID_COMMAND_OPERATION_CODE))
            }
            CdbError::InvalidField { byte, bit } => {
                Some(Sense::invalid_field_in_cdb(byte.into(), Some(bit)))
            }
            CdbError::Truncated { .. } => Some(Sense::new(SenseCode::INVALID_FIELD_IN_CDB)),
            CdbError::OutOfRange { .. } | CdbError::BufferTooSmall { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sense::{FieldPointer, SenseKeySpecific};

    #[test]
    fn parse_errors_map_to_spc_sense() {
        let s = CdbError::InvalidOpcode(0xff).sense().expect("sense");
        assert_eq!(s.code(), SenseCode::INVALID_COMMAND_OPERATION_CODE);
        assert_eq!(s.sense_key_specific(), None);
        let s = CdbError::InvalidField { byte: 9, bit: 2 }
            .sense()
            .expect("sense");
        assert_eq!(s.code(), SenseCode::INVALID_FIELD_IN_CDB);
        assert_eq!(
            s.sense_key_specific(),
            Some(SenseKeySpecific::FieldPointer(FieldPointer {
                in_cdb: true,
                bit: Some(2),
                byte: 9
            }))
        );
        let s = CdbError::Truncated { need: 10, have: 6 }
            .sense()
            .expect("sense");
        assert_eq!(s.code(), SenseCode::INVALID_FIELD_IN_CDB);
        assert_eq!(CdbError::BufferTooSmall { need: 10, have: 6 }.sense(), None);
    }
}
