//! The intent log that makes WRITE ATOMIC power-fail atomic on a file or a block device
//! (issue #29, Deliver 3), up to the LU's maximum transfer length.
//!
//! A buffered `pwrite` of several blocks can be torn by a power loss anywhere between the
//! device's physical blocks. So an atomic write is first appended to the LU's intent log —
//! its blocks and a checksummed header — and the log is synced; only then are the blocks
//! written in place. A crash before the log's sync leaves the medium untouched (the record
//! is torn and ignored: all old); a crash after it is repaired at the next start: every
//! whole record is written in place again, the medium synced, and the log emptied (all
//! new). Either way no reader ever sees part of the write.
//!
//! A record may go once its blocks are durable in place, that is, after the LU's next
//! flush; the log is emptied then ([`IntentLog::retire`], called by the LU's flush while it
//! holds the log, so no atomic write slips between the flush and the emptying). Keeping a
//! record past a flush would be wrong: replayed after a crash it would overwrite a later
//! write that the flush made durable.
//!
//! Where the log lives: `state_dir/atomic/<LUN name>.log` on the appliance, for files and
//! block devices alike (docs/target.md). A device moved to another appliance without its
//! log loses only what the log held — atomic writes in flight or not yet flushed at the
//! moment it was taken away — and then reads as a buffered write would: each of those
//! possibly torn. The log names its medium (block size and size) and is refused for
//! another.
//!
//! The log's system calls go through a [`Medium`] (the plain file, or the write log's
//! recorder beneath it in the crash tests), as the backend's do.
//!
//! Files: [`record`] (the file format).

pub mod record;

use crate::backend::medium::{FileMedium, Medium};
use record::{HEADER_LEN, Header, Record};
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use wirekit::WireRepr;

