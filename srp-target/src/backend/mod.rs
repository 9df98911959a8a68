//! LUN backing stores: the synchronous block I/O a logical unit runs against.
//!
//! A [`Backend`] is `Send + Sync` and every method takes `&self`, so the backend workers of
//! the target can call one concurrently; ordering between overlapping commands is the
//! logical unit's business (see `exec`), not the backend's. Addresses are in logical blocks
//! of [`Backend::block_size`]; every buffer is a whole number of blocks.
//!
//! Files: [`file`](mod@file) ([`FileBackend`]: regular file or block device), [`medium`] (the
//! system calls a file backend makes, where a layer can sit beneath it), [`ram`] ([`RamBackend`]),
//! `rbd` (`RbdBackend`: a Ceph RBD image through librbd, Linux).

pub mod claim;
pub mod file;
pub mod medium;
pub mod ram;
#[cfg(target_os = "linux")]
pub mod rbd;
#[cfg(target_os = "linux")]
pub mod rbd_pr;

pub use file::{FileBackend, OpenMode};
pub use ram::RamBackend;
#[cfg(target_os = "linux")]
pub use rbd::{RbdBackend, RbdSpec};

use core::fmt;
use scsi::{BlockCount, Lba};
use std::io;
use std::path::PathBuf;

/// Logical block size of a LUN: the two sizes initiators handle everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockSize {
    /// 512-byte blocks.
    B512,
    /// 4096-byte blocks (4Kn).
    B4096,
}

impl BlockSize {
    /// The size in bytes.
    pub fn bytes(self) -> u32 {
        match self {
            BlockSize::B512 => 512,
            BlockSize::B4096 => 4096,
        }
    }

    /// The size in bytes as a `usize` (for buffer lengths).
    pub fn len_bytes(self) -> usize {
        match self {
            BlockSize::B512 => 512,
            BlockSize::B4096 => 4096,
        }
    }
}

/// What a backend was doing when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Opening or creating the backing file or device.
    Open,
    /// Finding the size of the backing file or device.
    Size,
    /// Reading blocks.
    Read,
    /// Writing blocks.
    Write,
    /// Making written blocks durable (fdatasync).
    Flush,
    /// Deallocating blocks (punch hole, or writing zeros).
    Unmap,
    /// Finding which blocks are allocated (SEEK_DATA/SEEK_HOLE).
    Status,
    /// Reading ahead into the cache (posix_fadvise).
    Prefetch,
    /// Changing the capacity (a reload that grows a LUN).
    Resize,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Open => "open",
            Op::Size => "size",
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Unmap => "unmap",
            Op::Status => "lba status",
            Op::Prefetch => "prefetch",
            Op::Resize => "resize",
        })
    }
}

