//! Typed requests and replies, and reading and writing whole messages on a stream.
#[allow(unused_imports)]
use crate::prelude::*;

use super::WireError;
use super::wire::{
    CaEntry, CtlHeader, CtlStatus, ErrorReply, HEADER_LEN, Hello, HelloReply, ListCasReply,
    MAX_BODY, Opcode, OpenCa, PortInfo, QueryPort, REPLY_BIT, Redirect, SERVICE_FIRST,
    SERVICE_LAST, VERSION_MAX, VERSION_MIN,
};
use std::io::{self, Read, Write};
use wirekit::WireRepr;

/// A request to a control socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Version negotiation.
    Hello(Hello),
    /// The CAs of this daemon (generic socket).
    ListCas,
    /// Open a CA (generic socket): answered by a redirect.
    OpenCa(OpenCa),
    /// The CA's attributes (CA socket).
    QueryCa,
    /// A port's attributes (CA socket).
    QueryPort(QueryPort),
    /// A request of the daemon's own service: opcode in
    /// [`SERVICE_FIRST`]..=[`SERVICE_LAST`], body in the service's format.
    Service {
        /// The opcode.
        opcode: u16,
        /// The body, parsed by the service.
        body: Vec<u8>,
    },
}

/// A reply from a control socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// To Hello.
    Hello(HelloReply),
    /// To ListCas.
    ListCas(ListCasReply),
    /// To OpenCa.
    Redirect(Redirect),
    /// To QueryCa.
    QueryCa(CaEntry),
    /// To QueryPort.
    QueryPort(PortInfo),
    /// To a service request: the request's opcode with [`REPLY_BIT`].
    Service {
        /// The reply's opcode.
        opcode: u16,
        /// The body, in the service's format.
        body: Vec<u8>,
    },
    /// Any request failed.
    Error(ErrorReply),
}

/// Emits `repr` into a fresh body buffer.
fn body<'a>(repr: &impl WireRepr<'a, Error = WireError>) -> Result<Vec<u8>, WireError> {
    let mut buf = vec![0; repr.buffer_len()];
    repr.emit(&mut buf)?;
    Ok(buf)
}

impl Request {
    /// Its opcode and body.
    pub fn encode(&self) -> Result<(Opcode, Vec<u8>), WireError> {
        Ok(match self {
            Request::Hello(h) => (Opcode::Hello, body(h)?),
            Request::ListCas => (Opcode::ListCas, Vec::new()),
            Request::OpenCa(o) => (Opcode::OpenCa, body(o)?),
            Request::QueryCa => (Opcode::QueryCa, Vec::new()),
            Request::QueryPort(q) => (Opcode::QueryPort, body(q)?),
            Request::Service { opcode, body } => (service_opcode(*opcode, 0)?, body.clone()),
        })
    }

    /// The request `header` and `body` carry, or the status to answer.
    pub fn decode(header: &CtlHeader, body: &[u8]) -> Result<Request, CtlStatus> {
        if !(VERSION_MIN..=VERSION_MAX).contains(&header.version) {
            return Err(CtlStatus::BadVersion);
        }
        let malformed = |_: WireError| CtlStatus::Malformed;
        let empty = || {
            if body.is_empty() {
                Ok(())
            } else {
                Err(CtlStatus::Malformed)
            }
        };
        Ok(match header.opcode {
            Opcode::Hello => Request::Hello(Hello::parse(body).map_err(malformed)?),
            Opcode::ListCas => empty().map(|()| Request::ListCas)?,
            Opcode::OpenCa => Request::OpenCa(OpenCa::parse(body).map_err(malformed)?),
            Opcode::QueryCa => empty().map(|()| Request::QueryCa)?,
            Opcode::QueryPort => Request::QueryPort(QueryPort::parse(body).map_err(malformed)?),
            Opcode::Unknown(op) if (SERVICE_FIRST..=SERVICE_LAST).contains(&op) => {
                Request::Service {
                    opcode: op,
                    body: body.to_vec(),
                }
            }
            _ => return Err(CtlStatus::UnknownOpcode),
        })
    }
}

impl Reply {
    /// Its opcode and body.
    pub fn encode(&self) -> Result<(Opcode, Vec<u8>), WireError> {
        Ok(match self {
            Reply::Hello(h) => (Opcode::HelloReply, body(h)?),
            Reply::ListCas(l) => (Opcode::ListCasReply, body(l)?),
            Reply::Redirect(r) => (Opcode::Redirect, body(r)?),
            Reply::QueryCa(c) => (Opcode::QueryCaReply, body(c)?),
            Reply::QueryPort(p) => (Opcode::QueryPortReply, body(p)?),
            Reply::Error(e) => (Opcode::Error, body(e)?),
            Reply::Service { opcode, body } => (service_opcode(*opcode, REPLY_BIT)?, body.clone()),
        })
    }

