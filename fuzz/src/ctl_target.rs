//! `ctl_target`: the target's control service ([`TargetService`]) behind the socket framing
//! ([`crate::ctl_frame`]), over a daemon loop that answers from a fixed world (three IOCs,
//! two ports, seventy LUNs, five sessions: the LUN list spans several pages).
//!
//! Beyond the framing checks, for every service request: a body that parses is answered
//! with the page of the world's list from its start (exactly `Page::of`), or `Done` for a
//! name that exists and NOT FOUND for one that does not; a body that does not parse is
//! MALFORMED; an opcode the service lacks is UNKNOWN OPCODE; the requests of a CA socket
//! are WRONG SOCKET. Parsed request bodies round-trip.

use crate::ctl_frame::{self, Exchange, error};
use crate::input::Input;
use crate::round_trip::round_trip;
use access_layer::ctl::wire::{CtlStatus, REPLY_BIT};
use access_layer::ctl::{Reply, Request};
use hca::engine::{Resources, Stats};
use srp::wire::PortId;
use srp_target::control::handle::ControlHandle;
use srp_target::control::wire::{
    Done, LIST_IOCS, LIST_LUNS, LIST_PORTS, LIST_SESSIONS, ListPage, Page, SET_IOC, SET_LUN,
    SET_PORT, SetIoc, SetLun, SetPort,
};
use srp_target::control::{
    ControlAnswer, ControlError, ControlRequest, DisableMode, IocStatus, LoginForm, LunStatus,
    PortStatus, SessionStatus, TargetService,
};
use std::sync::OnceLock;
use wirekit::WireRepr;

const OPCODES: [u16; 8] = [
    LIST_IOCS,
    LIST_PORTS,
    LIST_LUNS,
    LIST_SESSIONS,
    SET_IOC,
    SET_PORT,
    SET_LUN,
    0x0213,
];

/// What the fake daemon holds.
struct World {
    iocs: Vec<IocStatus>,
    ports: Vec<PortStatus>,
    luns: Vec<LunStatus>,
    sessions: Vec<SessionStatus>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| World {
        iocs: (0..3)
            .map(|i| IocStatus {
                name: format!("ioc{i}"),
                guid: 0x0002_c903_00a1_b2c0 + i,
                id_ext: i,
                service_id: 0x0002_c903_00a1_b2c0 + i,
                enabled: i != 1,
                luns: 70,
                sessions: 2,
            })
            .collect(),
        ports: (0..2)
            .map(|i| PortStatus {
                name: format!("p{i}"),
                address: format!("192.0.2.{}:4791", 10 + i).parse().expect("address"),
                active: true,
                sessions: 3,
                resources: Resources::default(),
                hca: Stats::default(),
            })
            .collect(),
        luns: (0..70u64)
            .map(|i| LunStatus {
                name: format!("vol{i}"),
                naa: [0x60 | (i as u8 & 0x0f); 16],
                blocks: 1 << (10 + i % 20),
                block_size: 512,
                read_only: i % 5 == 0,
                write_cache: i % 2 == 0,
                flush_failed: i % 7 == 0,
                counters: Default::default(),
            })
            .collect(),
        sessions: (0..5)
            .map(|i| SessionStatus {
                channel: i,
                ioc: "ioc0".into(),
                port: "p0".into(),
                initiator: PortId([i as u8; 16]),
                form: if i % 2 == 0 {
                    LoginForm::IbCm
                } else {
                    LoginForm::RdmaCm
                },
                window: 32,
                max_it_iu_len: 4148,
                in_flight: 0,
                age_secs: i * 60,
                counters: Default::default(),
            })
            .collect(),
    })
}

/// What the daemon's loop answers.
fn call(request: ControlRequest) -> Result<ControlAnswer, ControlError> {
    let w = world();
    let done = Ok(ControlAnswer::Done { sessions_ended: 1 });
    match request {
        ControlRequest::ListIocs => Ok(ControlAnswer::Iocs(w.iocs.clone())),
        ControlRequest::ListPorts => Ok(ControlAnswer::Ports(w.ports.clone())),
        ControlRequest::ListLuns => Ok(ControlAnswer::Luns(w.luns.clone())),
        ControlRequest::ListSessions => Ok(ControlAnswer::Sessions(w.sessions.clone())),
        ControlRequest::SetIoc { name, .. } if w.iocs.iter().any(|i| i.name == name) => done,
        ControlRequest::SetIoc { name, .. } => Err(ControlError::NoSuchIoc(name)),
        ControlRequest::SetPort { name, .. } if w.ports.iter().any(|p| p.name == name) => done,
        ControlRequest::SetPort { name, .. } => Err(ControlError::NoSuchPort(name)),
        ControlRequest::ClearFlushError { name } if w.luns.iter().any(|l| l.name == name) => done,
        ControlRequest::ClearFlushError { name } => Err(ControlError::NoSuchLun(name)),
    }
}

/// The service, over a handle whose loop is a thread answering with [`call`].
fn service() -> &'static TargetService {
    static SERVICE: OnceLock<TargetService> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let (handle, rx) = ControlHandle::pair();
        std::thread::spawn(move || {
            for p in rx {
                let _ = p.reply.send(call(p.request));
            }
        });
        TargetService::new(handle)
    })
}

