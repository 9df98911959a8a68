//! [`WriteLog`]: a write log read back whole — its header and records, validated — and
//! replayed into an image.

use super::WriteLogError;
use super::record::{Event, Header, Record};
use std::path::Path;
use wirekit::WireRepr;

/// A record held by the log (owned data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// CLOCK_MONOTONIC nanoseconds when the event completed.
    pub time_ns: u64,
    /// What it was.
    pub kind: EntryKind,
}

/// An owned [`Event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// `data` written at byte `offset`.
    Write {
        /// Byte offset.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A flush covering the entries before index `covers`.
    Sync {
        /// Entries covered.
        covers: u64,
    },
    /// `len` bytes at `offset` deallocated (zeros).
    Discard {
        /// Byte offset.
        offset: u64,
        /// Byte length.
        len: u64,
    },
}

/// A whole write log.
#[derive(Clone, Debug)]
pub struct WriteLog {
    header: Header,
    entries: Vec<Entry>,
    /// Bytes of the file up to the end of the last whole record.
    whole_len: u64,
    /// Bytes after it: a record torn by a crash while it was being appended.
    torn_tail: u64,
}

impl WriteLog {
    /// Reads and validates the log at `path`. A record cut short at the very end (the
    /// target killed while appending it) is left out and reported by
    /// [`WriteLog::torn_tail`]; anything else malformed is an error.
    pub fn read(path: &Path) -> Result<WriteLog, WriteLogError> {
        let bytes = std::fs::read(path).map_err(|source| WriteLogError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        WriteLog::parse(&bytes)
    }

    /// Parses a log held in memory (see [`WriteLog::read`]).
    pub fn parse(bytes: &[u8]) -> Result<WriteLog, WriteLogError> {
        let header = Header::parse(bytes)?;
        let mut at = header.buffer_len();
        let mut entries = Vec::new();
        while at < bytes.len() {
            let record = match Record::parse(&bytes[at..]) {
                Ok(r) => r,
                Err(WriteLogError::Truncated { .. }) => break,
                Err(e) => return Err(e),
            };
            let index = entries.len() as u64;
            if record.seq != index {
                return Err(WriteLogError::OutOfSequence {
                    index,
                    seq: record.seq,
                });
            }
            let (offset, len) = match record.event {
                Event::Write { offset, data } => (offset, data.len() as u64),
                Event::Discard { offset, len } => (offset, len),
                Event::Sync { .. } => (0, 0),
            };
            if offset
                .checked_add(len)
                .is_none_or(|end| end > header.size_bytes)
            {
                return Err(WriteLogError::OutOfRange {
                    seq: record.seq,
                    offset,
                    len,
                    size_bytes: header.size_bytes,
                });
            }
            at += record.buffer_len();
            entries.push(Entry {
                time_ns: record.time_ns,
                kind: match record.event {
                    Event::Write { offset, data } => EntryKind::Write {
                        offset,
                        data: data.to_vec(),
                    },
                    Event::Sync { covers } => EntryKind::Sync { covers },
                    Event::Discard { offset, len } => EntryKind::Discard { offset, len },
                },
            });
        }
        Ok(WriteLog {
            header,
            entries,
            whole_len: at as u64,
            torn_tail: (bytes.len() - at) as u64,
        })
    }

    /// What medium it describes.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The records, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has no records.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of the file up to the end of the last whole record.
    pub fn whole_len(&self) -> u64 {
        self.whole_len
    }

    /// Bytes of a record cut short at the end of the file (0 if none).
    pub fn torn_tail(&self) -> u64 {
        self.torn_tail
    }

    /// The first `count` records applied, in order and all of them, to `image` (the
    /// medium's contents when the log began): what the medium holds if nothing is lost.
    pub fn replay(&self, image: &mut [u8], count: usize) {
        for e in &self.entries[..count.min(self.entries.len())] {
            match &e.kind {
                EntryKind::Write { offset, data } => {
                    let at = *offset as usize;
                    image[at..at + data.len()].copy_from_slice(data);
                }
                EntryKind::Discard { offset, len } => {
                    let at = *offset as usize;
                    image[at..at + *len as usize].fill(0);
                }
                EntryKind::Sync { .. } => {}
            }
        }
    }
}