/// Why a backend operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The operating system refused an operation on the backing file or device.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// The operation.
        op: Op,
        /// The backing file or device (`ram` for a RAM backend).
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A request reaches past the last block (the caller checks ranges; this is a bug guard).
    #[error("{op} {path}: {lba} + {len_blocks} blocks is past the end ({blocks} blocks)", path = path.display())]
    OutOfRange {
        /// The operation.
        op: Op,
        /// The backing file or device.
        path: PathBuf,
        /// First block of the request.
        lba: Lba,
        /// Length of the request in blocks.
        len_blocks: u64,
        /// Capacity in blocks.
        blocks: u64,
    },
    /// A buffer is not a whole number of blocks.
    #[error("{op} {path}: {len_bytes} bytes is not a multiple of the {block_size_bytes}-byte block", path = path.display())]
    Misaligned {
        /// The operation.
        op: Op,
        /// The backing file or device.
        path: PathBuf,
        /// The buffer length.
        len_bytes: usize,
        /// The block size.
        block_size_bytes: u32,
    },
    /// Another program (or another LUN) has the store: a block device mounted or claimed,
    /// an image locked by another target.
    #[error("{path}: {what}; not exported (a store is served by one target at a time{hint})", path = path.display())]
    Held {
        /// The backing file or device.
        path: PathBuf,
        /// Who has it, in words.
        what: String,
        /// What the operator may do about it.
        hint: &'static str,
    },
    /// The store cannot serve the LUN as configured, for a reason of its own.
    #[error("{path}: {why}", path = path.display())]
    Unsuited {
        /// The backing store.
        path: PathBuf,
        /// Why, and what to do about it.
        why: String,
    },
    /// The size of the backing file or device is not usable as a LUN.
    #[error("{op} {path}: size {size_bytes} bytes: {why}", path = path.display())]
    BadSize {
        /// The operation.
        op: Op,
        /// The backing file or device.
        path: PathBuf,
        /// The size found or requested.
        size_bytes: u64,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl BackendError {
    /// Whether the backing store ran out of space (ENOSPC/EDQUOT): SBC's SPACE ALLOCATION
    /// FAILED WRITE PROTECT rather than a medium error.
    pub fn is_out_of_space(&self) -> bool {
        use nix::errno::Errno;
        let BackendError::Io { source, .. } = self else {
            return false;
        };
        let code = source.raw_os_error();
        code == Some(Errno::ENOSPC as i32) || code == Some(Errno::EDQUOT as i32)
    }
}

/// A span of registered memory a command's data lies in (the channel's bounce buffer the
/// RDMA operations use): the backend reads into it and writes from it directly.
#[derive(Clone, Copy, Debug)]
pub struct MemSpan<'a> {
    /// The memory.
    pub block: &'a ib_verbs::mem::MemBlock,
    /// Offset of the first byte.
    pub offset: usize,
    /// Bytes.
    pub len: usize,
}

impl MemSpan<'_> {
    /// The first `len` bytes (at most all of them).
    pub fn head(&self, len: usize) -> Self {
        MemSpan {
            len: len.min(self.len),
            ..*self
        }
    }
}

/// A span of registered memory owned by an operation in flight ([`AsyncIo`]): the command
/// slot's buffer, kept alive until the store is done with it.
#[derive(Clone, Debug)]
pub struct OwnedSpan {
    /// The memory.
    pub block: std::sync::Arc<ib_verbs::mem::MemBlock>,
    /// Offset of the first byte.
    pub offset: usize,
    /// Bytes.
    pub len: usize,
}

/// What an [`AsyncIo`] operation calls when it ends, once, on the store's own thread (or
/// on the caller's, at once, when the store refuses to start it).
pub type IoDone = Box<dyn FnOnce(Result<(), BackendError>) + Send>;

/// A store whose reads, writes and flushes complete asynchronously (a Ceph image through
/// librbd): the target starts them from a worker and goes on; each completion finishes its
/// command and wakes the loop that serves its channel (`exec/aio.rs`), so no thread waits
/// for an operation in flight.
pub trait AsyncIo: Send + Sync {
    /// Reads `dst.len` bytes (whole blocks) at `lba` into `dst`.
    fn read_into(&self, lba: Lba, dst: OwnedSpan, done: IoDone);
    /// Writes `src` (whole blocks) at `lba`.
    fn write_from(&self, lba: Lba, src: OwnedSpan, done: IoDone);
    /// Makes every write completed before it durable.
    fn flush(&self, done: IoDone);
}

/// Bytes moved per step by the default [`Backend::read_into`] / [`Backend::write_from`]
/// (a whole number of either block size; on the stack, nothing allocated).
const STEP_BYTES: usize = 16 << 10;

/// A run of blocks with one provisioning status ([`Backend::lba_status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbaExtent {
    /// Blocks in the run.
    pub blocks: u64,
    /// Deallocated (reads as zeros, no storage behind it) rather than mapped.
    pub deallocated: bool,
}

/// What a store's owner does when the store changed size by itself (an RBD image another
/// client resized): called with the new capacity in blocks, from a thread of the backend's.
pub type CapacityListener = Box<dyn Fn(u64) + Send + Sync>;

