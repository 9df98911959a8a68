//! RC error paths on the simulated fabric: remote access violations (bad R_Key, range,
//! region or QP rights), local protection and length errors, verbs refused in the wrong QP
//! state, illegal modifies. Each failing request gets the IBTA completion status, the QP goes
//! to ERR, and everything posted after it is flushed in order.

mod common;

use common::*;
use hca::engine::{Event, VerbsError};
use hca::ids::{Lkey, Rkey};
use hca::mr::Access;
use hca::qp::state::{ModifyError, QpAttrMask, QpState};
use hca::qp::{QpAttr, QpError};
use hca::sim::{Fabric, FaultConfig};
use hca::verbs::{SendOp, SendWr, WcOpcode, WcStatus};

/// Runs `bad` (built by `make_bad` on a fresh pair) between a good WRITE before it and a good
/// WRITE and a SEND after it: the one before succeeds, `bad` fails with a remote access
/// error, the rest are flushed in order, and both QPs end in ERR.
fn remote_access_fails(
    case: &str,
    seed: u64,
    make_bad: impl FnOnce(&mut Fabric, &Node, &Node) -> SendWr,
) {
    let (mut f, a, b) = pair(seed, FaultConfig::default(), PairOpts::default());
    fill(&a.mem, 0, 4096, seed);
    let bad = make_bad(&mut f, &a, &b);
    let bad_id = bad.wr_id;
    post_send(
        &mut f,
        &a,
        write_wr(1, IOVA + (1 << 20), b.rkey(), a.sge(0, 4096)),
    );
    post_send(&mut f, &a, bad);
    post_send(
        &mut f,
        &a,
        write_wr(3, IOVA + (2 << 20), b.rkey(), a.sge(0, 4096)),
    );
    post_send(&mut f, &a, send_wr(4, SendOp::Send, vec![a.sge(0, 16)]));
    settle(&mut f);
    let wcs = drain(&mut f, &a);
    assert_eq!(
        statuses(&wcs),
        [
            (1, WcStatus::Success),
            (bad_id, WcStatus::RemAccessErr),
            (3, WcStatus::WrFlushErr),
            (4, WcStatus::WrFlushErr),
        ],
        "{case}: {wcs:?}"
    );
    assert_eq!(
        wcs[3].opcode,
        WcOpcode::Send,
        "{case}: flush keeps the opcode"
    );
    assert_eq!(
        read(&a.mem, 0, 4096),
        read(&b.mem, 1 << 20, 4096),
        "{case}: first WRITE landed"
    );
    assert!(
        read(&b.mem, 2 << 20, 4096).iter().all(|&x| x == 0),
        "{case}: flushed WRITE did not land"
    );
    assert_eq!(
        f.hca(a.hca).qp_state(a.qp),
        Some(QpState::Err),
        "{case}: requester"
    );
    assert_eq!(
        f.hca(b.hca).qp_state(b.qp),
        Some(QpState::Err),
        "{case}: responder (class C)"
    );
    assert!(
        events(&mut f, a.hca).contains(&Event::QpError(a.qpn)),
        "{case}"
    );
    // Posting to the failed QP completes at once with a flush error.
    post_send(&mut f, &a, send_wr(5, SendOp::Send, vec![a.sge(0, 16)]));
    assert_eq!(
        statuses(&drain(&mut f, &a)),
        [(5, WcStatus::WrFlushErr)],
        "{case}"
    );
}

#[test]
fn write_with_a_stale_rkey_variant_fails_with_remote_access_error() {
    remote_access_fails("stale variant", 11, |_, a, b| {
        let stale = Rkey(b.rkey().0 ^ 0x01);
        write_wr(2, IOVA, stale, a.sge(0, 100))
    });
}

#[test]
fn write_with_an_rkey_naming_no_region_fails_with_remote_access_error() {
    remote_access_fails("no such region", 12, |_, a, _| {
        write_wr(2, IOVA, Rkey(0x00ab_cd00), a.sge(0, 100))
    });
}

