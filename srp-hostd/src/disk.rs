//! [`SrpDisk`]: one LUN of a login as a [`BlockDevice`] — reads and writes become READ(16)
//! and WRITE(16) (FUA when asked), split at the login's maximum transfer and submitted
//! together; flush is SYNCHRONIZE CACHE(10) over the whole LU.
//!
//! Contract: a call returns once every piece completed. Pieces that fail for a retryable
//! reason (unit attention, BUSY, a command reset by error recovery) are sent again, up to
//! [`TRIES`] times; while the login is reconnecting the channel core holds I/O, so within
//! fast_io_fail the caller sees nothing but a delay. A piece that fails for good turns the
//! call into [`DeviceError::Io`] with the SCSI or transport reason; device loss (NO_DEVICE)
//! marks the disk gone and every later call fails with [`DeviceError::Gone`] at once.

use crate::command::{Outcome, Retry, execute_retrying, finish, submit};
use crate::scan::{LunInfo, cdb};
use scsi::cdb::{Command, LongCdb, ReadWrite, RwCdb, SynchronizeCache};
use scsi::{BlockCount, Lba};
use srp_host::{BlockDevice, DeviceError};
use srp_initiator_storport::port::{DataDirection, LuAddress, Port};
use srp_initiator_storport::srp::SrpMiniport;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// Sends per piece before an error is reported.
pub const TRIES: u32 = 5;

/// Calls served and failed.
#[derive(Debug, Default)]
pub struct DiskCounters {
    /// Reads completed.
    pub reads: AtomicU64,
    /// Writes completed.
    pub writes: AtomicU64,
    /// Flushes completed.
    pub flushes: AtomicU64,
    /// Calls that failed.
    pub errors: AtomicU64,
}

/// A LUN of a login.
pub struct SrpDisk {
    /// The adapter; `None` once gone, so a lost session's adapter (and its local address)
    /// is freed even while block-file handles keep the disk alive.
    port: RwLock<Option<Arc<Port<SrpMiniport>>>>,
    info: LunInfo,
    max_blocks: u32,
    timeout: Duration,
    gone: AtomicBool,
    counters: DiskCounters,
}

impl std::fmt::Debug for SrpDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrpDisk")
            .field("info", &self.info)
            .field("gone", &self.gone)
            .finish()
    }
}

impl SrpDisk {
    /// The disk `info` on `port`: pieces of at most `max_transfer` bytes, each SRB timing
    /// out after `timeout`.
    pub fn new(
        port: Arc<Port<SrpMiniport>>,
        info: LunInfo,
        max_transfer: u32,
        timeout: Duration,
    ) -> SrpDisk {
        let max_blocks = (max_transfer / info.block_size).max(1);
        SrpDisk {
            port: RwLock::new(Some(port)),
            info,
            max_blocks,
            timeout,
            gone: AtomicBool::new(false),
            counters: DiskCounters::default(),
        }
    }

    /// What the scan found.
    pub fn info(&self) -> &LunInfo {
        &self.info
    }

    /// The counters.
    pub fn counters(&self) -> &DiskCounters {
        &self.counters
    }

    /// Marks the disk gone (its login was lost or logged out): calls fail at once.
    pub fn set_gone(&self) {
        self.gone.store(true, Ordering::Release);
        *self.port.write().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Whether the disk is gone.
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    fn address(&self) -> LuAddress {
        self.info.address
    }

    fn error(&self, o: &Outcome) -> DeviceError {
        if o.is_gone() {
            self.set_gone();
            return DeviceError::Gone;
        }
        DeviceError::Io(o.to_string())
    }

    /// The adapter, unless the disk is gone.
    fn port(&self) -> Result<Arc<Port<SrpMiniport>>, DeviceError> {
        let port = self
            .port
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match port {
            Some(p) if !self.is_gone() => Ok(p),
            _ => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                Err(DeviceError::Gone)
            }
        }
    }

