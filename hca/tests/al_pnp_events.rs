//! PnP events: replay on registration, parent-first arrivals and children-first removals,
//! class filters, DM events mapped to IOU/IOC events, refused inputs, and a real software
//! HCA (127.0.73.x) whose port going down and up reaches a registered client.

use access_layer::dm::{DmEvent, IocRecord};
use access_layer::mad::MadAddress;
use access_layer::mad::ServiceId;
use access_layer::mad::dm::{IocProfile, ServiceEntry};
use access_layer::pnp::{
    ChildDevice, ClientHandle, Closed, EventClasses, PnpConfig, PnpError, PnpEvent, PnpManager,
};
use access_layer::verbs::{CaAttr, PortAttr, in_dispatch};
use hca::driver::{Hca, HcaConfig};
use ib_verbs::{Gid, Guid};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CA: Guid = Guid(0xca01);

/// A client's owner that records what it was told.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<PnpEvent>>,
}

impl Recorder {
    fn take(&self) -> Vec<PnpEvent> {
        std::mem::take(&mut *self.events.lock().expect("events"))
    }
}

/// A recording client: its owner and handle.
type Registered = (Arc<Recorder>, ClientHandle<PnpEvent>);

fn record(mgr: &PnpManager, classes: EventClasses) -> Registered {
    let rec = Arc::new(Recorder::default());
    let h = mgr.register(rec.clone(), classes, |r: &Recorder, ev| {
        assert!(in_dispatch(), "callbacks run at dispatch level");
        r.events.lock().expect("events").push(ev.clone());
    });
    (rec, h)
}

fn ca_attr(ca: Guid, active: &[bool]) -> CaAttr {
    CaAttr {
        node_guid: ca,
        ports: (1u8..)
            .zip(active)
            .map(|(port, &active)| PortAttr {
                port,
                gid: Gid::from_ip(IpAddr::V4(Ipv4Addr::new(127, 0, 73, port))),
                active,
                link_mtu: None,
            })
            .collect(),
        caps: Default::default(),
    }
}

fn portal(port: u8, host: u8) -> MadAddress {
    MadAddress::gsi(
        port,
        Gid::from_ip(IpAddr::V4(Ipv4Addr::new(10, 0, 0, host))),
    )
}

fn ioc(slot: u8, guid: u64) -> IocRecord {
    IocRecord {
        slot,
        profile: IocProfile::srp(Guid(guid), 128, 4, 4096, 1 << 20, "pnp IOC").expect("profile"),
        entries: vec![ServiceEntry::srp(
            guid,
            ServiceId(0x0000_0001_0600_0000 | guid),
        )],
    }
}

fn children() -> PnpConfig {
    let child = |port, id: &str| ChildDevice {
        ca: CA,
        port,
        id: id.into(),
    };
    PnpConfig {
        children: vec![child(1, "IPoIB"), child(1, "kclient"), child(2, "IPoIB")],
    }
}

/// A manager with CA (port 1 active, port 2 down) and one IOU with two IOCs on port 1.
fn populated() -> PnpManager {
    let mgr = PnpManager::new(children());
    mgr.ca_added(&ca_attr(CA, &[true, false])).expect("CA");
    let addr = portal(1, 9);
    mgr.dm_event(CA, DmEvent::IouArrived { addr, change_id: 3 })
        .expect("IOU");
    for (slot, guid) in [(1, 0x10), (2, 0x20)] {
        mgr.dm_event(
            CA,
            DmEvent::IocArrived {
                addr,
                record: ioc(slot, guid),
            },
        )
        .expect("IOC");
    }
    mgr
}

fn child(port: u8, id: &str, created: bool) -> PnpEvent {
    let (ca, id) = (CA, id.to_string());
    if created {
        PnpEvent::ChildCreated { ca, port, id }
    } else {
        PnpEvent::ChildRemoved { ca, port, id }
    }
}

#[test]
fn registration_replays_the_state_parents_first() {
    let mgr = populated();
    let (rec, h) = record(&mgr, EventClasses::all());
    let addr = portal(1, 9);
    assert_eq!(
        rec.take(),
        vec![
            PnpEvent::CaArrived { ca: CA },
            PnpEvent::PortArrived { ca: CA, port: 1 },
            child(1, "IPoIB", true),
            child(1, "kclient", true),
            PnpEvent::PortUp { ca: CA, port: 1 },
            PnpEvent::PortArrived { ca: CA, port: 2 },
            child(2, "IPoIB", true),
            PnpEvent::IouArrived {
                ca: CA,
                addr,
                change_id: 3
            },
            PnpEvent::IocArrived {
                ca: CA,
                addr,
                record: ioc(1, 0x10)
            },
            PnpEvent::IocArrived {
                ca: CA,
                addr,
                record: ioc(2, 0x20)
            },
            PnpEvent::RegistrationComplete,
        ]
    );
    assert_eq!(h.close(), Ok(Closed::Released));
    assert_eq!(
        Arc::strong_count(&rec),
        1,
        "close dropped the owner reference"
    );
}

