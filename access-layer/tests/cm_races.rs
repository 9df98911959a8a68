//! Communication Manager races on a deterministic link with virtual time: lost REP, lost
//! RTU, lost DREP, REJ after a timeout, simultaneous REQs, DREQ crossing DREQ, DREQ while
//! the RTU is lost and data flows, MRA, unknown services. Each ends in a defined state on
//! both sides.

use access_layer::cm::{
    AcceptParams, CmConfig, CmEndpoint, CmEvent, ConnId, ConnState, ConnectParams,
};
use access_layer::mad::cm::CmRejReason;
use access_layer::mad::{CmMessage, MadAddress, MadBody, MadOut, Mtu, ServiceId, parse_any};
use ib_verbs::time::Time;
use ib_verbs::{Gid, Guid, Psn, Qpn};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const SERVICE: ServiceId = ServiceId(0x0000_0000_0106_15b3);
const TIME_WAIT: Duration = Duration::from_millis(50);

fn gid(host: u8) -> Gid {
    Gid::from_ip(IpAddr::V4(Ipv4Addr::new(127, 0, 0, host)))
}

fn config(host: u8) -> CmConfig {
    CmConfig {
        local_ca_guid: Guid(0x5352_5000_0000_0000 | u64::from(host)),
        local_gid: gid(host),
        port: 1,
        time_wait: TIME_WAIT,
        agent_id: u32::from(host),
        first_comm_id: 1,
    }
}

fn endpoint(host: u8) -> CmEndpoint {
    CmEndpoint::new(config(host))
}

/// A message in flight.
struct Flight {
    at: Time,
    to: usize,
    from: usize,
    mad: MadOut,
}

/// Endpoints on a link that delivers every MAD after 10 µs unless a rule drops it.
struct Net {
    eps: Vec<CmEndpoint>,
    now: Time,
    flying: Vec<Flight>,
    /// (from endpoint, message name, how many to drop; usize::MAX = all).
    drops: Vec<(usize, &'static str, usize)>,
    events: Vec<Vec<CmEvent>>,
    delivered: Vec<(usize, &'static str)>,
}

fn name(mad: &MadOut) -> &'static str {
    match parse_any(&mad.mad.0).map(|m| m.body) {
        Ok(MadBody::Cm(CmMessage::Req(_))) => "REQ",
        Ok(MadBody::Cm(CmMessage::Rep(_))) => "REP",
        Ok(MadBody::Cm(CmMessage::Rtu(_))) => "RTU",
        Ok(MadBody::Cm(CmMessage::Rej(_))) => "REJ",
        Ok(MadBody::Cm(CmMessage::Mra(_))) => "MRA",
        Ok(MadBody::Cm(CmMessage::Dreq(_))) => "DREQ",
        Ok(MadBody::Cm(CmMessage::Drep(_))) => "DREP",
        _ => "?",
    }
}

impl Net {
    fn new(n: usize) -> Net {
        Net {
            eps: (0..n).map(|i| endpoint(i as u8 + 2)).collect(),
            now: Time(1_000_000),
            flying: Vec::new(),
            drops: Vec::new(),
            events: vec![Vec::new(); n],
            delivered: Vec::new(),
        }
    }

    fn addr(i: usize) -> MadAddress {
        MadAddress::gsi(1, gid(i as u8 + 2))
    }

    fn drop_rule(&mut self, from: usize, what: &'static str, count: usize) {
        self.drops.push((from, what, count));
    }

    fn collect(&mut self) {
        for i in 0..self.eps.len() {
            while let Some(out) = self.eps[i].poll_transmit() {
                let to = (0..self.eps.len())
                    .find(|&j| Self::addr(j).gid == out.to.gid)
                    .expect("known peer");
                let what = name(&out);
                if let Some(rule) = self
                    .drops
                    .iter_mut()
                    .find(|r| r.0 == i && r.1 == what && r.2 > 0)
                {
                    rule.2 = rule.2.saturating_sub(1);
                    continue;
                }
                self.flying.push(Flight {
                    at: self.now + Duration::from_micros(10),
                    to,
                    from: i,
                    mad: out,
                });
            }
            while let Some(e) = self.eps[i].poll_event() {
                self.events[i].push(e);
            }
        }
    }

