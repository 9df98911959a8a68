//! The drill's block format: every block written carries the run, its LBA, a generation and
//! a CRC32, so a read can tell a good block from a corrupt, misdirected or stale one.
//!
//! | bytes  | field                                                        |
//! |--------|--------------------------------------------------------------|
//! | 0..8   | magic `SRPDRILL`                                             |
//! | 8..16  | run id (little endian; a new one per drill)                  |
//! | 16..24 | LBA of the block's first sector (little endian)              |
//! | 24..32 | generation: 1 for the first write of the block in this run   |
//! | 32..36 | CRC32 (IEEE, crc32fast) of the whole block with this field 0 |
//! | 36..40 | reserved, 0                                                  |
//! | 40..   | a pattern drawn from (run, LBA, generation)                  |

/// The block's first bytes.
const MAGIC: &[u8; 8] = b"SRPDRILL";
/// Bytes before the pattern.
pub(crate) const HEADER_LEN: usize = 40;
const CRC: std::ops::Range<usize> = 32..36;

/// What a block read back should hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Expect {
    /// The drill's run id.
    pub(crate) run: u64,
    /// The block's LBA.
    pub(crate) lba: u64,
    /// The last generation whose write was acknowledged (0: none yet).
    pub(crate) acked: u64,
    /// A generation whose write failed: it may or may not have reached the disk.
    pub(crate) uncertain: Option<u64>,
}

/// Why a block read back is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// Not a drill block at all, or its CRC does not match: corrupted.
    Corrupt {
        /// The LBA read.
        lba: u64,
    },
    /// A good block of another LBA: a misdirected write or read.
    WrongLba {
        /// The LBA read.
        lba: u64,
        /// The LBA the block was written for.
        found: u64,
    },
    /// A good block of an earlier run: this run's acknowledged write is lost.
    OtherRun {
        /// The LBA read.
        lba: u64,
        /// The generation acknowledged.
        acked: u64,
    },
    /// A good block of another generation than the last acknowledged one.
    Stale {
        /// The LBA read.
        lba: u64,
        /// The generation found.
        found: u64,
        /// The generation acknowledged.
        acked: u64,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Mismatch::Corrupt { lba } => write!(f, "LBA {lba}: corrupt block (bad magic or CRC)"),
            Mismatch::WrongLba { lba, found } => {
                write!(f, "LBA {lba}: holds the block written for LBA {found}")
            }
            Mismatch::OtherRun { lba, acked } => write!(
                f,
                "LBA {lba}: holds a block of another run (acknowledged generation {acked} lost)"
            ),
            Mismatch::Stale { lba, found, acked } => write!(
                f,
                "LBA {lba}: generation {found}, but generation {acked} was acknowledged"
            ),
        }
    }
}

fn u64_at(block: &[u8], at: usize) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(&block[at..at + 8]);
    u64::from_le_bytes(b)
}

fn crc(block: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&block[..CRC.start]);
    h.update(&[0; 4]);
    h.update(&block[CRC.end..]);
    h.finalize()
}

/// Fills `block` (at least [`HEADER_LEN`] bytes) as generation `generation` of `lba` in run
/// `run`.
pub(crate) fn encode(block: &mut [u8], run: u64, lba: u64, generation: u64) {
    debug_assert!(block.len() >= HEADER_LEN);
    block[..8].copy_from_slice(MAGIC);
    block[8..16].copy_from_slice(&run.to_le_bytes());
    block[16..24].copy_from_slice(&lba.to_le_bytes());
    block[24..32].copy_from_slice(&generation.to_le_bytes());
    block[32..HEADER_LEN].fill(0);
    // xorshift64 seeded by the header: each generation's bytes differ everywhere.
    let mut x = (run ^ lba.rotate_left(21) ^ generation.rotate_left(42)) | 1;
    for chunk in block[HEADER_LEN..].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    let sum = crc(block);
    block[CRC].copy_from_slice(&sum.to_le_bytes());
}

