//! [`CtlServer`]: a thread per socket and per connection, answering requests through a
//! [`CtlService`]; and the two services, [`CaDirectory`] (the generic socket) and
//! [`CaSocket`] (a CA's socket).
//!
//! Who may connect ([`CtlAccess`]) is enforced twice: the socket file is created with its
//! final mode (0600, or 0660 and group-owned when a group is configured) before anyone can
//! reach it — bound inside a fresh 0700 directory, then linked into place — and each
//! connection's peer credentials (`SO_PEERCRED`) must be root's, the daemon's own user's,
//! or a member's of the configured group. At most [`CtlAccess::max_connections`] are
//! served at once. Every refusal is answered with an error reply naming why
//! ([`CtlStatus::PermissionDenied`], [`CtlStatus::Busy`]), counted ([`CtlServerStats`]) and
//! logged.
#[allow(unused_imports)]
use crate::prelude::*;

use super::frame::{ReadError, Reply, Request, read_message, write_message};
use super::wire::{
    CaEntry, CtlHeader, CtlStatus, ErrorReply, HelloReply, ListCasReply, MAX_BODY, MAX_CAS,
    PortInfo, Redirect, VERSION_MAX, VERSION_MIN,
};
use crate::verbs::ChannelInterface;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a connection thread looks at the stop flag while idle.
const POLL: Duration = Duration::from_millis(100);
/// How long a CA socket waits for the CA to answer a query.
const CA_TIMEOUT: Duration = Duration::from_secs(2);

/// What a socket answers. Hello is answered by the server itself.
pub trait CtlService: Send + Sync + 'static {
    /// The reply to `req` (never Hello).
    fn handle(&self, req: &Request) -> Reply;
}

fn error(status: CtlStatus) -> Reply {
    Reply::Error(ErrorReply::new(status))
}

/// One CA the generic socket knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryEntry {
    /// The CA.
    pub ca: CaEntry,
    /// Its socket.
    pub socket: PathBuf,
}

/// The generic socket's service: lists the CAs and redirects OpenCa to a CA's socket.
#[derive(Debug, Default)]
pub struct CaDirectory {
    entries: Mutex<Vec<DirectoryEntry>>,
}

impl CaDirectory {
    /// An empty directory.
    pub fn new() -> CaDirectory {
        CaDirectory::default()
    }

    /// Adds (or replaces, by GUID) a CA.
    pub fn add(&self, entry: DirectoryEntry) {
        let mut e = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        e.retain(|x| x.ca.guid != entry.ca.guid);
        e.push(entry);
    }

    /// Removes a CA; false if unknown.
    pub fn remove(&self, guid: u64) -> bool {
        let mut e = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let before = e.len();
        e.retain(|x| x.ca.guid != guid);
        e.len() != before
    }
}

impl CtlService for CaDirectory {
    fn handle(&self, req: &Request) -> Reply {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match req {
            Request::ListCas => Reply::ListCas(ListCasReply {
                cas: entries.iter().take(MAX_CAS).map(|e| e.ca.clone()).collect(),
            }),
            Request::OpenCa(o) => match entries.iter().find(|e| e.ca.guid == o.guid) {
                Some(e) => match e.socket.to_str() {
                    Some(path) => Reply::Redirect(Redirect { path: path.into() }),
                    None => error(CtlStatus::Internal),
                },
                None => error(CtlStatus::NoSuchCa),
            },
            Request::Service { .. } => error(CtlStatus::UnknownOpcode),
            _ => error(CtlStatus::WrongSocket),
        }
    }
}

/// A CA socket's service: answers queries from the CA's channel interface (which must be
/// open), waiting for its completions on the connection's thread.
pub struct CaSocket {
    ca: Arc<dyn ChannelInterface>,
    name: String,
}

impl std::fmt::Debug for CaSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaSocket")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CaSocket {
    /// The service of CA `ca`, reported under `name` (at most 31 bytes).
    pub fn new(ca: Arc<dyn ChannelInterface>, name: impl Into<String>) -> CaSocket {
        CaSocket {
            ca,
            name: name.into(),
        }
    }
}

