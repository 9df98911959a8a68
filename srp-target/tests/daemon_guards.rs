//! The daemon's channel guards (issue #14, Deliver 6): an idle channel whose initiator
//! vanished without a word is found by its idle probe and closed, while a live idle one
//! stays; logins beyond `max_channels`, `max_channels_per_address` and `max_half_open` are
//! refused with INSUFFICIENT RESOURCES and the bound's name, and admitted again once the
//! channels holding the bound go. Loopback 127.0.119.x only.

mod common;
mod host;

use common::TempDir;
use hca::Guid;
use host::node::{Form, Node, await_event, await_logout, request};
use host::{Host, ib_form};
use srp::wire::login::LoginRejReason;
use srp::wire::{IoClass, PortId};
use srp_target::config::TargetConfig;
use srp_target::control::{ControlAnswer, ControlRequest};
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 119, host))
}

/// A daemon at 127.0.119.`t` with one RAM LUN and `guards` (TOML lines for `[target]`).
fn daemon(t: u8, guards: &str) -> (Daemon, TargetConfig, TempDir) {
    let dir = TempDir::new("daemon-guards");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d7c800\"\n{guards}\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"ram\"\nram = true\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d7c801\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram\" }}\nallow = [\"any\"]\n",
        ip(t),
    );
    let config = TargetConfig::from_str(&text, "guards.toml")
        .expect("config valid")
        .config;
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 4;
    options.limits.max_transfer = 64 << 10;
    options.limits.max_table_entries = 16;
    options.shutdown_step = Duration::from_millis(300);
    let d = Daemon::start(config.clone(), options).expect("daemon starts");
    (d, config, dir)
}

fn sessions(d: &Daemon) -> usize {
    match d.control().call(ControlRequest::ListSessions) {
        Ok(ControlAnswer::Sessions(s)) => s.len(),
        other => panic!("ListSessions: {other:?}"),
    }
}

/// Logs a fresh host at `addr` with node GUID `guid` in; its node, or the LOGIN_REJ code.
fn try_node(config: &TargetConfig, t: u8, addr: u8, guid: u64) -> Result<Node, u32> {
    Node::try_open(ip(addr), ip(t), guid, &config.iocs[0], Form::IbCm, false)
}

/// The reason of the daemon's next Rejected event.
fn rejected(d: &Daemon, seen: &mut Vec<DaemonEvent>) -> String {
    await_event(d, seen, |e| match e {
        DaemonEvent::Rejected { reason, .. } => Some(reason.clone()),
        _ => None,
    })
}

#[test]
fn an_initiator_that_vanishes_while_idle_is_probed_and_closed() {
    let (d, config, _dir) = daemon(1, "idle_probe = \"300ms\"");
    let mut seen = Vec::new();
    let mut live = Node::open(ip(2), ip(1), 0xd101, &config.iocs[0], Form::IbCm, false);
    let gone = Node::open(ip(3), ip(1), 0xd102, &config.iocs[0], Form::IbCm, false);
    let gone_me = gone.me;
    let gone_ch = await_event(&d, &mut seen, |e| match e {
        DaemonEvent::Login {
            channel, initiator, ..
        } if *initiator == gone_me => Some(*channel),
        _ => None,
    });
    live.write_read(0, 8, 1);
    // The whole host vanishes: no DREQ, no T_LOGOUT, its address answers nothing.
    drop(gone);
    let start = Instant::now();
    let reason = await_logout(&d, &mut seen, gone_ch);
    let took = start.elapsed();
    eprintln!("vanished while idle: closed after {took:?}: {reason}");
    assert!(reason.contains("idle probe unanswered"), "{reason}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // The live one was probed too (idle as long), answered, and still serves.
    std::thread::sleep(Duration::from_millis(800));
    live.write_read(0, 8, 2);
    assert!(live.cred_reqs == 0, "probes grant no credits here");
    assert_eq!(sessions(&d), 1);
    d.shutdown();
}

#[test]
fn without_probing_a_vanished_idle_initiator_is_never_noticed() {
    // The control for the test above: with probing off nothing shows the channel dead.
    let (d, config, _dir) = daemon(11, "idle_probe = \"0s\"");
    let gone = Node::open(ip(12), ip(11), 0xd111, &config.iocs[0], Form::IbCm, false);
    drop(gone);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(sessions(&d), 1, "the ghost channel is still there");
    d.shutdown();
}

#[test]
fn logins_beyond_each_bound_are_refused_and_admitted_again_later() {
    let (d, config, _dir) = daemon(
        21,
        "max_channels = 3\nmax_channels_per_address = 2\nidle_probe = \"300ms\"",
    );
    let ioc = &config.iocs[0];
    let mut seen = Vec::new();
    let resources = u32::from(LoginRejReason::InsufficientResources);
    // Three initiator port IDs from one address: the third is past the address's limit.
    let mut a = Host::open_as(ip(22), ip(21), 0xd121);
    for (i, guid) in [0xd121u64, 0xd122, 0xd123].into_iter().enumerate() {
        let ep = a.ep(i as u64);
        let me = PortId::new(0, Guid(guid), IoClass::SrpR16a);
        let got = a.login(&ep, ioc.service_id, ib_form(&request(me, ioc, false)));
        match i {
            0 | 1 => assert!(got.is_ok(), "login {i} from .22: {:?}", got.err()),
            _ => assert_eq!(got.err(), Some(resources)),
        }
    }
    assert!(rejected(&d, &mut seen).contains("max_channels_per_address"));
    // Another address may still log in, up to the target's limit.
    let b = try_node(&config, 21, 23, 0xd124).expect("first from .23");
    assert_eq!(try_node(&config, 21, 24, 0xd125).err(), Some(resources));
    assert!(rejected(&d, &mut seen).contains("max_channels)"));
    // A channel goes (its host vanishes; the idle probe finds it): a login fits again.
    drop(b);
    let end = Instant::now() + Duration::from_secs(15);
    while sessions(&d) > 2 {
        assert!(
            Instant::now() < end,
            "the vanished channel was never closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _c = try_node(&config, 21, 24, 0xd125).expect("admitted once a channel went");
    drop(a);
    d.shutdown();
}

#[test]
fn half_open_logins_are_bounded_and_expire() {
    let (d, config, _dir) = daemon(31, "max_half_open = 1");
    let mut seen = Vec::new();
    let ioc = &config.iocs[0];
    // A REQ whose REP is never confirmed: RTU awaited 67 ms per try, 2 tries.
    let mut half = Host::open_as(ip(32), ip(31), 0xd131);
    let ep = half.ep(0);
    let me = PortId::new(0, Guid(0xd131), IoClass::SrpR16a);
    let mut params = half.connect_params(&ep, ioc.service_id, ib_form(&request(me, ioc, false)));
    params.response_timeout = 14;
    params.max_retries = 1;
    let _conn = half.login_unconfirmed(&params);
    // While it is half open, another login is refused.
    let resources = u32::from(LoginRejReason::InsufficientResources);
    assert_eq!(try_node(&config, 31, 33, 0xd132).err(), Some(resources));
    assert!(rejected(&d, &mut seen).contains("max_half_open"));
    // Its REP times out; the channel goes and the next login is taken.
    let end = Instant::now() + Duration::from_secs(15);
    while sessions(&d) > 0 {
        assert!(Instant::now() < end, "the half-open channel never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ok = try_node(&config, 31, 33, 0xd132).expect("admitted once the half-open one expired");
    d.shutdown();
}