#[test]
fn ca_removal_goes_children_first() {
    let mgr = populated();
    let (rec, h) = record(&mgr, EventClasses::all());
    rec.take();
    mgr.ca_removed(CA).expect("remove");
    let addr = portal(1, 9);
    assert_eq!(
        rec.take(),
        vec![
            PnpEvent::IocRemoved {
                ca: CA,
                addr,
                guid: Guid(0x10)
            },
            PnpEvent::IocRemoved {
                ca: CA,
                addr,
                guid: Guid(0x20)
            },
            PnpEvent::IouRemoved { ca: CA, addr },
            child(1, "kclient", false),
            child(1, "IPoIB", false),
            PnpEvent::PortRemoved { ca: CA, port: 1 },
            child(2, "IPoIB", false),
            PnpEvent::PortRemoved { ca: CA, port: 2 },
            PnpEvent::CaRemoved { ca: CA },
        ]
    );
    assert!(mgr.snapshot().is_empty());
    drop(h);
}

#[test]
fn live_events_follow_the_replay_and_respect_classes() {
    let mgr = PnpManager::new(children());
    let (all, _h1) = record(&mgr, EventClasses::all());
    let (iocs, _h2) = record(&mgr, EventClasses::IOC);
    let (ports, _h3) = record(&mgr, EventClasses::PORT);
    assert_eq!(all.take(), vec![PnpEvent::RegistrationComplete]);
    assert_eq!(iocs.take(), vec![PnpEvent::RegistrationComplete]);
    ports.take();

    mgr.ca_added(&ca_attr(CA, &[false])).expect("CA");
    mgr.port_state(CA, 1, false)
        .expect("already down: no event");
    mgr.port_state(CA, 1, true).expect("up");
    let addr = portal(1, 7);
    mgr.dm_event(CA, DmEvent::IouArrived { addr, change_id: 1 })
        .expect("IOU");
    mgr.dm_event(
        CA,
        DmEvent::IocArrived {
            addr,
            record: ioc(1, 0x30),
        },
    )
    .expect("IOC");
    // The same again changes nothing; a changed record is a removal and an arrival.
    mgr.dm_event(
        CA,
        DmEvent::IocArrived {
            addr,
            record: ioc(1, 0x30),
        },
    )
    .expect("same IOC");
    mgr.dm_event(
        CA,
        DmEvent::IocUpdated {
            addr,
            record: ioc(2, 0x30),
        },
    )
    .expect("moved IOC");
    // The unit goes with its IOC still listed: the IOC goes first.
    mgr.dm_event(CA, DmEvent::IouRemoved { addr })
        .expect("IOU gone");

    assert_eq!(
        ports.take(),
        vec![
            PnpEvent::PortArrived { ca: CA, port: 1 },
            PnpEvent::PortUp { ca: CA, port: 1 },
        ]
    );
    assert_eq!(
        iocs.take(),
        vec![
            PnpEvent::IocArrived {
                ca: CA,
                addr,
                record: ioc(1, 0x30)
            },
            PnpEvent::IocRemoved {
                ca: CA,
                addr,
                guid: Guid(0x30)
            },
            PnpEvent::IocArrived {
                ca: CA,
                addr,
                record: ioc(2, 0x30)
            },
            PnpEvent::IocRemoved {
                ca: CA,
                addr,
                guid: Guid(0x30)
            },
        ]
    );
    let seen = all.take();
    assert_eq!(seen.len(), 11, "{seen:#?}");
    assert_eq!(seen.last(), Some(&PnpEvent::IouRemoved { ca: CA, addr }));
}

#[test]
fn refused_inputs_change_nothing() {
    let mgr = populated();
    let before = mgr.snapshot();
    let addr = portal(1, 9);
    assert_eq!(
        mgr.ca_added(&ca_attr(CA, &[true])),
        Err(PnpError::DuplicateCa(CA))
    );
    assert_eq!(mgr.ca_removed(Guid(7)), Err(PnpError::UnknownCa(Guid(7))));
    assert_eq!(
        mgr.port_state(CA, 3, true),
        Err(PnpError::UnknownPort { ca: CA, port: 3 })
    );
    let stranger = portal(2, 4);
    assert_eq!(
        mgr.dm_event(
            CA,
            DmEvent::IocArrived {
                addr: stranger,
                record: ioc(1, 0x40)
            }
        ),
        Err(PnpError::UnknownIou {
            ca: CA,
            addr: stranger
        })
    );
    assert_eq!(
        mgr.dm_event(
            CA,
            DmEvent::IouArrived {
                addr: portal(5, 1),
                change_id: 0
            }
        ),
        Err(PnpError::UnknownPort { ca: CA, port: 5 })
    );
    // Removing what is not there is not an error, and changes nothing either.
    mgr.dm_event(
        CA,
        DmEvent::IocRemoved {
            addr,
            guid: Guid(0x99),
        },
    )
    .expect("unknown IOC");
    assert_eq!(mgr.snapshot(), before);
}

