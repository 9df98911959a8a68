//! Failover, queue if no path, failback, damping, ALUA and admin states of
//! [`MultipathDisk`], over simulated paths ([`sim`]). The test thread is the supervisor:
//! it calls `tick` every 10 ms, as the host daemon does. Every wait is bounded.

mod sim;

use mpio::alua::AluaState;
use mpio::{Damping, MultipathDisk, PathState, Policy};
use scsi::Lba;
use sim::{BLOCK, Rng, SimLu, SimPath, Supervisor, config, disk, wait_until};
use srp_host::{BlockDevice, DeviceError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(3);

/// Ticks every 10 ms until `f` holds or `limit` passes; whether it held.
fn tick_until(d: &Arc<MultipathDisk>, limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        d.tick(Instant::now());
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn state(d: &MultipathDisk, key: u32) -> PathState {
    d.snapshot()
        .paths
        .iter()
        .find(|p| p.key == key)
        .expect("path")
        .state
}

/// `n` one-block reads; the READs each path received meanwhile.
fn reads(d: &MultipathDisk, paths: &[Arc<SimPath>], n: u64) -> Vec<u64> {
    let before: Vec<u64> = paths.iter().map(|p| p.count().io()).collect();
    let mut buf = vec![0u8; BLOCK];
    for i in 0..n {
        d.read(Lba(i % 16), &mut buf).expect("read");
    }
    paths
        .iter()
        .zip(before)
        .map(|(p, b)| p.count().io() - b)
        .collect()
}

/// A read on its own thread: its result and how long it took.
fn spawn_read(d: &Arc<MultipathDisk>, lba: u64) -> Receiver<(Result<(), DeviceError>, Duration)> {
    let (tx, rx) = channel();
    let d = d.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut buf = vec![0u8; BLOCK];
        let r = d.read(Lba(lba), &mut buf);
        let _ = tx.send((r, start.elapsed()));
    });
    rx
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A block carrying its LBA, its generation and a checksum over both and the payload.
fn stamp(lba: u64, generation: u64, rng: &mut Rng) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    b[..8].copy_from_slice(&lba.to_le_bytes());
    b[8..16].copy_from_slice(&generation.to_le_bytes());
    for c in b[16..BLOCK - 8].chunks_mut(8) {
        c.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let sum = fnv(&b[..BLOCK - 8]);
    b[BLOCK - 8..].copy_from_slice(&sum.to_le_bytes());
    b
}

fn stamped(b: &[u8], lba: u64, generation: u64) -> bool {
    if generation == 0 {
        return b.iter().all(|&x| x == 0);
    }
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    word(0) == lba && word(8) == generation && word(BLOCK - 8) == fnv(&b[..BLOCK - 8])
}

/// Verified writes and reads of 64 blocks on a thread, until stopped.
struct Workload {
    ops: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(u64, u64)>,
}

impl Workload {
    fn start(d: &Arc<MultipathDisk>, seed: u64) -> Workload {
        let ops = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (o, s, d) = (ops.clone(), stop.clone(), d.clone());
        let thread = std::thread::spawn(move || {
            let mut rng = Rng::new(seed);
            let mut generations = [0u64; 64];
            let (mut errors, mut mismatches) = (0, 0);
            let mut buf = vec![0u8; BLOCK];
            while !s.load(Ordering::SeqCst) {
                let lba = rng.below(64);
                if rng.below(2) == 0 {
                    let g = generations[lba as usize] + 1;
                    match d.write(Lba(lba), &stamp(lba, g, &mut rng), false) {
                        Ok(()) => generations[lba as usize] = g,
                        Err(e) => {
                            eprintln!("seed {seed}: write {lba}: {e}");
                            errors += 1;
                            continue;
                        }
                    }
                }
                match d.read(Lba(lba), &mut buf) {
                    Ok(()) if stamped(&buf, lba, generations[lba as usize]) => {}
                    Ok(()) => {
                        eprintln!(
                            "seed {seed}: block {lba} is not generation {}",
                            generations[lba as usize]
                        );
                        mismatches += 1;
                    }
                    Err(e) => {
                        eprintln!("seed {seed}: read {lba}: {e}");
                        errors += 1;
                    }
                }
                o.fetch_add(1, Ordering::SeqCst);
            }
            (errors, mismatches)
        });
        Workload { ops, stop, thread }
    }

    fn ops(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }

    /// Ticks `d` until `n` more operations completed.
    fn advance(&self, d: &Arc<MultipathDisk>, n: u64) {
        let target = self.ops() + n;
        assert!(
            tick_until(d, LIMIT, || self.ops() >= target),
            "the workload stalled"
        );
    }

    fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("workload thread")
    }
}

