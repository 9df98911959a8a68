//! [`Medium`]: the operating-system calls a [`super::FileBackend`] makes on its file or
//! device — `pread`, `pwrite`, `fdatasync`, `fallocate(PUNCH_HOLE)`, `lseek(SEEK_DATA/
//! SEEK_HOLE)`, `posix_fadvise(WILLNEED)` — as one narrow trait,
//! so that a layer can sit *beneath* the backend, where dm-log-writes sits beneath a
//! filesystem: [`crate::writelog::Recorded`] logs every write, flush and discard that
//! reaches the medium for the crash-consistency checker. Whatever the backend or the
//! logical unit forgets to do (a flush removed) is then missing from the log, not hidden by
//! a wrapper that saw the request.
//!
//! [`FileMedium`] is the plain file. Every method returns the OS error as is; the backend
//! names the operation and the path.

use crate::backend::MemSpan;
use ib_verbs::mem::FileIoError;
use nix::errno::Errno;
use nix::fcntl::{FallocateFlags, PosixFadviseAdvice, fallocate, posix_fadvise};
use nix::unistd::{Whence, lseek};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The calls a file backend makes on its storage. `Send + Sync`; every method takes
/// `&self` (the backend workers call it concurrently). Offsets and lengths are bytes and
/// already checked against the size by the backend.
pub trait Medium: Send + Sync + fmt::Debug {
    /// `pread` of exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// `pread` of `dst.len` bytes at `offset` straight into registered memory.
    fn read_into(&self, dst: MemSpan<'_>, offset: u64) -> Result<(), FileIoError>;

    /// `pwrite` of all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// `pwrite` of `src.len` bytes of registered memory at `offset`.
    fn write_from(&self, src: MemSpan<'_>, offset: u64) -> Result<(), FileIoError>;

    /// `fdatasync`: every write completed before the call is on stable storage when it
    /// returns `Ok`.
    fn sync_data(&self) -> io::Result<()>;

    /// `fallocate(PUNCH_HOLE | KEEP_SIZE)` of `len` bytes at `offset`: they read back as
    /// zeros. The errno comes back as is (the backend falls back to writing zeros on
    /// EOPNOTSUPP, ENOSYS and EINVAL).
    fn punch_hole(&self, offset: u64, len: u64) -> Result<(), Errno>;

    /// `lseek(SEEK_DATA)` (`data`) or `lseek(SEEK_HOLE)` from `offset`: the first byte at
    /// or after it that is data (or in a hole); `None`: none before the end of the file
    /// (SEEK_DATA's ENXIO; SEEK_HOLE's answer at or past `end`). The default is what the
    /// kernel answers for a file system that keeps no holes: all data.
    fn seek_extent(&self, offset: u64, data: bool, end: u64) -> Result<Option<u64>, Errno> {
        let _ = end;
        Ok(data.then_some(offset))
    }

    /// `ftruncate` to `len` bytes (a reload growing the LUN). The default: a layer that
    /// cannot follow a size change refuses it.
    fn set_len(&self, len: u64) -> io::Result<()> {
        let _ = len;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this medium cannot change size while it runs",
        ))
    }

    /// `posix_fadvise(WILLNEED)` of `len` bytes at `offset`: start reading them into the
    /// page cache, without waiting. The default (a layer with no cache) does nothing.
    fn will_need(&self, offset: u64, len: u64) -> Result<(), Errno> {
        let _ = (offset, len);
        Ok(())
    }
}

/// The plain file or block device.
#[derive(Debug)]
pub struct FileMedium {
    file: File,
}

impl FileMedium {
    /// The medium over an open file.
    pub fn new(file: File) -> FileMedium {
        FileMedium { file }
    }

    /// The file.
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Medium for FileMedium {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        // A regular file only: a block device's size is the device's.
        if !self.file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a block device's size is the device's",
            ));
        }
        self.file.set_len(len)
    }

    fn read_into(&self, dst: MemSpan<'_>, offset: u64) -> Result<(), FileIoError> {
        dst.block.read_file(dst.offset, dst.len, &self.file, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn write_from(&self, src: MemSpan<'_>, offset: u64) -> Result<(), FileIoError> {
        src.block
            .write_file(src.offset, src.len, &self.file, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn punch_hole(&self, offset: u64, len: u64) -> Result<(), Errno> {
        let mode = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
        let (off, l) = (
            i64::try_from(offset).map_err(|_| Errno::EFBIG)?,
            i64::try_from(len).map_err(|_| Errno::EFBIG)?,
        );
        fallocate(&self.file, mode, off, l)
    }

    fn seek_extent(&self, offset: u64, data: bool, end: u64) -> Result<Option<u64>, Errno> {
        let whence = if data {
            Whence::SeekData
        } else {
            Whence::SeekHole
        };
        let off = i64::try_from(offset).map_err(|_| Errno::EFBIG)?;
        match lseek(&self.file, off, whence) {
            // lseek(2) returns a non-negative offset on success.
            Ok(at) => Ok(Some(at as u64).filter(|&at| at < end)),
            Err(Errno::ENXIO) => Ok(None),
            // No hole information here (a block device on kernels whose block layer does
            // not answer SEEK_DATA/SEEK_HOLE, as 6.18's does not): all data, as the trait's
            // default says — never a medium error for a question the medium cannot answer.
            Err(Errno::EINVAL | Errno::ESPIPE | Errno::EOPNOTSUPP) => Ok(data.then_some(offset)),
            Err(e) => Err(e),
        }
    }

    fn will_need(&self, offset: u64, len: u64) -> Result<(), Errno> {
        let (off, l) = (
            i64::try_from(offset).map_err(|_| Errno::EFBIG)?,
            i64::try_from(len).map_err(|_| Errno::EFBIG)?,
        );
        posix_fadvise(&self.file, off, l, PosixFadviseAdvice::POSIX_FADV_WILLNEED)
    }
}

/// A layer put beneath every file LUN's backend when the appliance is built
/// ([`super::FileBackend::interpose`] with the LUN's name): the whole-stack simulator's disk
/// model, which keeps what was flushed apart from what was only written.
#[derive(Clone)]
pub struct MediumLayer(pub std::sync::Arc<LayerFn>);

/// What a [`MediumLayer`] calls: the LUN's name and its medium in, the medium to use out.
pub type LayerFn = dyn Fn(&str, Box<dyn Medium>) -> Box<dyn Medium> + Send + Sync;

impl fmt::Debug for MediumLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MediumLayer")
    }
}
