//! The host control socket over a real Unix socket in a temporary directory, served by
//! [`HostService`] over a small in-test [`HostControl`] (the socket layer only; the daemon
//! is tested elsewhere): every request round-trips (policy and path switches included),
//! refusals reach the client with their reason, a long list arrives complete, bad requests
//! are answered with an error while the server keeps serving, and a missing socket gives
//! the operator a hint.

mod common;

use common::TempDir;

use access_layer::ctl::frame::{read_message, write_message};
use access_layer::ctl::wire::{CtlStatus, ErrorReply, Opcode};
use access_layer::ctl::{CtlClient, CtlError, CtlServer, Reply};
use srp_hostd::control::{
    ClientError, DiskInfo, HostAnswer, HostClient, HostControl, HostControlError, HostRequest,
    HostService, LoginSpec, PathInfo, SessionInfo,
};
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// A fresh directory, removed on drop (also when a test fails).
/// A pretend daemon: sessions with their disks; login adds one session with two disks per
/// call, logout removes one.
#[derive(Default)]
struct FakeHost {
    state: Mutex<(Vec<SessionInfo>, Vec<DiskInfo>)>,
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

fn session(id: u32, portal: IpAddr, disks: Vec<String>) -> SessionInfo {
    SessionInfo {
        id,
        portal,
        local: ip("10.0.0.2"),
        ioc_guid: format!("{:#018x}", 0x0002_c903_0000_0000u64 + u64::from(id)),
        ioc_name: format!("ioc{id}"),
        id_ext: "0x0000000000000001".into(),
        service_id: "0x0002c90300a1b2c3".into(),
        state: "running".into(),
        logins: 1,
        losses: 0,
        last_error: None,
        outstanding: 0,
        disks,
        login: "rdma-cm".into(),
        driver: "iscsi-model".into(),
        hca: Default::default(),
        provider: "soft soft:10.0.0.2:4791 port 1".into(),
        fencing: "per-io".into(),
        resets: Default::default(),
    }
}

fn path(session: u32, lun: u32) -> PathInfo {
    PathInfo {
        session,
        lun,
        ioc_guid: format!("{:#018x}", 0x0002_c903_0000_0000u64 + u64::from(session)),
        ioc_name: format!("ioc{session}"),
        portal: ip("10.0.0.1"),
        local: ip("10.0.0.2"),
        state: "active".into(),
        alua: None,
        preferred: false,
        weight: 1,
        in_flight: 0,
        reads: u64::from(lun),
        writes: 0,
        bytes: 0,
        errors: 0,
        failures: 0,
        hca_dropped: 0,
        retransmits: 0,
    }
}

/// LUN `lun` reached through each of `sessions`: one multipath disk.
fn disk(sessions: &[u32], lun: u32) -> DiskInfo {
    let first = sessions.first().copied().unwrap_or(0);
    let name = format!("srp{first}-{lun}");
    DiskInfo {
        path: format!("/run/srp-host/disks/{name}"),
        name,
        identity: format!("naa.60014050000{first:08x}{lun:013x}"),
        vendor: "SRPT".into(),
        product: "soft disk".into(),
        revision: "0001".into(),
        block_size: 512,
        blocks: 2048,
        policy: "round-robin".into(),
        queued: 0,
        reads: u64::from(lun),
        writes: 0,
        flushes: 0,
        errors: 0,
        failovers: 0,
        latency: Default::default(),
        paths: sessions.iter().map(|&s| path(s, lun)).collect(),
    }
}

const POLICIES: [&str; 7] = [
    "failover-only",
    "round-robin",
    "round-robin-subset",
    "least-queue-depth",
    "weighted-paths",
    "least-blocks",
    "service-time",
];

impl FakeHost {
    /// Sessions 1 and 2, both reaching `n` LUNs: `n` disks of two paths each.
    fn with_disks(n: u32) -> FakeHost {
        let h = FakeHost::default();
        {
            let mut s = h.state.lock().unwrap_or_else(PoisonError::into_inner);
            s.1 = (0..n).map(|lun| disk(&[1, 2], lun)).collect();
            let names: Vec<String> = s.1.iter().take(1).map(|d| d.name.clone()).collect();
            s.0 = vec![
                session(1, ip("10.0.0.1"), names.clone()),
                session(2, ip("10.0.0.4"), names),
            ];
        }
        h
    }
}

impl HostControl for FakeHost {
    fn call(&self, request: HostRequest) -> Result<HostAnswer, HostControlError> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (sessions, disks) = &mut *s;
        match request {
            HostRequest::Sessions => Ok(HostAnswer::Sessions(sessions.clone())),
            HostRequest::Disks => Ok(HostAnswer::Disks(disks.clone())),
            HostRequest::Login(spec) => {
                if spec.portal == ip("10.9.9.9") {
                    return Err(HostControlError::NothingToLogIn(format!(
                        "no SRP IOC answered at {}",
                        spec.portal
                    )));
                }
                let id = sessions.iter().map(|s| s.id).max().unwrap_or(0) + 1;
                let new: Vec<DiskInfo> = (0..2).map(|lun| disk(&[id], lun)).collect();
                let names = new.iter().map(|d| d.name.clone()).collect();
                let mut s = session(id, spec.portal, names);
                if let Some(local) = spec.local {
                    s.local = local;
                }
                sessions.push(s.clone());
                disks.extend(new);
                Ok(HostAnswer::LoggedIn(vec![s]))
            }
            // The socket layer only: none kept, so none to forget.
            HostRequest::PersistentLogins => Ok(HostAnswer::Persistent(Vec::new())),
            HostRequest::Targets => Ok(HostAnswer::Targets(Vec::new())),
            HostRequest::Portals => Ok(HostAnswer::Portals(Vec::new())),
            HostRequest::Reload => Ok(HostAnswer::Reloaded {
                changes: vec!["portal 10.0.0.9 added: swept now".into()],
            }),
            HostRequest::RemovePersistent { index } => {
                Err(HostControlError::NoSuchPersistent(index))
            }
            // The socket layer only: the real daemon's power is tests/power.rs.
            HostRequest::Power { suspend } => Ok(HostAnswer::Powered {
                sessions: sessions
                    .iter()
                    .map(|s| {
                        format!(
                            "session {}: {}",
                            s.id,
                            if suspend { "suspended" } else { "resumed" }
                        )
                    })
                    .collect(),
            }),
            HostRequest::Logout { session } => {
                let Some(i) = sessions.iter().position(|s| s.id == session) else {
                    return Err(HostControlError::NoSuchSession(session));
                };
                sessions.remove(i);
                let mut disks_removed = Vec::new();
                for d in disks.iter_mut() {
                    d.paths.retain(|p| p.session != session);
                    if d.paths.is_empty() {
                        disks_removed.push(d.name.clone());
                    }
                }
                disks.retain(|d| !d.paths.is_empty());
                Ok(HostAnswer::LoggedOut { disks_removed })
            }
            HostRequest::SetPolicy { disk, policy } => {
                if !POLICIES.contains(&policy.as_str()) {
                    return Err(HostControlError::NoSuchPolicy(policy));
                }
                let Some(d) = disks
                    .iter_mut()
                    .find(|d| d.name == disk || d.identity == disk)
                else {
                    return Err(HostControlError::NoSuchDisk(disk));
                };
                d.policy = policy;
                Ok(HostAnswer::Done {
                    disks: vec![d.name.clone()],
                })
            }
            HostRequest::SetPath { session, enabled } => {
                if !sessions.iter().any(|s| s.id == session) {
                    return Err(HostControlError::NoSuchSession(session));
                }
                let mut affected = Vec::new();
                for d in disks.iter_mut() {
                    for p in d.paths.iter_mut().filter(|p| p.session == session) {
                        p.state = if enabled { "active" } else { "admin-down" }.into();
                        affected.push(d.name.clone());
                    }
                }
                Ok(HostAnswer::Done { disks: affected })
            }
        }
    }
}

