//! Two appliances, one LU (issue #30, Deliver 3), in process against a real cluster
//! (`scripts/ceph-cluster.sh`, cephx; 127.0.172.1): two daemons export one RBD image under
//! one LUN name, A from `port_base = 1` with B as its `[[peer]]`, B from `port_base = 3`
//! with A as its peer, B's own group non-optimized. The LU is one LU to a host: the same
//! NAA designator and serial through both; each appliance's relative target port and
//! group its own (reservations are per I_T nexus, which names the port); REPORT TARGET
//! PORT GROUPS the same bytes from both, and still the same from B once A is gone. A write
//! through one appliance reads back through the other at once (librbd's cache off on both).
//! Reservations are one state kept in the cluster: keys registered through either
//! appliance read back through the other; a Write Exclusive reservation taken through A
//! stops writes through B; a PREEMPT through B answers GOOD only once A has the change, so
//! the very next write through A meets REGISTRATIONS PREEMPTED and then RESERVATION
//! CONFLICT; and the two-node cluster challenge with SCSI-2 reservations, one host through
//! each appliance: RESERVE through A, refused through B, a LOGICAL UNIT RESET through B
//! breaks it, B's RESERVE then holds, and A's next write is a conflict; a reset through B
//! reaches A's nexus as a unit attention, reservation or not. An appliance that
//! does not acknowledge a change (a third client watching the state, silent) is fenced by
//! the cluster's blocklist before the change answers GOOD.
//! An appliance with peers refuses an image that has the exclusive-lock feature, naming
//! the image and what to do. Loopback 127.0.145.x for the SRP ports.

mod common;
mod host;

use common::pr::{CLEAR, PREEMPT, REGISTER, RESERVE, WRITE_EXCLUSIVE};
use common::{TempDir, designators, inquiry, pattern, pr_out, read10, write10};
use host::node::{Form, In, Node, Out};
use scsi::{SenseCode, Status};
use srp::wire::tsk_mgmt::TaskMgmtFunction;
use srp_target::config::TargetConfig;
use srp_target::daemon::Daemon;
use std::net::{IpAddr, Ipv4Addr};
use testkit::ceph::CephCluster;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 145, host))
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

    // Reservations are one state across the appliances (kept in the cluster).
    reservations_across(&mut ha, &mut hb);
    a_silent_appliance_is_fenced(&c, &mut ha);

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

fn pr(n: &mut Node, sa: u8, ty: u8, key: u64, sa_key: u64) -> Status {
    let (cdb, params) = pr_out(sa, ty, key, sa_key, 0);
    n.direct(0, &cdb, &params, 0).status
}

/// READ KEYS: the registered keys.
fn keys(n: &mut Node) -> Vec<u64> {
    let d = n.good(0, &[0x5e, 0, 0, 0, 0, 0, 0, 0x10, 0, 0], &[], 4096);
    let len = u32::from_be_bytes(d[4..8].try_into().expect("4")) as usize;
    d[8..8 + len]
        .chunks(8)
        .map(|k| u64::from_be_bytes(k.try_into().expect("8")))
        .collect()
}

