//! WRITE ATOMIC through a power cut (issue #29, Deliver 3): on a file LU with its intent
//! log, atomic writes of 32 blocks (16 KiB, past any unit a disk writes whole), FUA and
//! not, between SYNCHRONIZE CACHEs. Every system call on the image and on the log goes
//! through a journaling layer beneath them; the test then cuts the power after every
//! prefix of that journal, several times with different survivors — each file keeps what
//! its last completed `fdatasync` covered, and of every later write each 512-byte sector
//! survives or not, drawn from a seed — runs the target's own start-up repair on what is
//! left, and checks every range: all of it one write's blocks (never a mix of two), and
//! not older than the last write acknowledged as durable (FUA, or before a SYNCHRONIZE
//! CACHE that answered GOOD).
//!
//! The control is the point: the same workload by plain WRITE(16) without the log (one
//! buffered `pwrite`, what WRITE ATOMIC of more than a block would be without the log)
//! must fail the check — a torn range — so the check can fail.

mod common;

use common::*;
use nix::errno::Errno;
use srp_target::atomic::IntentLog;
use srp_target::atomic::record::Header;
use srp_target::backend::MemSpan;
use srp_target::backend::medium::Medium;
use srp_target::{BlockSize, FileBackend, LogicalUnit, LuConfig};
use std::io;
use std::sync::{Arc, Mutex};

const BS: usize = 512;
const RANGE_BLOCKS: u64 = 32;
const RANGES: u64 = 8;
const BLOCKS: u64 = RANGES * RANGE_BLOCKS;
const OPS: usize = 120;

/// One system call that changed a file.
#[derive(Clone, Debug)]
enum Op {
    Write {
        file: usize,
        offset: u64,
        data: Vec<u8>,
    },
    Sync {
        file: usize,
    },
    SetLen {
        file: usize,
        len: u64,
    },
}

type Journal = Arc<Mutex<Vec<Op>>>;

/// Beneath the backend or the log: passes every call down and journals what changed the
/// file (`file` 0: the image, 1: the log).
#[derive(Debug)]
struct Journaled {
    inner: Box<dyn Medium>,
    file: usize,
    journal: Journal,
}

impl Journaled {
    fn push(&self, op: Op) {
        self.journal.lock().expect("journal").push(op);
    }
}