    /// Runs until nothing is in flight and no timer is due before `limit` from now.
    fn run(&mut self, limit: Duration) {
        let end = self.now + limit;
        loop {
            self.collect();
            let next_flight = self.flying.iter().map(|f| f.at).min();
            let next_timer = self.eps.iter().filter_map(|e| e.poll_timeout()).min();
            let Some(at) = [next_flight, next_timer].into_iter().flatten().min() else {
                return;
            };
            if at > end {
                return;
            }
            self.now = self.now.max(at);
            if next_flight == Some(at) {
                let i = self
                    .flying
                    .iter()
                    .position(|f| f.at == at)
                    .expect("due flight");
                let f = self.flying.remove(i);
                self.delivered.push((f.to, name(&f.mad)));
                let from = Self::addr(f.from);
                self.eps[f.to].handle_mad(self.now, from, &f.mad.mad.0);
            } else {
                for e in &mut self.eps {
                    if e.poll_timeout().is_some_and(|t| t <= at) {
                        e.handle_timeout(at);
                    }
                }
            }
        }
    }

    fn connect(&mut self, from: usize, to: usize) -> ConnId {
        let p = ConnectParams {
            to: Self::addr(to),
            service_id: SERVICE,
            qpn: Qpn::from_wire(0x11 + from as u32),
            receive_psn: Psn::from_wire(0x100),
            responder_resources: 4,
            initiator_depth: 4,
            mtu: Mtu::Mtu1024,
            response_timeout: 10, // 4.2 ms
            max_retries: 3,
            retry_count: 7,
            rnr_retry_count: 7,
            private_data: b"login".to_vec(),
        };
        let now = self.now;
        self.eps[from].connect(now, &p).expect("connect")
    }

    /// Accepts every REQ that arrived at `i`; returns the connections.
    fn accept_all(&mut self, i: usize) -> Vec<ConnId> {
        self.collect();
        let reqs: Vec<ConnId> = self.events[i]
            .iter()
            .filter_map(|e| match e {
                CmEvent::ReqReceived { conn, .. } => Some(*conn),
                _ => None,
            })
            .filter(|c| self.eps[i].state(*c) == ConnState::ReqReceived)
            .collect();
        let now = self.now;
        for &c in &reqs {
            let p = AcceptParams {
                qpn: Qpn::from_wire(0x40),
                receive_psn: Psn::from_wire(0x200),
                responder_resources: 4,
                initiator_depth: 4,
                rnr_retry_count: 7,
                private_data: b"welcome".to_vec(),
            };
            self.eps[i].accept(now, c, &p).expect("accept");
        }
        reqs
    }

    /// Confirms every REP that arrived at `i`.
    fn confirm_all(&mut self, i: usize) {
        self.collect();
        let reps: Vec<ConnId> = self.events[i]
            .iter()
            .filter_map(|e| match e {
                CmEvent::RepReceived { conn, .. } => Some(*conn),
                _ => None,
            })
            .filter(|c| self.eps[i].state(*c) == ConnState::RepReceived)
            .collect();
        for c in reps {
            self.eps[i].confirm(c).expect("confirm");
        }
    }

    fn has(&self, i: usize, f: impl Fn(&CmEvent) -> bool) -> bool {
        self.events[i].iter().any(f)
    }
}

/// Drives a connection from `a` to `b` through accept and confirm.
fn establish(net: &mut Net, a: usize, b: usize) -> (ConnId, ConnId) {
    let ca = net.connect(a, b);
    net.run(Duration::from_millis(1));
    let cb = *net.accept_all(b).last().expect("REQ arrived");
    net.run(Duration::from_millis(1));
    net.confirm_all(a);
    net.run(Duration::from_millis(1));
    (ca, cb)
}

#[test]
fn a_clean_connection_exchanges_qp_attributes() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    let (ca, cb) = establish(&mut net, 0, 1);
    assert_eq!(net.eps[0].state(ca), ConnState::Established);
    assert_eq!(net.eps[1].state(cb), ConnState::Established);
    let (req, _) = net.eps[1].exchange(cb).expect("conn");
    let req = req.expect("REQ kept");
    assert_eq!(req.local_qpn, Qpn::from_wire(0x11));
    assert_eq!(req.starting_psn, Psn::from_wire(0x100));
    assert_eq!(&req.private_data.0[..5], b"login");
    let (_, rep) = net.eps[0].exchange(ca).expect("conn");
    let rep = rep.expect("REP kept");
    assert_eq!(rep.local_qpn, Qpn::from_wire(0x40));
    assert_eq!(&rep.private_data.0[..7], b"welcome");
    assert!(net.has(1, |e| matches!(e, CmEvent::Established { .. })));
}

