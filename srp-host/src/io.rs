//! Byte-addressed I/O over a [`BlockDevice`].
//!
//! Contract: [`read_at`] and [`write_at`] accept any byte offset and length. Reads past the end
//! are short (EOF); writes past the end are short, and a write starting at or past the end
//! fails with [`IoError::NoSpace`] — a block file never grows, as a block device. Each call
//! reaches the device once per edge block it must read plus one read or write of the whole
//! range, never block by block. A write holds the blocks it touches in the caller's
//! [`RangeLock`] for its whole read-modify-write, so concurrent unaligned writers sharing an
//! edge block cannot undo each other.

use scsi::Lba;

use crate::device::{BlockDevice, DeviceError};
use crate::range_lock::RangeLock;

/// Why a byte-range I/O failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum IoError {
    /// The write starts at or past the end of the disk (`size` bytes): ENOSPC, as a block device.
    #[error("write at byte {offset} is past the end of the disk ({size} bytes)")]
    NoSpace {
        /// The offset of the write.
        offset: u64,
        /// The size of the disk in bytes.
        size: u64,
    },
    /// The device reports a block size of zero or a size beyond 64 bits.
    #[error("device geometry unusable: {block_size} bytes × {blocks} blocks")]
    Geometry {
        /// The reported block size.
        block_size: u32,
        /// The reported capacity in blocks.
        blocks: u64,
    },
    /// The device failed the I/O.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// The byte size of a device, checked.
pub(crate) fn size_bytes(dev: &dyn BlockDevice) -> Result<u64, IoError> {
    let (block_size, blocks) = (dev.block_size(), dev.capacity_blocks());
    blocks
        .checked_mul(u64::from(block_size))
        .filter(|_| block_size != 0)
        .ok_or(IoError::Geometry { block_size, blocks })
}

/// The blocks `[first, last]` covering the non-empty byte range `[offset, offset + len)`.
fn block_span(offset: u64, len: u64, bs: u64) -> (u64, u64) {
    (offset / bs, (offset + len - 1) / bs)
}

/// Whole-block buffer length for `[first, last]`; the range lies within a disk whose byte size
/// fits `u64`, and an I/O is at most a FUSE request long, so it fits `usize`.
fn span_len(first: u64, last: u64, bs: u64) -> usize {
    usize::try_from((last - first + 1) * bs).unwrap_or(usize::MAX)
}

/// Read up to `len` bytes at `offset`; fewer (possibly none) at the end of the disk.
pub(crate) fn read_at(dev: &dyn BlockDevice, offset: u64, len: u32) -> Result<Vec<u8>, IoError> {
    let size = size_bytes(dev)?;
    let len = u64::from(len).min(size.saturating_sub(offset));
    if len == 0 {
        return Ok(Vec::new());
    }
    let bs = u64::from(dev.block_size());
    let (first, last) = block_span(offset, len, bs);
    let mut buf = vec![0u8; span_len(first, last, bs)];
    dev.read(Lba(first), &mut buf)?;
    let head = usize::try_from(offset - first * bs).unwrap_or(0);
    buf.drain(..head);
    buf.truncate(usize::try_from(len).unwrap_or(usize::MAX));
    Ok(buf)
}

