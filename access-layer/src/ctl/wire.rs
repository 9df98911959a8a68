//! The control protocol's wire formats: a 24-byte header and fixed-layout bodies, all
//! big-endian, no pointers or `usize` (64-bit clean: a 32-bit srpctl talks to a 64-bit
//! daemon). Strings are NUL-padded fixed arrays.
#[allow(unused_imports)]
use crate::prelude::*;

use super::WireError;
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// "SRPC": the first four bytes of every message.
pub const MAGIC: u32 = 0x5352_5043;
/// The protocol versions this build speaks.
pub const VERSION_MIN: u16 = 1;
/// See [`VERSION_MIN`].
pub const VERSION_MAX: u16 = 1;
/// The largest body a peer accepts, in bytes.
pub const MAX_BODY: u32 = 4096;
/// Requests a daemon's own service defines (e.g. the target's lists and switches) use
/// opcodes from here to [`SERVICE_LAST`]; their replies set bit 15, like every reply.
/// The framing, version negotiation and errors stay this protocol's.
pub const SERVICE_FIRST: u16 = 0x0100;
/// See [`SERVICE_FIRST`].
pub const SERVICE_LAST: u16 = 0x7ffe;
/// Bit 15: a reply.
pub const REPLY_BIT: u16 = 0x8000;

/// At most this many CAs in one [`ListCasReply`] (fits in [`MAX_BODY`]).
pub const MAX_CAS: usize = 64;

/// Reads a fixed-layout `T` from the front of `buf` (for services' own bodies too).
pub fn read_fixed<T: FromBytes + KnownLayout + Immutable>(
    what: &'static str,
    buf: &[u8],
) -> Result<T, WireError> {
    wirekit::read_fixed(buf).map_err(|s| WireError::Truncated {
        what,
        need: s.need,
        have: s.have,
    })
}

/// Writes a fixed-layout `T` to the front of `buf`; returns its length.
pub fn write_fixed<T: IntoBytes + Immutable>(
    what: &'static str,
    t: &T,
    buf: &mut [u8],
) -> Result<usize, WireError> {
    wirekit::write_fixed(t, buf).map_err(|s| WireError::BufferTooSmall {
        what,
        need: s.need,
        have: s.have,
    })
}

/// The text before the first NUL of `bytes` (all of it if none), which must be UTF-8.
pub fn padded_str(
    what: &'static str,
    field: &'static str,
    bytes: &[u8],
) -> Result<String, WireError> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = bytes.get(..end).unwrap_or_default();
    String::from_utf8(text.to_vec()).map_err(|_| WireError::BadField {
        what,
        field,
        value: 0,
        why: "not UTF-8",
    })
}

/// The text before the first NUL of `bytes`, which must hold one (the counterpart of
/// [`pad`]: a field that must leave room for its NUL).
pub fn terminated_str(
    what: &'static str,
    field: &'static str,
    bytes: &[u8],
) -> Result<String, WireError> {
    if !bytes.contains(&0) {
        return Err(WireError::BadField {
            what,
            field,
            value: bytes.len() as u64,
            why: "no NUL terminator",
        });
    }
    padded_str(what, field, bytes)
}

/// `s` NUL-padded to `N` bytes; it may fill the field (read back by [`padded_str`]).
pub fn pad_filled<const N: usize>(
    what: &'static str,
    field: &'static str,
    s: &str,
) -> Result<[u8; N], WireError> {
    padded(what, field, s, N)
}

/// `s` NUL-padded to `N` bytes; it must leave room for one NUL.
pub fn pad<const N: usize>(
    what: &'static str,
    field: &'static str,
    s: &str,
) -> Result<[u8; N], WireError> {
    padded(what, field, s, N.saturating_sub(1))
}

/// `s` NUL-padded to `N` bytes when it is at most `max` bytes and holds no NUL.
fn padded<const N: usize>(
    what: &'static str,
    field: &'static str,
    s: &str,
    max: usize,
) -> Result<[u8; N], WireError> {
    if s.len() > max || s.as_bytes().contains(&0) {
        return Err(WireError::BadField {
            what,
            field,
            value: s.len() as u64,
            why: "too long or contains NUL",
        });
    }
    let mut out = [0u8; N];
    out[..s.len()].copy_from_slice(s.as_bytes());
    Ok(out)
}

