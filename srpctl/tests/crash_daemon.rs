//! Crash consistency through the real daemons (issue #14, Deliver 1): the target process
//! (`srpctl target run`) records every write, flush and discard that reaches its LUN's file
//! (`record_writes`), the host daemon (`srpctl host run`: the StorPort-model initiator,
//! multipath and its FUSE block file) carries a workload of writes opened `O_DSYNC` (FUA),
//! plain writes and `fsync` (SYNCHRONIZE CACHE) from four threads, each noting when the
//! kernel returned; then the target is killed (`kill -9`) in the middle of a second burst.
//! The log, read back after the crash, must replay to the file as it was at the quiescent
//! point between the bursts, and thousands of seeded crash points must keep every write
//! the application saw made durable.
//!
//! Loopback 127.0.146.x; needs root and /dev/fuse (CI has them). Both daemons are stopped
//! and the temp dir removed even on failure; the test is bounded.

#[path = "../../srp-host/tests/common/mod.rs"]
mod block;
mod process;

use block::{TempDir, bounded};
use process::{HostProcess, TargetProcess};
use srp_target::writelog::{self, Ack, CrashPoints, WriteLog};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `O_DSYNC` (the same value on x86_64 and aarch64 Linux).
const O_DSYNC: i32 = 0o10000;
const BS: u64 = 512;
const DISK_BYTES: u64 = 16 << 20;
const THREADS: u64 = 4;
/// Blocks each thread owns (its region: no block is written by two threads).
const REGION: u64 = 2048;

fn target_config(dir: &Path) -> PathBuf {
    let cfg = dir.join("target.toml");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300e4e000\"\nname = \"crash\"\n\
         control_socket = \"{sock}\"\nstate_dir = \"{state}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.146.1\"\n\n\
         [[lun]]\nname = \"vol\"\nfile = \"{img}\"\nsize = \"16MiB\"\n\
         record_writes = \"{log}\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300e4e001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
        sock = dir.join("target.sock").display(),
        state = dir.join("state").display(),
        img = dir.join("vol.img").display(),
        log = dir.join("vol.wlog").display(),
    );
    std::fs::write(&cfg, text).expect("write target config");
    cfg
}

fn host_config(dir: &Path) -> (PathBuf, PathBuf) {
    let cfg = dir.join("host.toml");
    let disks = dir.join("disks");
    let text = format!(
        "[host]\nname = \"crash-host\"\nnode_guid = \"0x0002c90300e4e100\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nsweep_interval = \"1s\"\n\n\
         [timers]\nreconnect_delay = \"1s\"\nfast_io_fail = \"2s\"\ndev_loss = \"60s\"\n\n\
         [multipath]\nno_path_retry = \"0s\"\n\n\
         [[portal]]\naddress = \"127.0.146.1\"\nlocal = [\"127.0.146.2\"]\n",
        disks.display(),
        dir.join("host.sock").display()
    );
    std::fs::write(&cfg, text).expect("write host config");
    (cfg, disks)
}

