//! The one error type of the SRP wire layer.

/// Why bytes are not a valid SRP IU, or why an IU could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The bytes end before the IU does (its fixed part or what its length fields describe).
    #[error("{iu}: truncated: need {need} bytes, have {have}")]
    Truncated {
        /// The IU being parsed.
        iu: &'static str,
        /// Bytes the IU needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The IU type byte names a different IU.
    #[error("{iu}: IU type byte is {got:#04x}, expected {expected:#04x}")]
    WrongType {
        /// The IU being parsed.
        iu: &'static str,
        /// The code this IU has.
        expected: u8,
        /// The code found.
        got: u8,
    },
    /// A field holds a value the format does not allow.
    #[error("{iu}: {field} = {value:#x} is invalid: {why}")]
    BadField {
        /// The IU being parsed or emitted.
        iu: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What rule it breaks.
        why: &'static str,
    },
    /// The output buffer is smaller than the IU.
    #[error("{iu}: output buffer is {have} bytes, the IU needs {need}")]
    BufferTooSmall {
        /// The IU being emitted.
        iu: &'static str,
        /// Bytes the IU needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Copies the fixed part `T` from the start of `buf`.
pub(crate) fn read_fixed<T: FromBytes + KnownLayout + Immutable>(
    iu: &'static str,
    buf: &[u8],
) -> Result<T, WireError> {
    wirekit::read_fixed(buf).map_err(|s| WireError::Truncated {
        iu,
        need: s.need,
        have: s.have,
    })
}

/// Checks the IU type byte.
pub(crate) fn expect_type(iu: &'static str, expected: u8, got: u8) -> Result<(), WireError> {
    if got == expected {
        Ok(())
    } else {
        Err(WireError::WrongType { iu, expected, got })
    }
}

/// The first `need` bytes of `buf`, or `BufferTooSmall`.
pub(crate) fn out_buf<'b>(
    iu: &'static str,
    buf: &'b mut [u8],
    need: usize,
) -> Result<&'b mut [u8], WireError> {
    let have = buf.len();
    buf.get_mut(..need)
        .ok_or(WireError::BufferTooSmall { iu, need, have })
}

/// Writes the fixed part `T` at the start of `buf` (which the caller has sized).
pub(crate) fn write_fixed<T: IntoBytes + Immutable>(
    iu: &'static str,
    fixed: &T,
    buf: &mut [u8],
) -> Result<usize, WireError> {
    wirekit::write_fixed(fixed, buf).map_err(|s| WireError::BufferTooSmall {
        iu,
        need: s.need,
        have: s.have,
    })
}
