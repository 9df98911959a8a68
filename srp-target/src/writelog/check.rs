//! The crash-point checker: given a write log and the writes an initiator saw acknowledged
//! as durable, does every crash the log allows keep every one of them, whole?
//!
//! The crash model (a power cut; cf. CrashMonkey): a crash after the first `k` records
//! leaves, for each block, the version the last completed flush made durable, or any
//! version written to it after that flush's start and before the crash — so writes not
//! covered by a flush may be dropped, reordered, or torn, at block granularity. A flush
//! covers the records that existed when it began (`covers`).
//!
//! What must hold: a write acknowledged as durable at time `t` (its FUA write's or its
//! SYNCHRONIZE CACHE's status received; with the write cache off, its own status) is
//! required at every crash point that may come after `t`: a crash after `k` records
//! happened before record `k` completed, so it may follow every acknowledgement made
//! before that time (after the last record, every acknowledgement). Each of its blocks must then hold its data or a newer
//! version. And its data must be in the log, written before `t`.
//!
//! Crash points checked: just before and just after every flush and at the end, with every
//! uncovered write dropped (the worst case); and `random` points drawn from `seed`, each
//! block's surviving version drawn from the same seed (reorder and tear).

use super::WriteLogError;
use super::log::{EntryKind, WriteLog};
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// A write an initiator saw acknowledged as durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// Byte offset on the medium (whole blocks).
    pub offset: u64,
    /// The data (whole blocks).
    pub data: Vec<u8>,
    /// CLOCK_MONOTONIC nanoseconds at which it was known durable.
    pub durable_ns: u64,
}

/// Which crash points to check besides the flush points and the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashPoints {
    /// Seed of the random points and of each block's surviving version.
    pub seed: u64,
    /// How many random points.
    pub random: usize,
}

/// A durability promise a crash breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The acknowledged data of a block was never written to the medium before its
    /// acknowledgement (or not to that block).
    NeverWritten {
        /// Index of the acknowledgement.
        ack: usize,
        /// The block (LBA).
        block: u64,
    },
    /// A crash after `after_records` records loses the block's acknowledged version.
    Lost {
        /// Index of the acknowledgement.
        ack: usize,
        /// The block (LBA).
        block: u64,
        /// Records applied before the crash.
        after_records: usize,
        /// Sequence number of the record that wrote the acknowledged version.
        needed: u64,
        /// Sequence number of the version the crash left (`None`: the medium's contents
        /// before the log began).
        found: Option<u64>,
        /// Whether every uncovered write was dropped (a flush point) or drawn at random.
        worst_case: bool,
    },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::NeverWritten { ack, block } => write!(
                f,
                "ack {ack}: block {block}'s acknowledged data never reached the medium before the acknowledgement"
            ),
            Violation::Lost {
                ack,
                block,
                after_records,
                needed,
                found,
                worst_case,
            } => write!(
                f,
                "ack {ack}: a crash after {after_records} records ({}) leaves block {block} at {} instead of record {needed} or newer",
                if *worst_case {
                    "uncovered writes dropped"
                } else {
                    "random survivors"
                },
                found.map_or("its contents before the log".into(), |s| format!(
                    "record {s}"
                )),
            ),
        }
    }
}

/// What a check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Crash points at flushes and at the end (uncovered writes dropped).
    pub flush_points: usize,
    /// Random crash points.
    pub random_points: usize,
    /// Block checks made over all points.
    pub block_checks: u64,
    /// Acknowledgements checked.
    pub acks: usize,
    /// Violations found (all of them are counted; the first 64 are kept).
    pub violations: Vec<Violation>,
    /// How many violations in all.
    pub violation_count: u64,
}

impl CheckReport {
    /// Whether no crash point breaks a promise.
    pub fn clean(&self) -> bool {
        self.violation_count == 0
    }

    fn violate(&mut self, v: Violation) {
        self.violation_count += 1;
        if self.violations.len() < 64 {
            self.violations.push(v);
        }
    }
}

/// A block's versions in the log: (record index, hash of the block's bytes).
type Versions = Vec<(usize, u64)>;

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// splitmix64: the seeded draws (deterministic for a seed, no dependency).
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One block of one acknowledgement: which version must survive.
#[derive(Clone, Copy, Debug)]
struct Need {
    ack: usize,
    block: u64,
    /// Position in the block's [`Versions`].
    pos: usize,
    durable_ns: u64,
}

