//! RC verbs beyond plain data movement, on the simulated fabric: immediate data (SEND and
//! RDMA WRITE with immediate), a shared receive queue feeding two QPs with its limit event,
//! and completion queue notification.

mod common;

use common::*;
use hca::engine::{Event, VerbsError};
use hca::ids::{Psn, Rkey};
use hca::qp::QpError;
use hca::sim::FaultConfig;
use hca::verbs::{ArmMode, SendFlags, SendOp, WcOpcode, WcStatus};

#[test]
fn send_and_write_with_immediate_deliver_it_in_the_receive_completion() {
    let (mut f, a, b) = pair(61, FaultConfig::default(), PairOpts::default());
    for i in 0..3 {
        post_recv(&mut f, &b, recv_wr(100 + i, vec![b.sge(i << 16, 4096)]));
    }
    fill(&a.mem, 0, 2500, 1);
    fill(&a.mem, 8192, 3000, 2);
    // Both multi-packet at MTU 1024: the immediate rides on the last packet.
    post_send(
        &mut f,
        &a,
        send_wr(1, SendOp::SendWithImm(0x1234_5678), vec![a.sge(0, 2500)]),
    );
    let write = SendOp::WriteWithImm {
        remote_addr: IOVA + (4 << 20),
        rkey: b.rkey(),
        imm: 0xabcd_ef01,
    };
    post_send(&mut f, &a, send_wr(2, write, vec![a.sge(8192, 3000)]));
    // Zero bytes need no R_Key (C9-88) but still consume a receive and carry the immediate.
    let empty = SendOp::WriteWithImm {
        remote_addr: 0,
        rkey: Rkey(0),
        imm: 7,
    };
    post_send(&mut f, &a, send_wr(3, empty, vec![]));
    settle(&mut f);
    assert_eq!(
        statuses(&drain(&mut f, &a)),
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    let got = drain(&mut f, &b);
    let summary: Vec<_> = got
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.imm, w.byte_len))
        .collect();
    assert_eq!(
        summary,
        [
            (
                100,
                WcStatus::Success,
                WcOpcode::Recv,
                Some(0x1234_5678),
                2500
            ),
            (
                101,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                Some(0xabcd_ef01),
                3000
            ),
            (
                102,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                Some(7),
                0
            ),
        ]
    );
    assert_eq!(read(&b.mem, 0, 2500), read(&a.mem, 0, 2500));
    assert_eq!(read(&b.mem, 4 << 20, 3000), read(&a.mem, 8192, 3000));
    assert!(
        read(&b.mem, 1 << 16, 16).iter().all(|&x| x == 0),
        "WRITE data goes to the address, not the receive"
    );
}