/// Write `data` at `offset`, read-modify-writing partial edge blocks under `lock`; returns the
/// bytes written (short at the end of the disk).
pub(crate) fn write_at(
    dev: &dyn BlockDevice,
    lock: &RangeLock,
    offset: u64,
    data: &[u8],
    fua: bool,
) -> Result<usize, IoError> {
    let size = size_bytes(dev)?;
    if data.is_empty() {
        return Ok(0);
    }
    if offset >= size {
        return Err(IoError::NoSpace { offset, size });
    }
    let len = (data.len() as u64).min(size - offset);
    let data = &data[..usize::try_from(len).unwrap_or(data.len())];
    let bs = u64::from(dev.block_size());
    let (first, last) = block_span(offset, len, bs);
    let _held = lock.lock(first, last);
    let head = usize::try_from(offset - first * bs).unwrap_or(0);
    let end = offset + len;
    let tail = (last + 1) * bs - end;
    if head == 0 && tail == 0 {
        dev.write(Lba(first), data, fua)?;
        return Ok(data.len());
    }
    let bs_usize = usize::try_from(bs).unwrap_or(usize::MAX);
    let mut buf = vec![0u8; span_len(first, last, bs)];
    if head != 0 {
        dev.read(Lba(first), &mut buf[..bs_usize])?;
    }
    // The last block needs its own read unless it is the first block and already read.
    if tail != 0 && (last != first || head == 0) {
        let at = buf.len() - bs_usize;
        dev.read(Lba(last), &mut buf[at..])?;
    }
    buf[head..head + data.len()].copy_from_slice(data);
    dev.write(Lba(first), &buf, fua)?;
    Ok(data.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// 8 blocks of 512 bytes, counting device calls.
    struct Ram {
        bytes: Mutex<Vec<u8>>,
        calls: Mutex<Vec<(&'static str, u64, usize)>>,
    }

    impl Ram {
        fn new() -> Self {
            let bytes = (0..4096u32).map(|i| (i % 251) as u8).collect();
            Ram {
                bytes: Mutex::new(bytes),
                calls: Mutex::new(Vec::new()),
            }
        }
    }

    impl BlockDevice for Ram {
        fn block_size(&self) -> u32 {
            512
        }
        fn capacity_blocks(&self) -> u64 {
            8
        }
        fn read(&self, lba: Lba, buf: &mut [u8]) -> Result<(), DeviceError> {
            assert_eq!(buf.len() % 512, 0);
            self.calls
                .lock()
                .expect("lock")
                .push(("r", lba.0, buf.len()));
            let at = lba.0 as usize * 512;
            buf.copy_from_slice(&self.bytes.lock().expect("lock")[at..at + buf.len()]);
            Ok(())
        }
        fn write(&self, lba: Lba, data: &[u8], _fua: bool) -> Result<(), DeviceError> {
            assert_eq!(data.len() % 512, 0);
            self.calls
                .lock()
                .expect("lock")
                .push(("w", lba.0, data.len()));
            let at = lba.0 as usize * 512;
            self.bytes.lock().expect("lock")[at..at + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn flush(&self) -> Result<(), DeviceError> {
            Ok(())
        }
    }

    #[test]
    fn unaligned_read_is_one_device_call() {
        let ram = Ram::new();
        let got = read_at(&ram, 500, 600).expect("as set up");
        assert_eq!(got, ram.bytes.lock().expect("lock")[500..1100]);
        assert_eq!(*ram.calls.lock().expect("lock"), [("r", 0, 1536)]);
    }

    #[test]
    fn read_is_short_at_the_end() {
        let ram = Ram::new();
        assert_eq!(read_at(&ram, 4000, 200).expect("as set up").len(), 96);
        assert!(read_at(&ram, 4096, 200).expect("as set up").is_empty());
    }

    #[test]
    fn aligned_write_skips_read_modify_write() {
        let ram = Ram::new();
        let lock = RangeLock::default();
        assert_eq!(write_at(&ram, &lock, 1024, &[7; 1024], false), Ok(1024));
        assert_eq!(*ram.calls.lock().expect("lock"), [("w", 2, 1024)]);
    }

    #[test]
    fn unaligned_write_reads_both_edges_once() {
        let ram = Ram::new();
        let before = ram.bytes.lock().expect("lock").clone();
        let lock = RangeLock::default();
        assert_eq!(write_at(&ram, &lock, 700, &[9; 1000], false), Ok(1000));
        let calls = ram.calls.lock().expect("lock").clone();
        assert_eq!(calls, [("r", 1, 512), ("r", 3, 512), ("w", 1, 1536)]);
        let after = ram.bytes.lock().expect("lock").clone();
        assert_eq!(after[..700], before[..700]);
        assert!(after[700..1700].iter().all(|&b| b == 9));
        assert_eq!(after[1700..], before[1700..]);
    }

    #[test]
    fn write_inside_one_block_reads_it_once() {
        let ram = Ram::new();
        let lock = RangeLock::default();
        assert_eq!(write_at(&ram, &lock, 10, &[1; 20], false), Ok(20));
        assert_eq!(
            *ram.calls.lock().expect("lock"),
            [("r", 0, 512), ("w", 0, 512)]
        );
    }

    #[test]
    fn write_past_the_end_is_short_then_no_space() {
        let ram = Ram::new();
        let lock = RangeLock::default();
        assert_eq!(write_at(&ram, &lock, 4000, &[1; 200], false), Ok(96));
        assert_eq!(
            write_at(&ram, &lock, 4096, &[1; 1], false),
            Err(IoError::NoSpace {
                offset: 4096,
                size: 4096
            })
        );
    }
}
