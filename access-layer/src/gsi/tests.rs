//! Unit tests of the GSI agent on a deterministic in-memory link, and the link itself (the DM
//! tests use it too).
#[allow(unused_imports)]
use crate::prelude::*;

use super::*;
use crate::mad::{MadAddress, MadBuf, MadHeader, MadOut, MadStatus, Method, MgmtClass, Tid};
use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;
use ib_verbs::Gid;
use ib_verbs::time::Time;

/// The GSI address of test node `n` (127.0.0.n, port 1).
pub(crate) fn addr(n: u8) -> MadAddress {
    MadAddress::gsi(1, Gid::from_ip(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))))
}

/// A request header's MAD, the rest zero.
pub(crate) fn request(class: MgmtClass, version: u8, method: Method, attr: u16) -> MadBuf {
    let mut m = MadBuf::zeroed();
    m.set_header(&MadHeader::request(class, version, method, Tid(0), attr, 0))
        .expect("header");
    m
}

/// Nodes with one GSI agent each, joined by a lossless link that a test can make drop the
/// next `drop_next` MADs; virtual time moves only when told.
pub(crate) struct Link {
    pub(crate) now: Time,
    pub(crate) nodes: Vec<(MadAddress, GsiAgent)>,
    pub(crate) drop_next: usize,
    pub(crate) delivered: usize,
}

impl Link {
    /// Agents on 127.0.0.1, .2, … with agent ids 1, 2, ….
    pub(crate) fn new(n: u8) -> Link {
        let nodes = (1..=n)
            .map(|i| {
                let config = GsiConfig {
                    agent_id: i.into(),
                    ..GsiConfig::default()
                };
                (addr(i), GsiAgent::new(config))
            })
            .collect();
        Link {
            now: Time(1_000_000_000),
            nodes,
            drop_next: 0,
            delivered: 0,
        }
    }

    pub(crate) fn agent(&mut self, i: usize) -> &mut GsiAgent {
        &mut self.nodes[i].1
    }

    /// Moves every queued MAD to its destination once (from node order); returns how many.
    pub(crate) fn deliver(&mut self) -> usize {
        let mut moved = Vec::new();
        for (from, agent) in &mut self.nodes {
            while let Some(out) = agent.poll_transmit() {
                moved.push((*from, out));
            }
        }
        let n = moved.len();
        for (from, MadOut { to, mad }) in moved {
            if self.drop_next > 0 {
                self.drop_next -= 1;
                continue;
            }
            if let Some((_, dst)) = self.nodes.iter_mut().find(|(a, _)| a.gid == to.gid) {
                self.delivered += 1;
                dst.handle_mad(self.now, from, mad);
            }
        }
        n
    }

    /// Advances to the earliest agent deadline (if any, and at most `limit` ahead) and fires it.
    pub(crate) fn fire_timers(&mut self, limit: Time) -> bool {
        let Some(t) = self
            .nodes
            .iter()
            .filter_map(|(_, a)| a.poll_timeout())
            .min()
        else {
            return false;
        };
        if t > limit {
            return false;
        }
        self.now = self.now.max(t);
        let now = self.now;
        self.nodes
            .iter_mut()
            .for_each(|(_, a)| a.handle_timeout(now));
        true
    }
}

fn events(a: &mut GsiAgent) -> Vec<GsiEvent> {
    core::iter::from_fn(|| a.poll_event()).collect()
}

/// Node 0 a DM client, node 1 a DM server.
fn dm_pair() -> Link {
    let mut l = Link::new(2);
    l.agent(0).register_client(MgmtClass::DeviceMgmt);
    l.agent(1).register_server(MgmtClass::DeviceMgmt, 1);
    l
}

fn get_iou() -> MadBuf {
    request(MgmtClass::DeviceMgmt, 1, Method::Get, 0x0010)
}

/// Node 1 answers every pending request with GetResp, status 0.
fn answer_all(l: &mut Link) -> usize {
    let mut n = 0;
    for ev in events(l.agent(1)) {
        let GsiEvent::Request { from, mut mad } = ev else {
            panic!("server got {ev:?}");
        };
        let h = mad.header().expect("header");
        mad.set_header(&h.response_to(MadStatus::Success))
            .expect("h");
        l.agent(1).send(MadOut { to: from, mad }).expect("send");
        n += 1;
    }
    n
}