fn reservations_across(a: &mut Node, b: &mut Node) {
    let data = pattern(512, 0x61);
    // Registered through each appliance, seen through the other.
    assert_eq!(pr(a, REGISTER, 0, 0, 0xa), Status::Good);
    assert_eq!(pr(b, REGISTER, 0, 0, 0xb), Status::Good);
    let mut k = keys(a);
    k.sort_unstable();
    assert_eq!(k, vec![0xa, 0xb], "B's registration seen through A");
    // Write Exclusive through A: B's writes conflict, its reads do not.
    assert_eq!(pr(a, RESERVE, WRITE_EXCLUSIVE, 0xa, 0), Status::Good);
    assert_eq!(
        b.direct(0, &write10(8, 1, false), &data, 0).status,
        Status::ReservationConflict,
        "a reservation taken through A holds at B"
    );
    b.good(0, &read10(8, 1), &[], 512);
    a.good(0, &write10(8, 1, false), &data, 0);
    // PREEMPT through B: once it is GOOD, A enforces it — the next write through A is told
    // of the preemption, then refused.
    assert_eq!(pr(b, PREEMPT, WRITE_EXCLUSIVE, 0xb, 0xa), Status::Good);
    let r = a.direct(0, &write10(8, 1, false), &data, 0);
    assert_eq!(
        (r.status, r.code()),
        (
            Status::CheckCondition,
            Some(SenseCode::REGISTRATIONS_PREEMPTED)
        ),
        "A told of the preemption through B: {r:?}"
    );
    assert_eq!(
        a.direct(0, &write10(8, 1, false), &data, 0).status,
        Status::ReservationConflict,
        "no write slips in at A after B's PREEMPT answered GOOD"
    );
    assert_eq!(keys(b), vec![0xb]);
    assert_eq!(pr(b, CLEAR, 0, 0xb, 0), Status::Good);
    // A's nexus is told of the CLEAR (RESERVATIONS PREEMPTED): take it.
    let _ = a.direct(0, &[0; 6], &[], 0);

    // The two-node cluster challenge, SCSI-2: RESERVE through A, refused through B; a
    // LOGICAL UNIT RESET through B breaks it; B reserves; A's next write conflicts.
    let reserve6 = [0x16, 0, 0, 0, 0, 0];
    let release6 = [0x17, 0, 0, 0, 0, 0];
    assert_eq!(a.direct(0, &reserve6, &[], 0).status, Status::Good);
    assert_eq!(
        b.direct(0, &reserve6, &[], 0).status,
        Status::ReservationConflict,
        "A's SCSI-2 reservation holds at B"
    );
    let r = b.tmf(0, TaskMgmtFunction::LogicalUnitReset, 0);
    assert_eq!(r.status, Status::Good, "{r:?}");
    // The reset's unit attention, then (the release reaching the cluster off the loop)
    // the reservation: retried as a cluster node's challenger does.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = b.direct(0, &reserve6, &[], 0);
        if r.status == Status::Good {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "B could not reserve after the reset: {r:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The defender (A) loses: told of the reset, then refused.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let r = a.direct(0, &write10(8, 1, false), &data, 0);
        seen.push((r.status, r.code()));
        if r.status == Status::ReservationConflict {
            break;
        }
    }
    assert_eq!(
        seen.last().map(|s| s.0),
        Some(Status::ReservationConflict),
        "the holder through A sees the conflict: {seen:?}"
    );
    assert_eq!(b.direct(0, &release6, &[], 0).status, Status::Good);
    assert!(
        seen.iter()
            .any(|s| s.1 == Some(SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED)),
        "A's nexus was told of the reset through B: {seen:?}"
    );

    // A LOGICAL UNIT RESET through B with nothing reserved: A's nexus is told all the same
    // (SAM-5: every I_T nexus of the LU), a moment after the reset is answered.
    let _ = b.direct(0, &[0; 6], &[], 0);
    let _ = a.direct(0, &[0; 6], &[], 0);
    let r = b.tmf(0, TaskMgmtFunction::LogicalUnitReset, 0);
    assert_eq!(r.status, Status::Good, "{r:?}");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = a.direct(0, &[0; 6], &[], 0);
        if r.code() == Some(SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED) {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "A was not told of B's reset: {r:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // B's own nexus has the reset's unit attention too: taken.
    let _ = b.direct(0, &[0; 6], &[], 0);
}

/// A third "appliance" that watches the shared state and never acknowledges: a change
/// through A waits for it (the acknowledgement timeout), fences it, then answers GOOD.
fn a_silent_appliance_is_fenced(c: &CephCluster, a: &mut Node) {
    use std::time::{Duration, Instant};
    let silent = rbd_client::Cluster::connect(
        &c.conf(),
        Some("srp"),
        Some(&c.client_keyring()),
        &[("rados_osd_op_timeout", "10")],
    )
    .expect("connect the silent appliance");
    let pool = silent.pool("rbd").expect("pool");
    let gid = silent.instance_id().expect("id");
    let addr = silent.address().expect("address");
    pool.object("srp.members.shared")
        .and_then(|o| o.set_attr(&format!("srp.member.{gid}"), addr.as_bytes()))
        .expect("recorded as a member");
    let state = pool.object("srp.pr.shared").expect("the state's object");
    let watch = state
        .watch(drop, |_| {})
        .expect("watch, never acknowledging");
    let t0 = Instant::now();
    // Sent and awaited by hand: the answer takes longer than the test host's usual wait.
    let (cdb, params) = pr_out(REGISTER, 0, 0, 0xc, 0);
    let tag = a.next_tag();
    let (iu, _) = a.cmd(tag, 0, &cdb, Out::Direct(&params), In::None);
    a.send_all(&[iu]);
    let rsp = match a.next_event(Duration::from_secs(40)) {
        Some(Ok(iu)) => <srp::wire::rsp::Rsp as wirekit::WireRepr>::parse(&iu).map(|r| r.status),
        other => panic!("no answer to the REGISTER: {other:?}"),
    };
    assert_eq!(rsp.ok(), Some(Status::Good));
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(9),
        "answered after {waited:?}: it did not wait for the silent appliance"
    );
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match state.read(64) {
            Err(e) => {
                eprintln!("the silent appliance is fenced: {e}");
                break;
            }
            Ok(_) => {
                assert!(
                    Instant::now() < end,
                    "the silent appliance can still read 30 s later"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    drop(watch);
}