#[test]
fn a_callback_may_register_and_report_without_nesting() {
    let mgr = PnpManager::new(PnpConfig::default());
    let inner: Arc<Mutex<Option<Registered>>> = Arc::default();
    let depth = Arc::new(Mutex::new(0u32));
    let h = {
        let (mgr2, inner2) = (mgr.clone(), inner.clone());
        mgr.register(depth.clone(), EventClasses::CA, move |depth, ev| {
            let mut d = depth.try_lock().expect("callbacks never nest");
            *d += 1;
            if let PnpEvent::CaArrived { ca } = ev {
                // Starts a client of its own and reports a port change from the callback:
                // both are queued behind this callback.
                *inner2.lock().expect("inner") = Some(record(&mgr2, EventClasses::PORT));
                mgr2.port_state(*ca, 1, true).expect("port");
            }
        })
    };
    mgr.ca_added(&ca_attr(CA, &[false])).expect("CA");
    let (rec, h2) = inner.lock().expect("inner").take().expect("registered");
    assert_eq!(
        rec.take(),
        vec![
            PnpEvent::PortArrived { ca: CA, port: 1 },
            PnpEvent::RegistrationComplete,
            PnpEvent::PortUp { ca: CA, port: 1 },
        ]
    );
    assert_eq!(*depth.lock().expect("depth"), 2, "replay end + CA arrival");
    assert_eq!(h2.close(), Ok(Closed::Released));
    assert_eq!(h.close(), Ok(Closed::Released));
}

#[test]
fn a_panicking_callback_is_counted_and_delivery_goes_on() {
    let mgr = PnpManager::new(PnpConfig::default());
    let h = mgr.register(Arc::new(()), EventClasses::CA, |_, ev| {
        if matches!(ev, PnpEvent::CaArrived { .. }) {
            panic!("client bug");
        }
    });
    let (rec, h2) = record(&mgr, EventClasses::CA);
    mgr.ca_added(&ca_attr(CA, &[true])).expect("CA");
    assert_eq!(mgr.callback_panics(), 1);
    assert!(rec.take().contains(&PnpEvent::CaArrived { ca: CA }));
    assert_eq!(h.close(), Ok(Closed::Released));
    assert_eq!(h2.close(), Ok(Closed::Released));
}

/// A real software HCA: its port's state changes reach a client through the HCA's event
/// handler.
#[test]
fn hca_port_down_and_up_reach_the_client() {
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 73, 1));
    let guid = Guid(0x7301);
    let hca = Hca::open(HcaConfig::new(guid, vec![ip]))
        .unwrap_or_else(|e| panic!("open HCA on {ip}: {e}"));
    let mgr = PnpManager::new(PnpConfig {
        children: vec![ChildDevice {
            ca: guid,
            port: 1,
            id: "IPoIB".into(),
        }],
    });
    hca.set_event_handler(mgr.hca_event_handler(guid));
    let attr = hca.with(|e, _| CaAttr {
        node_guid: e.node_guid(),
        ports: (1u8..)
            .zip(e.ports())
            .map(|(port, p)| PortAttr {
                port,
                gid: p.gid(),
                active: p.active,
                link_mtu: None,
            })
            .collect(),
        caps: Default::default(),
    });
    mgr.ca_added(&attr).expect("CA");
    let (rec, h) = record(&mgr, EventClasses::PORT | EventClasses::CHILD);
    let replay = rec.take();
    assert!(replay.contains(&PnpEvent::ChildCreated {
        ca: guid,
        port: 1,
        id: "IPoIB".into()
    }));

    hca.with(|e, _| e.set_port_active(1, false)).expect("down");
    hca.with(|e, _| e.set_port_active(1, true)).expect("up");
    let want = vec![
        PnpEvent::PortDown { ca: guid, port: 1 },
        PnpEvent::PortUp { ca: guid, port: 1 },
    ];
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = Vec::new();
    while seen.len() < want.len() && Instant::now() < deadline {
        seen.extend(rec.take());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(seen, want);
    assert_eq!(h.close(), Ok(Closed::Released));
}

fn device(ioc: u64, id: &str, arrived: bool) -> PnpEvent {
    let (ca, addr, ioc, id) = (CA, portal(1, 9), Guid(ioc), id.to_string());
    if arrived {
        PnpEvent::DeviceArrived { ca, addr, ioc, id }
    } else {
        PnpEvent::DeviceRemoved { ca, addr, ioc, id }
    }
}