#[test]
fn a_request_is_matched_to_its_response_by_tid() {
    let mut l = dm_pair();
    let now = l.now;
    let tid = l
        .agent(0)
        .send_request(now, addr(2), get_iou(), RequestOptions::default())
        .expect("send");
    assert_eq!(tid.0 >> 32, 1, "agent id in the high 32 bits");
    assert_eq!(l.deliver(), 1);
    assert_eq!(answer_all(&mut l), 1);
    l.deliver();
    let ev = events(l.agent(0));
    assert!(
        matches!(&ev[..], [GsiEvent::Response { tid: t, from, mad }]
            if *t == tid && *from == addr(2) && mad.header().expect("h").tid == tid),
        "{ev:?}"
    );
    assert_eq!(l.agent(0).outstanding(), 0);
    assert_eq!(l.agent(0).poll_timeout(), None);
    assert_eq!(l.agent(0).stats().responses, 1);
}

#[test]
fn tids_are_unique_and_carry_the_agent_id() {
    let mut l = dm_pair();
    let now = l.now;
    let opts = RequestOptions::default();
    let tids: Vec<Tid> = (0..10)
        .map(|_| {
            l.agent(0)
                .send_request(now, addr(2), get_iou(), opts)
                .expect("send")
        })
        .collect();
    let mut sorted = tids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 10);
    assert!(tids.iter().all(|t| t.0 >> 32 == 1));
}

#[test]
fn a_get_of_an_unserved_class_is_answered_bad_version_or_class() {
    let mut l = dm_pair();
    // Node 0 serves nothing: node 1 asks it for DM IOUnitInfo.
    l.agent(1).register_client(MgmtClass::DeviceMgmt);
    let now = l.now;
    let tid = l
        .agent(1)
        .send_request(now, addr(1), get_iou(), RequestOptions::default())
        .expect("send");
    l.deliver();
    assert!(events(l.agent(0)).is_empty());
    l.deliver();
    let ev = events(l.agent(1));
    let [GsiEvent::Response { mad, .. }] = &ev[..] else {
        panic!("{ev:?}");
    };
    let h = mad.header().expect("h");
    assert_eq!((h.tid, h.response, h.method), (tid, true, Method::Get));
    assert_eq!(u16::from(h.status), 0x0004);
    assert_eq!(l.agent(0).stats().unsupported_answered, 1);

    // A served class at another class version is answered the same way.
    let mut v2 = get_iou();
    let mut h = v2.header().expect("h");
    h.class_version = 2;
    v2.set_header(&h).expect("h");
    l.agent(1).handle_mad(now, addr(1), v2);
    assert!(events(l.agent(1)).is_empty(), "not delivered to the server");
    let out = l.agent(1).poll_transmit().expect("answered");
    assert_eq!(u16::from(out.mad.header().expect("h").status), 0x0004);
}

#[test]
fn sends_and_responses_of_unknown_classes_are_dropped_and_counted() {
    let mut l = dm_pair();
    let now = l.now;
    let send = request(MgmtClass::Cm, 2, Method::Send, 0x0010);
    l.agent(1).handle_mad(now, addr(1), send.clone());
    let mut rsp = send;
    let h = rsp.header().expect("h");
    rsp.set_header(&h.response_to(MadStatus::Success))
        .expect("h");
    l.agent(1).handle_mad(now, addr(1), rsp);
    l.agent(1).handle_mad(now, addr(1), MadBuf::zeroed()); // base version 0
    assert!(l.agent(1).poll_transmit().is_none());
    assert!(events(l.agent(1)).is_empty());
    let s = l.agent(1).stats();
    assert_eq!((s.unknown_class_dropped, s.malformed), (2, 1));
}

#[test]
fn a_lost_response_is_retried_with_the_same_tid() {
    let mut l = dm_pair();
    let now = l.now;
    let opts = RequestOptions {
        timeout: Duration::from_millis(100),
        retries: 2,
    };
    let tid = l
        .agent(0)
        .send_request(now, addr(2), get_iou(), opts)
        .expect("send");
    l.deliver();
    answer_all(&mut l);
    l.drop_next = 1; // the response
    l.deliver();
    assert!(events(l.agent(0)).is_empty());
    assert_eq!(
        l.agent(0).poll_timeout(),
        Some(now + Duration::from_millis(100))
    );
    assert!(l.fire_timers(Time(u64::MAX)));
    l.deliver();
    assert_eq!(answer_all(&mut l), 1, "the retry reaches the server");
    l.deliver();
    let ev = events(l.agent(0));
    assert!(matches!(&ev[..], [GsiEvent::Response { tid: t, .. }] if *t == tid));
    assert_eq!(l.agent(0).stats().retries, 1);
    // A duplicate answer after completion is counted, not reported.
    let mut dup = get_iou();
    let h = MadHeader {
        tid,
        ..dup.header().expect("h")
    };
    dup.set_header(&h.response_to(MadStatus::Success))
        .expect("h");
    let now = l.now;
    l.agent(0).handle_mad(now, addr(2), dup);
    assert!(events(l.agent(0)).is_empty());
    assert_eq!(l.agent(0).stats().unmatched_responses, 1);
}

