//! Orderly logout through HwAdapterControl against a real target daemon (a RAM LUN) on
//! loopback 127.0.134.x: StopAdapter sends SRP_I_LOGOUT and the channel closes at once (the
//! daemon's session list empties and it reports the logout, far inside the RC timeout that
//! a silently dropped channel would need); nothing reconnects while stopped; RestartAdapter
//! logs in again and I/O works; dropping the port after a stop is clean. Every wait is
//! bounded; the port drops before the daemon.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

mod common;
#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use common::{lu, read10, tur, wait, wait_until, write10};
use srp::initiator::PortState;
use srp_adapter::{Adapter, Backing, OneLunTarget, daemon_options, timers};
use srp_initiator_storport::port::{Port, PortConfig, SrbStatus};
use srp_initiator_storport::srp::SrpMiniport;
use srp_target::control::{ControlAnswer, ControlRequest};
use srp_target::daemon::{Daemon, DaemonEvent};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const HOST_GUID: u64 = 0x0002_c903_00be_e901;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 134, last))
}

fn daemon() -> (Daemon, srp_target::config::IocConfig) {
    daemon_at(1, 5592)
}

/// A one-LUN target at 127.0.134.`last` (each test its own address: they run at once).
fn daemon_at(last: u8, rdma_cm_port: u16) -> (Daemon, srp_target::config::IocConfig) {
    let config = OneLunTarget {
        name: "storport-logout",
        address: ip(last),
        node_guid: 0x0002_c903_00a1_b901,
        ioc_guid: 0x0002_c903_00a1_ba01,
        rdma_cm_port: Some(rdma_cm_port),
        lun: "ram0",
        backing: Backing::Ram,
        size: "4MiB",
    }
    .config();
    let ioc = config.iocs[0].clone();
    (
        Daemon::start(config, daemon_options()).expect("daemon starts"),
        ioc,
    )
}

fn sessions(d: &Daemon) -> usize {
    match d.control().call(ControlRequest::ListSessions) {
        Ok(ControlAnswer::Sessions(s)) => s.len(),
        other => panic!("ListSessions: {other:?}"),
    }
}

/// Waits up to `within` for `cond`; the time it took.
fn within(what: &str, within: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
    start.elapsed()
}

fn io_works(port: &Port<SrpMiniport>) {
    let data: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    let w = wait(
        &port
            .submit(write10(lu(0), 16, data.clone()))
            .expect("accepted"),
    );
    assert_eq!(w.status, SrbStatus::SUCCESS, "{w:?}");
    let r = wait(&port.submit(read10(lu(0), 16, 16)).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    assert_eq!(r.data, data);
}

#[test]
fn stop_adapter_logs_out_and_restart_adapter_logs_in_again() {
    let (daemon, ioc) = daemon();
    let hw = Adapter {
        local: ip(2),
        target: ip(1),
        guid: HOST_GUID,
        target_port_id: ioc.target_port_id(),
        service_id: ioc.service_id,
        queue_depth: 16,
        // A short reconnect_delay: a stopped adapter must still not reconnect.
        timers: timers(1, 5, 30),
        cmd_timeout: Duration::from_secs(8),
    }
    .config();
    let port = Port::<SrpMiniport>::start(hw, PortConfig::default()).expect("adapter starts");
    wait_until("the login", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });
    io_works(&port);
    assert_eq!(sessions(&daemon), 1);
    while daemon.events().try_recv().is_ok() {}

    port.stop_adapter(Duration::from_secs(2)).expect("stops");
    // Far inside the RC timeout (seconds) a dropped channel would take to notice.
    let took = within("the session gone", Duration::from_millis(1500), || {
        sessions(&daemon) == 0
    });
    eprintln!("session closed {took:?} after StopAdapter");
    let ev = daemon
        .events()
        .recv_timeout(Duration::from_secs(2))
        .expect("a logout event");
    match &ev {
        DaemonEvent::Logout { reason, .. } => {
            assert!(reason.contains("logged out"), "an SRP_I_LOGOUT: {reason}")
        }
        other => panic!("expected a logout, got {other}"),
    }
    assert_eq!(port.miniport().channel_state(), Some(PortState::Lost));
    // Nothing reconnects while stopped (reconnect_delay is 1 s).
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(sessions(&daemon), 0, "no reconnect while stopped");
    assert_eq!(port.miniport().status().logins, 1);

    port.restart_adapter().expect("restarts");
    within("the new session", Duration::from_secs(5), || {
        sessions(&daemon) == 1
    });
    wait_until("logged in again", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });
    let r = wait(&port.submit(tur(lu(0))).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    io_works(&port);

    // Stop again and drop the port at once: the channel still closes.
    port.stop_adapter(Duration::from_secs(2)).expect("stops");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    within(
        "the session gone after the drop",
        Duration::from_millis(1500),
        || sessions(&daemon) == 0,
    );
    drop(daemon);
}

/// The adapter in its HCA's power domain: down, the port drains and StopAdapter logs out
/// while the HCA still carries traffic (the target sees an SRP_I_LOGOUT, not a timeout),
/// then the HCA goes inactive; a request submitted in D3 is held, not failed; up, the HCA
/// first, then RestartAdapter logs in and the held request completes.
#[test]
fn the_power_domain_takes_the_adapter_down_before_its_hca_and_up_after() {
    use srp_initiator_storport::srp::power::power_domain;
    use std::sync::Arc;
    let (daemon, ioc) = daemon_at(11, 5593);
    let hw = Adapter {
        local: ip(12),
        target: ip(11),
        guid: HOST_GUID + 1,
        target_port_id: ioc.target_port_id(),
        service_id: ioc.service_id,
        queue_depth: 16,
        timers: timers(1, 5, 30),
        cmd_timeout: Duration::from_secs(8),
    }
    .config();
    let port = Arc::new(Port::<SrpMiniport>::start(hw, PortConfig::default()).expect("starts"));
    wait_until("the login", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });
    io_works(&port);
    while daemon.events().try_recv().is_ok() {}
    let domain = power_domain(&port, Duration::from_secs(2));
    domain
        .power_down()
        .expect("a transition starts")
        .wait_timeout(Duration::from_secs(5))
        .expect("down, in time");
    let t = port.miniport().transport().expect("found").clone();
    assert!(!t.hca_port_active(), "the HCA went down last");
    let ev = daemon
        .events()
        .recv_timeout(Duration::from_secs(2))
        .expect("a logout event");
    match &ev {
        DaemonEvent::Logout { reason, .. } => assert!(
            reason.contains("logged out"),
            "the adapter logged out while its HCA still carried traffic: {reason}"
        ),
        other => panic!("expected a logout, got {other}"),
    }
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 13 + 5) as u8).collect();
    let held = port
        .submit(write10(lu(0), 64, data.clone()))
        .expect("accepted in D3");
    assert!(
        held.wait_timeout(Duration::from_millis(300)).is_err(),
        "nothing runs in D3"
    );
    domain
        .power_up()
        .expect("a transition starts")
        .wait_timeout(Duration::from_secs(5))
        .expect("up, in time");
    assert!(t.hca_port_active(), "the HCA came up first");
    let w = held
        .wait_timeout(Duration::from_secs(10))
        .expect("completed after D0");
    assert_eq!(w.status, SrbStatus::SUCCESS, "{w:?}");
    let r = wait(&port.submit(read10(lu(0), 64, 8)).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    assert_eq!(r.data, data);
    assert_eq!(port.miniport().status().logins, 2, "a fresh login at D0");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(domain);
    port.stop_adapter(Duration::from_secs(2)).expect("stops");
    drop(port);
    drop(daemon);
}
