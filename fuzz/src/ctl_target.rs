//! `ctl_target`: the target's control service ([`TargetService`], JSON bodies) behind the
//! socket framing ([`crate::ctl_frame`]), over a fake daemon loop (a thread draining the
//! [`ControlHandle`]'s channel) that answers from a fixed world: three IOCs, two ports
//! (HCA counters and device objects), seventy LUNs (counters, latency histograms), thirty
//! sessions, the running config's lines (one of them too long for a body) and the metrics'
//! lines. The LUN, session, config and metrics lists span several pages. The service is
//! built without a configuration file (`config_path: None`).
//!
//! Beyond the framing checks, for every service request: a body that decodes reaches the
//! loop as exactly that request, and re-encodes (canonically: decoding and encoding again
//! gives the same bytes) to a body that decodes to it again; the reply is the loop's
//! answer, paged from the request's start, in a body that fits and decodes; a list reply
//! is the world's list from that start, as many entries as fit (empty only past the end),
//! or the error naming the entry at the start when that one alone does not fit; SET_IOC,
//! SET_PORT and SET_LUN answer `Done` for a name the world has and NoSuchIoc, NoSuchPort,
//! NoSuchLun otherwise; RELOAD answers NoConfigFile and never reaches the loop; a body that
//! does not decode is refused with the status `decode_request` names (MALFORMED for the
//! service's opcodes, UNKNOWN OPCODE for others) and never reaches the loop; the requests
//! of a CA socket are WRONG SOCKET.

use crate::ctl_frame::{self, Exchange, error};
use crate::input::Input;
use access_layer::ctl::json::to_json;
use access_layer::ctl::wire::{CtlStatus, MAX_BODY, REPLY_BIT};
use access_layer::ctl::{Reply, Request};
use ib_verbs::{PortCounters, Resources};
use opskit::metrics::Histogram;
use srp::wire::PortId;
use srp_target::control::handle::ControlHandle;
use srp_target::control::wire::{
    Answer, CONFIG, LIST_IOCS, LIST_LUNS, LIST_PORTS, LIST_SESSIONS, METRICS, RELOAD, SET_IOC,
    SET_LUN, SET_PORT, decode_answer, decode_request, encode_answer, encode_request,
};
use srp_target::control::{
    ControlAnswer, ControlError, ControlRequest, DisableMode, IocStatus, LoginForm, LunStatus,
    PortStatus, ReloadReport, SessionStatus, TargetService,
};
use srp_target::exec::counters::{LuCountersSnapshot, LuLatency};
use srp_target::io::SessionCounters;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The service's opcodes.
const KNOWN: [u16; 10] = [
    LIST_IOCS,
    LIST_PORTS,
    LIST_LUNS,
    LIST_SESSIONS,
    CONFIG,
    METRICS,
    SET_IOC,
    SET_PORT,
    SET_LUN,
    RELOAD,
];

/// What the stream's framed messages use: the service's opcodes and a few next to them.
const OPCODES: [u16; 14] = [
    LIST_IOCS,
    LIST_PORTS,
    LIST_LUNS,
    LIST_SESSIONS,
    CONFIG,
    METRICS,
    SET_IOC,
    SET_PORT,
    SET_LUN,
    RELOAD,
    0x0200,
    0x0207,
    0x020f,
    0x0214,
];

/// Names of IOCs, ports and LUNs a request may carry: the world's and some it lacks.
const IOC_NAMES: [&str; 6] = ["ioc0", "ioc-\u{e9}", "ioc \"2\"", "ioc9", "IOC0", ""];
const PORT_NAMES: [&str; 4] = ["p0", "p1", "p7", ""];
const LUN_NAMES: [&str; 6] = ["vol0", "vol69", "vol \"33\" \u{2603}", "vol33", "vol70", ""];

