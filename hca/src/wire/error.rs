//! The one error type of the RoCEv2 wire layer, and the copy helpers every header uses.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Why bytes are not a valid RoCEv2 packet (or header), or why one could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The bytes end before the header or packet does.
    #[error("{what}: truncated: need {need} bytes, have {have}")]
    Truncated {
        /// The header or packet being parsed.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A field holds a value the format does not allow (on parse), or a value given to emit
    /// does not fit its field.
    #[error("{what}: {field} = {value:#x} is invalid: {why}")]
    BadField {
        /// The header or packet.
        what: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What rule it breaks.
        why: &'static str,
    },
    /// The BTH opcode is reserved or one this HCA does not implement (RD, XRC, FLUSH, …).
    #[error("BTH: opcode {0:#04x} is reserved or unsupported")]
    UnknownOpcode(u8),
    /// An extension header is present that the opcode does not carry, or missing where the
    /// opcode requires it.
    #[error("opcode {opcode:#04x} {} {header}", if *.required { "requires" } else { "does not carry" })]
    HeaderMismatch {
        /// The BTH opcode.
        opcode: u8,
        /// The extension header (`"RETH"`, `"AETH"`, …).
        header: &'static str,
        /// Whether the opcode requires it (it was missing) or forbids it (it was present).
        required: bool,
    },
    /// An opcode that carries no payload (READ request, ACK, atomics) has payload bytes.
    #[error("opcode {opcode:#04x} carries no payload, found {len} bytes")]
    UnexpectedPayload {
        /// The BTH opcode.
        opcode: u8,
        /// Payload bytes found (or given to emit).
        len: usize,
    },
    /// The ICRC does not match the packet and its IP/UDP context.
    #[error("ICRC mismatch: packet carries {got:#010x}, computed {expected:#010x}")]
    BadIcrc {
        /// The ICRC computed over the packet.
        expected: u32,
        /// The ICRC the packet carries (as read little-endian, the way it is computed).
        got: u32,
    },
    /// The output buffer is smaller than the header or packet.
    #[error("{what}: output buffer is {have} bytes, need {need}")]
    BufferTooSmall {
        /// The header or packet being emitted.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

/// Copies the fixed part `T` from the start of `buf`.
pub(crate) fn read_fixed<T: FromBytes + KnownLayout + Immutable>(
    what: &'static str,
    buf: &[u8],
) -> Result<T, WireError> {
    wirekit::read_fixed(buf).map_err(|s| WireError::Truncated {
        what,
        need: s.need,
        have: s.have,
    })
}

/// Writes the fixed part `T` at the start of `buf`; returns its size.
pub(crate) fn write_fixed<T: IntoBytes + Immutable>(
    what: &'static str,
    fixed: &T,
    buf: &mut [u8],
) -> Result<usize, WireError> {
    wirekit::write_fixed(fixed, buf).map_err(|s| WireError::BufferTooSmall {
        what,
        need: s.need,
        have: s.have,
    })
}

/// `value` if it fits in `bits` bits, else a `BadField` error naming it.
pub(crate) fn fit(
    what: &'static str,
    field: &'static str,
    value: u32,
    bits: u32,
) -> Result<u32, WireError> {
    if value.checked_shr(bits).unwrap_or(0) == 0 {
        Ok(value)
    } else {
        Err(WireError::BadField {
            what,
            field,
            value: value.into(),
            why: "too wide for its field",
        })
    }
}
