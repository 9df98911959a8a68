//! The intent log's file format: a 32-byte header, then one record per atomic write not
//! yet made durable in place, each a 40-byte header followed by the blocks. Little endian
//! (a local file, not a wire).
//!
//! Header: magic `SRPATOM1`, version 1 (u32), block size (u32), medium size in bytes
//! (u64), 8 reserved bytes (0) — a log is refused for another medium.
//!
//! Record: sequence number (u64, +1 each since the log was last emptied), first block
//! (u64), blocks (u32), CRC-32 of the data (u32), 8 reserved bytes (0), CRC-32 of the 32
//! bytes before it (u32). The data follows. A record whose header or data
//! does not check is where the log ends: a crash tore it before it was synced, and its
//! in-place write never began (the log is synced before the medium is written).

use super::AtomicLogError;
use wirekit::WireRepr;
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"SRPATOM1";
/// The format version this code reads and writes.
pub const VERSION: u32 = 1;

/// The log header as laid out in the file.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct HeaderHdr {
    /// `SRPATOM1`.
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

/// Bytes of the header.
pub const HEADER_LEN: usize = size_of::<HeaderHdr>();

/// What medium a log's records are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Logical block size in bytes.
    pub block_size: u32,
    /// Medium size in bytes.
    pub size_bytes: u64,
}

fn bad(field: &'static str, value: u64, why: &'static str) -> AtomicLogError {
    AtomicLogError::BadField { field, value, why }
}

fn truncated(what: &'static str, need: usize, have: usize) -> AtomicLogError {
    AtomicLogError::Truncated { what, need, have }
}

impl WireRepr<'_> for Header {
    type Error = AtomicLogError;

    fn parse(buf: &[u8]) -> Result<Self, AtomicLogError> {
        let h: HeaderHdr =
            wirekit::read_fixed(buf).map_err(|s| truncated("intent log header", s.need, s.have))?;
        if h.magic != MAGIC {
            return Err(AtomicLogError::NotALog);
        }
        if h.version.get() != VERSION {
            return Err(bad(
                "version",
                h.version.get().into(),
                "only version 1 is known",
            ));
        }
        let bs = h.block_size.get();
        if !bs.is_power_of_two() || !(512..=65536).contains(&bs) {
            return Err(bad("block size", bs.into(), "not a block size"));
        }
        let size = h.size_bytes.get();
        if size == 0 || size % u64::from(bs) != 0 {
            return Err(bad("size", size, "not a positive whole number of blocks"));
        }
        if h.reserved != [0; 8] {
            return Err(bad("reserved", 0, "must be zero"));
        }
        Ok(Header {
            block_size: bs,
            size_bytes: size,
        })
    }

    fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, AtomicLogError> {
        let h = HeaderHdr {
            magic: MAGIC,
            version: U32::new(VERSION),
            block_size: U32::new(self.block_size),
            size_bytes: U64::new(self.size_bytes),
            reserved: [0; 8],
        };
        let have = buf.len();
        wirekit::write_fixed(&h, buf).map_err(|s| truncated("intent log header", s.need, have))
    }
}

/// A record's fixed part as laid out in the file.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RecordHdr {
    /// Sequence number.
    pub seq: U64,
    /// First block.
    pub lba: U64,
    /// Blocks.
    pub blocks: U32,
    /// CRC-32 of the data.
    pub data_crc: U32,
    /// Reserved, 0.
    pub reserved: [u8; 8],
    /// CRC-32 of the 32 bytes before it.
    pub header_crc: U32,
}
const _: () = assert!(size_of::<RecordHdr>() == 36);

/// Bytes of a record's fixed part.
pub const RECORD_HDR_LEN: usize = size_of::<RecordHdr>();

/// One atomic write: `data` for the blocks from `lba` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Sequence number.
    pub seq: u64,
    /// First block.
    pub lba: u64,
    /// The blocks (whole blocks of the log's block size).
    pub data: &'a [u8],
}

impl<'a> Record<'a> {
    /// Parses a record whose blocks are `block_size` bytes.
    pub fn parse_with(buf: &'a [u8], block_size: u32) -> Result<Self, AtomicLogError> {
        const W: &str = "intent log record";
        let h: RecordHdr = wirekit::read_fixed(buf).map_err(|s| truncated(W, s.need, s.have))?;
        let fixed = &buf[..RECORD_HDR_LEN - 4];
        if crc32fast::hash(fixed) != h.header_crc.get() {
            return Err(AtomicLogError::Torn {
                what: "record header",
            });
        }
        if h.reserved != [0; 8] {
            return Err(bad("reserved", 0, "must be zero"));
        }
        let len = usize::try_from(u64::from(h.blocks.get()) * u64::from(block_size))
            .map_err(|_| bad("blocks", h.blocks.get().into(), "too large"))?;
        if len == 0 {
            return Err(bad("blocks", 0, "a record writes at least one block"));
        }
        let data = buf[RECORD_HDR_LEN..]
            .get(..len)
            .ok_or_else(|| truncated(W, RECORD_HDR_LEN + len, buf.len()))?;
        if crc32fast::hash(data) != h.data_crc.get() {
            return Err(AtomicLogError::Torn {
                what: "record data",
            });
        }
        Ok(Record {
            seq: h.seq.get(),
            lba: h.lba.get(),
            data,
        })
    }

