//! An IOC that left its I/O unit, as each driver model's port sees it
//! (`HostAdapter::ioc_removed`, what the daemon's IOC bus calls): under the iSCSI model the
//! port's surprise removal, under StorPort — which hides device removal from a miniport —
//! a bus change whose re-enumeration finds the IOC's LUs gone, so the port removes them.
//! Either way a request to the LU afterwards ends at once with NO_DEVICE (or is refused)
//! and never reaches the target, which is still there (loopback 127.0.156.x, a RAM LUN).
//! Likewise a request that reaches an adapter the daemon stopped (a logout, a shutdown)
//! ends at once instead of waiting in the port for a restart that will not come.

use srp_hostd::HostConfig;
use srp_hostd::adapter::HostAdapter;
use srp_hostd::config::DriverModel;
use srp_hostd::discover::SrpService;
use srp_initiator_storport::port::{DataDirection, LuAddress, SrbRequest, SrbStatus, SystemMemory};
use srp_initiator_storport::srp::LoginVia;
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 156, 1));

fn target() -> (Daemon, TargetConfig) {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f6f000\"\nname = \"ioc-removed\"\nrdma_cm_port = 5614\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{TARGET}\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"4MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300f6f001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n"
    );
    let config = TargetConfig::from_str(&text, "ioc-removed.toml")
        .expect("config valid")
        .config;
    let daemon =
        Daemon::start(config.clone(), DaemonOptions::new(providers::system())).expect("target");
    (daemon, config)
}

fn read10(lba: u32) -> SrbRequest {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x28;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[8] = 1;
    SrbRequest::scsi(
        LuAddress::new(0, 0, 0),
        &cdb,
        DataDirection::In,
        vec![0; 512],
    )
}

/// The request's status, or `None` when the port refused it outright.
fn run(port: &HostAdapter, req: SrbRequest) -> Option<SrbStatus> {
    let c = port.submit(req).ok()?;
    let r = c
        .wait_timeout(Duration::from_secs(5))
        .expect("the request ends");
    Some(r.status)
}

/// An adapter of `model` from 127.0.156.`last`, logged in to the target's IOC and
/// reading back.
fn logged_in(config: &TargetConfig, model: DriverModel, last: u8) -> HostAdapter {
    let ioc = &config.iocs[0];
    let service = SrpService {
        portal: TARGET,
        ioc_guid: ioc.guid,
        ioc_name: ioc.name.clone(),
        id_ext: ioc.id_ext,
        service_id: ioc.service_id,
    };
    let mut host = HostConfig::with_portals("ioc-removed", Vec::new());
    host.node_guid = ib_verbs::Guid(0x0002_c903_00f6_f100 + u64::from(last));
    let local = IpAddr::V4(Ipv4Addr::new(127, 0, 156, last));
    let hw = srp_hostd::session::adapter_config(
        &host,
        &service,
        local,
        LoginVia::IbCm,
        0,
        &providers::system(),
    );
    let memory = SystemMemory::new(1024);
    let port = HostAdapter::start(model, hw, &memory).expect("adapter starts");
    let end = Instant::now() + Duration::from_secs(10);
    while port.status().state != Some(srp::initiator::PortState::Running) {
        assert!(Instant::now() < end, "{model:?}: no login");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(run(&port, read10(0)), Some(SrbStatus::SUCCESS), "{model:?}");
    port
}

/// A read now is refused or ends NO_DEVICE, at once (not by a timeout).
fn ends_at_once_with_no_device(port: &HostAdapter, model: DriverModel) {
    let started = Instant::now();
    match run(port, read10(1)) {
        None => {}
        Some(s) => assert_eq!(s.code(), SrbStatus::NO_DEVICE, "{model:?}: {s}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{model:?}: ended at once, not by a timeout ({:?})",
        started.elapsed()
    );
}

/// One target for both checks (it binds one address).
#[test]
fn an_ioc_that_left_takes_its_lus_away_and_a_stopped_adapter_ends_what_arrives() {
    let (daemon, config) = target();
    for (i, model) in [DriverModel::StorPort, DriverModel::IscsiModel]
        .into_iter()
        .enumerate()
    {
        // The IOC left its unit, as the model's port sees it.
        let port = logged_in(&config, model, 2 + i as u8);
        port.ioc_removed(&[LuAddress::new(0, 0, 0)]);
        ends_at_once_with_no_device(&port, model);
        drop(port);
        // The daemon stopped the adapter (a logout, a shutdown).
        let port = logged_in(&config, model, 4 + i as u8);
        port.stop(Duration::from_secs(2)).expect("stopped");
        ends_at_once_with_no_device(&port, model);
        drop(port);
    }
    drop(daemon);
}