impl CtlService for CaSocket {
    fn handle(&self, req: &Request) -> Reply {
        let attr = match req {
            Request::QueryCa | Request::QueryPort(_) => {
                match self.ca.query_ca().wait_timeout(CA_TIMEOUT) {
                    Ok(a) => a,
                    Err(_) => return error(CtlStatus::Internal),
                }
            }
            Request::Service { .. } => return error(CtlStatus::UnknownOpcode),
            _ => return error(CtlStatus::WrongSocket),
        };
        match req {
            Request::QueryPort(q) => match attr.ports.iter().find(|p| p.port == q.port) {
                Some(p) => Reply::QueryPort(PortInfo {
                    port: p.port,
                    active: p.active,
                    gid: p.gid.0,
                }),
                None => error(CtlStatus::NoSuchPort),
            },
            _ => Reply::QueryCa(CaEntry {
                guid: attr.node_guid.0,
                ports: u8::try_from(attr.ports.len()).unwrap_or(u8::MAX),
                name: self.name.clone(),
            }),
        }
    }
}

/// Who may use a control socket, and how many at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtlAccess {
    /// A group whose members may use the socket too (mode 0660, group-owned); `None`:
    /// root and the daemon's own user only (mode 0600).
    pub group: Option<u32>,
    /// Most connections served at once; one more is refused with [`CtlStatus::Busy`].
    pub max_connections: usize,
}

impl Default for CtlAccess {
    fn default() -> Self {
        CtlAccess {
            group: None,
            max_connections: 16,
        }
    }
}

/// What a control socket accepted and refused, counted since it was bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtlServerStats {
    /// Connections served.
    pub accepted: u64,
    /// Connections refused: the peer's credentials are not allowed.
    pub refused_credentials: u64,
    /// Connections refused: as many were being served as allowed.
    pub refused_busy: u64,
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    refused_credentials: AtomicU64,
    refused_busy: AtomicU64,
}

/// A control socket being served. Dropping it stops the threads and removes the socket.
#[derive(Debug)]
pub struct CtlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    acceptor: Option<JoinHandle<()>>,
    /// The listening socket, shared with the acceptor: shut down to wake it, so stopping
    /// never depends on the socket file still being there to connect to.
    waker: Option<std::os::unix::net::UnixListener>,
}

impl CtlServer {
    /// Binds a Unix socket at `path` (which must not exist) and serves it with `service`,
    /// for root and the daemon's own user (mode 0600), 16 connections at most.
    pub fn bind(path: impl AsRef<Path>, service: Arc<dyn CtlService>) -> io::Result<CtlServer> {
        CtlServer::bind_with(path, service, CtlAccess::default())
    }