    /// Bytes the record takes in the file.
    pub fn len(&self) -> usize {
        RECORD_HDR_LEN + self.data.len()
    }

    /// Never empty (a record holds at least one block); for clippy.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the record for blocks of `block_size` bytes.
    pub fn emit_with(&self, buf: &mut [u8], block_size: u32) -> Result<usize, AtomicLogError> {
        let bs = block_size as usize;
        if self.data.is_empty() || self.data.len() % bs != 0 {
            return Err(bad(
                "data",
                self.data.len() as u64,
                "not a positive whole number of blocks",
            ));
        }
        let blocks = u32::try_from(self.data.len() / bs)
            .map_err(|_| bad("blocks", (self.data.len() / bs) as u64, "too many"))?;
        let have = buf.len();
        let out = buf
            .get_mut(..self.len())
            .ok_or_else(|| truncated("intent log record", self.len(), have))?;
        let mut h = RecordHdr {
            seq: U64::new(self.seq),
            lba: U64::new(self.lba),
            blocks: U32::new(blocks),
            data_crc: U32::new(crc32fast::hash(self.data)),
            reserved: [0; 8],
            header_crc: U32::new(0),
        };
        h.header_crc = U32::new(crc32fast::hash(&h.as_bytes()[..RECORD_HDR_LEN - 4]));
        out[..RECORD_HDR_LEN].copy_from_slice(h.as_bytes());
        out[RECORD_HDR_LEN..].copy_from_slice(self.data);
        Ok(self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    fn header_bytes() -> Vec<u8> {
        let mut b = b"SRPATOM1".to_vec();
        b.extend(1u32.to_le_bytes());
        b.extend(512u32.to_le_bytes());
        b.extend((1u64 << 20).to_le_bytes());
        b.extend([0; 8]);
        b
    }

    const HEADER: Header = Header {
        block_size: 512,
        size_bytes: 1 << 20,
    };

    #[test]
    fn header_known_bytes_decode() {
        check::decodes(&header_bytes(), &HEADER);
    }

    #[test]
    fn header_emit_into_a5_reproduces() {
        check::emits(&HEADER, &header_bytes());
    }

    #[test]
    fn header_round_trip() {
        check::round_trips(&HEADER, &mut Vec::new());
    }

    #[test]
    fn header_truncated_errors() {
        check::truncation_errors::<Header>(&header_bytes());
    }

    #[test]
    fn header_of_another_kind_of_file_is_refused() {
        let mut b = header_bytes();
        b[..8].copy_from_slice(b"SRPWLOG1");
        assert!(matches!(Header::parse(&b), Err(AtomicLogError::NotALog)));
    }

    fn record_bytes(data: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(7u64.to_le_bytes());
        b.extend(40u64.to_le_bytes());
        b.extend(((data.len() / 512) as u32).to_le_bytes());
        b.extend(crc32fast::hash(data).to_le_bytes());
        b.extend([0; 8]);
        let crc = crc32fast::hash(&b);
        b.extend(crc.to_le_bytes());
        b.extend(data);
        b
    }

    #[test]
    fn record_known_bytes_decode_emit_round_trip_and_truncations() {
        let data: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
        let bytes = record_bytes(&data);
        let r = Record {
            seq: 7,
            lba: 40,
            data: &data,
        };
        // Known bytes decode.
        assert_eq!(Record::parse_with(&bytes, 512).expect("parses"), r);
        // Emit into a 0xa5-filled buffer reproduces them (and no byte past them).
        let mut buf = vec![0xa5u8; bytes.len() + 3];
        assert_eq!(r.emit_with(&mut buf, 512).expect("emits"), bytes.len());
        assert_eq!(&buf[..bytes.len()], &bytes[..]);
        assert_eq!(&buf[bytes.len()..], &[0xa5; 3]);
        // Round trip.
        assert_eq!(Record::parse_with(&buf, 512).expect("parses"), r);
        // Every truncation errors.
        for n in 0..bytes.len() {
            assert!(Record::parse_with(&bytes[..n], 512).is_err(), "{n} bytes");
        }
    }

    #[test]
    fn a_torn_record_is_refused() {
        let data = vec![9u8; 512];
        let mut bytes = record_bytes(&data);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(matches!(
            Record::parse_with(&bytes, 512),
            Err(AtomicLogError::Torn {
                what: "record data"
            })
        ));
        let mut bytes = record_bytes(&data);
        bytes[3] ^= 1;
        assert!(matches!(
            Record::parse_with(&bytes, 512),
            Err(AtomicLogError::Torn {
                what: "record header"
            })
        ));
    }
}