impl Medium for Journaled {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn read_into(&self, dst: MemSpan<'_>, offset: u64) -> Result<(), ib_verbs::mem::FileIoError> {
        self.inner.read_into(dst, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(buf, offset)?;
        self.push(Op::Write {
            file: self.file,
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }
    fn write_from(&self, src: MemSpan<'_>, offset: u64) -> Result<(), ib_verbs::mem::FileIoError> {
        self.inner.write_from(src, offset)?;
        let mut data = vec![0u8; src.len];
        src.block.read(src.offset, &mut data)?;
        self.push(Op::Write {
            file: self.file,
            offset,
            data,
        });
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()?;
        self.push(Op::Sync { file: self.file });
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)?;
        self.push(Op::SetLen {
            file: self.file,
            len,
        });
        Ok(())
    }
    fn punch_hole(&self, offset: u64, len: u64) -> Result<(), Errno> {
        self.inner.punch_hole(offset, len)?;
        self.push(Op::Write {
            file: self.file,
            offset,
            data: vec![0; len as usize],
        });
        Ok(())
    }
}

/// The log's medium after a crash: the bytes left, in memory (the repair writes it).
#[derive(Debug)]
struct InMemory(Mutex<Vec<u8>>);

impl Medium for InMemory {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let m = self.0.lock().expect("mem");
        let at = offset as usize;
        buf.copy_from_slice(
            m.get(at..at + buf.len())
                .ok_or(io::ErrorKind::UnexpectedEof)?,
        );
        Ok(())
    }
    fn read_into(&self, _: MemSpan<'_>, _: u64) -> Result<(), ib_verbs::mem::FileIoError> {
        Err(ib_verbs::mem::FileIoError::Io(io::Error::other(
            "the log reads no registered memory",
        )))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut m = self.0.lock().expect("mem");
        let end = offset as usize + buf.len();
        if m.len() < end {
            m.resize(end, 0);
        }
        m[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
    fn write_from(&self, _: MemSpan<'_>, _: u64) -> Result<(), ib_verbs::mem::FileIoError> {
        Err(ib_verbs::mem::FileIoError::Io(io::Error::other(
            "the log writes no registered memory",
        )))
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.lock().expect("mem").resize(len as usize, 0);
        Ok(())
    }
    fn punch_hole(&self, _: u64, _: u64) -> Result<(), Errno> {
        Err(Errno::EOPNOTSUPP)
    }
}

/// A range's blocks of generation `g`: each block says its range, its index and `g`.
fn range_data(range: u64, g: u64) -> Vec<u8> {
    let mut d = vec![0u8; (RANGE_BLOCKS as usize) * BS];
    for (i, b) in d.chunks_mut(BS).enumerate() {
        b[..8].copy_from_slice(&g.to_le_bytes());
        b[8..16].copy_from_slice(&range.to_le_bytes());
        b[16..24].copy_from_slice(&(i as u64).to_le_bytes());
        b[24..].fill((g as u8) ^ (i as u8));
    }
    d
}

/// The generation of every block of `range` in `image` (0: never written).
fn generations(image: &[u8], range: u64) -> Vec<u64> {
    let at = (range * RANGE_BLOCKS) as usize * BS;
    image[at..at + RANGE_BLOCKS as usize * BS]
        .chunks(BS)
        .map(|b| u64::from_le_bytes(b[..8].try_into().expect("8 bytes")))
        .collect()
}

/// What the workload did: for each range, (journal length when it was acknowledged
/// durable, generation), in order; and every generation issued per range.
#[derive(Default)]
struct Acks {
    durable: Vec<(usize, u64, u64)>,
    /// The log file's bytes when the journal began (its header, synced at open).
    log_at_start: Vec<u8>,
    /// Plain FUA writes of a whole range: (journal length when issued, when acknowledged,
    /// range, generation). Not atomic: torn until acknowledged.
    plain: Vec<(usize, usize, u64, u64)>,
}

/// Runs the workload; returns the journal, the acks and the log's path.
fn run(dir: &TempDir, with_log: bool, seed: u64) -> (Vec<Op>, Acks) {
    let journal: Journal = Arc::default();
    let image = dir.path().join(format!("image-{with_log}-{seed}"));
    let backend = FileBackend::create(&image, BLOCKS * BS as u64, BlockSize::B512)
        .expect("image")
        .interpose(|m| {
            Box::new(Journaled {
                inner: m,
                file: 0,
                journal: journal.clone(),
            })
        });
    let mut acks = Acks::default();
    let mut cfg = LuConfig {
        write_cache: true,
        ..LuConfig::new(identity("atomic"))
    };
    if with_log {
        let header = Header {
            block_size: 512,
            size_bytes: BLOCKS * BS as u64,
        };
        let path = dir.path().join(format!("atomic-{seed}.log"));
        let (log, _) = IntentLog::open(&path, header).expect("log");
        acks.log_at_start = std::fs::read(&path).expect("the log");
        let log = log.interpose(|m| {
            Box::new(Journaled {
                inner: m,
                file: 1,
                journal: journal.clone(),
            })
        });
        cfg.atomic_log = Some(Arc::new(Mutex::new(log)));
    }
    let lu = LogicalUnit::new(Box::new(backend), cfg);
    let mut rng = Rng(seed);
    let mut next_gen = vec![1u64; RANGES as usize];
    let mut pending: Vec<(u64, u64)> = Vec::new();
    for _ in 0..OPS {
        if rng.below(8) == 0 {
            good(&lu, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
            let at = journal.lock().expect("journal").len();
            for (r, g) in pending.drain(..) {
                acks.durable.push((at, r, g));
            }
            continue;
        }
        let r = rng.below(RANGES);
        let g = next_gen[r as usize];
        next_gen[r as usize] += 1;
        if with_log && rng.below(6) == 0 {
            // A plain WRITE(16) with FUA over the range: durable when GOOD; an atomic write
            // of it still in the log must not come back over it after a crash.
            let issued = journal.lock().expect("journal").len();
            good(
                &lu,
                &cdb16(0x8a, 0x08, r * RANGE_BLOCKS, RANGE_BLOCKS as u32),
                &range_data(r, g),
            );
            let at = journal.lock().expect("journal").len();
            acks.plain.push((issued, at, r, g));
            acks.durable.push((at, r, g));
            continue;
        }
        let fua = rng.below(3) == 0;
        let mut cdb = vec![0u8; 16];
        cdb[1] = if fua { 0x08 } else { 0 };
        cdb[2..10].copy_from_slice(&(r * RANGE_BLOCKS).to_be_bytes());
        if with_log {
            // WRITE ATOMIC(16): TRANSFER LENGTH in bytes 12..14.
            cdb[0] = 0x9c;
            cdb[12..14].copy_from_slice(&(RANGE_BLOCKS as u16).to_be_bytes());
        } else {
            // The control: the same blocks by a plain WRITE(16), one buffered pwrite.
            cdb[0] = 0x8a;
            cdb[10..14].copy_from_slice(&(RANGE_BLOCKS as u32).to_be_bytes());
        }
        good(&lu, &cdb, &range_data(r, g));
        if fua {
            let at = journal.lock().expect("journal").len();
            acks.durable.push((at, r, g));
        } else {
            pending.push((r, g));
        }
    }
    let ops = journal.lock().expect("journal").clone();
    (ops, acks)
}

/// The two files after a power cut after `k` journal entries, survivors drawn from `rng`.
fn crashed(ops: &[Op], k: usize, log_at_start: &[u8], rng: &mut Rng) -> [Vec<u8>; 2] {
    let mut files = [vec![0u8; BLOCKS as usize * BS], log_at_start.to_vec()];
    // Each file's last sync before the cut: everything of it before that is durable.
    let last_sync = |f: usize| {
        ops[..k]
            .iter()
            .rposition(|o| matches!(o, Op::Sync { file } if *file == f))
    };
    let synced = [last_sync(0), last_sync(1)];
    for (i, op) in ops[..k].iter().enumerate() {
        let f = match op {
            Op::Write { file, .. } | Op::Sync { file } | Op::SetLen { file, .. } => *file,
        };
        let durable = synced[f].is_some_and(|s| i < s);
        match op {
            Op::Sync { .. } => {}
            Op::SetLen { len, .. } => {
                if durable || rng.below(2) == 0 {
                    files[f].resize(*len as usize, 0);
                }
            }
            Op::Write { offset, data, .. } => {
                let end = *offset as usize + data.len();
                if files[f].len() < end {
                    files[f].resize(end, 0);
                }
                // Sector by sector: a write not yet synced may be torn anywhere.
                let mut at = 0usize;
                while at < data.len() {
                    let sector_end = ((*offset as usize + at) / BS + 1) * BS - *offset as usize;
                    let n = sector_end.min(data.len()) - at;
                    if durable || rng.below(2) == 0 {
                        let o = *offset as usize + at;
                        files[f][o..o + n].copy_from_slice(&data[at..at + n]);
                    }
                    at += n;
                }
            }
        }
    }
    files
}

/// Checks every crash point of `ops`; the violations found (each names the point).
fn check(ops: &[Op], acks: &Acks, with_log: bool, seed: u64) -> (usize, Vec<String>) {
    let mut rng = Rng(seed ^ 0xc4a5);
    let mut violations = Vec::new();
    let mut points = 0;
    let header = Header {
        block_size: 512,
        size_bytes: BLOCKS * BS as u64,
    };
    for k in 0..=ops.len() {
        for _ in 0..3 {
            points += 1;
            let [mut image, log] = crashed(ops, k, &acks.log_at_start, &mut rng);
            if with_log {
                // The target's own start-up repair, on what is left.
                let medium = Box::new(InMemory(Mutex::new(log.clone())));
                let (mut intent, pending) = IntentLog::from_parts(
                    medium,
                    std::path::Path::new("crashed.log"),
                    header,
                    &log,
                )
                .expect("the log opens after a crash");
                intent
                    .recover(
                        &pending,
                        |lba, data| {
                            let at = lba as usize * BS;
                            image[at..at + data.len()].copy_from_slice(data);
                            Ok::<(), io::Error>(())
                        },
                        || Ok(()),
                    )
                    .expect("repair");
            }
            for r in 0..RANGES {
                let gens = generations(&image, r);
                // A plain write in flight at the cut may be torn, over older blocks only.
                let plain_in_flight = acks.plain.iter().any(|&(issued, acked, range, g)| {
                    range == r && issued <= k && k < acked && gens.iter().all(|x| *x <= g)
                });
                if gens.iter().any(|g| *g != gens[0]) && !plain_in_flight {
                    violations.push(format!(
                        "cut after {k} of {} calls: range {r} torn: generations {gens:?}",
                        ops.len()
                    ));
                    continue;
                }
                let need = acks
                    .durable
                    .iter()
                    .filter(|(at, range, _)| *range == r && *at <= k)
                    .map(|(_, _, g)| *g)
                    .max()
                    .unwrap_or(0);
                if gens.iter().any(|g| *g < need) {
                    violations.push(format!(
                        "cut after {k} calls: range {r} at generation {}, acknowledged durable {need}",
                        gens[0]
                    ));
                }
            }
        }
    }
    (points, violations)
}

#[test]
fn an_atomic_write_is_all_old_or_all_new_after_any_power_cut() {
    let dir = TempDir::new("atomic-crash");
    for seed in [1, 2] {
        let (ops, acks) = run(&dir, true, seed);
        let (points, violations) = check(&ops, &acks, true, seed);
        assert!(
            violations.is_empty(),
            "seed {seed}: {} violations of {points} crash points; first: {}",
            violations.len(),
            violations[0]
        );
        assert!(
            acks.durable.len() > 30,
            "{} durable acks",
            acks.durable.len()
        );
        eprintln!(
            "seed {seed}: {} calls journaled, {points} crash points, {} durable acknowledgements: clean",
            ops.len(),
            acks.durable.len()
        );
    }
}

#[test]
fn without_the_intent_log_a_power_cut_tears_a_multi_block_write() {
    let dir = TempDir::new("atomic-crash-nolog");
    let (ops, acks) = run(&dir, false, 3);
    let (points, violations) = check(&ops, &acks, false, 3);
    assert!(
        violations.iter().any(|v| v.contains("torn")),
        "{points} crash points without the log and no torn range: the check cannot fail"
    );
}
