//! `Engine::poll_timeout`: the timer hint kept without scanning every QP follows the QP that
//! armed a timer, survives unrelated QPs, and is recomputed once the timer fires.

use super::test_peer::rc_peer;
use super::*;
use crate::verbs::{SendFlags, SendOp, SendWr};
use std::net::Ipv4Addr;

fn peer(qpn: u32, retry_cnt: u8) -> RcConnect {
    rc_peer(9, Qpn::from_wire(qpn), 0x10, 0x20, retry_cnt)
}

#[test]
fn the_timer_hint_follows_the_armed_qp_and_is_recomputed_when_it_fires() {
    let mut e = Engine::new(Guid(1), &[IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    let pd = e.alloc_pd();
    let cq = e.create_cq(64);
    let qp = e.create_qp(QpInit::rc(pd, cq, 4, 4)).expect("qp");
    e.connect_rc(Time(0), qp, &peer(0x99, 0)).expect("connect");
    assert_eq!(e.poll_timeout(), None, "nothing outstanding, no timer");
    // Quiet QPs made and connected after: they arm nothing.
    for n in 0..50 {
        let q = e.create_qp(QpInit::rc(pd, cq, 4, 4)).expect("qp");
        e.connect_rc(Time(0), q, &peer(0x100 + n, 7))
            .expect("connect");
    }
    assert_eq!(e.poll_timeout(), None);
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Send,
        sg_list: Default::default(),
        flags: SendFlags::SIGNALED,
        ud: None,
    };
    e.post_send(Time(1_000), qp, wr).expect("post");
    let armed = e
        .poll_timeout()
        .expect("the SEND armed the retransmit timer");
    assert!(armed > Time(1_000));
    assert_eq!(
        Some(armed),
        e.qps.values().filter_map(Qp::next_timeout).min(),
        "the hint is the earliest QP timer"
    );
    // Before the deadline nothing fires and the hint stays.
    e.handle_timeout(Time(armed.0 - 1));
    assert_eq!(e.poll_timeout(), Some(armed));
    // At it, the only try is used up (retry_cnt 0): the QP errors, no timer is left.
    e.handle_timeout(armed);
    assert_eq!(e.qp_state(qp), Some(QpState::Err));
    assert_eq!(e.poll_timeout(), None, "recomputed after firing");
}
