//! Power states (issue item 7): children go down first and the HCA last; requests made while
//! the HCA is down are queued and replayed on power-up, or complete with a clear error; under
//! concurrent load for a bounded time, every completion completes exactly once. Software CAs
//! on UDP loopback 127.0.72.x.

use access_layer::power::{
    PowerDevice, PowerDomain, PowerError, PowerPolicy, PowerState, PoweredCa,
};
use access_layer::verbs::{ChannelInterface, Completion, VerbsError};
use hca::ca::SoftCa;
use hca::driver::{Hca, HcaConfig};
use ib_verbs::PathMtu;
use ib_verbs::mr::{Access, PdId};
use ib_verbs::qp::QpInit;
use ib_verbs::qp::state::QpState;
use ib_verbs::wr::{RecvWr, SendFlags, SendOp, SendWr, Wc, WcStatus};
use ib_verbs::{CqId, Event, RcConnect};
use ib_verbs::{Gid, Guid, Psn, Qpn};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(10);

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 72, host))
}

/// A powered software CA on 127.0.72.`host`, opened; events counted in `notifies`.
fn powered(host: u8, policy: PowerPolicy) -> (Arc<PoweredCa<SoftCa>>, Arc<AtomicU64>) {
    let hca = Hca::open(HcaConfig::new(
        Guid(0x7200 | u64::from(host)),
        vec![ip(host)],
    ))
    .unwrap_or_else(|e| panic!("open HCA on {}: {e}", ip(host)));
    let ca = Arc::new(PoweredCa::new(
        SoftCa::new(hca).expect("dispatcher"),
        policy,
    ));
    let notifies = Arc::new(AtomicU64::new(0));
    let n = notifies.clone();
    ca.open_ca(Arc::new(move |e| {
        if matches!(e, Event::CqNotify(_)) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }))
    .wait_timeout(DEADLINE)
    .expect("open");
    (ca, notifies)
}

fn rc_init(pd: PdId, cq: CqId) -> QpInit {
    QpInit::rc(pd, cq, 256, 256)
}

/// A peer that does not exist: sends to it are never acknowledged.
fn nowhere() -> RcConnect {
    RcConnect {
        access: Access::LOCAL_WRITE,
        dest_gid: Gid::from_ip(ip(250)),
        dest_qpn: Qpn::from_wire(0x99),
        path_mtu: PathMtu::Mtu1024,
        sq_psn: Psn::from_wire(1),
        rq_psn: Psn::from_wire(1),
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: 1,
        max_dest_rd_atomic: 1,
        pkey_index: 0,
        flow_label: 0,
        hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
        traffic_class: 0,
    }
}

fn send(wr_id: u64) -> SendWr {
    SendWr {
        wr_id,
        op: SendOp::Send,
        sg_list: Default::default(),
        flags: SendFlags::SIGNALED,
        ud: None,
    }
}

fn recv(wr_id: u64) -> RecvWr {
    RecvWr {
        wr_id,
        sg_list: Default::default(),
    }
}

fn wait<T: Send + 'static>(c: Completion<T>, what: &str) -> T {
    c.wait_timeout(DEADLINE)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Polls `cq` until `n` completions arrived (or the deadline passes).
fn poll_n(ca: &PoweredCa<SoftCa>, cq: CqId, n: usize) -> Vec<Wc> {
    poll_for(ca, cq, n, DEADLINE)
}

/// Polls `cq` until `n` completions arrived or `limit` passes.
fn poll_for(ca: &PoweredCa<SoftCa>, cq: CqId, n: usize, limit: Duration) -> Vec<Wc> {
    let start = Instant::now();
    let mut out = Vec::new();
    while out.len() < n && start.elapsed() < limit {
        let got = ca.poll_cq(cq, 64, &mut out).expect("poll");
        if got == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    out
}

/// A device that logs its transitions and completes them from another thread.
struct Logged {
    name: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Logged {
    fn transition(&self, what: &str) -> Completion<()> {
        self.log
            .lock()
            .expect("log")
            .push(format!("{what} {}", self.name));
        let (done, c) = Completion::pair();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1));
            done.complete(Ok(()));
        });
        c
    }
}

impl PowerDevice for Logged {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn power_down(&self) -> Completion<()> {
        self.transition("down")
    }
    fn power_up(&self) -> Completion<()> {
        self.transition("up")
    }
}

fn logged(name: &str, log: &Arc<Mutex<Vec<String>>>) -> Arc<Logged> {
    Arc::new(Logged {
        name: name.into(),
        log: log.clone(),
    })
}

