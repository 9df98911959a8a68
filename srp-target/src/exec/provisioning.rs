//! Logical block provisioning (SBC-3 4.7): WRITE SAME(10/16) and UNMAP.
//!
//! Unmapped blocks read as zeros (LBPRZ=1): files punch holes, RAM zero-fills. WRITE SAME
//! with UNMAP=1 unmaps only when the data-out block is all zeros, since otherwise a later
//! read would not return the data written (SBC-3 5.45); else it writes.

use super::store::MediumWrites;
use super::{CmdOutput, Exec, LogicalUnit, Nexus, Stop, data_out};
use scsi::cdb::{Unmap, WriteSame};
use scsi::{BlockCount, Lba, Sense, SenseCode};

/// MAXIMUM WRITE SAME LENGTH in blocks (VPD B0h): 0xFFFF, WRITE SAME(10)'s reach and LIO's
/// limit, so one command zeroes or unmaps at most 32 MiB of 512-byte blocks (bounded work
/// per command: aborts and other LUs' I/O never wait long behind one). Initiators split
/// larger ranges (Linux sd: `max_ws_blocks`).
pub const MAX_WRITE_SAME_BLOCKS: u32 = 0xffff;
/// MAXIMUM UNMAP LBA COUNT (VPD B0h): at most 2^20 blocks (512 MiB of 512-byte blocks)
/// unmapped by one UNMAP command, summed over its descriptors (SBC-4 6.6.4: "the maximum
/// number of LBAs that may be unmapped by an UNMAP command"); the most initiators treat as
/// sane (libiscsi's conformance suite fails a larger explicit limit).
pub const MAX_UNMAP_BLOCKS: u32 = 1 << 20;
/// MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT (VPD B0h).
pub const MAX_UNMAP_DESCRIPTORS: u32 = 256;
/// Bytes written per backend call by WRITE SAME.
const WRITE_SAME_CHUNK_BYTES: usize = 1 << 20;

/// WRITE SAME(10/16). WSNZ=1 (VPD B0h): NUMBER OF LOGICAL BLOCKS 0 is INVALID FIELD IN CDB.
/// ANCHOR is rejected (ANC_SUP=0).
pub(crate) fn write_same(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    w: &WriteSame,
    dout: &[u8],
    writes: &MediumWrites<'_>,
) -> Exec {
    lu.check_writable()?;
    let len_byte = super::io::long_length_byte(w.cdb);
    if w.anchor {
        return Err(Sense::invalid_field_in_cdb(1, Some(4)).into());
    }
    if w.unmap && !lu.backend.supports_unmap() {
        return Err(Sense::invalid_field_in_cdb(1, Some(3)).into());
    }
    if w.blocks.is_zero() || w.blocks.0 > MAX_WRITE_SAME_BLOCKS {
        return Err(Sense::invalid_field_in_cdb(len_byte, Some(7)).into());
    }
    lu.check_range(w.lba, w.blocks)?;
    let bs = lu.block_bytes() as usize;
    let block = data_out(dout, bs)?;
    let done = CmdOutput {
        data_out_len: bs,
        ..CmdOutput::good(0)
    };
    let _order = lu.write_order_at(nexus, w.lba, w.blocks.0.into())?;
    // Write cache off: durable before GOOD, by one flush after the whole range (its rule).
    if w.unmap && block.iter().all(|&b| b == 0) {
        writes.unmap(w.lba, w.blocks)?;
        return Ok(done);
    }
    let per_chunk = (WRITE_SAME_CHUNK_BYTES / bs).max(1);
    let chunk = block.repeat(per_chunk);
    let (mut lba, mut left) = (w.lba.0, u64::from(w.blocks.0));
    while left > 0 {
        // min() with a usize bound.
        let n = left.min(per_chunk as u64) as usize;
        writes.write_at(Lba(lba), &chunk[..n * bs])?;
        lba += n as u64;
        left -= n as u64;
    }
    Ok(done)
}

