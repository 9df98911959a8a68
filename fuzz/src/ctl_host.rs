//! `ctl_host`: the host daemon's control service ([`HostService`], JSON bodies) behind the
//! socket framing ([`crate::ctl_frame`]), over a daemon that answers from a fixed world
//! (twelve sessions, eight disks, three persistent logins, forty targets, three portals:
//! the sessions, disks and targets span several pages).
//!
//! Beyond the framing checks, for every service request: a body that decodes reaches the
//! daemon as exactly that request, and re-encodes (canonically, once) to a body that
//! decodes to it again; the reply is the daemon's answer, paged from the request's start,
//! in a body that fits and decodes, whose list is the world's from that start; a body
//! that does not decode is refused with the status `decode_request` names and never
//! reaches the daemon; the requests of a CA socket are WRONG SOCKET.

use crate::ctl_frame::{self, Exchange, error};
use crate::input::Input;
use access_layer::ctl::wire::{CtlStatus, MAX_BODY, REPLY_BIT};
use access_layer::ctl::{Reply, Request};
use srp_hostd::control::wire::{
    self, DISKS, FORGET, LOGIN, LOGOUT, PERSISTENT, PORTALS, POWER, RELOAD, SESSIONS, SET_PATH,
    SET_POLICY, TARGETS, decode_answer, decode_request, encode_answer, encode_request,
};
use srp_hostd::control::{
    DiskInfo, HostAnswer, HostControl, HostControlError, HostRequest, HostService, LoginSpec,
    PathInfo, PortalInfo, ResetInfo, SessionInfo, TargetInfo,
};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

const OPCODES: [u16; 13] = [
    SESSIONS, DISKS, LOGIN, LOGOUT, SET_POLICY, SET_PATH, PERSISTENT, FORGET, TARGETS, PORTALS,
    RELOAD, POWER, 0x030d,
];
const POLICIES: [&str; 3] = ["round-robin", "failover-only", "least-queue-depth"];

