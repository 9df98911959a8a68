//! The verifying workload's model of the disk: for every block, the versions a read may
//! return, from the writes acknowledged (and those whose fate is unknown), the flushes and
//! the crashes.
//!
//! The workload keeps at most one command in flight per block, so each block is a register
//! whose history is sequential: a read must return the one acknowledged version, unless a
//! failed write (its fate unknown) or a crash made more than one possible — then any of
//! them, and the read fixes which. Durability follows the crash model of the disk
//! ([`crate::disk`]): a version is durable once its FUA write or a SYNCHRONIZE CACHE
//! issued after its acknowledgement completed; a crash keeps the durable version or any
//! later one.
//!
//! A block's content names its version: [`block_data`] writes the LBA and a generation
//! into a header and fills the rest from them, so a read tells which write it came from
//! (generation 0 is the never-written all-zero block) and whether it is torn.

use std::collections::BTreeMap;

/// The logical block size the simulation's LU uses.
pub const BLOCK: usize = 512;

const MAGIC: u64 = 0x5352_5053_494d_4231; // "SRPSIMB1"

/// The content of block `lba` at generation `generation` (0: zeros).
pub fn block_data(lba: u64, generation: u64, out: &mut [u8]) {
    if generation == 0 {
        out.fill(0);
        return;
    }
    out[..8].copy_from_slice(&MAGIC.to_le_bytes());
    out[8..16].copy_from_slice(&lba.to_le_bytes());
    out[16..24].copy_from_slice(&generation.to_le_bytes());
    let mut x = lba.rotate_left(17) ^ generation.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for b in out[24..].iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// What a block read back is: its generation, or why it is no version at all.
pub fn decode(lba: u64, data: &[u8]) -> Result<u64, String> {
    if data.iter().all(|&b| b == 0) {
        return Ok(0);
    }
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&data[i..i + 8]);
        u64::from_le_bytes(w)
    };
    if word(0) != MAGIC {
        return Err("not a block this workload wrote".into());
    }
    if word(8) != lba {
        return Err(format!("block of LBA {} found at LBA {lba}", word(8)));
    }
    let generation = word(16);
    let mut expect = vec![0u8; data.len()];
    block_data(lba, generation, &mut expect);
    if expect != data {
        return Err(format!("generation {generation} torn or corrupted"));
    }
    Ok(generation)
}

/// One block's history as the model keeps it.
#[derive(Debug, Clone)]
struct Block {
    /// What a read may return now.
    current: Vec<u64>,
    /// The versions one of which is on stable storage.
    durable: Vec<u64>,
    /// Versions acknowledged (or perhaps written) since, oldest first, each with its
    /// sequence number on this block.
    volatile: Vec<(u64, u64)>,
    /// The last sequence number given to a write of this block.
    seq: u64,
    /// The newest sequence number known durable.
    durable_seq: u64,
    /// A crash made several versions possible and no read has fixed one since.
    unread_crash: bool,
    /// Bumped whenever `volatile` is emptied (a FUA write, a crash): a flush's marks of an
    /// older epoch no longer apply.
    epoch: u64,
}

impl Default for Block {
    fn default() -> Self {
        Block {
            current: vec![0],
            durable: vec![0],
            volatile: Vec::new(),
            seq: 0,
            durable_seq: 0,
            unread_crash: false,
            epoch: 0,
        }
    }
}

/// A read that returned what no history allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The block.
    pub lba: u64,
    /// What it returned (or why it is no version).
    pub got: Result<u64, String>,
    /// What it could have returned.
    pub allowed: Vec<u64>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.got {
            Ok(g) => write!(
                f,
                "LBA {}: read generation {g}, allowed {:?}",
                self.lba, self.allowed
            ),
            Err(e) => write!(f, "LBA {}: {e}, allowed {:?}", self.lba, self.allowed),
        }
    }
}

/// What a flush will make durable of one block.
#[derive(Debug, Clone)]
struct Mark {
    lba: u64,
    epoch: u64,
    /// The versions the block may hold when the flush was issued.
    possible: Vec<u64>,
    /// The sequence number of its newest volatile version then.
    upto: u64,
}

/// The model (see the module doc).
#[derive(Debug, Default)]
pub struct Model {
    blocks: BTreeMap<u64, Block>,
    /// Flushes in flight: for each, every block that had unflushed versions when it was
    /// issued, with what it will make durable.
    flushes: BTreeMap<u64, Vec<Mark>>,
    /// Reads checked.
    pub reads_checked: u64,
}

impl Model {
    fn block(&mut self, lba: u64) -> &mut Block {
        self.blocks.entry(lba).or_default()
    }

    /// A write of `generation` to `lba` was acknowledged (`fua`: as durable).
    pub fn write_acked(&mut self, lba: u64, generation: u64, fua: bool) {
        let b = self.block(lba);
        b.current = vec![generation];
        b.unread_crash = false;
        b.seq += 1;
        if fua {
            b.durable = vec![generation];
            b.durable_seq = b.seq;
            b.volatile.clear();
        } else {
            b.volatile.push((b.seq, generation));
        }
    }

    /// A write of `generation` to `lba` failed: it may or may not have landed.
    pub fn write_failed(&mut self, lba: u64, generation: u64) {
        let b = self.block(lba);
        if !b.current.contains(&generation) {
            b.current.push(generation);
        }
        b.seq += 1;
        b.volatile.push((b.seq, generation));
    }