#[test]
fn write_past_the_end_of_the_region_fails_with_remote_access_error() {
    remote_access_fails("past the end", 13, |_, a, b| {
        // The last 50 bytes are inside, the next 50 are not.
        write_wr(2, IOVA + MEM as u64 - 50, b.rkey(), a.sge(0, 100))
    });
}

#[test]
fn write_below_the_start_of_the_region_fails_with_remote_access_error() {
    remote_access_fails("below the start", 14, |_, a, b| {
        write_wr(2, IOVA - 8, b.rkey(), a.sge(0, 100))
    });
}

#[test]
fn write_to_a_region_without_remote_write_fails_with_remote_access_error() {
    remote_access_fails("region lacks REMOTE_WRITE", 15, |f, a, b| {
        let e = f.hca(b.hca);
        let ro = e
            .reg_mr(
                b.pd,
                b.mem.clone(),
                0,
                4096,
                0x9000_0000,
                Access::REMOTE_READ,
            )
            .expect("reg_mr");
        write_wr(
            2,
            0x9000_0000,
            ro.rkey.expect("remote right"),
            a.sge(0, 100),
        )
    });
}

#[test]
fn read_from_a_qp_without_remote_read_fails_with_remote_access_error() {
    remote_access_fails("QP lacks REMOTE_READ", 16, |f, a, b| {
        // The region allows REMOTE_READ; the responder QP's access flags now do not.
        let now = f.now();
        let attr = QpAttr {
            state: QpState::Rts,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            ..QpAttr::default()
        };
        f.hca(b.hca)
            .modify_qp(
                now,
                b.qp,
                &attr,
                QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS,
            )
            .expect("RTS -> RTS access flags");
        read_wr(2, IOVA, b.rkey(), a.sge(8 << 20, 100))
    });
}

#[test]
fn read_of_a_region_without_remote_read_fails_with_remote_access_error() {
    remote_access_fails("region lacks REMOTE_READ", 17, |f, a, b| {
        let e = f.hca(b.hca);
        let wo = e
            .reg_mr(
                b.pd,
                b.mem.clone(),
                0,
                4096,
                0x9000_0000,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .expect("reg_mr");
        read_wr(
            2,
            0x9000_0000,
            wo.rkey.expect("remote right"),
            a.sge(8 << 20, 100),
        )
    });
}

#[test]
fn a_good_read_is_not_refused_by_those_checks() {
    // Control for the cases above: the same shapes with valid keys and ranges succeed.
    let (mut f, a, b) = pair(18, FaultConfig::default(), PairOpts::default());
    fill(&b.mem, MEM as u64 - 100, 100, 3);
    post_send(
        &mut f,
        &a,
        read_wr(1, IOVA + MEM as u64 - 100, b.rkey(), a.sge(0, 100)),
    );
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::Success)]);
    assert_eq!(read(&a.mem, 0, 100), read(&b.mem, MEM as u64 - 100, 100));
}

#[test]
fn a_local_sge_with_a_bad_lkey_fails_with_local_protection_error() {
    let (mut f, a, b) = pair(21, FaultConfig::default(), PairOpts::default());
    let bad = hca::verbs::Sge {
        addr: IOVA,
        len: 100,
        lkey: Lkey(a.mr.lkey.0 ^ 0x01),
    };
    post_send(&mut f, &a, send_wr(1, SendOp::Send, vec![bad]));
    post_send(&mut f, &a, write_wr(2, IOVA, b.rkey(), a.sge(0, 100)));
    settle(&mut f);
    let wcs = drain(&mut f, &a);
    assert_eq!(
        statuses(&wcs),
        [(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)],
        "{wcs:?}"
    );
    assert_eq!(f.hca(a.hca).qp_state(a.qp), Some(QpState::Err));
    assert_eq!(f.stats().sent, 0, "nothing reached the wire");
    assert_eq!(
        f.hca(b.hca).qp_state(b.qp),
        Some(QpState::Rts),
        "the peer is untouched"
    );
}