/// What the fake daemon holds.
struct World {
    iocs: Vec<IocStatus>,
    ports: Vec<PortStatus>,
    luns: Vec<LunStatus>,
    sessions: Vec<SessionStatus>,
    config: Vec<String>,
    metrics: Vec<String>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let iocs: Vec<IocStatus> = (0..3u32)
            .map(|i| IocStatus {
                name: IOC_NAMES[i as usize].into(),
                guid: 0x0002_c903_00a1_b2c0 + u64::from(i),
                id_ext: u64::from(i),
                service_id: 0x0002_c903_00a1_b2c0 + u64::from(i),
                enabled: i != 1,
                luns: 70,
                sessions: 10,
            })
            .collect();
        let ports: Vec<PortStatus> = (0..2u16)
            .map(|i| PortStatus {
                name: format!("p{i}"),
                address: format!("192.0.2.{}:{}", 10 + i, 4791 + i)
                    .parse()
                    .expect("address"),
                active: i == 0,
                provider: format!("soft soft:192.0.2.{}:{} port 1", 10 + i, 4791 + i),
                sessions: 15,
                resources: Resources {
                    qps: 31,
                    cqs: 16,
                    srqs: usize::from(i),
                    mrs: 30,
                },
                hca: PortCounters(
                    ["rx_packets", "tx_packets", "icrc_errors", "dropped"]
                        .iter()
                        .enumerate()
                        .map(|(c, n)| {
                            (
                                (*n).to_owned(),
                                (c as u64 + 1) * 1_000_003 * u64::from(i + 1),
                            )
                        })
                        .collect(),
                ),
            })
            .collect();
        let luns: Vec<LunStatus> = (0..70u64)
            .map(|i| {
                let mut latency = LuLatency::default();
                if i % 3 == 0 {
                    for us in [3, 250, 12_000, 9_000_000] {
                        latency.read.record(us * (i + 1));
                        latency.flush.record(us);
                    }
                    latency.write = Histogram {
                        buckets: vec![i; 4],
                        sum_us: u64::MAX,
                        count: 4 * i,
                    };
                }
                LunStatus {
                    name: if i == 33 {
                        LUN_NAMES[2].into()
                    } else {
                        format!("vol{i}")
                    },
                    naa: [0x60 | (i as u8 & 0x0f); 16],
                    blocks: 1 << (10 + i % 40),
                    block_size: if i % 4 == 0 { 4096 } else { 512 },
                    read_only: i % 5 == 0,
                    write_cache: i % 2 == 0,
                    flush_failed: i % 7 == 0,
                    counters: LuCountersSnapshot {
                        commands: i * 1_000_000,
                        reads: i * 600_000,
                        writes: i * 400_000,
                        bytes_read: i << 32,
                        bytes_written: i << 31,
                        check_conditions: i,
                        reservation_conflicts: i / 2,
                        flush_errors: u64::from(i % 7 == 0),
                        writes_held: i * 3,
                        writes_busy_for_copies: i % 3,
                        copy_collisions: i % 2,
                        async_commands: i * 900_000,
                        async_peak: i % 64,
                    },
                    latency,
                }
            })
            .collect();
        let sessions: Vec<SessionStatus> = (0..30u64)
            .map(|i| SessionStatus {
                channel: i + 1,
                ioc: iocs[i as usize % 3].name.clone(),
                port: ports[i as usize % 2].name.clone(),
                initiator: PortId([i as u8; 16]),
                form: if i % 2 == 0 {
                    LoginForm::IbCm
                } else {
                    LoginForm::RdmaCm
                },
                window: 32,
                max_it_iu_len: 4148,
                in_flight: (i % 9) as u32,
                age_secs: i * 60,
                counters: SessionCounters {
                    commands: i * 99_999,
                    task_mgmt: i,
                    data_in_bytes: i << 33,
                    data_out_bytes: i << 30,
                    check_conditions: i * 3,
                    busy: i % 4,
                    reservation_conflicts: i % 2,
                    aborted: i % 5,
                    late_task_mgmt: i % 3,
                    send_queue_waits: i % 7,
                },
            })
            .collect();
        let mut config: Vec<String> = [
            "[target]",
            "name = \"srp-target-fuzz\"",
            "state_dir = \"/var/lib/srp-target\"",
            "",
        ]
        .map(String::from)
        .into();
        for p in &ports {
            config.extend([
                "[[port]]".into(),
                format!("name = {:?}", p.name),
                format!("address = \"{}\"", p.address),
                String::new(),
            ]);
        }
        for i in &iocs {
            config.extend([
                "[[ioc]]".into(),
                format!("name = {:?}", i.name),
                format!("guid = \"{:#018x}\"", i.guid),
                format!("enabled = {}", i.enabled),
            ]);
            if i.id_ext == 1 {
                // An ACL on one line, longer than a body carries.
                let ids: Vec<String> = (0..120u64)
                    .map(|n| format!("\"{:#034x}\"", u128::from(n) << 64 | 0x0002_c903))
                    .collect();
                config.push(format!("initiators = [{}]", ids.join(", ")));
            }
            config.push(String::new());
        }
        for l in &luns {
            config.extend([
                "[[lun]]".into(),
                format!("name = {:?}", l.name),
                format!("path = \"/srv/srp/{}.img\"", l.name.replace('"', "")),
                format!("block_size = {}", l.block_size),
                format!("read_only = {}", l.read_only),
                String::new(),
            ]);
        }
        let mut metrics = Vec::new();
        for (name, help) in [
            ("srp_target_lun_reads_total", "READ commands executed"),
            ("srp_target_lun_writes_total", "medium-modifying commands"),
            ("srp_target_lun_flush_failed", "a latched flush error"),
        ] {
            metrics.push(format!("# HELP {name} {help}"));
            metrics.push(format!("# TYPE {name} counter"));
            for l in &luns {
                let label = l.name.replace('"', "\\\"");
                metrics.push(format!("{name}{{lun=\"{label}\"}} {}", l.counters.reads));
            }
        }
        World {
            iocs,
            ports,
            luns,
            sessions,
            config,
            metrics,
        }
    })
}