#[test]
fn communication_ids_start_where_the_driver_says() {
    // A peer's CM keys connections by (CA GUID, comm ID): endpoints sharing a CA GUID start
    // at random values (CmConfig::first_comm_id) so they never collide.
    let mut net = Net::new(2);
    net.eps[0] = CmEndpoint::new(CmConfig {
        first_comm_id: 0x5eed_0001,
        ..config(2) // endpoint 0 is host 2 (Net::new)
    });
    net.eps[1].listen(SERVICE).expect("listen");
    let (_, cb) = establish(&mut net, 0, 1);
    let (req, _) = net.eps[1].exchange(cb).expect("conn");
    assert_eq!(req.expect("REQ kept").local_comm_id.0, 0x5eed_0001);
    let (a, b) = (
        access_layer::cm::random_comm_id(),
        access_layer::cm::random_comm_id(),
    );
    assert!(a != 0 && b != 0);
    assert_ne!(a, b, "two draws");
}

#[test]
fn a_lost_rep_is_recovered_by_the_req_retry() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    net.drop_rule(1, "REP", 1);
    let ca = net.connect(0, 1);
    net.run(Duration::from_millis(1));
    let cb = net.accept_all(1)[0];
    // The REP is lost; the active side resends its REQ after 4.2 ms; the passive side,
    // in RepSent, answers the duplicate with the REP again.
    net.run(Duration::from_millis(10));
    net.confirm_all(0);
    net.run(Duration::from_millis(1));
    assert_eq!(net.eps[0].state(ca), ConnState::Established);
    assert_eq!(net.eps[1].state(cb), ConnState::Established);
    assert!(
        net.delivered.iter().filter(|d| **d == (1, "REQ")).count() >= 2,
        "the REQ was retried"
    );
}

#[test]
fn a_lost_rtu_is_recovered_by_the_rep_retry() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    net.drop_rule(0, "RTU", 1);
    let (ca, cb) = establish(&mut net, 0, 1);
    assert_eq!(net.eps[0].state(ca), ConnState::Established);
    assert_eq!(net.eps[1].state(cb), ConnState::RepSent, "the RTU was lost");
    net.run(Duration::from_millis(10));
    assert_eq!(
        net.eps[1].state(cb),
        ConnState::Established,
        "REP retried, RTU resent"
    );
    assert!(net.delivered.iter().filter(|d| **d == (0, "REP")).count() >= 2);
}

#[test]
fn simultaneous_reqs_from_two_hosts_and_crossing_reqs_between_two() {
    // Two hosts connect to one listener at the same instant.
    let mut net = Net::new(3);
    net.eps[2].listen(SERVICE).expect("listen");
    let a = net.connect(0, 2);
    let b = net.connect(1, 2);
    net.run(Duration::from_millis(1));
    let accepted = net.accept_all(2);
    assert_eq!(accepted.len(), 2);
    net.run(Duration::from_millis(1));
    net.confirm_all(0);
    net.confirm_all(1);
    net.run(Duration::from_millis(1));
    assert_eq!(net.eps[0].state(a), ConnState::Established);
    assert_eq!(net.eps[1].state(b), ConnState::Established);
    for c in accepted {
        assert_eq!(net.eps[2].state(c), ConnState::Established);
    }
    // Two peers that both listen connect to each other at the same instant: two
    // independent connections, both established.
    let mut net = Net::new(2);
    net.eps[0].listen(SERVICE).expect("listen");
    net.eps[1].listen(SERVICE).expect("listen");
    let x = net.connect(0, 1);
    let y = net.connect(1, 0);
    net.run(Duration::from_millis(1));
    let px = net.accept_all(1);
    let py = net.accept_all(0);
    net.run(Duration::from_millis(1));
    net.confirm_all(0);
    net.confirm_all(1);
    net.run(Duration::from_millis(1));
    assert_eq!(net.eps[0].state(x), ConnState::Established);
    assert_eq!(net.eps[1].state(y), ConnState::Established);
    assert_eq!(net.eps[1].state(px[0]), ConnState::Established);
    assert_eq!(net.eps[0].state(py[0]), ConnState::Established);
}

#[test]
fn rej_after_timeout_closes_both_sides() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    net.drop_rule(1, "REP", usize::MAX);
    let ca = net.connect(0, 1);
    net.run(Duration::from_millis(1));
    let cb = net.accept_all(1)[0];
    net.run(Duration::from_millis(100));
    assert!(net.has(
        0,
        |e| matches!(e, CmEvent::TimedOut { conn } if *conn == ca)
    ));
    assert_eq!(net.eps[0].state(ca), ConnState::Closed);
    // The active side's REJ (timeout) reached the passive side, which closed too.
    assert!(net.has(1, |e| matches!(
        e,
        CmEvent::Rejected {
            reason: CmRejReason::Timeout,
            ..
        }
    )));
    assert_eq!(net.eps[1].state(cb), ConnState::Closed);
}

