//! The backend worker pool is fair between logical units: a stuck disk holds at most its
//! share of the workers and fills only its own queue (its next command is refused: BUSY),
//! while another LU's commands keep completing; when the disk comes back, everything it
//! queued runs.

mod common;

use common::{identity, nexus_data, read10};
use scsi::{Lba, Status};
use srp_target::backend::{Backend, BackendError, BlockSize, RamBackend};
use srp_target::io::{AbortFlag, Done, Executor, Job, NexusInfo, Reply, Workers};
use srp_target::{LogicalUnit, LuConfig};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The LU's handle on a shared [`GatedDisk`] (the test keeps the other).
#[derive(Debug)]
struct Gated(Arc<GatedDisk>);

/// A RAM disk whose reads wait until the gate opens; counts the reads waiting.
#[derive(Debug)]
struct GatedDisk {
    ram: RamBackend,
    gate: Mutex<(bool, usize)>,
    changed: Condvar,
}

impl GatedDisk {
    fn waiting(&self) -> usize {
        self.gate.lock().expect("gate").1
    }

    fn open(&self) {
        self.gate.lock().expect("gate").0 = true;
        self.changed.notify_all();
    }
}

/// Opens the gate when dropped, so a failing assertion never leaves a worker stuck (the
/// pool's drop joins its threads).
struct OpenOnDrop(Arc<GatedDisk>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

impl Backend for Gated {
    fn block_size(&self) -> BlockSize {
        self.0.ram.block_size()
    }
    fn blocks(&self) -> u64 {
        self.0.ram.blocks()
    }
    fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        let d = &self.0;
        let mut g = d.gate.lock().expect("gate");
        g.1 += 1;
        d.changed.notify_all();
        while !g.0 {
            g = d.changed.wait(g).expect("gate");
        }
        g.1 -= 1;
        drop(g);
        d.ram.read_at(lba, buf)
    }
    fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), BackendError> {
        self.0.ram.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), BackendError> {
        self.0.ram.flush()
    }
    fn unmap(&self, lba: Lba, blocks: scsi::BlockCount) -> Result<(), BackendError> {
        self.0.ram.unmap(lba, blocks)
    }
}