/// Why the intent log could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AtomicLogError {
    /// The bytes end before the header or record does.
    #[error("{what}: truncated: need {need} bytes, have {have}")]
    Truncated {
        /// What was being parsed.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes there.
        have: usize,
    },
    /// Not an intent log.
    #[error("not an intent log (bad magic)")]
    NotALog,
    /// A field holds a value this code does not accept.
    #[error("intent log {field} {value}: {why}")]
    BadField {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A record a crash tore (its checksum fails): where the log ends.
    #[error("intent log {what}: checksum mismatch (torn by a crash)")]
    Torn {
        /// Which part.
        what: &'static str,
    },
    /// The log belongs to another medium.
    #[error("{path}: the intent log is for another medium ({found:?}, this one is {want:?})", path = path.display())]
    AnotherMedium {
        /// The log.
        path: PathBuf,
        /// What it says.
        found: Header,
        /// What it should say.
        want: Header,
    },
    /// Writing a record in place, or flushing the medium, failed during the start-up
    /// repair.
    #[error("replaying the intent log onto the medium: {0}")]
    Replay(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The operating system refused.
    #[error("{op} {path}: {source}", path = path.display())]
    Io {
        /// What was done.
        op: &'static str,
        /// The log.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// One LU's intent log (module doc).
#[derive(Debug)]
pub struct IntentLog {
    medium: Box<dyn Medium>,
    path: PathBuf,
    header: Header,
    /// Where the next record goes.
    end: u64,
    /// The next record's sequence number.
    next_seq: u64,
}

/// What opening a log found: the records to replay, in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pending {
    /// (first block, data) of each whole record.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// Bytes past the last whole record (a torn one): dropped.
    pub torn_bytes: u64,
}

impl IntentLog {
    /// Opens (or creates, mode 0600) the log at `path` for a medium of `header`'s
    /// geometry; returns it with the whole records it holds (for [`IntentLog::recover`]).
    pub fn open(path: &Path, header: Header) -> Result<(IntentLog, Pending), AtomicLogError> {
        let io = |op| {
            move |source| AtomicLogError::Io {
                op,
                path: path.to_path_buf(),
                source,
            }
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io("create the directory of"))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io("open"))?;
        let bytes = std::fs::read(path).map_err(io("read"))?;
        let medium: Box<dyn Medium> = Box::new(FileMedium::new(file));
        IntentLog::from_parts(medium, path, header, &bytes)
    }

    /// The log over `medium` (whose contents are `bytes`), for `header`'s medium.
    pub fn from_parts(
        medium: Box<dyn Medium>,
        path: &Path,
        header: Header,
        bytes: &[u8],
    ) -> Result<(IntentLog, Pending), AtomicLogError> {
        let mut log = IntentLog {
            medium,
            path: path.to_path_buf(),
            header,
            end: HEADER_LEN as u64,
            next_seq: 0,
        };
        if bytes.len() < HEADER_LEN {
            // New, or torn before its header was synced: nothing was ever logged in it.
            log.reset()?;
            return Ok((log, Pending::default()));
        }
        let found = Header::parse(bytes)?;
        if found != header {
            // An empty log of another geometry (the LUN's store or block size changed) is
            // simply started again; one holding records is not: they belong to that medium.
            if parse_records(&bytes[HEADER_LEN..], found.block_size)
                .writes
                .is_empty()
            {
                log.reset()?;
                return Ok((log, Pending::default()));
            }
            return Err(AtomicLogError::AnotherMedium {
                path: path.to_path_buf(),
                found,
                want: header,
            });
        }
        let pending = parse_records(&bytes[HEADER_LEN..], header.block_size);
        Ok((log, pending))
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Puts `medium` beneath the log (the crash tests' recorder).
    pub fn interpose(self, layer: impl FnOnce(Box<dyn Medium>) -> Box<dyn Medium>) -> Self {
        IntentLog {
            medium: layer(self.medium),
            ..self
        }
    }

    fn io(&self, op: &'static str) -> impl Fn(std::io::Error) -> AtomicLogError + '_ {
        move |source| AtomicLogError::Io {
            op,
            path: self.path.clone(),
            source,
        }
    }

    /// Appends the atomic write of `data` at block `lba` and syncs the log: once this
    /// returns, a crash leaves the blocks all new after [`IntentLog::recover`].
    pub fn log(&mut self, lba: u64, data: &[u8]) -> Result<(), AtomicLogError> {
        let r = Record {
            seq: self.next_seq,
            lba,
            data,
        };
        let mut buf = vec![0u8; r.len()];
        r.emit_with(&mut buf, self.header.block_size)?;
        self.medium
            .write_at(&buf, self.end)
            .map_err(self.io("write"))?;
        self.medium.sync_data().map_err(self.io("sync"))?;
        self.end += buf.len() as u64;
        self.next_seq += 1;
        Ok(())
    }

    /// Whether a record is held (an atomic write not yet flushed in place).
    pub fn holds_records(&self) -> bool {
        self.end > HEADER_LEN as u64
    }

    /// Empties the log, durably: called once everything it held is durable in place.
    pub fn retire(&mut self) -> Result<(), AtomicLogError> {
        if !self.holds_records() {
            return Ok(());
        }
        self.reset()
    }

    /// The empty log: the header alone, synced.
    fn reset(&mut self) -> Result<(), AtomicLogError> {
        let mut h = [0u8; HEADER_LEN];
        self.header.emit(&mut h)?;
        self.medium.write_at(&h, 0).map_err(self.io("write"))?;
        self.medium
            .set_len(HEADER_LEN as u64)
            .map_err(self.io("truncate"))?;
        self.medium.sync_data().map_err(self.io("sync"))?;
        self.end = HEADER_LEN as u64;
        self.next_seq = 0;
        Ok(())
    }

    /// Start-up repair: writes every pending record in place with `write` (block, data),
    /// in order, then `flush`es the medium and empties the log. Returns how many records
    /// were replayed.
    pub fn recover<E: std::error::Error + Send + Sync + 'static>(
        &mut self,
        pending: &Pending,
        mut write: impl FnMut(u64, &[u8]) -> Result<(), E>,
        flush: impl FnOnce() -> Result<(), E>,
    ) -> Result<usize, AtomicLogError> {
        let replay = |e: E| AtomicLogError::Replay(Box::new(e));
        for (lba, data) in &pending.writes {
            write(*lba, data).map_err(replay)?;
        }
        if !pending.writes.is_empty() {
            flush().map_err(replay)?;
        }
        self.reset()?;
        Ok(pending.writes.len())
    }
}

/// The whole records of a log body (after its header), up to the first torn one.
pub fn parse_records(mut body: &[u8], block_size: u32) -> Pending {
    let mut pending = Pending::default();
    let mut seq = 0;
    while !body.is_empty() {
        match Record::parse_with(body, block_size) {
            Ok(r) if r.seq == seq => {
                pending.writes.push((r.lba, r.data.to_vec()));
                body = &body[r.len()..];
                seq += 1;
            }
            // A torn record, or one left from before the log was last emptied: the end.
            _ => break,
        }
    }
    pending.torn_bytes = body.len() as u64;
    pending
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("atomic-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    const H: Header = Header {
        block_size: 512,
        size_bytes: 1 << 20,
    };

    #[test]
    fn records_survive_a_restart_in_order_and_a_torn_tail_is_dropped() {
        let d = dir("restart");
        let path = d.join("atomic/lu.log");
        let (mut log, pending) = IntentLog::open(&path, H).expect("open");
        assert_eq!(pending, Pending::default());
        assert_eq!(
            std::fs::metadata(&path)
                .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
                .expect("stat"),
            0o600
        );
        log.log(8, &[1u8; 1024]).expect("log");
        log.log(100, &[2u8; 512]).expect("log");
        drop(log);
        // A third record torn by a crash: its last bytes never reached the file.
        let mut bytes = std::fs::read(&path).expect("read");
        let whole = bytes.len();
        let mut third = vec![0u8; record::RECORD_HDR_LEN + 512];
        Record {
            seq: 2,
            lba: 7,
            data: &[3u8; 512],
        }
        .emit_with(&mut third, 512)
        .expect("emit");
        bytes.extend(&third[..third.len() - 100]);
        std::fs::write(&path, &bytes).expect("tear");
        let (mut log, pending) = IntentLog::open(&path, H).expect("reopen");
        assert_eq!(
            pending.writes,
            vec![(8, vec![1u8; 1024]), (100, vec![2u8; 512])]
        );
        assert_eq!(pending.torn_bytes, (bytes.len() - whole) as u64);
        let mut medium = vec![0u8; 1 << 20];
        let n = log
            .recover(
                &pending,
                |lba, data| {
                    let at = lba as usize * 512;
                    medium[at..at + data.len()].copy_from_slice(data);
                    Ok::<(), std::io::Error>(())
                },
                || Ok(()),
            )
            .expect("recover");
        assert_eq!(n, 2);
        assert_eq!(&medium[8 * 512..10 * 512], &[1u8; 1024][..]);
        assert_eq!(
            std::fs::metadata(&path).expect("stat").len(),
            HEADER_LEN as u64
        );
        let (_, again) = IntentLog::open(&path, H).expect("reopen");
        assert!(again.writes.is_empty(), "emptied");
        // Another medium: refused while the log holds records, started again when empty.
        let other = Header {
            size_bytes: 2 << 20,
            ..H
        };
        let (mut log, _) = IntentLog::open(&path, H).expect("reopen");
        log.log(1, &[4u8; 512]).expect("log");
        drop(log);
        assert!(matches!(
            IntentLog::open(&path, other),
            Err(AtomicLogError::AnotherMedium { .. })
        ));
        let (mut log, pending) = IntentLog::open(&path, H).expect("its own medium");
        log.recover(&pending, |_, _| Ok::<(), std::io::Error>(()), || Ok(()))
            .expect("recover");
        drop(log);
        let (_, pending) = IntentLog::open(&path, other).expect("empty: started again");
        assert!(pending.writes.is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn retire_empties_a_log_that_holds_records() {
        let d = dir("retire");
        let path = d.join("lu.log");
        let (mut log, _) = IntentLog::open(&path, H).expect("open");
        assert!(!log.holds_records());
        log.log(0, &[5u8; 512]).expect("log");
        assert!(log.holds_records());
        log.retire().expect("retire");
        assert!(!log.holds_records());
        let (_, pending) = IntentLog::open(&path, H).expect("reopen");
        assert!(pending.writes.is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }
}
