//! Issue #5 acceptance: writes the target acknowledged with FUA, or before a SYNCHRONIZE
//! CACHE that returned GOOD, survive `kill -9` of the target process and a restart — proved
//! by reading them back through the restarted target.
//!
//! The target is the real `srpctl target run` process; the initiator is the access-layer
//! test host shared with srp-target's daemon tests. Loopback 127.0.110.x only; the daemon
//! process is killed and the temp dir removed even if the test fails.
//!
//! `kill -9` loses what the process held, not the kernel's page cache, so this proves the
//! target wrote the data to its backing file before answering; that the FUA/SYNCHRONIZE
//! CACHE path also calls fdatasync is covered by srp-target's exec tests.

#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
#[path = "../../srp-target/tests/host/mod.rs"]
mod host;
mod process;

use common::{TempDir, read10, write10};
use hca::Guid;
use host::{HOST_GUID, Host, ib_form, login_req};
use process::TargetProcess;
use scsi::Status;
use srp::wire::login::MultiChannelAction;
use srp::wire::{IoClass, PortId};
use srp_target::config::TargetConfig;
use std::net::{IpAddr, Ipv4Addr};

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 110, 1));
const HOST: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 110, 2));

fn pattern(seed: u8) -> Vec<u8> {
    (0..4096u32)
        .map(|k| (k as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// Logs a fresh host in to the IOC of `config` (IB CM form) and returns it with its channel.
fn log_in(config: &TargetConfig) -> (Host, host::Ep) {
    let ioc = &config.iocs[0];
    let mut host = Host::open(HOST, TARGET);
    let ep = host.ep(0);
    let me = PortId::new(0, Guid(HOST_GUID), IoClass::SrpR16a);
    let req = login_req(me, ioc.target_port_id(), MultiChannelAction::Single);
    host.login(&ep, ioc.service_id, ib_form(&req))
        .unwrap_or_else(|code| panic!("login rejected: {code:#x}"));
    (host, ep)
}

#[test]
fn acknowledged_writes_survive_kill_9_and_restart() {
    let dir = TempDir::new("durability");
    let cfg_path = dir.path().join("target.toml");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d0d000\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{TARGET}\"\n\n\
         [[lun]]\nname = \"durable\"\nfile = \"{}\"\nsize = \"4MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d0d001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"durable\" }}\nallow = [\"any\"]\n",
        dir.path().join("ctl.sock").display(),
        dir.path().join("durable.img").display()
    );
    std::fs::write(&cfg_path, &text).expect("write config");
    let config = TargetConfig::from_str(&text, "target.toml")
        .expect("valid")
        .config;
    let (fua_data, synced_data) = (pattern(1), pattern(2));

    let first = TargetProcess::start(&cfg_path);
    {
        let (mut host, ep) = log_in(&config);
        let (st, _) = host.command(&ep, 1, 0, &write10(100, 8, true), &fua_data, 0);
        assert_eq!(st, Status::Good, "WRITE(10) FUA");
        let (st, _) = host.command(&ep, 2, 0, &write10(200, 8, false), &synced_data, 0);
        assert_eq!(st, Status::Good, "WRITE(10)");
        let sync_cache = [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let (st, _) = host.command(&ep, 3, 0, &sync_cache, &[], 0);
        assert_eq!(st, Status::Good, "SYNCHRONIZE CACHE(10)");
    }
    first.kill9();

    let _second = TargetProcess::start(&cfg_path);
    let (mut host, ep) = log_in(&config);
    let (st, got) = host.command(&ep, 4, 0, &read10(100, 8), &[], 4096);
    assert_eq!(st, Status::Good);
    assert!(got == fua_data, "the FUA write did not survive kill -9");
    let (st, got) = host.command(&ep, 5, 0, &read10(200, 8), &[], 4096);
    assert_eq!(st, Status::Good);
    assert!(
        got == synced_data,
        "the synchronized write did not survive kill -9"
    );
}
