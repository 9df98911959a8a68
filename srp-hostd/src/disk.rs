//! [`SrpDisk`]: one LUN through one login — a multipath [`PathDevice`]. Reads and writes
//! become READ(16) and WRITE(16) (FUA when asked), split at the login's maximum transfer
//! and submitted together; flush is SYNCHRONIZE CACHE(10) over the whole LU.
//!
//! Contract: a call returns once every piece completed, with the first piece's outcome
//! that was not GOOD (the multipath DSM judges it: retry, fail over, or report). While the
//! login is reconnecting the channel core holds I/O; [`PathDevice::fail_fast`] ends that
//! hold at once (the commands fail as at fast_io_fail and are never resent on this path).
//! Once the disk is gone (its session dropped) every call answers
//! [`Outcome::NoDevice`] at once and the adapter is released.

use crate::adapter::HostAdapter;
use crate::command::{Outcome, TransportKind, execute, finish, finish_read, submit};
use crate::scan::{LunInfo, cdb};
use mpio::{PathDevice, Transport};
use scsi::cdb::{Command, LongCdb, SynchronizeCache};
use scsi::{BlockCount, Lba};
use srp::initiator::PortState;
use srp_initiator_storport::port::{DataDirection, LuAddress};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// A LUN of a login.
pub struct SrpDisk {
    /// The adapter; `None` once gone, so a lost session's adapter (and its local address)
    /// is freed even while the multipath disk or a block-file handle keeps this alive.
    port: RwLock<Option<Arc<HostAdapter>>>,
    info: LunInfo,
    max_blocks: u32,
    timeout: Duration,
    gone: AtomicBool,
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
        port: Arc<HostAdapter>,
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
        }
    }

    /// What the scan found.
    pub fn info(&self) -> &LunInfo {
        &self.info
    }

    /// Marks the disk gone (its login was lost or logged out) and lets go of the adapter.
    pub fn set_gone(&self) {
        self.gone.store(true, Ordering::Release);
        *self.port.write().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Whether the disk is gone.
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// The LU's address at the port.
    pub fn lu(&self) -> LuAddress {
        self.address()
    }

    fn address(&self) -> LuAddress {
        self.info.address
    }

    /// The adapter, unless the disk is gone.
    fn port(&self) -> Result<Arc<HostAdapter>, Outcome> {
        let port = self
            .port
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match port {
            Some(p) if !self.is_gone() => Ok(p),
            _ => Err(Outcome::NoDevice("the session is gone".into())),
        }
    }

    /// The READ(16)/WRITE(16) CDB of one piece (built on the stack: nothing allocated).
    fn rw_cdb(&self, read: bool, lba: u64, blocks: u32, fua: bool) -> scsi::CdbBytes {
        crate::command::rw_cdb(read, lba, blocks, fua)
    }

    /// Runs one transfer as pieces of at most the maximum transfer, submitted together.
    fn transfer(&self, lba: Lba, mut io: Io<'_>) -> Outcome {
        let port = match self.port() {
            Ok(p) => p,
            Err(o) => return o,
        };
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
        let blocks = (total / bs) as u64;
        // Most transfers are one piece: the list of pieces is allocated only beyond that.
        let mut pieces = Vec::with_capacity(if blocks > u64::from(self.max_blocks) {
            blocks.div_ceil(u64::from(self.max_blocks)) as usize
        } else {
            0
        });
        let mut single = None;
        let mut done = 0u64;
        while done < blocks {
            let n = (blocks - done).min(u64::from(self.max_blocks)) as u32;
            let (off, len) = (done as usize * bs, n as usize * bs);
            let cdb = self.rw_cdb(read, lba.0 + done, n, fua);
            // The SRB's buffer: pages of system memory the HCA reads or fills directly.
            let data = match &io {
                Io::Read(_) => port.read_buffer(len),
                Io::Write(d, _) => port.buffer_from(&d[off..off + len]),
            };
            let sent = match data {
                Ok(data) => submit(&port, self.address(), &cdb, dir, data, self.timeout),
                Err(e) => Err(Outcome::Transport {
                    kind: TransportKind::Other,
                    detail: format!("no buffer for {len} bytes: {e}"),
                }),
            };
            if n as u64 == blocks {
                single = Some((off, len, sent));
            } else {
                pieces.push((off, len, sent));
            }
            done += u64::from(n);
        }
        let mut failure = None;
        for (off, len, sent) in single.into_iter().chain(pieces) {
            let outcome = match (sent, &mut io) {
                (Ok(c), Io::Read(buf)) => finish_read(&c, self.timeout, &mut buf[off..off + len]),
                (Ok(c), Io::Write(..)) => finish(&c, dir, self.timeout),
                (Err(o), _) => o,
            };
            if !matches!(outcome, Outcome::Good(_)) {
                failure.get_or_insert(outcome);
            }
        }
        if let Some(Outcome::NoDevice(_)) = &failure {
            self.set_gone();
        }
        failure.unwrap_or(Outcome::Good(Vec::new()))
    }
}

/// One call's buffer.
enum Io<'a> {
    /// Read into it.
    Read(&'a mut [u8]),
    /// Write it, with FUA or not.
    Write(&'a [u8], bool),
}

impl PathDevice for SrpDisk {
    fn read(&self, lba: Lba, buf: &mut [u8]) -> Outcome {
        self.transfer(lba, Io::Read(buf))
    }

    fn write(&self, lba: Lba, data: &[u8], fua: bool) -> Outcome {
        self.transfer(lba, Io::Write(data, fua))
    }

    fn flush(&self) -> Outcome {
        let port = match self.port() {
            Ok(p) => p,
            Err(o) => return o,
        };
        let sync = cdb(Command::SynchronizeCache(SynchronizeCache {
            cdb: LongCdb::Ten,
            lba: Lba(0),
            blocks: BlockCount(0),
            immed: false,
        }));
        execute(
            &port,
            self.address(),
            &sync,
            DataDirection::None,
            Vec::new(),
            self.timeout,
        )
    }

    fn execute(&self, cdb: &[u8], data_in: usize) -> Outcome {
        let port = match self.port() {
            Ok(p) => p,
            Err(o) => return o,
        };
        let dir = if data_in == 0 {
            DataDirection::None
        } else {
            DataDirection::In
        };
        execute(
            &port,
            self.address(),
            cdb,
            dir,
            vec![0; data_in],
            self.timeout,
        )
    }

    fn transport(&self) -> Transport {
        let Ok(port) = self.port() else {
            return Transport::Gone;
        };
        // Powered down on purpose: the path is not failed — the port holds what arrives
        // and runs it after the resume, so multipath keeps sending (docs/host.md, "Power").
        if port.is_suspended() {
            return Transport::Up;
        }
        match port.status().state {
            Some(PortState::Running) => Transport::Up,
            Some(PortState::Lost) => Transport::Gone,
            _ => Transport::Down,
        }
    }

    fn fail_fast(&self) {
        if let Ok(port) = self.port() {
            port.fail_fast_now();
        }
    }
}