/// Checks `acks` against every crash the log allows at the chosen points.
pub fn check(
    log: &WriteLog,
    acks: &[Ack],
    points: CrashPoints,
) -> Result<CheckReport, WriteLogError> {
    let bs = u64::from(log.header().block_size);
    let size = log.header().size_bytes;
    let mut report = CheckReport {
        acks: acks.len(),
        ..CheckReport::default()
    };

    // The blocks the acknowledgements cover, with their data hashes.
    let mut wanted: BTreeMap<u64, Versions> = BTreeMap::new();
    for (index, a) in acks.iter().enumerate() {
        let len = a.data.len() as u64;
        if a.offset % bs != 0 || len % bs != 0 || len == 0 {
            return Err(WriteLogError::BadAck {
                index,
                why: "not whole blocks",
            });
        }
        if a.offset.checked_add(len).is_none_or(|e| e > size) {
            return Err(WriteLogError::BadAck {
                index,
                why: "past the medium's end",
            });
        }
        for b in 0..len / bs {
            wanted.entry(a.offset / bs + b).or_default();
        }
    }

    // Every version of those blocks, in log order; the flushes' coverage.
    let zeros = hash(&vec![0u8; bs as usize]);
    let entries = log.entries();
    let mut covered = vec![0usize; entries.len() + 1]; // records durable after k records
    for (i, e) in entries.iter().enumerate() {
        covered[i + 1] = covered[i];
        match &e.kind {
            EntryKind::Write { offset, data } => {
                let first = offset / bs;
                let blocks = data.len() as u64 / bs;
                for (b, versions) in wanted.range_mut(first..first + blocks) {
                    let at = ((b - first) * bs) as usize;
                    versions.push((i, hash(&data[at..at + bs as usize])));
                }
            }
            EntryKind::Discard { offset, len } => {
                let (first, last) = (offset / bs, (offset + len).div_ceil(bs));
                for (_, versions) in wanted.range_mut(first..last) {
                    versions.push((i, zeros));
                }
            }
            EntryKind::Sync { covers } => {
                covered[i + 1] = covered[i].max(*covers as usize);
            }
        }
    }

    // Which version each acknowledged block needs: the last write of its data to it that
    // completed before the acknowledgement.
    let mut needs = Vec::new();
    for (index, a) in acks.iter().enumerate() {
        for b in 0..a.data.len() as u64 / bs {
            let block = a.offset / bs + b;
            let at = (b * bs) as usize;
            let h = hash(&a.data[at..at + bs as usize]);
            let versions = &wanted[&block];
            let pos = versions
                .iter()
                .rposition(|&(i, vh)| vh == h && entries[i].time_ns <= a.durable_ns);
            match pos {
                Some(pos) => needs.push(Need {
                    ack: index,
                    block,
                    pos,
                    durable_ns: a.durable_ns,
                }),
                None => report.violate(Violation::NeverWritten { ack: index, block }),
            }
        }
    }
    needs.sort_by_key(|n| n.durable_ns);

    let check_point = |k: usize, draw: Option<&mut Draw>, report: &mut CheckReport| {
        // The crash came before record k completed: every acknowledgement before that
        // time may precede it (after the last record, every acknowledgement does).
        let before = entries.get(k).map_or(u64::MAX, |e| e.time_ns);
        let durable = covered[k];
        let required = needs.partition_point(|n| n.durable_ns < before);
        let mut draw = draw;
        // One draw per block per point, whichever acknowledgements share it.
        let mut chosen: BTreeMap<u64, Option<usize>> = BTreeMap::new();
        for n in &needs[..required] {
            let versions = &wanted[&n.block];
            let pick = *chosen.entry(n.block).or_insert_with(|| {
                let kept = versions.partition_point(|&(i, _)| i < durable);
                let upto = versions.partition_point(|&(i, _)| i < k);
                // Candidates: the durable version (kept - 1, or the contents before the
                // log) and every version written after the flush began.
                let base = kept.checked_sub(1);
                match draw.as_deref_mut() {
                    None => base,
                    Some(d) => {
                        let extra = upto - kept;
                        match d.below(extra + 1) {
                            0 => base,
                            j => Some(kept + j - 1),
                        }
                    }
                }
            });
            report.block_checks += 1;
            let ok = pick.is_some_and(|p| p >= n.pos || versions[p].1 == versions[n.pos].1);
            if !ok {
                report.violate(Violation::Lost {
                    ack: n.ack,
                    block: n.block,
                    after_records: k,
                    needed: versions[n.pos].0 as u64,
                    found: pick.map(|p| versions[p].0 as u64),
                    worst_case: draw.is_none(),
                });
            }
        }
    };

    // Flush points and the end, uncovered writes dropped.
    let mut flush_points: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.kind, EntryKind::Sync { .. }))
        .flat_map(|(i, _)| [i, i + 1])
        .collect();
    flush_points.push(entries.len());
    flush_points.dedup();
    for &k in &flush_points {
        check_point(k, None, &mut report);
    }
    report.flush_points = flush_points.len();

    // Random points with random survivors.
    let mut draw = Draw(points.seed);
    for _ in 0..points.random {
        let k = 1 + draw.below(entries.len().max(1));
        let k = k.min(entries.len());
        check_point(k, Some(&mut draw), &mut report);
    }
    report.random_points = points.random;
    Ok(report)
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
