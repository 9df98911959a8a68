//! The write log's file format: a 32-byte header, then one record per event that reached
//! the medium, each a 48-byte header followed, for a write, by its data. Little endian
//! (a local file, not a wire).
//!
//! Header: magic `SRPWLOG1`, version 1 (u32), block size (u32), medium size in bytes
//! (u64), 8 reserved bytes (0).
//!
//! Record: kind (u8: 1 write, 2 sync, 3 discard), 7 reserved bytes (0), sequence number
//! (u64, 0 for the first record, +1 each), the CLOCK_MONOTONIC time the event completed
//! (u64 ns), byte offset (u64), length (u64), and for a sync the number of records it
//! covers (u64: every record with a lower sequence number completed before the
//! `fdatasync` began; 0 for the other kinds). A write's `length` bytes of data follow.

use super::WriteLogError;
use wirekit::WireRepr;
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"SRPWLOG1";
/// The format version this code reads and writes.
pub const VERSION: u32 = 1;

const KIND_WRITE: u8 = 1;
const KIND_SYNC: u8 = 2;
const KIND_DISCARD: u8 = 3;

/// The log header as laid out in the file.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct HeaderHdr {
    /// `SRPWLOG1`.
    pub magic: [u8; 8],
    /// 1.
    pub version: U32,
    /// The medium's logical block size.
    pub block_size: U32,
    /// The medium's size in bytes.
    pub size_bytes: U64,
    /// Reserved, 0.
    pub reserved: [u8; 8],
}
const _: () = assert!(size_of::<HeaderHdr>() == 32);

/// The log header: what medium the records describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Logical block size in bytes (512 or 4096).
    pub block_size: u32,
    /// Medium size in bytes (whole blocks).
    pub size_bytes: u64,
}

fn bad(what: &'static str, field: &'static str, value: u64, why: &'static str) -> WriteLogError {
    WriteLogError::BadField {
        what,
        field,
        value,
        why,
    }
}

impl WireRepr<'_> for Header {
    type Error = WriteLogError;

    fn parse(buf: &[u8]) -> Result<Self, WriteLogError> {
        const W: &str = "write log header";
        let h: HeaderHdr = super::read_fixed(W, buf)?;
        if h.magic != MAGIC {
            return Err(WriteLogError::NotALog);
        }
        if h.version.get() != VERSION {
            return Err(bad(
                W,
                "version",
                h.version.get().into(),
                "only version 1 is known",
            ));
        }
        let bs = h.block_size.get();
        if bs != 512 && bs != 4096 {
            return Err(bad(W, "block size", bs.into(), "must be 512 or 4096"));
        }
        let size = h.size_bytes.get();
        if size == 0 || size % u64::from(bs) != 0 {
            return Err(bad(
                W,
                "size",
                size,
                "not a positive whole number of blocks",
            ));
        }
        if h.reserved != [0; 8] {
            return Err(bad(W, "reserved", 0, "must be zero"));
        }
        Ok(Header {
            block_size: bs,
            size_bytes: size,
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<HeaderHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WriteLogError> {
        let h = HeaderHdr {
            magic: MAGIC,
            version: U32::new(VERSION),
            block_size: U32::new(self.block_size),
            size_bytes: U64::new(self.size_bytes),
            reserved: [0; 8],
        };
        super::write_fixed("write log header", &h, buf)
    }
}

/// A record's fixed part as laid out in the file.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RecordHdr {
    /// 1 write, 2 sync, 3 discard.
    pub kind: u8,
    /// Reserved, 0.
    pub reserved: [u8; 7],
    /// Sequence number.
    pub seq: U64,
    /// CLOCK_MONOTONIC nanoseconds when the event completed.
    pub time_ns: U64,
    /// Byte offset (write, discard).
    pub offset: U64,
    /// Byte length (write, discard).
    pub len: U64,
    /// Records covered (sync).
    pub covers: U64,
}
const _: () = assert!(size_of::<RecordHdr>() == 48);

/// Bytes of a record's fixed part.
pub const RECORD_HDR_LEN: usize = size_of::<RecordHdr>();

/// What reached the medium.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// `pwrite` of `data` at byte `offset` completed.
    Write {
        /// Byte offset.
        offset: u64,
        /// The bytes written.
        data: &'a [u8],
    },
    /// `fdatasync` completed: records `0..covers` are on stable storage.
    Sync {
        /// Records covered.
        covers: u64,
    },
    /// `len` bytes at `offset` were deallocated (they read back as zeros).
    Discard {
        /// Byte offset.
        offset: u64,
        /// Byte length.
        len: u64,
    },
}

/// One record of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Sequence number (its index in the log).
    pub seq: u64,
    /// CLOCK_MONOTONIC nanoseconds when the event completed.
    pub time_ns: u64,
    /// The event.
    pub event: Event<'a>,
}

