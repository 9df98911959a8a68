//! The SRP miniport's opt-in `TrustTarget` registration (one region over all of system memory, the
//! 2005 model) and its status report, under the emulated StorPort against a real target
//! daemon (a RAM LUN, window 16, max transfer 256 KiB) on loopback 127.0.133.x:
//! - data integrity of 4 KiB..256 KiB scattered buffers with no FRMR region used;
//! - `status()` after the login (Running, one login, no error, the negotiated limits), and
//!   across a target restart (a loss, a held write completed after the re-login);
//! - a login the daemon rejects (wrong service ID, wrong target port ID) leaves the port NEW
//!   with the reject as `last_error`.
//!
//! Every wait is bounded; the port drops before the daemon, both even when an assertion
//! fails.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

mod common;
#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use srp_adapter::{Adapter, Backing, OneLunTarget, daemon_options, timers};

use access_layer::mad::ServiceId;
use common::{DEADLINE, lu, read10, wait, wait_until, write10};
use hca::Guid;
use srp::initiator::PortState;
use srp::wire::{IoClass, PortId};
use srp_initiator_storport::port::{Port, PortConfig, SrbStatus};
use srp_initiator_storport::srp::{RegistrationMode, SrpAdapterConfig, SrpMiniport};
use srp_target::config::{IocConfig, TargetConfig};
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const HOST_GUID: u64 = 0x0002_c903_00be_e701;
const RDMA_CM_PORT: u16 = 5591;
const MEMORY_PAGES: usize = srp_initiator_storport::port::memory::DEFAULT_PAGES;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 133, last))
}

/// One RAM LUN at 127.0.133.`t`.
fn target_config(t: u8) -> TargetConfig {
    OneLunTarget {
        name: "storport-trust",
        address: ip(t),
        node_guid: 0x0002_c903_00a1_d300 + u64::from(t),
        ioc_guid: 0x0002_c903_00a1_d400 + u64::from(t),
        rdma_cm_port: Some(RDMA_CM_PORT),
        lun: "ram0",
        backing: Backing::Ram,
        size: "16MiB",
    }
    .config()
}

/// The daemon; `max_table_entries` stays at its default (one per 4 KiB of the daemon's
/// default max transfer), above the 65 inline descriptors a 256 KiB SRB can need here.
fn start_daemon(config: &TargetConfig) -> Daemon {
    let mut options = daemon_options();
    options.limits.max_table_entries = DaemonOptions::new(providers::system())
        .limits
        .max_table_entries;
    options.shutdown_step = Duration::from_millis(500);
    Daemon::start(config.clone(), options).expect("daemon starts")
}

/// The adapter at 127.0.133.`h` for `ioc` at 127.0.133.`t`.
fn adapter(t: u8, h: u8, ioc: &IocConfig, registration: RegistrationMode) -> SrpAdapterConfig {
    let mut cfg = Adapter {
        local: ip(h),
        target: ip(t),
        guid: HOST_GUID + u64::from(h),
        target_port_id: ioc.target_port_id(),
        service_id: ioc.service_id,
        queue_depth: 32,
        timers: timers(1, 8, 15),
        cmd_timeout: Duration::from_secs(15),
    }
    .config();
    cfg.registration = registration;
    cfg
}

fn start_port(cfg: SrpAdapterConfig) -> Port<SrpMiniport> {
    Port::<SrpMiniport>::start(cfg, PortConfig::default()).expect("adapter starts")
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8 ^ (i >> 9) as u8)
        .collect()
}

fn assert_clean(port: &Port<SrpMiniport>) {
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert!(!port.is_bugchecked());
}

fn wait_running(port: &Port<SrpMiniport>) {
    wait_until("the login", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });
}

/// Writes `data` at `lba` and reads it back.
fn round_trip(port: &Port<SrpMiniport>, lba: u32, data: &[u8]) {
    let n = data.len();
    let w = wait(
        &port
            .submit(write10(lu(0), lba, data.to_vec()))
            .expect("accepted"),
    );
    assert_eq!(w.status, SrbStatus::SUCCESS, "WRITE of {n}: {w:?}");
    let r = wait(
        &port
            .submit(read10(lu(0), lba, (n / 512) as u16))
            .expect("accepted"),
    );
    assert_eq!(r.status, SrbStatus::SUCCESS, "READ of {n}: {r:?}");
    assert_eq!(r.data_transfer_length, n);
    assert!(r.data == *data, "read back what was written ({n} bytes)");
}

