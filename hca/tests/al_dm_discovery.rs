//! Discovery acceptance on the seeded simulator: a target HCA with two ports (two portal
//! addresses) runs a GSI agent and a DM agent with two IOCs; a host HCA runs a DM client
//! sweeping both addresses over real GSI QPs ([`GsiPort`]). The client finds both IOCs on
//! both portals; removing one IOC is reported within the rescan period; a Get of a class
//! nobody serves is answered 0x0004; a lost response is retried.
//!
//! The MAD layer's clock is the fabric's plus a skew: when the fabric is idle and only a MAD
//! timer (retry, rescan) is pending, the driver jumps the skew forward to it (the fabric only
//! moves its clock for its own packets and engine timers).

use access_layer::dm::{DmAgent, DmAgentConfig, DmClient, DmClientConfig, DmEvent};
use access_layer::gsi::{GsiAgent, GsiConfig, GsiEvent, GsiPort, GsiPortConfig, RequestOptions};
use access_layer::mad::dm::{IocProfile, ServiceEntry};
use access_layer::mad::{MadAddress, MadBuf, MadHeader, Method, MgmtClass, ServiceId, Tid};
use access_layer::verbs::{ChannelInterface, SyncCa};
use core::time::Duration;
use hca::driver::HcaConfig;
use hca::sim::{FaultConfig, SimNet};
use ib_verbs::time::Time;
use ib_verbs::{Gid, Guid};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

const RESCAN: Duration = Duration::from_secs(2);
const TARGET: usize = 0;
const HOST: usize = 1;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 72, last))
}

/// A portal of the target as the host's port 1 reaches it.
fn portal(last: u8) -> MadAddress {
    MadAddress::gsi(1, Gid::from_ip(ip(last)))
}

struct Node {
    /// The device (its GSI QPs live on it).
    _ca: Arc<dyn ChannelInterface>,
    ports: Vec<GsiPort>,
    gsi: GsiAgent,
    dm: Option<DmAgent>,
    client: Option<DmClient>,
}

/// The simulated net as the old engine fabric was driven: one step delivers what is due
/// next (or fires the next device timer).
struct Fabric(Arc<SimNet>);

impl Fabric {
    fn now(&self) -> Time {
        self.0.time()
    }

    /// Does what is due now, else moves the clock to the next thing due and does it;
    /// false when nothing is left.
    fn step(&self) -> bool {
        if self.0.settle() > 0 {
            return true;
        }
        match self.0.next_event() {
            Some(t) => {
                self.0.advance_to(t);
                self.0.settle();
                true
            }
            None => false,
        }
    }

    /// Cuts or heals the links between the target's addresses and the host's.
    fn partition(&self, cut: bool) {
        for t in [ip(1), ip(2)] {
            self.0.cut(t, ip(3), cut);
        }
    }
}

/// A simulated device with one port per address, its CA open.
fn device(net: &Arc<SimNet>, guid: u64, ips: &[IpAddr]) -> Arc<dyn ChannelInterface> {
    let config = HcaConfig {
        sim: Some(net.clone()),
        ..HcaConfig::new(Guid(guid), ips.to_vec())
    };
    let dev = hca::ca::open_config(config).expect("device");
    SyncCa::new(dev.ca.clone())
        .open_ca(Arc::new(|_| {}))
        .expect("open CA");
    dev.ca
}

struct World {
    fabric: Fabric,
    skew: Duration,
    nodes: Vec<Node>,
    events: Vec<DmEvent>,
    /// Responses and timeouts no client claimed.
    other: Vec<GsiEvent>,
}