    /// The reply `header` and `body` carry.
    pub fn decode(header: &CtlHeader, body: &[u8]) -> Result<Reply, WireError> {
        Ok(match header.opcode {
            Opcode::HelloReply => Reply::Hello(HelloReply::parse(body)?),
            Opcode::ListCasReply => Reply::ListCas(ListCasReply::parse(body)?),
            Opcode::Redirect => Reply::Redirect(Redirect::parse(body)?),
            Opcode::QueryCaReply => Reply::QueryCa(CaEntry::parse(body)?),
            Opcode::QueryPortReply => Reply::QueryPort(PortInfo::parse(body)?),
            Opcode::Error => Reply::Error(ErrorReply::parse(body)?),
            Opcode::Unknown(op)
                if op & REPLY_BIT != 0
                    && (SERVICE_FIRST..=SERVICE_LAST).contains(&(op & !REPLY_BIT)) =>
            {
                Reply::Service {
                    opcode: op,
                    body: body.to_vec(),
                }
            }
            other => {
                return Err(WireError::BadField {
                    what: "CtlHeader",
                    field: "opcode",
                    value: u16::from(other).into(),
                    why: "not a reply",
                });
            }
        })
    }
}

/// A service message's opcode on the wire: `opcode` must be a service request's code
/// (with `reply_bit` 0) or reply's code (with it set).
fn service_opcode(opcode: u16, reply_bit: u16) -> Result<Opcode, WireError> {
    if opcode & REPLY_BIT == reply_bit
        && (SERVICE_FIRST..=SERVICE_LAST).contains(&(opcode & !REPLY_BIT))
    {
        Ok(Opcode::from(opcode))
    } else {
        Err(WireError::BadField {
            what: "CtlHeader",
            field: "opcode",
            value: opcode.into(),
            why: "not a service opcode of this direction",
        })
    }
}

/// Writes one message.
pub fn write_message(
    w: &mut impl Write,
    version: u16,
    request_id: u64,
    opcode: Opcode,
    body: &[u8],
) -> io::Result<()> {
    let length = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "body too large"))?;
    let header = CtlHeader {
        version,
        opcode,
        length,
        request_id,
    };
    let mut msg = vec![0; HEADER_LEN + body.len()];
    header
        .emit(&mut msg)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    msg[HEADER_LEN..].copy_from_slice(body);
    w.write_all(&msg)
}

/// Why a message could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The stream ended cleanly between messages.
    Closed,
    /// The stream ended inside a message.
    Truncated,
    /// The header is invalid (bad magic); holds the request id, 0 if unknown.
    BadHeader(u64),
    /// The body is larger than allowed; holds the header.
    TooLarge(CtlHeader),
    /// An I/O error (including a read timeout).
    Io(io::Error),
}

/// Fills `buf`; `Ok(false)` if the stream ended before the first byte. A read timeout is
/// retried unless `give_up()` says otherwise.
fn read_full(
    r: &mut impl Read,
    buf: &mut [u8],
    give_up: &dyn Fn() -> bool,
) -> Result<bool, ReadError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(ReadError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) && !give_up() => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    Ok(true)
}

/// Reads one message whose body is at most [`MAX_BODY`] bytes. On a read timeout, goes on
/// waiting unless `give_up()`.
pub fn read_message(
    r: &mut impl Read,
    give_up: &dyn Fn() -> bool,
) -> Result<(CtlHeader, Vec<u8>), ReadError> {
    let mut head = [0u8; HEADER_LEN];
    if !read_full(r, &mut head, give_up)? {
        return Err(ReadError::Closed);
    }
    let header = CtlHeader::parse(&head).map_err(|_| {
        let id = head.get(16..24).and_then(|b| <[u8; 8]>::try_from(b).ok());
        ReadError::BadHeader(id.map_or(0, u64::from_be_bytes))
    })?;
    if header.length > MAX_BODY {
        return Err(ReadError::TooLarge(header));
    }
    let mut body = vec![0; header.length as usize];
    if !read_full(r, &mut body, give_up)? && !body.is_empty() {
        return Err(ReadError::Truncated);
    }
    Ok((header, body))
}
