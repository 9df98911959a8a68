//! A LUN on a Ceph RBD image whose cluster stops answering (issue #30): the OSD is killed
//! under a running daemon (a real cluster, `scripts/ceph-cluster.sh`, cephx; 127.0.176.1).
//! A READ of the RBD LUN is answered CHECK CONDITION, MEDIUM ERROR (UNRECOVERED READ
//! ERROR) once librbd's operation timeout (30 s) has passed — not held for ever — and is
//! counted; meanwhile the same channel's RAM LUN is served at once: nothing waits for the
//! dead cluster but the command that needs it. Loopback 127.0.177.x for the SRP ports.

mod common;
mod host;

use common::{TempDir, pattern, read10, write10};
use host::node::{Form, In, Node, Out};
use scsi::{SenseCode, Status};
use srp_target::config::TargetConfig;
use srp_target::control::{ControlAnswer, ControlRequest};
use srp_target::daemon::Daemon;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use testkit::ceph::CephCluster;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 177, host))
}

#[test]
fn a_dead_cluster_fails_its_commands_and_nothing_else() {
    let c = CephCluster::start("127.0.176.1", "rbd-dead");
    c.rbd(&[
        "create",
        "--size",
        "8M",
        "--image-feature",
        "layering",
        "rbd/lun0",
    ]);
    let dir = TempDir::new("rbd-dead");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d7a000\"\nstate_dir = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"rbd0\"\nrbd = \"rbd/lun0\"\nceph_conf = \"{}\"\n\
         ceph_client = \"srp\"\nceph_keyring = \"{}\"\n\n\
         [[lun]]\nname = \"mem\"\nram = true\nsize = \"4MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d7a001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"rbd0\", 1 = \"mem\" }}\nallow = [\"any\"]\n",
        dir.path().join("state").display(),
        ip(1),
        c.conf().display(),
        c.client_keyring().display(),
    );
    let config = TargetConfig::from_str(&text, "dead.toml")
        .expect("config valid")
        .config;
    let daemon = Daemon::start(config.clone(), common::daemon_options()).expect("daemon starts");
    let mut a = Node::open(ip(2), ip(1), 0xa961, &config.iocs[0], Form::IbCm, false);
    a.good(0, &read10(0, 8), &[], 4096);

    // The OSD killed: the cluster can no longer serve the image.
    let run = c.dir().join("run");
    let osd = std::fs::read_dir(&run)
        .expect("run dir")
        .flatten()
        .find(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("osd") && n.ends_with(".pid")
        })
        .and_then(|e| std::fs::read_to_string(e.path()).ok())
        .and_then(|p| p.trim().parse::<i32>().ok())
        .expect("the OSD's pid");
    let killed = std::process::Command::new("kill")
        .args(["-9", &osd.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success(), "kill the OSD");

    // A READ of the RBD LUN, sent and left waiting.
    let t0 = Instant::now();
    let tag = a.next_tag();
    let (iu, _) = a.cmd(tag, 0, &read10(8, 8), Out::None, In::Direct(4096));
    a.send_all(&[iu]);
    // The RAM LUN is served meanwhile, at once.
    let data = pattern(4096, 0x5d);
    a.good(1, &write10(0, 8, false), &data, 0);
    assert_eq!(a.good(1, &read10(0, 8), &[], 4096), data);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the RAM LUN waited for the dead cluster"
    );
    // The RBD READ: failed after librbd's timeout, not held for ever.
    let iu = match a.next_event(Duration::from_secs(90)) {
        Some(Ok(iu)) => iu,
        other => panic!("no answer to the READ of the dead cluster's LUN: {other:?}"),
    };
    let waited = t0.elapsed();
    let rsp = <srp::wire::rsp::Rsp as wirekit::WireRepr>::parse(&iu).expect("SRP_RSP");
    assert_eq!(rsp.status, Status::CheckCondition, "{rsp:?}");
    let sense = <scsi::Sense as wirekit::WireRepr>::parse(rsp.sense).expect("sense");
    assert_eq!(sense.code(), SenseCode::UNRECOVERED_READ_ERROR, "{sense:?}");
    assert!(
        waited >= Duration::from_secs(20) && waited < Duration::from_secs(80),
        "answered after {waited:?} (librbd's operation timeout is 30 s)"
    );
    let luns = match daemon.control().call(ControlRequest::ListLuns) {
        Ok(ControlAnswer::Luns(l)) => l,
        other => panic!("LUNs: {other:?}"),
    };
    let rbd = luns.iter().find(|l| l.name == "rbd0").expect("rbd0");
    assert!(rbd.counters.check_conditions >= 1, "{:?}", rbd.counters);
    drop(a);
    daemon.shutdown();
}
