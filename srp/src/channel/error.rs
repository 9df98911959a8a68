//! The one error enum of the channel logic: every way a peer's request can be refused.

use crate::wire::Tag;
use thiserror::Error;

/// Why the channel refused a request. Each is the peer's fault (or a limit it ignored), so
/// the right answer is a reject or an error response for that request or channel only.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ChannelError {
    /// A request arrived while the peer held no credit (SRP r16a 5.4: the target may log the
    /// channel out).
    #[error("credit overrun: request received with no credit outstanding (window {window})")]
    CreditOverrun {
        /// The request limit granted at login.
        window: u32,
    },
    /// A response was built for a request that was never counted.
    #[error("response without an outstanding request (credit accounting is off by one)")]
    NoOutstandingRequest,
    /// A new request reused the tag of one still in progress (SAM: overlapped commands).
    #[error("tag {0} is already in use by an outstanding request")]
    DuplicateTag(Tag),
    /// More requests in progress than the table was sized for.
    #[error("more than {capacity} outstanding requests")]
    TooManyOutstanding {
        /// The table's capacity.
        capacity: usize,
    },
    /// A descriptor format the login did not negotiate.
    #[error("{direction} uses {format} descriptors, which were not negotiated at login")]
    FormatNotNegotiated {
        /// "data-out" or "data-in".
        direction: &'static str,
        /// "direct", "indirect" or "immediate".
        format: &'static str,
    },
    /// More data than the target accepts in one command.
    #[error("{direction} length {len} exceeds the maximum transfer of {max} bytes")]
    DataTooLong {
        /// "data-out" or "data-in".
        direction: &'static str,
        /// Described length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// An indirect table longer than the target fetches.
    #[error("indirect descriptor table of {entries} entries exceeds the limit of {max}")]
    TableTooLong {
        /// Entries in the table.
        entries: usize,
        /// The limit.
        max: usize,
    },
    /// A fetched external descriptor table that does not match its header.
    #[error("external descriptor table: {0}")]
    BadTable(&'static str),
}