impl World {
    /// The target, and the host with a client sweeping `portals`.
    fn new(seed: u64, portals: &[MadAddress]) -> World {
        let fabric = Fabric(SimNet::new(seed, FaultConfig::default()));
        let t = device(&fabric.0, 0x7a, &[ip(1), ip(2)]);
        let h = device(&fabric.0, 0x40, &[ip(3)]);
        let now = fabric.now();
        let open = |ca: &Arc<dyn ChannelInterface>, port| {
            GsiPort::open(ca.clone(), port, GsiPortConfig::default()).expect("GSI QP")
        };
        let ports_t = vec![open(&t, 1), open(&t, 2)];
        let ports_h = vec![open(&h, 1)];
        let mut gsi_t = GsiAgent::new(GsiConfig {
            agent_id: 7,
            ..GsiConfig::default()
        });
        gsi_t.register_server(MgmtClass::DeviceMgmt, 1);
        let mut dm = DmAgent::new(DmAgentConfig::default());
        for (slot, guid) in [(1, 0xa1), (2, 0xa2)] {
            let p = IocProfile::srp(Guid(guid), 128, 4, 4096, 1 << 20, "sim IOC").expect("p");
            let e = vec![ServiceEntry::srp(guid, ServiceId(guid))];
            dm.add_ioc(slot, p, e).expect("IOC");
        }
        let mut gsi_h = GsiAgent::new(GsiConfig {
            agent_id: 4,
            ..GsiConfig::default()
        });
        gsi_h.register_client(MgmtClass::DeviceMgmt);
        gsi_h.register_client(MgmtClass::PerfMgmt);
        let mut client = DmClient::new(DmClientConfig {
            rescan_period: RESCAN,
            ..DmClientConfig::default()
        });
        for &p in portals {
            client.add_portal(now, p).expect("portal");
        }
        let target = Node {
            _ca: t,
            ports: ports_t,
            gsi: gsi_t,
            dm: Some(dm),
            client: None,
        };
        let host = Node {
            _ca: h,
            ports: ports_h,
            gsi: gsi_h,
            dm: None,
            client: Some(client),
        };
        World {
            fabric,
            skew: Duration::ZERO,
            nodes: vec![target, host],
            events: Vec::new(),
            other: Vec::new(),
        }
    }

    fn now(&self) -> Time {
        self.fabric.now() + self.skew
    }

    /// Runs one node's MAD layer: receives, events, answers, transmits. Returns work done.
    fn run_node(&mut self, i: usize) -> usize {
        let now = self.now();
        let n = &mut self.nodes[i];
        let mut work = 0;
        for port in &mut n.ports {
            while let Some((from, mad)) = port.recv().expect("recv") {
                n.gsi.handle_mad(now, from, mad);
                work += 1;
            }
        }
        while let Some(ev) = n.gsi.poll_event() {
            work += 1;
            if let (GsiEvent::Request { from, mad }, Some(dm)) = (&ev, &mut n.dm) {
                dm.handle_request(*from, mad);
                continue;
            }
            let claimed = n
                .client
                .as_mut()
                .is_some_and(|c| c.handle_event(now, &mut n.gsi, &ev));
            if !claimed {
                self.other.push(ev);
            }
        }
        if let Some(dm) = &mut n.dm {
            while let Some(out) = dm.poll_transmit() {
                n.gsi.send(out).expect("answer");
            }
        }
        while let Some(out) = n.gsi.poll_transmit() {
            let port = n.ports.iter_mut().find(|p| p.port() == out.to.port);
            port.expect("port").send(&out).expect("send");
            work += 1;
        }
        if let Some(c) = &mut n.client {
            self.events.extend(std::iter::from_fn(|| c.poll_event()));
        }
        work
    }

    /// Runs the MAD layers and the fabric until nothing is left to do now.
    fn pump(&mut self) {
        for _ in 0..100_000 {
            let work: usize = (0..self.nodes.len()).map(|i| self.run_node(i)).sum();
            if work == 0 && !self.fabric.step() {
                return;
            }
        }
        panic!("no quiescence");
    }

    /// Runs for `d` of MAD time, firing MAD timers in order.
    fn run_for(&mut self, d: Duration) {
        let end = self.now() + d;
        for _ in 0..100_000 {
            self.pump();
            let next = self
                .nodes
                .iter()
                .flat_map(|n| {
                    [
                        n.gsi.poll_timeout(),
                        n.client.as_ref().and_then(|c| c.poll_timeout()),
                    ]
                })
                .flatten()
                .min();
            let Some(next) = next.filter(|&t| t <= end) else {
                break;
            };
            self.skew += next - self.now();
            let now = self.now();
            for n in &mut self.nodes {
                n.gsi.handle_timeout(now);
                if let Some(c) = &mut n.client {
                    if c.poll_timeout().is_some_and(|t| t <= now) {
                        c.handle_timeout(now, &mut n.gsi);
                    }
                }
            }
        }
        self.skew += end - self.now();
        self.pump();
    }
}

