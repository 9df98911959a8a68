//! Page rules of [`plan_regions`].

use super::RegError;
use super::plan::{Segment, coalesce, plan_regions};
use ib_verbs::mem::MemBlock;
use std::sync::Arc;

const P: u64 = 4096;

fn seg(b: &Arc<MemBlock>, offset: u64, len: u64) -> Segment {
    Segment::new(b, offset, len as u32)
}

/// (page starts, first byte offset, length) of each region.
fn shape(segs: &[Segment], max_pages: usize) -> Vec<(Vec<u64>, u64, u64)> {
    plan_regions(segs, P, max_pages)
        .expect("plan")
        .into_iter()
        .map(|r| {
            let pages = r.pages.iter().map(|(_, o)| o / P).collect();
            (pages, r.first_byte_offset, r.length)
        })
        .collect()
}

#[test]
fn one_contiguous_buffer_is_one_region() {
    let b = MemBlock::new(64 * P as usize);
    let got = shape(&[seg(&b, 3 * P + 100, 2 * P)], 16);
    assert_eq!(got, [(vec![3, 4, 5], 100, 2 * P)]);
}

#[test]
fn scattered_aligned_pages_join_one_region() {
    let b = MemBlock::new(64 * P as usize);
    // first starts mid-page and ends on a boundary, middle pages whole, last ends mid-page
    let segs = [
        seg(&b, 10 * P + 512, P - 512),
        seg(&b, 3 * P, P),
        seg(&b, 7 * P, 2 * P),
        seg(&b, 20 * P, 300),
    ];
    let got = shape(&segs, 16);
    assert_eq!(got, [(vec![10, 3, 7, 8, 20], 512, 4 * P - 512 + 300)]);
}

#[test]
fn a_gap_inside_a_page_starts_a_new_region() {
    let b = MemBlock::new(64 * P as usize);
    let segs = [
        seg(&b, 10 * P + 512, P - 512),
        seg(&b, 3 * P, 1000), // ends mid-page: what follows cannot join
        seg(&b, 7 * P, P),
        seg(&b, 9 * P + 8, 100), // starts mid-page: cannot join either
        seg(&b, 30 * P, 200),
    ];
    let got = shape(&segs, 16);
    assert_eq!(
        got,
        [
            (vec![10, 3], 512, P - 512 + 1000),
            (vec![7], 0, P),
            (vec![9], 8, 100),
            (vec![30], 0, 200),
        ]
    );
}

#[test]
fn adjacent_segments_are_merged_first() {
    let b = MemBlock::new(64 * P as usize);
    let segs = [seg(&b, 100, 50), seg(&b, 150, 4000), seg(&b, 4150, 10)];
    assert_eq!(coalesce(&segs).len(), 1);
    assert_eq!(shape(&segs, 4), [(vec![0, 1], 100, 4060)]);
}

#[test]
fn a_full_region_spills_into_the_next_at_a_page_boundary() {
    let b = MemBlock::new(64 * P as usize);
    let got = shape(&[seg(&b, 100, 5 * P)], 2);
    assert_eq!(
        got,
        [
            (vec![0, 1], 100, 2 * P - 100),
            (vec![2, 3], 0, 2 * P),
            (vec![4, 5], 0, P + 100)
        ]
    );
}

#[test]
fn bad_segments_are_refused() {
    let b = MemBlock::new(4 * P as usize);
    let err = |segs: &[Segment]| plan_regions(segs, P, 8).expect_err("refused");
    assert_eq!(err(&[seg(&b, 0, 0)]), RegError::EmptySegment { index: 0 });
    assert!(matches!(
        err(&[seg(&b, 0, 1), seg(&b, 4 * P - 1, 2)]),
        RegError::SegmentOutOfBlock { index: 1, .. }
    ));
    let odd = MemBlock::new(P as usize + 10);
    assert!(matches!(
        err(&[seg(&odd, P, 10)]),
        RegError::PageOutOfBlock { offset: P, .. }
    ));
}

/// Byte `x` of a region, through its page list.
fn region_byte(r: &super::RegionPlan, x: u64) -> u8 {
    let at = r.first_byte_offset + x;
    let (block, page) = &r.pages[(at / P) as usize];
    let mut b = [0u8];
    block
        .read((page + at % P) as usize, &mut b)
        .expect("in block");
    b[0]
}

#[test]
fn random_lists_are_described_exactly_and_within_the_rules() {
    let b = MemBlock::new(64 * P as usize);
    let bytes: Vec<u8> = (0..64 * P).map(|i| (i * 7 + i / 4096) as u8).collect();
    b.write(0, &bytes).expect("fill");
    for seed in 0..300u64 {
        let mut rng = hca::sim::Rng::new(seed);
        let n = rng.range(1, 7) as usize;
        let segs: Vec<Segment> = (0..n)
            .map(|_| {
                let page = rng.range(0, 60);
                // Often aligned, sometimes not, at either end.
                let start = if rng.range(0, 2) == 0 {
                    0
                } else {
                    rng.range(0, P)
                };
                let len = rng.range(1, 3 * P - start);
                seg(&b, page * P + start, len)
            })
            .collect();
        let max_pages = rng.range(1, 6) as usize;
        let regions = plan_regions(&segs, P, max_pages).expect("plan");
        let want: Vec<u8> = segs
            .iter()
            .flat_map(|s| bytes[s.offset as usize..][..s.len as usize].to_vec())
            .collect();
        let mut got = Vec::new();
        for r in &regions {
            assert!(r.pages.len() <= max_pages, "seed {seed}");
            assert!(r.first_byte_offset < P, "seed {seed}");
            assert!(r.first_byte_offset + r.length <= r.pages.len() as u64 * P);
            assert!(r.first_byte_offset + r.length > (r.pages.len() as u64 - 1) * P);
            got.extend((0..r.length).map(|x| region_byte(r, x)));
        }
        assert!(
            got == want,
            "seed {seed}: the regions hold the buffer's bytes in order"
        );
    }
}