#[test]
fn a_late_rep_after_the_active_side_gave_up_is_rejected() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    // Every REQ retry and the REJ (timeout) are lost too: only the first REQ gets through.
    net.drop_rule(0, "REQ", usize::MAX);
    net.drop_rule(0, "REJ", 1);
    let p = ConnectParams {
        to: Net::addr(1),
        service_id: SERVICE,
        qpn: Qpn::from_wire(0x11),
        receive_psn: Psn::from_wire(1),
        responder_resources: 4,
        initiator_depth: 4,
        mtu: Mtu::Mtu1024,
        response_timeout: 8,
        max_retries: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        private_data: vec![],
    };
    let now = net.now;
    let ca = net.eps[0].connect(now, &p).expect("connect");
    // Deliver the first REQ by hand (the rule drops those that go through the link).
    let req = net.eps[0].poll_transmit().expect("REQ");
    net.eps[1].handle_mad(now, Net::addr(0), &req.mad.0);
    net.run(Duration::from_millis(20));
    assert_eq!(net.eps[0].state(ca), ConnState::Closed, "gave up");
    // Only now does the passive side answer.
    let cb = net.accept_all(1)[0];
    net.run(Duration::from_millis(20));
    assert!(net.has(1, |e| matches!(
        e,
        CmEvent::Rejected {
            reason: CmRejReason::InvalidCommId,
            ..
        }
    )));
    assert_eq!(net.eps[1].state(cb), ConnState::Closed);
}

#[test]
fn dreq_crossing_dreq_ends_in_time_wait_on_both_sides_then_closed() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    let (ca, cb) = establish(&mut net, 0, 1);
    let now = net.now;
    net.eps[0].disconnect(now, ca).expect("DREQ a");
    net.eps[1].disconnect(now, cb).expect("DREQ b");
    net.run(Duration::from_millis(1));
    assert_eq!(net.eps[0].state(ca), ConnState::TimeWait);
    assert_eq!(net.eps[1].state(cb), ConnState::TimeWait);
    assert!(net.has(0, |e| matches!(e, CmEvent::Disconnected { .. })));
    assert!(net.has(1, |e| matches!(e, CmEvent::Disconnected { .. })));
    net.run(TIME_WAIT * 2);
    assert_eq!(net.eps[0].state(ca), ConnState::Closed);
    assert_eq!(net.eps[1].state(cb), ConnState::Closed);
    assert!(net.has(0, |e| matches!(e, CmEvent::Closed { .. })));
    assert!(net.has(1, |e| matches!(e, CmEvent::Closed { .. })));
}

#[test]
fn dreq_while_the_rtu_is_lost_and_data_flows() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    net.drop_rule(0, "RTU", usize::MAX);
    let (ca, cb) = establish(&mut net, 0, 1);
    // The passive side sees traffic on its QP before any RTU: established.
    net.eps[1].notify_established(cb).expect("comm established");
    // The active side disconnects while data is still flowing.
    let now = net.now;
    net.eps[0].disconnect(now, ca).expect("DREQ");
    net.run(Duration::from_millis(1));
    assert_eq!(net.eps[0].state(ca), ConnState::TimeWait);
    assert_eq!(net.eps[1].state(cb), ConnState::TimeWait);
    assert!(net.has(1, |e| matches!(e, CmEvent::DisconnectRequested { .. })));
    // A DREQ arriving before even that (still RepSent) is answered the same way.
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    net.drop_rule(0, "RTU", usize::MAX);
    let (ca, cb) = establish(&mut net, 0, 1);
    assert_eq!(net.eps[1].state(cb), ConnState::RepSent);
    let now = net.now;
    net.eps[0].disconnect(now, ca).expect("DREQ");
    net.run(Duration::from_millis(1));
    assert_eq!(net.eps[0].state(ca), ConnState::TimeWait);
    assert_eq!(net.eps[1].state(cb), ConnState::TimeWait);
}

