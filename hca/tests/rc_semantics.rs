//! Send-queue semantics on the simulated fabric: fences, chained posts, the SQD drain, and a
//! port that goes down and comes back within the retry budget.

mod common;

use common::*;
use hca::engine::Event;
use hca::qp::QpAttr;
use hca::qp::state::{QpAttrMask, QpState};
use hca::sim::FaultConfig;
use hca::verbs::{SendFlags, SendOp, WcStatus};
use hca::wire::{Opcode, Packet};
use std::time::Duration;

fn opcodes_queued(f: &mut hca::sim::Fabric, hca_index: usize) -> Vec<Opcode> {
    let mut ops = Vec::new();
    while let Some(t) = f.hca(hca_index).poll_transmit() {
        if let Ok(p) = Packet::parse(&t.bytes) {
            ops.push(p.bth.opcode);
        }
    }
    ops
}

fn read_then_write(fence: bool) -> Vec<Opcode> {
    let (mut f, a, b) = pair(3, FaultConfig::default(), PairOpts::default());
    post_send(
        &mut f,
        &a,
        send_wr(
            1,
            SendOp::Read {
                remote_addr: IOVA,
                rkey: b.rkey(),
            },
            vec![a.sge(1 << 20, 8192)],
        ),
    );
    let mut wr = send_wr(
        2,
        SendOp::Write {
            remote_addr: IOVA + (1 << 20),
            rkey: b.rkey(),
        },
        vec![a.sge(0, 100)],
    );
    if fence {
        wr.flags |= SendFlags::FENCE;
    }
    post_send(&mut f, &a, wr);
    opcodes_queued(&mut f, a.hca)
}

#[test]
fn fence_holds_a_request_until_earlier_reads_complete() {
    let unfenced = read_then_write(false);
    assert_eq!(
        unfenced,
        [Opcode::RcRdmaReadRequest, Opcode::RcRdmaWriteOnly],
        "without a fence both go at once"
    );
    let fenced = read_then_write(true);
    assert_eq!(
        fenced,
        [Opcode::RcRdmaReadRequest],
        "the fenced WRITE waits for the READ"
    );
    // And once the READ completes, the fenced WRITE goes and completes after it.
    let (mut f, a, b) = pair(4, FaultConfig::default(), PairOpts::default());
    fill(&b.mem, 0, 8192, 9);
    post_send(
        &mut f,
        &a,
        send_wr(
            1,
            SendOp::Read {
                remote_addr: IOVA,
                rkey: b.rkey(),
            },
            vec![a.sge(1 << 20, 8192)],
        ),
    );
    let mut wr = send_wr(
        2,
        SendOp::Write {
            remote_addr: IOVA + (2 << 20),
            rkey: b.rkey(),
        },
        vec![a.sge(1 << 20, 8192)],
    );
    wr.flags |= SendFlags::FENCE;
    post_send(&mut f, &a, wr);
    let mut wcs = Vec::new();
    let an = &a;
    assert!(f.run_until(Duration::from_secs(1), |f| {
        poll(f, an, &mut wcs);
        wcs.len() == 2
    }));
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    // The fenced WRITE sent what the READ brought in.
    assert_eq!(read(&b.mem, 0, 8192), read(&b.mem, 2 << 20, 8192));
}

#[test]
fn a_chain_of_requests_posts_in_order_and_stops_at_the_first_bad_one() {
    let (mut f, a, b) = pair(5, FaultConfig::default(), PairOpts::default());
    let w = |id: u64, off: u64| {
        send_wr(
            id,
            SendOp::Write {
                remote_addr: IOVA + off,
                rkey: b.rkey(),
            },
            vec![a.sge(off, 4000)],
        )
    };
    let mut too_many = w(3, 0);
    too_many.sg_list = [a.sge(0, 1); 17].into(); // the QPs allow 16
    let now = f.now();
    let err =
        f.hca(a.hca)
            .post_send_list(now, a.qp, vec![w(1, 0), w(2, 8192), too_many, w(4, 16384)]);
    assert!(matches!(err, Err((2, _))), "{err:?}");
    let mut wcs = Vec::new();
    let an = &a;
    assert!(f.run_until(Duration::from_secs(1), |f| {
        poll(f, an, &mut wcs);
        wcs.len() == 2
    }));
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    f.run_until(Duration::from_millis(20), |_| false);
    poll(&mut f, &a, &mut wcs);
    assert_eq!(wcs.len(), 2, "nothing after the refused request was posted");
}

