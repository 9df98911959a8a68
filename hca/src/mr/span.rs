//! [`MrSpan`]: a checked, resolved view of part of a memory region.

use core::ops::Range;
use std::sync::Arc;

use super::MrError;
use crate::mem::{MemBlock, MemError};

/// The page list of a fast-registered MR: byte `x` of the region is at
/// `first_byte_offset + x` in the concatenation of the pages.
#[derive(Debug, Default)]
pub(super) struct PageList {
    pub(super) pages: Vec<(Arc<MemBlock>, usize)>,
    pub(super) page_shift: u32,
    pub(super) first_byte_offset: u64,
}

/// Where the bytes of a region live.
#[derive(Debug, Clone)]
pub(super) enum Mapping {
    /// No bytes (zero-length access, C9-88).
    Empty,
    /// One span of one block starting at `offset` (regular MR).
    Contiguous {
        /// The block.
        block: Arc<MemBlock>,
        /// Offset of the region's first byte.
        offset: usize,
    },
    /// Pages (fast-registration MR).
    Paged(Arc<PageList>),
}

/// A range of a memory region that passed [`MrTable::check`](super::MrTable::check).
///
/// It owns clones of the `Arc`s it needs, so it stays usable after the table lock is released
/// (an invalidation after `check` does not revoke it: the engine re-checks per packet where rxe
/// does, e.g. `rxe_recheck_mr` for long reads). Offsets are relative to the span's first byte.
#[derive(Debug, Clone)]
pub struct MrSpan {
    map: Mapping,
    /// Offset of the span's first byte in the mapping.
    start: u64,
    len: u64,
}

impl MrSpan {
    /// The span of a zero-length access, which needs no key (IBTA C9-88).
    pub fn empty() -> MrSpan {
        MrSpan {
            map: Mapping::Empty,
            start: 0,
            len: 0,
        }
    }

    /// A span of `map`; the caller has checked `start + len` against the mapping.
    pub(super) fn new(map: Mapping, start: u64, len: u64) -> MrSpan {
        MrSpan { map, start, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the span has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sub-span `offset .. offset + len`.
    pub fn slice(&self, offset: u64, len: u64) -> Result<MrSpan, MrError> {
        self.inside(offset, len)?;
        Ok(MrSpan {
            map: self.map.clone(),
            start: self.start + offset,
            len,
        })
    }

    /// Copies `dst.len()` bytes from `offset` of the span into `dst`.
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), MrError> {
        self.walk(offset, dst.len(), |block, at, range| {
            block.read(at, &mut dst[range])
        })
    }

    /// Copies `src` into the span at `offset`.
    pub fn write(&self, offset: u64, src: &[u8]) -> Result<(), MrError> {
        self.walk(offset, src.len(), |block, at, range| {
            block.write(at, &src[range])
        })
    }

    /// Copies `len` bytes from `offset` of this span to `dst_offset` of `dst` (front to back;
    /// overlapping spans of the same memory get an unspecified mix, as with RDMA).
    pub fn copy_to(
        &self,
        offset: u64,
        dst: &MrSpan,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), MrError> {
        self.inside(offset, len)?;
        dst.inside(dst_offset, len)?;
        let mut bounce = [0u8; 4096];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(bounce.len() as u64);
            // n <= 4096, so the cast is exact.
            let chunk = &mut bounce[..n as usize];
            self.read(offset + done, chunk)?;
            dst.write(dst_offset + done, chunk)?;
            done += n;
        }
        Ok(())
    }

    /// `offset .. offset + len` must lie inside the span.
    fn inside(&self, offset: u64, len: u64) -> Result<(), MrError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(MrError::OutOfSpan {
                offset,
                len,
                span_len: self.len,
            }),
        }
    }

    /// Calls `f(block, offset_in_block, range_in_buffer)` for each contiguous piece of
    /// `offset .. offset + len`, in order.
    fn walk(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(&MemBlock, usize, Range<usize>) -> Result<(), MemError>,
    ) -> Result<(), MrError> {
        // usize is at most 64 bits on every target.
        let len64 = len as u64;
        self.inside(offset, len64)?;
        // Cannot overflow: start + len of the span were checked against the region.
        let pos = self.start + offset;
        let done = match &self.map {
            Mapping::Empty => Ok(()),
            Mapping::Contiguous {
                block,
                offset: base,
            } => usize::try_from(pos)
                .ok()
                .and_then(|p| p.checked_add(*base))
                .ok_or(())
                .and_then(|at| f(block, at, 0..len).map_err(|_| ())),
            Mapping::Paged(list) => walk_pages(list, pos, len, f),
        };
        // Unreachable for spans built by `check`, which validated the mapping.
        done.map_err(|()| MrError::OutOfSpan {
            offset,
            len: len64,
            span_len: self.len,
        })
    }
}

/// The paged arm of [`MrSpan::walk`]: `pos` is the region offset of the first byte.
fn walk_pages(
    list: &PageList,
    pos: u64,
    len: usize,
    mut f: impl FnMut(&MemBlock, usize, Range<usize>) -> Result<(), MemError>,
) -> Result<(), ()> {
    let page_size = 1u64 << list.page_shift;
    let mut p = list.first_byte_offset.checked_add(pos).ok_or(())?;
    let mut done = 0usize;
    while done < len {
        let page = usize::try_from(p >> list.page_shift).map_err(|_| ())?;
        let within = p & (page_size - 1);
        let (block, base) = list.pages.get(page).ok_or(())?;
        // Both are below page_size (<= 2 MiB) or len, so they fit usize.
        let room = usize::try_from(page_size - within).map_err(|_| ())?;
        let n = room.min(len - done);
        let at = usize::try_from(within)
            .ok()
            .and_then(|w| base.checked_add(w))
            .ok_or(())?;
        f(block, at, done..done + n).map_err(|_| ())?;
        done += n;
        p += n as u64;
    }
    Ok(())
}
