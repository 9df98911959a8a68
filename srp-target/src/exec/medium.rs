//! Commands about the medium rather than its data (SBC-4): PRE-FETCH, GET LBA STATUS, READ
//! DEFECT DATA, START STOP UNIT and PREVENT ALLOW MEDIUM REMOVAL — answered as a fixed,
//! non-removable disk (RMB=0) answers them.

use super::{CmdOutput, Exec, LogicalUnit, Nexus, backend_sense, good_data};
use scsi::cdb::{GetLbaStatus, LbaReportType, LongCdb, PreFetch, ReadDefectData, StartStopUnit};
use scsi::{Lba, Sense, SenseCode};

/// At most this many LBA status descriptors per GET LBA STATUS (bounded work per command;
/// the initiator asks again from where the answer stops).
pub const MAX_LBA_STATUS_DESCRIPTORS: usize = 1024;

/// PROVISIONING STATUS of an LBA status descriptor (SBC-4): 0h mapped, 1h deallocated.
const MAPPED: u8 = 0x0;
const DEALLOCATED: u8 = 0x1;
/// GET LBA STATUS parameter data byte 7 bit 0: RTP, the REPORT TYPE field was acted on.
const RTP: u8 = 0x01;

/// PRE-FETCH(10/16): starts reading the range into the page cache (`posix_fadvise(
/// WILLNEED)`, not waited for, so IMMED=1 and IMMED=0 answer alike and at once) and answers
/// GOOD — SBC-4 5.9's answer when the blocks are not promised to be in the cache, which the
/// page cache (free to evict them) never promises; so never CONDITION MET, which initiators
/// over SG_IO cannot tell from an error either (Linux masks it; libiscsi fails on it).
/// GROUP NUMBER is accepted and ignored. PREFETCH LENGTH 0: through the last block.
pub(crate) fn prefetch(lu: &LogicalUnit, p: &PreFetch) -> Exec {
    let blocks = if p.blocks.is_zero() {
        if p.lba > lu.last_lba() {
            return Err(SenseCode::LBA_OUT_OF_RANGE.into());
        }
        lu.last_lba().0 - p.lba.0 + 1
    } else {
        lu.check_range(p.lba, p.blocks)?;
        u64::from(p.blocks.0)
    };
    lu.backend
        .prefetch(p.lba, blocks)
        .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, p.lba))?;
    tracing::trace!(
        lba = p.lba.0,
        blocks,
        ten = p.cdb == LongCdb::Ten,
        "pre-fetch"
    );
    Ok(CmdOutput::good(0))
}

/// GET LBA STATUS: LBA status descriptors from the STARTING LBA on (mapped or deallocated,
/// from the backing file's holes), as many as the ALLOCATION LENGTH holds, at most
/// [`MAX_LBA_STATUS_DESCRIPTORS`], adjacent runs of one status merged. REPORT TYPE (SBC-4)
/// keeps the runs it asks for: all, not mapped (PROVISIONING STATUS nonzero: here
/// deallocated, nothing is anchored), mapped, or deallocated; RTP says it was acted on.
pub(crate) fn get_lba_status(lu: &LogicalUnit, g: &GetLbaStatus, din: &mut Vec<u8>) -> Exec {
    if g.lba > lu.last_lba() {
        return Err(SenseCode::LBA_OUT_OF_RANGE.into());
    }
    let alloc = usize::try_from(g.alloc_len).unwrap_or(usize::MAX);
    let want = (alloc.saturating_sub(8) / 16).clamp(1, MAX_LBA_STATUS_DESCRIPTORS);
    din.resize(8, 0);
    let (mut lba, end) = (g.lba.0, lu.last_lba().0 + 1);
    let mut n = 0;
    while lba < end && n < want {
        // One descriptor's NUMBER OF LOGICAL BLOCKS is 32 bits.
        let max = (end - lba).min(u64::from(u32::MAX));
        let ext = lu
            .backend
            .lba_status(Lba(lba), max)
            .map_err(|e| backend_sense(&e, SenseCode::UNRECOVERED_READ_ERROR, Lba(lba)))?;
        let status = if ext.deallocated { DEALLOCATED } else { MAPPED };
        let blocks = ext.blocks.clamp(1, max);
        if reported(g.report_type, status) && !merged(din, lba, blocks, status) {
            din.extend_from_slice(&lba.to_be_bytes());
            // clamp(.., max) keeps it within u32.
            din.extend_from_slice(&(blocks as u32).to_be_bytes());
            din.extend_from_slice(&[status, 0, 0, 0]);
            n += 1;
        }
        lba += blocks;
    }
    // PARAMETER DATA LENGTH: the bytes after it. Byte 7 bit 0: RTP, REPORT TYPE processed
    // (SBC-4; sg3_utils prints it); COMPLETION CONDITION (bits 3:1) 0, not reported.
    let len = u32::try_from(din.len() - 4).unwrap_or(u32::MAX);
    din[..4].copy_from_slice(&len.to_be_bytes());
    din[7] = RTP;
    good_data(din, alloc)
}