struct World {
    sessions: Vec<SessionInfo>,
    disks: Vec<DiskInfo>,
    persistent: Vec<LoginSpec>,
    targets: Vec<TargetInfo>,
    portals: Vec<PortalInfo>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let ip = |d| IpAddr::V4(Ipv4Addr::new(10, 0, 0, d));
        let sessions: Vec<SessionInfo> = (0..12)
            .map(|i| SessionInfo {
                id: i,
                portal: ip(1),
                local: ip(2 + i as u8),
                ioc_guid: format!("{:#018x}", 0x0002_c903_00a1_b2c0u64 + u64::from(i)),
                ioc_name: format!("ioc{i}"),
                id_ext: "0x0000000000000001".into(),
                service_id: "0x0002c90300a1b2c3".into(),
                state: "running".into(),
                logins: 1,
                losses: u64::from(i),
                last_error: (i % 3 == 0).then(|| "a lost channel: \u{1f50c}".into()),
                outstanding: i,
                disks: (0..i).map(|d| format!("srp{d}")).collect(),
                login: "ib-cm".into(),
                driver: ["storport", "iscsi-model"][i as usize % 2].into(),
                hca: [("icrc_errors".to_owned(), u64::from(i))].into(),
                provider: "soft soft:10.0.0.2:4791 port 1".into(),
                fencing: "per-io".into(),
                resets: ResetInfo {
                    sequences: u64::from(i),
                    lun_resets: u64::from(i) * 2,
                    refused: u64::from(i % 2),
                    escalated: u64::from(i % 3),
                },
            })
            .collect();
        let disks = (0..8)
            .map(|i| DiskInfo {
                name: format!("srp{i}"),
                path: format!("/run/srp-host/disks/srp{i}"),
                identity: format!("naa.6001405{i:025x}"),
                vendor: "LIO-ORG".into(),
                product: "srp-target".into(),
                revision: "0001".into(),
                block_size: 512,
                blocks: 1 << 21,
                policy: POLICIES[i % 3].into(),
                queued: 0,
                reads: i as u64,
                writes: 2,
                flushes: 3,
                errors: 0,
                failovers: 1,
                latency: Default::default(),
                paths: (0..3)
                    .map(|s| PathInfo {
                        session: s,
                        lun: i as u32,
                        ioc_guid: "0x0002c90300a1b2c0".into(),
                        ioc_name: "ioc0".into(),
                        portal: ip(1),
                        local: ip(2),
                        state: "active".into(),
                        alua: Some("active/optimized".into()),
                        preferred: s == 0,
                        weight: 1,
                        in_flight: 0,
                        reads: 1,
                        writes: 2,
                        bytes: 4096,
                        errors: 0,
                        failures: 0,
                        hca_dropped: 0,
                        retransmits: 0,
                    })
                    .collect(),
            })
            .collect();
        let persistent = (0..3)
            .map(|i| LoginSpec {
                ioc_guid: Some(format!("{:#018x}", 0x0002_c903_00a1_b2c0u64 + i)),
                persistent: true,
                driver: (i == 1).then(|| "iscsi-model".into()),
                ..LoginSpec::to(ip(1))
            })
            .collect();
        let targets = (0..40)
            .map(|i| TargetInfo {
                portal: ip(1 + (i % 3) as u8),
                ioc_guid: format!("{:#018x}", 0x0002_c903_00a1_b2c0u64 + u64::from(i)),
                ioc_name: format!("ioc{i} \u{2603}"),
                id_ext: "0x0000000000000001".into(),
                service_id: format!("{:#018x}", 0x0002_c903_00a1_b2c0u64 + u64::from(i)),
                sessions: (0..i % 4).collect(),
            })
            .collect();
        let portals = (0..3)
            .map(|i| PortalInfo {
                address: ip(1 + i),
                configured: i != 2,
                local: vec![ip(10 + i)],
                driver: "iscsi-model".into(),
                login: "auto".into(),
                last_sweep: match i {
                    0 => None,
                    1 => Some(Ok(2)),
                    _ => Some(Err("no answer within 3s".into())),
                },
                swept_secs_ago: (i > 0).then_some(u64::from(i)),
            })
            .collect();
        World {
            sessions,
            disks,
            persistent,
            targets,
            portals,
        }
    })
}

/// What the daemon answers.
fn answer(request: &HostRequest) -> Result<HostAnswer, HostControlError> {
    let w = world();
    let session = |id: u32| w.sessions.iter().find(|s| s.id == id);
    match request {
        HostRequest::Sessions => Ok(HostAnswer::Sessions(w.sessions.clone())),
        HostRequest::Disks => Ok(HostAnswer::Disks(w.disks.clone())),
        HostRequest::Login(spec) => match &spec.ioc_guid {
            Some(g) if srp_hostd::config::parse_id64(g).is_err() => {
                Err(HostControlError::BadRequest(format!("bad GUID {g:?}")))
            }
            _ if spec.local == Some(spec.portal) => {
                Err(HostControlError::NoLocalAddress(spec.portal))
            }
            _ => Ok(HostAnswer::LoggedIn(vec![w.sessions[0].clone()])),
        },
        HostRequest::Logout { session: id } => match session(*id) {
            Some(s) => Ok(HostAnswer::LoggedOut {
                disks_removed: s.disks.clone(),
            }),
            None => Err(HostControlError::NoSuchSession(*id)),
        },
        HostRequest::SetPolicy { disk, policy } => {
            if !POLICIES.contains(&policy.as_str()) {
                Err(HostControlError::NoSuchPolicy(policy.clone()))
            } else if w.disks.iter().any(|d| &d.name == disk) {
                Ok(HostAnswer::Done {
                    disks: vec![disk.clone()],
                })
            } else {
                Err(HostControlError::NoSuchDisk(disk.clone()))
            }
        }
        HostRequest::SetPath { session: id, .. } => match session(*id) {
            Some(s) => Ok(HostAnswer::Done {
                disks: s.disks.clone(),
            }),
            None => Err(HostControlError::NoSuchSession(*id)),
        },
        HostRequest::Power { suspend } => Ok(HostAnswer::Powered {
            sessions: w
                .sessions
                .iter()
                .map(|s| {
                    let done = if *suspend { "suspended" } else { "resumed" };
                    format!("session {}: {done}", s.id)
                })
                .collect(),
        }),
        HostRequest::PersistentLogins => Ok(HostAnswer::Persistent(w.persistent.clone())),
        HostRequest::Targets => Ok(HostAnswer::Targets(w.targets.clone())),
        HostRequest::Portals => Ok(HostAnswer::Portals(w.portals.clone())),
        HostRequest::Reload => Ok(HostAnswer::Reloaded {
            changes: vec!["portal 10.0.0.9 added: swept now".into()],
        }),
        HostRequest::RemovePersistent { index } => match w.persistent.get(*index as usize) {
            Some(l) => Ok(HostAnswer::Forgotten(l.clone())),
            None => Err(HostControlError::NoSuchPersistent(*index)),
        },
    }
}