#[test]
fn sqd_finishes_what_started_starts_nothing_new_and_says_when_drained() {
    let (mut f, a, b) = pair(6, FaultConfig::default(), PairOpts::default());
    let big = send_wr(
        1,
        SendOp::Write {
            remote_addr: IOVA,
            rkey: b.rkey(),
        },
        vec![a.sge(0, 600_000)],
    );
    post_send(&mut f, &a, big);
    let now = f.now();
    let attr = QpAttr {
        state: QpState::Sqd,
        ..QpAttr::default()
    };
    f.hca(a.hca)
        .modify_qp(
            now,
            a.qp,
            &attr,
            QpAttrMask::STATE | QpAttrMask::EN_SQD_ASYNC_NOTIFY,
        )
        .expect("RTS -> SQD");
    // Posting in SQD is allowed; the request waits.
    post_send(
        &mut f,
        &a,
        send_wr(
            2,
            SendOp::Write {
                remote_addr: IOVA,
                rkey: b.rkey(),
            },
            vec![a.sge(0, 10)],
        ),
    );
    let mut wcs = Vec::new();
    let mut events = Vec::new();
    let an = &a;
    assert!(f.run_until(Duration::from_secs(1), |f| {
        poll(f, an, &mut wcs);
        while let Some(e) = f.hca(an.hca).poll_event() {
            events.push(e);
        }
        events.contains(&Event::SqDrained(an.qpn))
    }));
    f.run_until(Duration::from_millis(20), |_| false);
    poll(&mut f, &a, &mut wcs);
    assert_eq!(
        wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        [1],
        "only the started WRITE completes in SQD"
    );
    let now = f.now();
    let attr = QpAttr {
        state: QpState::Rts,
        ..QpAttr::default()
    };
    f.hca(a.hca)
        .modify_qp(now, a.qp, &attr, QpAttrMask::STATE)
        .expect("SQD -> RTS");
    assert!(f.run_until(Duration::from_secs(1), |f| {
        poll(f, an, &mut wcs);
        wcs.len() == 2
    }));
    assert_eq!(wcs[1].wr_id, 2);
    assert_eq!(wcs[1].status, WcStatus::Success);
}

#[test]
fn a_port_that_comes_back_within_the_retry_budget_loses_nothing() {
    let (mut f, a, b) = pair(7, FaultConfig::default(), PairOpts::default());
    fill(&a.mem, 0, 20_000, 11);
    f.hca(b.hca).set_port_active(1, false).expect("port 1");
    post_send(
        &mut f,
        &a,
        send_wr(
            1,
            SendOp::Write {
                remote_addr: IOVA + (1 << 20),
                rkey: b.rkey(),
            },
            vec![a.sge(0, 20_000)],
        ),
    );
    f.run_until(Duration::from_millis(3), |_| false);
    f.hca(b.hca).set_port_active(1, true).expect("port 1");
    let mut wcs = Vec::new();
    let an = &a;
    assert!(f.run_until(Duration::from_secs(1), |f| {
        poll(f, an, &mut wcs);
        !wcs.is_empty()
    }));
    assert_eq!(wcs[0].status, WcStatus::Success);
    assert_eq!(read(&a.mem, 0, 20_000), read(&b.mem, 1 << 20, 20_000));
    let mut events = Vec::new();
    while let Some(e) = f.hca(b.hca).poll_event() {
        events.push(e);
    }
    assert_eq!(events, [Event::PortDown(1), Event::PortActive(1)]);
    assert!(
        f.hca(b.hca).stats().port_down_drops > 0,
        "the down port dropped traffic"
    );
}
