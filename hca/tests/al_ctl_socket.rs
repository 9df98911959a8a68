//! The control socket over real Unix sockets in a temporary directory: the redirect flow
//! (generic socket → CA socket), and bad requests (version, opcode, malformed, truncated,
//! oversized, bad magic), each answered with a clear error while the server keeps serving.

use access_layer::ctl::frame::{read_message, write_message};
use access_layer::ctl::wire::{CaEntry, CtlStatus, Opcode};
use access_layer::ctl::{CaDirectory, CaSocket, CtlClient, CtlServer, DirectoryEntry, Reply};
use access_layer::verbs::ChannelInterface;
use hca::ca::SoftCa;
use hca::driver::{Hca, HcaConfig};
use ib_verbs::Guid;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A fresh directory, removed on drop (also when a test fails).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "ctl-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const GUID: u64 = 0x7301;

/// The generic socket and CA `GUID`'s socket, over an opened soft CA on 127.0.73.`host`.
/// Servers drop before the directory (field order).
struct Daemon {
    generic: CtlServer,
    _ca_server: CtlServer,
    _ca: Arc<SoftCa>,
    _dir: TempDir,
}

fn daemon(host: u8) -> Daemon {
    let dir = TempDir::new();
    let hca = Hca::open(HcaConfig::new(
        Guid(GUID),
        vec![IpAddr::V4(Ipv4Addr::new(127, 0, 73, host))],
    ))
    .expect("open HCA");
    let ca = Arc::new(SoftCa::new(hca).expect("dispatcher"));
    ca.open_ca(Arc::new(|_| {}))
        .wait_timeout(Duration::from_secs(5))
        .expect("open");
    let ca_path = dir.0.join("ca.0");
    let ca_server = CtlServer::bind(&ca_path, Arc::new(CaSocket::new(ca.clone(), "soft_0")))
        .expect("bind CA socket");
    let directory = Arc::new(CaDirectory::new());
    directory.add(DirectoryEntry {
        ca: CaEntry {
            guid: GUID,
            ports: 1,
            name: "soft_0".into(),
        },
        socket: ca_path,
    });
    let generic = CtlServer::bind(dir.0.join("ctl"), directory).expect("bind generic");
    Daemon {
        generic,
        _ca_server: ca_server,
        _ca: ca,
        _dir: dir,
    }
}

#[test]
fn open_ca_redirects_to_the_ca_socket() {
    let d = daemon(1);
    let mut generic = CtlClient::connect(d.generic.path()).expect("connect");
    assert_eq!(generic.version(), 1);
    let cas = generic.list_cas().expect("list");
    assert_eq!(cas.len(), 1);
    assert_eq!(cas[0].guid, GUID);
    assert_eq!(
        generic.query_ca().err().and_then(|e| e.status()),
        Some(CtlStatus::WrongSocket)
    );
    assert_eq!(
        generic.open_ca(0xdead).err().and_then(|e| e.status()),
        Some(CtlStatus::NoSuchCa)
    );

    let mut ca = generic.open_ca(GUID).expect("redirected");
    let attr = ca.query_ca().expect("query_ca");
    assert_eq!(
        (attr.guid, attr.ports, attr.name.as_str()),
        (GUID, 1, "soft_0")
    );
    let port = ca.query_port(1).expect("query_port");
    assert!(port.active);
    assert_eq!(port.gid[10..16], [0xff, 0xff, 127, 0, 73, 1]);
    assert_eq!(
        ca.query_port(9).err().and_then(|e| e.status()),
        Some(CtlStatus::NoSuchPort)
    );
    assert_eq!(
        ca.list_cas().err().and_then(|e| e.status()),
        Some(CtlStatus::WrongSocket)
    );
}

/// Sends raw bytes, reads one reply: its status if an error reply.
fn raw(stream: &mut UnixStream, bytes: &[u8]) -> Option<CtlStatus> {
    stream.write_all(bytes).expect("write");
    let (h, body) = read_message(stream, &|| true).ok()?;
    match Reply::decode(&h, &body).ok()? {
        Reply::Error(e) => Some(e.status),
        _ => None,
    }
}

fn message(version: u16, opcode: Opcode, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_message(&mut out, version, 7, opcode, body).expect("encode");
    out
}

