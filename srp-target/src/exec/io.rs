//! Block I/O commands (SBC-3): READ, WRITE, VERIFY, COMPARE AND WRITE, SYNCHRONIZE CACHE,
//! READ CAPACITY(10)/(16).
//!
//! Reads (VERIFY's included) take the LU's order shared, so that a WRITE ATOMIC or ORWRITE (exclusive) is seen
//! whole or not at all (`writes.rs`).
//!
//! Order of checks, as LIO's sbc_parse_cdb and SBC-3: CDB fields (parse), write protect,
//! transfer length against the block limits, LBA range, then the data-out.

use super::store::MediumWrites;
use super::{
    CmdOutput, Exec, LogicalUnit, Nexus, Stop, TransportError, backend_sense, data_out, good_data,
};
use crate::backend::MemSpan;
use scsi::cdb::{ByteCheck, CompareAndWrite, ReadCapacity16, ReadWrite, SynchronizeCache, Verify};
use scsi::cdb::{LongCdb, RwCdb};
use scsi::{BlockCount, Lba, Sense, SenseCode};

/// Largest READ/WRITE/VERIFY transfer in bytes (VPD B0h MAXIMUM TRANSFER LENGTH).
pub const MAX_TRANSFER_BYTES: u32 = 8 << 20;
/// Largest COMPARE AND WRITE in blocks (VPD B0h): the CDB field's limit.
pub const MAX_COMPARE_AND_WRITE_BLOCKS: u8 = 255;

impl LogicalUnit {
    /// Last LBA (READ CAPACITY's RETURNED LOGICAL BLOCK ADDRESS).
    pub(crate) fn last_lba(&self) -> Lba {
        // Backends have at least one block.
        Lba(self.backend.blocks().saturating_sub(1))
    }

    /// Block size in bytes.
    pub(crate) fn block_bytes(&self) -> u32 {
        self.backend.block_size().bytes()
    }

    /// MAXIMUM TRANSFER LENGTH in blocks (at least one).
    pub(crate) fn max_transfer_blocks(&self) -> u32 {
        (self.max_transfer_bytes / self.block_bytes()).max(1)
    }

    /// LBA OUT OF RANGE unless `lba..lba+blocks` lies on the medium.
    pub(crate) fn check_range(&self, lba: Lba, blocks: BlockCount) -> Result<(), Stop> {
        if lba.range_within(blocks, self.last_lba()) {
            Ok(())
        } else {
            Err(SenseCode::LBA_OUT_OF_RANGE.into())
        }
    }

    /// `blocks` as a byte length (bounded by the transfer limits checked before).
    pub(crate) fn bytes_of(&self, blocks: BlockCount) -> usize {
        usize::try_from(blocks.bytes(self.block_bytes())).unwrap_or(usize::MAX)
    }
}

/// The CDB byte holding the TRANSFER LENGTH (its most-significant byte).
pub(crate) fn length_byte(cdb: RwCdb) -> u16 {
    match cdb {
        RwCdb::Six => 4,
        RwCdb::Ten => 7,
        RwCdb::Twelve => 6,
        RwCdb::Sixteen => 10,
    }
}

/// The CDB byte holding a 10-, 12- or 16-byte command's length field.
pub(crate) fn long_length_byte(cdb: LongCdb) -> u16 {
    match cdb {
        LongCdb::Ten => 7,
        LongCdb::Twelve => 6,
        LongCdb::Sixteen => 10,
    }
}

/// INVALID FIELD IN CDB at the length field when `blocks` exceeds the transfer limit.
pub(crate) fn check_transfer(lu: &LogicalUnit, blocks: BlockCount, byte: u16) -> Result<(), Stop> {
    if blocks.0 > lu.max_transfer_blocks() {
        return Err(Sense::invalid_field_in_cdb(byte, Some(7)).into());
    }
    Ok(())
}

/// READ(6/10/12/16).
pub(crate) fn read(lu: &LogicalUnit, rw: &ReadWrite, din: &mut Vec<u8>) -> Exec {
    check_transfer(lu, rw.blocks, length_byte(rw.cdb))?;
    lu.check_range(rw.lba, rw.blocks)?;
    din.resize(lu.bytes_of(rw.blocks), 0);
    if !din.is_empty() {
        let _order = lu.read_order();
        // DPO and FUA on reads are hints to a cache we do not keep (the page cache is the
        // kernel's): FUA reads from the file, which returns the latest written data.
        lu.backend
            .read_at(rw.lba, din)
            .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, rw.lba))?;
    }
    let n = din.len();
    good_data(din, n)
}

