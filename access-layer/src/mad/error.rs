//! The one error type of the MAD wire layer.

/// Why bytes are not a valid MAD (or part of one), or why one could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MadError {
    /// The bytes end before the message does.
    #[error("{what}: truncated: need {need} bytes, have {have}")]
    Truncated {
        /// The message or header being parsed.
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
        /// The message or header.
        what: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What rule it breaks.
        why: &'static str,
    },
    /// The output buffer is smaller than the message.
    #[error("{what}: output buffer is {have} bytes, the message needs {need}")]
    BufferTooSmall {
        /// The message being emitted.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}