/// Whether REPORT TYPE `t` asks for runs of PROVISIONING STATUS `status`.
fn reported(t: LbaReportType, status: u8) -> bool {
    match t {
        LbaReportType::All => true,
        LbaReportType::NonZero => status != MAPPED,
        LbaReportType::Mapped => status == MAPPED,
        LbaReportType::Deallocated => status == DEALLOCATED,
    }
}

/// Adds `blocks` at `lba` to the last descriptor of `din` when it has `status` and ends at
/// `lba` (a run the filter skipped leaves a gap) and the sum fits its 32 bits.
fn merged(din: &mut [u8], lba: u64, blocks: u64, status: u8) -> bool {
    let Some(last) = din.len().checked_sub(16).filter(|&at| at >= 8) else {
        return false;
    };
    let d = &mut din[last..];
    let start = u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]);
    let prev = u64::from(u32::from_be_bytes([d[8], d[9], d[10], d[11]]));
    if d[12] != status || start + prev != lba {
        return false;
    }
    let Ok(sum) = u32::try_from(prev + blocks) else {
        return false;
    };
    d[8..12].copy_from_slice(&sum.to_be_bytes());
    true
}

/// READ DEFECT DATA(10/12): an empty list in the format asked for (the medium is a file or
/// a device that keeps its own defects), PLISTV/GLISTV as requested. DEFECT LIST FORMAT
/// 111b is reserved: INVALID FIELD IN CDB.
pub(crate) fn read_defect_data(r: &ReadDefectData, din: &mut Vec<u8>) -> Exec {
    if r.format == 0b111 {
        let byte = if r.twelve { 1 } else { 2 };
        return Err(Sense::invalid_field_in_cdb(byte, Some(2)).into());
    }
    let flags = u8::from(r.plist) << 4 | u8::from(r.glist) << 3 | r.format;
    if r.twelve {
        // Byte 1 flags; 2-3 GENERATION CODE (0: not reported); 4-7 DEFECT LIST LENGTH.
        din.extend_from_slice(&[0, flags, 0, 0, 0, 0, 0, 0]);
    } else {
        // Byte 1 flags; 2-3 DEFECT LIST LENGTH.
        din.extend_from_slice(&[0, flags, 0, 0]);
    }
    good_data(din, usize::try_from(r.alloc_len).unwrap_or(usize::MAX))
}

/// START STOP UNIT, as a fixed disk shared by several initiators. START=0 (a stop) makes
/// the written data durable, as SBC-4 5.25 has a stop do (unless NO_FLUSH), and answers
/// GOOD, leaving the unit ready for everyone: hosts send it at shutdown (Windows classpnp,
/// Linux sd's manage_start_stop), and on a shared LU a real stop would turn every other
/// initiator — a cluster peer — NOT READY. (LIO refuses START=0 outright in
/// sbc_emulate_startstop; a flush and GOOD serves the host's intent too.) START=1 has
/// nothing to do. There is no medium to load or eject (LOEJ=1: INVALID FIELD IN CDB) and no
/// power condition page (POWER CONDITION or its MODIFIER not 0: INVALID FIELD IN CDB).
/// IMMED is accepted; the answer comes when the flush is done either way.
pub(crate) fn start_stop_unit(lu: &LogicalUnit, nexus: &Nexus<'_>, s: &StartStopUnit) -> Exec {
    if s.power_condition_modifier != 0 {
        return Err(Sense::invalid_field_in_cdb(3, Some(3)).into());
    }
    if s.power_condition != 0 {
        return Err(Sense::invalid_field_in_cdb(4, Some(7)).into());
    }
    if s.loej {
        return Err(Sense::invalid_field_in_cdb(4, Some(1)).into());
    }
    if !s.start {
        if !s.no_flush {
            lu.flush(Lba(0))?;
        }
        let n = nexus.it_nexus();
        tracing::debug!(lu = %lu.identity().unique_name(), initiator = %n.initiator, port = n.port.0,
            no_flush = s.no_flush, "START STOP UNIT with START=0: flushed, the unit stays ready for every initiator");
    }
    Ok(CmdOutput::good(0))
}

/// PREVENT ALLOW MEDIUM REMOVAL: GOOD for every PREVENT value — the medium of a fixed disk
/// cannot be removed, so preventing its removal holds trivially (RMB=0).
pub(crate) fn prevent_allow() -> Exec {
    Ok(CmdOutput::good(0))
}