fn two_paths(policy: Policy) -> (Arc<SimLu>, Vec<Arc<SimPath>>, Arc<MultipathDisk>) {
    let lu = SimLu::new(256);
    let paths = vec![SimPath::new(&lu, 1, 1), SimPath::new(&lu, 2, 2)];
    let d = disk(&lu, &paths, 1, config(policy));
    (lu, paths, d)
}

#[test]
fn a_path_down_mid_workload_moves_held_io_and_returns_after_verify() {
    let (_lu, p, d) = two_paths(Policy::RoundRobin);
    let started = Instant::now();
    let wl = Workload::start(&d, 0x5eed_0001);
    wl.advance(&d, 200);

    // Down: the next I/O round robin sends to path 0 is held there (no tick yet).
    p[0].set_down();
    assert!(
        p[0].wait_waiting(1, LIMIT),
        "an I/O is held on the down path"
    );
    // The supervisor sees the channel down and fails the held I/O fast: it moves over.
    assert!(
        tick_until(&d, LIMIT, || p[0].waiting() == 0),
        "held I/O released"
    );
    assert_eq!(p[0].count().fail_fast_calls, 1);
    assert_eq!(p[0].count().path_failed, 1);
    assert_eq!(state(&d, 0), PathState::Failed);
    let on0 = p[0].count().io();
    wl.advance(&d, 300);
    assert_eq!(p[0].count().io(), on0, "no I/O on the failed path");

    // Up: the verify (TEST UNIT READY) returns it and traffic spreads again.
    let tur = p[0].count().tur;
    p[0].set_up();
    assert!(tick_until(&d, LIMIT, || state(&d, 0) == PathState::Active));
    assert!(p[0].count().tur > tur, "returned through a verify");
    let (on0, on1) = (p[0].count().io(), p[1].count().io());
    wl.advance(&d, 300);
    let (n0, n1) = (p[0].count().io() - on0, p[1].count().io() - on1);
    assert!(n0.abs_diff(n1) <= 2, "round robin again: {n0} vs {n1}");

    let (errors, mismatches) = wl.finish();
    assert_eq!((errors, mismatches), (0, 0));
    let s = d.snapshot();
    assert_eq!(s.errors, 0);
    assert_eq!(s.failovers, 1);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "moved by fail_fast, not the 10 s hold"
    );
}

#[test]
fn held_io_moves_when_another_path_returns_later() {
    let (_lu, p, d) = two_paths(Policy::RoundRobin);
    p[1].set_down();
    d.tick(Instant::now());
    assert_eq!(state(&d, 1), PathState::Failed);
    p[0].set_down();
    let rx = spawn_read(&d, 3);
    assert!(p[0].wait_waiting(1, LIMIT));
    for _ in 0..5 {
        d.tick(Instant::now());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        p[0].count().fail_fast_calls,
        0,
        "no other path: the I/O stays held"
    );
    // Path 1 returns: the I/O held on path 0 moves to it now, not at path 0's hold end.
    p[1].set_up();
    assert!(
        tick_until(&d, LIMIT, || p[0].waiting() == 0),
        "held I/O failed fast"
    );
    let (r, _) = rx.recv_timeout(LIMIT).expect("the read completed");
    r.expect("the read succeeded on path 1");
    assert_eq!(p[1].count().reads, 1);
}