/// What the daemon's loop answers.
fn answer(request: &ControlRequest) -> Answer {
    let w = world();
    let done = |n| Ok(ControlAnswer::Done { sessions_ended: n });
    match request {
        ControlRequest::ListIocs => Ok(ControlAnswer::Iocs(w.iocs.clone())),
        ControlRequest::ListPorts => Ok(ControlAnswer::Ports(w.ports.clone())),
        ControlRequest::ListLuns => Ok(ControlAnswer::Luns(w.luns.clone())),
        ControlRequest::ListSessions => Ok(ControlAnswer::Sessions(w.sessions.clone())),
        ControlRequest::RunningConfig => Ok(ControlAnswer::Config(w.config.clone())),
        ControlRequest::Metrics => Ok(ControlAnswer::Metrics(w.metrics.clone())),
        ControlRequest::SetIoc { name, enabled, .. } => {
            match w.iocs.iter().find(|i| &i.name == name) {
                Some(i) => done(if *enabled { 0 } else { i.sessions }),
                None => Err(ControlError::NoSuchIoc(name.clone())),
            }
        }
        ControlRequest::SetPort { name, enabled } => {
            match w.ports.iter().find(|p| &p.name == name) {
                Some(p) => done(if *enabled { 0 } else { p.sessions }),
                None => Err(ControlError::NoSuchPort(name.clone())),
            }
        }
        ControlRequest::ClearFlushError { name } => match w.luns.iter().find(|l| &l.name == name) {
            Some(l) => done(u32::from(l.flush_failed)),
            None => Err(ControlError::NoSuchLun(name.clone())),
        },
        // Never asked of this loop (the service has no file to read): an answer all the
        // same, so that the check, not a timeout, says so.
        ControlRequest::Reload | ControlRequest::Apply(_) => {
            Ok(ControlAnswer::Reloaded(ReloadReport {
                changes: vec!["lun vol70 added (exported as LUN 70 by ioc0)".into()],
                sessions_ended: 0,
            }))
        }
    }
}