/// A name: one the world has, or any.
fn name(input: &mut Input<'_>, have: &[&str]) -> String {
    match input.below(4) {
        0 => {
            let n = 1 + input.below(64);
            String::from_utf8_lossy(input.bytes(n)).into_owned()
        }
        _ => input.pick(have).to_owned(),
    }
}

/// A body for service `opcode`, well-formed.
fn body(input: &mut Input<'_>, opcode: u16) -> Vec<u8> {
    fn emit<'a>(v: &impl WireRepr<'a>) -> Vec<u8> {
        let mut b = vec![0; v.buffer_len()];
        let n = v.emit(&mut b).unwrap_or(0);
        b.truncate(n);
        b
    }
    match opcode {
        SET_IOC => emit(&SetIoc {
            name: name(input, &["ioc0", "ioc1", "ioc2", "ioc9"]),
            enabled: input.bool(),
            mode: if input.bool() {
                DisableMode::Logout
            } else {
                DisableMode::Drop
            },
        }),
        SET_PORT => emit(&SetPort {
            name: name(input, &["p0", "p1", "p7"]),
            enabled: input.bool(),
        }),
        SET_LUN => emit(&SetLun {
            name: name(input, &["vol0", "vol69", "vol70"]),
            clear_flush_error: input.below(8) != 0,
        }),
        _ => emit(&ListPage {
            start: match input.below(4) {
                0 => input.u32(),
                _ => u32::from(input.u8() % 80),
            },
        }),
    }
}

/// One input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let stream = ctl_frame::stream(&mut input, &OPCODES, body);
    ctl_frame::serve(service(), &stream, check);
}

fn check(x: Exchange<'_>) {
    let Ok(request) = x.request else {
        return;
    };
    let Request::Service { opcode, body } = request else {
        if !matches!(request, Request::Hello(_)) {
            assert_eq!(*x.reply, error(CtlStatus::WrongSocket));
        }
        return;
    };
    let w = world();
    let expect = match opcode {
        LIST_IOCS => list(&body, &w.iocs),
        LIST_PORTS => list(&body, &w.ports),
        LIST_LUNS => list(&body, &w.luns),
        LIST_SESSIONS => list(&body, &w.sessions),
        SET_IOC => set(SetIoc::parse(&body).map(named), |n| {
            w.iocs.iter().any(|i| i.name == n)
        }),
        SET_PORT => set(SetPort::parse(&body).map(named), |n| {
            w.ports.iter().any(|p| p.name == n)
        }),
        SET_LUN => match SetLun::parse(&body) {
            Ok(s) if s.clear_flush_error => {
                round_trip(&s, &mut Vec::new());
                set(Ok::<_, ()>(s.name), |n| w.luns.iter().any(|l| l.name == n))
            }
            _ => Expect::Error(CtlStatus::Malformed),
        },
        _ => Expect::Error(CtlStatus::UnknownOpcode),
    };
    let got = match x.reply {
        Reply::Service { opcode: op, body } => {
            assert_eq!(*op, opcode | REPLY_BIT, "reply opcode");
            Some(body.as_slice())
        }
        _ => None,
    };
    match expect {
        Expect::Error(status) => assert_eq!(*x.reply, error(status), "{opcode:#x} {body:02x?}"),
        Expect::Body(want) => assert_eq!(got, Some(want.as_slice()), "{opcode:#x} {body:02x?}"),
    }
}

/// A parsed request body round-trips; its name.
fn named<T>(v: T) -> String
where
    T: Named + PartialEq + core::fmt::Debug + for<'a> WireRepr<'a>,
{
    round_trip(&v, &mut Vec::new());
    v.name()
}

trait Named {
    fn name(&self) -> String;
}

impl Named for SetIoc {
    fn name(&self) -> String {
        self.name.clone()
    }
}

impl Named for SetPort {
    fn name(&self) -> String {
        self.name.clone()
    }
}

enum Expect {
    Error(CtlStatus),
    Body(Vec<u8>),
}

/// The page of `all` a well-formed list request gets; the request body round-trips.
fn list<T>(body: &[u8], all: &[T]) -> Expect
where
    T: Clone + PartialEq + core::fmt::Debug + srp_target::control::wire::Fixed,
    for<'a> Page<T>: WireRepr<'a>,
{
    let Ok(page) = ListPage::parse(body) else {
        return Expect::Error(CtlStatus::Malformed);
    };
    round_trip(&page, &mut Vec::new());
    let p = Page::of(all.to_vec(), page.start);
    let mut b = vec![0; p.buffer_len()];
    let n = p.emit(&mut b).expect("a page emits");
    b.truncate(n);
    // What the client reads back is that page.
    let back = Page::<T>::parse(&b).expect("a page parses");
    assert_eq!(back.entries, p.entries);
    Expect::Body(b)
}

/// `Done` for a name `exists` says exists, NOT FOUND otherwise, MALFORMED for no name.
fn set<E>(name: Result<String, E>, exists: impl Fn(&str) -> bool) -> Expect {
    match name {
        Ok(n) if exists(&n) => {
            let d = Done { sessions_ended: 1 };
            let mut b = vec![0; d.buffer_len()];
            d.emit(&mut b).expect("fits");
            Expect::Body(b)
        }
        Ok(_) => Expect::Error(CtlStatus::NotFound),
        Err(_) => Expect::Error(CtlStatus::Malformed),
    }
}
