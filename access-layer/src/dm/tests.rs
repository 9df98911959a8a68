//! Unit tests of the DM agent's answers and of discovery on the in-memory GSI link.
#[allow(unused_imports)]
use crate::prelude::*;

use super::*;
use crate::gsi::tests::{Link, addr, request};
use crate::gsi::{GsiEvent, RequestOptions};
use crate::mad::dm::{DmAttr, IocProfile, ServiceEntriesRange, ServiceEntry, SlotState};
use crate::mad::{
    AnyMad, DmAttribute, MadBody, MadBuf, MadHeader, MadStatus, Method, MgmtClass, ServiceId,
    parse_any,
};
use core::time::Duration;
use ib_verbs::Guid;

fn profile(guid: u64) -> IocProfile {
    IocProfile::srp(Guid(guid), 128, 4, 4096, 1 << 20, "test IOC").expect("profile")
}

fn entries(n: u64) -> Vec<ServiceEntry> {
    (0..n)
        .map(|i| ServiceEntry::srp(0x100 + i, ServiceId(0x200 + i)))
        .collect()
}

fn get(attr: DmAttr, attr_mod: u32) -> MadBuf {
    let mut m = request(MgmtClass::DeviceMgmt, 1, Method::Get, attr.into());
    let h = MadHeader {
        attr_mod,
        ..m.header().expect("h")
    };
    m.set_header(&h).expect("h");
    m
}

/// Status and attribute of `agent`'s answer to `mad`.
fn ask(agent: &DmAgent, mad: &MadBuf) -> (u16, MadBuf) {
    let rsp = agent.answer(mad).expect("answered");
    let h = rsp.header().expect("h");
    assert!(h.response && h.method == Method::Get, "a GetResp: {h:?}");
    (h.status.into(), rsp)
}

fn attr(rsp: &MadBuf) -> DmAttribute<'_> {
    match parse_any(rsp.as_bytes()).expect("parse") {
        AnyMad {
            body: MadBody::Dm { attr, .. },
            ..
        } => attr,
        m => panic!("not DM: {m:?}"),
    }
}

fn unit() -> DmAgent {
    let mut a = DmAgent::new(DmAgentConfig::default());
    a.add_ioc(1, profile(0xa1), entries(6)).expect("slot 1");
    a.add_ioc(3, profile(0xa3), entries(0)).expect("slot 3");
    a
}

#[test]
fn the_agent_answers_the_four_attributes() {
    let a = unit();
    let (s, rsp) = ask(&a, &get(DmAttr::ClassPortInfo, 0));
    let DmAttribute::ClassPortInfo(c) = attr(&rsp) else {
        panic!()
    };
    assert_eq!(
        (s, c.base_version, c.class_version, c.resp_time_value),
        (0, 1, 1, 20)
    );

    let (s, rsp) = ask(&a, &get(DmAttr::IouInfo, 0));
    let DmAttribute::IouInfo(info) = attr(&rsp) else {
        panic!()
    };
    assert_eq!((s, info.change_id, info.max_controllers), (0, 3, 16));
    let states: Vec<_> = (1..=4).map(|n| info.slot(n)).collect();
    let (p, e) = (Some(SlotState::Present), Some(SlotState::NotInstalled));
    assert_eq!(states, [p, e, p, e]);

    let (s, rsp) = ask(&a, &get(DmAttr::IocProfile, 1));
    let DmAttribute::IocProfile(got) = attr(&rsp) else {
        panic!()
    };
    assert_eq!((s, got.guid, got.service_entries), (0, Guid(0xa1), 6));

    let range = |first, last| {
        ServiceEntriesRange {
            slot: 1,
            first,
            last,
        }
        .to_attr_mod()
    };
    let (s, rsp) = ask(&a, &get(DmAttr::ServiceEntries, range(4, 5)));
    let DmAttribute::ServiceEntries(se) = attr(&rsp) else {
        panic!()
    };
    assert_eq!(s, 0);
    assert_eq!(&se.entries[..2], &entries(6)[4..]);
    assert_eq!(se.entries[2], ServiceEntry::default());
}

