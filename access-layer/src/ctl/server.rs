//! [`CtlServer`]: a thread per socket and per connection, answering requests through a
//! [`CtlService`]; and the two services, [`CaDirectory`] (the generic socket) and
//! [`CaSocket`] (a CA's socket).

use super::frame::{ReadError, Reply, Request, read_message, write_message};
use super::wire::{
    CaEntry, CtlStatus, ErrorReply, HelloReply, ListCasReply, MAX_BODY, MAX_CAS, PortInfo,
    Redirect, VERSION_MAX, VERSION_MIN,
};
use crate::verbs::ChannelInterface;
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
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

/// A control socket being served. Dropping it stops the threads and removes the socket.
#[derive(Debug)]
pub struct CtlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl CtlServer {
    /// Binds a Unix socket at `path` (which must not exist) and serves it with `service`.
    pub fn bind(path: impl AsRef<Path>, service: Arc<dyn CtlService>) -> io::Result<CtlServer> {
        let path = path.as_ref().to_path_buf();
        let listener = UnixListener::bind(&path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let acceptor = std::thread::Builder::new()
            .name("ctl-accept".into())
            .spawn(move || accept_loop(&listener, &service, &s))?;
        Ok(CtlServer {
            path,
            stop,
            acceptor: Some(acceptor),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the acceptor; it sees the flag.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn accept_loop(listener: &UnixListener, service: &Arc<dyn CtlService>, stop: &Arc<AtomicBool>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let Ok(stream) = stream else { continue };
        conns.retain(|c| !c.is_finished());
        let (service, stop) = (service.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name("ctl-conn".into())
            .spawn(move || serve(stream, &*service, &stop));
        if let Ok(t) = spawned {
            conns.push(t);
        }
    }
    for c in conns {
        let _ = c.join();
    }
}

/// Answers requests on one connection until it closes, errs in framing, or the server stops.
fn serve(mut stream: UnixStream, service: &dyn CtlService, stop: &AtomicBool) {
    if stream.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let give_up = || stop.load(Ordering::Acquire);
    loop {
        let (reply, id, version, close) = match read_message(&mut stream, &give_up) {
            Ok((h, body)) => {
                let reply = match Request::decode(&h, &body) {
                    Ok(Request::Hello(hello)) => negotiate(hello.min_version, hello.max_version),
                    Ok(req) => service.handle(&req),
                    Err(status) => error(status),
                };
                (reply, h.request_id, h.version, false)
            }
            Err(ReadError::Closed | ReadError::Io(_)) => return,
            Err(ReadError::Truncated) => (error(CtlStatus::Malformed), 0, VERSION_MAX, true),
            Err(ReadError::BadHeader(id)) => (error(CtlStatus::BadMagic), id, VERSION_MAX, true),
            Err(ReadError::TooLarge(h)) => {
                (error(CtlStatus::TooLarge), h.request_id, h.version, true)
            }
        };
        // Replies carry the request's version when it is one we speak.
        let version = version.clamp(VERSION_MIN, VERSION_MAX);
        let sent = reply
            .encode()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            .and_then(|(op, body)| write_message(&mut stream, version, id, op, &body));
        if sent.is_err() || close {
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
