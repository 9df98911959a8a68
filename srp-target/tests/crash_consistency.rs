//! Crash consistency of the logical unit over a real file (issue #14, Deliver 1): a seeded
//! workload of every command the target's table says writes (WRITE, WRITE AND VERIFY,
//! ORWRITE, COMPARE AND WRITE, WRITE ATOMIC, WRITE SAME, UNMAP, EXTENDED COPY, WRITE USING
//! TOKEN: `common/writers.rs`, issue #29), with and without FUA, and SYNCHRONIZE CACHE, on
//! LUs with the write cache on and off, from several threads; the file backend records
//! every write, flush and discard that reaches the file (`writelog`), and the checker
//! replays that log to every flush point and to thousands of seeded crash points.
//!
//! The mutation tests are the point: the same run with the `fdatasync` call taken away
//! beneath the backend (what deleting `sync_data` from backend/file.rs does: the medium
//! never sees it), or with the logical unit's flushes dropped (what deleting the
//! `durably` flushes in exec/durability.rs does), must fail the check.

mod common;

use common::writers::{self, DurableWhen, Place};
use common::*;
use hca::mem::FileIoError;
use nix::errno::Errno;
use scsi::{BlockCount, Lba};
use srp_target::backend::MemSpan;
use srp_target::backend::medium::Medium;
use srp_target::writelog::{self, Ack, CheckReport, CrashPoints, WriteLog};
use srp_target::{Backend, BackendError, BlockSize, FileBackend, LogicalUnit, LuConfig};
use std::collections::BTreeSet;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

const BLOCKS: u64 = 1024;
const BS: usize = 512;
const THREADS: u64 = 4;
const OPS_PER_THREAD: usize = 150;

/// Beneath the backend, above the recorder: passes everything down but `fdatasync`.
#[derive(Debug)]
struct SyncRemoved(Box<dyn Medium>);

