//! [`FileBackend`]: a regular file or a block device, through `pread`/`pwrite`.
//!
//! A flush is `fdatasync` (`File::sync_data`): the logical unit makes a FUA write (or any
//! write with the write cache off) durable by writing and then flushing, as LIO's fileio
//! does with write cache emulation (`exec/durability.rs`); SYNCHRONIZE CACHE is a flush. UNMAP punches holes with
//! `fallocate(PUNCH_HOLE | KEEP_SIZE)` (files and, since Linux 4.9, block devices) and falls
//! back to writing zeros where the filesystem or device does not support it, remembering the
//! answer so that the fallback costs one failed syscall, not one per command.

use super::claim;
use super::medium::{FileMedium, Medium};
use super::{Backend, BackendError, BlockSize, Op, check_range};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use scsi::{BlockCount, Lba};
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Zero-fill chunk for the unmap fallback: 1 MiB.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

/// A LUN backed by a regular file or a block device. Its system calls go through a
/// [`Medium`]: the file itself, or a layer beneath the backend
/// ([`FileBackend::interpose`]: the write log of `writelog`).
#[derive(Debug)]
pub struct FileBackend {
    medium: Box<dyn Medium>,
    path: PathBuf,
    block_size: BlockSize,
    /// The capacity; changes only by [`Backend::resize`] (a reload growing the LUN).
    blocks: AtomicU64,
    /// Cleared after fallocate(PUNCH_HOLE) reports it is unsupported here.
    punch_hole: AtomicBool,
    /// A regular file on tmpfs: its I/O is memory copies.
    in_memory: bool,
    /// An image file's `flock` (exclusive; shared for a read-only LUN), held while the
    /// backend lives; `None` for a block device (held by `O_EXCL` instead).
    _lock: Option<Flock<File>>,
}

/// How a store is opened ([`FileBackend::open_as`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OpenMode {
    /// Read-only (a read-only LUN).
    pub read_only: bool,
    /// A read-only LUN of a block device may share it with whoever has claimed it (a
    /// mount, another exclusive opener): `allow_claimed = true`, asked for explicitly.
    pub allow_claimed: bool,
}

impl FileBackend {
    /// Creates the regular file `path` of `size_bytes`, or opens it if it already exists
    /// with exactly that size (a restart). A different existing size is an error rather
    /// than a silent resize, as is a size that is zero or not whole blocks.
    pub fn create(
        path: impl AsRef<Path>,
        size_bytes: u64,
        block_size: BlockSize,
    ) -> Result<FileBackend, BackendError> {
        let path = path.as_ref();
        let bad = |why| BackendError::BadSize {
            op: Op::Open,
            path: path.to_path_buf(),
            size_bytes,
            why,
        };
        if size_bytes == 0 || size_bytes % u64::from(block_size.bytes()) != 0 {
            return Err(bad("not a positive whole number of blocks"));
        }
        let io = |op| {
            move |source| BackendError::Io {
                op,
                path: path.to_path_buf(),
                source,
            }
        };
        if claim::is_block_device(path) {
            return Err(bad("a block device is not created: name it `device`"));
        }
        // Created readable by its owner only: the image holds someone's disk.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io(Op::Open))?;
        let lock = lock_image(&file, path, false)?;
        let len = file.metadata().map_err(io(Op::Size))?.len();
        match len {
            0 => file.set_len(size_bytes).map_err(io(Op::Open))?,
            l if l == size_bytes => {}
            _ => return Err(bad("the file exists with a different size")),
        }
        FileBackend::from_file(file, path, block_size, Some(lock))
    }

    /// Opens an existing regular file or block device; its size must be whole blocks.
    /// A read-only LUN opens it read-only. Exclusively: see [`FileBackend::open_as`].
    pub fn open(
        path: impl AsRef<Path>,
        block_size: BlockSize,
        read_only: bool,
    ) -> Result<FileBackend, BackendError> {
        FileBackend::open_as(
            path,
            block_size,
            OpenMode {
                read_only,
                allow_claimed: false,
            },
        )
    }

