//! Two appliances, one LU (issue #30, Deliver 3), in process against a real cluster
//! (`scripts/ceph-cluster.sh`, cephx; 127.0.172.1): two daemons export one RBD image under
//! one LUN name, A from `port_base = 1` with B as its `[[peer]]`, B from `port_base = 3`
//! with A as its peer, B's own group non-optimized. The LU is one LU to a host: the same
//! NAA designator and serial through both; each appliance's relative target port and
//! group its own (reservations are per I_T nexus, which names the port); REPORT TARGET
//! PORT GROUPS the same bytes from both, and still the same from B once A is gone. A write
//! through one appliance reads back through the other at once (librbd's cache off on both).
//! An appliance with peers refuses an image that has the exclusive-lock feature, naming
//! the image and what to do. Loopback 127.0.141.x for the SRP ports.

mod common;
mod host;

use common::{TempDir, designators, inquiry, pattern, read10, write10};
use host::node::{Form, Node};
use srp_target::config::TargetConfig;
use srp_target::daemon::Daemon;
use std::net::{IpAddr, Ipv4Addr};
use testkit::ceph::CephCluster;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 141, host))
}

/// Appliance `which` (0: A, 1: B) of the pair, exporting `image` as LUN "shared".
fn config(dir: &TempDir, c: &CephCluster, which: u8, image: &str, b_alua: &str) -> TargetConfig {
    let (base, peer_groups, peer_alua, own_alua) = if which == 0 {
        (1, "[3]", b_alua, "active/optimized")
    } else {
        (3, "[1]", "active/optimized", b_alua)
    };
    let text = format!(
        "[target]\nname = \"pair-{which}\"\nnode_guid = \"0x0002c90300d9{which:02x}00\"\n\
         state_dir = \"{}\"\nport_base = {base}\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"shared\"\nrbd = \"rbd/{image}\"\nceph_conf = \"{}\"\n\
         ceph_client = \"srp\"\nceph_keyring = \"{}\"\n\n\
         [[ioc]]\nname = \"ioc\"\nguid = \"0x0002c90300d9{which:02x}01\"\nports = [\"p0\"]\n\
         alua = \"{own_alua}\"\nexports = {{ 0 = \"shared\" }}\nallow = [\"any\"]\n\n\
         [[peer]]\nname = \"pair-{}\"\nport_groups = {peer_groups}\nalua = \"{peer_alua}\"\n",
        dir.path().join(format!("state-{which}")).display(),
        ip(1 + which * 10),
        c.conf().display(),
        c.client_keyring().display(),
        1 - which,
    );
    TargetConfig::from_str(&text, "pair.toml")
        .expect("config valid")
        .config
}

/// VPD 83h of LUN 0: (NAA, relative target port, target port group).
fn identity(n: &mut Node) -> (Vec<u8>, u16, u16) {
    let page = n.good(0, &inquiry(Some(0x83), 255), &[], 255);
    let (mut naa, mut rel, mut tpg) = (Vec::new(), 0, 0);
    for (_, assoc_type, v) in designators(&page) {
        match assoc_type & 0x3f {
            0x03 => naa = v,
            0x14 => rel = u16::from_be_bytes([v[2], v[3]]),
            0x15 => tpg = u16::from_be_bytes([v[2], v[3]]),
            _ => {}
        }
    }
    (naa, rel, tpg)
}

const RTPG: [u8; 12] = [0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];

#[test]
fn two_appliances_serve_one_lu() {
    let c = CephCluster::start("127.0.172.1", "rbd-pair");
    c.rbd(&[
        "create",
        "--size",
        "8M",
        "--image-feature",
        "layering",
        "rbd/shared",
    ]);
    let dir = TempDir::new("rbd-pair");
    let (ca, cb) = (
        config(&dir, &c, 0, "shared", "active/non-optimized"),
        config(&dir, &c, 1, "shared", "active/non-optimized"),
    );
    let a = Daemon::start(ca.clone(), common::daemon_options()).expect("A starts");
    let b = Daemon::start(cb.clone(), common::daemon_options()).expect("B starts");
    let mut ha = Node::open(ip(2), ip(1), 0xa951, &ca.iocs[0], Form::IbCm, false);
    let mut hb = Node::open(ip(12), ip(11), 0xa952, &cb.iocs[0], Form::IbCm, false);

    // One LU: the same NAA and serial; each appliance its own port and group.
    let (naa_a, rel_a, tpg_a) = identity(&mut ha);
    let (naa_b, rel_b, tpg_b) = identity(&mut hb);
    assert!(!naa_a.is_empty(), "an NAA designator");
    assert_eq!(naa_a, naa_b, "one NAA identifier through both appliances");
    assert_eq!(
        (rel_a, tpg_a, rel_b, tpg_b),
        (1, 1, 3, 3),
        "ports and groups distinct"
    );
    let serial = |n: &mut Node| n.good(0, &inquiry(Some(0x80), 255), &[], 255);
    assert_eq!(serial(&mut ha), serial(&mut hb), "one serial number");

    // REPORT TARGET PORT GROUPS: the same bytes from both — A's group 1 optimized, B's
    // group 3 non-optimized, each with its one relative port.
    let ra = ha.good(0, &RTPG, &[], 256);
    let rb = hb.good(0, &RTPG, &[], 256);
    assert_eq!(ra, rb, "both appliances answer alike");
    assert_eq!(
        (ra[4] & 0x0f, &ra[6..8], &ra[12..16]),
        (0, &[0, 1][..], &[0, 0, 0, 1][..])
    );
    assert_eq!(
        (ra[16] & 0x0f, &ra[18..20], &ra[24..28]),
        (1, &[0, 3][..], &[0, 0, 0, 3][..])
    );

    // A write through A reads back through B at once, and the other way round.
    let d1 = pattern(4096, 0x21);
    ha.good(0, &write10(64, 8, false), &d1, 0);
    assert_eq!(hb.good(0, &read10(64, 8), &[], 4096), d1);
    let d2 = pattern(4096, 0x22);
    hb.good(0, &write10(64, 8, true), &d2, 0);
    assert_eq!(ha.good(0, &read10(64, 8), &[], 4096), d2);

    // A gone: B answers as before.
    drop(ha);
    a.shutdown();
    assert_eq!(
        hb.good(0, &RTPG, &[], 256),
        rb,
        "the same answer with A down"
    );

    // An image with exclusive-lock (Debian's default features) is refused by an appliance
    // with peers, naming the image and the way out.
    c.rbd(&["create", "--size", "8M", "rbd/locked"]);
    let locked = config(&dir, &c, 0, "locked", "active/optimized");
    let e = Daemon::start(locked, common::daemon_options())
        .expect_err("an exclusive-lock image is refused")
        .to_string();
    assert!(
        e.contains("rbd:rbd/locked")
            && e.contains("exclusive-lock")
            && e.contains("rbd feature disable"),
        "{e}"
    );
    drop(hb);
    b.shutdown();
}