#[test]
fn device_answers_are_surfaced_and_not_sent_on_another_path() {
    let (_lu, p, d) = two_paths(Policy::RoundRobin);
    for path in &p {
        path.set_medium_error(Some(7)); // the LU's medium: the same answer on every path
    }
    let before: u64 = p.iter().map(|p| p.count().reads).sum();
    let mut buf = vec![0u8; 4 * BLOCK];
    match d.read(Lba(5), &mut buf) {
        Err(DeviceError::Io(why)) => assert!(why.contains("CHECK CONDITION"), "{why}"),
        other => panic!("medium error surfaced as EIO, got {other:?}"),
    }
    let after: u64 = p.iter().map(|p| p.count().reads).sum();
    assert_eq!(after - before, 1, "sent once, on one path");
    let s = d.snapshot();
    assert_eq!(s.failovers, 0);
    assert!(
        s.paths.iter().all(|p| p.state == PathState::Active),
        "no path blamed"
    );
    d.read(Lba(8), &mut buf).expect("the blocks after it read");
}

#[test]
fn unit_attention_is_retried_transparently() {
    let lu = SimLu::new(64);
    let p = vec![SimPath::new(&lu, 1, 1)];
    let d = disk(&lu, &p, 0, config(Policy::RoundRobin));
    let mut rng = Rng::new(3);
    let data = stamp(4, 1, &mut rng);
    p[0].arm_unit_attention();
    d.write(Lba(4), &data, true)
        .expect("the write survives the unit attention");
    assert_eq!(
        (p[0].count().writes, p[0].count().checks),
        (2, 1),
        "sent again once"
    );
    p[0].arm_unit_attention();
    let mut buf = vec![0u8; BLOCK];
    d.read(Lba(4), &mut buf).expect("read");
    assert_eq!(buf, data);
    assert_eq!((p[0].count().reads, p[0].count().checks), (2, 2));
    assert_eq!(d.snapshot().errors, 0);
    assert_eq!(state(&d, 0), PathState::Active);
}

#[test]
fn no_path_queues_then_fails_after_no_path_retry() {
    let lu = SimLu::new(64);
    let p = vec![SimPath::new(&lu, 1, 1), SimPath::new(&lu, 2, 2)];
    let mut cfg = config(Policy::RoundRobin);
    cfg.no_path_retry = Duration::from_millis(300);
    let d = disk(&lu, &p, 0, cfg);
    p.iter().for_each(|p| p.set_down());
    d.tick(Instant::now());
    let rx = spawn_read(&d, 1);
    assert!(tick_until(&d, LIMIT, || d.snapshot().queued == 1), "queued");
    let _sup = Supervisor::start(&d);
    let (r, took) = rx.recv_timeout(LIMIT).expect("bounded");
    assert!(matches!(r, Err(DeviceError::Io(_))), "{r:?}");
    assert!(
        took >= Duration::from_millis(300),
        "waited no_path_retry: {took:?}"
    );
    assert!(
        took < Duration::from_millis(1000),
        "and not much longer: {took:?}"
    );
    assert_eq!(d.snapshot().queued, 0);
    assert_eq!(p[0].count().io() + p[1].count().io(), 0, "never sent");

    // A path back within no_path_retry: the queued I/O completes.
    let rx = spawn_read(&d, 2);
    assert!(wait_until(LIMIT, || d.snapshot().queued == 1));
    std::thread::sleep(Duration::from_millis(50));
    p[1].set_up();
    let (r, took) = rx.recv_timeout(LIMIT).expect("bounded");
    r.expect("completed on the returned path");
    assert!(took < Duration::from_millis(300), "{took:?}");
    assert_eq!(p[1].count().reads, 1);
}