/// The daemon: answers, and remembers what it was asked.
#[derive(Default)]
struct Daemon {
    asked: Mutex<Option<HostRequest>>,
}

impl HostControl for Daemon {
    fn call(&self, request: HostRequest) -> Result<HostAnswer, HostControlError> {
        let a = answer(&request);
        *self.asked.lock().unwrap_or_else(PoisonError::into_inner) = Some(request);
        a
    }
}

/// Some text: a name the world knows, or any.
fn text(input: &mut Input<'_>, known: &[&str]) -> String {
    match input.below(4) {
        0 => {
            let n = input.below(40);
            String::from_utf8_lossy(input.bytes(n)).into_owned()
        }
        _ => input.pick(known).to_owned(),
    }
}

fn ip(input: &mut Input<'_>) -> IpAddr {
    match input.below(4) {
        0 => IpAddr::from(
            input
                .u64()
                .to_be_bytes()
                .repeat(2)
                .try_into()
                .unwrap_or([0u8; 16]),
        ),
        _ => IpAddr::V4(Ipv4Addr::from(input.u32())),
    }
}

/// A well-formed body for `opcode`, through the host's own encoder.
fn body(input: &mut Input<'_>, opcode: u16) -> Vec<u8> {
    let session = match input.below(4) {
        0 => input.u32(),
        _ => u32::from(input.u8() % 14),
    };
    let request = match opcode {
        SESSIONS => HostRequest::Sessions,
        DISKS => HostRequest::Disks,
        LOGIN => HostRequest::Login(LoginSpec {
            portal: ip(input),
            local: input.bool().then(|| ip(input)),
            ioc_guid: input
                .bool()
                .then(|| text(input, &["0x0002c90300a1b2c3", "0002:c903:00a1:b2c3", "0x"])),
            persistent: input.bool(),
            driver: input
                .bool()
                .then(|| text(input, &["storport", "iscsi-model"])),
        }),
        PERSISTENT => HostRequest::PersistentLogins,
        TARGETS => HostRequest::Targets,
        PORTALS => HostRequest::Portals,
        RELOAD => HostRequest::Reload,
        POWER => HostRequest::Power {
            suspend: input.bool(),
        },
        FORGET => HostRequest::RemovePersistent { index: session },
        LOGOUT => HostRequest::Logout { session },
        SET_POLICY => HostRequest::SetPolicy {
            disk: text(input, &["srp0", "srp7", "srp8"]),
            policy: text(input, &POLICIES),
        },
        _ => HostRequest::SetPath {
            session,
            enabled: input.bool(),
        },
    };
    let start = match input.below(4) {
        0 => input.u32(),
        _ => u32::from(input.u8() % 16),
    };
    encode_request(&request, start)
        .map(|(_, b)| b)
        .unwrap_or_default()
}

/// `page` is a page of `all` from `skip`, empty only at the end.
fn check_page<T: Clone + PartialEq + std::fmt::Debug>(
    all: &[T],
    skip: usize,
    page: &[T],
    what: &str,
) {
    let rest = all.get(skip..).unwrap_or_default();
    assert!(
        rest.starts_with(page),
        "a page of the {what} from {skip}: {page:?} of {rest:?}"
    );
    assert_eq!(
        page.is_empty(),
        rest.is_empty(),
        "an empty page before the end"
    );
}