#[test]
fn a_local_sge_out_of_its_region_fails_with_local_protection_error() {
    let (mut f, a, b) = pair(22, FaultConfig::default(), PairOpts::default());
    post_send(
        &mut f,
        &a,
        write_wr(1, IOVA, b.rkey(), a.sge(MEM as u64 - 10, 100)),
    );
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::LocProtErr)]);
}

#[test]
fn a_read_into_a_region_without_local_write_fails_with_local_protection_error() {
    let (mut f, a, b) = pair(23, FaultConfig::default(), PairOpts::default());
    let ro = f
        .hca(a.hca)
        .reg_mr(a.pd, a.mem.clone(), 0, 4096, 0x9000_0000, Access::empty())
        .expect("reg_mr");
    let sge = hca::verbs::Sge {
        addr: 0x9000_0000,
        len: 100,
        lkey: ro.lkey,
    };
    post_send(&mut f, &a, read_wr(1, IOVA, b.rkey(), sge));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::LocProtErr)]);
}

#[test]
fn a_receive_too_small_fails_both_sides() {
    let (mut f, a, b) = pair(24, FaultConfig::default(), PairOpts::default());
    post_recv(&mut f, &b, recv_wr(10, vec![b.sge(0, 100)]));
    post_recv(&mut f, &b, recv_wr(11, vec![b.sge(4096, 4096)]));
    fill(&a.mem, 0, 200, 5);
    post_send(&mut f, &a, send_wr(1, SendOp::Send, vec![a.sge(0, 200)]));
    post_send(&mut f, &a, send_wr(2, SendOp::Send, vec![a.sge(0, 10)]));
    settle(&mut f);
    let recv = drain(&mut f, &b);
    assert_eq!(
        statuses(&recv),
        [(10, WcStatus::LocLenErr), (11, WcStatus::WrFlushErr)],
        "receiver: {recv:?}"
    );
    assert!(recv.iter().all(|w| w.opcode == WcOpcode::Recv));
    let send = drain(&mut f, &a);
    assert_eq!(
        statuses(&send),
        [(1, WcStatus::RemInvReqErr), (2, WcStatus::WrFlushErr)],
        "sender: {send:?}"
    );
    assert_eq!(f.hca(a.hca).qp_state(a.qp), Some(QpState::Err));
    assert_eq!(f.hca(b.hca).qp_state(b.qp), Some(QpState::Err));
}

#[test]
fn a_multi_packet_send_overflowing_the_receive_fails_both_sides() {
    // The overflow is found on a middle packet, after the first filled the buffer.
    let (mut f, a, b) = pair(25, FaultConfig::default(), PairOpts::default());
    post_recv(&mut f, &b, recv_wr(10, vec![b.sge(0, 1500)]));
    post_send(&mut f, &a, send_wr(1, SendOp::Send, vec![a.sge(0, 5000)]));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(10, WcStatus::LocLenErr)]);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::RemInvReqErr)]);
}

#[test]
fn a_receive_with_a_bad_lkey_fails_with_local_protection_and_remote_operational_errors() {
    let (mut f, a, b) = pair(26, FaultConfig::default(), PairOpts::default());
    let bad = hca::verbs::Sge {
        addr: IOVA,
        len: 100,
        lkey: Lkey(0x00ab_cd00),
    };
    post_recv(&mut f, &b, recv_wr(10, vec![bad]));
    post_send(&mut f, &a, send_wr(1, SendOp::Send, vec![a.sge(0, 50)]));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(10, WcStatus::LocProtErr)]);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::RemOpErr)]);
}