/// A LUN's backing store. Synchronous; the target calls it from its backend workers.
pub trait Backend: Send + Sync + fmt::Debug {
    /// The logical block size.
    fn block_size(&self) -> BlockSize;

    /// The capacity in logical blocks (at least 1).
    fn blocks(&self) -> u64;

    /// Changes the capacity to `blocks` (a configuration reload growing the LUN); what
    /// was there stays. The default: not supported (a RAM store, a layered medium).
    fn resize(&self, blocks: u64) -> Result<(), BackendError> {
        Err(BackendError::BadSize {
            op: Op::Resize,
            path: std::path::PathBuf::from("(this backend)"),
            size_bytes: blocks.saturating_mul(u64::from(self.block_size().bytes())),
            why: "this kind of backing store cannot be resized while it runs",
        })
    }

    /// Reads `buf.len() / block_size` blocks starting at `lba` into `buf`.
    fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError>;

    /// Writes `buf` at `lba` (durable only after [`Backend::flush`]: the logical unit
    /// flushes when a write must be durable, `exec/durability.rs`).
    fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), BackendError>;

    /// Reads `dst.len / block_size` blocks at `lba` into registered memory. The default
    /// goes through a stack buffer; backends that can reach the memory directly (a file's
    /// `pread` into it, a RAM store's one copy) override it.
    fn read_into(&self, lba: Lba, dst: MemSpan<'_>) -> Result<(), BackendError> {
        let bs = self.block_size().len_bytes();
        let mut step = [0u8; STEP_BYTES];
        let mut done = 0;
        while done < dst.len {
            let n = (dst.len - done).min(STEP_BYTES);
            self.read_at(Lba(lba.0 + (done / bs) as u64), &mut step[..n])?;
            dst.block
                .write(dst.offset + done, &step[..n])
                .map_err(|e| span_error(Op::Read, e))?;
            done += n;
        }
        Ok(())
    }

    /// Writes `src` (whole blocks of registered memory) at `lba`, as [`Backend::write_at`]
    /// (the default goes through a stack buffer, as [`Backend::read_into`]).
    fn write_from(&self, lba: Lba, src: MemSpan<'_>) -> Result<(), BackendError> {
        let bs = self.block_size().len_bytes();
        let mut step = [0u8; STEP_BYTES];
        let mut done = 0;
        while done < src.len {
            let n = (src.len - done).min(STEP_BYTES);
            src.block
                .read(src.offset + done, &mut step[..n])
                .map_err(|e| span_error(Op::Write, e))?;
            self.write_at(Lba(lba.0 + (done / bs) as u64), &step[..n])?;
            done += n;
        }
        Ok(())
    }

    /// Makes every completed write durable (SYNCHRONIZE CACHE).
    fn flush(&self) -> Result<(), BackendError>;

    /// Deallocates `blocks` blocks at `lba`; they read back as zeros afterwards (LBPRZ).
    fn unmap(&self, lba: Lba, blocks: BlockCount) -> Result<(), BackendError>;

    /// The most blocks COMPARE AND WRITE may name on this store (Block Limits, MAXIMUM
    /// COMPARE AND WRITE LENGTH; 0: not supported). The default: the target's own compare
    /// and write (read, compare, write under the LU's order), up to 255 blocks.
    fn max_compare_and_write_blocks(&self) -> u8 {
        255
    }

    /// COMPARE AND WRITE done by the store itself, atomic where the store is shared (a
    /// Ceph image: in the cluster): `Some(Ok(None))` written, `Some(Ok(Some(offset)))` not
    /// written because the bytes at `offset` of the range differ, `None` for a store that
    /// leaves it to the target (the default).
    fn compare_and_write(
        &self,
        lba: Lba,
        verify: &[u8],
        write: &[u8],
    ) -> Option<Result<Option<usize>, BackendError>> {
        let _ = (lba, verify, write);
        None
    }

    /// Whether [`Backend::unmap`] is supported (LBPME, LBPU, LBPWS).
    fn supports_unmap(&self) -> bool {
        true
    }

    /// The provisioning status at `lba` (GET LBA STATUS): how many blocks from `lba` on,
    /// at least one and at most `max` (which stays within the medium), share it, and
    /// whether they are deallocated. The default: every block mapped (a store that keeps no
    /// holes: its unmapped blocks are zeros written).
    fn lba_status(&self, lba: Lba, max: u64) -> Result<LbaExtent, BackendError> {
        let _ = lba;
        Ok(LbaExtent {
            blocks: max,
            deallocated: false,
        })
    }

    /// PRE-FETCH: starts reading `blocks` blocks at `lba` into the cache, without waiting
    /// for them. The default: a store in memory, where every block already is.
    fn prefetch(&self, lba: Lba, blocks: u64) -> Result<(), BackendError> {
        let _ = (lba, blocks);
        Ok(())
    }

    /// Whether the store is lost with the process (RAM): no power loss or crash can leave
    /// a write half done on it, so WRITE ATOMIC may be as long as a transfer. A store that
    /// outlives the process (a file, a device) answers false: a power loss can tear a
    /// write into its physical blocks.
    fn is_volatile(&self) -> bool {
        false
    }

    /// Calls `listener` with the new capacity whenever the store changes size by itself
    /// (not through [`Backend::resize`]). The default: a store that only the target
    /// resizes (files, devices, RAM) never calls it.
    fn watch_capacity(&self, listener: CapacityListener) {
        drop(listener);
    }

    /// Whether every call completes from memory without waiting for a device (RAM, a
    /// file on tmpfs): such LUNs run their commands on the completion loop itself, as
    /// LIO's rd_mcp ramdisk executes in the submitting context — no worker hop.
    fn never_blocks(&self) -> bool {
        false
    }

    /// The store's asynchronous reads, writes and flushes, if it has them ([`AsyncIo`]).
    fn async_io(&self) -> Option<&dyn AsyncIo> {
        None
    }
}

