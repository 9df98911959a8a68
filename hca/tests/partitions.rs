//! Partitions (IBTA 10.9): each port has a P_Key table, each QP is bound to one of its
//! entries, and a packet reaches a QP only if its BTH P_Key is the QP's partition with at
//! least one side a full member; QP1 takes MADs on every partition of its port's table and
//! says which in the completion, and answers on the partition a WR names. On the simulated
//! fabric.

mod common;

use common::*;
use hca::ids::{Gid, PKey, QKey, Qpn};
use hca::sim::{Fabric, FaultConfig};
use hca::verbs::{SendOp, SendWr, UdDest, WcStatus};

const FULL: PKey = PKey(0x8001);
const LIMITED: PKey = PKey(0x0001);

#[test]
fn membership_rule() {
    assert!(FULL.matches(FULL));
    assert!(FULL.matches(LIMITED) && LIMITED.matches(FULL));
    assert!(!LIMITED.matches(LIMITED), "two limited members cannot talk");
    assert!(!FULL.matches(PKey(0x8002)), "another partition");
    assert!(
        !PKey(0x8000).matches(PKey(0x8000)),
        "partition 0 is invalid"
    );
    assert!(PKey::DEFAULT.matches(PKey::DEFAULT));
}

#[test]
fn tables_are_validated() {
    let mut f = Fabric::new(1, FaultConfig::default());
    let a = node(&mut f, 2, PairOpts::default());
    let e = f.hca(a.hca);
    assert!(e.set_pkey_table(1, vec![]).is_err(), "empty");
    assert!(e.set_pkey_table(1, vec![PKey(0x8000)]).is_err(), "base 0");
    assert!(
        e.set_pkey_table(1, vec![FULL, LIMITED]).is_err(),
        "a partition twice"
    );
    assert!(e.set_pkey_table(2, vec![FULL]).is_err(), "no port 2");
    e.set_pkey_table(1, vec![PKey::DEFAULT, FULL])
        .expect("valid");
    assert_eq!(e.pkey_table(1), Some(&[PKey::DEFAULT, FULL][..]));
}

/// `a` (table `ta`, QP on index `ia`) and `b` (`tb`, `ib`) connected; one SEND from a to b.
/// The SEND's completion status at `a`, whether `b` received it, and b's P_Key drops.
fn send_across(ta: Vec<PKey>, ia: u16, tb: Vec<PKey>, ib: u16) -> (WcStatus, bool, u64) {
    let mut f = Fabric::new(7, FaultConfig::default());
    let opts = PairOpts::default();
    let a = node(&mut f, 2, opts);
    let b = node(&mut f, 3, opts);
    f.hca(a.hca).set_pkey_table(1, ta).expect("table a");
    f.hca(b.hca).set_pkey_table(1, tb).expect("table b");
    let psn = hca::ids::Psn::from_wire(100);
    connect(
        &mut f,
        &a,
        &b,
        psn,
        psn,
        PairOpts {
            pkey_index: ia,
            ..opts
        },
    );
    connect(
        &mut f,
        &b,
        &a,
        psn,
        psn,
        PairOpts {
            pkey_index: ib,
            ..opts
        },
    );
    post_recv(&mut f, &b, recv_wr(9, vec![b.sge(0, 64)]));
    fill(&a.mem, 0, 64, 3);
    post_send(&mut f, &a, send_wr(1, SendOp::Send, vec![a.sge(0, 64)]));
    settle(&mut f);
    let sent = drain(&mut f, &a);
    let got = drain(&mut f, &b);
    let drops = f.hca(b.hca).port_stats(1).expect("port").pkey_mismatch;
    let status = sent.first().map_or(WcStatus::GeneralErr, |w| w.status);
    (
        status,
        got.iter()
            .any(|w| w.wr_id == 9 && w.status == WcStatus::Success),
        drops,
    )
}

