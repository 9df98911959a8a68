//! ACK coalescing over a receive batch (`Engine::handle_datagrams`): requests that arrive
//! together draw one ACK, for the newest, which completes every one of them at the
//! requester; delivered one by one, each draws its own.

use super::test_peer::rc_peer;
use super::*;
use crate::ids::Psn;
use crate::verbs::{RecvWr, SendFlags, SendOp, SendWr, WcStatus};
use crate::wire::{Opcode, Packet};
use std::net::Ipv4Addr;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// Two engines, A (127.0.0.2) and B (127.0.0.3), one connected RC QP each; B has
/// `recvs` zero-length receives posted.
fn pair(recvs: u64) -> (Engine, QpId, CqId, Engine, QpId) {
    let mut ends = Vec::new();
    for last in [2, 3] {
        let mut e = Engine::new(Guid(u64::from(last)), &[ip(last)]);
        let pd = e.alloc_pd();
        let cq = e.create_cq(64);
        let qp = e.create_qp(QpInit::rc(pd, cq, 16, 16)).expect("qp");
        ends.push((e, qp, cq));
    }
    let (mut b, bqp, _) = ends.pop().expect("b");
    let (mut a, aqp, acq) = ends.pop().expect("a");
    let qpn = |e: &Engine, q| e.qp_num(q).expect("qpn");
    let peer = |to: u8, qpn: Qpn, sq: u32, rq: u32| rc_peer(to, qpn, sq, rq, 7);
    let (an, bn) = (qpn(&a, aqp), qpn(&b, bqp));
    a.connect_rc(Time(0), aqp, &peer(3, bn, 0x100, 0x200))
        .expect("connect a");
    b.connect_rc(Time(0), bqp, &peer(2, an, 0x200, 0x100))
        .expect("connect b");
    for i in 0..recvs {
        let wr = RecvWr {
            wr_id: i,
            sg_list: Default::default(),
        };
        b.post_recv(Time(0), bqp, wr).expect("recv");
    }
    (a, aqp, acq, b, bqp)
}

fn sends(a: &mut Engine, qp: QpId, n: u64) -> Vec<Vec<u8>> {
    for i in 0..n {
        let wr = SendWr {
            wr_id: 10 + i,
            op: SendOp::Send,
            sg_list: Default::default(),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        a.post_send(Time(1), qp, wr).expect("post");
    }
    std::iter::from_fn(|| a.poll_transmit())
        .map(|t| t.bytes)
        .collect()
}

fn from(last: u8) -> SocketAddr {
    SocketAddr::new(ip(last), ROCE_V2_UDP_PORT)
}

#[test]
fn a_batch_of_requests_draws_one_ack_for_the_newest_which_completes_them_all() {
    let (mut a, aqp, acq, mut b, _) = pair(3);
    let reqs = sends(&mut a, aqp, 3);
    assert_eq!(reqs.len(), 3);
    b.handle_datagrams(Time(2), 1, reqs.iter().map(|r| (from(2), r.as_slice())));
    let acks: Vec<Vec<u8>> = std::iter::from_fn(|| b.poll_transmit())
        .map(|t| t.bytes)
        .collect();
    assert_eq!(acks.len(), 1, "one ACK for the batch");
    let ack = Packet::parse(&acks[0]).expect("ACK parses");
    assert_eq!(ack.bth.opcode, Opcode::RcAcknowledge);
    assert_eq!(
        ack.bth.psn,
        Psn::from_wire(0x102),
        "the newest request's PSN"
    );
    assert_eq!(ack.aeth.map(|a| a.msn), Some(3), "three messages done");
    assert_eq!(b.port_stats(1).map(|s| s.acks_coalesced), Some(2));
    a.handle_datagrams(Time(3), 1, [(from(3), acks[0].as_slice())]);
    let mut wcs = Vec::new();
    a.poll_cq(acq, 16, &mut wcs).expect("poll");
    let done: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        done,
        [10, 11, 12].map(|id| (id, WcStatus::Success)),
        "the one ACK completes every SEND"
    );
    // Nothing outstanding: the (stale) timer hint fires nothing and clears.
    if let Some(t) = a.poll_timeout() {
        a.handle_timeout(t);
    }
    assert_eq!(a.poll_timeout(), None, "no retransmit timer left");
    assert_eq!(a.port_stats(1).map(|s| s.retries), Some(0));
}

#[test]
fn requests_delivered_one_by_one_are_acknowledged_one_by_one() {
    let (mut a, aqp, _, mut b, _) = pair(3);
    for r in sends(&mut a, aqp, 3) {
        b.handle_datagram(Time(2), 1, from(2), &r);
    }
    assert_eq!(std::iter::from_fn(|| b.poll_transmit()).count(), 3);
    assert_eq!(b.port_stats(1).map(|s| s.acks_coalesced), Some(0));
}

#[test]
fn a_held_ack_goes_out_before_a_nak_of_the_same_batch() {
    // Requests 0x100 and 0x102 arrive together (0x101 was lost): the ACK of 0x100 must
    // precede the sequence NAK asking for 0x101, or the requester would resend 0x100 too.
    let (mut a, aqp, _, mut b, _) = pair(3);
    let reqs = sends(&mut a, aqp, 3);
    let batch = [&reqs[0], &reqs[2]];
    b.handle_datagrams(Time(2), 1, batch.iter().map(|r| (from(2), r.as_slice())));
    let out: Vec<Vec<u8>> = std::iter::from_fn(|| b.poll_transmit())
        .map(|t| t.bytes)
        .collect();
    let got: Vec<(Psn, bool)> = out
        .iter()
        .map(|bytes| {
            let p = Packet::parse(bytes).expect("parses");
            let nak = p
                .aeth
                .is_some_and(|a| a.syndrome != crate::wire::Syndrome::ACK_UNLIMITED);
            (p.bth.psn, nak)
        })
        .collect();
    assert_eq!(
        got,
        [
            (Psn::from_wire(0x100), false),
            (Psn::from_wire(0x101), true)
        ],
        "ACK 0x100, then NAK expecting 0x101"
    );
}