fn connect(d: &Daemon) -> UnixStream {
    let s = UnixStream::connect(d.generic.path()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

#[test]
fn bad_requests_get_clear_errors_and_the_server_keeps_serving() {
    let d = daemon(2);
    let mut s = connect(&d);
    // Recoverable on the same connection: the body was read whole.
    assert_eq!(
        raw(&mut s, &message(9, Opcode::ListCas, &[])),
        Some(CtlStatus::BadVersion)
    );
    assert_eq!(
        raw(&mut s, &message(1, Opcode::Unknown(0x4242), &[])),
        Some(CtlStatus::UnknownOpcode)
    );
    assert_eq!(
        raw(&mut s, &message(1, Opcode::HelloReply, &[0; 8])),
        Some(CtlStatus::UnknownOpcode)
    );
    assert_eq!(
        raw(&mut s, &message(1, Opcode::OpenCa, &[1, 2, 3])),
        Some(CtlStatus::Malformed)
    );
    assert_eq!(
        raw(&mut s, &message(1, Opcode::ListCas, &[0])),
        Some(CtlStatus::Malformed)
    );
    let hello = message(1, Opcode::Hello, &[0, 5, 0, 9, 0, 0, 0, 0]); // versions 5..=9
    assert_eq!(raw(&mut s, &hello), Some(CtlStatus::BadVersion));
    assert_eq!(
        raw(&mut s, &message(1, Opcode::ListCas, &[])),
        None,
        "still served"
    );

    // Framing errors: answered, then that connection closes.
    let mut big = message(1, Opcode::ListCas, &[]);
    big[8..12].copy_from_slice(&(1u32 << 20).to_be_bytes());
    assert_eq!(raw(&mut connect(&d), &big), Some(CtlStatus::TooLarge));
    let mut magic = message(1, Opcode::ListCas, &[]);
    magic[0] = b'X';
    assert_eq!(raw(&mut connect(&d), &magic), Some(CtlStatus::BadMagic));
    let mut t = connect(&d);
    let open = message(1, Opcode::OpenCa, &[0; 8]);
    t.write_all(&open[..27]).expect("write");
    t.shutdown(std::net::Shutdown::Write).expect("shutdown");
    assert_eq!(
        raw(&mut t, &[]),
        Some(CtlStatus::Malformed),
        "truncated body"
    );
    let mut t = connect(&d);
    t.write_all(&open[..10]).expect("write");
    t.shutdown(std::net::Shutdown::Write).expect("shutdown");
    assert_eq!(
        raw(&mut t, &[]),
        Some(CtlStatus::Malformed),
        "truncated header"
    );

    let mut c = CtlClient::connect(d.generic.path()).expect("still serving");
    assert_eq!(c.list_cas().expect("list").len(), 1);
}

#[test]
fn many_clients_at_once() {
    let d = daemon(3);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                let mut c = CtlClient::connect(d.generic.path()).expect("connect");
                for _ in 0..20 {
                    assert_eq!(c.list_cas().expect("list").len(), 1);
                }
                let mut ca = c.open_ca(GUID).expect("open");
                assert_eq!(ca.query_ca().expect("query").guid, GUID);
            });
        }
    });
}

/// A daemon's own service: echoes opcode 0x0123's body reversed, refuses everything else.
struct Echo;

impl access_layer::ctl::CtlService for Echo {
    fn handle(&self, req: &access_layer::ctl::Request) -> Reply {
        match req {
            access_layer::ctl::Request::Service {
                opcode: 0x0123,
                body,
            } => Reply::Service {
                opcode: 0x8123,
                body: body.iter().rev().copied().collect(),
            },
            _ => Reply::Error(access_layer::ctl::wire::ErrorReply::new(
                CtlStatus::UnknownOpcode,
            )),
        }
    }
}

#[test]
fn service_messages_reach_the_daemons_own_service() {
    let dir = TempDir::new();
    let path = dir.0.join("echo.sock");
    let server = CtlServer::bind(&path, Arc::new(Echo)).expect("bind");
    let mut c = CtlClient::connect(server.path()).expect("connect");
    assert_eq!(
        c.call_service(0x0123, vec![1, 2, 3]).expect("echo"),
        [3, 2, 1]
    );
    let refused = c
        .call_service(0x0124, vec![])
        .expect_err("unknown to the service");
    assert_eq!(refused.status(), Some(CtlStatus::UnknownOpcode));
    // Outside the service range a client cannot even encode it; on the wire the server
    // answers UnknownOpcode and keeps the connection.
    assert!(c.call_service(0x7fff, vec![]).is_err());
    let mut s = UnixStream::connect(server.path()).expect("raw connect");
    let reply = raw(&mut s, &message(1, Opcode::from(0x7fffu16), &[]));
    assert_eq!(reply, Some(CtlStatus::UnknownOpcode));
    // The generic directory knows no service messages.
    let d = daemon(9);
    let mut g = CtlClient::connect(d.generic.path()).expect("generic");
    let e = g
        .call_service(0x0123, vec![1])
        .expect_err("not the directory's");
    assert_eq!(e.status(), Some(CtlStatus::UnknownOpcode));
    assert_eq!(
        c.call_service(0x0123, vec![]).expect("still serving"),
        Vec::<u8>::new()
    );
}

/// Stopping a server never depends on its socket file: removed first (an operator's `rm`,
/// its directory cleaned before the daemon stopped), the server still stops at once.
#[test]
fn a_server_whose_socket_file_is_gone_still_stops() {
    let dir = TempDir::new();
    let path = dir.0.join("gone.sock");
    let server = CtlServer::bind(&path, Arc::new(Echo)).expect("bind");
    std::fs::remove_file(&path).expect("remove the socket file");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(server);
        let _ = tx.send(());
    });
    rx.recv_timeout(std::time::Duration::from_secs(5))
        .expect("the server stopped without its socket file");
}
