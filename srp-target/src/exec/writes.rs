//! The writes beyond WRITE (SBC-4): WRITE AND VERIFY (10/12/16), ORWRITE(16) and WRITE
//! ATOMIC(16).
//!
//! Order of checks, as for WRITE (`io.rs`): CDB fields, write protect, transfer length
//! against the block limits, LBA range, then the data-out.

use super::io::{check_transfer, first_difference, long_length_byte, miscompare};
use super::store::MediumWrites;
use super::{CmdOutput, Exec, LogicalUnit, Nexus, backend_sense, data_out};
use scsi::cdb::{ReadWrite, WriteAndVerify, WriteAtomic};
use scsi::{Sense, SenseCode};

/// The answer of a write that used `len` bytes of data-out.
fn written(len: usize) -> Exec {
    Ok(CmdOutput {
        data_out_len: len,
        ..CmdOutput::good(0)
    })
}

/// WRITE AND VERIFY(10/12/16): writes durably (the verification is of the medium, not a
/// cache: its rule is always durable, and it flushes before it reads), then reads the
/// blocks back; BYTCHK=1 compares them with the data-out
/// (MISCOMPARE DURING VERIFY OPERATION at the first differing byte).
pub(crate) fn write_and_verify(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    w: &WriteAndVerify,
    dout: &[u8],
    writes: &MediumWrites<'_>,
) -> Exec {
    lu.check_writable()?;
    check_transfer(lu, w.blocks, long_length_byte(w.cdb))?;
    lu.check_range(w.lba, w.blocks)?;
    let len = lu.bytes_of(w.blocks);
    let buf = data_out(dout, len)?;
    if len == 0 {
        return written(0);
    }
    let _order = lu.write_order_at(nexus, w.lba, w.blocks.0.into())?;
    writes.write_at(w.lba, buf)?;
    writes.flush_now()?;
    let mut medium = vec![0u8; len];
    lu.backend
        .read_at(w.lba, &mut medium)
        .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, w.lba))?;
    if w.bytchk {
        if let Some(off) = first_difference(&medium, buf) {
            return Err(miscompare(off));
        }
    }
    written(len)
}

/// ORWRITE(16): each block becomes itself OR the data-out, atomically against the LU's
/// other commands (the read and the write under the exclusive order, as COMPARE AND WRITE).
pub(crate) fn orwrite(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    rw: &ReadWrite,
    dout: &[u8],
    writes: &MediumWrites<'_>,
) -> Exec {
    lu.check_writable()?;
    check_transfer(lu, rw.blocks, 10)?;
    lu.check_range(rw.lba, rw.blocks)?;
    let len = lu.bytes_of(rw.blocks);
    let buf = data_out(dout, len)?;
    if len == 0 {
        return written(0);
    }
    let _atomic = lu.atomic_order_at(nexus, rw.lba, rw.blocks.0.into())?;
    let mut blocks = vec![0u8; len];
    lu.backend
        .read_at(rw.lba, &mut blocks)
        .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, rw.lba))?;
    blocks.iter_mut().zip(buf).for_each(|(m, d)| *m |= d);
    writes.write_at(rw.lba, &blocks)?;
    written(len)
}

impl LogicalUnit {
    /// MAXIMUM ATOMIC TRANSFER LENGTH in blocks. SBC-4 4.29 asks that a WRITE ATOMIC cut
    /// short (by a power loss too) leave all of its blocks or none. On a file or block
    /// device the write is one buffered `pwrite`, which a power loss can tear anywhere
    /// between physical blocks: one physical block is what a device writes whole (and what
    /// Linux's block layer assumes without atomic-write support), so that is the limit. A
    /// RAM LU is lost whole with the process: the transfer limit (libiscsi's WriteAtomic16
    /// tests, run against RAM, write up to it without reading this field).
    /// On a medium whose physical blocks do not start at LBA 0 (LOWEST ALIGNED LBA not 0),
    /// an aligned physical block's worth straddles two physical blocks: one logical block,
    /// which a device writes whole, is the limit there.
    pub(crate) fn max_atomic_blocks(&self) -> u32 {
        if self.backend.is_volatile() || self.atomic_log.is_some() {
            self.max_transfer_blocks()
        } else {
            self.atomic_unit().min(self.max_transfer_blocks())
        }
    }

    /// The unit a power loss cannot tear on a file or device: the medium's physical block
    /// ([`LogicalUnit::medium_atomic_blocks`]), or one logical block where physical blocks
    /// are not aligned at LBA 0.
    fn atomic_unit(&self) -> u32 {
        if self.lowest_aligned_lba() != 0 {
            1
        } else {
            self.medium_atomic_blocks()
        }
    }

    /// ATOMIC ALIGNMENT and ATOMIC TRANSFER LENGTH GRANULARITY (VPD B0h) in blocks: the
    /// atomic unit on a file or device (the only atomic write there is one whole unit); on
    /// RAM the physical block when it holds several logical ones (a
    /// host's partial physical block is a read-modify-write), else 0 (none).
    pub(crate) fn atomic_granularity(&self) -> u32 {
        if self.backend.is_volatile() || self.atomic_log.is_some() {
            match self.blocks_per_physical() {
                1 => 0,
                n => n,
            }
        } else {
            self.atomic_unit()
        }
    }
}

/// WRITE ATOMIC(16): the blocks are written as a whole, and no other command of the LU sees
/// part of them (the exclusive order; reads take the shared one). ATOMIC BOUNDARY must be 0
/// (MAXIMUM ATOMIC BOUNDARY SIZE 0); the length is bounded by MAXIMUM ATOMIC TRANSFER
/// LENGTH, and the LBA and length are multiples of the atomic granularity (a physical
/// block).
pub(crate) fn write_atomic(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    w: &WriteAtomic,
    dout: &[u8],
    writes: &MediumWrites<'_>,
) -> Exec {
    lu.check_writable()?;
    if w.boundary != 0 {
        return Err(Sense::invalid_field_in_cdb(10, Some(7)).into());
    }
    if w.blocks.0 > lu.max_atomic_blocks() {
        return Err(Sense::invalid_field_in_cdb(12, Some(7)).into());
    }
    let g = u64::from(lu.atomic_granularity());
    if g > 1 && w.lba.0 % g != 0 {
        return Err(Sense::invalid_field_in_cdb(2, Some(7)).into());
    }
    if g > 1 && u64::from(w.blocks.0) % g != 0 {
        return Err(Sense::invalid_field_in_cdb(12, Some(7)).into());
    }
    lu.check_range(w.lba, w.blocks)?;
    let len = lu.bytes_of(w.blocks);
    let buf = data_out(dout, len)?;
    if len == 0 {
        return written(0);
    }
    let _atomic = lu.atomic_order_at(nexus, w.lba, w.blocks.0.into())?;
    writes.write_atomic(w.lba, buf)?;
    written(len)
}