#[test]
fn the_agent_answers_errors_as_ib_srpt() {
    let a = unit();
    let status = |m: &MadBuf| ask(&a, m).0;
    for slot in [0, 2, 17, 0x1_0001] {
        assert_eq!(
            status(&get(DmAttr::IocProfile, slot)),
            0x0100,
            "slot {slot}"
        );
    }
    let range = |slot, first, last| ServiceEntriesRange { slot, first, last }.to_attr_mod();
    assert_eq!(status(&get(DmAttr::ServiceEntries, range(2, 0, 0))), 0x0100);
    assert_eq!(status(&get(DmAttr::ServiceEntries, range(3, 0, 0))), 0x001c);
    assert_eq!(status(&get(DmAttr::ServiceEntries, range(1, 2, 1))), 0x001c);
    assert_eq!(status(&get(DmAttr::ServiceEntries, range(1, 0, 4))), 0x001c);
    assert_eq!(status(&get(DmAttr::ServiceEntries, range(1, 5, 6))), 0x001c);
    assert_eq!(status(&get(DmAttr::DiagCode, 0)), 0x000c);
    let mut set = get(DmAttr::IouInfo, 0);
    let h = MadHeader {
        method: Method::Set,
        ..set.header().expect("h")
    };
    set.set_header(&h).expect("h");
    assert_eq!(status(&set), 0x000c);
    let mut trap = set.clone();
    trap.set_header(&MadHeader {
        method: Method::Trap,
        ..h
    })
    .expect("h");
    assert_eq!(status(&trap), 0x0008);
    // Not DM requests: no answer.
    let mut rsp = get(DmAttr::IouInfo, 0);
    rsp.set_header(&h.response_to(MadStatus::Success))
        .expect("h");
    assert!(a.answer(&rsp).is_none());
    assert!(
        a.answer(&request(MgmtClass::Cm, 2, Method::Send, 0x10))
            .is_none()
    );
}

#[test]
fn the_registry_checks_slots_and_bumps_the_change_id() {
    let mut a = DmAgent::new(DmAgentConfig::default());
    assert_eq!(a.change_id(), 1);
    a.add_ioc(2, profile(1), entries(1)).expect("add");
    assert_eq!(a.change_id(), 2);
    assert_eq!(a.add_ioc(2, profile(2), vec![]), Err(DmError::SlotInUse(2)));
    assert!(matches!(
        a.add_ioc(0, profile(2), vec![]),
        Err(DmError::BadSlot { .. })
    ));
    assert!(matches!(
        a.add_ioc(17, profile(2), vec![]),
        Err(DmError::BadSlot { .. })
    ));
    assert_eq!(
        a.add_ioc(4, profile(2), entries(256)),
        Err(DmError::TooManyEntries(256))
    );
    assert_eq!(a.remove_ioc(2).map(|p| p.guid), Ok(Guid(1)));
    assert_eq!(a.remove_ioc(2), Err(DmError::NoIoc(2)));
    assert_eq!(a.change_id(), 3);
}

/// Node 0 runs the client; nodes 1.. run DM agents.
struct World {
    link: Link,
    client: DmClient,
    units: Vec<DmAgent>,
    events: Vec<DmEvent>,
}

const RESCAN: Duration = Duration::from_secs(5);

impl World {
    fn new(units: Vec<DmAgent>, max_outstanding: usize) -> World {
        let mut link = Link::new(1 + units.len() as u8);
        link.nodes[0].1 = crate::gsi::GsiAgent::new(crate::gsi::GsiConfig {
            max_outstanding,
            ..Default::default()
        });
        link.agent(0).register_client(MgmtClass::DeviceMgmt);
        for i in 1..=units.len() {
            link.agent(i).register_server(MgmtClass::DeviceMgmt, 1);
        }
        let config = DmClientConfig {
            rescan_period: RESCAN,
            request: RequestOptions {
                timeout: Duration::from_millis(250),
                retries: 4,
            },
            ..DmClientConfig::default()
        };
        let mut client = DmClient::new(config);
        let now = link.now;
        for i in 0..units.len() {
            client.add_portal(now, addr(i as u8 + 2)).expect("portal");
        }
        World {
            link,
            client,
            units,
            events: Vec::new(),
        }
    }

    /// Does everything due now.
    fn pump(&mut self) {
        for _ in 0..10_000 {
            let now = self.link.now;
            let mut moved = 0;
            while let Some(ev) = self.link.agent(0).poll_event() {
                moved += 1;
                assert!(
                    self.client.handle_event(now, self.link.agent(0), &ev),
                    "{ev:?}"
                );
            }
            for (i, unit) in self.units.iter_mut().enumerate() {
                while let Some(ev) = self.link.nodes[i + 1].1.poll_event() {
                    let GsiEvent::Request { from, mad } = ev else {
                        panic!("unit got {ev:?}")
                    };
                    unit.handle_request(from, &mad);
                }
                while let Some(out) = unit.poll_transmit() {
                    self.link.nodes[i + 1].1.send(out).expect("send");
                }
            }
            moved += self.link.deliver();
            self.events
                .extend(core::iter::from_fn(|| self.client.poll_event()));
            if moved == 0 {
                return;
            }
        }
        panic!("no quiescence");
    }

    /// Runs until `d` from now, firing timers in order.
    fn run_for(&mut self, d: Duration) {
        let end = self.link.now + d;
        for _ in 0..100_000 {
            self.pump();
            let gsi = self
                .link
                .nodes
                .iter()
                .filter_map(|(_, a)| a.poll_timeout())
                .min();
            let next = match (gsi, self.client.poll_timeout()) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).unwrap_or(end),
            };
            if next > end {
                break;
            }
            self.link.now = self.link.now.max(next);
            let now = self.link.now;
            self.link
                .nodes
                .iter_mut()
                .for_each(|(_, a)| a.handle_timeout(now));
            if self.client.poll_timeout().is_some_and(|t| t <= now) {
                self.client.handle_timeout(now, self.link.agent(0));
            }
        }
        self.link.now = self.link.now.max(end);
        self.pump();
    }

    fn take(&mut self) -> Vec<DmEvent> {
        core::mem::take(&mut self.events)
    }
}

