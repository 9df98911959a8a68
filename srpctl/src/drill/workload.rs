//! The verifying workload: threads of random 1-block reads and writes on the disk's block
//! file, O_DIRECT where the file allows it. Each thread owns the blocks `i` with
//! `i % threads == index`, so no block is ever written by two threads or read while being
//! written, and each thread keeps the acknowledged generation of its own blocks: a read
//! must find exactly that generation ([`super::block::verify`]).

use super::block::{self, Expect};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// `O_DIRECT` (not in std; the value differs between architectures).
#[cfg(any(target_arch = "aarch64", target_arch = "arm"))]
const O_DIRECT: i32 = 0o200000;
#[cfg(not(any(target_arch = "aarch64", target_arch = "arm")))]
const O_DIRECT: i32 = 0o40000;
/// Buffer alignment O_DIRECT asks for (a page covers every logical block size).
const ALIGN: usize = 4096;

/// Opens the block file for reading and writing, with O_DIRECT if it is accepted (the
/// FUSE block file is direct_io anyway: the page cache is bypassed either way). Returns
/// whether O_DIRECT is on.
pub(crate) fn open(path: &Path) -> std::io::Result<(File, bool)> {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    match o.clone().custom_flags(O_DIRECT).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(22) => Ok((o.open(path)?, false)), // EINVAL
        Err(e) => Err(e),
    }
}

/// A buffer whose slice starts on an [`ALIGN`] boundary: a Vec over-allocated by one
/// alignment and used from the first aligned byte (it never grows, so it never moves).
pub(crate) struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes, aligned.
    pub(crate) fn new(len: usize) -> AlignedBuf {
        let raw = vec![0; len + ALIGN];
        let start = (ALIGN - raw.as_ptr() as usize % ALIGN) % ALIGN;
        AlignedBuf { raw, start, len }
    }

    /// The aligned bytes.
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

/// What the threads do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    /// Bytes per I/O (one drill block).
    pub(crate) io_size: usize,
    /// The disk's logical block size (LBAs are in these).
    pub(crate) block_size: u32,
    /// Drill blocks in the region used.
    pub(crate) blocks: u64,
    /// Threads.
    pub(crate) threads: usize,
    /// This run's id (in every block).
    pub(crate) run: u64,
}

/// Counters the progress display and the sampler read while the threads run.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Set to stop the threads.
    pub(crate) stop: AtomicBool,
    /// I/Os completed successfully.
    pub(crate) ops: AtomicU64,
    /// I/Os that failed (EIO, short transfer…).
    pub(crate) errors: AtomicU64,
    /// Reads that found the wrong data.
    pub(crate) mismatches: AtomicU64,
}

/// One I/O completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Completion {
    /// When it completed, µs since the drill's start.
    pub(crate) at_us: u64,
    /// A write (else a read).
    pub(crate) write: bool,
    /// It succeeded (and, for a read, verified).
    pub(crate) ok: bool,
}

/// Something that went wrong, for the report.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    /// When, µs since the drill's start.
    pub(crate) at_us: u64,
    /// A data mismatch (else an I/O error).
    pub(crate) mismatch: bool,
    /// What happened.
    pub(crate) what: String,
}

/// What one thread saw.
#[derive(Debug, Default)]
pub(crate) struct ThreadLog {
    /// Every completion, in order.
    pub(crate) completions: Vec<Completion>,
    /// Every error and mismatch.
    pub(crate) failures: Vec<Failure>,
}

/// Per owned block: the last acknowledged generation and a failed write's generation.
#[derive(Clone, Copy, Default)]
struct Generation {
    acked: u64,
    uncertain: Option<u64>,
}