/// READ(6/10/12/16) into registered memory: the backend reads straight into `dst` (which
/// holds the whole transfer).
pub(crate) fn read_staged(lu: &LogicalUnit, rw: &ReadWrite, dst: MemSpan<'_>) -> Exec {
    check_transfer(lu, rw.blocks, length_byte(rw.cdb))?;
    lu.check_range(rw.lba, rw.blocks)?;
    let n = lu.bytes_of(rw.blocks);
    if n > 0 {
        let _order = lu.read_order();
        lu.backend
            .read_into(rw.lba, dst.head(n))
            .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, rw.lba))?;
    }
    Ok(CmdOutput {
        data_in_staged: true,
        ..CmdOutput::good(n)
    })
}

/// WRITE(6/10/12/16) from registered memory: the backend writes straight from `src`.
pub(crate) fn write_staged(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    rw: &ReadWrite,
    src: MemSpan<'_>,
    w: &MediumWrites<'_>,
) -> Exec {
    lu.check_writable()?;
    check_transfer(lu, rw.blocks, length_byte(rw.cdb))?;
    lu.check_range(rw.lba, rw.blocks)?;
    let need = lu.bytes_of(rw.blocks);
    if src.len < need {
        return Err(Stop::Transport(TransportError::DataOutUnderrun {
            need_bytes: need,
            have_bytes: src.len,
        }));
    }
    if need > 0 {
        let _order = lu.write_order_at(nexus, rw.lba, rw.blocks.0.into())?;
        w.write_from(rw.lba, src.head(need))?;
    }
    Ok(CmdOutput {
        data_out_len: need,
        ..CmdOutput::good(0)
    })
}

/// WRITE(6/10/12/16): FUA (or WCE=0) makes the blocks durable before GOOD (its rule).
pub(crate) fn write(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    rw: &ReadWrite,
    dout: &[u8],
    w: &MediumWrites<'_>,
) -> Exec {
    lu.check_writable()?;
    check_transfer(lu, rw.blocks, length_byte(rw.cdb))?;
    lu.check_range(rw.lba, rw.blocks)?;
    let need = lu.bytes_of(rw.blocks);
    let buf = data_out(dout, need)?;
    if need > 0 {
        let _order = lu.write_order_at(nexus, rw.lba, rw.blocks.0.into())?;
        w.write_at(rw.lba, buf)?;
    }
    Ok(CmdOutput {
        data_out_len: need,
        ..CmdOutput::good(0)
    })
}

/// MISCOMPARE DURING VERIFY OPERATION with INFORMATION = `offset` (SBC-3).
pub(crate) fn miscompare(offset: usize) -> Stop {
    Sense::with_information(SenseCode::MISCOMPARE_DURING_VERIFY, offset as u64).into()
}

/// Offset of the first byte where `a` and `b` differ.
pub(crate) fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// Bytes VERIFY with BYTCHK=0 reads per backend call into its scratch buffer: the range
/// is read whole, a bounded piece at a time.
const VERIFY_CHUNK_BYTES: usize = 1 << 20;

/// VERIFY(10/12/16). BYTCHK=0: reads the range (into scratch memory, in pieces of at most
/// [`VERIFY_CHUNK_BYTES`]), so that a block the backend cannot read answers MEDIUM ERROR,
/// UNRECOVERED READ ERROR with its piece's first LBA as INFORMATION, as a READ would;
/// BYTCHK=1/3: compares with the data-out. Either takes the LU's read order, as READ does.
pub(crate) fn verify(lu: &LogicalUnit, v: &Verify, dout: &[u8]) -> Exec {
    check_transfer(lu, v.blocks, long_length_byte(v.cdb))?;
    lu.check_range(v.lba, v.blocks)?;
    let len = lu.bytes_of(v.blocks);
    let bs = lu.block_bytes() as usize;
    let (expected, used) = match v.bytchk {
        ByteCheck::Medium => {
            verify_medium(lu, v.lba, v.blocks)?;
            return Ok(CmdOutput::good(0));
        }
        ByteCheck::Compare => (data_out(dout, len)?.to_vec(), len),
        // One block of data-out compared with every block.
        ByteCheck::CompareOne if len == 0 => (Vec::new(), 0),
        ByteCheck::CompareOne => (data_out(dout, bs)?.repeat(len / bs), bs),
    };
    let mut medium = vec![0u8; len];
    if len > 0 {
        let _order = lu.read_order();
        lu.backend
            .read_at(v.lba, &mut medium)
            .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, v.lba))?;
    }
    if let Some(off) = first_difference(&medium, &expected) {
        return Err(miscompare(off));
    }
    Ok(CmdOutput {
        data_out_len: used,
        ..CmdOutput::good(0)
    })
}

