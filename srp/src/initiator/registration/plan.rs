//! Sans-IO planning: which fast-registration regions describe a scatter-gather list.
//!
//! The page rules are those of `ib_map_mr_sg` (and ib_srp's `srp_map_finish_fr`): a region
//! is a list of whole pages; only its first byte may sit inside a page and only its last byte
//! may end inside one. So a segment can continue a region only if the region so far ends on a
//! page boundary and the segment starts on one; otherwise a new region begins. A region
//! also ends when it holds `max_pages` pages. Adjacent segments of one block are merged first.

use super::super::alloc::sync::Arc;
use super::RegError;
use alloc::borrow::Cow;
use alloc::vec::Vec;
use ib_verbs::inline_one::InlineOne;
use ib_verbs::mem::MemBlock;

/// One piece of an I/O buffer: `len` bytes at `offset` of `block` (a StorPort SG element).
#[derive(Clone, Debug)]
pub struct Segment {
    /// The memory holding the bytes.
    pub block: Arc<MemBlock>,
    /// Byte offset in the block (its "physical address").
    pub offset: u64,
    /// Length in bytes.
    pub len: u32,
}

impl Segment {
    /// `len` bytes at `offset` of `block`.
    pub fn new(block: &Arc<MemBlock>, offset: u64, len: u32) -> Self {
        Segment {
            block: Arc::clone(block),
            offset,
            len,
        }
    }
}

/// One fast-registration region to post: the fields of a REG_MR page list, less the key,
/// access rights and I/O address the pool chooses.
#[derive(Clone, Debug)]
pub struct RegionPlan {
    /// Page starts, in region order (one held inline).
    pub pages: InlineOne<(Arc<MemBlock>, u64)>,
    /// Offset of the region's first byte in its first page.
    pub first_byte_offset: u64,
    /// Bytes in the region.
    pub length: u64,
}

impl RegionPlan {
    /// Block offset of the region's first byte (the "physical address" an I/O address is
    /// derived from).
    pub fn first_byte(&self) -> u64 {
        self.pages
            .first()
            .map_or(0, |(_, p)| p + self.first_byte_offset)
    }

    /// Whether the region ends exactly on a page boundary.
    fn ends_on_page(&self, page_size: u64) -> bool {
        (self.first_byte_offset + self.length) % page_size == 0
    }
}

/// Checks every segment and the total: each is non-empty and inside its block, and the sum
/// fits 32 bits. Returns the total.
pub fn check_segments(segments: &[Segment]) -> Result<u32, RegError> {
    let mut total: u64 = 0;
    for (index, s) in segments.iter().enumerate() {
        if s.len == 0 {
            return Err(RegError::EmptySegment { index });
        }
        let inside = usize::try_from(s.offset)
            .ok()
            .and_then(|o| s.block.check_range(o, s.len as usize).ok());
        if inside.is_none() {
            return Err(RegError::SegmentOutOfBlock {
                index,
                offset: s.offset,
                len: s.len,
                block_len: s.block.len(),
            });
        }
        total += u64::from(s.len);
    }
    u32::try_from(total).map_err(|_| RegError::TooLong { total })
}

/// Whether `b` continues `a` in the same block (and the two fit one segment).
fn continues(a: &Segment, b: &Segment) -> bool {
    Arc::ptr_eq(&a.block, &b.block)
        && a.offset + u64::from(a.len) == b.offset
        && u32::try_from(u64::from(a.len) + u64::from(b.len)).is_ok()
}

/// Merges segments that continue each other in the same block. Nothing is copied when no
/// two merge (the usual case: one segment, or the scattered pages of a buffer).
pub fn coalesce(segments: &[Segment]) -> Cow<'_, [Segment]> {
    if !segments.windows(2).any(|w| continues(&w[0], &w[1])) {
        return Cow::Borrowed(segments);
    }
    let mut out: Vec<Segment> = Vec::with_capacity(segments.len());
    for s in segments {
        if let Some(last) = out.last_mut()
            && continues(last, s)
        {
            last.len += s.len;
            continue;
        }
        out.push(s.clone());
    }
    Cow::Owned(out)
}

/// The fewest regions of at most `max_pages` pages of `page_size` bytes that describe
/// `segments` in order under the page rules. `page_size` must be a power of two and
/// `max_pages` at least 1 (the pool checks both when it is built).
pub fn plan_regions(
    segments: &[Segment],
    page_size: u64,
    max_pages: usize,
) -> Result<InlineOne<RegionPlan>, RegError> {
    check_segments(segments)?;
    let mut regions: InlineOne<RegionPlan> = InlineOne::Empty;
    // Pages all the segments touch at most: a region's page list is sized once.
    let most_pages: usize = segments
        .iter()
        .map(|s| ((s.offset % page_size + u64::from(s.len)).div_ceil(page_size)) as usize)
        .sum::<usize>()
        .min(max_pages);
    for s in coalesce(segments).iter() {
        let end = s.offset + u64::from(s.len);
        let mut at = s.offset;
        while at < end {
            let page = at - at % page_size;
            let chunk = (page + page_size).min(end) - at;
            if page + page_size > s.block.len() as u64 {
                return Err(RegError::PageOutOfBlock {
                    offset: page,
                    page_size,
                    block_len: s.block.len(),
                });
            }
            // Continue the open region only at a page boundary on both sides, with room.
            let open = regions.last_mut().filter(|r| {
                at % page_size == 0 && r.ends_on_page(page_size) && r.pages.len() < max_pages
            });
            match open {
                Some(r) => {
                    if r.pages.len() == 1 {
                        r.pages.reserve(most_pages - 1);
                    }
                    r.pages.push((Arc::clone(&s.block), page));
                    r.length += chunk;
                }
                None => regions.push(RegionPlan {
                    pages: InlineOne::One((Arc::clone(&s.block), page)),
                    first_byte_offset: at - page,
                    length: chunk,
                }),
            }
            at += chunk;
        }
    }
    Ok(regions)
}