#[test]
fn children_go_down_first_and_the_hca_last() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let domain = PowerDomain::new(logged("hca", &log));
    for (port, name) in [(1, "ipoib1"), (1, "srp1"), (2, "srp2")] {
        domain.add_child(port, logged(name, &log)).expect("add");
    }
    assert_eq!(domain.children_of(1).len(), 2);
    wait(domain.power_down().expect("start"), "power down");
    assert_eq!(domain.state(), PowerState::D3);
    assert_eq!(
        domain.power_down().err(),
        Some(PowerError::AlreadyIn(PowerState::D3))
    );
    assert_eq!(
        domain.add_child(1, logged("late", &log)).err(),
        Some(PowerError::NotIdle)
    );
    wait(domain.power_up().expect("start"), "power up");
    assert_eq!(domain.state(), PowerState::D0);
    let log = log.lock().expect("log").clone();
    assert_eq!(
        log,
        [
            "down srp2",
            "down srp1",
            "down ipoib1",
            "down hca", //
            "up hca",
            "up ipoib1",
            "up srp1",
            "up srp2",
        ]
    );
}

#[test]
fn a_second_transition_is_refused_while_one_runs() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let domain = PowerDomain::new(logged("hca", &log));
    let first = domain.power_down().expect("start");
    let second = domain.power_up();
    assert!(matches!(
        second,
        Err(PowerError::Busy) | Err(PowerError::AlreadyIn(_))
    ));
    wait(first, "power down");
    wait(domain.power_up().expect("start"), "power up");
}

#[test]
fn requests_made_while_down_are_replayed_in_order() {
    let (ca, _) = powered(1, PowerPolicy::default());
    let domain = PowerDomain::new(ca.clone());
    wait(domain.power_down().expect("start"), "power down");
    assert_eq!(ca.power_state(), PowerState::D3);
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    ca.create_cq(16)
        .on_complete(move |r| o.lock().expect("order").push(format!("cq {}", r.is_ok())));
    let o = order.clone();
    ca.query_ca().on_complete(move |r| {
        let active = r.map(|a| a.ports.iter().all(|p| p.active));
        o.lock().expect("order").push(format!("query {active:?}"));
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        order.lock().expect("order").is_empty(),
        "nothing completes in D3"
    );
    assert_eq!(ca.queued(), 2);
    wait(domain.power_up().expect("start"), "power up");
    let start = Instant::now();
    while order.lock().expect("order").len() < 2 && start.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(*order.lock().expect("order"), ["cq true", "query Ok(true)"]);
    assert_eq!(ca.stats().replayed, 2);
}

#[test]
fn posts_to_a_qp_reset_by_power_down_are_flushed_exactly_once() {
    let policy = PowerPolicy {
        reset_qps: true,
        ..PowerPolicy::default()
    };
    let (ca, _) = powered(2, policy);
    let pd = wait(ca.alloc_pd(), "alloc_pd");
    let cq = wait(ca.create_cq(64), "create_cq");
    let qp = wait(ca.create_qp(rc_init(pd, cq)), "create_qp");
    wait(ca.connect_rc(qp, nowhere()), "connect");
    let domain = PowerDomain::new(ca.clone());
    wait(domain.power_down().expect("start"), "power down");
    for id in 0..5 {
        ca.post_send(qp, send(id)).expect("queued");
        ca.post_recv(qp, recv(100 + id)).expect("queued");
    }
    wait(domain.power_up().expect("start"), "power up");
    assert_eq!(
        wait(ca.query_qp(qp), "query_qp"),
        QpState::Err,
        "the peer is gone"
    );
    let wcs = poll_n(&ca, cq, 10);
    let mut ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]);
    assert!(
        wcs.iter().all(|w| w.status == WcStatus::WrFlushErr),
        "{wcs:?}"
    );
    assert!(
        poll_for(&ca, cq, 1, Duration::from_millis(200)).is_empty(),
        "no duplicate"
    );
}

#[test]
fn a_post_the_provider_refuses_on_replay_completes_here_with_an_error() {
    let (ca, notifies) = powered(3, PowerPolicy::default());
    let pd = wait(ca.alloc_pd(), "alloc_pd");
    let cq = wait(ca.create_cq(64), "create_cq");
    // In RESET: the provider refuses sends.
    let qp = wait(ca.create_qp(rc_init(pd, cq)), "create_qp");
    assert!(ca.post_send(qp, send(1)).is_err(), "refused at once in D0");
    let domain = PowerDomain::new(ca.clone());
    wait(domain.power_down().expect("start"), "power down");
    ca.post_send(qp, send(7)).expect("queued while down");
    ca.post_send_list(qp, &mut vec![send(8), send(9)])
        .expect("queued while down");
    wait(domain.power_up().expect("start"), "power up");
    let wcs = poll_n(&ca, cq, 3);
    let ids: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        ids,
        [
            (7, WcStatus::WrFlushErr),
            (8, WcStatus::WrFlushErr),
            (9, WcStatus::WrFlushErr)
        ]
    );
    assert!(
        notifies.load(Ordering::Relaxed) >= 1,
        "the consumer was told"
    );
    assert_eq!(ca.stats().flushed_here, 3);
    assert_eq!(ca.stats().unreported, 0);
}

