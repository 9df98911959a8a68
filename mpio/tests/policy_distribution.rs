//! Issue #7's acceptance: the distribution of I/O across paths matches each policy under a
//! deterministic workload — through [`MultipathDisk`], over simulated paths ([`sim`]).
//! Load-dependent policies get a controlled in-flight state: READs held in chosen paths
//! (steered there by taking the other paths out of service while they are issued), or a
//! per-path latency for service time.

mod sim;

use mpio::{MultipathDisk, Policy};
use scsi::Lba;
use sim::{BLOCK, Rng, SimLu, SimPath, config, disk, disk_weighted};
use srp_host::{BlockDevice, DeviceError};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(3);

fn paths(lu: &Arc<SimLu>, n: u16) -> Vec<Arc<SimPath>> {
    (1..=n).map(|i| SimPath::new(lu, i, i)).collect()
}

fn io(p: &[Arc<SimPath>]) -> Vec<u64> {
    p.iter().map(|p| p.count().io()).collect()
}

fn delta(after: Vec<u64>, before: &[u64]) -> Vec<u64> {
    after.iter().zip(before).map(|(a, b)| a - b).collect()
}

/// `n` reads and writes of 1 to 8 blocks at seeded places; the READs and WRITEs each path
/// received meanwhile.
fn workload(d: &MultipathDisk, p: &[Arc<SimPath>], n: u64, seed: u64) -> Vec<u64> {
    let before = io(p);
    let mut rng = Rng::new(seed);
    let mut buf = vec![0u8; 8 * BLOCK];
    for _ in 0..n {
        let blocks = 1 + rng.below(8) as usize;
        let lba = Lba(rng.below(d.capacity_blocks() - 8));
        let data = &mut buf[..blocks * BLOCK];
        if rng.below(2) == 0 {
            d.read(lba, data).expect("read");
        } else {
            data.fill(rng.next_u64() as u8);
            d.write(lba, data, false).expect("write");
        }
    }
    delta(io(p), &before)
}

/// A read of `blocks` blocks on its own thread.
fn spawn_read(d: &Arc<MultipathDisk>, blocks: usize) -> Receiver<Result<(), DeviceError>> {
    let (tx, rx) = channel();
    let d = d.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; blocks * BLOCK];
        let _ = tx.send(d.read(Lba(0), &mut buf));
    });
    rx
}

/// Issues a read of `blocks` that `path` holds, and waits until it is held there.
fn hold_read(
    d: &Arc<MultipathDisk>,
    path: &SimPath,
    blocks: usize,
) -> Receiver<Result<(), DeviceError>> {
    let n = path.waiting();
    let rx = spawn_read(d, blocks);
    assert!(
        path.wait_waiting(n + 1, LIMIT),
        "the read is held in its path"
    );
    rx
}

/// Only the paths in `up` may carry I/O (admin states; returned paths verified).
fn only(d: &Arc<MultipathDisk>, n: u32, up: &[u32]) {
    for k in 0..n {
        d.set_admin(k, up.contains(&k), Instant::now());
    }
    d.tick(Instant::now());
    let active: Vec<u32> = d
        .snapshot()
        .paths
        .iter()
        .filter(|p| p.active)
        .map(|p| p.key)
        .collect();
    assert_eq!(active, up);
}

fn finish(p: &[Arc<SimPath>], held: Vec<Receiver<Result<(), DeviceError>>>) {
    p.iter().for_each(|p| p.release());
    for rx in held {
        rx.recv_timeout(LIMIT)
            .expect("bounded")
            .expect("the held read completed");
    }
}

#[test]
fn failover_only_puts_everything_on_one_path() {
    let lu = SimLu::new(1024);
    let p = paths(&lu, 4);
    let d = disk(&lu, &p, 0, config(Policy::FailoverOnly));
    assert_eq!(
        workload(&d, &p, 400, 1),
        vec![400, 0, 0, 0],
        "no preference: the first"
    );
    let lu = SimLu::new(1024);
    let p = paths(&lu, 4);
    let d = disk_weighted(&lu, &p, 0, &[1; 4], config(Policy::FailoverOnly));
    d.add_path(p[2].spec(2, true, 1)); // path 2 preferred
    assert_eq!(
        workload(&d, &p, 400, 2),
        vec![0, 0, 400, 0],
        "the preferred path"
    );
}

#[test]
fn round_robin_splits_equally() {
    let lu = SimLu::new(1024);
    let p = paths(&lu, 4);
    let d = disk(&lu, &p, 0, config(Policy::RoundRobin));
    assert_eq!(workload(&d, &p, 400, 3), vec![100; 4]);
    assert_eq!(
        workload(&d, &p, 402, 4),
        vec![101, 101, 100, 100],
        "in turn"
    );
}

#[test]
fn round_robin_subset_uses_only_preferred_paths() {
    let lu = SimLu::new(1024);
    let p = paths(&lu, 4);
    let d = disk(&lu, &p, 2, config(Policy::RoundRobinSubset));
    assert_eq!(workload(&d, &p, 400, 5), vec![200, 200, 0, 0]);
    only(&d, 4, &[2, 3]);
    assert_eq!(
        workload(&d, &p, 100, 6),
        vec![0, 0, 50, 50],
        "the others when none is left"
    );
}