/// The tree's fourth level (HCA → IOU → IOC → device, issue #31 Deliver 5): a device is
/// attached to a present IOC only, replayed after its IOC, removed by its driver, and goes
/// before its IOC when the IOC leaves, changes, or its unit or CA goes — last attached
/// first.
#[test]
fn devices_hang_under_their_ioc_and_go_before_it() {
    let mgr = populated();
    let addr = portal(1, 9);
    let (rec, _h) = record(&mgr, EventClasses::IOC | EventClasses::DEVICE);
    rec.take();
    mgr.device_added(CA, addr, Guid(0x10), "SRP\\a").expect("a");
    mgr.device_added(CA, addr, Guid(0x10), "SRP\\b").expect("b");
    mgr.device_added(CA, addr, Guid(0x20), "SRP\\c").expect("c");
    assert_eq!(
        rec.take(),
        vec![
            device(0x10, "SRP\\a", true),
            device(0x10, "SRP\\b", true),
            device(0x20, "SRP\\c", true)
        ]
    );
    // Refused: a second device of one id, an IOC or unit not there, a device not there.
    let before = mgr.snapshot();
    assert_eq!(
        mgr.device_added(CA, addr, Guid(0x10), "SRP\\a"),
        Err(PnpError::DuplicateDevice {
            ioc: Guid(0x10),
            id: "SRP\\a".into()
        })
    );
    assert_eq!(
        mgr.device_added(CA, addr, Guid(0x30), "SRP\\d"),
        Err(PnpError::UnknownIoc {
            ca: CA,
            addr,
            ioc: Guid(0x30)
        })
    );
    let stranger = portal(2, 4);
    assert_eq!(
        mgr.device_added(CA, stranger, Guid(0x10), "SRP\\d"),
        Err(PnpError::UnknownIou {
            ca: CA,
            addr: stranger
        })
    );
    assert_eq!(
        mgr.device_removed(CA, addr, Guid(0x20), "SRP\\a"),
        Err(PnpError::UnknownDevice {
            ioc: Guid(0x20),
            id: "SRP\\a".into()
        })
    );
    assert_eq!(mgr.snapshot(), before);
    // The replay: each device right after its IOC.
    let tree = mgr.snapshot();
    let at = |ev: &PnpEvent| tree.iter().position(|e| e == ev).expect("in the tree");
    let ioc10 = tree
        .iter()
        .position(|e| matches!(e, PnpEvent::IocArrived { record, .. } if record.profile.guid == Guid(0x10)))
        .expect("IOC 0x10");
    assert_eq!(at(&device(0x10, "SRP\\a", true)), ioc10 + 1);
    assert_eq!(at(&device(0x10, "SRP\\b", true)), ioc10 + 2);
    // A driver removes its device.
    mgr.device_removed(CA, addr, Guid(0x20), "SRP\\c")
        .expect("c");
    assert_eq!(rec.take(), vec![device(0x20, "SRP\\c", false)]);
    // The IOC leaves: its devices first, last attached first, then the IOC.
    mgr.dm_event(
        CA,
        DmEvent::IocRemoved {
            addr,
            guid: Guid(0x10),
        },
    )
    .expect("IOC gone");
    assert_eq!(
        rec.take(),
        vec![
            device(0x10, "SRP\\b", false),
            device(0x10, "SRP\\a", false),
            PnpEvent::IocRemoved {
                ca: CA,
                addr,
                guid: Guid(0x10)
            }
        ]
    );
    // A changed IOC goes with its devices and arrives again bare.
    mgr.device_added(CA, addr, Guid(0x20), "SRP\\e").expect("e");
    rec.take();
    let mut changed = ioc(2, 0x20);
    changed.slot = 5;
    mgr.dm_event(
        CA,
        DmEvent::IocUpdated {
            addr,
            record: changed.clone(),
        },
    )
    .expect("IOC changed");
    assert_eq!(
        rec.take(),
        vec![
            device(0x20, "SRP\\e", false),
            PnpEvent::IocRemoved {
                ca: CA,
                addr,
                guid: Guid(0x20)
            },
            PnpEvent::IocArrived {
                ca: CA,
                addr,
                record: changed
            }
        ]
    );
    // The CA goes: the device before its IOC, before its unit.
    mgr.device_added(CA, addr, Guid(0x20), "SRP\\f").expect("f");
    rec.take();
    mgr.ca_removed(CA).expect("CA gone");
    let gone = rec.take();
    assert_eq!(
        gone[..2],
        [
            device(0x20, "SRP\\f", false),
            PnpEvent::IocRemoved {
                ca: CA,
                addr,
                guid: Guid(0x20)
            }
        ]
    );
}