impl Medium for SyncRemoved {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn read_into(&self, dst: MemSpan<'_>, offset: u64) -> Result<(), FileIoError> {
        self.0.read_into(dst, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn write_from(&self, src: MemSpan<'_>, offset: u64) -> Result<(), FileIoError> {
        self.0.write_from(src, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(()) // the mutation: the call is gone
    }
    fn punch_hole(&self, offset: u64, len: u64) -> Result<(), Errno> {
        self.0.punch_hole(offset, len)
    }
}

/// Above the backend: the logical unit's flushes never reach it.
#[derive(Debug)]
struct FlushesDropped(FileBackend);

impl Backend for FlushesDropped {
    fn block_size(&self) -> BlockSize {
        self.0.block_size()
    }
    fn blocks(&self) -> u64 {
        self.0.blocks()
    }
    fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        self.0.read_at(lba, buf)
    }
    fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), BackendError> {
        self.0.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), BackendError> {
        Ok(()) // the mutation
    }
    fn unmap(&self, lba: Lba, blocks: BlockCount) -> Result<(), BackendError> {
        self.0.unmap(lba, blocks)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutation {
    None,
    SyncRemoved,
    FlushesDropped,
}

/// A recording LU over `dir/name`; the log is `dir/name.wlog`.
fn recorded_lu(dir: &Path, name: &str, write_cache: bool, mutation: Mutation) -> LogicalUnit {
    let file = dir.join(name);
    let backend = FileBackend::create(&file, BLOCKS * BS as u64, BlockSize::B512)
        .expect("create")
        .record_writes(&dir.join(format!("{name}.wlog")))
        .expect("record");
    let backend: Box<dyn Backend> = match mutation {
        Mutation::None => Box::new(backend),
        Mutation::SyncRemoved => Box::new(backend.interpose(|m| Box::new(SyncRemoved(m)))),
        Mutation::FlushesDropped => Box::new(FlushesDropped(backend)),
    };
    let cfg = LuConfig {
        write_cache,
        ..LuConfig::new(identity(name))
    };
    LogicalUnit::new(backend, cfg)
}

/// Blocks no other write ever had: the write's id and LBA in each block, then noise.
fn stamped(id: u64, lba: u64, blocks: u64, rng: &mut Rng) -> Vec<u8> {
    let mut d = vec![0u8; blocks as usize * BS];
    for (i, b) in d.chunks_mut(BS).enumerate() {
        b[..8].copy_from_slice(&id.to_le_bytes());
        b[8..16].copy_from_slice(&(lba + i as u64).to_le_bytes());
        for w in b[16..].chunks_mut(8) {
            let r = rng.next().to_le_bytes();
            w.copy_from_slice(&r[..w.len()]);
        }
    }
    d
}

/// Writes acknowledged but not yet durable (write cache on, no FUA), any thread's.
#[derive(Default)]
struct Pending(Vec<(u64, Vec<u8>, u64)>); // (byte offset, data, acknowledged at)

/// One thread's share of the workload: its own region of `BLOCKS / THREADS` blocks, and
/// every command of the target's table that writes (`common/writers.rs`), with and
/// without FUA, between SYNCHRONIZE CACHEs. `shadow` is the region as reads see it.
fn worker(
    lu: &LogicalUnit,
    write_cache: bool,
    thread: u64,
    seed: u64,
    pending: &Mutex<Pending>,
    acks: &Mutex<Vec<Ack>>,
) -> BTreeSet<writers::Key> {
    let mut used = BTreeSet::new();
    let mut rng = Rng(seed ^ (thread << 32));
    let region = BLOCKS / THREADS;
    let base = thread * region;
    let mut shadow = vec![0u8; region as usize * BS];
    let mix = writers::writing_commands();
    let nd = nexus_data_of(srp::wire::PortId([0x40 + thread as u8; 16]), 0);
    for op in 0..OPS_PER_THREAD {
        let id = (thread << 32) | op as u64;
        let now = writelog::monotonic_ns;
        if rng.below(20) < 3 {
            // SYNCHRONIZE CACHE(10): every write acknowledged before it is durable.
            let issued = now();
            good(lu, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
            let done = now();
            let mut p = pending.lock().expect("lock");
            let (covered, rest): (Vec<_>, Vec<_>) =
                p.0.drain(..).partition(|&(_, _, t)| t < issued);
            p.0 = rest;
            acks.lock()
                .expect("lock")
                .extend(covered.into_iter().map(|(offset, data, _)| Ack {
                    offset,
                    data,
                    durable_ns: done,
                }));
            continue;
        }
        let key = mix[rng.below(mix.len() as u64) as usize];
        let w = writers::writer(key)
            .unwrap_or_else(|| panic!("{key:02x?} writes, and the workload cannot build it"));
        let n = 1 + rng.below(8.min(w.max_blocks));
        let at = rng.below(region - n + 1);
        let src = rng.below(region - n + 1);
        let span = |lba: u64| (lba * BS as u64) as usize..((lba + n) * BS as u64) as usize;
        let fua = w.durable == DurableWhen::Fua && rng.below(2) == 0;
        let data = stamped(id, base + at, n, &mut rng);
        let o = writers::build(
            key,
            &Place {
                at: base + at,
                n,
                old: &shadow[span(at)],
                data: &data,
                src_lba: base + src,
                src: &shadow[span(src)],
                naa: lu.identity().naa(),
                fua,
                list_id: op as u32,
            },
        )
        .expect("a builder");
        // BUSY: a copy did not run (COPIES_PER_LU copies of this LU were running); again.
        let out = loop {
            let mut din = Vec::new();
            let out = lu
                .execute(&nd.nexus(), &o.cdb, &o.dout, &mut din)
                .expect("no transport error");
            if out.status != scsi::Status::Busy {
                break out;
            }
            std::thread::yield_now();
        };
        assert_eq!(
            out.status,
            scsi::Status::Good,
            "{}: {:?}",
            w.name,
            out.sense
        );
        let t = now();
        used.insert(key);
        shadow[span(at)].copy_from_slice(&o.after);
        let offset = (base + at) * BS as u64;
        if w.durable.durable(fua, write_cache) {
            acks.lock().expect("lock").push(Ack {
                offset,
                data: o.after,
                durable_ns: t,
            });
        } else {
            pending.lock().expect("lock").0.push((offset, o.after, t));
        }
    }
    used
}

/// Runs the workload on a fresh recording LU; returns the log, what was acknowledged as
/// durable, and the file's final contents.
fn run_workload(
    dir: &TempDir,
    write_cache: bool,
    seed: u64,
    mutation: Mutation,
) -> (WriteLog, Vec<Ack>, Vec<u8>) {
    let name = format!("lu-{write_cache}-{seed}-{mutation:?}");
    let lu = Arc::new(recorded_lu(dir.path(), &name, write_cache, mutation));
    let pending = Arc::new(Mutex::new(Pending::default()));
    let acks = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lu, pending, acks) = (lu.clone(), pending.clone(), acks.clone());
            std::thread::spawn(move || worker(&lu, write_cache, t, seed, &pending, &acks))
        })
        .collect();
    let mut used = BTreeSet::new();
    for t in threads {
        used.extend(t.join().expect("worker"));
    }
    let mix: BTreeSet<_> = writers::writing_commands().into_iter().collect();
    assert_eq!(
        used, mix,
        "the workload ran every writing command of the table"
    );
    let log = WriteLog::read(&dir.path().join(format!("{name}.wlog"))).expect("read log");
    let file = std::fs::read(dir.path().join(&name)).expect("read file");
    let acks = std::mem::take(&mut *acks.lock().expect("lock"));
    (log, acks, file)
}

const POINTS: usize = 3000;

fn checked(log: &WriteLog, acks: &[Ack], seed: u64) -> CheckReport {
    writelog::check(
        log,
        acks,
        CrashPoints {
            seed,
            random: POINTS,
        },
    )
    .expect("check")
}

#[test]
fn every_acknowledged_durable_write_survives_every_crash_point() {
    let dir = TempDir::new("crash");
    for (write_cache, seed) in [(true, 1), (true, 2), (false, 3), (false, 4)] {
        let (log, acks, file) = run_workload(&dir, write_cache, seed, Mutation::None);
        assert_eq!(log.torn_tail(), 0);
        // The log is the whole truth about the file: replayed, it gives the file.
        let mut image = vec![0u8; file.len()];
        log.replay(&mut image, log.len());
        assert!(image == file, "the log does not replay to the file");
        assert!(acks.len() > 100, "{} acknowledgements", acks.len());
        let r = checked(&log, &acks, seed);
        assert!(
            r.clean(),
            "write cache {write_cache}, seed {seed}: {} violations, first: {}",
            r.violation_count,
            r.violations[0]
        );
        assert_eq!(r.random_points, POINTS);
        assert!(r.flush_points > 50, "{} flush points", r.flush_points);
        assert!(r.block_checks > 100_000, "{} block checks", r.block_checks);
        eprintln!(
            "write cache {write_cache}, seed {seed}: {} records, {} acknowledgements, {} flush points + {} random, {} block checks: clean",
            log.len(),
            r.acks,
            r.flush_points,
            r.random_points,
            r.block_checks
        );
    }
}

#[test]
fn the_checker_fails_when_fdatasync_is_removed_beneath_the_backend() {
    let dir = TempDir::new("crash-nosync");
    for write_cache in [true, false] {
        let (log, acks, _) = run_workload(&dir, write_cache, 11, Mutation::SyncRemoved);
        assert!(
            !log.entries()
                .iter()
                .any(|e| matches!(e.kind, writelog::log::EntryKind::Sync { .. })),
            "no flush reached the medium"
        );
        let r = checked(&log, &acks, 11);
        assert!(
            !r.clean(),
            "write cache {write_cache}: the check passed without fdatasync"
        );
        eprintln!(
            "sync removed, write cache {write_cache}: {} violations, e.g. {}",
            r.violation_count, r.violations[0]
        );
    }
}

#[test]
fn the_checker_fails_when_the_logical_unit_drops_its_flushes() {
    let dir = TempDir::new("crash-noflush");
    for write_cache in [true, false] {
        let (log, acks, _) = run_workload(&dir, write_cache, 12, Mutation::FlushesDropped);
        let r = checked(&log, &acks, 12);
        assert!(
            !r.clean(),
            "write cache {write_cache}: the check passed with the LU's flushes dropped"
        );
    }
}

#[test]
fn a_log_continues_across_a_restart_and_refuses_another_medium() {
    let dir = TempDir::new("crash-restart");
    let file = dir.path().join("lu");
    let log_path = dir.path().join("lu.wlog");
    let open = || {
        FileBackend::create(&file, BLOCKS * BS as u64, BlockSize::B512)
            .expect("create")
            .record_writes(&log_path)
            .expect("record")
    };
    let b = open();
    b.write_at(Lba(3), &[7u8; BS]).expect("write");
    b.flush().expect("flush");
    drop(b);
    // A record torn by a crash of the previous run is dropped on restart.
    let mut bytes = std::fs::read(&log_path).expect("log");
    bytes.extend([1u8; 20]);
    std::fs::write(&log_path, &bytes).expect("tear");
    assert_eq!(WriteLog::read(&log_path).expect("read").torn_tail(), 20);
    let b = open();
    b.write_at(Lba(4), &[8u8; BS]).expect("write");
    drop(b);
    let log = WriteLog::read(&log_path).expect("read");
    assert_eq!((log.len(), log.torn_tail()), (3, 0));
    // Another geometry is refused, naming the log.
    let other = FileBackend::create(dir.path().join("other"), 2 * BS as u64, BlockSize::B512)
        .expect("create");
    let err = other.record_writes(&log_path).expect_err("another medium");
    assert!(err.to_string().contains("another medium"), "{err}");
}