#[test]
fn rc_traffic_stays_in_its_partition() {
    // Both on 0x8001, at different indexes of their tables.
    let (s, got, drops) = send_across(vec![PKey::DEFAULT, FULL], 1, vec![FULL], 0);
    assert_eq!((s, got, drops), (WcStatus::Success, true, 0));
    // A limited member talks to a full one.
    let (s, got, _) = send_across(vec![LIMITED], 0, vec![FULL], 0);
    assert_eq!((s, got), (WcStatus::Success, true));
    // Two limited members do not: the packets are dropped, the sender's retries run out.
    let (s, got, drops) = send_across(vec![LIMITED], 0, vec![LIMITED], 0);
    assert_eq!((s, got), (WcStatus::RetryExcErr, false));
    assert!(drops > 0);
    // Another partition is dropped too.
    let (s, got, drops) = send_across(vec![FULL], 0, vec![PKey(0x8002)], 0);
    assert_eq!((s, got), (WcStatus::RetryExcErr, false));
    assert!(drops > 0);
}

#[test]
fn a_qp_cannot_be_bound_outside_its_ports_table() {
    let mut f = Fabric::new(3, FaultConfig::default());
    let opts = PairOpts::default();
    let a = node(&mut f, 2, opts);
    let now = f.now();
    let e = f.hca(a.hca);
    let peer = hca::engine::RcConnect {
        access: opts.access,
        dest_gid: Gid::from_ip(a.ip),
        dest_qpn: a.qpn,
        path_mtu: opts.mtu,
        sq_psn: hca::ids::Psn::from_wire(1),
        rq_psn: hca::ids::Psn::from_wire(1),
        timeout: 8,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: 8,
        max_dest_rd_atomic: 8,
        pkey_index: 1, // the table has one entry
        flow_label: 0,
        hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
        traffic_class: 0,
    };
    let err = e
        .connect_rc(now, a.qp, &peer)
        .expect_err("index 1 of a 1-entry table");
    assert!(err.to_string().contains("pkey_index"), "{err}");
}

#[test]
fn qp1_takes_mads_on_every_partition_of_its_table_and_answers_on_the_one_named() {
    let mut f = Fabric::new(5, FaultConfig::default());
    let a = gsi_node(&mut f, 2, QKey::GSI);
    let b = gsi_node(&mut f, 3, QKey::GSI);
    f.hca(a.hca)
        .set_pkey_table(1, vec![PKey::DEFAULT, FULL])
        .expect("a");
    f.hca(b.hca)
        .set_pkey_table(1, vec![FULL, PKey(0x8002)])
        .expect("b");
    let mad = |wr_id, to: &Node, pkey_index| SendWr {
        ud: Some(UdDest {
            gid: Gid::from_ip(to.ip),
            qpn: Qpn::GSI,
            qkey: QKey::GSI,
            pkey_index,
        }),
        ..send_wr(wr_id, SendOp::Send, vec![b.sge(0, 256)])
    };
    for i in 0..3 {
        post_recv(&mut f, &a, recv_wr(100 + i, vec![a.sge(4096 * i, 296)]));
    }
    // b sends on 0x8001 (its index 0): a takes it on its index 1.
    post_send(&mut f, &b, mad(1, &a, 0));
    // b sends on 0x8002 (its index 1): a is not on that partition, drops it.
    post_send(&mut f, &b, mad(2, &a, 1));
    // b names an index its table does not have: the WR fails locally.
    post_send(&mut f, &b, mad(3, &a, 5));
    settle(&mut f);
    let got = drain(&mut f, &a);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].pkey_index, Some(1));
    assert_eq!(f.hca(a.hca).port_stats(1).expect("port").pkey_mismatch, 1);
    let sent = drain(&mut f, &b);
    assert!(
        sent.iter()
            .any(|w| w.wr_id == 3 && w.status == WcStatus::LocQpOpErr),
        "{sent:?}"
    );
}