#[test]
fn write_with_immediate_and_a_bad_rkey_completes_the_consumed_receive() {
    // The receive a WRITE with immediate takes is completed (IB_WC_LOC_ACCESS_ERR: "protection
    // error on a local data buffer during an RDMA Write with Immediate"), not lost; the next
    // one is flushed. Every posted receive completes exactly once.
    let (mut f, a, b) = pair(27, FaultConfig::default(), PairOpts::default());
    post_recv(&mut f, &b, recv_wr(10, vec![]));
    post_recv(&mut f, &b, recv_wr(11, vec![]));
    let op = SendOp::WriteWithImm {
        remote_addr: IOVA,
        rkey: Rkey(b.rkey().0 ^ 0x01),
        imm: 7,
    };
    post_send(&mut f, &a, send_wr(1, op, vec![a.sge(0, 100)]));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::RemAccessErr)]);
    let recv = drain(&mut f, &b);
    assert_eq!(
        statuses(&recv),
        [(10, WcStatus::LocAccessErr), (11, WcStatus::WrFlushErr)],
        "{recv:?}"
    );
}

#[test]
fn posting_a_send_before_rts_is_refused_and_a_receive_before_init_too() {
    let (mut f, a, b) = pair(31, FaultConfig::default(), PairOpts::default());
    let fresh = extra_qp(&mut f, &a, None);
    let now = f.now();
    let wr = || send_wr(1, SendOp::Send, vec![a.sge(0, 10)]);
    let e = f.hca(a.hca);
    assert_eq!(
        e.post_recv(now, fresh.qp, recv_wr(9, vec![])),
        Err(VerbsError::Qp(QpError::WrongState {
            qpn: fresh.qpn,
            what: "a receive",
            state: QpState::Reset
        }))
    );
    for (to, mask) in [
        (
            QpState::Init,
            QpAttrMask::STATE
                | QpAttrMask::PKEY_INDEX
                | QpAttrMask::PORT
                | QpAttrMask::ACCESS_FLAGS,
        ),
        (
            QpState::Rtr,
            QpAttrMask::STATE
                | QpAttrMask::AV
                | QpAttrMask::PATH_MTU
                | QpAttrMask::DEST_QPN
                | QpAttrMask::RQ_PSN
                | QpAttrMask::MAX_DEST_RD_ATOMIC
                | QpAttrMask::MIN_RNR_TIMER,
        ),
    ] {
        let attr = QpAttr {
            state: to,
            dest_gid: hca::ids::Gid::from_ip(b.ip),
            dest_qpn: b.qpn,
            ..QpAttr::default()
        };
        e.modify_qp(now, fresh.qp, &attr, mask).expect("modify");
        let got = e.post_send(now, fresh.qp, wr());
        assert_eq!(
            got,
            Err(VerbsError::Qp(QpError::WrongState {
                qpn: fresh.qpn,
                what: "a send",
                state: to
            }))
        );
        let msg = got.expect_err("refused").to_string();
        assert!(msg.contains(&to.to_string()), "{msg}");
    }
    // Receives are fine from INIT on, and nothing was completed for the refused sends.
    e.post_recv(now, fresh.qp, recv_wr(9, vec![]))
        .expect("RTR takes receives");
    assert!(drain(&mut f, &a).is_empty());
}

