//! A verifying workload on a block file: one thread writes a slot (4 KiB, its number and
//! generation in the first 16 bytes), reads it back and compares, slot after slot, until
//! stopped; what it saw is counted, and at the end every slot must hold its last
//! generation.
#![allow(dead_code)]

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Slot `slot`'s content for generation `generation`.
pub(crate) fn block(slot: u64, generation: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    for (i, x) in b.iter_mut().enumerate() {
        *x = (slot as usize * 31 + i * 7 + generation as usize * 13) as u8;
    }
    b[..8].copy_from_slice(&slot.to_be_bytes());
    b[8..16].copy_from_slice(&generation.to_be_bytes());
    b
}

/// What the workload saw.
#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) ops: AtomicU64,
    pub(crate) errors: Mutex<Vec<String>>,
    pub(crate) mismatches: Mutex<Vec<String>>,
}

/// The running workload; dropping it stops the thread (a failing assertion included).
pub(crate) struct Workload {
    pub(crate) seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    generations: Arc<Mutex<Vec<u64>>>,
    slots: u64,
    worker: Option<JoinHandle<()>>,
}

impl Workload {
    /// Starts it on `file` over `slots` slots.
    pub(crate) fn start(file: &File, slots: u64) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let generations = Arc::new(Mutex::new(vec![0u64; slots as usize]));
        let worker = {
            let (f, s, n, g) = (
                file.try_clone().expect("dup"),
                stop.clone(),
                seen.clone(),
                generations.clone(),
            );
            std::thread::spawn(move || run(f, slots, s, n, g))
        };
        Workload {
            seen,
            stop,
            generations,
            slots,
            worker: Some(worker),
        }
    }

    /// Round trips completed so far.
    pub(crate) fn ops(&self) -> u64 {
        self.seen.ops.load(Ordering::Relaxed)
    }

    /// Asserts nothing failed and nothing mismatched so far.
    pub(crate) fn assert_clean(&self) {
        let errors = self.seen.errors.lock().expect("errors");
        assert!(errors.is_empty(), "the disk user saw errors: {errors:?}");
        let mismatches = self.seen.mismatches.lock().expect("mismatches");
        assert!(mismatches.is_empty(), "mismatches: {mismatches:?}");
    }

    /// Stops the thread, then reads every slot back through `file`: each holds its last
    /// generation.
    pub(crate) fn stop_and_check(mut self, file: &File) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(w) = self.worker.take() {
            w.join().expect("workload");
        }
        self.assert_clean();
        for slot in 0..self.slots {
            let mut back = vec![0u8; 4096];
            file.read_exact_at(&mut back, slot * 4096).expect("read");
            let g = self.generations.lock().expect("g")[slot as usize];
            assert!(
                back == block(slot, g),
                "slot {slot} does not hold generation {g}"
            );
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn run(
    file: File,
    slots: u64,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
    generations: Arc<Mutex<Vec<u64>>>,
) {
    let mut slot = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let generation = {
            let mut g = generations.lock().expect("generations");
            g[slot as usize] += 1;
            g[slot as usize]
        };
        let data = block(slot, generation);
        if let Err(e) = file.write_all_at(&data, slot * 4096) {
            seen.errors
                .lock()
                .expect("errors")
                .push(format!("write slot {slot}: {e}"));
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let mut back = vec![0u8; 4096];
        match file.read_exact_at(&mut back, slot * 4096) {
            Ok(()) if back == data => {}
            Ok(()) => seen
                .mismatches
                .lock()
                .expect("mismatches")
                .push(format!("slot {slot} generation {generation}")),
            Err(e) => seen
                .errors
                .lock()
                .expect("errors")
                .push(format!("read slot {slot}: {e}")),
        }
        seen.ops.fetch_add(1, Ordering::Relaxed);
        slot = (slot + 1) % slots;
    }
}

/// Polls `cond` every 20 ms until it holds; fails after `limit`.
pub(crate) fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
