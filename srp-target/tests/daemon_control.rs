//! The control socket of a running daemon, from srpctl's side ([`TargetClient`]) on
//! loopback 127.0.120.x: IOCs, ports, LUNs and sessions listed with their counters; an IOC
//! disabled with a logout (the host gets SRP_T_LOGOUT, new logins are refused until it is
//! enabled again) and with a drop (the host hears nothing, its transfers fail); a port
//! taken down (nothing in or out, its sessions gone) and up again; unknown names refused;
//! device objects back to the baseline after all of it; a stale socket file replaced and
//! a live one refused.

mod common;
mod host;

use access_layer::mad::dm::{DmAttr, SlotState};
use access_layer::mad::{DmAttribute, MadBody, parse_any};
use common::TempDir;
use hca::Guid;
use hca::verbs::WcStatus;
use host::{DEADLINE, HOST_GUID, Host, ib_form, login_req};
use srp::wire::login::{LoginRejReason, MultiChannelAction};
use srp::wire::logout::TLogout;
use srp::wire::{IoClass, IuType, PortId};
use srp_target::config::{IocConfig, TargetConfig};
use srp_target::control::{ClientError, DisableMode, LoginForm, TargetClient};
use srp_target::daemon::{Daemon, DaemonError, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use wirekit::WireRepr;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 120, host))
}

fn config(first: u8) -> TargetConfig {
    let text = format!(
        r#"
[target]
node_guid = "0x0002c90300c7c700"
rdma_cm_port = 5570

[[port]]
name = "p0"
address = "127.0.120.{first}"

[[port]]
name = "p1"
address = "127.0.120.{}"

[[lun]]
name = "ram0"
ram = true
size = "1MiB"

[[lun]]
name = "ram1"
ram = true
size = "2MiB"
block_size = 4096

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300c7c7a1"
ports = ["p0"]
exports = {{ 0 = "ram0", 1 = "ram1" }}
allow = ["any"]

[[ioc]]
name = "ioc-b"
guid = "0x0002c90300c7c7b1"
ports = ["p1"]
exports = {{ 0 = "ram0" }}
allow = ["any"]
"#,
        first + 1
    );
    TargetConfig::from_str(&text, "control.toml")
        .expect("valid")
        .config
}

fn start(dir: &TempDir, first: u8) -> (Daemon, TargetConfig) {
    let config = config(first);
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 8;
    options.limits.max_transfer = 64 << 10;
    options.limits.max_table_entries = 16;
    options.control_socket = Some(dir.path().join("run").join("target.sock"));
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");
    (daemon, config)
}

fn login(host: &mut Host, index: u64, ioc: &IocConfig) -> Result<host::Ep, u32> {
    let ep = host.ep(index);
    let me = PortId::new(0, Guid(HOST_GUID), IoClass::SrpR16a);
    let private = ib_form(&login_req(
        me,
        ioc.target_port_id(),
        MultiChannelAction::Multi,
    ));
    host.login(&ep, ioc.service_id, private).map(|_| ep)
}

/// IOUnitInfo from the host's portal: its change ID and the state of slot 1.
fn slot_one(host: &mut Host, tid: u64) -> (u16, SlotState) {
    let raw = host.dm_get(DmAttr::IouInfo, 0, tid);
    let m = parse_any(&raw.0).expect("DM answer");
    let MadBody::Dm {
        attr: DmAttribute::IouInfo(info),
        ..
    } = m.body
    else {
        panic!("not IOUnitInfo: {m:?}");
    };
    (info.change_id, info.slot(1).expect("slot 1 exists"))
}

