//! The verifying workload: seeded READs, WRITEs (some FUA) and SYNCHRONIZE CACHEs over a
//! range of blocks, at most one command per block in flight, every read checked against
//! the [`Model`]; at the end every block written is read back and checked.

use crate::host::Op;
use crate::model::{BLOCK, Model, Violation, block_data};
use hca::sim::Rng;
use std::collections::{BTreeMap, BTreeSet};

/// The workload's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Commands issued before the final read-back.
    pub ops: u64,
    /// Commands in flight at most.
    pub depth: usize,
    /// Blocks used (from LBA 0).
    pub blocks: u64,
    /// Blocks per command at most.
    pub max_blocks: u32,
    /// Virtual time over which the commands are spread (so faults meet I/O): command `i`
    /// is not issued before `i × span / ops` from the start.
    pub span: std::time::Duration,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            ops: 400,
            depth: 8,
            blocks: 256,
            max_blocks: 8,
            span: std::time::Duration::from_secs(10),
        }
    }
}

/// One command the workload waits for.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Read {
        lba: u64,
        blocks: u32,
    },
    Write {
        lba: u64,
        blocks: u32,
        generation: u64,
        fua: bool,
    },
    Flush {
        id: u64,
    },
}

/// What the workload saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadStats {
    /// Commands issued (read-back included).
    pub issued: u64,
    /// Reads, writes and flushes that succeeded.
    pub reads: u64,
    /// Writes that succeeded.
    pub writes: u64,
    /// Flushes that succeeded.
    pub flushes: u64,
    /// Commands that failed (their effect unknown to the model).
    pub failed: u64,
}

/// The workload (see the module doc).
#[derive(Debug)]
pub struct Workload {
    shape: Shape,
    rng: Rng,
    model: Model,
    busy: BTreeSet<u64>,
    pending: BTreeMap<u64, Pending>,
    next_id: u64,
    generation: u64,
    written: BTreeSet<u64>,
    /// Blocks still to read back at the end (filled when the random phase is over).
    readback: Option<Vec<u64>>,
    /// Reads that returned what no history allows.
    pub violations: Vec<Violation>,
    /// What it saw.
    pub stats: WorkloadStats,
}

impl Workload {
    /// A workload of `shape` drawn from `seed`.
    pub fn new(shape: Shape, seed: u64) -> Workload {
        Workload {
            shape,
            rng: Rng::new(seed ^ 0x776f_726b_6c6f_6164),
            model: Model::default(),
            busy: BTreeSet::new(),
            pending: BTreeMap::new(),
            next_id: 1,
            generation: 0,
            written: BTreeSet::new(),
            readback: None,
            violations: Vec::new(),
            stats: WorkloadStats::default(),
        }
    }

    /// Whether everything was issued, read back and answered.
    pub fn is_done(&self) -> bool {
        self.readback.as_ref().is_some_and(Vec::is_empty) && self.pending.is_empty()
    }

    /// Reads the model checked.
    pub fn reads_checked(&self) -> u64 {
        self.model.reads_checked
    }

    /// The target crashed: the model forgets what was not durable.
    pub fn crash(&mut self) {
        self.model.crash();
    }

    /// When the next command is due after the start, if later than `elapsed` (a command
    /// already due waits for a command to end: its blocks are busy).
    pub fn next_due(&self, elapsed: std::time::Duration) -> Option<std::time::Duration> {
        (self.stats.issued < self.shape.ops && self.pending.len() < self.shape.depth)
            .then(|| self.due(self.stats.issued))
            .filter(|&d| d > elapsed)
    }

    fn due(&self, i: u64) -> std::time::Duration {
        self.shape
            .span
            .mul_f64(i as f64 / self.shape.ops.max(1) as f64)
    }

    /// Commands to send `elapsed` after the start, each with its id.
    pub fn next_ops(&mut self, elapsed: std::time::Duration) -> Vec<(u64, Op)> {
        let mut out = Vec::new();
        while self.pending.len() < self.shape.depth
            && (self.stats.issued >= self.shape.ops || self.due(self.stats.issued) <= elapsed)
        {
            let Some(op) = self.pick() else {
                break;
            };
            out.push(op);
        }
        out
    }

