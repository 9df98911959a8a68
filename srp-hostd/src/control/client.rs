//! [`HostClient`]: srpctl's side of the host daemon's control socket. Blocking; lists are
//! fetched page by page until an empty page.
//!
//! It speaks the access layer's framing ([`access_layer::ctl::frame`]) itself rather than
//! through [`access_layer::ctl::CtlClient`], whose replies must come within 5 s: a login
//! (a Device Management sweep, then a login and a LUN scan per IOC) may take longer, so
//! LOGIN and LOGOUT wait up to [`SLOW_REPLY`], and so does SET_PATH (returning a path to
//! service verifies it first: a TEST UNIT READY bounded by the command timeout).

use super::model::{
    DiskInfo, HostAnswer, HostControlError, HostRequest, LoginSpec, PortalInfo, SessionInfo,
    TargetInfo,
};
use super::wire::{decode_answer, encode_request};
use access_layer::ctl::frame::{ReadError, read_message, write_message};
use access_layer::ctl::wire::{Hello, REPLY_BIT, VERSION_MAX, VERSION_MIN};
use access_layer::ctl::{CtlError, Reply, Request};
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a list (and the connection's version negotiation) may take.
const REPLY: Duration = Duration::from_secs(5);
/// How long a login, a logout or a path switch may take.
pub const SLOW_REPLY: Duration = Duration::from_secs(180);
/// How often a wait looks at its deadline.
const POLL: Duration = Duration::from_millis(200);

/// A connection to a running host daemon's control socket.
#[derive(Debug)]
pub struct HostClient {
    stream: UnixStream,
    version: u16,
    next_id: u64,
}

/// Why a control request failed, in the operator's terms.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be reached (or did not speak the control protocol).
    #[error(
        "cannot reach the host daemon's control socket {} ({error}); is the host daemon \
         running? (srpctl host run -c host.toml)",
        path.display()
    )]
    Connect {
        /// The socket's path.
        path: PathBuf,
        /// What failed.
        error: CtlError,
    },
    /// The socket or the control protocol failed after connecting (including the daemon
    /// refusing a request it cannot parse).
    #[error("{0}")]
    Protocol(#[from] CtlError),
    /// A reply body did not parse, or answers another request.
    #[error("bad reply from the host daemon: {0}")]
    BadReply(String),
    /// The daemon refused or failed the request; its reason.
    #[error("{0}")]
    Refused(HostControlError),
}

impl HostClient {
    /// Connects to the socket at `path` and negotiates the version.
    pub fn connect(path: impl AsRef<Path>) -> Result<HostClient, ClientError> {
        let path = path.as_ref();
        HostClient::open(path).map_err(|error| ClientError::Connect {
            path: path.to_path_buf(),
            error,
        })
    }