/// Checks a block read back against what the drill acknowledged; `Ok` with the generation
/// found (0: not a block of this run, acceptable only before the first acknowledged write).
pub(crate) fn verify(block: &[u8], want: Expect) -> Result<u64, Mismatch> {
    let lba = want.lba;
    let intact =
        block.len() >= HEADER_LEN && &block[..8] == MAGIC && block[CRC] == crc(block).to_le_bytes();
    if !intact {
        // Never acknowledged: whatever was there before the drill.
        return if want.acked == 0 {
            Ok(0)
        } else {
            Err(Mismatch::Corrupt { lba })
        };
    }
    if u64_at(block, 8) != want.run {
        return if want.acked == 0 {
            Ok(0)
        } else {
            Err(Mismatch::OtherRun {
                lba,
                acked: want.acked,
            })
        };
    }
    let found = u64_at(block, 16);
    if found != lba {
        return Err(Mismatch::WrongLba { lba, found });
    }
    let generation = u64_at(block, 24);
    if generation == want.acked || Some(generation) == want.uncertain {
        Ok(generation)
    } else {
        Err(Mismatch::Stale {
            lba,
            found: generation,
            acked: want.acked,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(run: u64, lba: u64, generation: u64) -> Vec<u8> {
        let mut b = vec![0xa5; 4096];
        encode(&mut b, run, lba, generation);
        b
    }

    fn expect(lba: u64, acked: u64) -> Expect {
        Expect {
            run: 7,
            lba,
            acked,
            uncertain: None,
        }
    }

    #[test]
    fn a_written_block_verifies() {
        let b = block(7, 24, 3);
        assert_eq!(&b[..8], b"SRPDRILL");
        assert_eq!(u64_at(&b, 16), 24);
        assert_eq!(u64_at(&b, 24), 3);
        assert_eq!(&b[36..40], &[0; 4]);
        assert_eq!(verify(&b, expect(24, 3)), Ok(3));
        // Generations differ in their pattern, not only their header.
        let other = block(7, 24, 4);
        assert_ne!(b[HEADER_LEN..], other[HEADER_LEN..]);
        // A 512-byte block works as well.
        let mut small = vec![0; 512];
        encode(&mut small, 7, 1, 1);
        assert_eq!(verify(&small, expect(1, 1)), Ok(1));
    }

    #[test]
    fn corruption_anywhere_is_detected() {
        let good = block(7, 24, 3);
        for at in [0, 9, 17, 25, 33, 37, 40, 2000, 4095] {
            let mut b = good.clone();
            b[at] ^= 0x10;
            let got = verify(&b, expect(24, 3));
            assert_eq!(got, Err(Mismatch::Corrupt { lba: 24 }), "byte {at}");
        }
        assert_eq!(
            verify(&[0; 4096], expect(24, 3)),
            Err(Mismatch::Corrupt { lba: 24 })
        );
    }

    #[test]
    fn stale_misdirected_and_foreign_blocks_are_detected() {
        // An older generation: the acknowledged write was lost.
        assert_eq!(
            verify(&block(7, 24, 2), expect(24, 3)),
            Err(Mismatch::Stale {
                lba: 24,
                found: 2,
                acked: 3
            })
        );
        // Another LBA's block.
        assert_eq!(
            verify(&block(7, 25, 3), expect(24, 3)),
            Err(Mismatch::WrongLba { lba: 24, found: 25 })
        );
        // An earlier run's block where this run acknowledged a write.
        assert_eq!(
            verify(&block(6, 24, 3), expect(24, 3)),
            Err(Mismatch::OtherRun { lba: 24, acked: 3 })
        );
    }

    #[test]
    fn uncertain_writes_and_unwritten_blocks_are_accepted() {
        // A write that failed may have landed, or not.
        let want = Expect {
            uncertain: Some(4),
            ..expect(24, 3)
        };
        assert_eq!(verify(&block(7, 24, 4), want), Ok(4));
        assert_eq!(verify(&block(7, 24, 3), want), Ok(3));
        assert!(verify(&block(7, 24, 5), want).is_err());
        // Before any acknowledged write: whatever the disk held.
        assert_eq!(verify(&[0; 4096], expect(24, 0)), Ok(0));
        assert_eq!(verify(&block(6, 24, 9), expect(24, 0)), Ok(0));
    }
}
