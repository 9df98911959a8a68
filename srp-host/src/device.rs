//! The block device a block file exposes.
//!
//! Contract: [`BlockDevice`] is synchronous from the caller's point of view — a FUSE worker
//! thread calls it and waits. Buffers are whole blocks (`len` a multiple of
//! [`BlockDevice::block_size`]) and lie within the capacity; the block-file layer checks both
//! before calling. An implementation must return (with an error if need be) in bounded time:
//! the SRP disk fails I/O once its device-loss timer fires, so a lost LUN never hangs a reader.

use alloc::string::String;
use scsi::Lba;

/// Why a device call failed; the FUSE layer turns every variant into an errno.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum DeviceError {
    /// The device failed the I/O (a medium or transport error): EIO.
    #[error("I/O error: {0}")]
    Io(String),
    /// The device is gone (the LUN was lost): EIO on data calls, ENODEV on open.
    #[error("device gone")]
    Gone,
}

/// A disk of fixed-size logical blocks, as the SRP disk (or a RAM disk in tests) provides.
pub trait BlockDevice: Send + Sync {
    /// The logical block size in bytes (a power of two, at least 512).
    fn block_size(&self) -> u32;

    /// The number of logical blocks (READ CAPACITY's last LBA + 1).
    fn capacity_blocks(&self) -> u64;

    /// Read `buf.len() / block_size` blocks starting at `lba` into `buf`.
    fn read(&self, lba: Lba, buf: &mut [u8]) -> Result<(), DeviceError>;

    /// Write `data` (whole blocks) starting at `lba`; `fua` asks that the blocks be on stable
    /// media before the call returns (SBC FUA bit).
    fn write(&self, lba: Lba, data: &[u8], fua: bool) -> Result<(), DeviceError>;

    /// Make every completed write durable (SYNCHRONIZE CACHE).
    fn flush(&self) -> Result<(), DeviceError>;
}