    /// Flush `id` was issued: what it will make durable when it completes.
    pub fn flush_issued(&mut self, id: u64) {
        let marks = self
            .blocks
            .iter()
            .filter(|(_, b)| !b.volatile.is_empty())
            .map(|(&lba, b)| Mark {
                lba,
                epoch: b.epoch,
                possible: b.current.clone(),
                upto: b.volatile.last().map_or(0, |v| v.0),
            })
            .collect();
        self.flushes.insert(id, marks);
    }

    /// Flush `id` ended: durable if `ok`, nothing learnt if not.
    pub fn flush_done(&mut self, id: u64, ok: bool) {
        let Some(marks) = self.flushes.remove(&id) else {
            return;
        };
        if !ok {
            return;
        }
        for m in marks {
            let b = self.block(m.lba);
            // A crash since, or a newer version made durable since (a FUA write, a
            // later flush that ended first): this flush teaches nothing more.
            if b.epoch == m.epoch && m.upto > b.durable_seq {
                b.durable = m.possible;
                b.durable_seq = m.upto;
                b.volatile.retain(|v| v.0 > m.upto);
            }
        }
    }

    /// The target lost power: every block may hold its durable version or a later one.
    pub fn crash(&mut self) {
        for b in self.blocks.values_mut() {
            let mut possible = b.durable.clone();
            for &(_, v) in &b.volatile {
                if !possible.contains(&v) {
                    possible.push(v);
                }
            }
            // Whatever survived, the disk holds it durably now.
            b.current = possible.clone();
            b.durable = possible;
            b.volatile.clear();
            b.durable_seq = b.seq;
            b.unread_crash = true;
            b.epoch += 1;
        }
    }

    /// A read of `lba` returned `data`: checked, and the block fixed to what it showed.
    pub fn read(&mut self, lba: u64, data: &[u8]) -> Result<(), Violation> {
        self.reads_checked += 1;
        let got = decode(lba, data);
        let b = self.block(lba);
        match &got {
            Ok(g) if b.current.contains(g) => {
                b.current = vec![*g];
                if b.unread_crash {
                    b.durable = vec![*g];
                    b.unread_crash = false;
                }
                Ok(())
            }
            _ => Err(Violation {
                lba,
                got,
                allowed: b.current.clone(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(lba: u64, g: u64) -> Vec<u8> {
        let mut b = vec![0u8; BLOCK];
        block_data(lba, g, &mut b);
        b
    }

    #[test]
    fn blocks_name_their_version_and_tears_are_seen() {
        assert_eq!(decode(5, &data(5, 9)), Ok(9));
        assert_eq!(decode(5, &data(5, 0)), Ok(0));
        assert!(decode(6, &data(5, 9)).is_err());
        let mut torn = data(5, 9);
        torn[300..].copy_from_slice(&data(5, 8)[300..]);
        assert!(decode(5, &torn).is_err());
    }

    #[test]
    fn reads_must_see_the_acknowledged_version() {
        let mut m = Model::default();
        m.write_acked(1, 1, false);
        m.write_acked(1, 2, false);
        assert!(m.read(1, &data(1, 2)).is_ok());
        let v = m.read(1, &data(1, 1)).expect_err("a stale read");
        assert_eq!(v.allowed, vec![2]);
    }

    #[test]
    fn a_crash_may_lose_only_what_was_not_durable() {
        let mut m = Model::default();
        m.write_acked(1, 1, true);
        m.write_acked(2, 1, false);
        m.flush_issued(7);
        m.write_acked(1, 2, false);
        m.write_acked(2, 2, false);
        m.flush_done(7, true);
        m.crash();
        // Block 1: FUA'd 1 or the later 2; block 2: flushed 1 or the later 2, never 0.
        assert!(m.read(1, &data(1, 1)).is_ok());
        assert!(m.read(2, &data(2, 0)).is_err());
        assert!(m.read(2, &data(2, 2)).is_ok());
        // A read fixed it.
        assert!(m.read(2, &data(2, 1)).is_err());
    }

    #[test]
    fn flushes_ending_out_of_order_keep_the_newest_durable() {
        let mut m = Model::default();
        m.write_acked(4, 1, false);
        m.flush_issued(1);
        m.flush_issued(2);
        m.flush_done(1, true);
        m.write_acked(4, 2, false);
        m.flush_issued(3);
        m.flush_done(3, true);
        // Flush 2 ends last: it covered version 1 only; version 2 stays durable.
        m.flush_done(2, true);
        m.crash();
        assert!(m.read(4, &data(4, 1)).is_err());
        assert!(m.read(4, &data(4, 2)).is_ok());
    }

    #[test]
    fn a_flush_issued_before_an_ack_does_not_cover_it() {
        let mut m = Model::default();
        m.write_acked(4, 1, false);
        m.flush_issued(1);
        m.write_acked(4, 2, false);
        m.flush_done(1, true);
        m.crash();
        // 1 is durable, 2 may have survived: both allowed, nothing older.
        let mut again = Model::default();
        again.write_acked(4, 1, false);
        again.flush_issued(1);
        again.write_acked(4, 2, false);
        again.flush_done(1, true);
        again.crash();
        assert!(m.read(4, &data(4, 1)).is_ok());
        assert!(again.read(4, &data(4, 2)).is_ok());
        assert!(Model::default().read(4, &data(4, 0)).is_ok());
    }

    #[test]
    fn a_failed_write_may_or_may_not_have_landed() {
        let mut m = Model::default();
        m.write_acked(3, 1, false);
        m.write_failed(3, 2);
        assert!(m.read(3, &data(3, 2)).is_ok());
        let mut m = Model::default();
        m.write_acked(3, 1, false);
        m.write_failed(3, 2);
        assert!(m.read(3, &data(3, 1)).is_ok());
    }
}