/// The one block file in `disks`, waited for.
fn the_disk(disks: &Path) -> PathBuf {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let files: Vec<PathBuf> = std::fs::read_dir(disks)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        if let [one] = files.as_slice() {
            return one.clone();
        }
        assert!(
            Instant::now() < end,
            "no single disk in {}",
            disks.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// splitmix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Blocks no other write had: the write's id and LBA in each, then noise.
fn stamped(id: u64, lba: u64, blocks: u64, rng: &mut Rng) -> Vec<u8> {
    let mut d = vec![0u8; (blocks * BS) as usize];
    for (i, b) in d.chunks_mut(BS as usize).enumerate() {
        b[..8].copy_from_slice(&id.to_le_bytes());
        b[8..16].copy_from_slice(&(lba + i as u64).to_le_bytes());
        for w in b[16..].chunks_mut(8) {
            w.copy_from_slice(&rng.next().to_le_bytes()[..w.len()]);
        }
    }
    d
}

/// What the application saw: durable acknowledgements, and writes acknowledged but not
/// yet durable (any thread's; an fsync makes those acknowledged before it durable).
#[derive(Default)]
struct Seen {
    acks: Vec<Ack>,
    pending: Vec<(u64, Vec<u8>, u64)>,
}

/// One thread: `ops` operations on its region, or until an I/O fails or `stop` is set.
/// Returns how many completed.
fn worker(
    disk: &Path,
    thread: u64,
    burst: u64,
    ops: u64,
    stop: &AtomicBool,
    seen: &Mutex<Seen>,
) -> u64 {
    let plain = OpenOptions::new()
        .read(true)
        .write(true)
        .open(disk)
        .expect("open");
    let dsync: File = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(O_DSYNC)
        .open(disk)
        .expect("open O_DSYNC");
    let mut rng = Rng((burst << 40) ^ (thread << 32) ^ 0x5eed);
    let now = writelog::monotonic_ns;
    for op in 0..ops {
        if stop.load(Ordering::Relaxed) {
            return op;
        }
        let id = (burst << 48) | (thread << 32) | op;
        let n = 1 + rng.below(8);
        let lba = thread * REGION + rng.below(REGION - n + 1);
        let offset = lba * BS;
        let outcome = match rng.below(20) {
            0..=6 => {
                let data = stamped(id, lba, n, &mut rng);
                dsync.write_all_at(&data, offset).map(|()| {
                    let t = now();
                    seen.lock().expect("lock").acks.push(Ack {
                        offset,
                        data,
                        durable_ns: t,
                    });
                })
            }
            7..=15 => {
                let data = stamped(id, lba, n, &mut rng);
                plain.write_all_at(&data, offset).map(|()| {
                    let t = now();
                    seen.lock().expect("lock").pending.push((offset, data, t));
                })
            }
            _ => {
                let issued = now();
                plain.sync_all().map(|()| {
                    let done = now();
                    let mut s = seen.lock().expect("lock");
                    let (covered, rest): (Vec<_>, Vec<_>) =
                        s.pending.drain(..).partition(|&(_, _, t)| t < issued);
                    s.pending = rest;
                    s.acks
                        .extend(covered.into_iter().map(|(offset, data, _)| Ack {
                            offset,
                            data,
                            durable_ns: done,
                        }));
                })
            }
        };
        if outcome.is_err() {
            return op; // the target is gone: the rest is the crash's
        }
    }
    ops
}

fn burst(
    disk: &Path,
    n: u64,
    ops: u64,
    stop: &Arc<AtomicBool>,
    seen: &Arc<Mutex<Seen>>,
) -> Vec<std::thread::JoinHandle<u64>> {
    (0..THREADS)
        .map(|t| {
            let (disk, stop, seen) = (disk.to_path_buf(), stop.clone(), seen.clone());
            std::thread::spawn(move || worker(&disk, t, n, ops, &stop, &seen))
        })
        .collect()
}

#[test]
fn acknowledged_writes_survive_every_crash_point_through_the_real_daemons() {
    bounded(240, || {
        let dir = TempDir::new("crash-daemon");
        let (host_cfg, disks) = host_config(dir.path());
        let target = TargetProcess::start(&target_config(dir.path()));
        let host = HostProcess::start(&host_cfg, &disks);
        let disk = the_disk(&disks);
        assert_eq!(std::fs::metadata(&disk).expect("stat").len(), DISK_BYTES);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));

        // Burst 1, to its end: the log then replays to the file exactly.
        for t in burst(&disk, 1, 150, &stop, &seen) {
            assert_eq!(t.join().expect("worker"), 150, "burst 1 I/O failed");
        }
        let log_path = dir.path().join("vol.wlog");
        let quiet = WriteLog::read(&log_path).expect("read log");
        let mut image = vec![0u8; DISK_BYTES as usize];
        quiet.replay(&mut image, quiet.len());
        let file = std::fs::read(dir.path().join("vol.img")).expect("read image");
        assert!(image == file, "the log does not replay to the file");

        // Burst 2, with the target killed under it.
        let threads = burst(&disk, 2, 10_000, &stop, &seen);
        std::thread::sleep(Duration::from_millis(700));
        target.kill9();
        let done: u64 = threads.into_iter().map(|t| t.join().expect("worker")).sum();
        stop.store(true, Ordering::Relaxed);
        host.stop();

        let log = WriteLog::read(&log_path).expect("the log survives kill -9");
        let seen = std::mem::take(&mut *seen.lock().expect("lock"));
        let r = writelog::check(
            &log,
            &seen.acks,
            CrashPoints {
                seed: 146,
                random: 5000,
            },
        )
        .expect("check");
        eprintln!(
            "{} records ({} bytes torn at the end), {} durable acknowledgements ({} burst-2 ops before the crash), {} flush points + {} random, {} block checks, {} violations",
            log.len(),
            log.torn_tail(),
            r.acks,
            done,
            r.flush_points,
            r.random_points,
            r.block_checks,
            r.violation_count
        );
        assert!(
            r.clean(),
            "{} violations, first: {}",
            r.violation_count,
            r.violations[0]
        );
        assert!(done > 0, "the crash came before burst 2 wrote anything");
        assert!(r.acks > 300, "{} durable acknowledgements", r.acks);
        assert!(r.flush_points > 100, "{} flush points", r.flush_points);
    });
}