impl<'a> WireRepr<'a> for Record<'a> {
    type Error = WriteLogError;

    fn parse(buf: &'a [u8]) -> Result<Self, WriteLogError> {
        const W: &str = "write log record";
        let h: RecordHdr = super::read_fixed(W, buf)?;
        if h.reserved != [0; 7] {
            return Err(bad(W, "reserved", 0, "must be zero"));
        }
        let (seq, offset, len, covers) = (h.seq.get(), h.offset.get(), h.len.get(), h.covers.get());
        let event = match h.kind {
            KIND_WRITE => {
                let n = usize::try_from(len).map_err(|_| bad(W, "length", len, "too large"))?;
                let data = buf[RECORD_HDR_LEN..]
                    .get(..n)
                    .ok_or(WriteLogError::Truncated {
                        what: W,
                        need: RECORD_HDR_LEN.saturating_add(n),
                        have: buf.len(),
                    })?;
                Event::Write { offset, data }
            }
            KIND_SYNC => {
                if offset != 0 || len != 0 {
                    return Err(bad(W, "offset/length", offset | len, "a sync has neither"));
                }
                if covers > seq {
                    return Err(bad(
                        W,
                        "covers",
                        covers,
                        "a sync covers only earlier records",
                    ));
                }
                Event::Sync { covers }
            }
            KIND_DISCARD => Event::Discard { offset, len },
            k => {
                return Err(bad(
                    W,
                    "kind",
                    k.into(),
                    "not 1 (write), 2 (sync) or 3 (discard)",
                ));
            }
        };
        if !matches!(event, Event::Sync { .. }) && covers != 0 {
            return Err(bad(W, "covers", covers, "only a sync covers records"));
        }
        Ok(Record {
            seq,
            time_ns: h.time_ns.get(),
            event,
        })
    }

    fn buffer_len(&self) -> usize {
        RECORD_HDR_LEN
            + match self.event {
                Event::Write { data, .. } => data.len(),
                _ => 0,
            }
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WriteLogError> {
        let (kind, offset, len, covers) = match self.event {
            Event::Write { offset, data } => (KIND_WRITE, offset, data.len() as u64, 0),
            Event::Sync { covers } => (KIND_SYNC, 0, 0, covers),
            Event::Discard { offset, len } => (KIND_DISCARD, offset, len, 0),
        };
        let need = self.buffer_len();
        if buf.len() < need {
            return Err(WriteLogError::BufferTooSmall {
                what: "write log record",
                need,
                have: buf.len(),
            });
        }
        let h = RecordHdr {
            kind,
            reserved: [0; 7],
            seq: U64::new(self.seq),
            time_ns: U64::new(self.time_ns),
            offset: U64::new(offset),
            len: U64::new(len),
            covers: U64::new(covers),
        };
        super::write_fixed("write log record", &h, buf)?;
        if let Event::Write { data, .. } = self.event {
            buf[RECORD_HDR_LEN..need].copy_from_slice(data);
        }
        Ok(need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    const HEADER: [u8; 32] = [
        b'S', b'R', b'P', b'W', b'L', b'O', b'G', b'1', 1, 0, 0, 0, 0, 2, 0, 0, //
        0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    const HEADER_REPR: Header = Header {
        block_size: 512,
        size_bytes: 16 << 20,
    };

    /// A 2-byte write (the data follows the 48-byte header).
    const WRITE: [u8; 50] = [
        1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, //
        0x10, 0x32, 0x54, 0x76, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, //
        2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
        0xab, 0xcd,
    ];
    fn write_repr() -> Record<'static> {
        Record {
            seq: 7,
            time_ns: 0x7654_3210,
            event: Event::Write {
                offset: 0x1000,
                data: &[0xab, 0xcd],
            },
        }
    }

    const SYNC: [u8; 48] = [
        2, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, //
        1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0,
    ];
    const SYNC_REPR: Record<'static> = Record {
        seq: 9,
        time_ns: 1,
        event: Event::Sync { covers: 8 },
    };

    #[test]
    fn header_decodes() {
        check::decodes(&HEADER, &HEADER_REPR);
    }
    #[test]
    fn header_emits() {
        check::emits(&HEADER_REPR, &HEADER);
    }
    #[test]
    fn header_round_trips() {
        check::round_trips(&HEADER_REPR, &mut Vec::new());
    }
    #[test]
    fn header_truncation_errors() {
        check::truncation_errors::<Header>(&HEADER);
    }

    #[test]
    fn records_decode() {
        check::decodes(&WRITE, &write_repr());
        check::decodes(&SYNC, &SYNC_REPR);
    }
    #[test]
    fn records_emit() {
        check::emits(&write_repr(), &WRITE);
        check::emits(&SYNC_REPR, &SYNC);
    }
    #[test]
    fn records_round_trip() {
        let discard = Record {
            seq: 3,
            time_ns: 99,
            event: Event::Discard {
                offset: 4096,
                len: 8192,
            },
        };
        for r in [write_repr(), SYNC_REPR, discard] {
            check::round_trips(&r, &mut Vec::new());
        }
    }
    #[test]
    fn records_truncation_errors() {
        check::truncation_errors::<Record<'_>>(&WRITE);
        check::truncation_errors::<Record<'_>>(&SYNC);
    }

    #[test]
    fn bad_fields_are_named() {
        let mut b = HEADER;
        b[0] = b'X';
        assert!(matches!(Header::parse(&b), Err(WriteLogError::NotALog)));
        let mut b = HEADER;
        b[12] = 3; // block size 0x203
        assert!(matches!(
            Header::parse(&b),
            Err(WriteLogError::BadField {
                field: "block size",
                ..
            })
        ));
        let mut b = SYNC;
        b[0] = 4;
        assert!(matches!(
            Record::parse(&b),
            Err(WriteLogError::BadField { field: "kind", .. })
        ));
        let mut b = SYNC;
        b[40] = 10; // covers 10 > seq 9
        assert!(matches!(
            Record::parse(&b),
            Err(WriteLogError::BadField {
                field: "covers",
                ..
            })
        ));
        let mut b = WRITE;
        b[40] = 1; // a write with covers
        assert!(matches!(
            Record::parse(&b),
            Err(WriteLogError::BadField {
                field: "covers",
                ..
            })
        ));
    }
}