wirekit::open_enum! {
    /// What a message is. Replies are the request's code with bit 15 set.
    pub enum Opcode(u16) {
        /// Version negotiation.
        Hello = 0x0001,
        /// List the CAs this daemon serves (generic socket).
        ListCas = 0x0002,
        /// Open a CA: answered by a [`Redirect`] to the CA's socket (generic socket).
        OpenCa = 0x0003,
        /// The CA's attributes (CA socket).
        QueryCa = 0x0004,
        /// One port's attributes (CA socket).
        QueryPort = 0x0005,
        /// Reply to Hello.
        HelloReply = 0x8001,
        /// Reply to ListCas.
        ListCasReply = 0x8002,
        /// Reply to OpenCa.
        Redirect = 0x8003,
        /// Reply to QueryCa.
        QueryCaReply = 0x8004,
        /// Reply to QueryPort.
        QueryPortReply = 0x8005,
        /// A request failed.
        Error = 0xffff,
    }
}

wirekit::open_enum! {
    /// Why a request failed ([`ErrorReply::status`]).
    pub enum CtlStatus(u32) {
        /// The magic is not "SRPC".
        BadMagic = 1,
        /// The version is not one the server speaks.
        BadVersion = 2,
        /// The opcode is unknown, or not a request.
        UnknownOpcode = 3,
        /// The body does not parse, or the message ended early.
        Malformed = 4,
        /// The body is larger than [`MAX_BODY`]; the connection closes.
        TooLarge = 5,
        /// No CA has that GUID.
        NoSuchCa = 6,
        /// No port has that number.
        NoSuchPort = 7,
        /// The request is for the other kind of socket (generic vs. CA).
        WrongSocket = 8,
        /// The daemon could not answer (e.g. the CA did not respond).
        Internal = 9,
        /// The request names an object the daemon does not have (a service's IOC, port).
        NotFound = 10,
        /// The connecting process is not allowed to use this socket (its peer credentials:
        /// not root, not the daemon's user, not in the configured group); the connection
        /// closes.
        PermissionDenied = 11,
        /// The socket serves as many connections as it allows; the connection closes.
        Busy = 12,
    }
}

/// The header as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CtlHeaderRaw {
    /// [`MAGIC`].
    pub magic: U32,
    /// Protocol version.
    pub version: U16,
    /// [`Opcode`].
    pub opcode: U16,
    /// Body length in bytes.
    pub length: U32,
    /// Reserved, zero: keeps `request_id` 8-byte aligned.
    pub reserved: [u8; 4],
    /// Chosen by the client, echoed in the reply.
    pub request_id: U64,
}
const _: () = assert!(size_of::<CtlHeaderRaw>() == 24);

/// The header's size in bytes.
pub const HEADER_LEN: usize = size_of::<CtlHeaderRaw>();

/// Every message's header. Parsing checks only the magic: version and opcode are the
/// server's to judge, so it can answer them with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtlHeader {
    /// Protocol version.
    pub version: u16,
    /// What the message is.
    pub opcode: Opcode,
    /// Body length in bytes.
    pub length: u32,
    /// Matches a reply to its request.
    pub request_id: u64,
}

impl<'a> WireRepr<'a> for CtlHeader {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: CtlHeaderRaw = read_fixed("CtlHeader", buf)?;
        if h.magic.get() != MAGIC {
            return Err(WireError::BadField {
                what: "CtlHeader",
                field: "magic",
                value: h.magic.get().into(),
                why: "not SRPC",
            });
        }
        Ok(CtlHeader {
            version: h.version.get(),
            opcode: h.opcode.get().into(),
            length: h.length.get(),
            request_id: h.request_id.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = CtlHeaderRaw {
            magic: U32::new(MAGIC),
            version: U16::new(self.version),
            opcode: U16::new(self.opcode.into()),
            length: U32::new(self.length),
            reserved: [0; 4],
            request_id: U64::new(self.request_id),
        };
        write_fixed("CtlHeader", &h, buf)
    }
}

/// Declares a fixed-size body: its raw struct, size assertion and `WireRepr` through
/// `from_raw`/`to_raw`.
macro_rules! fixed_body {
    ($repr:ident, $raw:ident, $len:expr) => {
        const _: () = assert!(size_of::<$raw>() == $len);
        impl<'a> WireRepr<'a> for $repr {
            type Error = WireError;
            fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
                $repr::from_raw(read_fixed(stringify!($repr), buf)?)
            }
            fn buffer_len(&self) -> usize {
                $len
            }
            fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
                write_fixed(stringify!($repr), &self.to_raw()?, buf)
            }
        }
    };
}

/// Hello as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct HelloRaw {
    /// Oldest version the client speaks.
    pub min_version: U16,
    /// Newest version the client speaks.
    pub max_version: U16,
    /// Reserved, zero.
    pub reserved: [u8; 4],
}

/// Hello: the client's version range. The server answers the newest common version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Oldest version the client speaks.
    pub min_version: u16,
    /// Newest version the client speaks.
    pub max_version: u16,
}