#[test]
fn a_full_queue_and_a_close_while_down_fail_cleanly() {
    let policy = PowerPolicy {
        max_queued: 2,
        ..PowerPolicy::default()
    };
    let (ca, _) = powered(4, policy);
    let domain = PowerDomain::new(ca.clone());
    wait(domain.power_down().expect("start"), "power down");
    let a = ca.alloc_pd();
    let b = ca.create_cq(8);
    let c = ca.alloc_pd();
    assert!(matches!(
        c.wait_timeout(DEADLINE),
        Err(VerbsError::PoweredDownQueueFull { .. })
    ));
    assert!(!a.is_complete() && !b.is_complete());
    wait(ca.close_ca(), "close");
    assert_eq!(a.wait_timeout(DEADLINE), Err(VerbsError::Closed));
    assert_eq!(b.wait_timeout(DEADLINE), Err(VerbsError::Closed));
    assert_eq!(
        ca.alloc_pd().wait_timeout(DEADLINE),
        Err(VerbsError::Closed)
    );
    wait(domain.power_up().expect("start"), "power up");
    assert_eq!(ca.stats().refused_full, 1);
}

/// Under load: 4 threads make resources and post receives while another cycles the domain
/// (with two children) down and up, for a bounded time. Every verb's completion completes
/// exactly once; every accepted receive yields exactly one work completion; the order of
/// each cycle is children first, HCA last.
#[test]
fn concurrent_load_while_power_cycles() {
    let (ca, _) = powered(5, PowerPolicy::default());
    let log = Arc::new(Mutex::new(Vec::new()));
    let domain = PowerDomain::new(ca.clone());
    domain.add_child(1, logged("a", &log)).expect("add");
    domain.add_child(1, logged("b", &log)).expect("add");
    let pd = wait(ca.alloc_pd(), "alloc_pd");
    let cq = wait(ca.create_cq(100_000), "create_cq");
    let qp = wait(ca.create_qp(rc_init(pd, cq)), "create_qp");
    wait(ca.connect_rc(qp, nowhere()), "connect");

    let stop = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let twice = Arc::new(AtomicU64::new(0));
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let run_for = Duration::from_millis(1500);
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (ca, stop, issued, ok, failed, twice, accepted) = (
                ca.clone(),
                stop.clone(),
                issued.clone(),
                ok.clone(),
                failed.clone(),
                twice.clone(),
                accepted.clone(),
            );
            scope.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let c = match n % 3 {
                        0 => ca.alloc_pd().map_unit(),
                        1 => ca.query_ca().map_unit(),
                        _ => ca.create_cq(4).map_unit(),
                    };
                    issued.fetch_add(1, Ordering::Relaxed);
                    let (ok, failed, twice) = (ok.clone(), failed.clone(), twice.clone());
                    let once = AtomicBool::new(false);
                    c.on_complete(move |r| {
                        if once.swap(true, Ordering::Relaxed) {
                            twice.fetch_add(1, Ordering::Relaxed);
                        }
                        if r.is_ok() {
                            ok.fetch_add(1, Ordering::Relaxed);
                        } else {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    let id = t << 32 | n;
                    if n % 4 == 0 && ca.post_recv(qp, recv(id)).is_ok() {
                        accepted.lock().expect("accepted").push(id);
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
        }
        let (domain, stop) = (domain.clone(), stop.clone());
        scope.spawn(move || {
            let start = Instant::now();
            while start.elapsed() < run_for {
                wait(domain.power_down().expect("down"), "power down");
                std::thread::sleep(Duration::from_millis(20));
                wait(domain.power_up().expect("up"), "power up");
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    // Everything issued completes (the domain ends in D0).
    let start = Instant::now();
    let done = || ok.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed);
    while done() < issued.load(Ordering::Relaxed) && start.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        done(),
        issued.load(Ordering::Relaxed),
        "every completion completed"
    );
    assert_eq!(twice.load(Ordering::Relaxed), 0, "none twice");
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "nothing failed in this run"
    );
    assert!(
        ca.stats().queued > 0,
        "some requests were queued: {:?}",
        ca.stats()
    );

    // Destroying the QP flushes every receive still posted: each accepted one shows once.
    wait(ca.destroy_qp(qp), "destroy_qp");
    let accepted = accepted.lock().expect("accepted").clone();
    let wcs = poll_n(&ca, cq, accepted.len());
    let mut seen: HashMap<u64, u32> = HashMap::new();
    for w in &wcs {
        *seen.entry(w.wr_id).or_default() += 1;
    }
    assert_eq!(
        seen.len(),
        accepted.len(),
        "one completion per accepted receive"
    );
    assert!(seen.values().all(|&n| n == 1), "no duplicate");
    assert!(accepted.iter().all(|id| seen.contains_key(id)));

    let log = log.lock().expect("log").clone();
    assert!(!log.is_empty());
    for cycle in log.chunks(4) {
        assert_eq!(cycle, ["down b", "down a", "up a", "up b"]);
    }
}

/// `Completion<T>` to `Completion<()>`, for counting.
trait MapUnit {
    fn map_unit(self) -> Completion<()>;
}

impl<T: Send + 'static> MapUnit for Completion<T> {
    fn map_unit(self) -> Completion<()> {
        let (done, c) = Completion::pair();
        self.on_complete(move |r| done.complete(r.map(|_| ())));
        c
    }
}
