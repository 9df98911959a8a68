//! The local control socket of a daemon: the IOCTL path (ARCHITECTURE §3 item 10; the
//! seed's "open the generic device, get redirected to the CA's").
//!
//! Contract:
//! - Messages are a 24-byte [`wire::CtlHeader`] (magic "SRPC", version, opcode, body length,
//!   request id) and a body: fixed-layout big-endian for the protocol's own messages
//!   ([`wire`]; nothing on the wire depends on the word size), JSON for a daemon's service
//!   messages ([`json`]: the target's and the host's alike, one format, paged lists). Unix
//!   stream sockets carry them, one reply per request, in order.
//! - A daemon runs one **generic** socket ([`CaDirectory`]: Hello, ListCas, OpenCa) and a
//!   socket per CA ([`CaSocket`]: Hello, QueryCa, QueryPort). OpenCa on the generic socket
//!   answers a [`wire::Redirect`] to the CA's socket; [`CtlClient::open_ca`] follows it.
//! - The [`CtlServer`] answers every bad request with a [`wire::ErrorReply`] naming why (bad
//!   magic or version, unknown opcode, malformed or truncated body, too large) and keeps
//!   serving. After a framing error (bad magic, oversized, truncated) it closes that
//!   connection, since the stream cannot be resynchronised; other connections go on.
//! - [`CtlClient`] blocks: it is for srpctl and tests, never for dispatch contexts.
//! - Access ([`CtlAccess`]): the socket file has its final mode from the moment it can be
//!   reached (0600; 0660 and group-owned with a group), peer credentials are checked on
//!   every connection (root, the daemon's user, the group's members), and connections are
//!   bounded; a refused one gets an error reply (PermissionDenied, Busy) and is closed.
//!
//! Modules: [`wire`] (formats), [`json`] (service bodies), [`frame`] (typed requests and replies, framing on a
//! stream), [`server`] and [`client`].

// The formats ([`wire`], [`frame`]) are portable; the server and the client are Unix stream
// sockets with `SO_PEERCRED` and `/proc/self/fd` paths, so Linux only. A Windows build's IOCTL
// path is the driver's device object, not this socket.
#[cfg(target_os = "linux")]
pub mod client;
pub mod frame;
pub mod json;
#[cfg(target_os = "linux")]
pub mod server;
pub mod wire;

#[cfg(target_os = "linux")]
pub use client::{CtlClient, CtlError, refusal_or};
pub use frame::{Reply, Request};
#[cfg(target_os = "linux")]
pub use server::{
    Answer, CaDirectory, CaSocket, CtlAccess, CtlServer, CtlServerStats, CtlService,
    DirectoryEntry, answer,
};

/// Why bytes are not a valid control message, or why one could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The bytes end before the message does.
    #[error("{what}: truncated: need {need} bytes, have {have}")]
    Truncated {
        /// The message being parsed.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A field holds a value the format does not allow.
    #[error("{what}: {field} = {value:#x} is invalid: {why}")]
    BadField {
        /// The message.
        what: &'static str,
        /// The field.
        field: &'static str,
        /// Its value (or length, for strings).
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