/// A span outside its memory: a caller bug, reported as the backend's I/O error.
pub(crate) fn span_error(op: Op, e: ib_verbs::mem::MemError) -> BackendError {
    BackendError::Io {
        op,
        path: PathBuf::from("registered memory"),
        source: io::Error::new(io::ErrorKind::InvalidInput, e),
    }
}

/// Checks that `len_bytes` is whole blocks and `lba..` lies within `blocks`; returns the
/// byte offset of `lba`. Shared by the backends as their guard against caller bugs.
pub(crate) fn check_range(
    op: Op,
    path: &std::path::Path,
    block_size: BlockSize,
    blocks: u64,
    lba: Lba,
    len_bytes: usize,
) -> Result<u64, BackendError> {
    let bs = block_size.bytes();
    if len_bytes % block_size.len_bytes() != 0 {
        return Err(BackendError::Misaligned {
            op,
            path: path.to_path_buf(),
            len_bytes,
            block_size_bytes: bs,
        });
    }
    let len_blocks = (len_bytes / block_size.len_bytes()) as u64;
    let end = lba.0.checked_add(len_blocks);
    match end {
        Some(end) if end <= blocks => Ok(lba.0 * u64::from(bs)),
        _ => Err(BackendError::OutOfRange {
            op,
            path: path.to_path_buf(),
            lba,
            len_blocks,
            blocks,
        }),
    }
}

/// A `/proc/meminfo` field in bytes (Linux); `None` elsewhere or if absent.
fn meminfo(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line[field.len()..]
        .trim_start_matches(':')
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The machine's memory (MemTotal), if known.
pub fn memory_total() -> Option<u64> {
    meminfo("MemTotal")
}

/// The memory available for new allocations now (MemAvailable), if known.
pub fn memory_available() -> Option<u64> {
    meminfo("MemAvailable")
}