    /// The READ(16)/WRITE(16) CDB of one piece.
    fn rw_cdb(&self, read: bool, lba: u64, blocks: u32, fua: bool) -> Vec<u8> {
        let rw = ReadWrite {
            cdb: RwCdb::Sixteen,
            lba: Lba(lba),
            blocks: BlockCount(blocks),
            dpo: false,
            fua,
        };
        cdb(if read {
            Command::Read(rw)
        } else {
            Command::Write(rw)
        })
    }

    /// Runs one transfer as pieces of at most the maximum transfer, submitted together.
    fn transfer(&self, lba: Lba, mut io: Io<'_>) -> Result<(), DeviceError> {
        let port = self.port()?;
        let bs = self.info.block_size as usize;
        let (read, fua, total) = match &io {
            Io::Read(b) => (true, false, b.len()),
            Io::Write(d, fua) => (false, *fua, d.len()),
        };
        let dir = if read {
            DataDirection::In
        } else {
            DataDirection::Out
        };
        let piece_data = |io: &Io<'_>, off: usize, len: usize| match io {
            Io::Read(_) => vec![0; len],
            Io::Write(d, _) => d[off..off + len].to_vec(),
        };
        let blocks = (total / bs) as u64;
        let mut pieces = Vec::new();
        let mut done = 0u64;
        while done < blocks {
            let n = (blocks - done).min(u64::from(self.max_blocks)) as u32;
            let (off, len) = (done as usize * bs, n as usize * bs);
            let cdb = self.rw_cdb(read, lba.0 + done, n, fua);
            let data = piece_data(&io, off, len);
            let sent = submit(&port, self.address(), &cdb, dir, data, self.timeout);
            pieces.push((off, len, cdb, sent));
            done += u64::from(n);
        }
        let mut failure = None;
        for (off, len, cdb, sent) in pieces {
            let mut outcome = match sent {
                Ok(c) => finish(&c, dir, self.timeout),
                Err(o) => o,
            };
            if !matches!(outcome, Outcome::Good(_)) && outcome.retry() != Retry::No {
                let data = piece_data(&io, off, len);
                outcome = execute_retrying(
                    &port,
                    self.address(),
                    &cdb,
                    dir,
                    &data,
                    self.timeout,
                    TRIES - 1,
                );
            }
            match (outcome, &mut io) {
                (Outcome::Good(_), Io::Write(..)) => {}
                (Outcome::Good(d), Io::Read(buf)) if d.len() == len => {
                    buf[off..off + len].copy_from_slice(&d);
                }
                (Outcome::Good(d), Io::Read(_)) => {
                    let e = DeviceError::Io(format!("short read: {} of {len} bytes", d.len()));
                    failure.get_or_insert(e);
                }
                (other, _) => {
                    failure.get_or_insert(self.error(&other));
                }
            }
        }
        if let Some(e) = failure {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
        let c = if read {
            &self.counters.reads
        } else {
            &self.counters.writes
        };
        c.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// One call's buffer.
enum Io<'a> {
    /// Read into it.
    Read(&'a mut [u8]),
    /// Write it, with FUA or not.
    Write(&'a [u8], bool),
}

impl BlockDevice for SrpDisk {
    fn block_size(&self) -> u32 {
        self.info.block_size
    }

    fn capacity_blocks(&self) -> u64 {
        self.info.blocks
    }

    fn read(&self, lba: Lba, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.transfer(lba, Io::Read(buf))
    }

    fn write(&self, lba: Lba, data: &[u8], fua: bool) -> Result<(), DeviceError> {
        self.transfer(lba, Io::Write(data, fua))
    }

    fn flush(&self) -> Result<(), DeviceError> {
        let port = self.port()?;
        let sync = Command::SynchronizeCache(SynchronizeCache {
            cdb: LongCdb::Ten,
            lba: Lba(0),
            blocks: BlockCount(0),
            immed: false,
        });
        let sync = cdb(sync);
        match execute_retrying(
            &port,
            self.address(),
            &sync,
            DataDirection::None,
            &[],
            self.timeout,
            TRIES,
        ) {
            Outcome::Good(_) => {
                self.counters.flushes.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            other => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                Err(self.error(&other))
            }
        }
    }
}