#[test]
fn last_path_removed_fails_at_once() {
    let (_lu, p, d) = two_paths(Policy::RoundRobin);
    // A queued I/O learns at once.
    p.iter().for_each(|p| p.set_down());
    d.tick(Instant::now());
    let rx = spawn_read(&d, 1);
    assert!(wait_until(LIMIT, || d.snapshot().queued == 1));
    assert_eq!(d.remove_path(0), 1);
    assert_eq!(d.remove_path(1), 0);
    let (r, took) = rx.recv_timeout(LIMIT).expect("bounded");
    assert!(matches!(r, Err(DeviceError::Gone)), "{r:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    // A new I/O too.
    let start = Instant::now();
    let mut buf = vec![0u8; BLOCK];
    assert!(matches!(d.read(Lba(0), &mut buf), Err(DeviceError::Gone)));
    assert!(matches!(d.flush(), Err(DeviceError::Gone)));
    assert!(start.elapsed() < Duration::from_millis(100));
}

fn failback(on: bool) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let lu = SimLu::new(64);
    let p = vec![SimPath::new(&lu, 1, 1), SimPath::new(&lu, 2, 2)];
    let mut cfg = config(Policy::FailoverOnly);
    cfg.failback = on;
    let d = disk(&lu, &p, 1, cfg); // path 0 preferred
    let first = reads(&d, &p, 10);
    p[0].set_down();
    d.tick(Instant::now());
    let failed_over = reads(&d, &p, 10);
    p[0].set_up();
    assert!(tick_until(&d, LIMIT, || state(&d, 0) == PathState::Active));
    (first, failed_over, reads(&d, &p, 10))
}

#[test]
fn failover_only_fails_back_to_the_preferred_path_when_asked() {
    assert_eq!(failback(true), (vec![10, 0], vec![0, 10], vec![10, 0]));
    assert_eq!(
        failback(false),
        (vec![10, 0], vec![0, 10], vec![0, 10]),
        "it stays"
    );
}