fn job(token: u64, lu: &Arc<LogicalUnit>, nexus: &Arc<NexusInfo>, reply: &Sender<Done>) -> Job {
    Job {
        token,
        lu: lu.clone(),
        nexus: nexus.clone(),
        cdb: read10(0, 1).as_slice().into(),
        data_out: Vec::new(),
        staging: None,
        data_in: Vec::new(),
        reply: Reply::new(reply.clone(), None),
        abort: AbortFlag::default(),
    }
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn good(rx: &Receiver<Done>, n: usize, within: Duration) -> Vec<u64> {
    let end = Instant::now() + within;
    (0..n)
        .map(|_| {
            let left = end.saturating_duration_since(Instant::now());
            let d = rx.recv_timeout(left).expect("a result in time");
            assert_eq!(d.result.expect("no transport error").status, Status::Good);
            d.token
        })
        .collect()
}

#[test]
fn a_stuck_disk_holds_only_its_share_and_other_luns_keep_running() {
    let disk = Arc::new(GatedDisk {
        ram: RamBackend::new(64, BlockSize::B512).expect("ram"),
        gate: Mutex::new((false, 0)),
        changed: Condvar::new(),
    });
    let slow = Arc::new(LogicalUnit::new(
        Box::new(Gated(disk.clone())),
        LuConfig::new(identity("slow")),
    ));
    let fast = Arc::new(LogicalUnit::new(
        Box::new(common::ByteRam::new(64, BlockSize::B512)),
        LuConfig::new(identity("fast")),
    ));
    let nexus = Arc::new(nexus_data(0));
    let pool = Workers::new(4, 8).expect("workers");
    // Declared after the pool, so dropped before it.
    let _unstick = OpenOnDrop(disk.clone());
    assert_eq!(pool.per_lu_limit(), 2);
    let (slow_tx, slow_rx) = channel();
    let (fast_tx, fast_rx) = channel();

    // Ten reads to the stuck disk: two run (and wait), eight queue; the eleventh is refused.
    for t in 0..2 {
        assert!(
            pool.submit(job(t, &slow, &nexus, &slow_tx)).is_ok(),
            "job {t}"
        );
    }
    wait_until("two reads reach the disk", || disk.waiting() == 2);
    for t in 2..10 {
        assert!(
            pool.submit(job(t, &slow, &nexus, &slow_tx)).is_ok(),
            "job {t}"
        );
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(disk.waiting(), 2, "one LU runs on at most half the workers");
    assert!(
        pool.submit(job(10, &slow, &nexus, &slow_tx)).is_err(),
        "its queue is full: BUSY"
    );

    // Meanwhile another LU's commands run on the other workers: three queues' worth, each
    // batch promptly.
    for batch in 0..3u64 {
        let tokens: Vec<u64> = (100 + batch * 8..108 + batch * 8).collect();
        for &t in &tokens {
            assert!(
                pool.submit(job(t, &fast, &nexus, &fast_tx)).is_ok(),
                "job {t}"
            );
        }
        let mut done = good(&fast_rx, 8, Duration::from_secs(5));
        done.sort_unstable();
        assert_eq!(done, tokens);
    }
    assert!(
        slow_rx.try_recv().is_err(),
        "the stuck disk answered nothing yet"
    );

    // The disk comes back: all ten complete.
    disk.open();
    let mut done = good(&slow_rx, 10, Duration::from_secs(5));
    done.sort_unstable();
    assert_eq!(done, (0..10).collect::<Vec<_>>());
    drop(pool);
}

#[test]
fn dropping_the_pool_finishes_queued_jobs() {
    let lu = Arc::new(LogicalUnit::new(
        Box::new(common::ByteRam::new(64, BlockSize::B512)),
        LuConfig::new(identity("drain")),
    ));
    let nexus = Arc::new(nexus_data(0));
    let (tx, rx) = channel();
    let pool = Workers::new(1, 64).expect("workers");
    for t in 0..50 {
        assert!(pool.submit(job(t, &lu, &nexus, &tx)).is_ok());
    }
    drop(pool);
    assert_eq!(
        rx.try_iter().count(),
        50,
        "every queued job ran before the threads ended"
    );
}

#[test]
fn a_memory_lu_runs_on_the_submitting_thread_not_a_worker() {
    let lu = Arc::new(LogicalUnit::new(
        Box::new(RamBackend::new(64, BlockSize::B512).expect("ram")),
        LuConfig::new(identity("ram")),
    ));
    let nexus = Arc::new(nexus_data(0));
    let (tx, rx) = channel();
    // One worker, a queue of one, and a stuck disk holding the worker: a job that needed
    // a worker could neither run nor queue beyond one.
    let disk = Arc::new(GatedDisk {
        ram: RamBackend::new(64, BlockSize::B512).expect("ram"),
        gate: Mutex::new((false, 0)),
        changed: Condvar::new(),
    });
    let stuck = Arc::new(LogicalUnit::new(
        Box::new(Gated(disk.clone())),
        LuConfig::new(identity("stuck")),
    ));
    let pool = Workers::new(1, 1).expect("workers");
    let _unstick = OpenOnDrop(disk.clone());
    let (stuck_tx, _stuck_rx) = channel();
    assert!(pool.submit(job(0, &stuck, &nexus, &stuck_tx)).is_ok());
    wait_until("the worker is stuck", || disk.waiting() == 1);
    for t in 1..=20 {
        assert!(pool.submit(job(t, &lu, &nexus, &tx)).is_ok(), "job {t}");
        // Answered before submit returned.
        let d = rx.try_recv().expect("already done");
        assert_eq!(d.token, t);
        assert_eq!(d.result.expect("no transport error").status, Status::Good);
    }
    assert!(
        !common::ByteRam::new(64, BlockSize::B512).never_blocks(),
        "a backend blocks unless it says otherwise"
    );
    // A copy is a worker's even on a memory LU (its other LU may be a slow disk): with the
    // only worker stuck, it waits in the queue instead of running at once.
    let mut copy = job(99, &lu, &nexus, &tx);
    copy.cdb = [0x83u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        .as_slice()
        .into();
    assert!(pool.submit(copy).is_ok());
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        rx.try_recv().is_err(),
        "the copy did not run on the submitting thread"
    );
    disk.open();
    let d = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the copy ran on the worker once it was free");
    assert_eq!(d.token, 99);
}