/// A name: one from `known`, or any text (some of it long, to near the body limit).
fn name(input: &mut Input<'_>, known: &[&str]) -> String {
    match input.below(8) {
        0 => {
            let n = input.below(41);
            String::from_utf8_lossy(input.bytes(n)).into_owned()
        }
        1 => {
            let unit = input.pick(&["x", "\u{e9}", "\"", "\\", "\u{1}", "\n", "\u{1f50c}"]);
            unit.repeat(4 * input.below(170) + 1)
        }
        _ => input.pick(known).to_owned(),
    }
}

/// A body for `opcode`: a request's body through the target's own encoder (the request
/// `opcode` names; for another opcode, any), sometimes bent ([`bend`]).
fn body(input: &mut Input<'_>, opcode: u16) -> Vec<u8> {
    let start = match input.below(4) {
        0 => input.u32(),
        1 => u32::from(input.u16() % 512),
        _ => u32::from(input.u8()),
    };
    let kind = if KNOWN.contains(&opcode) {
        opcode
    } else {
        input.pick(&KNOWN)
    };
    let request = match kind {
        LIST_IOCS => ControlRequest::ListIocs,
        LIST_PORTS => ControlRequest::ListPorts,
        LIST_LUNS => ControlRequest::ListLuns,
        LIST_SESSIONS => ControlRequest::ListSessions,
        CONFIG => ControlRequest::RunningConfig,
        METRICS => ControlRequest::Metrics,
        SET_IOC => ControlRequest::SetIoc {
            name: name(input, &IOC_NAMES),
            enabled: input.bool(),
            mode: if input.bool() {
                DisableMode::Logout
            } else {
                DisableMode::Drop
            },
        },
        SET_PORT => ControlRequest::SetPort {
            name: name(input, &PORT_NAMES),
            enabled: input.bool(),
        },
        SET_LUN => ControlRequest::ClearFlushError {
            name: name(input, &LUN_NAMES),
        },
        _ => ControlRequest::Reload,
    };
    let json = encode_request(&request, start)
        .map(|(_, b)| b)
        .expect("a socket request encodes");
    bend(input, json)
}

/// `json` as it is, or changed the way a hand-written client's body might differ: spaces,
/// an extra or repeated field, `false` for `true`, cut short, a byte replaced.
fn bend(input: &mut Input<'_>, mut json: Vec<u8>) -> Vec<u8> {
    let inner = 1..json.len().saturating_sub(1).max(1);
    match input.below(12) {
        0 => {
            json.splice(inner.end..inner.end, *b" \n\t");
            json.splice(inner.start..inner.start, *b"\r\n  ");
        }
        1 => {
            let field = input.pick(&[
                &br#""path":"/etc/srp-target.toml","#[..],
                br#""start":1,"#,
                br#""name":"ioc0","#,
                br#""x":[null,{"y":1.5e300}],"#,
            ]);
            // Inside the braces, before the first field (or as the only one).
            let field = if json.len() <= 2 {
                &field[..field.len() - 1]
            } else {
                field
            };
            json.splice(inner.start..inner.start, field.iter().copied());
        }
        2 => {
            if let Some(at) = json.windows(4).rposition(|w| w == b"true") {
                json.splice(at..at + 4, *b"false");
            }
        }
        3 => json.truncate(input.below(json.len().max(1))),
        4 => {
            let at = input.below(json.len().max(1));
            if let Some(b) = json.get_mut(at) {
                *b = input.pick(b"\"{}[],:-.0e\\ u\x00\xff");
            }
        }
        _ => {}
    }
    json
}

/// What the loop was asked since the last check.
static ASKED: Mutex<Option<ControlRequest>> = Mutex::new(None);