    fn free(&self, lba: u64, blocks: u32) -> bool {
        (lba..lba + u64::from(blocks)).all(|b| !self.busy.contains(&b))
    }

    fn take(&mut self, p: Pending, op: Op) -> Option<(u64, Op)> {
        let id = self.next_id;
        self.next_id += 1;
        if let Pending::Read { lba, blocks } | Pending::Write { lba, blocks, .. } = p {
            self.busy.extend(lba..lba + u64::from(blocks));
        }
        self.pending.insert(id, p);
        self.stats.issued += 1;
        Some((id, op))
    }

    fn pick(&mut self) -> Option<(u64, Op)> {
        if self.stats.issued >= self.shape.ops {
            return self.read_back();
        }
        let kind = self.rng.range(0, 100);
        if kind < 8 {
            let id = self.next_id;
            self.model.flush_issued(id);
            return self.take(Pending::Flush { id }, Op::Flush);
        }
        let blocks = self.rng.range(1, u64::from(self.shape.max_blocks) + 1) as u32;
        let lba = self.rng.range(0, self.shape.blocks - u64::from(blocks) + 1);
        if !self.free(lba, blocks) {
            return None;
        }
        if kind < 54 {
            self.generation += 1;
            let generation = self.generation;
            let fua = self.rng.chance(0.25);
            let mut data = vec![0u8; blocks as usize * BLOCK];
            for (i, chunk) in data.chunks_mut(BLOCK).enumerate() {
                block_data(lba + i as u64, generation, chunk);
            }
            self.written.extend(lba..lba + u64::from(blocks));
            let p = Pending::Write {
                lba,
                blocks,
                generation,
                fua,
            };
            self.take(p, Op::Write { lba, data, fua })
        } else {
            self.take(Pending::Read { lba, blocks }, Op::Read { lba, blocks })
        }
    }

    /// The final phase: every block written, read once more.
    fn read_back(&mut self) -> Option<(u64, Op)> {
        let written = &self.written;
        let list = self
            .readback
            .get_or_insert_with(|| written.iter().rev().copied().collect());
        let lba = *list.last()?;
        if self.busy.contains(&lba) {
            return None;
        }
        list.pop();
        self.take(
            Pending::Read { lba, blocks: 1 },
            Op::Read { lba, blocks: 1 },
        )
    }

    /// Command `id` ended with `result` (a read's data).
    pub fn finished(&mut self, id: u64, result: &crate::host::CmdResult) {
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        if let Pending::Read { lba, blocks } | Pending::Write { lba, blocks, .. } = p {
            for b in lba..lba + u64::from(blocks) {
                self.busy.remove(&b);
            }
        }
        if result.is_err() {
            self.stats.failed += 1;
        }
        match (p, result) {
            (Pending::Read { lba, .. }, Ok(Some(data))) => {
                self.stats.reads += 1;
                for (i, chunk) in data.chunks(BLOCK).enumerate() {
                    if let Err(v) = self.model.read(lba + i as u64, chunk) {
                        self.violations.push(v);
                    }
                }
            }
            (Pending::Read { lba, blocks }, Ok(None)) => self.violations.push(Violation {
                lba,
                got: Err(format!("a READ of {blocks} blocks completed without data")),
                allowed: Vec::new(),
            }),
            (Pending::Read { .. }, Err(_)) => {}
            (
                Pending::Write {
                    lba,
                    blocks,
                    generation,
                    fua,
                },
                r,
            ) => {
                for b in lba..lba + u64::from(blocks) {
                    if r.is_ok() {
                        self.model.write_acked(b, generation, fua);
                    } else {
                        self.model.write_failed(b, generation);
                    }
                }
                if r.is_ok() {
                    self.stats.writes += 1;
                }
            }
            (Pending::Flush { id }, r) => {
                self.model.flush_done(id, r.is_ok());
                if r.is_ok() {
                    self.stats.flushes += 1;
                }
            }
        }
    }
}
