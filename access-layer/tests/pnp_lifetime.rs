//! Client lifetime (issue item 6): registering holds the owner, and once `close` returns no
//! callback of the client runs again — under a bounded stress of concurrent event feeders
//! and clients opening and closing, and for the awkward closes (from the client's own
//! callback, from another client's callback, asynchronously, at dispatch level).

use access_layer::pnp::{ClientHandle, Closed, EventClasses, PnpConfig, PnpEvent, PnpManager};
use access_layer::verbs::{CaAttr, PortAttr, VerbsError, at_dispatch};
use ib_verbs::Event;
use ib_verbs::{Gid, Guid};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CA: Guid = Guid(0xca02);
/// Ports 1..PORTS are fed at passive level; port PORTS through the HCA event handler at
/// dispatch level (which never waits, so it is paced).
const PORTS: u8 = 5;
const STRESS: Duration = Duration::from_secs(2);
const DEADLINE: Duration = Duration::from_secs(10);

fn manager() -> PnpManager {
    let mgr = PnpManager::new(PnpConfig::default());
    mgr.ca_added(&CaAttr {
        node_guid: CA,
        ports: (1..=PORTS)
            .map(|port| PortAttr {
                port,
                gid: Gid::from_ip(IpAddr::V4(Ipv4Addr::new(127, 0, 73, 100 + port))),
                active: false,
                link_mtu: None,
            })
            .collect(),
        caps: Default::default(),
    })
    .expect("CA");
    mgr
}

/// Counters shared by every client of the stress test.
#[derive(Default)]
struct Tally {
    violations: AtomicU64,
    callbacks: AtomicU64,
    opened: AtomicU64,
    self_closed: AtomicU64,
}

/// One stress client's owner.
struct Owner {
    tally: Arc<Tally>,
    /// Set by the closer right after `close` returned (or, for a self-close, by the
    /// callback right after its `close` returned).
    closed: AtomicBool,
    /// For a self-close: the callback takes the handle and closes it.
    handle: Mutex<Option<ClientHandle<PnpEvent>>>,
}

fn on_event(owner: &Owner, _ev: &PnpEvent) {
    let t = &owner.tally;
    if owner.closed.load(Ordering::SeqCst) {
        t.violations.fetch_add(1, Ordering::SeqCst);
    }
    t.callbacks.fetch_add(1, Ordering::Relaxed);
    // Widen the window in which a close races this callback.
    std::thread::yield_now();
    let mut closed_here = false;
    if let Some(h) = owner.handle.lock().expect("handle").take() {
        if h.close() == Ok(Closed::Deferred) {
            closed_here = true;
            owner.closed.store(true, Ordering::SeqCst);
            t.self_closed.fetch_add(1, Ordering::Relaxed);
        } else {
            t.violations.fetch_add(1, Ordering::SeqCst);
        }
    }
    // A close that returned while this callback still ran is a violation too.
    if !closed_here && owner.closed.load(Ordering::SeqCst) {
        t.violations.fetch_add(1, Ordering::SeqCst);
    }
}