/// The service (without a configuration file), over a handle whose loop is a thread
/// answering with [`answer`] and noting each request in [`ASKED`]. One for the process: a
/// thread per input would cost more than the input, and its exit races LeakSanitizer.
fn service() -> &'static TargetService {
    static SERVICE: OnceLock<TargetService> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let (handle, requests) = ControlHandle::pair();
        std::thread::spawn(move || {
            for p in requests {
                let a = answer(&p.request);
                *ASKED.lock().unwrap_or_else(PoisonError::into_inner) = Some(p.request);
                let _ = p.reply.send(a);
            }
        });
        TargetService::new(handle, None)
    })
}

/// One input.
pub fn run(data: &[u8]) {
    // One input at a time (the loop and ASKED are the process's), from a clean slate.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(PoisonError::into_inner);
    ASKED.lock().unwrap_or_else(PoisonError::into_inner).take();
    let mut input = Input::new(data);
    let stream = ctl_frame::stream(&mut input, &OPCODES, body);
    ctl_frame::serve(service(), &stream, |x| check(&ASKED, x));
}

fn check(asked: &Mutex<Option<ControlRequest>>, x: Exchange<'_>) {
    let asked = asked.lock().unwrap_or_else(PoisonError::into_inner).take();
    let Ok(request) = x.request else {
        assert_eq!(asked, None, "a refused message reached the loop");
        return;
    };
    let Request::Service { opcode, body } = request else {
        if !matches!(request, Request::Hello(_)) {
            assert_eq!(*x.reply, error(CtlStatus::WrongSocket));
        }
        assert_eq!(asked, None, "a CA socket request reached the loop");
        return;
    };
    let (req, start) = match decode_request(opcode, &body) {
        Ok(d) => d,
        Err(status) => {
            let named = if KNOWN.contains(&opcode) {
                CtlStatus::Malformed
            } else {
                CtlStatus::UnknownOpcode
            };
            assert_eq!(status, named, "{opcode:#x} {body:02x?}");
            assert_eq!(*x.reply, error(status), "{opcode:#x} {body:02x?}");
            assert_eq!(asked, None, "a refused request reached the loop");
            return;
        }
    };
    assert!(KNOWN.contains(&opcode), "{opcode:#x} decoded");
    // The encoder's body decodes to the same request, and is its own canonical form.
    let (op, again) = encode_request(&req, start).expect("a decoded request encodes");
    assert_eq!(op, opcode, "re-encoded opcode");
    let (req2, start2) = decode_request(op, &again).expect("an encoded request decodes");
    assert_eq!((&req2, start2), (&req, start));
    assert_eq!(encode_request(&req2, start2).map(|(_, b)| b), Some(again));
    // What reached the loop, and what the reply must carry.
    let want = if req == ControlRequest::Reload {
        assert_eq!(
            asked, None,
            "a RELOAD without a config file reached the loop"
        );
        Err(ControlError::NoConfigFile)
    } else {
        assert_eq!(
            asked.as_ref(),
            Some(&req),
            "the loop got what the body said"
        );
        answer(&req)
    };
    let Reply::Service {
        opcode: rop,
        body: reply,
    } = x.reply
    else {
        panic!("{opcode:#x}: not a service reply: {:?}", x.reply);
    };
    assert_eq!(*rop, opcode | REPLY_BIT, "reply opcode");
    assert!(reply.len() <= MAX_BODY as usize, "a reply over MAX_BODY");
    assert_eq!(
        *reply,
        encode_answer(want.clone(), start),
        "the reply is the answer"
    );
    let got = decode_answer(reply).expect("a reply body decodes");
    let w = world();
    match req {
        ControlRequest::ListIocs => check_page(&w.iocs, start, got, ControlAnswer::Iocs, |a| {
            if let ControlAnswer::Iocs(v) = a {
                Some(v)
            } else {
                None
            }
        }),
        ControlRequest::ListPorts => check_page(&w.ports, start, got, ControlAnswer::Ports, |a| {
            if let ControlAnswer::Ports(v) = a {
                Some(v)
            } else {
                None
            }
        }),
        ControlRequest::ListLuns => check_page(&w.luns, start, got, ControlAnswer::Luns, |a| {
            if let ControlAnswer::Luns(v) = a {
                Some(v)
            } else {
                None
            }
        }),
        ControlRequest::ListSessions => {
            check_page(&w.sessions, start, got, ControlAnswer::Sessions, |a| {
                if let ControlAnswer::Sessions(v) = a {
                    Some(v)
                } else {
                    None
                }
            })
        }
        ControlRequest::RunningConfig => {
            check_page(&w.config, start, got, ControlAnswer::Config, |a| {
                if let ControlAnswer::Config(v) = a {
                    Some(v)
                } else {
                    None
                }
            })
        }
        ControlRequest::Metrics => {
            check_page(&w.metrics, start, got, ControlAnswer::Metrics, |a| {
                if let ControlAnswer::Metrics(v) = a {
                    Some(v)
                } else {
                    None
                }
            })
        }
        ControlRequest::SetIoc { .. }
        | ControlRequest::SetPort { .. }
        | ControlRequest::ClearFlushError { .. }
        | ControlRequest::Reload
        | ControlRequest::Apply(_) => {
            // Small answers: carried whole (a name in one fits, as it fitted the request).
            assert_eq!(got, want, "{opcode:#x}");
            let known = match &req {
                ControlRequest::SetIoc { name, .. } => Some(w.iocs.iter().any(|i| &i.name == name)),
                ControlRequest::SetPort { name, .. } => {
                    Some(w.ports.iter().any(|p| &p.name == name))
                }
                ControlRequest::ClearFlushError { name } => {
                    Some(w.luns.iter().any(|l| &l.name == name))
                }
                _ => None,
            };
            match (known, &got) {
                (Some(true), Ok(ControlAnswer::Done { .. }))
                | (
                    Some(false),
                    Err(
                        ControlError::NoSuchIoc(_)
                        | ControlError::NoSuchPort(_)
                        | ControlError::NoSuchLun(_),
                    ),
                )
                | (None, Err(ControlError::NoConfigFile)) => {}
                other => panic!("{opcode:#x}: {other:?}"),
            }
        }
    }
}