/// Waits until `f` holds, bounded.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !f() {
        assert!(Instant::now() < end, "{what}: not within {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn lists_and_counters_describe_the_running_target() {
    let dir = TempDir::new("ctl-lists");
    let (daemon, config) = start(&dir, 1);
    let path = daemon.control_socket().expect("served").to_path_buf();
    let mut c = TargetClient::connect(&path).expect("connect");

    let iocs = c.iocs().expect("iocs");
    let names: Vec<_> = iocs
        .iter()
        .map(|i| (i.name.as_str(), i.luns, i.enabled))
        .collect();
    assert_eq!(names, [("ioc-a", 2, true), ("ioc-b", 1, true)]);
    assert_eq!(iocs[0].guid, config.iocs[0].guid.0);
    assert_eq!(iocs[0].service_id, config.iocs[0].service_id.0);
    let ports = c.ports().expect("ports");
    assert_eq!(ports.len(), 2);
    assert_eq!(ports[0].address, config.ports[0].address);
    assert!(ports.iter().all(|p| p.active && p.sessions == 0));
    let baseline: Vec<_> = ports.iter().map(|p| p.resources).collect();
    let luns = c.luns().expect("luns");
    let l: Vec<_> = luns
        .iter()
        .map(|l| (l.name.as_str(), l.blocks, l.block_size))
        .collect();
    assert_eq!(l, [("ram0", 2048, 512), ("ram1", 512, 4096)]);
    assert!(c.sessions().expect("sessions").is_empty());

    let mut host = Host::open(ip(10), ip(1));
    let ep = login(&mut host, 0, &config.iocs[0]).expect("login");
    host.write_read(&ep, 0, 7);
    let sessions = c.sessions().expect("sessions");
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let s = &sessions[0];
    assert_eq!((s.ioc.as_str(), s.port.as_str()), ("ioc-a", "p0"));
    assert_eq!(s.form, LoginForm::IbCm);
    assert_eq!(
        s.initiator,
        PortId::new(0, Guid(HOST_GUID), IoClass::SrpR16a)
    );
    assert_eq!(s.window, 8);
    assert_eq!(s.counters.commands, 2);
    assert_eq!(s.counters.data_out_bytes, 4096);
    assert_eq!(s.counters.data_in_bytes, 4096);
    assert_eq!(s.counters.check_conditions, 0);
    let ram0 = c
        .luns()
        .expect("luns")
        .into_iter()
        .find(|l| l.name == "ram0");
    let ram0 = ram0.expect("ram0");
    assert_eq!(
        (ram0.counters.reads, ram0.counters.writes),
        (1, 1),
        "{ram0:?}"
    );
    assert_eq!(
        (ram0.counters.bytes_read, ram0.counters.bytes_written),
        (4096, 4096)
    );
    // A LUN that is not there: CHECK CONDITION counted on the session, not on any LUN.
    let (status, _) = host.command(&ep, 9, 5, &common::read10(0, 1), &[], 512);
    assert_eq!(status, scsi::Status::CheckCondition);
    let s = c.sessions().expect("sessions").remove(0);
    assert_eq!((s.counters.commands, s.counters.check_conditions), (3, 1));
    let ports = c.ports().expect("ports");
    assert_eq!(ports[0].sessions, 1);
    assert!(
        ports[0].resources.qps > baseline[0].qps,
        "the channel's QP shows"
    );

    // Unknown names are refused by name; the socket goes on serving.
    match c.set_ioc("nope", false, DisableMode::Logout) {
        Err(ClientError::NotFound { what: "IOC", name }) => assert_eq!(name, "nope"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.set_port("p9", false),
        Err(ClientError::NotFound { what: "port", .. })
    ));
    // No flush has failed: nothing latched, nothing to clear; an unknown LUN is refused.
    assert!(!ram0.flush_failed);
    assert_eq!(ram0.counters.flush_errors, 0);
    assert!(
        !c.clear_flush_error("ram0").expect("clear"),
        "nothing was latched"
    );
    assert!(matches!(
        c.clear_flush_error("nope"),
        Err(ClientError::NotFound { what: "LUN", .. })
    ));
    drop(host);
    // The host vanished without a word; the operator drops the IOC's sessions.
    assert_eq!(
        c.set_ioc("ioc-a", false, DisableMode::Drop).expect("drop"),
        1
    );
    assert_eq!(
        c.set_ioc("ioc-a", true, DisableMode::Drop).expect("enable"),
        0
    );
    eventually(
        "sessions gone and device objects back to the baseline",
        || {
            let p = c.ports().expect("ports");
            p.iter().map(|p| p.resources).collect::<Vec<_>>() == baseline
                && c.sessions().expect("sessions").is_empty()
        },
    );
}

