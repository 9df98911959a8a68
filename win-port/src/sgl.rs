//! The scatter-gather list the port builds for an SRB's data buffer (as
//! `StorPortGetScatterGatherList`): one element per page of the buffer, at the physical
//! addresses of its pages in system memory ([`crate::memory`]), which descend — so a
//! miniport that assumes one flat buffer is caught. The list is computed from the buffer's
//! page run (nothing is allocated per request). The miniport moves data only through
//! [`ScatterGatherList`] lookups (the one checked access path): an address range must lie
//! inside one element.
#[allow(unused_imports)]
use crate::prelude::*;

pub use crate::memory::PAGE_SIZE;

/// Why a data access through the scatter-gather list failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SglError {
    /// The range is not inside one element of the list.
    #[error("physical range {address:#x}+{len} is not inside one scatter-gather element")]
    OutOfList {
        /// Start of the range.
        address: u64,
        /// Its length in bytes.
        len: usize,
    },
    /// The range runs past the end of the data buffer.
    #[error("buffer range {offset}+{len} runs past the {total} bytes of the data buffer")]
    OutOfBuffer {
        /// Offset into the buffer.
        offset: usize,
        /// Its length in bytes.
        len: usize,
        /// The buffer's length.
        total: usize,
    },
}

/// One element: a physically contiguous piece of the buffer (`STOR_SCATTER_GATHER_ELEMENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgElement {
    /// Its physical address (a byte offset of system memory).
    pub physical_address: u64,
    /// Its length in bytes (at most [`PAGE_SIZE`]).
    pub length: u32,
}

/// The list (`STOR_SCATTER_GATHER_LIST`); valid until the SRB completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScatterGatherList {
    /// First frame of the buffer's page run.
    first: usize,
    /// Frames in the run.
    pages: usize,
    /// Bytes of the buffer.
    total: usize,
}

impl ScatterGatherList {
    /// The list of a buffer of `total` bytes on the `pages` frames from `first`.
    pub fn new(first: usize, pages: usize, total: usize) -> ScatterGatherList {
        debug_assert_eq!(pages, total.div_ceil(PAGE_SIZE));
        ScatterGatherList {
            first,
            pages,
            total,
        }
    }

    /// Element `i`: page `i` of the buffer sits on frame `first + pages - 1 - i`.
    pub fn element(&self, i: usize) -> Option<SgElement> {
        (i < self.pages).then(|| self.at(i))
    }

    /// Element `i < pages`.
    fn at(&self, i: usize) -> SgElement {
        let frame = self.first + self.pages - 1 - i;
        SgElement {
            physical_address: (frame * PAGE_SIZE) as u64,
            length: (self.total - i * PAGE_SIZE).min(PAGE_SIZE) as u32,
        }
    }

    /// The elements, in buffer order.
    pub fn elements(&self) -> impl ExactSizeIterator<Item = SgElement> + '_ {
        (0..self.pages).map(|i| self.at(i))
    }

    /// How many elements.
    pub fn len(&self) -> usize {
        self.pages
    }

    /// Whether there are none (no data buffer).
    pub fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// The buffer's length in bytes.
    pub fn total_len(&self) -> usize {
        self.total
    }

    /// The buffer offset of the physical range `address..address+len`.
    pub fn offset_of(&self, address: u64, len: usize) -> Result<usize, SglError> {
        let out = SglError::OutOfList { address, len };
        let frame = usize::try_from(address).map_err(|_| out.clone())? / PAGE_SIZE;
        if frame < self.first || frame >= self.first + self.pages {
            return Err(out);
        }
        let i = self.first + self.pages - 1 - frame;
        let e = self.element(i).ok_or(out.clone())?;
        let within = (address - e.physical_address) as usize;
        let end = within.checked_add(len).ok_or(out.clone())?;
        if end > e.length as usize {
            return Err(out);
        }
        Ok(i * PAGE_SIZE + within)
    }

    /// The pieces of buffer range `offset..offset+len`, split at element boundaries:
    /// `(offset in the buffer, physical address, length)`.
    pub fn pieces(
        &self,
        offset: usize,
        len: usize,
    ) -> Result<impl Iterator<Item = (usize, u64, usize)> + '_, SglError> {
        let end = offset.checked_add(len).filter(|&e| e <= self.total);
        let Some(end) = end else {
            return Err(SglError::OutOfBuffer {
                offset,
                len,
                total: self.total,
            });
        };
        let mut at = offset;
        Ok(core::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let e = self.element(at / PAGE_SIZE)?;
            let within = at % PAGE_SIZE;
            let n = (e.length as usize - within).min(end - at);
            let piece = (at, e.physical_address + within as u64, n);
            at += n;
            Some(piece)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_discontiguous_and_lookups_checked() {
        let sg = ScatterGatherList::new(0x100, 3, 2 * PAGE_SIZE + 100);
        let e: Vec<SgElement> = sg.elements().collect();
        assert_eq!(e.len(), 3);
        assert_eq!(e[2].length, 100);
        assert_ne!(
            e[0].physical_address + PAGE_SIZE as u64,
            e[1].physical_address
        );
        assert_eq!(
            sg.offset_of(e[1].physical_address + 8, 16),
            Ok(PAGE_SIZE + 8)
        );
        assert!(
            sg.offset_of(e[0].physical_address + 4000, 200).is_err(),
            "crosses a break"
        );
        assert!(
            sg.offset_of(e[2].physical_address + 100, 1).is_err(),
            "past the end"
        );
        assert!(
            sg.offset_of(0x50 * PAGE_SIZE as u64, 1).is_err(),
            "not ours"
        );
        let p: Vec<_> = sg.pieces(PAGE_SIZE - 10, 20).expect("in range").collect();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1], (PAGE_SIZE, e[1].physical_address, 10));
        assert!(sg.pieces(2 * PAGE_SIZE + 90, 11).is_err());
        assert!(ScatterGatherList::default().elements().next().is_none());
    }
}