#[test]
fn the_client_finds_two_iocs_on_two_addresses_and_sees_one_removed() {
    let mut w = World::new(72, &[portal(1), portal(2)]);
    w.run_for(Duration::from_millis(50));
    let ev = core::mem::take(&mut w.events);
    let mut found: Vec<(MadAddress, u64)> = ev
        .iter()
        .filter_map(|e| match e {
            DmEvent::IocArrived { addr, record } => Some((*addr, record.profile.guid.0)),
            _ => None,
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            (portal(1), 0xa1),
            (portal(1), 0xa2),
            (portal(2), 0xa1),
            (portal(2), 0xa2)
        ],
        "{ev:?}"
    );
    let client = w.nodes[HOST].client.as_ref().expect("client");
    let rec = client.records().next().expect("a record");
    assert_eq!(rec.iocs[0].entries[0].srp_id_ext(), Some(0xa1));

    let removed_at = w.now();
    w.nodes[TARGET]
        .dm
        .as_mut()
        .expect("dm")
        .remove_ioc(2)
        .expect("remove");
    let mut seen = Vec::new();
    for _ in 0..(RESCAN.as_millis() / 10) {
        w.run_for(Duration::from_millis(10));
        seen.append(&mut w.events);
        if seen.len() == 2 {
            break;
        }
    }
    assert!(w.now() - removed_at <= RESCAN, "within the rescan period");
    seen.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        seen,
        [
            DmEvent::IocRemoved {
                addr: portal(1),
                guid: Guid(0xa2)
            },
            DmEvent::IocRemoved {
                addr: portal(2),
                guid: Guid(0xa2)
            }
        ]
    );
    assert!(w.other.is_empty(), "{:?}", w.other);
}

/// Sends a Get of `class` from the host to portal 1 with `opts`; returns its TID.
fn host_get(w: &mut World, class: MgmtClass, version: u8, opts: RequestOptions) -> Tid {
    let mut mad = MadBuf::zeroed();
    let h = MadHeader::request(class, version, Method::Get, Tid(0), 0x0010, 0);
    mad.set_header(&h).expect("h");
    let now = w.now();
    w.nodes[HOST]
        .gsi
        .send_request(now, portal(1), mad, opts)
        .expect("send")
}

#[test]
fn a_get_of_an_unserved_class_is_answered_bad_class_over_the_fabric() {
    let mut w = World::new(73, &[]);
    let tid = host_get(&mut w, MgmtClass::PerfMgmt, 1, RequestOptions::default());
    w.run_for(Duration::from_millis(1));
    let answer = w.other.iter().find_map(|e| match e {
        GsiEvent::Response { tid: t, mad, .. } if *t == tid => Some(mad.header().expect("h")),
        _ => None,
    });
    let h = answer.expect("answered");
    assert_eq!((h.method, h.response), (Method::Get, true));
    assert_eq!(u16::from(h.status), 0x0004);
    assert_eq!(w.nodes[TARGET].gsi.stats().unsupported_answered, 1);
}

#[test]
fn a_lost_response_is_retried() {
    let mut w = World::new(74, &[]);
    let opts = RequestOptions {
        timeout: Duration::from_millis(100),
        retries: 2,
    };
    let tid = host_get(&mut w, MgmtClass::DeviceMgmt, 1, opts);
    // Deliver the request, then cut the link before the target's answer leaves.
    w.run_node(HOST);
    while w.nodes[TARGET].gsi.stats().transmitted == 0 {
        assert!(w.fabric.step(), "request in flight");
        let now = w.now();
        let n = &mut w.nodes[TARGET];
        if let Some((from, mad)) = n.ports[0].recv().expect("recv") {
            n.gsi.handle_mad(now, from, mad);
            let Some(GsiEvent::Request { from, mad }) = n.gsi.poll_event() else {
                panic!("a request")
            };
            let dm = n.dm.as_mut().expect("dm");
            dm.handle_request(from, &mad);
            n.gsi
                .send(dm.poll_transmit().expect("answer"))
                .expect("send");
        }
    }
    w.fabric.partition(true);
    w.pump();
    assert_eq!(w.fabric.0.stats().cut, 1, "the answer was lost");
    w.fabric.partition(false);
    w.run_for(Duration::from_millis(150));
    let got: Vec<_> = w
        .other
        .iter()
        .filter(|e| matches!(e, GsiEvent::Response { tid: t, .. } if *t == tid))
        .collect();
    assert_eq!(got.len(), 1);
    let s = w.nodes[HOST].gsi.stats();
    assert_eq!((s.retries, s.timeouts, s.responses), (1, 0, 1));
}
