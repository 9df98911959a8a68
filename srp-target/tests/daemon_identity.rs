//! An I_T nexus's channels all come from one address (issue #14, Deliver 6): a host that
//! claims another host's initiator port ID from its own address can neither replace that
//! host's channel (MULTI-CHANNEL ACTION single) nor join it (multi) — the login is rejected
//! with "unable to associate RDMA channel with the specified I_T nexus", logged, and the
//! victim's channel keeps working; the rightful host re-logging in from its address replaces
//! its channel as before; `nexus_from_any_address = true` restores the old rule. An ACL
//! entry bound to an address (`guid:...@IP`) admits that identifier from there only.
//! In-process daemon on loopback 127.0.121.x.

mod common;
mod host;

use common::{pattern, read10, write10};
use hca::Guid;
use host::{HOST_GUID, Host, ib_form, login_req};
use scsi::Status;
use srp::wire::login::{LoginRejReason, MultiChannelAction};
use srp::wire::{IoClass, PortId};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 121, host))
}

fn start(any_address: bool, target: u8) -> (Daemon, TargetConfig) {
    start_with("\"any\"", any_address, target)
}

/// A daemon whose IOC's `allow` is `allow` (TOML array items).
fn start_with(allow: &str, any_address: bool, target: u8) -> (Daemon, TargetConfig) {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300c8c800\"\nrdma_cm_port = 5571\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"ram0\"\nram = true\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300c8c8a1\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram0\" }}\nallow = [{allow}]\nnexus_from_any_address = {any_address}\n",
        ip(target)
    );
    let config = TargetConfig::from_str(&text, "identity.toml")
        .expect("valid")
        .config;
    let daemon =
        Daemon::start(config.clone(), DaemonOptions::new(providers::system())).expect("starts");
    (daemon, config)
}

/// The victim's initiator port ID, whoever claims it.
fn victim() -> PortId {
    PortId::new(0, Guid(HOST_GUID), IoClass::SrpR16a)
}

fn log_in(
    host: &mut Host,
    index: u64,
    config: &TargetConfig,
    action: MultiChannelAction,
) -> Result<host::Ep, u32> {
    let ioc = &config.iocs[0];
    let ep = host.ep(index);
    let req = login_req(victim(), ioc.target_port_id(), action);
    host.login(&ep, ioc.service_id, ib_form(&req)).map(|_| ep)
}

fn works(host: &mut Host, ep: &host::Ep, tag: u64) -> bool {
    let data = pattern(512, tag as u8);
    let (st, _) = host.command(ep, tag, 0, &write10(1, 1, false), &data, 0);
    let (st2, back) = host.command(ep, tag + 1, 0, &read10(1, 1), &[], 512);
    st == Status::Good && st2 == Status::Good && back == data
}

/// Waits (bounded) for the daemon's event that matches `f`.
fn event(daemon: &Daemon, f: impl Fn(&DaemonEvent) -> bool) -> DaemonEvent {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(e) = daemon.events().recv_timeout(Duration::from_millis(100)) {
            if f(&e) {
                return e;
            }
        }
        assert!(Instant::now() < end, "no such event");
    }
}

#[test]
fn another_address_can_neither_replace_nor_join_a_nexus() {
    let (daemon, config) = start(false, 1);
    let mut rightful = Host::open(ip(2), ip(1));
    let ep = log_in(&mut rightful, 0, &config, MultiChannelAction::Single).expect("logs in");
    assert!(works(&mut rightful, &ep, 10));
    // The forger, on its own address, claims the victim's initiator port ID.
    let mut forger = Host::open_as(ip(3), ip(1), HOST_GUID + 1);
    for (i, action) in [MultiChannelAction::Single, MultiChannelAction::Multi]
        .into_iter()
        .enumerate()
    {
        let Err(code) = log_in(&mut forger, i as u64, &config, action) else {
            panic!("{action:?}: a login under another host's port ID from elsewhere was accepted")
        };
        assert_eq!(
            code,
            u32::from(LoginRejReason::UnableToAssociate),
            "{action:?}"
        );
        let e = event(&daemon, |e| matches!(e, DaemonEvent::Rejected { .. }));
        assert!(e.to_string().contains("another address"), "{e}");
    }
    // The victim's channel was not touched.
    assert!(
        works(&mut rightful, &ep, 20),
        "the rightful channel still works"
    );
    // The rightful host, from its own address, replaces its channel as SRP says.
    let ep2 = log_in(&mut rightful, 1, &config, MultiChannelAction::Single).expect("again");
    assert!(works(&mut rightful, &ep2, 30));
}

#[test]
fn nexus_from_any_address_lets_another_address_take_over() {
    let (_daemon, config) = start(true, 5);
    let mut first = Host::open(ip(6), ip(5));
    let _ep = log_in(&mut first, 0, &config, MultiChannelAction::Single).expect("logs in");
    let mut second = Host::open_as(ip(7), ip(5), HOST_GUID + 1);
    let ep = log_in(&mut second, 0, &config, MultiChannelAction::Single).expect("allowed");
    assert!(works(&mut second, &ep, 40));
}

#[test]
fn an_acl_entry_bound_to_an_address_admits_it_from_there_only() {
    let allow = format!("\"guid:{:#018x}@{}\"", HOST_GUID, ip(9));
    let (daemon, config) = start_with(&allow, false, 8);
    // The victim's identifier from another address: not admitted.
    let mut forger = Host::open_as(ip(10), ip(8), HOST_GUID + 1);
    let Err(code) = log_in(&mut forger, 0, &config, MultiChannelAction::Single) else {
        panic!("admitted from the wrong address")
    };
    assert_eq!(code, u32::from(LoginRejReason::UnableToAssociate));
    let e = event(&daemon, |e| matches!(e, DaemonEvent::Rejected { .. }));
    assert!(e.to_string().contains("not admitted"), "{e}");
    // From its own address: admitted and served.
    let mut rightful = Host::open(ip(9), ip(8));
    let ep = log_in(&mut rightful, 0, &config, MultiChannelAction::Single).expect("admitted");
    assert!(works(&mut rightful, &ep, 50));
}