#[test]
fn weighted_paths_send_everything_to_the_lowest_weight() {
    let lu = SimLu::new(1024);
    let p = paths(&lu, 4);
    let d = disk_weighted(&lu, &p, 0, &[3, 1, 2, 5], config(Policy::WeightedPaths));
    assert_eq!(workload(&d, &p, 400, 7), vec![0, 400, 0, 0]);
    only(&d, 4, &[0, 2, 3]);
    assert_eq!(
        workload(&d, &p, 100, 8),
        vec![0, 0, 100, 0],
        "then the next lowest"
    );
}

#[test]
fn least_queue_depth_follows_the_in_flight_counts() {
    let lu = SimLu::new(1024);
    let p = paths(&lu, 3);
    let d = disk(&lu, &p, 0, config(Policy::LeastQueueDepth));
    // Concurrent: each read held where it lands; ties go in turn, so 9 reads make 3 each.
    p.iter().for_each(|p| p.hold_next(3));
    let mut held = Vec::new();
    for i in 0..9 {
        held.push(hold_read(&d, &p[i % 3], 1));
    }
    let in_flight: Vec<u32> = d.snapshot().paths.iter().map(|p| p.in_flight).collect();
    assert_eq!(in_flight, vec![3, 3, 3]);
    finish(&p, held);
    // Paths 0 and 1 busy with one read each: all new I/O goes to the idle path 2.
    p[0].hold_next(1);
    p[1].hold_next(1);
    let held = vec![hold_read(&d, &p[0], 1), hold_read(&d, &p[1], 1)];
    assert_eq!(workload(&d, &p, 60, 9), vec![0, 0, 60]);
    finish(&p, held);
    assert_eq!(
        workload(&d, &p, 60, 10),
        vec![20, 20, 20],
        "idle paths: equal"
    );
}

#[test]
fn least_blocks_steers_small_io_away_from_large_io() {
    let lu = SimLu::new(1024);
    let p = paths(&lu, 3);
    let d = disk(&lu, &p, 0, config(Policy::LeastBlocks));
    // Path 0: one read of 64 blocks in flight; path 1: two reads of one block.
    p[0].hold_next(1);
    p[1].hold_next(2);
    only(&d, 3, &[0]);
    let mut held = vec![hold_read(&d, &p[0], 64)];
    only(&d, 3, &[1]);
    held.push(hold_read(&d, &p[1], 1));
    held.push(hold_read(&d, &p[1], 1));
    only(&d, 3, &[0, 1]);
    let flight: Vec<(u32, u32)> = d
        .snapshot()
        .paths
        .iter()
        .map(|p| (p.key, p.in_flight))
        .collect();
    assert_eq!(flight, vec![(0, 1), (1, 2), (2, 0)]);
    // Fewest blocks: path 1 (2 blocks, 2 I/Os) over path 0 (64 blocks, 1 I/O)...
    let one_block = |d: &MultipathDisk| {
        let before = io(&p);
        let mut buf = vec![0u8; BLOCK];
        for i in 0..40 {
            d.read(Lba(100 + i), &mut buf).expect("read");
        }
        delta(io(&p), &before)
    };
    assert_eq!(one_block(&d), vec![0, 40, 0]);
    // ... where fewest I/Os would pick path 0.
    d.set_policy(Policy::LeastQueueDepth);
    assert_eq!(one_block(&d), vec![40, 0, 0]);
    finish(&p, held);
    d.set_policy(Policy::LeastBlocks);
    only(&d, 3, &[0, 1, 2]);
    assert_eq!(one_block(&d).iter().sum::<u64>(), 40);
    let spread = one_block(&d);
    assert!(
        spread.iter().all(|&n| n.abs_diff(40 / 3) <= 1),
        "idle: in turn, {spread:?}"
    );
}

#[test]
fn service_time_prefers_the_fast_path_in_proportion() {
    // Single-threaded: once each path's service time is known, the fastest takes all.
    let lu = SimLu::new(1024);
    let p = paths(&lu, 3);
    p[1].set_latency(Duration::from_millis(3));
    p[2].set_latency(Duration::from_millis(6));
    let d = disk(&lu, &p, 0, config(Policy::ServiceTime));
    let mut buf = vec![0u8; BLOCK];
    for i in 0..60 {
        d.read(Lba(i), &mut buf).expect("read");
    }
    assert_eq!(
        io(&p),
        vec![58, 1, 1],
        "one each to learn the service times, then the fast path"
    );

    // Concurrent, 4 readers over a 1 ms and a 3 ms path: the slow path is picked only when
    // (in flight + 1) × 1 ms on the fast one exceeds (in flight + 1) × 3 ms on it, i.e.
    // with 3 reads on the fast path and none on the slow: about one read in ten.
    let lu = SimLu::new(1024);
    let p = paths(&lu, 2);
    p[0].set_latency(Duration::from_millis(1));
    p[1].set_latency(Duration::from_millis(3));
    let d = disk(&lu, &p, 0, config(Policy::ServiceTime));
    let readers: Vec<_> = (0..4)
        .map(|t| {
            let d = d.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; BLOCK];
                for i in 0..100 {
                    d.read(Lba(t * 100 + i), &mut buf).expect("read");
                }
            })
        })
        .collect();
    readers.into_iter().for_each(|r| r.join().expect("reader"));
    let [fast, slow] = [p[0].count().io(), p[1].count().io()];
    assert_eq!(fast + slow, 400);
    // Bound: the slow path carries at most a quarter of the fast one's share.
    assert!(slow * 4 <= fast, "slow path got {slow} of 400");
    assert!(slow >= 1, "but it is used under load");
}