impl Hello {
    fn from_raw(r: HelloRaw) -> Result<Self, WireError> {
        Ok(Hello {
            min_version: r.min_version.get(),
            max_version: r.max_version.get(),
        })
    }
    fn to_raw(self) -> Result<HelloRaw, WireError> {
        Ok(HelloRaw {
            min_version: U16::new(self.min_version),
            max_version: U16::new(self.max_version),
            reserved: [0; 4],
        })
    }
}
fixed_body!(Hello, HelloRaw, 8);

/// HelloReply as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct HelloReplyRaw {
    /// The version both use from now on.
    pub version: U16,
    /// Reserved, zero.
    pub reserved: [u8; 2],
    /// The largest body the server accepts.
    pub max_body: U32,
}

/// HelloReply: the chosen version and the server's size limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloReply {
    /// The version both use from now on.
    pub version: u16,
    /// The largest body the server accepts, in bytes.
    pub max_body: u32,
}

impl HelloReply {
    fn from_raw(r: HelloReplyRaw) -> Result<Self, WireError> {
        Ok(HelloReply {
            version: r.version.get(),
            max_body: r.max_body.get(),
        })
    }
    fn to_raw(self) -> Result<HelloReplyRaw, WireError> {
        Ok(HelloReplyRaw {
            version: U16::new(self.version),
            reserved: [0; 2],
            max_body: U32::new(self.max_body),
        })
    }
}
fixed_body!(HelloReply, HelloReplyRaw, 8);

/// A CA entry as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CaEntryRaw {
    /// Node GUID.
    pub guid: U64,
    /// Number of ports.
    pub ports: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
    /// Name, NUL-padded UTF-8.
    pub name: [u8; 32],
}

/// One CA: a [`ListCasReply`] entry and the QueryCa reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaEntry {
    /// Node GUID.
    pub guid: u64,
    /// Number of ports.
    pub ports: u8,
    /// Name, at most 31 bytes of UTF-8.
    pub name: String,
}

impl CaEntry {
    fn from_raw(r: CaEntryRaw) -> Result<Self, WireError> {
        Ok(CaEntry {
            guid: r.guid.get(),
            ports: r.ports,
            name: terminated_str("CaEntry", "name", &r.name)?,
        })
    }
    fn to_raw(&self) -> Result<CaEntryRaw, WireError> {
        Ok(CaEntryRaw {
            guid: U64::new(self.guid),
            ports: self.ports,
            reserved: [0; 7],
            name: pad("CaEntry", "name", &self.name)?,
        })
    }
}
fixed_body!(CaEntry, CaEntryRaw, 48);

/// ListCasReply: a count (u32), 4 reserved bytes, then that many 48-byte [`CaEntry`]s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListCasReply {
    /// The CAs, at most [`MAX_CAS`].
    pub cas: Vec<CaEntry>,
}

impl<'a> WireRepr<'a> for ListCasReply {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let count: U32 = read_fixed("ListCasReply", buf)?;
        let count = count.get();
        if count as usize > MAX_CAS {
            return Err(WireError::BadField {
                what: "ListCasReply",
                field: "count",
                value: count.into(),
                why: "more than MAX_CAS",
            });
        }
        let need = 8 + count as usize * size_of::<CaEntryRaw>();
        let entries = buf.get(8..need).ok_or(WireError::Truncated {
            what: "ListCasReply",
            need,
            have: buf.len(),
        })?;
        let cas = entries
            .chunks_exact(size_of::<CaEntryRaw>())
            .map(CaEntry::parse)
            .collect::<Result<_, _>>()?;
        Ok(ListCasReply { cas })
    }

    fn buffer_len(&self) -> usize {
        8 + self.cas.len() * size_of::<CaEntryRaw>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let too_many = WireError::BadField {
            what: "ListCasReply",
            field: "count",
            value: self.cas.len() as u64,
            why: "more than MAX_CAS",
        };
        if self.cas.len() > MAX_CAS {
            return Err(too_many);
        }
        let (need, have) = (self.buffer_len(), buf.len());
        let out = buf.get_mut(..need).ok_or(WireError::BufferTooSmall {
            what: "ListCasReply",
            need,
            have,
        })?;
        let (head, mut rest) = out.split_at_mut(8);
        head.copy_from_slice(&[&(self.cas.len() as u32).to_be_bytes()[..], &[0; 4]].concat());
        for ca in &self.cas {
            let n = ca.emit(rest)?;
            rest = &mut rest[n..];
        }
        Ok(need)
    }
}