    /// Opens an existing regular file or block device as `mode` says. A block device is
    /// opened with `O_EXCL`: one mounted, in use by device-mapper, md or swap, or opened
    /// exclusively by another program is refused ([`BackendError::Held`], naming the holder
    /// where Linux tells it) — unless the LUN is read-only and `allow_claimed`, when it is
    /// shared, with a warning. An image file is locked (`flock`; shared when read-only), so
    /// a second target cannot serve it.
    pub fn open_as(
        path: impl AsRef<Path>,
        block_size: BlockSize,
        mode: OpenMode,
    ) -> Result<FileBackend, BackendError> {
        let path = path.as_ref();
        let io = |source| BackendError::Io {
            op: Op::Open,
            path: path.to_path_buf(),
            source,
        };
        let is_block = claim::is_block_device(path);
        let share = mode.read_only && mode.allow_claimed;
        let mut options = OpenOptions::new();
        options.read(true).write(!mode.read_only);
        if is_block && !share {
            options.custom_flags(nix::libc::O_EXCL);
        }
        let file = match options.open(path) {
            Ok(f) => f,
            Err(e) if is_block && e.raw_os_error() == Some(Errno::EBUSY as i32) => {
                return Err(BackendError::Held {
                    path: path.to_path_buf(),
                    what: claimed_by(path),
                    hint: if mode.read_only {
                        "; a read-only LUN may share a claimed device with allow_claimed = true"
                    } else {
                        ""
                    },
                });
            }
            Err(e) => return Err(io(e)),
        };
        if is_block {
            if share {
                warn_if_claimed(path);
            }
            return FileBackend::from_file(file, path, block_size, None);
        }
        let lock = lock_image(&file, path, mode.read_only)?;
        FileBackend::from_file(file, path, block_size, Some(lock))
    }

    fn from_file(
        mut file: File,
        path: &Path,
        block_size: BlockSize,
        lock: Option<Flock<File>>,
    ) -> Result<FileBackend, BackendError> {
        // Seeking to the end sizes block devices too, whose metadata length is 0.
        let size_bytes = file
            .seek(SeekFrom::End(0))
            .map_err(|source| BackendError::Io {
                op: Op::Size,
                path: path.to_path_buf(),
                source,
            })?;
        let bs = u64::from(block_size.bytes());
        if size_bytes < bs || size_bytes % bs != 0 {
            return Err(BackendError::BadSize {
                op: Op::Size,
                path: path.to_path_buf(),
                size_bytes,
                why: "not a positive whole number of blocks",
            });
        }
        let in_memory = file.metadata().is_ok_and(|m| m.is_file())
            && nix::sys::statfs::fstatfs(&file)
                .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
        Ok(FileBackend {
            medium: Box::new(FileMedium::new(file)),
            path: path.to_path_buf(),
            block_size,
            blocks: AtomicU64::new(size_bytes / bs),
            punch_hole: AtomicBool::new(true),
            in_memory,
            _lock: lock,
        })
    }

    /// The backing file or device.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records every write, flush and discard that reaches the file in the write log at
    /// `log` (created, or continued after a restart): `record_writes` in the config.
    pub fn record_writes(self, log: &Path) -> Result<FileBackend, crate::writelog::WriteLogError> {
        let header = crate::writelog::record::Header {
            block_size: self.block_size.bytes(),
            size_bytes: self.blocks() * u64::from(self.block_size.bytes()),
        };
        let recorded = crate::writelog::Recorded::open(self.medium, log, header)?;
        Ok(FileBackend {
            medium: Box::new(recorded),
            ..self
        })
    }

    /// Puts a layer beneath the backend: `layer` receives the current medium and returns
    /// the one every later system call goes through (the write log wraps the file this
    /// way; a fault-injection test can drop or fail calls).
    pub fn interpose(self, layer: impl FnOnce(Box<dyn Medium>) -> Box<dyn Medium>) -> Self {
        FileBackend {
            medium: layer(self.medium),
            ..self
        }
    }