/// One client's life on a churn thread; `round` picks how it ends.
fn churn_once(mgr: &PnpManager, tally: &Arc<Tally>, round: u64) {
    let owner = Arc::new(Owner {
        tally: tally.clone(),
        closed: AtomicBool::new(false),
        handle: Mutex::new(None),
    });
    let h = mgr.register(owner.clone(), EventClasses::all(), on_event);
    tally.opened.fetch_add(1, Ordering::Relaxed);
    for _ in 0..(round % 7) * 50 {
        std::hint::spin_loop();
    }
    match round % 4 {
        0 | 1 => {
            let closed = h.close();
            owner.closed.store(true, Ordering::SeqCst);
            if closed != Ok(Closed::Released) {
                tally.violations.fetch_add(1, Ordering::SeqCst);
            }
        }
        2 => {
            let done = h.close_async();
            let waited = done.wait_timeout(DEADLINE);
            owner.closed.store(true, Ordering::SeqCst);
            if waited.is_err() {
                tally.violations.fetch_add(1, Ordering::SeqCst);
            }
        }
        _ => {
            // The client closes itself from its next callback; the feeders keep them
            // coming, and the owner reference goes when that callback returns.
            *owner.handle.lock().expect("handle") = Some(h);
            let deadline = Instant::now() + DEADLINE;
            while Arc::strong_count(&owner) > 1 && Instant::now() < deadline {
                std::thread::yield_now();
            }
            owner.closed.store(true, Ordering::SeqCst);
        }
    }
    // Released: the manager holds no reference on the owner any more.
    if Arc::strong_count(&owner) != 1 {
        tally.violations.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn no_callback_after_close_under_concurrent_load() {
    let mgr = manager();
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let fed = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + STRESS;

    let feeders: Vec<_> = (1..=PORTS)
        .map(|port| {
            let (mgr, stop, fed) = (mgr.clone(), stop.clone(), fed.clone());
            std::thread::spawn(move || {
                let handler = mgr.hca_event_handler(CA);
                let mut up = false;
                while !stop.load(Ordering::Relaxed) {
                    up = !up;
                    if port < PORTS {
                        mgr.port_state(CA, port, up).expect("port");
                    } else {
                        handler(if up {
                            Event::PortActive(port)
                        } else {
                            Event::PortDown(port)
                        });
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    fed.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let churners: Vec<_> = (0..4u64)
        .map(|t| {
            let (mgr, tally) = (mgr.clone(), tally.clone());
            std::thread::spawn(move || {
                let mut round = t;
                while Instant::now() < end {
                    churn_once(&mgr, &tally, round);
                    round += 1;
                }
            })
        })
        .collect();
    for c in churners {
        c.join().expect("churn thread");
    }
    stop.store(true, Ordering::Relaxed);
    for f in feeders {
        f.join().expect("feeder thread");
    }

    let t = &tally;
    let (opened, callbacks) = (
        t.opened.load(Ordering::Relaxed),
        t.callbacks.load(Ordering::Relaxed),
    );
    eprintln!(
        "stress: {} events fed, {opened} clients, {callbacks} callbacks, {} self-closes",
        fed.load(Ordering::Relaxed),
        t.self_closed.load(Ordering::Relaxed)
    );
    assert_eq!(
        t.violations.load(Ordering::SeqCst),
        0,
        "a callback ran after close"
    );
    assert!(opened > 100, "the stress did little: {opened} clients");
    assert!(
        callbacks > 1000,
        "the stress did little: {callbacks} callbacks"
    );
    assert!(t.self_closed.load(Ordering::Relaxed) > 10);
    assert_eq!(mgr.callback_panics(), 0);
}

type CloseResult = Result<Closed, VerbsError>;

#[derive(Default)]
struct Count(AtomicU64);

fn counting(mgr: &PnpManager, classes: EventClasses) -> (Arc<Count>, ClientHandle<PnpEvent>) {
    let c = Arc::new(Count::default());
    let h = mgr.register(c.clone(), classes, |c: &Count, _| {
        c.0.fetch_add(1, Ordering::SeqCst);
    });
    (c, h)
}

#[test]
fn a_client_closes_itself_from_its_callback() {
    let mgr = manager();
    let slot: Arc<Mutex<Option<ClientHandle<PnpEvent>>>> = Arc::default();
    let outcome: Arc<Mutex<Vec<CloseResult>>> = Arc::default();
    let owner = Arc::new(Count::default());
    let h = {
        let (slot, outcome) = (slot.clone(), outcome.clone());
        mgr.register(owner.clone(), EventClasses::PORT, move |c: &Count, ev| {
            c.0.fetch_add(1, Ordering::SeqCst);
            if matches!(ev, PnpEvent::PortUp { .. }) {
                if let Some(h) = slot.lock().expect("slot").take() {
                    outcome.lock().expect("outcome").push(h.close());
                }
            }
        })
    };
    *slot.lock().expect("slot") = Some(h);
    let replayed = owner.0.load(Ordering::SeqCst);
    mgr.port_state(CA, 1, true).expect("up");
    assert_eq!(
        *outcome.lock().expect("outcome"),
        vec![Ok(Closed::Deferred)]
    );
    assert_eq!(
        Arc::strong_count(&owner),
        1,
        "released as the callback returned"
    );
    mgr.port_state(CA, 1, false).expect("down");
    mgr.port_state(CA, 2, true).expect("up");
    assert_eq!(
        owner.0.load(Ordering::SeqCst),
        replayed + 1,
        "nothing after the close"
    );
}

#[test]
fn closing_another_client_from_a_callback_needs_no_wait() {
    let mgr = manager();
    let (victim, victim_h) = counting(&mgr, EventClasses::PORT);
    let victim_h = Arc::new(Mutex::new(Some(victim_h)));
    let outcome: Arc<Mutex<Option<CloseResult>>> = Arc::default();
    let _closer = {
        let (victim_h, outcome) = (victim_h.clone(), outcome.clone());
        mgr.register(Arc::new(()), EventClasses::PORT, move |_, ev| {
            if matches!(ev, PnpEvent::PortUp { .. }) {
                // At dispatch level: allowed, because the manager runs one callback at a
                // time, so the victim's cannot be running.
                if let Some(h) = victim_h.lock().expect("victim").take() {
                    *outcome.lock().expect("outcome") = Some(h.close());
                }
            }
        })
    };
    let before = victim.0.load(Ordering::SeqCst);
    mgr.port_state(CA, 3, true).expect("up");
    assert_eq!(
        *outcome.lock().expect("outcome"),
        Some(Ok(Closed::Released))
    );
    assert_eq!(Arc::strong_count(&victim), 1);
    // The victim registered first, so it saw the PortUp before the closer closed it.
    assert_eq!(victim.0.load(Ordering::SeqCst), before + 1);
    mgr.port_state(CA, 3, false).expect("down");
    assert_eq!(victim.0.load(Ordering::SeqCst), before + 1);
}

#[test]
fn close_async_completes_once_released() {
    let mgr = manager();
    let (c, h) = counting(&mgr, EventClasses::all());
    let done = h.close_async();
    assert_eq!(done.wait_timeout(DEADLINE), Ok(()));
    assert_eq!(Arc::strong_count(&c), 1);
    let seen = c.0.load(Ordering::SeqCst);
    mgr.port_state(CA, 4, true).expect("up");
    assert_eq!(c.0.load(Ordering::SeqCst), seen);
}

#[test]
fn dropping_the_handle_closes() {
    let mgr = manager();
    let (c, h) = counting(&mgr, EventClasses::all());
    drop(h);
    assert_eq!(Arc::strong_count(&c), 1);
    let seen = c.0.load(Ordering::SeqCst);
    mgr.port_state(CA, 4, true).expect("up");
    assert_eq!(c.0.load(Ordering::SeqCst), seen);
}

#[test]
fn a_blocking_close_at_dispatch_level_trips_the_verifier() {
    let mgr = manager();
    let (c, h) = counting(&mgr, EventClasses::all());
    let r = at_dispatch(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.close())));
    if cfg!(debug_assertions) {
        assert!(r.is_err(), "debug builds panic naming the call");
    } else {
        assert!(matches!(r, Ok(Err(VerbsError::BlockingAtDispatch { .. }))));
    }
    // The handle was dropped on the way out: closed without waiting.
    assert_eq!(Arc::strong_count(&c), 1);
}