/// Header of the UNMAP parameter list, then 16-byte block descriptors (SBC-3 5.28.2).
const UNMAP_HEADER: usize = 8;
const UNMAP_DESCRIPTOR: usize = 16;

/// One validated UNMAP block descriptor.
struct Extent {
    lba: Lba,
    blocks: BlockCount,
}

/// Parses and checks every descriptor before any is executed, so a bad list changes
/// nothing. Errors as LIO's sbc_execute_unmap and SBC-3; the block count summed over the
/// list, not per descriptor, against [`MAX_UNMAP_BLOCKS`].
fn unmap_extents(lu: &LogicalUnit, list: &[u8]) -> Result<Vec<Extent>, Stop> {
    let be16 = |at: usize| u16::from_be_bytes([list[at], list[at + 1]]) as usize;
    // The caller checked list.len() >= UNMAP_HEADER.
    let data_len = be16(0);
    let desc_len = be16(2);
    // UNMAP DATA LENGTH and BLOCK DESCRIPTOR DATA LENGTH must fit the parameter list.
    if data_len + 2 > list.len() || desc_len + UNMAP_HEADER > list.len() {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    // SBC-3: a trailing partial descriptor is ignored.
    let count = desc_len / UNMAP_DESCRIPTOR;
    if count > MAX_UNMAP_DESCRIPTORS as usize {
        return Err(Sense::invalid_field_in_parameter_list(2, Some(7)).into());
    }
    let mut out = Vec::with_capacity(count);
    // Blocks of the descriptors so far; the first to carry it past the limit is refused.
    let mut total: u64 = 0;
    for i in 0..count {
        let at = UNMAP_HEADER + i * UNMAP_DESCRIPTOR;
        let d = &list[at..at + UNMAP_DESCRIPTOR];
        let mut lba = [0u8; 8];
        lba.copy_from_slice(&d[..8]);
        let mut n = [0u8; 4];
        n.copy_from_slice(&d[8..12]);
        let (lba, blocks) = (
            Lba(u64::from_be_bytes(lba)),
            BlockCount(u32::from_be_bytes(n)),
        );
        total += u64::from(blocks.0);
        if total > u64::from(MAX_UNMAP_BLOCKS) {
            // Field pointer: this descriptor's NUMBER OF LOGICAL BLOCKS; at < 8 + 16 * 256.
            let byte = (at + 8) as u16;
            return Err(Sense::invalid_field_in_parameter_list(byte, Some(7)).into());
        }
        lu.check_range(lba, blocks)?;
        out.push(Extent { lba, blocks });
    }
    Ok(out)
}

/// UNMAP.
pub(crate) fn unmap(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    u: &Unmap,
    dout: &[u8],
    writes: &MediumWrites<'_>,
) -> Exec {
    lu.check_writable()?;
    if !lu.backend.supports_unmap() {
        return Err(SenseCode::INVALID_COMMAND_OPERATION_CODE.into());
    }
    if u.anchor {
        return Err(Sense::invalid_field_in_cdb(1, Some(0)).into());
    }
    let param_len = usize::from(u.param_len);
    if param_len == 0 {
        // SBC-3: not an error; nothing to unmap.
        return Ok(CmdOutput::good(0));
    }
    if param_len < UNMAP_HEADER {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    let list = data_out(dout, param_len)?;
    let extents = unmap_extents(lu, list)?;
    // A copy holding one of the ranges holds the command off.
    let ranges: Vec<(u64, u64)> = extents
        .iter()
        .map(|e| (e.lba.0, u64::from(e.blocks.0)))
        .collect();
    let _order = lu.write_order_over(nexus, &ranges)?;
    // Write cache off: the deallocation is durable before GOOD (a hole punched, or zeros
    // written, is as volatile as any write until flushed): its rule.
    for e in extents.iter().filter(|e| !e.blocks.is_zero()) {
        writes.unmap(e.lba, e.blocks)?;
    }
    Ok(CmdOutput {
        data_out_len: param_len,
        ..CmdOutput::good(0)
    })
}
