//! Seeded model check: random page layouts and random span reads, writes and copies compared
//! with a plain `Vec<u8>`, then every byte looked up where the layout says it lives.

use std::sync::Arc;

use super::*;
use crate::mem::MemBlock;

const PD: PdId = PdId(1);

fn rw() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// splitmix64: a tiny seeded PRNG so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random region (fast-reg over shuffled, misaligned pages or regular) and where each byte
/// of it lives.
fn random_region(rng: &mut Rng, t: &mut MrTable) -> (MrKey, u64, Vec<(Arc<MemBlock>, usize)>) {
    let iova = rng.next() >> 1;
    if rng.below(4) == 0 {
        let block = MemBlock::new(1 + rng.below(20_000) as usize);
        let off = rng.below(block.len() as u64);
        let len = rng.below(block.len() as u64 - off + 1);
        let keys = t
            .reg_mr(PD, Arc::clone(&block), off, len, iova, rw())
            .expect("fits");
        let bytes = (0..len as usize)
            .map(|x| (Arc::clone(&block), off as usize + x))
            .collect();
        return (keys.lkey.into(), iova, bytes);
    }
    let ps = 4096u64 << rng.below(3);
    let jitter = [rng.below(8), rng.below(8)];
    let blocks = [0, 1].map(|i| MemBlock::new((8 * ps + jitter[i]) as usize));
    let mut slots: Vec<(usize, u64)> = (0..2).flat_map(|b| (0..8).map(move |s| (b, s))).collect();
    let n = 1 + rng.below(8) as usize;
    let pages: Vec<(Arc<MemBlock>, u64)> = (0..n)
        .map(|_| {
            let (b, s) = slots.swap_remove(rng.below(slots.len() as u64) as usize);
            (Arc::clone(&blocks[b]), s * ps + jitter[b])
        })
        .collect();
    let fbo = rng.below(ps);
    let length = rng.below(n as u64 * ps - fbo + 1);
    let keys = t.alloc_fast_reg_mr(PD, 8).expect("alloc");
    let key = MrKey::from(keys.lkey).next_variant();
    let wr = FastRegWr {
        key,
        pages: &pages,
        page_size: ps,
        first_byte_offset: fbo,
        iova,
        length,
        access: rw(),
    };
    t.fast_reg(PD, keys.index(), &wr).expect("valid layout");
    let bytes = (0..length)
        .map(|x| {
            let p = fbo + x;
            let (block, base) = &pages[(p / ps) as usize];
            (Arc::clone(block), (base + p % ps) as usize)
        })
        .collect();
    (key, iova, bytes)
}

#[test]
fn spans_match_a_vec_model() {
    for seed in 0..200u64 {
        let mut rng = Rng(seed);
        let mut t = MrTable::new(8);
        let (key, iova, where_) = random_region(&mut rng, &mut t);
        let len = where_.len();
        let mut model = vec![0u8; len];
        for step in 0..60 {
            let off = rng.below(len as u64 + 1) as usize;
            let n = rng.below((len - off) as u64 + 1) as usize;
            let span = t
                .check(
                    PD,
                    key,
                    rng.below(2) == 0,
                    iova + off as u64,
                    n as u64,
                    Access::LOCAL_WRITE,
                )
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            let inner = rng.below(n as u64 + 1) as usize;
            let m = rng.below((n - inner) as u64 + 1) as usize;
            match rng.below(3) {
                0 => {
                    let data = pattern(m, rng.next() as u8);
                    span.write(inner as u64, &data).expect("inside");
                    model[off + inner..off + inner + m].copy_from_slice(&data);
                }
                1 => {
                    let mut got = vec![0u8; m];
                    span.read(inner as u64, &mut got).expect("inside");
                    assert_eq!(
                        got,
                        model[off + inner..off + inner + m],
                        "seed {seed} step {step}"
                    );
                }
                _ => {
                    let dst_off = rng.below(len as u64 - m as u64 + 1) as usize;
                    let dst = t
                        .check(PD, key, false, iova, len as u64, Access::LOCAL_WRITE)
                        .expect("whole");
                    if dst_off + m <= off + inner || off + inner + m <= dst_off {
                        span.copy_to(inner as u64, &dst, dst_off as u64, m as u64)
                            .expect("inside");
                        model.copy_within(off + inner..off + inner + m, dst_off);
                    }
                }
            }
            assert!(
                span.read(inner as u64, &mut vec![0u8; n - inner + 1])
                    .is_err()
            );
        }
        for (x, (block, at)) in where_.iter().enumerate() {
            let mut one = [0u8];
            block.read(*at, &mut one).expect("in block");
            assert_eq!(one[0], model[x], "seed {seed}: byte {x} in the wrong place");
        }
    }
}
