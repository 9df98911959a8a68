//! Who may use a control socket (issue #14, Deliver 8): the socket has its final mode from
//! the moment it exists (0600; 0660 and group-owned with a group), a process of another user
//! is refused twice over — by the file's mode, and by its peer credentials even where the
//! mode would let it in — and connections are bounded, the one over the limit refused with
//! Busy. Each refusal is an error reply naming why, counted by the server.
//!
//! The other user is `nobody` (65534): the test re-runs its own binary as that user
//! (`helper_connect_as_another_user`, ignored unless asked for), copied where that user can
//! execute it. Needs root to switch users; without root those checks print SKIP.
// Unix sockets, SO_PEERCRED and file modes: Linux only (not in the Wine test run).
#![cfg(unix)]

use access_layer::ctl::wire::{CtlStatus, ErrorReply};
use access_layer::ctl::{CtlAccess, CtlClient, CtlError, CtlServer, CtlService, Reply, Request};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65_534;
const HELPER_ENV: &str = "CTL_ACCESS_HELPER_SOCKET";

/// A fresh directory others can traverse (as /tmp's are), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "ctl-access-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Answers every service request with an empty body.
struct Nothing;

impl CtlService for Nothing {
    fn handle(&self, req: &Request) -> Reply {
        match req {
            Request::Service { opcode, .. } => Reply::Service {
                opcode: opcode | access_layer::ctl::wire::REPLY_BIT,
                body: Vec::new(),
            },
            _ => Reply::Error(ErrorReply::new(CtlStatus::WrongSocket)),
        }
    }
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").map(|m| m.uid()).ok() == Some(0)
}

/// Runs this test binary's helper as `nobody` against `socket`; returns what it printed.
fn connect_as_nobody(dir: &Path, socket: &Path) -> String {
    // Copied where nobody can execute it: the build tree may sit under a private home.
    let exe = dir.join("helper");
    std::fs::copy(std::env::current_exe().expect("exe"), &exe).expect("copy the helper");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Another test thread forking while this copy was open for writing makes exec fail with
    // ETXTBSY until that child has exec'd: try again, briefly (bounded).
    let mut tries = 0;
    let out = loop {
        let run = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "helper_connect_as_another_user",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(HELPER_ENV, socket)
            .uid(NOBODY)
            .gid(NOBODY)
            .output();
        match run {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.expect("run the helper as nobody"),
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("HELPER ").map(|(_, said)| said))
        .unwrap_or_else(|| {
            panic!(
                "the helper said nothing: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_owned()
}

/// Not a test of its own: what `connect_as_nobody` runs, as the other user.
#[test]
#[ignore = "run by the access tests as another user"]
fn helper_connect_as_another_user() {
    let Some(path) = std::env::var_os(HELPER_ENV) else {
        return;
    };
    let said = match CtlClient::connect(&path) {
        Ok(_) => "CONNECTED".to_owned(),
        Err(CtlError::Refused(r)) => format!("REFUSED {:?}", r.status),
        Err(CtlError::Io(e)) => format!("IO {:?}", e.kind()),
        Err(e) => format!("OTHER {e}"),
    };
    println!("HELPER {said}");
}

#[test]
fn the_socket_is_owner_only_from_the_start_and_others_are_refused() {
    let dir = TempDir::new();
    let path = dir.0.join("owner.sock");
    let server = CtlServer::bind(&path, Arc::new(Nothing)).expect("bind");
    let meta = std::fs::symlink_metadata(&path).expect("stat");
    assert_eq!(meta.mode() & 0o777, 0o600, "owner only");
    // Nothing left of the private directory it was bound in.
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .expect("ls")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("owner.sock")]);
    // The owner is served.
    let mut c = CtlClient::connect(&path).expect("the owner connects");
    c.call_service(0x0100, Vec::new()).expect("served");
    drop(c);
    if !is_root() {
        eprintln!("SKIP: the other-user checks need root");
        return;
    }
    // Another user: the file's mode keeps it out.
    assert_eq!(connect_as_nobody(&dir.0, &path), "IO PermissionDenied");
    // Even where the mode would let it in, its credentials do not.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    assert_eq!(connect_as_nobody(&dir.0, &path), "REFUSED PermissionDenied");
    assert_eq!(server.stats().refused_credentials, 1);
    // And the owner still is served.
    CtlClient::connect(&path).expect("the owner again");
}

#[test]
fn a_group_socket_is_group_owned_and_admits_its_members_only() {
    if !is_root() {
        eprintln!("SKIP: needs root (chown to a group)");
        return;
    }
    let dir = TempDir::new();
    let path = dir.0.join("group.sock");
    // nobody's own group: its members may use the socket.
    let access = CtlAccess {
        group: Some(NOBODY),
        ..CtlAccess::default()
    };
    let server = CtlServer::bind_with(&path, Arc::new(Nothing), access).expect("bind");
    let meta = std::fs::symlink_metadata(&path).expect("stat");
    assert_eq!(meta.mode() & 0o777, 0o660);
    assert_eq!(meta.gid(), NOBODY);
    assert_eq!(connect_as_nobody(&dir.0, &path), "CONNECTED");
    // A group that nobody is not in (and the file opened to everyone): refused.
    drop(server);
    let access = CtlAccess {
        group: Some(4242),
        ..CtlAccess::default()
    };
    let server = CtlServer::bind_with(&path, Arc::new(Nothing), access).expect("bind again");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    assert_eq!(connect_as_nobody(&dir.0, &path), "REFUSED PermissionDenied");
    assert_eq!(server.stats().refused_credentials, 1);
}

#[test]
fn binding_over_an_existing_file_fails_and_leaves_it() {
    let dir = TempDir::new();
    let path = dir.0.join("taken.sock");
    std::fs::write(&path, b"not a socket").expect("write");
    let err = CtlServer::bind(&path, Arc::new(Nothing)).expect_err("taken");
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read(&path).expect("still there"), b"not a socket");
    assert_eq!(
        std::fs::read_dir(&dir.0).expect("ls").count(),
        1,
        "no private dir left"
    );
}

#[test]
fn connections_over_the_limit_are_refused_busy_until_one_closes() {
    let dir = TempDir::new();
    let path = dir.0.join("busy.sock");
    let access = CtlAccess {
        max_connections: 2,
        ..CtlAccess::default()
    };
    let server = CtlServer::bind_with(&path, Arc::new(Nothing), access).expect("bind");
    let a = CtlClient::connect(&path).expect("first");
    let _b = CtlClient::connect(&path).expect("second");
    let third = CtlClient::connect(&path).expect_err("over the limit");
    assert_eq!(third.status(), Some(CtlStatus::Busy), "{third}");
    assert_eq!(server.stats().refused_busy, 1);
    assert_eq!(server.stats().accepted, 2);
    // One closes: its thread ends, and a new connection is served (bounded wait).
    drop(a);
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        match CtlClient::connect(&path) {
            Ok(mut c) => {
                c.call_service(0x0100, Vec::new()).expect("served");
                break;
            }
            Err(e) if e.status() == Some(CtlStatus::Busy) && Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("no room after a close: {e}"),
        }
    }
}
