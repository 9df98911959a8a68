//! Partitions through the running daemon (issue #14, Deliver 7): a port on the default
//! partition and `storage` (0x8001), one IOC exported on `storage` only and one on the
//! default partition. A host on `storage` logs in to the first and does I/O (a limited
//! member too, since the target's port is a full one); a login on a partition the IOC is
//! not exported on is refused with the partition named; a host on a partition the port
//! is not on gets no answer at all, its MADs counted as P_Key drops; discovery on a
//! partition lists only the IOCs exported there. Loopback 127.0.129.x.

mod common;
mod host;

use common::TempDir;
use hca::PKey;
use host::Host;
use host::node::{Form, Node, await_event};
use srp::wire::login::LoginRejReason;
use srp_target::config::TargetConfig;
use srp_target::control::{ControlAnswer, ControlRequest};
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 129, host))
}

fn daemon(t: u8) -> (Daemon, TargetConfig, TempDir) {
    let dir = TempDir::new("daemon-partitions");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d29000\"\n\n\
         [[partition]]\nname = \"storage\"\npkey = \"0x8001\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\npartitions = [\"default\", \"storage\"]\n\n\
         [[lun]]\nname = \"ram\"\nram = true\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-storage\"\nguid = \"0x0002c90300d29001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram\" }}\nallow = [\"any\"]\npartitions = [\"storage\"]\n\n\
         [[ioc]]\nname = \"ioc-default\"\nguid = \"0x0002c90300d29002\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram\" }}\nallow = [\"any\"]\n",
        ip(t),
    );
    let config = TargetConfig::from_str(&text, "partitions.toml")
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

/// A host at `addr` (node GUID `guid`) whose port has the one partition `pkey`, for the
/// target at `t`.
fn host_on(t: u8, addr: u8, guid: u64, pkey: PKey) -> Host {
    let mut h = Host::open_as(ip(addr), ip(t), guid);
    h.hca
        .with(|e, _| e.set_pkey_table(1, vec![pkey]))
        .expect("host P_Key table");
    h.cm.set_pkey_table(vec![pkey]);
    h
}

#[test]
fn logins_are_taken_only_on_the_iocs_partitions() {
    const T: u8 = 1;
    let (d, config, _dir) = daemon(T);
    let (storage, default) = (&config.iocs[0], &config.iocs[1]);
    let mut seen = Vec::new();
    // On `storage`, to the IOC exported there: logged in, I/O works.
    let mut full = Node::try_open_with(
        host_on(T, 2, 0xd291, PKey(0x8001)),
        storage,
        Form::IbCm,
        false,
    )
    .expect("a full member of storage");
    full.write_read(0, 0, 1);
    // A limited member of `storage`: the target's port is a full member, so it may talk.
    let mut limited = Node::try_open_with(
        host_on(T, 3, 0xd292, PKey(0x0001)),
        storage,
        Form::IbCm,
        false,
    )
    .expect("a limited member of storage");
    limited.write_read(0, 8, 2);
    // On the default partition, to the IOC exported only on `storage`: refused, named.
    let unable = u32::from(LoginRejReason::UnableToAssociate);
    let refused = Node::try_open_with(
        host_on(T, 4, 0xd293, PKey::DEFAULT),
        storage,
        Form::IbCm,
        false,
    );
    assert_eq!(refused.err(), Some(unable));
    let (ioc, reason) = await_event(&d, &mut seen, |e| match e {
        DaemonEvent::Rejected { ioc, reason, .. } => Some((ioc.clone(), reason.clone())),
        _ => None,
    });
    assert!(reason.contains("partition 0xffff"), "{reason}");
    assert_eq!(ioc.as_deref(), Some("ioc-storage"));
    // On `storage`, to the IOC exported only on the default partition: refused too.
    let refused = Node::try_open_with(
        host_on(T, 5, 0xd294, PKey(0x8001)),
        default,
        Form::IbCm,
        false,
    );
    assert_eq!(refused.err(), Some(unable));
    // The default partition still serves the default IOC.
    let mut plain = Node::try_open_with(
        host_on(T, 6, 0xd295, PKey::DEFAULT),
        default,
        Form::IbCm,
        false,
    )
    .expect("default partition");
    plain.write_read(0, 16, 3);
    d.shutdown();
}

#[test]
fn a_partition_the_port_is_not_on_gets_no_answer() {
    const T: u8 = 11;
    let (d, config, _dir) = daemon(T);
    let drops = || match d.control().call(ControlRequest::ListPorts) {
        Ok(ControlAnswer::Ports(p)) => p[0].hca.get("pkey_mismatch"),
        other => panic!("ListPorts: {other:?}"),
    };
    let before = drops();
    let mut h = host_on(T, 17, 0xd296, PKey(0x8002));
    let ep = h.ep(0);
    let ioc = &config.iocs[0];
    let me = srp::wire::PortId::new(0, hca::Guid(0xd296), srp::wire::IoClass::SrpR16a);
    let params = h.connect_params(
        &ep,
        ioc.service_id,
        host::ib_form(&host::node::request(me, ioc, false)),
    );
    let now = h.hca.with(|_, now| now);
    let conn = h.cm.connect(now, &params).expect("connect");
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        h.pump();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        h.events
            .iter()
            .all(|e| !matches!(e, access_layer::cm::CmEvent::RepReceived { .. })),
        "no REP on a partition the port is not on"
    );
    assert!(drops() > before, "the REQs were counted as P_Key drops");
    let _ = conn;
    d.shutdown();
}

#[test]
fn discovery_on_a_partition_shows_only_the_iocs_exported_there() {
    use access_layer::mad::dm::{DmAttr, SlotState};
    use access_layer::mad::{DmAttribute, MadBody, parse_any};
    const T: u8 = 21;
    let (d, _config, _dir) = daemon(T);
    // Slot 1 is ioc-storage, slot 2 ioc-default (configuration order), in every agent.
    let slots = |addr: u8, guid: u64, pkey: PKey| {
        let mut h = host_on(T, addr, guid, pkey);
        let raw = h.dm_get(DmAttr::IouInfo, 0, 1);
        let m = parse_any(&raw.0).expect("DM answer");
        let MadBody::Dm {
            attr: DmAttribute::IouInfo(info),
            ..
        } = m.body
        else {
            panic!("not IOUnitInfo: {m:?}");
        };
        (info.slot(1).expect("slot 1"), info.slot(2).expect("slot 2"))
    };
    assert_eq!(
        slots(22, 0xd2a1, PKey(0x8001)),
        (SlotState::Present, SlotState::NotInstalled),
        "on storage: only the IOC exported there"
    );
    assert_eq!(
        slots(23, 0xd2a2, PKey::DEFAULT),
        (SlotState::NotInstalled, SlotState::Present),
        "on the default partition: only the default IOC"
    );
    d.shutdown();
}
