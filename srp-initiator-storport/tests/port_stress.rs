//! Five seconds of random I/O from many submitter threads against the RAM-disk miniport,
//! with data verification and the verifier on: no violation, no verifier trip, no
//! overlapping StartIo, and every byte read back is the byte last written.

mod common;

use access_layer::verbs::verifier;
use common::*;
use srp_initiator_storport::port::{DataDirection, SrbRequest, SrbStatus};
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant, SystemTime};

const THREADS: u64 = 8;
const SLOTS: u64 = 8;
const SLOT_BLOCKS: u64 = 16;
const RUN: Duration = Duration::from_secs(5);

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// READ(16)/WRITE(16) of `blocks` at `lba`.
fn rw16(lun: u8, write: bool, lba: u64, blocks: u32, data: Vec<u8>) -> SrbRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = if write { 0x8a } else { 0x88 };
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    let dir = if write {
        DataDirection::Out
    } else {
        DataDirection::In
    };
    SrbRequest::scsi(lu(lun), &cdb, dir, data)
}

/// One thread's work: batches of requests on distinct slots of its own region (so the
/// expected content is known whatever order they complete in). Returns requests done.
fn worker(port: &srp_initiator_storport::port::Port<RamMiniport>, t: u64, seed: u64) -> u64 {
    let mut rng = Rng(seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let base = t * SLOTS * SLOT_BLOCKS;
    // shadow[lun][block] = the byte pattern seed of that block.
    let mut shadow = vec![vec![0u8; (SLOTS * SLOT_BLOCKS) as usize]; 2];
    let end = Instant::now() + RUN;
    let mut done = 0;
    while Instant::now() < end {
        let lun = rng.below(2) as u8;
        let mut slots: Vec<u64> = (0..SLOTS).collect();
        let n = 1 + rng.below(SLOTS) as usize;
        let mut batch = Vec::new();
        for _ in 0..n {
            let slot = slots.swap_remove(rng.below(slots.len() as u64) as usize);
            let blocks = 1 + rng.below(SLOT_BLOCKS) as u32;
            let first = slot * SLOT_BLOCKS;
            let write = rng.below(2) == 0;
            let data = if write {
                let tag = rng.next() as u8 | 1;
                let mut d = Vec::with_capacity(blocks as usize * 512);
                for b in 0..u64::from(blocks) {
                    shadow[usize::from(lun)][(first + b) as usize] = tag;
                    d.extend((0..512).map(|i| tag.wrapping_add(i as u8)));
                }
                d
            } else {
                vec![0; blocks as usize * 512]
            };
            let req = rw16(lun, write, base + first, blocks, data);
            batch.push((port.submit(req).expect("accepted"), write, first, blocks));
        }
        for (c, write, first, blocks) in batch {
            let r = wait(&c);
            assert_eq!(r.status, SrbStatus::SUCCESS, "seed {seed:#x}");
            if !write {
                for b in 0..u64::from(blocks) {
                    let tag = shadow[usize::from(lun)][(first + b) as usize];
                    let got = &r.data.to_vec()[(b * 512) as usize..(b as usize + 1) * 512];
                    let ok = got.iter().enumerate().all(|(i, &x)| {
                        x == if tag == 0 {
                            0
                        } else {
                            tag.wrapping_add(i as u8)
                        }
                    });
                    assert!(
                        ok,
                        "seed {seed:#x}: thread {t} LU {lun} block {} mismatch",
                        first + b
                    );
                }
            }
            done += 1;
        }
    }
    done
}

#[test]
fn five_seconds_of_random_verified_io_never_trips_the_verifier() {
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    eprintln!("seed {seed:#x}");
    let (port, probe) = start(RamConfig {
        luns: 2,
        blocks: THREADS * SLOTS * SLOT_BLOCKS,
        async_every: 3,
        ..RamConfig::default()
    });
    let trips_before = verifier::trips();
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let port = &port;
                s.spawn(move || worker(port, t, seed))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("worker")).sum()
    });
    eprintln!(
        "{total} requests, {} from the DPC, BuildIo concurrency up to {}",
        probe.dpc_completions.load(SeqCst),
        probe.build_max.load(SeqCst)
    );
    assert!(total > 1000, "only {total} requests in {RUN:?}");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert!(!port.is_bugchecked());
    assert_eq!(
        verifier::trips(),
        trips_before,
        "no blocking call at dispatch"
    );
    assert_eq!(probe.start_overlaps.load(SeqCst), 0);
    assert_eq!(probe.not_at_dispatch.load(SeqCst), 0);
    // Whether BuildIo calls overlapped here is up to the scheduler (on 2 loaded vCPUs a
    // run can see none: CI did, 2026-11-26); that they may is proved with a rendezvous by
    // `port_ram.rs` `build_io_runs_concurrently_and_start_io_never_overlaps`.
    assert!(probe.dpc_completions.load(SeqCst) > 0);
    assert_eq!(port.outstanding(), 0);
}
