//! [`RamBackend`]: a LUN in memory, for tests and scratch LUNs. Contents are lost on restart.

use super::{Backend, BackendError, BlockSize, Op, check_range};
use scsi::{BlockCount, Lba};
use std::path::Path;
use std::sync::{PoisonError, RwLock};

/// The name RAM backends give in errors.
const RAM: &str = "ram";

/// A LUN held in memory.
#[derive(Debug)]
pub struct RamBackend {
    block_size: BlockSize,
    blocks: u64,
    data: RwLock<Vec<u8>>,
}

impl RamBackend {
    /// A zero-filled LUN of `blocks` blocks (at least 1).
    pub fn new(blocks: u64, block_size: BlockSize) -> Result<RamBackend, BackendError> {
        let size = blocks
            .checked_mul(u64::from(block_size.bytes()))
            .and_then(|s| usize::try_from(s).ok())
            .filter(|&s| s > 0)
            .ok_or(BackendError::BadSize {
                op: Op::Open,
                path: RAM.into(),
                size_bytes: blocks.saturating_mul(block_size.bytes().into()),
                why: "zero, or larger than memory can address",
            })?;
        let too_large = |why| BackendError::BadSize {
            op: Op::Open,
            path: RAM.into(),
            size_bytes: size as u64,
            why,
        };
        // More than the memory available now would be killed when touched, or abort the
        // process when refused: an error at start instead.
        if super::memory_available().is_some_and(|avail| size as u64 > avail) {
            return Err(too_large(
                "larger than the memory available now (MemAvailable)",
            ));
        }
        let mut data = Vec::new();
        data.try_reserve_exact(size)
            .map_err(|_| too_large("the memory for it could not be allocated"))?;
        data.resize(size, 0);
        Ok(RamBackend {
            block_size,
            blocks,
            data: RwLock::new(data),
        })
    }

    fn range(&self, op: Op, lba: Lba, len: usize) -> Result<usize, BackendError> {
        let off = check_range(op, Path::new(RAM), self.block_size, self.blocks, lba, len)?;
        // Below the allocation size, which is a usize.
        Ok(off as usize)
    }
}

// A poisoned lock only means a writer panicked mid-copy: the bytes are still bytes, as a
// disk after a crash, so the data is used as it is.
impl Backend for RamBackend {
    fn never_blocks(&self) -> bool {
        true
    }

    fn is_volatile(&self) -> bool {
        true
    }

    fn block_size(&self) -> BlockSize {
        self.block_size
    }

    fn blocks(&self) -> u64 {
        self.blocks
    }

    fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        let off = self.range(Op::Read, lba, buf.len())?;
        let data = self.data.read().unwrap_or_else(PoisonError::into_inner);
        buf.copy_from_slice(&data[off..off + buf.len()]);
        Ok(())
    }

    fn read_into(&self, lba: Lba, dst: super::MemSpan<'_>) -> Result<(), BackendError> {
        let off = self.range(Op::Read, lba, dst.len)?;
        let data = self.data.read().unwrap_or_else(PoisonError::into_inner);
        dst.block
            .write(dst.offset, &data[off..off + dst.len])
            .map_err(|e| super::span_error(Op::Read, e))
    }

    fn write_from(&self, lba: Lba, src: super::MemSpan<'_>) -> Result<(), BackendError> {
        let off = self.range(Op::Write, lba, src.len)?;
        let mut data = self.data.write().unwrap_or_else(PoisonError::into_inner);
        src.block
            .read(src.offset, &mut data[off..off + src.len])
            .map_err(|e| super::span_error(Op::Write, e))
    }

    fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), BackendError> {
        let off = self.range(Op::Write, lba, buf.len())?;
        let mut data = self.data.write().unwrap_or_else(PoisonError::into_inner);
        data[off..off + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn flush(&self) -> Result<(), BackendError> {
        Ok(())
    }

    fn unmap(&self, lba: Lba, blocks: BlockCount) -> Result<(), BackendError> {
        let len = usize::try_from(blocks.bytes(self.block_size.bytes())).unwrap_or(usize::MAX);
        let off = self.range(Op::Unmap, lba, len)?;
        let mut data = self.data.write().unwrap_or_else(PoisonError::into_inner);
        data[off..off + len].fill(0);
        Ok(())
    }
}