/// VERIFY with BYTCHK=0: reads `blocks` from `lba` and drops the data.
fn verify_medium(lu: &LogicalUnit, lba: Lba, blocks: BlockCount) -> Result<(), Stop> {
    let bs = lu.block_bytes() as usize;
    let per_chunk = (VERIFY_CHUNK_BYTES / bs).max(1);
    let mut scratch = vec![0u8; per_chunk.min(blocks.0 as usize) * bs];
    let (mut at, mut left) = (lba.0, u64::from(blocks.0));
    let _order = lu.read_order();
    while left > 0 {
        // min() with a usize bound.
        let n = left.min(per_chunk as u64) as usize;
        lu.backend
            .read_at(Lba(at), &mut scratch[..n * bs])
            .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, Lba(at)))?;
        at += n as u64;
        left -= n as u64;
    }
    Ok(())
}

/// COMPARE AND WRITE: the data-out holds the verify blocks, then the write blocks. Atomic
/// against every other medium-modifying command of this LU (exclusive `io_order`).
pub(crate) fn compare_and_write(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    c: &CompareAndWrite,
    dout: &[u8],
    w: &MediumWrites<'_>,
) -> Exec {
    lu.check_writable()?;
    if c.blocks.0 > u32::from(lu.backend.max_compare_and_write_blocks()) {
        return Err(Sense::invalid_field_in_cdb(13, Some(7)).into());
    }
    lu.check_range(c.lba, c.blocks)?;
    let len = lu.bytes_of(c.blocks);
    let buf = data_out(dout, 2 * len)?;
    let done = CmdOutput {
        data_out_len: 2 * len,
        ..CmdOutput::good(0)
    };
    if len == 0 {
        // SBC-3: NUMBER OF LOGICAL BLOCKS 0 is not an error; nothing is compared or written.
        return Ok(done);
    }
    let (verify, write) = buf.split_at(len);
    let _atomic = lu.atomic_order_at(nexus, c.lba, c.blocks.0.into())?;
    // A store shared beyond this target compares and writes itself, atomically there.
    if let Some(r) = w.compare_and_write_at(c.lba, verify, write) {
        return match r? {
            None => Ok(done),
            Some(off) => Err(miscompare(off)),
        };
    }
    let mut medium = vec![0u8; len];
    lu.backend
        .read_at(c.lba, &mut medium)
        .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, c.lba))?;
    if let Some(off) = first_difference(&medium, verify) {
        return Err(miscompare(off));
    }
    w.write_at(c.lba, write)?;
    Ok(done)
}

/// SYNCHRONIZE CACHE(10/16): fdatasync of the whole backend (a range is no cheaper on a
/// file). IMMED=1 is honoured by completing the flush before GOOD, which SBC allows.
pub(crate) fn synchronize_cache(lu: &LogicalUnit, s: &SynchronizeCache) -> Exec {
    // NUMBER OF LOGICAL BLOCKS 0: through the last block.
    if s.lba > lu.last_lba() {
        return Err(SenseCode::LBA_OUT_OF_RANGE.into());
    }
    lu.check_range(s.lba, s.blocks)?;
    lu.flush(s.lba)?;
    Ok(CmdOutput::good(0))
}

/// READ CAPACITY(10): last LBA (FFFFFFFFh when it needs READ CAPACITY(16)), block size.
pub(crate) fn read_capacity10(lu: &LogicalUnit, din: &mut Vec<u8>) -> Exec {
    let last = u32::try_from(lu.last_lba().0).unwrap_or(u32::MAX);
    din.extend_from_slice(&last.to_be_bytes());
    din.extend_from_slice(&lu.block_bytes().to_be_bytes());
    good_data(din, 8)
}

/// LBPME: logical block provisioning management enabled (READ CAPACITY(16) byte 14).
const LBPME: u8 = 0x80;
/// LBPRZ: unmapped blocks read as zeros.
const LBPRZ: u8 = 0x40;

/// READ CAPACITY(16): 32 bytes, the physical block exponent, LBPME/LBPRZ when the backend
/// unmaps.
pub(crate) fn read_capacity16(lu: &LogicalUnit, r: &ReadCapacity16, din: &mut Vec<u8>) -> Exec {
    din.resize(32, 0);
    din[..8].copy_from_slice(&lu.last_lba().0.to_be_bytes());
    din[8..12].copy_from_slice(&lu.block_bytes().to_be_bytes());
    // Byte 12: no protection. 13: LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT (bits 3:0;
    // blocks_per_physical is a power of two); 14-15: LOWEST ALIGNED LBA (bits 13:0), which
    // LBPME/LBPRZ share byte 14 with.
    din[13] = lu.blocks_per_physical().trailing_zeros() as u8 & 0x0f;
    din[14..16].copy_from_slice(&lu.lowest_aligned_lba().to_be_bytes());
    if lu.backend.supports_unmap() {
        din[14] |= LBPME | LBPRZ;
    }
    good_data(din, usize::try_from(r.alloc_len).unwrap_or(usize::MAX))
}