#[test]
fn trust_target_round_trips_without_frmr_and_reports_the_login() {
    let config = target_config(1);
    let ioc = config.iocs[0].clone();
    let _daemon = start_daemon(&config);
    let port = start_port(adapter(1, 2, &ioc, RegistrationMode::TrustTarget));
    wait_running(&port);

    let s = port.miniport().status();
    assert_eq!(s.state, Some(PortState::Running));
    assert_eq!((s.logins, s.losses), (1, 0), "{s:?}");
    assert_eq!(s.last_error, None);
    let (iu, window) = s.negotiated.expect("negotiated after the login");
    assert_eq!(iu, 8260, "68 + 8192 asked for, the daemon's limit");
    assert!(window >= 2, "a usable window: {window}");

    let sizes = [
        4096,
        8192 + 512,
        16384,
        65536 + 1536,
        131072,
        200 * 512,
        262144,
    ];
    let mut lba = 100;
    for (k, &n) in sizes.iter().enumerate() {
        round_trip(&port, lba, &pattern(n, k as u32 + 1));
        lba += (n / 512) as u32 + 7;
    }
    let (imm, frmr) = port.miniport().mapped();
    assert_eq!(frmr, 0, "no fast registration under TrustTarget");
    assert_eq!(imm, 1, "the 4 KiB write still goes as immediate data");
    assert_eq!(
        port.miniport().mapped_all_memory(),
        2 * sizes.len() as u64 - 1,
        "every read and every larger write through the all-memory region"
    );
    // Arena pages come back at each completion; the FRMR pool does not exist.
    let (pages, pool) = port.miniport().resources().expect("found");
    assert_eq!(pages, MEMORY_PAGES);
    assert_eq!(pool, Default::default(), "no FRMR regions");
    assert_clean(&port);
}

#[test]
fn trust_target_holds_io_across_a_target_restart_and_counts_the_loss() {
    let config = target_config(3);
    let ioc = config.iocs[0].clone();
    let mut daemon = Some(start_daemon(&config));
    let port = start_port(adapter(3, 4, &ioc, RegistrationMode::TrustTarget));
    wait_running(&port);
    round_trip(&port, 10, &pattern(64 << 10, 1));

    let _ = daemon.take().map(Daemon::shutdown);
    wait_until("the loss reported", || port.miniport().status().losses == 1);
    let s = port.miniport().status();
    assert_ne!(s.state, Some(PortState::Running), "{s:?}");
    let err = s.last_error.expect("the loss is the last error");
    assert!(err.starts_with("channel lost"), "{err}");

    // Submitted while the target is down: held by the core, sent after the re-login
    // through the unchanged all-memory descriptors.
    let data = pattern(128 << 10, 2);
    let held = port
        .submit(write10(lu(0), 500, data.clone()))
        .expect("accepted");
    std::thread::sleep(Duration::from_millis(300));
    daemon = Some(start_daemon(&config));
    let w = held
        .wait_timeout(DEADLINE + Duration::from_secs(10))
        .expect("the held write completes after the re-login");
    assert_eq!(w.status, SrbStatus::SUCCESS, "{w:?}");
    let r = wait(&port.submit(read10(lu(0), 500, 256)).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS);
    assert!(
        r.data == data,
        "the held write landed on the restarted target"
    );

    let s = port.miniport().status();
    assert_eq!(s.state, Some(PortState::Running));
    assert!(s.logins >= 2, "{s:?}");
    assert_eq!(s.losses, 1, "{s:?}");
    assert_eq!(port.miniport().mapped().1, 0, "no fast registration");
    assert_eq!(port.miniport().remapped(), 0, "nothing to register again");
    assert_clean(&port);
    drop(port);
    drop(daemon);
}

#[test]
fn a_rejected_login_leaves_the_port_new_with_the_reason() {
    let config = target_config(5);
    let ioc = config.iocs[0].clone();
    let _daemon = start_daemon(&config);
    let mut wrong_service = adapter(5, 6, &ioc, RegistrationMode::PerIo);
    wrong_service.service_id = ServiceId(ioc.service_id.0 ^ 0xff);
    let mut wrong_port_id = adapter(5, 7, &ioc, RegistrationMode::PerIo);
    wrong_port_id.target_port_id = PortId::new(0x5eed, Guid(0x0bad), IoClass::SrpR16a);
    for (what, cfg, cause) in [
        ("wrong service ID", wrong_service, "InvalidServiceId"),
        ("wrong target port ID", wrong_port_id, "UnableToAssociate"),
    ] {
        let port = start_port(cfg);
        wait_until(what, || port.miniport().status().last_error.is_some());
        let s = port.miniport().status();
        eprintln!("{what}: {s:?}");
        assert_eq!(s.state, Some(PortState::New), "{what}: {s:?}");
        assert_eq!((s.logins, s.losses), (0, 0), "{what}: {s:?}");
        assert_eq!(s.negotiated, None, "{what}");
        let err = s.last_error.expect("checked above");
        assert!(err.starts_with("login failed"), "{what}: {err}");
        assert!(err.contains(cause), "{what}: {err}");
        assert_clean(&port);
    }
}