/// OpenCa as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct OpenCaRaw {
    /// The CA's node GUID.
    pub guid: U64,
}

/// OpenCa: which CA the client wants; answered by a [`Redirect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenCa {
    /// The CA's node GUID.
    pub guid: u64,
}

impl OpenCa {
    fn from_raw(r: OpenCaRaw) -> Result<Self, WireError> {
        Ok(OpenCa { guid: r.guid.get() })
    }
    fn to_raw(self) -> Result<OpenCaRaw, WireError> {
        Ok(OpenCaRaw {
            guid: U64::new(self.guid),
        })
    }
}
fixed_body!(OpenCa, OpenCaRaw, 8);

/// Redirect as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RedirectRaw {
    /// The CA socket's path, NUL-padded (108 = `sun_path`).
    pub path: [u8; 108],
    /// Reserved, zero.
    pub reserved: [u8; 4],
}

/// Redirect: "talk to the CA's socket at `path`".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The CA socket's path, at most 107 bytes.
    pub path: String,
}

impl Redirect {
    fn from_raw(r: RedirectRaw) -> Result<Self, WireError> {
        Ok(Redirect {
            path: terminated_str("Redirect", "path", &r.path)?,
        })
    }
    fn to_raw(&self) -> Result<RedirectRaw, WireError> {
        Ok(RedirectRaw {
            path: pad("Redirect", "path", &self.path)?,
            reserved: [0; 4],
        })
    }
}
fixed_body!(Redirect, RedirectRaw, 112);

/// QueryPort as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct QueryPortRaw {
    /// Port number, 1-based.
    pub port: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
}

/// QueryPort: one port's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryPort {
    /// Port number, 1-based.
    pub port: u8,
}

impl QueryPort {
    fn from_raw(r: QueryPortRaw) -> Result<Self, WireError> {
        Ok(QueryPort { port: r.port })
    }
    fn to_raw(self) -> Result<QueryPortRaw, WireError> {
        Ok(QueryPortRaw {
            port: self.port,
            reserved: [0; 7],
        })
    }
}
fixed_body!(QueryPort, QueryPortRaw, 8);

/// PortInfo as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PortInfoRaw {
    /// Port number, 1-based.
    pub port: u8,
    /// 1 when active, else 0.
    pub active: u8,
    /// Reserved, zero.
    pub reserved: [u8; 6],
    /// The port's GID.
    pub gid: [u8; 16],
}

/// PortInfo: the QueryPort reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number, 1-based.
    pub port: u8,
    /// Whether the port is active.
    pub active: bool,
    /// The port's GID, raw.
    pub gid: [u8; 16],
}

impl PortInfo {
    fn from_raw(r: PortInfoRaw) -> Result<Self, WireError> {
        if r.active > 1 {
            return Err(WireError::BadField {
                what: "PortInfo",
                field: "active",
                value: r.active.into(),
                why: "not 0 or 1",
            });
        }
        Ok(PortInfo {
            port: r.port,
            active: r.active == 1,
            gid: r.gid,
        })
    }
    fn to_raw(self) -> Result<PortInfoRaw, WireError> {
        Ok(PortInfoRaw {
            port: self.port,
            active: self.active.into(),
            reserved: [0; 6],
            gid: self.gid,
        })
    }
}
fixed_body!(PortInfo, PortInfoRaw, 24);

/// ErrorReply as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ErrorReplyRaw {
    /// [`CtlStatus`].
    pub status: U32,
    /// Oldest version the server speaks.
    pub min_version: U16,
    /// Newest version the server speaks.
    pub max_version: U16,
}

/// ErrorReply: why a request failed, and the server's versions (for `BadVersion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorReply {
    /// Why.
    pub status: CtlStatus,
    /// Oldest version the server speaks.
    pub min_version: u16,
    /// Newest version the server speaks.
    pub max_version: u16,
}

impl ErrorReply {
    /// An error from this build's server.
    pub fn new(status: CtlStatus) -> ErrorReply {
        ErrorReply {
            status,
            min_version: VERSION_MIN,
            max_version: VERSION_MAX,
        }
    }
    fn from_raw(r: ErrorReplyRaw) -> Result<Self, WireError> {
        Ok(ErrorReply {
            status: r.status.get().into(),
            min_version: r.min_version.get(),
            max_version: r.max_version.get(),
        })
    }
    fn to_raw(self) -> Result<ErrorReplyRaw, WireError> {
        Ok(ErrorReplyRaw {
            status: U32::new(self.status.into()),
            min_version: U16::new(self.min_version),
            max_version: U16::new(self.max_version),
        })
    }
}
fixed_body!(ErrorReply, ErrorReplyRaw, 8);

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