    fn open(path: &Path) -> Result<HostClient, CtlError> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(POLL))?;
        stream.set_write_timeout(Some(REPLY))?;
        let mut c = HostClient {
            stream,
            version: VERSION_MIN,
            next_id: 1,
        };
        let hello = Request::Hello(Hello {
            min_version: VERSION_MIN,
            max_version: VERSION_MAX,
        });
        match c.exchange(&hello, REPLY)? {
            Reply::Hello(h) => c.version = h.version,
            other => return Err(CtlError::Unexpected(Box::new(other))),
        }
        Ok(c)
    }

    /// Sends `req` and waits up to `wait` for its reply (an error reply becomes
    /// [`CtlError::Refused`]), as [`access_layer::ctl::CtlClient::call`] does.
    fn exchange(&mut self, req: &Request, wait: Duration) -> Result<Reply, CtlError> {
        let id = self.next_id;
        self.next_id += 1;
        let (op, body) = req.encode()?;
        if let Err(e) = write_message(&mut self.stream, self.version, id, op, &body) {
            return Err(access_layer::ctl::refusal_or(&mut self.stream, e));
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

    /// Sends `request` (for a list, its page from `start`) and returns the daemon's answer.
    fn call(
        &mut self,
        request: &HostRequest,
        start: u32,
        wait: Duration,
    ) -> Result<HostAnswer, ClientError> {
        let (opcode, body) =
            encode_request(request, start).map_err(|e| ClientError::BadReply(e.to_string()))?;
        match self.exchange(&Request::Service { opcode, body }, wait)? {
            Reply::Service { opcode: op, body } if op == opcode | REPLY_BIT => decode_answer(&body)
                .map_err(|e| ClientError::BadReply(e.to_string()))?
                .map_err(ClientError::Refused),
            other => Err(CtlError::Unexpected(Box::new(other)).into()),
        }
    }

    /// Every entry of a list, page by page until an empty page.
    fn list<T>(
        &mut self,
        request: &HostRequest,
        entries: fn(HostAnswer) -> Result<Vec<T>, HostAnswer>,
    ) -> Result<Vec<T>, ClientError> {
        let mut all = Vec::new();
        loop {
            let start = u32::try_from(all.len())
                .map_err(|_| ClientError::BadReply("a list longer than 2^32".into()))?;
            let page = entries(self.call(request, start, REPLY)?).map_err(|a| unexpected(&a))?;
            if page.is_empty() {
                return Ok(all);
            }
            all.extend(page);
        }
    }

    /// Every session.
    pub fn sessions(&mut self) -> Result<Vec<SessionInfo>, ClientError> {
        self.list(&HostRequest::Sessions, |a| match a {
            HostAnswer::Sessions(v) => Ok(v),
            other => Err(other),
        })
    }

    /// Every disk.
    pub fn disks(&mut self) -> Result<Vec<DiskInfo>, ClientError> {
        self.list(&HostRequest::Disks, |a| match a {
            HostAnswer::Disks(v) => Ok(v),
            other => Err(other),
        })
    }

    /// Sweeps a portal and logs in to its IOCs (all, or the one `spec` names); returns the
    /// sessions created. Waits up to [`SLOW_REPLY`].
    pub fn login(&mut self, spec: LoginSpec) -> Result<Vec<SessionInfo>, ClientError> {
        match self.call(&HostRequest::Login(spec), 0, SLOW_REPLY)? {
            HostAnswer::LoggedIn(v) => Ok(v),
            other => Err(unexpected(&other)),
        }
    }

    /// Logs out of session `session`; returns the block files removed with it. Waits up to
    /// [`SLOW_REPLY`].
    pub fn logout(&mut self, session: u32) -> Result<Vec<String>, ClientError> {
        match self.call(&HostRequest::Logout { session }, 0, SLOW_REPLY)? {
            HostAnswer::LoggedOut { disks_removed } => Ok(disks_removed),
            other => Err(unexpected(&other)),
        }
    }

    /// Sets disk `disk`'s (name or identity) load-balance policy to `policy` (a name as
    /// [`DiskInfo::policy`] lists them); returns the disks affected.
    pub fn set_policy(&mut self, disk: &str, policy: &str) -> Result<Vec<String>, ClientError> {
        let request = HostRequest::SetPolicy {
            disk: disk.to_string(),
            policy: policy.to_string(),
        };
        match self.call(&request, 0, REPLY)? {
            HostAnswer::Done { disks } => Ok(disks),
            other => Err(unexpected(&other)),
        }
    }

    /// Takes the path of session `session` (for every disk it carries) out of service
    /// (`enabled == false`: administratively down, in-flight I/O completes) or returns it
    /// after a successful path verify; returns the disks affected. Waits up to
    /// [`SLOW_REPLY`].
    pub fn set_path(&mut self, session: u32, enabled: bool) -> Result<Vec<String>, ClientError> {
        match self.call(&HostRequest::SetPath { session, enabled }, 0, SLOW_REPLY)? {
            HostAnswer::Done { disks } => Ok(disks),
            other => Err(unexpected(&other)),
        }
    }

    /// The persistent logins, in the order they were added.
    pub fn persistent_logins(&mut self) -> Result<Vec<LoginSpec>, ClientError> {
        self.list(&HostRequest::PersistentLogins, |a| match a {
            HostAnswer::Persistent(v) => Ok(v),
            other => Err(other),
        })
    }

    /// The SRP targets the sweeps found.
    pub fn targets(&mut self) -> Result<Vec<TargetInfo>, ClientError> {
        self.list(&HostRequest::Targets, |a| match a {
            HostAnswer::Targets(v) => Ok(v),
            other => Err(other),
        })
    }

    /// The portals: configured, or named by a login.
    pub fn portals(&mut self) -> Result<Vec<PortalInfo>, ClientError> {
        self.list(&HostRequest::Portals, |a| match a {
            HostAnswer::Portals(v) => Ok(v),
            other => Err(other),
        })
    }

    /// Forgets persistent login `index` (its sessions stay until logged out); returns it.
    pub fn forget_persistent(&mut self, index: u32) -> Result<LoginSpec, ClientError> {
        match self.call(&HostRequest::RemovePersistent { index }, 0, REPLY)? {
            HostAnswer::Forgotten(spec) => Ok(spec),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(answer: &HostAnswer) -> ClientError {
    let kind = match answer {
        HostAnswer::Sessions(_) => "Sessions",
        HostAnswer::Disks(_) => "Disks",
        HostAnswer::LoggedIn(_) => "LoggedIn",
        HostAnswer::LoggedOut { .. } => "LoggedOut",
        HostAnswer::Done { .. } => "Done",
        HostAnswer::Persistent(_) => "Persistent",
        HostAnswer::Forgotten(_) => "Forgotten",
        HostAnswer::Targets(_) => "Targets",
        HostAnswer::Portals(_) => "Portals",
    };
    ClientError::BadReply(format!("a {kind} answer to another request"))
}