#[test]
fn a_request_times_out_after_its_retries() {
    let mut l = dm_pair();
    let start = l.now;
    let opts = RequestOptions {
        timeout: Duration::from_millis(250),
        retries: 4,
    };
    let tid = l
        .agent(0)
        .send_request(start, addr(2), get_iou(), opts)
        .expect("send");
    let mut sent = 0;
    for _ in 0..10 {
        sent += l.agent(0).poll_transmit().map_or(0, |_| 1);
        if !l.fire_timers(Time(u64::MAX)) {
            break;
        }
    }
    assert_eq!(sent, 5, "first send and 4 retries");
    assert_eq!(l.now, start + Duration::from_millis(1250));
    let ev = events(l.agent(0));
    assert!(
        matches!(&ev[..], [GsiEvent::Timeout { tid: t, to, mgmt_class: MgmtClass::DeviceMgmt, attr_id: 0x10 }]
            if *t == tid && *to == addr(2)),
        "{ev:?}"
    );
    assert_eq!(l.agent(0).outstanding(), 0);
}

#[test]
fn responses_must_come_from_the_peer_asked_for_the_attribute_asked() {
    let mut l = dm_pair();
    let now = l.now;
    let tid = l
        .agent(0)
        .send_request(now, addr(2), get_iou(), RequestOptions::default())
        .expect("send");
    let answer = |attr: u16| {
        let mut m = request(MgmtClass::DeviceMgmt, 1, Method::Get, attr);
        let h = MadHeader {
            tid,
            ..m.header().expect("h")
        };
        m.set_header(&h.response_to(MadStatus::Success)).expect("h");
        m
    };
    l.agent(0).handle_mad(now, addr(3), answer(0x0010));
    l.agent(0).handle_mad(now, addr(2), answer(0x0011));
    assert!(events(l.agent(0)).is_empty());
    assert_eq!(l.agent(0).stats().unmatched_responses, 2);
    l.agent(0).handle_mad(now, addr(2), answer(0x0010));
    assert_eq!(events(l.agent(0)).len(), 1);
}

#[test]
fn the_request_pool_is_bounded() {
    let mut a = GsiAgent::new(GsiConfig {
        max_outstanding: 2,
        ..GsiConfig::default()
    });
    a.register_client(MgmtClass::DeviceMgmt);
    let now = Time(0);
    let opts = RequestOptions::default();
    a.send_request(now, addr(2), get_iou(), opts).expect("1");
    let second = a.send_request(now, addr(2), get_iou(), opts).expect("2");
    assert_eq!(
        a.send_request(now, addr(2), get_iou(), opts),
        Err(GsiError::PoolFull { capacity: 2 })
    );
    assert!(a.cancel(second));
    a.send_request(now, addr(2), get_iou(), opts)
        .expect("room again");
    assert_eq!(
        a.send_request(
            now,
            addr(2),
            request(MgmtClass::Cm, 2, Method::Send, 0x10),
            opts
        ),
        Err(GsiError::NotClient(MgmtClass::Cm))
    );
    let mut rsp = get_iou();
    let h = rsp.header().expect("h").response_to(MadStatus::Success);
    rsp.set_header(&h).expect("h");
    a.cancel(second);
    assert!(a.outstanding() == 2);
    assert_eq!(
        a.send_request(now, addr(2), rsp, opts),
        Err(GsiError::NotARequest)
    );
}

#[test]
fn unserved_requests_do_not_overflow_the_event_queue() {
    let mut a = GsiAgent::new(GsiConfig {
        max_events: 3,
        ..GsiConfig::default()
    });
    a.register_server(MgmtClass::DeviceMgmt, 1);
    for _ in 0..5 {
        a.handle_mad(Time(0), addr(2), get_iou());
    }
    assert_eq!(events(&mut a).len(), 3);
    assert_eq!(a.stats().queue_full_drops, 2);
}