#[test]
fn posting_to_a_qp_in_err_completes_everything_with_flush_errors_in_order() {
    let (mut f, a, b) = pair(32, FaultConfig::default(), PairOpts::default());
    post_recv(&mut f, &a, recv_wr(20, vec![a.sge(0, 64)]));
    let now = f.now();
    let to_err = QpAttr {
        state: QpState::Err,
        ..QpAttr::default()
    };
    f.hca(a.hca)
        .modify_qp(now, a.qp, &to_err, QpAttrMask::STATE)
        .expect("RTS -> ERR");
    assert_eq!(events(&mut f, a.hca), [Event::QpError(a.qpn)]);
    post_send(&mut f, &a, send_wr(1, SendOp::Send, vec![a.sge(0, 10)]));
    // Unsignaled requests complete too: a flush always makes a completion.
    let mut unsignaled = write_wr(2, IOVA, b.rkey(), a.sge(0, 10));
    unsignaled.flags = hca::verbs::SendFlags::empty();
    post_send(&mut f, &a, unsignaled);
    post_send(&mut f, &a, read_wr(3, IOVA, b.rkey(), a.sge(0, 10)));
    post_recv(&mut f, &a, recv_wr(21, vec![a.sge(0, 64)]));
    settle(&mut f);
    let wcs = drain(&mut f, &a);
    assert_eq!(
        statuses(&wcs),
        [
            (20, WcStatus::WrFlushErr),
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr),
            (21, WcStatus::WrFlushErr),
        ]
    );
    let ops: Vec<_> = wcs.iter().map(|w| w.opcode).collect();
    assert_eq!(
        ops,
        [
            WcOpcode::Recv,
            WcOpcode::Send,
            WcOpcode::RdmaWrite,
            WcOpcode::RdmaRead,
            WcOpcode::Recv
        ]
    );
    assert_eq!(f.stats().sent, 0, "nothing reached the wire");
}

#[test]
fn a_request_to_a_peer_in_err_ends_in_retry_exceeded() {
    // The peer's QP drops everything once in ERR; the requester's retry budget runs out.
    let opts = PairOpts {
        retry_cnt: 1,
        ..PairOpts::default()
    };
    let (mut f, a, b) = pair(33, FaultConfig::default(), opts);
    let now = f.now();
    let to_err = QpAttr {
        state: QpState::Err,
        ..QpAttr::default()
    };
    f.hca(b.hca)
        .modify_qp(now, b.qp, &to_err, QpAttrMask::STATE)
        .expect("RTS -> ERR");
    post_send(&mut f, &a, write_wr(1, IOVA, b.rkey(), a.sge(0, 10)));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::RetryExcErr)]);
    let dropped = f.hca(b.hca).stats();
    assert!(
        dropped.wrong_state >= 2,
        "original and retry dropped: {dropped:?}"
    );
    assert_eq!(dropped.unknown_qp, 0, "the QP exists");
}

#[test]
fn an_illegal_modify_is_refused_naming_both_states() {
    let (mut f, a, _b) = pair(34, FaultConfig::default(), PairOpts::default());
    let fresh = extra_qp(&mut f, &a, None);
    let now = f.now();
    let e = f.hca(a.hca);
    for (qp, from, to) in [
        (fresh.qp, QpState::Reset, QpState::Rts),
        (fresh.qp, QpState::Reset, QpState::Rtr),
        (a.qp, QpState::Rts, QpState::Init),
        (a.qp, QpState::Rts, QpState::Rtr),
    ] {
        let attr = QpAttr {
            state: to,
            ..QpAttr::default()
        };
        let got = e.modify_qp(now, qp, &attr, QpAttrMask::STATE);
        assert_eq!(
            got,
            Err(VerbsError::Qp(QpError::Modify(
                ModifyError::InvalidTransition { from, to }
            )))
        );
        let msg = got.expect_err("refused").to_string();
        assert!(
            msg.contains(&from.to_string()) && msg.contains(&to.to_string()),
            "{msg}"
        );
        assert_eq!(e.qp_state(qp), Some(from), "state unchanged");
    }
    // A claimed current state that is wrong is refused too, naming both.
    let attr = QpAttr {
        state: QpState::Rts,
        cur_state: QpState::Sqd,
        ..QpAttr::default()
    };
    let got = e.modify_qp(now, a.qp, &attr, QpAttrMask::STATE | QpAttrMask::CUR_STATE);
    assert_eq!(
        got,
        Err(VerbsError::Qp(QpError::Modify(
            ModifyError::WrongCurrentState {
                claimed: QpState::Sqd,
                actual: QpState::Rts
            }
        )))
    );
}