/// Runs thread `index` until `shared.stop`.
pub(crate) fn worker(
    file: Arc<File>,
    cfg: Config,
    shared: Arc<Shared>,
    t0: Instant,
    index: usize,
) -> ThreadLog {
    let threads = cfg.threads as u64;
    let index64 = index as u64;
    let owned = (cfg.blocks + threads - 1 - index64) / threads;
    let mut gens = vec![Generation::default(); owned as usize];
    let mut buf = AlignedBuf::new(cfg.io_size);
    let mut log = ThreadLog::default();
    // Owned blocks (indexes into `gens`) with an acknowledged write.
    let mut written: Vec<u64> = Vec::new();
    let mut rng = (cfg.run ^ (index64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
    let lba_per_block = cfg.io_size as u64 / u64::from(cfg.block_size);
    while owned > 0 && !shared.stop.load(Ordering::Relaxed) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Half reads, of blocks this run wrote (so every read checks an acknowledged
        // generation); half writes anywhere in the thread's blocks.
        let write = written.is_empty() || rng & 1 == 0;
        let i = if write {
            (rng >> 8) % owned
        } else {
            written[((rng >> 8) % written.len() as u64) as usize]
        };
        let drill_block = i * threads + index64;
        let offset = drill_block * cfg.io_size as u64;
        let lba = drill_block * lba_per_block;
        let g = &mut gens[i as usize];
        let (ok, failure) = if write {
            let generation = g.acked.max(g.uncertain.unwrap_or(0)) + 1;
            block::encode(buf.bytes(), cfg.run, lba, generation);
            match file.write_all_at(buf.bytes(), offset) {
                Ok(()) => {
                    if g.acked == 0 {
                        written.push(i);
                    }
                    *g = Generation {
                        acked: generation,
                        uncertain: None,
                    };
                    (true, None)
                }
                Err(e) => {
                    g.uncertain = Some(generation);
                    (false, Some((false, format!("write LBA {lba}: {e}"))))
                }
            }
        } else {
            match file.read_exact_at(buf.bytes(), offset) {
                Ok(()) => {
                    let want = Expect {
                        run: cfg.run,
                        lba,
                        acked: g.acked,
                        uncertain: g.uncertain,
                    };
                    match block::verify(buf.bytes(), want) {
                        Ok(_) => (true, None),
                        Err(m) => (false, Some((true, m.to_string()))),
                    }
                }
                Err(e) => (false, Some((false, format!("read LBA {lba}: {e}")))),
            }
        };
        let at_us = t0.elapsed().as_micros() as u64;
        log.completions.push(Completion { at_us, write, ok });
        match failure {
            None => {
                shared.ops.fetch_add(1, Ordering::Relaxed);
            }
            Some((mismatch, what)) => {
                let counter = if mismatch {
                    &shared.mismatches
                } else {
                    &shared.errors
                };
                counter.fetch_add(1, Ordering::Relaxed);
                log.failures.push(Failure {
                    at_us,
                    mismatch,
                    what,
                });
            }
        }
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned() {
        for len in [512, 4096, 65536] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.bytes().len(), len);
            assert_eq!(b.bytes().as_ptr() as usize % ALIGN, 0);
        }
    }

    /// Two threads on a plain file: every block ends as its owner last acknowledged it,
    /// and nothing fails.
    #[test]
    fn threads_verify_their_own_blocks() {
        let path = std::env::temp_dir().join(format!("srpctl-drill-{}", std::process::id()));
        std::fs::write(&path, vec![0u8; 64 * 4096]).expect("file");
        let file = Arc::new(
            File::options()
                .read(true)
                .write(true)
                .open(&path)
                .expect("open"),
        );
        let cfg = Config {
            io_size: 4096,
            block_size: 512,
            blocks: 63,
            threads: 2,
            run: 0x1234,
        };
        let shared = Arc::new(Shared::default());
        let t0 = Instant::now();
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let (f, s) = (file.clone(), shared.clone());
                std::thread::spawn(move || worker(f, cfg, s, t0, i))
            })
            .collect();
        while shared.ops.load(Ordering::Relaxed) < 2000 {
            std::thread::yield_now();
        }
        shared.stop.store(true, Ordering::Relaxed);
        let logs: Vec<ThreadLog> = handles
            .into_iter()
            .map(|h| h.join().expect("join"))
            .collect();
        let _ = std::fs::remove_file(&path);
        for log in &logs {
            assert!(log.failures.is_empty(), "{:?}", log.failures);
            assert!(log.completions.iter().any(|c| !c.write), "no reads");
        }
        assert_eq!(shared.errors.load(Ordering::Relaxed), 0);
        assert_eq!(shared.mismatches.load(Ordering::Relaxed), 0);
    }
}