/// `got`, the answer to a list request from `start`, is the page of `all` from there: as
/// many entries as fit a body (`wrap` makes the answer of a page, `unwrap` takes it back),
/// empty only past the end; or, when the entry at `start` does not fit alone, the error
/// naming it.
fn check_page<T: Clone + PartialEq + core::fmt::Debug>(
    all: &[T],
    start: u32,
    got: Answer,
    wrap: fn(Vec<T>) -> ControlAnswer,
    unwrap: fn(ControlAnswer) -> Option<Vec<T>>,
) {
    let rest = all.get(start as usize..).unwrap_or_default();
    let len = |entries: &[T]| to_json(&Ok::<_, ControlError>(wrap(entries.to_vec()))).len();
    match got {
        Ok(a) => {
            let Some(page) = unwrap(a.clone()) else {
                panic!("not a page: {a:?}");
            };
            assert!(rest.starts_with(&page), "a page from {start}: {page:?}");
            assert_eq!(
                page.is_empty(),
                rest.is_empty(),
                "an empty page before the end ({start})"
            );
            if let Some(next) = rest.get(..page.len() + 1) {
                assert!(
                    len(next) > MAX_BODY as usize,
                    "a page from {start} stops at {} entries, yet one more fits",
                    page.len()
                );
            }
        }
        Err(ControlError::Failed(why)) => {
            assert!(
                rest.get(..1)
                    .is_some_and(|first| len(first) > MAX_BODY as usize),
                "a page from {start} refused: {why}"
            );
            assert!(why.contains(&format!(" entry {start} is ")), "{why}");
        }
        Err(e) => panic!("a page from {start}: {e:?}"),
    }
}