#[test]
fn a_shared_receive_queue_feeds_two_qps_and_fires_its_limit_once() {
    let (mut f, a, b) = pair(62, FaultConfig::default(), PairOpts::default());
    let srq = f.hca(b.hca).create_srq(8);
    let (b2, b3) = (
        extra_qp(&mut f, &b, Some(srq)),
        extra_qp(&mut f, &b, Some(srq)),
    );
    let (a2, a3) = (extra_qp(&mut f, &a, None), extra_qp(&mut f, &a, None));
    let psn = Psn::from_wire(100);
    for (x, y) in [(&a2, &b2), (&b2, &a2), (&a3, &b3), (&b3, &a3)] {
        connect(&mut f, x, y, psn, psn, PairOpts::default());
    }
    let now = f.now();
    assert_eq!(
        f.hca(b.hca).post_recv(now, b2.qp, recv_wr(1, vec![])),
        Err(VerbsError::Qp(QpError::UsesSrq(b2.qpn)))
    );
    for i in 0..4u64 {
        f.hca(b.hca)
            .post_srq_recv(srq, recv_wr(100 + i, vec![b.sge(i << 16, 1024)]))
            .expect("post_srq_recv");
    }
    f.hca(b.hca).srq_set_limit(srq, 2).expect("arm");
    // Messages alternate between the two QPs; each takes the oldest shared receive.
    let senders = [&a2, &a3, &a2, &a3];
    let receivers = [&b2, &b3, &b2, &b3];
    for (i, sender) in (0u64..).zip(senders) {
        fill(&a.mem, i * 1024, 100, i);
        post_send(
            &mut f,
            sender,
            send_wr(i, SendOp::Send, vec![a.sge(i * 1024, 100)]),
        );
        settle(&mut f);
        let got = drain(&mut f, &b);
        assert_eq!(
            statuses(&got),
            [(100 + i, WcStatus::Success)],
            "message {i}"
        );
        assert_eq!(
            got[0].qpn, receivers[i as usize].qpn,
            "message {i} arrived on its QP"
        );
        assert_eq!(read(&b.mem, i << 16, 100), read(&a.mem, i * 1024, 100));
        // The limit (2) is crossed when the third receive is taken, leaving one: once only.
        let expected: &[Event] = if i == 2 { &[Event::SrqLimit(srq)] } else { &[] };
        assert_eq!(events(&mut f, b.hca), expected, "after message {i}");
    }
    // The queue is empty: the next message waits (RNR) until a receive is posted.
    post_send(&mut f, &a3, send_wr(4, SendOp::Send, vec![a.sge(0, 100)]));
    f.run_until(std::time::Duration::from_micros(200), |_| false);
    assert!(drain(&mut f, &b).is_empty());
    f.hca(b.hca)
        .post_srq_recv(srq, recv_wr(104, vec![b.sge(4 << 16, 1024)]))
        .expect("post_srq_recv");
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(104, WcStatus::Success)]);
    assert_eq!(
        events(&mut f, b.hca),
        [],
        "the limit event is not re-armed by itself"
    );
    let sent = drain(&mut f, &a);
    assert_eq!(sent.len(), 5, "{sent:?}");
    assert!(
        sent.iter().all(|w| w.status == WcStatus::Success),
        "{sent:?}"
    );
}

#[test]
fn an_armed_cq_notifies_once_and_solicited_arming_waits_for_a_solicited_completion() {
    let (mut f, a, b) = pair(63, FaultConfig::default(), PairOpts::default());
    for i in 0..4 {
        post_recv(&mut f, &b, recv_wr(100 + i, vec![b.sge(i << 12, 4096)]));
    }
    let send = |f: &mut hca::sim::Fabric, id, flags| {
        let mut wr = send_wr(id, SendOp::Send, vec![a.sge(0, 10)]);
        wr.flags |= flags;
        post_send(f, &a, wr);
        settle(f);
    };
    send(&mut f, 1, SendFlags::empty());
    assert_eq!(events(&mut f, b.hca), [], "not armed");

    f.hca(b.hca)
        .req_notify_cq(b.cq, ArmMode::NextCompletion)
        .expect("arm");
    assert_eq!(events(&mut f, b.hca), [], "arming alone does not notify");
    send(&mut f, 2, SendFlags::empty());
    assert_eq!(events(&mut f, b.hca), [Event::CqNotify(b.cq)]);
    assert_eq!(events(&mut f, a.hca), [], "only the armed CQ notifies");
    send(&mut f, 3, SendFlags::empty());
    assert_eq!(events(&mut f, b.hca), [], "one shot");

    f.hca(b.hca)
        .req_notify_cq(b.cq, ArmMode::Solicited)
        .expect("arm");
    send(&mut f, 4, SendFlags::SOLICITED);
    assert_eq!(events(&mut f, b.hca), [Event::CqNotify(b.cq)]);
    let got = drain(&mut f, &b);
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got.iter().all(|w| w.status == WcStatus::Success));
    let solicited: Vec<_> = got.iter().map(|w| w.solicited).collect();
    assert_eq!(solicited, [false, false, false, true]);
}

#[test]
fn a_solicited_arm_ignores_unsolicited_successes() {
    let (mut f, a, b) = pair(64, FaultConfig::default(), PairOpts::default());
    post_recv(&mut f, &b, recv_wr(100, vec![b.sge(0, 4096)]));
    f.hca(b.hca)
        .req_notify_cq(b.cq, ArmMode::Solicited)
        .expect("arm");
    post_send(&mut f, &a, send_wr(1, SendOp::Send, vec![a.sge(0, 10)]));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(100, WcStatus::Success)]);
    assert_eq!(events(&mut f, b.hca), []);
}