    /// [`CtlServer::bind`] with the access rules `access`.
    pub fn bind_with(
        path: impl AsRef<Path>,
        service: Arc<dyn CtlService>,
        access: CtlAccess,
    ) -> io::Result<CtlServer> {
        let path = path.as_ref().to_path_buf();
        let listener = bind_private(&path, access.group)?;
        let waker = listener.try_clone().ok();
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let (s, c, shown) = (stop.clone(), counters.clone(), path.clone());
        let acceptor = std::thread::Builder::new()
            .name("ctl-accept".into())
            .spawn(move || {
                let a = Acceptor {
                    path: &shown,
                    service: &service,
                    stop: &s,
                    counters: &c,
                    access,
                };
                a.run(&listener);
            })?;
        Ok(CtlServer {
            path,
            stop,
            counters,
            acceptor: Some(acceptor),
            waker,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the socket accepted and refused so far.
    pub fn stats(&self) -> CtlServerStats {
        let c = &self.counters;
        CtlServerStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            refused_credentials: c.refused_credentials.load(Ordering::Relaxed),
            refused_busy: c.refused_busy.load(Ordering::Relaxed),
        }
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the acceptor; it sees the flag. Shutting the listening socket down makes its
        // accept fail at once, even if the socket file was removed (an operator's `rm`, a
        // temporary directory cleaned first); a connection wakes it where that is not so.
        if let Some(l) = &self.waker {
            let _ = nix::sys::socket::shutdown(
                std::os::fd::AsRawFd::as_raw_fd(l),
                nix::sys::socket::Shutdown::Both,
            );
        }
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the socket where no one else can reach it — in a fresh directory of mode 0700
/// beside `path` — gives it its final owner group and mode, then hard-links it to `path`
/// (which fails if `path` exists) and removes the directory: the socket is never reachable
/// with the permissions the umask would have given it.
fn bind_private(path: &Path, group: Option<u32>) -> io::Result<UnixListener> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: a socket path must name a file", path.display()),
        ));
    }
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let private = dir.join(format!(".ctl-{}-{n}", std::process::id()));
    // The mode is masked by the umask, which only takes bits away.
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let bound = (|| {
        let held = std::fs::File::open(&private)?;
        let direct = private.join("s");
        // A socket address holds 107 bytes of path: bind through the directory's
        // descriptor when the direct path is longer.
        let tmp = if direct.as_os_str().len() < 100 {
            direct.clone()
        } else {
            use std::os::fd::AsRawFd;
            PathBuf::from(format!("/proc/self/fd/{}/s", held.as_raw_fd()))
        };
        let listener = UnixListener::bind(&tmp)?;
        if let Some(gid) = group {
            std::os::unix::fs::chown(&direct, None, Some(gid))?;
        }
        let mode = if group.is_some() { 0o660 } else { 0o600 };
        std::fs::set_permissions(&direct, std::fs::Permissions::from_mode(mode))?;
        std::fs::hard_link(&direct, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_file(private.join("s"));
    let _ = std::fs::remove_dir(&private);
    bound
}

/// The accepting thread's state.
struct Acceptor<'a> {
    path: &'a Path,
    service: &'a Arc<dyn CtlService>,
    stop: &'a Arc<AtomicBool>,
    counters: &'a Arc<Counters>,
    access: CtlAccess,
}

impl Acceptor<'_> {
    fn run(&self, listener: &UnixListener) {
        let mut conns: Vec<JoinHandle<()>> = Vec::new();
        for stream in listener.incoming() {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let Ok(stream) = stream else { continue };
            if let Err(why) = self.admit(&stream) {
                refuse(stream, why);
                continue;
            }
            conns.retain(|c| !c.is_finished());
            if conns.len() >= self.access.max_connections {
                self.counters.refused_busy.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    socket = %self.path.display(),
                    limit = self.access.max_connections,
                    "control socket: connection refused: as many connections as allowed are open"
                );
                refuse(stream, CtlStatus::Busy);
                continue;
            }
            let (service, stop) = (self.service.clone(), self.stop.clone());
            let spawned = std::thread::Builder::new()
                .name("ctl-conn".into())
                .spawn(move || serve(stream, &*service, &stop));
            match spawned {
                Ok(t) => {
                    self.counters.accepted.fetch_add(1, Ordering::Relaxed);
                    conns.push(t);
                }
                Err(e) => tracing::warn!(
                    socket = %self.path.display(),
                    "control socket: connection dropped: no thread for it: {e}"
                ),
            }
        }
        for c in conns {
            let _ = c.join();
        }
    }

    /// Whether the peer may use the socket: root, the daemon's own user, or a member of
    /// the configured group (its primary group or one of its supplementary groups).
    fn admit(&self, stream: &UnixStream) -> Result<(), CtlStatus> {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        let cred = match getsockopt(stream, PeerCredentials) {
            Ok(c) => c,
            Err(e) => {
                self.counters
                    .refused_credentials
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    socket = %self.path.display(),
                    "control socket: connection refused: its peer credentials are unreadable: {e}"
                );
                return Err(CtlStatus::PermissionDenied);
            }
        };
        let uid = cred.uid();
        let allowed = uid == 0
            || uid == nix::unistd::geteuid().as_raw()
            || self
                .access
                .group
                .is_some_and(|g| cred.gid() == g || supplementary_groups(cred.pid()).contains(&g));
        if allowed {
            return Ok(());
        }
        self.counters
            .refused_credentials
            .fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            socket = %self.path.display(),
            uid,
            gid = cred.gid(),
            pid = cred.pid(),
            group = ?self.access.group,
            "control socket: connection refused: the peer is not root, not the daemon's user \
             and not in the socket's group"
        );
        Err(CtlStatus::PermissionDenied)
    }
}