#[test]
fn a_flapping_path_is_damped_and_carries_nothing_during_its_hold() {
    let lu = SimLu::new(64);
    let p = vec![SimPath::new(&lu, 1, 1), SimPath::new(&lu, 2, 2)];
    let mut cfg = config(Policy::RoundRobin);
    cfg.damping = Damping {
        max_failures: 3,
        window: Duration::from_secs(30),
        hold: Duration::from_millis(500),
        max_hold: Duration::from_secs(2),
    };
    let d = disk(&lu, &p, 0, cfg);
    for flap in 1..=3 {
        p[0].set_down();
        d.tick(Instant::now());
        let want = if flap < 3 {
            PathState::Failed
        } else {
            PathState::Damped
        };
        assert_eq!(state(&d, 0), want, "flap {flap}");
        p[0].set_up();
        d.tick(Instant::now());
        if flap < 3 {
            assert_eq!(state(&d, 0), PathState::Active, "flap {flap}: verified");
        }
    }
    let damped_at = Instant::now();
    let snap = d.snapshot();
    assert_eq!(snap.paths[0].state.as_str(), "damped");
    assert!(!snap.paths[0].active);
    assert_eq!(snap.paths[0].failures, 3);
    // During the hold: up, ticked, but no I/O and no verify.
    let tur = p[0].count().tur;
    while damped_at.elapsed() < Duration::from_millis(300) {
        d.tick(Instant::now());
        assert_eq!(reads(&d, &p, 4), vec![0, 4]);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(state(&d, 0), PathState::Damped);
    assert_eq!(p[0].count().tur, tur, "not verified while held");
    // After it: verified and back.
    assert!(tick_until(&d, LIMIT, || state(&d, 0) == PathState::Active));
    assert!(damped_at.elapsed() >= Duration::from_millis(500));
    assert_eq!(reads(&d, &p, 10), vec![5, 5]);
}

#[test]
fn alua_standby_carries_nothing_and_non_optimized_only_as_last_resort() {
    let lu = SimLu::new(64);
    lu.set_group(1, AluaState::ActiveOptimized, &[1]);
    lu.set_group(2, AluaState::Standby, &[2]);
    lu.set_group(3, AluaState::ActiveNonOptimized, &[3]);
    let p = vec![
        SimPath::new(&lu, 1, 1),
        SimPath::new(&lu, 2, 2),
        SimPath::new(&lu, 3, 3),
    ];
    let mut cfg = config(Policy::RoundRobin);
    cfg.verify_period = Duration::from_millis(20);
    let d = disk(&lu, &p, 0, cfg);
    let alua: Vec<_> = d.snapshot().paths.iter().map(|p| p.alua).collect();
    assert_eq!(
        alua,
        vec![
            Some(AluaState::ActiveOptimized),
            Some(AluaState::Standby),
            Some(AluaState::ActiveNonOptimized)
        ]
    );
    assert_eq!(
        reads(&d, &p, 30),
        vec![30, 0, 0],
        "optimized only; standby never"
    );
    assert!(
        p[1].count().tur > 0 && p[1].count().rtpg > 0,
        "standby still verified"
    );

    // Group 2 becomes active/optimized; the next verify reads it.
    lu.set_group(2, AluaState::ActiveOptimized, &[2]);
    std::thread::sleep(Duration::from_millis(25));
    d.tick(Instant::now());
    assert_eq!(d.snapshot().paths[1].alua, Some(AluaState::ActiveOptimized));
    assert_eq!(reads(&d, &p, 30), vec![15, 15, 0]);

    // No optimized path left: the non-optimized one carries the I/O.
    p[0].set_down();
    p[1].set_down();
    d.tick(Instant::now());
    assert_eq!(reads(&d, &p, 10), vec![0, 0, 10]);
    assert_eq!(
        p[1].count().checks + p[0].count().checks,
        0,
        "no READ met a standby port"
    );
}

#[test]
fn a_port_turning_standby_behind_the_disks_back_fails_over() {
    // Implicit ALUA: the target moves the optimized group to another port between two
    // verifies; the READ on the old port answers 02/04/0B (port in standby).
    let lu = SimLu::new(64);
    lu.set_group(1, AluaState::ActiveOptimized, &[1]);
    lu.set_group(2, AluaState::Standby, &[2]);
    let p = vec![SimPath::new(&lu, 1, 1), SimPath::new(&lu, 2, 2)];
    let mut cfg = config(Policy::RoundRobin);
    cfg.verify_period = Duration::from_millis(20);
    let d = disk(&lu, &p, 0, cfg);
    assert_eq!(reads(&d, &p, 4), vec![4, 0]);
    lu.set_group(1, AluaState::Standby, &[1]);
    lu.set_group(2, AluaState::ActiveOptimized, &[2]);
    let _sup = Supervisor::start(&d);
    let mut buf = vec![0u8; BLOCK];
    d.read(Lba(0), &mut buf)
        .expect("not the caller's error: another port serves the LU");
    assert_eq!(p[0].count().checks, 1);
    assert_eq!(p[1].count().reads, 1);
    assert!(wait_until(LIMIT, || d.snapshot().paths[0].alua
        == Some(AluaState::Standby)));
}

#[test]
fn admin_down_stops_io_and_admin_up_returns_after_verify() {
    let (_lu, p, d) = two_paths(Policy::RoundRobin);
    assert_eq!(reads(&d, &p, 10), vec![5, 5]);
    assert!(d.set_admin(0, false, Instant::now()));
    assert_eq!(state(&d, 0), PathState::AdminDown);
    d.tick(Instant::now());
    assert_eq!(reads(&d, &p, 10), vec![0, 10]);
    let tur = p[0].count().tur;
    assert!(d.set_admin(0, true, Instant::now()));
    assert_eq!(
        state(&d, 0),
        PathState::Failed,
        "back only through a verify"
    );
    assert_eq!(reads(&d, &p, 4), vec![0, 4]);
    d.tick(Instant::now());
    assert_eq!(state(&d, 0), PathState::Active);
    assert_eq!(p[0].count().tur, tur + 1);
    assert_eq!(reads(&d, &p, 10), vec![5, 5]);
    assert!(!d.set_admin(9, false, Instant::now()), "no such path");
}
