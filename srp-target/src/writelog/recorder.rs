//! [`Recorded`]: a [`Medium`] that passes every call to the medium beneath it and logs
//! each write, flush and discard that completed, with its data and time, to a write log.
//!
//! Order: a record is appended after its call returned, under one lock, so the log's order
//! is an order in which the events completed. A flush notes how many records existed when
//! it began (those writes had completed, so `fdatasync` covers them) and is logged when it
//! returns; writes that complete while it runs are not counted as covered, which can only
//! make the checker stricter. Each record is one `write(2)` to the log (no user-space
//! buffer), so a `kill -9` of the target loses at most the record of a call in flight.
//!
//! A log that cannot be written makes the medium fail every later write, flush and
//! discard (EIO, logged): a recording LUN never acknowledges what it did not record.

use super::WriteLogError;
use super::log::WriteLog;
use super::record::{Event, Header, Record};
use crate::backend::MemSpan;
use crate::backend::medium::Medium;
use ib_verbs::mem::FileIoError;
use nix::errno::Errno;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use wirekit::WireRepr;

/// The log's open file and where the next record goes.
#[derive(Debug)]
struct Tail {
    file: File,
    next_seq: u64,
    /// Why the log stopped being written, once it has.
    broken: Option<String>,
    /// Reused record buffer.
    buf: Vec<u8>,
}

/// A medium whose writes, flushes and discards are logged.
#[derive(Debug)]
pub struct Recorded {
    inner: Box<dyn Medium>,
    path: PathBuf,
    tail: Mutex<Tail>,
}

impl Recorded {
    /// Records the calls to `inner` (a medium of `header`'s geometry) in the log at `path`:
    /// a new log if the file is missing or empty; otherwise the log is continued after its
    /// last whole record (a restart), provided it describes the same medium.
    pub fn open(
        inner: Box<dyn Medium>,
        path: &Path,
        header: Header,
    ) -> Result<Recorded, WriteLogError> {
        let io = |source| WriteLogError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let next_seq = if len == 0 {
            let mut h = vec![0u8; header.buffer_len()];
            header.emit(&mut h)?;
            file.write_all(&h).map_err(io)?;
            0
        } else {
            let log = WriteLog::read(path)?;
            if log.header() != header {
                return Err(WriteLogError::BadField {
                    what: "write log header",
                    field: "geometry",
                    value: log.header().size_bytes,
                    why: "the existing log describes another medium",
                });
            }
            // Drop a record torn by a crash of the previous run.
            file.set_len(log.whole_len()).map_err(io)?;
            log.len() as u64
        };
        // Appends from here on (O_APPEND is not needed: one writer, under the lock).
        use std::io::Seek;
        file.seek(io::SeekFrom::End(0)).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(Recorded {
            inner,
            path: path.to_path_buf(),
            tail: Mutex::new(Tail {
                file,
                next_seq,
                broken: None,
                buf: Vec::new(),
            }),
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.tail.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fails if the log is broken (nothing more may be acknowledged).
    fn usable(&self) -> io::Result<()> {
        match &self.lock().broken {
            None => Ok(()),
            Some(why) => Err(io::Error::other(format!("write log broken: {why}"))),
        }
    }

    /// The sequence number the next record will get.
    fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// Appends `event`; a failure breaks the log and is returned as EIO.
    fn append(&self, event: Event<'_>) -> io::Result<()> {
        let mut tail = self.lock();
        if let Some(why) = &tail.broken {
            return Err(io::Error::other(format!("write log broken: {why}")));
        }
        let record = Record {
            seq: tail.next_seq,
            time_ns: super::monotonic_ns(),
            event,
        };
        let mut buf = std::mem::take(&mut tail.buf);
        buf.clear();
        buf.resize(record.buffer_len(), 0);
        let written = record
            .emit(&mut buf)
            .map_err(io::Error::other)
            .and_then(|_| tail.file.write_all(&buf));
        tail.buf = buf;
        match written {
            Ok(()) => {
                tail.next_seq += 1;
                Ok(())
            }
            Err(e) => {
                tracing::error!(log = %self.path.display(), error = %e,
                    "write log: cannot append a record; the LUN fails every later write and flush");
                tail.broken = Some(e.to_string());
                Err(io::Error::other(format!(
                    "write log {}: {e}",
                    self.path.display()
                )))
            }
        }
    }
}

fn file_io(e: io::Error) -> FileIoError {
    FileIoError::Io(e)
}

impl Medium for Recorded {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn read_into(&self, dst: MemSpan<'_>, offset: u64) -> Result<(), FileIoError> {
        self.inner.read_into(dst, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.usable()?;
        self.inner.write_at(buf, offset)?;
        self.append(Event::Write { offset, data: buf })
    }

    fn write_from(&self, src: MemSpan<'_>, offset: u64) -> Result<(), FileIoError> {
        self.usable().map_err(file_io)?;
        self.inner.write_from(src, offset)?;
        let mut data = vec![0u8; src.len];
        src.block.read(src.offset, &mut data)?;
        self.append(Event::Write {
            offset,
            data: &data,
        })
        .map_err(file_io)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.usable()?;
        let covers = self.next_seq();
        self.inner.sync_data()?;
        self.append(Event::Sync { covers })
    }

    fn seek_extent(&self, offset: u64, data: bool, end: u64) -> Result<Option<u64>, Errno> {
        self.inner.seek_extent(offset, data, end)
    }

    fn will_need(&self, offset: u64, len: u64) -> Result<(), Errno> {
        self.inner.will_need(offset, len)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> Result<(), Errno> {
        self.usable().map_err(|_| Errno::EIO)?;
        self.inner.punch_hole(offset, len)?;
        self.append(Event::Discard { offset, len })
            .map_err(|_| Errno::EIO)
    }
}