/// A socket served over `host`; the server drops before the directory (field order).
struct Served {
    server: CtlServer,
    _dir: TempDir,
}

fn serve(host: FakeHost) -> Served {
    let dir = TempDir::new("ctl");
    let server = CtlServer::bind(
        dir.path().join("srp-host.sock"),
        Arc::new(HostService::new(Arc::new(host))),
    )
    .expect("bind");
    Served { server, _dir: dir }
}

fn client(s: &Served) -> HostClient {
    HostClient::connect(s.server.path()).expect("connect")
}

#[test]
fn every_request_round_trips() {
    let s = serve(FakeHost::with_disks(1));
    let mut c = client(&s);
    assert_eq!(c.sessions().expect("sessions").len(), 2);
    assert_eq!(c.disks().expect("disks"), vec![disk(&[1, 2], 0)]);

    let created = c
        .login(LoginSpec {
            portal: ip("10.0.0.7"),
            local: Some(ip("10.0.0.3")),
            ioc_guid: Some("0x0002c90300000002".into()),
            persistent: false,
            driver: None,
        })
        .expect("login");
    assert_eq!(created.len(), 1);
    let new = &created[0];
    assert_eq!(
        (new.id, new.portal, new.local),
        (3, ip("10.0.0.7"), ip("10.0.0.3"))
    );
    assert_eq!(new.disks, vec!["srp3-0", "srp3-1"]);

    let sessions = c.sessions().expect("sessions");
    assert_eq!(
        sessions.iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(&sessions[2], new);
    assert_eq!(c.disks().expect("disks").len(), 3);

    // Policy and path switches: the disks affected come back, and the lists show them.
    assert_eq!(
        c.set_policy("srp1-0", "least-queue-depth").expect("policy"),
        vec!["srp1-0"]
    );
    let identity = disk(&[3], 1).identity;
    assert_eq!(
        c.set_policy(&identity, "service-time")
            .expect("policy by identity"),
        vec!["srp3-1"]
    );
    assert_eq!(c.set_path(2, false).expect("path down"), vec!["srp1-0"]);
    let d = c.disks().expect("disks");
    assert_eq!(d[0].policy, "least-queue-depth");
    assert_eq!(d[2].policy, "service-time");
    let states: Vec<(u32, &str)> = d[0]
        .paths
        .iter()
        .map(|p| (p.session, p.state.as_str()))
        .collect();
    assert_eq!(states, vec![(1, "active"), (2, "admin-down")]);
    assert_eq!(c.set_path(2, true).expect("path up"), vec!["srp1-0"]);
    let mut back = disk(&[1, 2], 0);
    back.policy = "least-queue-depth".into();
    assert_eq!(c.disks().expect("disks")[0], back);

    // Logout: a disk keeps its other path; one without a path left goes.
    assert_eq!(c.logout(3).expect("logout"), vec!["srp3-0", "srp3-1"]);
    assert!(c.logout(2).expect("logout").is_empty());
    assert_eq!(c.sessions().expect("sessions").len(), 1);
    back.paths.truncate(1);
    assert_eq!(c.disks().expect("disks"), vec![back]);
}

#[test]
fn refusals_reach_the_client_with_their_reason() {
    let s = serve(FakeHost::with_disks(0));
    let mut c = client(&s);
    match c.logout(42) {
        Err(ClientError::Refused(HostControlError::NoSuchSession(42))) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(c.persistent_logins().expect("list"), Vec::new());
    assert_eq!(c.targets().expect("targets"), Vec::new());
    assert_eq!(c.portals().expect("portals"), Vec::new());
    match c.forget_persistent(3) {
        Err(ClientError::Refused(HostControlError::NoSuchPersistent(3))) => {}
        other => panic!("{other:?}"),
    }
    let e = c
        .login(LoginSpec::to(ip("10.9.9.9")))
        .expect_err("nothing there");
    assert_eq!(
        e.to_string(),
        "nothing to log in to: no SRP IOC answered at 10.9.9.9"
    );
    assert!(matches!(
        e,
        ClientError::Refused(HostControlError::NothingToLogIn(_))
    ));
    match c.set_policy("srp9-9", "round-robin") {
        Err(ClientError::Refused(HostControlError::NoSuchDisk(d))) => assert_eq!(d, "srp9-9"),
        other => panic!("{other:?}"),
    }
    let e = c
        .set_policy("srp1-0", "fastest")
        .expect_err("no such policy");
    assert!(
        matches!(&e, ClientError::Refused(HostControlError::NoSuchPolicy(p)) if p == "fastest"),
        "{e:?}"
    );
    assert!(e.to_string().contains("least-queue-depth"), "{e}");
    match c.set_path(42, false) {
        Err(ClientError::Refused(HostControlError::NoSuchSession(42))) => {}
        other => panic!("{other:?}"),
    }
    // The connection goes on serving.
    assert!(c.disks().expect("disks").is_empty());
}

#[test]
fn a_long_disk_list_arrives_complete() {
    let s = serve(FakeHost::with_disks(2000));
    let disks = client(&s).disks().expect("disks");
    assert_eq!(disks.len(), 2000);
    assert!(
        disks
            .iter()
            .enumerate()
            .all(|(i, d)| *d == disk(&[1, 2], i as u32))
    );
}

/// Sends one raw service message and returns the reply.
fn raw(path: &Path, opcode: u16, body: &[u8]) -> Reply {
    let mut stream = UnixStream::connect(path).expect("connect");
    write_message(&mut stream, 1, 9, Opcode::from(opcode), body).expect("write");
    let (h, body) = read_message(&mut stream, &|| true).expect("reply");
    assert_eq!(h.request_id, 9);
    Reply::decode(&h, &body).expect("decode")
}

#[test]
fn bad_requests_are_answered_and_the_server_goes_on() {
    let s = serve(FakeHost::with_disks(3));
    let path = s.server.path();
    let refused = |status| Reply::Error(ErrorReply::new(status));
    assert_eq!(
        raw(path, 0x0302, b"{\"start\":"),
        refused(CtlStatus::Malformed)
    );
    assert_eq!(
        raw(path, 0x0303, b"not json"),
        refused(CtlStatus::Malformed)
    );
    assert_eq!(
        raw(path, 0x0304, br#"{"session":"one"}"#),
        refused(CtlStatus::Malformed)
    );
    assert_eq!(
        raw(path, 0x0305, br#"{"disk":"srp1-0"}"#),
        refused(CtlStatus::Malformed)
    );
    assert_eq!(
        raw(path, 0x0306, br#"{"session":1,"enabled":"no"}"#),
        refused(CtlStatus::Malformed)
    );
    assert_eq!(raw(path, 0x0399, b"{}"), refused(CtlStatus::UnknownOpcode));
    // The target's opcodes are not the host's.
    assert_eq!(
        raw(path, 0x0201, &[0; 8]),
        refused(CtlStatus::UnknownOpcode)
    );
    // A CA socket's request.
    let mut ctl = CtlClient::connect(path).expect("connect");
    match ctl.list_cas() {
        Err(e) => assert_eq!(e.status(), Some(CtlStatus::WrongSocket), "{e}"),
        Ok(v) => panic!("{v:?}"),
    }
    // Through the access layer's own client too: the raw JSON reply.
    let body = ctl
        .call_service(0x0304, br#"{"session":5}"#.to_vec())
        .expect("logout");
    assert_eq!(body, br#"{"Err":{"NoSuchSession":5}}"#);
    assert!(matches!(
        ctl.call_service(0x0301, b"{".to_vec()),
        Err(CtlError::Refused(ErrorReply {
            status: CtlStatus::Malformed,
            ..
        }))
    ));
    let body = ctl
        .call_service(0x0306, br#"{"session":1,"enabled":false}"#.to_vec())
        .expect("path down");
    assert_eq!(
        body,
        br#"{"Ok":{"Done":{"disks":["srp1-0","srp1-1","srp1-2"]}}}"#
    );
    // And the next connection is served.
    assert_eq!(client(&s).disks().expect("disks").len(), 3);
}

#[test]
fn a_missing_socket_says_to_start_the_daemon() {
    let dir = TempDir::new("ctl");
    let path = dir.path().join("nobody.sock");
    let e = HostClient::connect(&path).expect_err("no daemon");
    let text = e.to_string();
    assert!(matches!(e, ClientError::Connect { path: ref p, .. } if *p == path));
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(
        text.contains("is the host daemon running? (srpctl host run -c host.toml)"),
        "{text}"
    );
}