#[test]
fn a_lost_drep_is_answered_again_and_a_dead_peer_still_ends_the_disconnect() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    let (ca, cb) = establish(&mut net, 0, 1);
    net.drop_rule(1, "DREP", 1);
    let now = net.now;
    net.eps[0].disconnect(now, ca).expect("DREQ");
    net.run(Duration::from_millis(10));
    assert_eq!(
        net.eps[0].state(ca),
        ConnState::TimeWait,
        "DREQ retried, DREP resent from time-wait"
    );
    assert_eq!(net.eps[1].state(cb), ConnState::TimeWait);
    // A peer that never answers: retries run out and we enter time-wait anyway.
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    let (ca, _) = establish(&mut net, 0, 1);
    net.drop_rule(0, "DREQ", usize::MAX);
    let now = net.now;
    net.eps[0].disconnect(now, ca).expect("DREQ");
    net.run(Duration::from_millis(30));
    assert_eq!(net.eps[0].state(ca), ConnState::TimeWait);
    net.run(TIME_WAIT * 2);
    assert_eq!(net.eps[0].state(ca), ConnState::Closed);
}

#[test]
fn mra_holds_the_active_side_and_unknown_services_are_rejected() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    let ca = net.connect(0, 1);
    net.run(Duration::from_millis(1));
    let cb = match net.events[1]
        .iter()
        .find(|e| matches!(e, CmEvent::ReqReceived { .. }))
    {
        Some(CmEvent::ReqReceived { conn, .. }) => *conn,
        _ => {
            net.collect();
            match net.events[1].last() {
                Some(CmEvent::ReqReceived { conn, .. }) => *conn,
                other => panic!("no REQ: {other:?}"),
            }
        }
    };
    net.eps[1].send_mra(cb, 14).expect("MRA"); // 67 ms more
    net.run(Duration::from_millis(30)); // beyond the 4.2 ms × 4 the REQ retries would take
    assert_eq!(net.eps[0].state(ca), ConnState::MraReceived);
    net.accept_all(1);
    net.run(Duration::from_millis(1));
    net.confirm_all(0);
    net.run(Duration::from_millis(1));
    assert_eq!(net.eps[0].state(ca), ConnState::Established);
    // A REQ for a service nobody listens on.
    let mut net = Net::new(2);
    let ca = net.connect(0, 1);
    net.run(Duration::from_millis(1));
    assert!(net.has(0, |e| matches!(
        e,
        CmEvent::Rejected {
            reason: CmRejReason::InvalidServiceId,
            ..
        }
    )));
    assert_eq!(net.eps[0].state(ca), ConnState::Closed);
}

#[test]
fn a_consumer_rejection_carries_its_private_data() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    let ca = net.connect(0, 1);
    net.run(Duration::from_millis(1));
    net.collect();
    let cb = match net.events[1].last() {
        Some(CmEvent::ReqReceived { conn, .. }) => *conn,
        other => panic!("no REQ: {other:?}"),
    };
    // An SRP target refusing a login: reason 28 with an SRP_LOGIN_REJ.
    net.eps[1]
        .reject(
            cb,
            CmRejReason::ConsumerDefined,
            &[0xc2, 0, 0, 0, 0, 1, 0, 2],
        )
        .expect("reject");
    net.run(Duration::from_millis(1));
    assert!(net.has(0, |e| matches!(e, CmEvent::Rejected { reason: CmRejReason::ConsumerDefined, private_data, .. } if private_data.0[..8] == [0xc2, 0, 0, 0, 0, 1, 0, 2])));
    assert_eq!(net.eps[0].state(ca), ConnState::Closed);
    assert_eq!(net.eps[1].state(cb), ConnState::Closed);
}

#[test]
fn an_abandoned_connection_sends_nothing_and_a_later_dreq_still_ends_the_peer() {
    let mut net = Net::new(2);
    net.eps[1].listen(SERVICE).expect("listen");
    let (ca, cb) = establish(&mut net, 0, 1);
    let sent_before = net.delivered.len();
    net.eps[1].abandon(cb).expect("abandon");
    assert_eq!(net.eps[1].state(cb), ConnState::Closed);
    assert!(net.eps[1].abandon(cb).is_err(), "gone already");
    net.run(Duration::from_millis(5));
    assert_eq!(net.delivered.len(), sent_before, "abandon sends no MAD");
    assert_eq!(net.eps[0].state(ca), ConnState::Established);
    // The peer's own disconnect is answered as for an unknown connection (DREP), so it
    // reaches time-wait at once instead of retrying until it gives up.
    let now = net.now;
    net.eps[0].disconnect(now, ca).expect("DREQ");
    net.run(Duration::from_millis(1));
    assert_eq!(net.eps[0].state(ca), ConnState::TimeWait);
    assert!(net.delivered.contains(&(0, "DREP")));
}
