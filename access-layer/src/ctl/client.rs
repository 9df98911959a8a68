//! [`CtlClient`]: the blocking client of a control socket (srpctl, tests). Never for
//! dispatch contexts: every call waits for the daemon.
#[allow(unused_imports)]
use crate::prelude::*;

use super::WireError;
use super::frame::{ReadError, Reply, Request, read_message, write_message};
use super::wire::{
    CaEntry, CtlStatus, ErrorReply, Hello, OpenCa, PortInfo, QueryPort, VERSION_MAX, VERSION_MIN,
};
use std::io;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a client waits for a reply unless told otherwise ([`CtlClient::call_within`]).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a wait for a reply looks at its deadline.
const POLL: Duration = Duration::from_millis(200);

/// Why a control request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CtlError {
    /// The socket failed (connect, read, write, timeout).
    #[error("control socket: {0}")]
    Io(#[from] io::Error),
    /// The daemon's reply did not parse.
    #[error("control reply: {0}")]
    Wire(#[from] WireError),
    /// The daemon closed the connection before replying.
    #[error("the daemon closed the connection")]
    Closed,
    /// The daemon refused the request.
    #[error("the daemon refused the request: {:?}", .0.status)]
    Refused(ErrorReply),
    /// The reply is not one the request can have.
    #[error("unexpected reply {0:?}")]
    Unexpected(Box<Reply>),
    /// A service reply's JSON body did not parse, or answers another request.
    #[error("bad reply from the daemon: {0}")]
    BadJson(String),
}

/// A connection to a control socket, after version negotiation.
#[derive(Debug)]
pub struct CtlClient {
    stream: UnixStream,
    version: u16,
    next_id: u64,
}

impl CtlClient {
    /// Connects to the socket at `path` and negotiates the version.
    pub fn connect(path: impl AsRef<Path>) -> Result<CtlClient, CtlError> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(POLL))?;
        stream.set_write_timeout(Some(REPLY_TIMEOUT))?;
        let mut c = CtlClient {
            stream,
            version: VERSION_MIN,
            next_id: 1,
        };
        let hello = Request::Hello(Hello {
            min_version: VERSION_MIN,
            max_version: VERSION_MAX,
        });
        match c.call(&hello)? {
            Reply::Hello(h) => c.version = h.version,
            other => return Err(CtlError::Unexpected(Box::new(other))),
        }
        Ok(c)
    }

    /// The negotiated version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Sends `req`, returns the reply (an error reply becomes [`CtlError::Refused`]);
    /// waits up to [`REPLY_TIMEOUT`].
    pub fn call(&mut self, req: &Request) -> Result<Reply, CtlError> {
        self.call_within(req, REPLY_TIMEOUT)
    }

    /// [`CtlClient::call`], waiting up to `wait` for the reply (a login a daemon carries
    /// out may take longer than a list).
    pub fn call_within(&mut self, req: &Request, wait: Duration) -> Result<Reply, CtlError> {
        let id = self.next_id;
        self.next_id += 1;
        let (op, body) = req.encode()?;
        if let Err(e) = write_message(&mut self.stream, self.version, id, op, &body) {
            return Err(refusal_or(&mut self.stream, e));
        }
        let deadline = Instant::now() + wait;
        let give_up = || Instant::now() >= deadline;
        let (h, body) = read_message(&mut self.stream, &give_up).map_err(|e| match e {
            ReadError::Io(e) => CtlError::Io(e),
            ReadError::Closed | ReadError::Truncated => CtlError::Closed,
            ReadError::BadHeader(_) | ReadError::TooLarge(_) => CtlError::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad reply header",
            )),
        })?;
        match Reply::decode(&h, &body)? {
            Reply::Error(e) => Err(CtlError::Refused(e)),
            _ if h.request_id != id => Err(CtlError::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply to another request",
            ))),
            reply => Ok(reply),
        }
    }

    /// Sends a request of the daemon's own service (`opcode` in
    /// [`SERVICE_FIRST`](super::wire::SERVICE_FIRST)..=[`SERVICE_LAST`](super::wire::SERVICE_LAST))
    /// and returns the reply's body, which must carry the matching reply opcode.
    pub fn call_service(&mut self, opcode: u16, body: Vec<u8>) -> Result<Vec<u8>, CtlError> {
        self.call_service_within(opcode, body, REPLY_TIMEOUT)
    }

    /// [`CtlClient::call_service`], waiting up to `wait`.
    pub fn call_service_within(
        &mut self,
        opcode: u16,
        body: Vec<u8>,
        wait: Duration,
    ) -> Result<Vec<u8>, CtlError> {
        match self.call_within(&Request::Service { opcode, body }, wait)? {
            Reply::Service { opcode: op, body } if op == opcode | super::wire::REPLY_BIT => {
                Ok(body)
            }
            other => Err(CtlError::Unexpected(Box::new(other))),
        }
    }

    /// A service request whose body is the JSON of `body` ([`super::json`]); the reply's
    /// `Result<A, E>`: the daemon's answer or its refusal. Waits up to `wait`.
    pub fn call_json<B, A, E>(
        &mut self,
        opcode: u16,
        body: &B,
        wait: Duration,
    ) -> Result<Result<A, E>, CtlError>
    where
        B: serde::Serialize,
        A: serde::de::DeserializeOwned,
        E: serde::de::DeserializeOwned,
    {
        let body = super::json::to_json(body);
        let reply = self.call_service_within(opcode, body, wait)?;
        super::json::parse_reply(&reply).map_err(|e| CtlError::BadJson(e.to_string()))
    }

    /// Every entry of a JSON list service ([`super::json::ListPage`]), page by page until
    /// an empty page; `entries` takes the list out of an answer (or gives the answer back,
    /// when it is one to another request). The first refusal ends it.
    pub fn list_json<T, A, E>(
        &mut self,
        opcode: u16,
        entries: impl Fn(A) -> Result<Vec<T>, A>,
    ) -> Result<Result<Vec<T>, E>, CtlError>
    where
        A: serde::de::DeserializeOwned,
        E: serde::de::DeserializeOwned,
    {
        let mut all = Vec::new();
        loop {
            let start = u32::try_from(all.len())
                .map_err(|_| CtlError::BadJson("a list longer than 2^32 entries".into()))?;
            let page = super::json::ListPage { start };
            let answer = match self.call_json::<_, A, E>(opcode, &page, REPLY_TIMEOUT)? {
                Ok(a) => a,
                Err(e) => return Ok(Err(e)),
            };
            let page = entries(answer)
                .map_err(|_| CtlError::BadJson("an answer to another request".into()))?;
            if page.is_empty() {
                return Ok(Ok(all));
            }
            all.extend(page);
        }
    }

    /// The CAs the daemon serves (generic socket).
    pub fn list_cas(&mut self) -> Result<Vec<CaEntry>, CtlError> {
        match self.call(&Request::ListCas)? {
            Reply::ListCas(l) => Ok(l.cas),
            other => Err(CtlError::Unexpected(Box::new(other))),
        }
    }

    /// Opens CA `guid` (generic socket): follows the redirect and returns a client of the
    /// CA's socket.
    pub fn open_ca(&mut self, guid: u64) -> Result<CtlClient, CtlError> {
        match self.call(&Request::OpenCa(OpenCa { guid }))? {
            Reply::Redirect(r) => CtlClient::connect(r.path),
            other => Err(CtlError::Unexpected(Box::new(other))),
        }
    }

    /// The CA's attributes (CA socket).
    pub fn query_ca(&mut self) -> Result<CaEntry, CtlError> {
        match self.call(&Request::QueryCa)? {
            Reply::QueryCa(c) => Ok(c),
            other => Err(CtlError::Unexpected(Box::new(other))),
        }
    }

    /// Port `port`'s attributes (CA socket).
    pub fn query_port(&mut self, port: u8) -> Result<PortInfo, CtlError> {
        match self.call(&Request::QueryPort(QueryPort { port }))? {
            Reply::QueryPort(p) => Ok(p),
            other => Err(CtlError::Unexpected(Box::new(other))),
        }
    }
}

/// After a request could not be written: a server that refused the connection (peer
/// credentials, too many connections) answered with an error reply and closed it — that
/// refusal, if it is there to read, so the caller learns why rather than "broken pipe";
/// else the write's own error.
pub fn refusal_or(stream: &mut UnixStream, write_error: io::Error) -> CtlError {
    match read_message(stream, &|| true) {
        Ok((h, body)) => match Reply::decode(&h, &body) {
            Ok(Reply::Error(r)) => CtlError::Refused(r),
            _ => CtlError::Io(write_error),
        },
        Err(_) => CtlError::Io(write_error),
    }
}

impl CtlError {
    /// The daemon's status, when it refused the request.
    pub fn status(&self) -> Option<CtlStatus> {
        match self {
            CtlError::Refused(e) => Some(e.status),
            _ => None,
        }
    }
}