    fn io_err(&self, op: Op) -> impl Fn(io::Error) -> BackendError + '_ {
        move |source| BackendError::Io {
            op,
            path: self.path.clone(),
            source,
        }
    }

    fn zero_fill(&self, mut offset: u64, mut len: u64) -> Result<(), BackendError> {
        let zeros = vec![0u8; ZERO_CHUNK_BYTES];
        while len > 0 {
            // min() bounds n by ZERO_CHUNK_BYTES, a usize.
            let n = len.min(ZERO_CHUNK_BYTES as u64) as usize;
            self.medium
                .write_at(&zeros[..n], offset)
                .map_err(self.io_err(Op::Unmap))?;
            offset += n as u64;
            len -= n as u64;
        }
        Ok(())
    }
}

impl Backend for FileBackend {
    fn never_blocks(&self) -> bool {
        self.in_memory
    }

    fn block_size(&self) -> BlockSize {
        self.block_size
    }

    fn blocks(&self) -> u64 {
        self.blocks.load(Ordering::Acquire)
    }

    fn resize(&self, blocks: u64) -> Result<(), BackendError> {
        let bytes = blocks.saturating_mul(u64::from(self.block_size.bytes()));
        if blocks == 0 {
            return Err(BackendError::BadSize {
                op: Op::Resize,
                path: self.path.clone(),
                size_bytes: bytes,
                why: "not a positive whole number of blocks",
            });
        }
        self.medium
            .set_len(bytes)
            .map_err(|source| BackendError::Io {
                op: Op::Resize,
                path: self.path.clone(),
                source,
            })?;
        self.blocks.store(blocks, Ordering::Release);
        Ok(())
    }

    fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        let (bs, n) = (self.block_size, self.blocks());
        let offset = check_range(Op::Read, &self.path, bs, n, lba, buf.len())?;
        self.medium
            .read_at(buf, offset)
            .map_err(self.io_err(Op::Read))
    }

    fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), BackendError> {
        let (bs, n) = (self.block_size, self.blocks());
        let offset = check_range(Op::Write, &self.path, bs, n, lba, buf.len())?;
        self.medium
            .write_at(buf, offset)
            .map_err(self.io_err(Op::Write))
    }

    fn read_into(&self, lba: Lba, dst: super::MemSpan<'_>) -> Result<(), BackendError> {
        let (bs, n) = (self.block_size, self.blocks());
        let offset = check_range(Op::Read, &self.path, bs, n, lba, dst.len)?;
        // pread(2) straight into the registered memory the data-in WRITE sends from.
        self.medium
            .read_into(dst, offset)
            .map_err(|e| self.io_err(Op::Read)(file_io(e)))
    }

    fn write_from(&self, lba: Lba, src: super::MemSpan<'_>) -> Result<(), BackendError> {
        let (bs, n) = (self.block_size, self.blocks());
        let offset = check_range(Op::Write, &self.path, bs, n, lba, src.len)?;
        // pwrite(2) straight from the registered memory the data-out READ filled.
        self.medium
            .write_from(src, offset)
            .map_err(|e| self.io_err(Op::Write)(file_io(e)))
    }

    fn flush(&self) -> Result<(), BackendError> {
        self.medium.sync_data().map_err(self.io_err(Op::Flush))
    }

    fn unmap(&self, lba: Lba, blocks: BlockCount) -> Result<(), BackendError> {
        let bs = self.block_size;
        let len = blocks.bytes(bs.bytes());
        let len_usize = usize::try_from(len).map_err(|_| BackendError::OutOfRange {
            op: Op::Unmap,
            path: self.path.clone(),
            lba,
            len_blocks: blocks.0.into(),
            blocks: self.blocks(),
        })?;
        let offset = check_range(Op::Unmap, &self.path, bs, self.blocks(), lba, len_usize)?;
        if len == 0 {
            return Ok(());
        }
        if self.punch_hole.load(Ordering::Relaxed) {
            match self.medium.punch_hole(offset, len) {
                Ok(()) => return Ok(()),
                Err(Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::EINVAL) => {
                    self.punch_hole.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(self.io_err(Op::Unmap)(io::Error::from(e))),
            }
        }
        self.zero_fill(offset, len)
    }

    fn lba_status(&self, lba: Lba, max: u64) -> Result<super::LbaExtent, BackendError> {
        let bs = u64::from(self.block_size.bytes());
        let end = self.blocks() * bs;
        let start = lba.0.saturating_mul(bs);
        let max = max.min(self.blocks().saturating_sub(lba.0)).max(1);
        let seek = |at, data| {
            self.medium
                .seek_extent(at, data, end)
                .map_err(|e| self.io_err(Op::Status)(io::Error::from(e)))
        };
        // Holes are whole file system blocks; a logical block only partly in one holds
        // data, so a hole counts from the first block wholly inside it.
        let (deallocated, until) = match seek(start, true)? {
            // Data starts here (or within this block): mapped up to the next hole.
            Some(data) if data < start + bs => {
                let hole = seek(start, false)?.unwrap_or(end);
                (false, hole.div_ceil(bs))
            }
            // A hole first: deallocated up to the block holding the next data.
            Some(data) => (true, data / bs),
            None => (true, self.blocks()),
        };
        Ok(super::LbaExtent {
            blocks: until.saturating_sub(lba.0).clamp(1, max),
            deallocated,
        })
    }

    fn prefetch(&self, lba: Lba, blocks: u64) -> Result<(), BackendError> {
        if self.in_memory {
            return Ok(());
        }
        let bs = u64::from(self.block_size.bytes());
        self.medium
            .will_need(lba.0.saturating_mul(bs), blocks.saturating_mul(bs))
            .map_err(|e| self.io_err(Op::Prefetch)(io::Error::from(e)))
    }
}