/// One input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let stream = ctl_frame::stream(&mut input, &OPCODES, body);
    let daemon = Arc::new(Daemon::default());
    let service = HostService::new(daemon.clone());
    ctl_frame::serve(&service, &stream, |x| check(&daemon, x));
}

fn check(daemon: &Daemon, x: Exchange<'_>) {
    let asked = daemon
        .asked
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let Ok(request) = x.request else {
        assert_eq!(asked, None, "a refused message reached the daemon");
        return;
    };
    let Request::Service { opcode, body } = request else {
        if !matches!(request, Request::Hello(_)) {
            assert_eq!(*x.reply, error(CtlStatus::WrongSocket));
        }
        assert_eq!(asked, None, "a CA socket request reached the daemon");
        return;
    };
    let (req, start) = match decode_request(opcode, &body) {
        Ok(d) => d,
        Err(status) => {
            assert_eq!(*x.reply, error(status), "{opcode:#x} {body:02x?}");
            assert_eq!(asked, None, "a refused request reached the daemon");
            return;
        }
    };
    assert_eq!(
        asked.as_ref(),
        Some(&req),
        "the daemon got what the body said"
    );
    // The encoder's body decodes to the same request, and is its own canonical form.
    let (op, again) = encode_request(&req, start).expect("a decoded request encodes");
    assert_eq!(op, opcode);
    assert_eq!(decode_request(op, &again), Ok((req.clone(), start)));
    let is_list = matches!(
        req,
        HostRequest::Sessions
            | HostRequest::Disks
            | HostRequest::PersistentLogins
            | HostRequest::Targets
            | HostRequest::Portals
    );
    let (_, again2) = encode_request(&req, start).expect("encodes");
    assert_eq!(again, again2);
    let Reply::Service {
        opcode: rop,
        body: reply,
    } = x.reply
    else {
        panic!("{opcode:#x}: not a service reply: {:?}", x.reply);
    };
    assert_eq!(*rop, opcode | REPLY_BIT);
    assert!(reply.len() <= MAX_BODY as usize);
    assert_eq!(
        *reply,
        encode_answer(answer(&req), start),
        "the reply is the answer"
    );
    let decoded: wire::Answer = decode_answer(reply).expect("a reply body decodes");
    let w = world();
    let skip = start as usize;
    match decoded {
        Ok(HostAnswer::Sessions(page)) if is_list => {
            let rest: Vec<_> = w.sessions.iter().skip(skip).cloned().collect();
            assert!(
                rest.starts_with(&page),
                "a page of the sessions from {start}"
            );
            assert_eq!(
                page.is_empty(),
                rest.is_empty(),
                "an empty page before the end"
            );
        }
        Ok(HostAnswer::Persistent(page)) if is_list => {
            check_page(&w.persistent, skip, &page, "persistent logins");
        }
        Ok(HostAnswer::Targets(page)) if is_list => check_page(&w.targets, skip, &page, "targets"),
        Ok(HostAnswer::Portals(page)) if is_list => check_page(&w.portals, skip, &page, "portals"),
        Ok(HostAnswer::Disks(page)) if is_list => {
            let rest: Vec<_> = w.disks.iter().skip(skip).cloned().collect();
            assert!(rest.starts_with(&page), "a page of the disks from {start}");
            assert_eq!(
                page.is_empty(),
                rest.is_empty(),
                "an empty page before the end"
            );
        }
        other => {
            let want = answer(&req);
            if other != want {
                // An answer too long for a body is replaced by the daemon's text, cut.
                let Err(HostControlError::Failed(cut)) = &other else {
                    panic!("{opcode:#x}: {other:?} instead of {want:?}");
                };
                let full = want.as_ref().err().map(ToString::to_string);
                let kept = cut.trim_end_matches('…');
                assert!(
                    cut.ends_with('…') && full.is_some_and(|f| f.starts_with(kept)),
                    "{opcode:#x}: {cut:?} is not {want:?} cut"
                );
            }
        }
    }
}
