//! The scatter-gather list the port builds for an SRB's data buffer (as
//! `StorPortGetScatterGatherList`): one element per page the buffer touches, at "physical"
//! addresses that are not contiguous (every other page frame), so a miniport that assumes
//! one flat buffer is caught. The miniport moves data only through [`ScatterGatherList`]
//! lookups (the one checked access path): an address range must lie inside one element.

use std::sync::atomic::{AtomicU64, Ordering};

/// The page size of the emulated machine.
pub const PAGE_SIZE: usize = 4096;

/// Page frames handed out so far (the emulated physical memory never runs out).
static NEXT_FRAME: AtomicU64 = AtomicU64::new(0x100);

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
    /// Its physical address.
    pub physical_address: u64,
    /// Its length in bytes (at most [`PAGE_SIZE`]).
    pub length: u32,
}

/// The list (`STOR_SCATTER_GATHER_LIST`); valid until the SRB completes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScatterGatherList {
    elements: Vec<SgElement>,
    total: usize,
}

impl ScatterGatherList {
    /// The list for a page-aligned buffer of `len` bytes, on fresh page frames.
    pub(crate) fn build(len: usize) -> ScatterGatherList {
        let pages = len.div_ceil(PAGE_SIZE);
        // Two frames per page: the odd ones stay unused, so no two elements touch.
        let first = NEXT_FRAME.fetch_add(2 * pages as u64, Ordering::Relaxed);
        let elements = (0..pages)
            .map(|i| SgElement {
                physical_address: (first + 2 * i as u64) * PAGE_SIZE as u64,
                length: (len - i * PAGE_SIZE).min(PAGE_SIZE) as u32,
            })
            .collect();
        ScatterGatherList {
            elements,
            total: len,
        }
    }

    /// The elements, in buffer order.
    pub fn elements(&self) -> &[SgElement] {
        &self.elements
    }

    /// The buffer's length in bytes.
    pub fn total_len(&self) -> usize {
        self.total
    }

    /// The buffer offset of the physical range `address..address+len`.
    pub fn offset_of(&self, address: u64, len: usize) -> Result<usize, SglError> {
        let out = SglError::OutOfList { address, len };
        let (i, e) = self
            .elements
            .iter()
            .enumerate()
            .find(|(_, e)| {
                address >= e.physical_address && address < e.physical_address + u64::from(e.length)
            })
            .ok_or(out.clone())?;
        let within = (address - e.physical_address) as usize;
        let end = within.checked_add(len).ok_or(out.clone())?;
        if end > e.length as usize {
            return Err(out);
        }
        Ok(i * PAGE_SIZE + within)
    }

    /// The pieces of buffer range `offset..offset+len`, split at element boundaries:
    /// `(offset in the buffer, physical address, length)`.
    pub fn pieces(&self, offset: usize, len: usize) -> Result<Vec<(usize, u64, usize)>, SglError> {
        let end = offset.checked_add(len).filter(|&e| e <= self.total);
        let Some(end) = end else {
            return Err(SglError::OutOfBuffer {
                offset,
                len,
                total: self.total,
            });
        };
        let mut out = Vec::new();
        let mut at = offset;
        while at < end {
            let e = self.elements[at / PAGE_SIZE];
            let within = at % PAGE_SIZE;
            let n = (e.length as usize - within).min(end - at);
            out.push((at, e.physical_address + within as u64, n));
            at += n;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_discontiguous_and_lookups_checked() {
        let sg = ScatterGatherList::build(2 * PAGE_SIZE + 100);
        let e = sg.elements();
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
        let p = sg.pieces(PAGE_SIZE - 10, 20).expect("in range");
        assert_eq!(p.len(), 2);
        assert_eq!(p[1], (PAGE_SIZE, e[1].physical_address, 10));
        assert!(sg.pieces(2 * PAGE_SIZE + 90, 11).is_err());
        assert!(ScatterGatherList::build(0).elements().is_empty());
    }
}