/// A direct transfer's failure as the OS error the backend reports.
/// Who has claimed the block device `path`, in words.
fn claimed_by(path: &Path) -> String {
    let holders = claim::device_holders(path);
    if holders.is_empty() && claim::has_open(std::process::id(), path) {
        "the device is in use by this target (another LUN of it, or one not yet released)"
            .to_owned()
    } else if holders.is_empty() {
        "the device is in use (opened exclusively by another program: another target, a \
         filesystem tool)"
            .to_owned()
    } else {
        format!("the device is in use: {}", holders.join(", "))
    }
}

/// A read-only LUN sharing a device: says so if someone has claimed it.
fn warn_if_claimed(path: &Path) {
    let exclusive = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_EXCL)
        .open(path);
    if matches!(&exclusive, Err(e) if e.raw_os_error() == Some(Errno::EBUSY as i32)) {
        tracing::warn!(device = %path.display(), holder = %claimed_by(path),
            "exported read-only while claimed (allow_claimed): initiators may read blocks \
             the holder is changing");
    }
}

/// Locks the image file `path` (open as `file`): shared or exclusive, without waiting.
fn lock_image(file: &File, path: &Path, shared: bool) -> Result<Flock<File>, BackendError> {
    let io = |source| BackendError::Io {
        op: Op::Open,
        path: path.to_path_buf(),
        source,
    };
    let dup = file.try_clone().map_err(io)?;
    let arg = if shared {
        FlockArg::LockSharedNonblock
    } else {
        FlockArg::LockExclusiveNonblock
    };
    Flock::lock(dup, arg).map_err(|(_, errno)| {
        if errno != Errno::EWOULDBLOCK {
            return io(std::io::Error::from(errno));
        }
        let holders = claim::lock_holders(path);
        let me = std::process::id();
        let what = if holders.is_empty() {
            "the image is locked by another program".to_owned()
        } else if holders.iter().all(|h| h.pid == me) {
            "the image is locked by this target (another LUN of it, or one not yet released)"
                .to_owned()
        } else {
            let names: Vec<String> = holders.iter().map(ToString::to_string).collect();
            format!("the image is locked by {}", names.join(", "))
        };
        BackendError::Held {
            path: path.to_path_buf(),
            what,
            hint: "",
        }
    })
}

fn file_io(e: ib_verbs::mem::FileIoError) -> std::io::Error {
    use ib_verbs::mem::FileIoError as F;
    match e {
        F::Io(e) => e,
        F::ShortFile { missing_bytes } => std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("the file ended {missing_bytes} bytes short"),
        ),
        other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other),
    }
}