fn two_units() -> Vec<DmAgent> {
    let mut a = DmAgent::new(DmAgentConfig::default());
    a.add_ioc(1, profile(0xa1), entries(6)).expect("a1");
    let mut b = DmAgent::new(DmAgentConfig::default());
    b.add_ioc(2, profile(0xb2), entries(1)).expect("b2");
    vec![a, b]
}

#[test]
fn the_client_finds_both_units_and_all_entries() {
    let mut w = World::new(two_units(), 64);
    w.run_for(Duration::from_millis(1));
    let ev = w.take();
    let mut arrived: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            DmEvent::IocArrived { addr, record } => Some((*addr, record.clone())),
            _ => None,
        })
        .collect();
    arrived.sort_by_key(|(a, _)| *a); // the shorter sweep ends first
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, DmEvent::IouArrived { .. }))
            .count(),
        2
    );
    assert_eq!(arrived.len(), 2, "{ev:?}");
    assert_eq!(arrived[0].0, addr(2));
    assert_eq!(arrived[0].1.slot, 1);
    assert_eq!(arrived[0].1.entries, entries(6), "two chunks: 0..=3, 4..=5");
    assert_eq!(arrived[1].1.profile.guid, Guid(0xb2));
    assert_eq!(w.client.records().count(), 2);
    // A quiet rescan: IOUnitInfo only, no events.
    let q = w.client.stats().queries;
    w.run_for(RESCAN);
    assert!(w.take().is_empty());
    assert_eq!(w.client.stats().queries, q + 2);
    assert_eq!(w.client.stats().unchanged, 2);
}

#[test]
fn removing_an_ioc_is_reported_within_the_rescan_period() {
    let mut w = World::new(two_units(), 64);
    w.run_for(Duration::from_millis(1));
    w.take();
    w.units[0].remove_ioc(1).expect("remove");
    w.units[1]
        .add_ioc(5, profile(0xb5), entries(2))
        .expect("add");
    w.run_for(RESCAN);
    assert_eq!(
        w.take()
            .into_iter()
            .map(|e| match e {
                DmEvent::IocRemoved { addr, guid } => (addr, guid, "removed"),
                DmEvent::IocArrived { addr, record } => (addr, record.profile.guid, "arrived"),
                e => panic!("{e:?}"),
            })
            .collect::<Vec<_>>(),
        [
            (addr(2), Guid(0xa1), "removed"),
            (addr(3), Guid(0xb5), "arrived")
        ]
    );
}

#[test]
fn a_silent_portal_loses_its_iocs_after_the_retries() {
    let mut w = World::new(two_units(), 64);
    w.run_for(Duration::from_millis(1));
    w.take();
    // Unit 1 stops answering: its GSI serves nothing and drops its own queue.
    w.link.agent(2).unregister_server(MgmtClass::DeviceMgmt);
    w.link.nodes.retain(|(a, _)| *a != addr(3));
    w.units.truncate(1);
    w.run_for(RESCAN + Duration::from_millis(1250));
    assert_eq!(
        w.take(),
        [
            DmEvent::IocRemoved {
                addr: addr(3),
                guid: Guid(0xb2)
            },
            DmEvent::IouRemoved { addr: addr(3) }
        ]
    );
    assert_eq!(w.client.stats().timeouts, 1);
}

#[test]
fn a_full_request_pool_delays_but_completes_the_sweeps() {
    let mut w = World::new(two_units(), 1);
    w.run_for(Duration::from_millis(200));
    let iocs = w
        .take()
        .iter()
        .filter(|e| matches!(e, DmEvent::IocArrived { .. }))
        .count();
    assert_eq!(iocs, 2);
}

#[test]
fn an_answering_unit_that_is_no_dm_agent_is_no_iou() {
    // Node 1's GSI serves no DM: IOUnitInfo is answered 0x0004 and nothing is reported.
    let mut w = World::new(two_units(), 64);
    w.link.agent(1).unregister_server(MgmtClass::DeviceMgmt);
    w.run_for(Duration::from_millis(1));
    let ev = w.take();
    assert!(ev.iter().all(|e| match e {
        DmEvent::IouArrived { addr: a, .. } | DmEvent::IocArrived { addr: a, .. } => *a == addr(3),
        _ => false,
    }));
    assert_eq!(w.client.stats().errors, 1);
    let removed = w.client.remove_portal(w.link.agent(0), addr(3));
    assert!(removed);
    w.pump();
    assert_eq!(
        w.take().last(),
        Some(&DmEvent::IouRemoved { addr: addr(3) })
    );
}