#[test]
fn disabling_an_ioc_logs_out_or_drops_its_sessions_and_refuses_logins() {
    let dir = TempDir::new("ctl-ioc");
    let (daemon, config) = start(&dir, 3);
    let mut c = TargetClient::connect(daemon.control_socket().expect("served")).expect("connect");
    let mut host = Host::open(ip(11), ip(3));
    let ep_a = login(&mut host, 0, &config.iocs[0]).expect("login ioc-a");
    let mut other = Host::open(ip(12), ip(4));
    let ep_b = login(&mut other, 0, &config.iocs[1]).expect("login ioc-b");

    // Logout mode: SRP_T_LOGOUT on the channel; ioc-b's session is untouched.
    assert_eq!(
        c.set_ioc("ioc-a", false, DisableMode::Logout).expect("off"),
        1
    );
    let iu = host.await_iu(&ep_a);
    assert_eq!(IuType::from(iu[0]), IuType::TLogout);
    TLogout::parse(&iu).expect("T_LOGOUT parses");
    assert!(!c.iocs().expect("iocs")[0].enabled);
    // Discovery sees it go: its slot on p0 is empty, the change ID moved.
    let after = slot_one(&mut host, 0x31);
    assert_eq!(after.1, SlotState::NotInstalled);
    let Err(refused) = login(&mut host, 1, &config.iocs[0]) else {
        panic!("a disabled IOC accepted a login");
    };
    assert_eq!(refused, u32::from(LoginRejReason::InsufficientResources));
    other.write_read(&ep_b, 0, 1);

    // Enabled again: discovery sees it back, logins work; then a drop ends the session
    // without a word.
    assert_eq!(
        c.set_ioc("ioc-a", true, DisableMode::Logout).expect("on"),
        0
    );
    let back = slot_one(&mut host, 0x32);
    assert_eq!(back.1, SlotState::Present);
    assert_ne!(back.0, after.0, "the change ID moves with every switch");
    let ep_a2 = login(&mut host, 2, &config.iocs[0]).expect("login again");
    host.write_read(&ep_a2, 0, 2);
    assert_eq!(
        c.set_ioc("ioc-a", false, DisableMode::Drop).expect("drop"),
        1
    );
    // The host's next SEND finds no QP behind it: its retries run out.
    host.send(
        &ep_a2,
        &host::cmd_iu(
            5,
            0,
            &common::read10(0, 1),
            srp::wire::desc::DataDesc::None,
            srp::wire::desc::DataDesc::None,
        ),
    );
    let end = Instant::now() + DEADLINE;
    let status = loop {
        assert!(
            Instant::now() < end,
            "no failed completion for the dropped channel"
        );
        let mut wcs = Vec::new();
        host.hca
            .with(|e, _| e.poll_cq(ep_a2.cq, 16, &mut wcs))
            .expect("poll");
        if let Some(wc) = wcs.iter().find(|w| w.status != WcStatus::Success) {
            break wc.status;
        }
        assert!(
            wcs.iter().all(|w| w.opcode != hca::verbs::WcOpcode::Recv),
            "a dropped channel sends nothing"
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    assert_eq!(status, WcStatus::RetryExcErr);
    other.write_read(&ep_b, 0, 3);
    let sessions = c.sessions().expect("sessions");
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].ioc, "ioc-b");
}

#[test]
fn a_port_taken_down_carries_nothing_and_comes_back() {
    let dir = TempDir::new("ctl-port");
    let (daemon, config) = start(&dir, 5);
    let mut c = TargetClient::connect(daemon.control_socket().expect("served")).expect("connect");
    let mut host = Host::open(ip(13), ip(5));
    let ep = login(&mut host, 0, &config.iocs[0]).expect("login");
    host.write_read(&ep, 0, 4);
    assert_eq!(c.set_port("p0", false).expect("down"), 1);
    let p = c.ports().expect("ports");
    assert!(!p[0].active && p[1].active);
    assert_eq!(p[0].sessions, 0);
    // A login on the down port gets no answer at all: the CM REQ is dropped there.
    let ep2 = host.ep(1);
    let me = PortId::new(0, Guid(HOST_GUID), IoClass::SrpR16a);
    let private = ib_form(&login_req(
        me,
        config.iocs[0].target_port_id(),
        MultiChannelAction::Multi,
    ));
    let params = access_layer::cm::ConnectParams {
        receive_psn: hca::Psn::from_wire(1),
        response_timeout: 14,
        ..host.connect_params(&ep2, config.iocs[0].service_id, private)
    };
    let now = host.hca.with(|_, now| now);
    let conn = host.cm.connect(now, &params).expect("REQ");
    let end = Instant::now() + Duration::from_millis(500);
    while Instant::now() < end {
        host.pump();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        !host.events.iter().any(|e| matches!(e,
            access_layer::cm::CmEvent::RepReceived { conn: c, .. }
            | access_layer::cm::CmEvent::Rejected { conn: c, .. } if *c == conn)),
        "a down port answered a login: {:?}",
        host.events
    );
    assert_eq!(c.set_port("p0", true).expect("up"), 0);
    let mut fresh = Host::open(ip(14), ip(5));
    let ep3 = login(&mut fresh, 0, &config.iocs[0]).expect("login after the port is up");
    fresh.write_read(&ep3, 0, 5);
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = TempDir::new("ctl-stale");
    let path = dir.path().join("run").join("target.sock");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    // A socket file whose server is gone (as after kill -9).
    drop(std::os::unix::net::UnixListener::bind(&path).expect("bind"));
    assert!(path.exists());
    let (daemon, _) = start(&dir, 7);
    assert_eq!(daemon.control_socket(), Some(path.as_path()));
    TargetClient::connect(&path)
        .expect("served")
        .iocs()
        .expect("iocs");
    let options = DaemonOptions {
        control_socket: Some(path.clone()),
        ..DaemonOptions::new(providers::system())
    };
    match Daemon::start(config(9), options) {
        Err(DaemonError::Control { reason, .. }) => assert!(reason.contains("another daemon")),
        other => panic!("a second daemon on a live socket: {other:?}"),
    }
    drop(daemon);
    assert!(!path.exists(), "the socket is removed at shutdown");
}