/// The supplementary groups of process `pid` (`Groups:` of its `/proc` status); empty if
/// it is gone.
fn supplementary_groups(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                g.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Answers a refused connection with an error reply (request id 0: before any request)
/// and closes it. Bounded: a peer that does not read cannot hold the acceptor.
fn refuse(mut stream: UnixStream, why: CtlStatus) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
    if let Ok((op, body)) = error(why).encode() {
        let _ = write_message(&mut stream, VERSION_MAX, 0, op, &body);
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// What a connection sends back for one message it read, and whether it closes then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The reply.
    pub reply: Reply,
    /// The request id it carries (the request's; 0 if the header was unreadable).
    pub request_id: u64,
    /// The version it is sent with: the request's when we speak it, else the nearest.
    pub version: u16,
    /// A framing error (bad magic, too large, truncated): the stream cannot be
    /// resynchronised, so the connection closes after this reply.
    pub close: bool,
}

/// The answer to one message as [`read_message`] returned it: Hello is negotiated here,
/// other requests go to `service`, and every bad message gets the error reply naming why.
/// `None` when there is nothing to answer (the stream closed or failed). Sans-IO: the
/// connection threads and the fuzz targets share it.
pub fn answer(
    service: &dyn CtlService,
    message: Result<(CtlHeader, Vec<u8>), ReadError>,
) -> Option<Answer> {
    let (reply, request_id, version, close) = match message {
        Ok((h, body)) => {
            let reply = match Request::decode(&h, &body) {
                Ok(Request::Hello(hello)) => negotiate(hello.min_version, hello.max_version),
                Ok(req) => service.handle(&req),
                Err(status) => error(status),
            };
            (reply, h.request_id, h.version, false)
        }
        Err(ReadError::Closed | ReadError::Io(_)) => return None,
        Err(ReadError::Truncated) => (error(CtlStatus::Malformed), 0, VERSION_MAX, true),
        Err(ReadError::BadHeader(id)) => (error(CtlStatus::BadMagic), id, VERSION_MAX, true),
        Err(ReadError::TooLarge(h)) => (error(CtlStatus::TooLarge), h.request_id, h.version, true),
    };
    Some(Answer {
        reply,
        request_id,
        // Replies carry the request's version when it is one we speak.
        version: version.clamp(VERSION_MIN, VERSION_MAX),
        close,
    })
}

/// Answers requests on one connection until it closes, errs in framing, or the server stops.
fn serve(mut stream: UnixStream, service: &dyn CtlService, stop: &AtomicBool) {
    if stream.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let give_up = || stop.load(Ordering::Acquire);
    while let Some(a) = answer(service, read_message(&mut stream, &give_up)) {
        let sent = a
            .reply
            .encode()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            .and_then(|(op, body)| write_message(&mut stream, a.version, a.request_id, op, &body));
        if sent.is_err() || a.close {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// The newest version both sides speak.
fn negotiate(min: u16, max: u16) -> Reply {
    let version = max.min(VERSION_MAX);
    if version < min.max(VERSION_MIN) {
        return error(CtlStatus::BadVersion);
    }
    Reply::Hello(HelloReply {
        version,
        max_body: MAX_BODY,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctl::wire::{Hello, Opcode};
    use wirekit::WireRepr;

    fn header(version: u16, opcode: Opcode, request_id: u64) -> CtlHeader {
        CtlHeader {
            version,
            opcode,
            length: 0,
            request_id,
        }
    }

    #[test]
    fn one_message_answered_sans_io() {
        let dir = CaDirectory::new();
        assert_eq!(answer(&dir, Err(ReadError::Closed)), None);
        // Hello is the server's own; the reply echoes the id and the version we speak.
        let hello = Hello {
            min_version: VERSION_MIN,
            max_version: 7,
        };
        let mut body = vec![0; hello.buffer_len()];
        hello.emit(&mut body).expect("fits");
        let a = answer(&dir, Ok((header(VERSION_MAX, Opcode::Hello, 5), body))).expect("answer");
        assert!(matches!(a.reply, Reply::Hello(h) if h.version == VERSION_MAX));
        assert_eq!((a.request_id, a.version, a.close), (5, VERSION_MAX, false));
        // A version we do not speak: refused, answered in one we do.
        let a = answer(&dir, Ok((header(9, Opcode::ListCas, 6), Vec::new()))).expect("answer");
        assert_eq!(a.reply, error(CtlStatus::BadVersion));
        assert_eq!((a.request_id, a.version, a.close), (6, VERSION_MAX, false));
        // Framing errors close the connection after their reply.
        let a = answer(&dir, Err(ReadError::BadHeader(8))).expect("answer");
        assert_eq!(
            (a.reply, a.request_id, a.close),
            (error(CtlStatus::BadMagic), 8, true)
        );
        let a = answer(&dir, Err(ReadError::Truncated)).expect("answer");
        assert_eq!((a.reply, a.close), (error(CtlStatus::Malformed), true));
    }
}
