//! EXTENDED COPY (LID1): block to block segments between logical units of this target.
//!
//! Checks, in order (LIO's `target_xcopy_*` where it has a rule, SPC-4 5.16 otherwise):
//! PARAMETER LIST LENGTH 0 is a no-op; a list shorter than its header, or than the lengths
//! it declares, or with descriptor lists past MAXIMUM DESCRIPTOR LIST LENGTH, is PARAMETER
//! LIST LENGTH ERROR; inline data is INVALID FIELD IN PARAMETER LIST (none supported); too
//! many descriptors are TOO MANY TARGET / SEGMENT DESCRIPTORS; a descriptor type other than
//! E4h / 02h is UNSUPPORTED ... DESCRIPTOR TYPE CODE; then each segment's CSCDs are
//! resolved — among the LUs of the target port the command came through, by NAA designator,
//! or FFFFh for this LU — and a name that resolves to nothing, an index past the list, or
//! an LBA range outside its LU is COPY ABORTED, COPY TARGET DEVICE NOT REACHABLE (as LIO:
//! initiators then copy by READ and WRITE themselves). A destination that is write
//! protected is DATA PROTECT; one whose reservation the nexus may not write is RESERVATION
//! CONFLICT; LUs of different block sizes are COPY ABORTED, INCORRECT COPY TARGET DEVICE
//! TYPE; a read or write that fails is COPY ABORTED, THIRD PARTY DEVICE FAILURE.
//!
//! Each segment is copied in [`super::COPY_CHUNK_BYTES`] steps, watching the source
//! (`watch.rs`); a write to the source meanwhile makes the segment copy again with the
//! source's writers held off, so the destination always holds the source as it was at one
//! instant. An abort (task management) stops the copy between steps.

use super::super::pr::conflict::Access;
use super::super::{CmdOutput, Exec, LogicalUnit, Nexus, Stop, backend_sense, data_out};
use super::results::ListState;
use super::{COPY_CHUNK_BYTES, MAX_CSCD_DESCRIPTORS, MAX_DESCRIPTOR_LIST_BYTES};
use super::{MAX_SEGMENT_BYTES, MAX_SEGMENT_DESCRIPTORS};
use scsi::cdb::CopyOut;
use scsi::copy::{
    BlockSegment, CSCD_ID_THIS_LU, CSCD_LEN, IdCscd, LIST_ID_USAGE_NONE, SEGMENT_LEN, XcopyHeader,
};
use scsi::{Lba, Sense, SenseCode, Status};
use std::ops::Deref;
use std::sync::Arc;
use wirekit::WireRepr;

/// A copy target: this LU, or another of the target.
pub(crate) enum Unit<'a> {
    This(&'a LogicalUnit),
    Other(Arc<LogicalUnit>),
}

impl Deref for Unit<'_> {
    type Target = LogicalUnit;
    fn deref(&self) -> &LogicalUnit {
        match self {
            Unit::This(l) => l,
            Unit::Other(l) => l,
        }
    }
}

fn not_reachable() -> Stop {
    SenseCode::COPY_TARGET_DEVICE_NOT_REACHABLE.into()
}

/// The sense of a descriptor rejected by its parser, pointing at descriptor byte `at`.
fn descriptor_error(e: scsi::copy::CopyParamError, at: usize) -> Stop {
    let code = e.sense().code();
    if code == SenseCode::INVALID_FIELD_IN_PARAMETER_LIST {
        return Sense::invalid_field_in_parameter_list(at as u16, None).into();
    }
    code.into()
}

/// EXTENDED COPY (LID1) sent to `lu` through `nexus`.
pub(crate) fn extended_copy(lu: &LogicalUnit, nexus: &Nexus<'_>, c: &CopyOut, dout: &[u8]) -> Exec {
    let len = usize::try_from(c.param_len).unwrap_or(usize::MAX);
    if len == 0 {
        return Ok(CmdOutput::good(0));
    }
    if len < XcopyHeader::LEN {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    let list = data_out(dout, len)?;
    let used = CmdOutput {
        data_out_len: len,
        ..CmdOutput::good(0)
    };
    let h = XcopyHeader::parse(list).map_err(|e| descriptor_error(e, 0))?;
    let (cl, sl) = (usize::from(h.cscd_len), h.segment_len as usize);
    if cl + sl > MAX_DESCRIPTOR_LIST_BYTES as usize || XcopyHeader::LEN + cl + sl > len {
        return Err(SenseCode::PARAMETER_LIST_LENGTH_ERROR.into());
    }
    if h.inline_len != 0 {
        return Err(Sense::invalid_field_in_parameter_list(12, Some(7)).into());
    }
    if cl % CSCD_LEN != 0 {
        return Err(Sense::invalid_field_in_parameter_list(2, Some(7)).into());
    }
    if cl / CSCD_LEN > usize::from(MAX_CSCD_DESCRIPTORS) {
        return Err(SenseCode::TOO_MANY_TARGET_DESCRIPTORS.into());
    }
    let cscd_at = XcopyHeader::LEN;
    let cscds = (0..cl / CSCD_LEN)
        .map(|i| {
            let at = cscd_at + i * CSCD_LEN;
            IdCscd::parse(&list[at..at + CSCD_LEN]).map_err(|e| descriptor_error(e, at))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let seg_at = cscd_at + cl;
    let mut segments = Vec::new();
    let mut at = seg_at;
    while at < seg_at + sl {
        if segments.len() == usize::from(MAX_SEGMENT_DESCRIPTORS) {
            return Err(SenseCode::TOO_MANY_SEGMENT_DESCRIPTORS.into());
        }
        let end = (at + SEGMENT_LEN).min(seg_at + sl);
        let s = BlockSegment::parse(&list[at..end]).map_err(|e| match e {
            scsi::copy::CopyParamError::Truncated { .. } => {
                Stop::from(SenseCode::PARAMETER_LIST_LENGTH_ERROR)
            }
            e => descriptor_error(e, at),
        })?;
        segments.push((at, s));
        at += SEGMENT_LEN;
    }
    if segments.is_empty() {
        return Ok(used);
    }
    let n = nexus.it_nexus();
    let tracked = h.list_id_usage != LIST_ID_USAGE_NONE;
    // LIST ID USAGE 00b: the status is held after the copy ends (10b: discarded).
    let hold = h.list_id_usage == 0b00;
    if tracked && !lu.copy_lists.start(n, h.list_id) {
        return Err(SenseCode::OPERATION_IN_PROGRESS.into());
    }
    let Some(_permit) = lu.copy.permit() else {
        // BUSY: the command did not run, so its list identifier is not in use.
        if tracked {
            lu.copy_lists.forget(n, h.list_id);
        }
        tracing::info!(lu = %lu.identity().unique_name(), "EXTENDED COPY answered BUSY: {} copies running", super::manager::TOTAL_CONCURRENT_COPIES);
        return Ok(CmdOutput {
            status: Status::Busy,
            ..used
        });
    };
    let mut bytes = 0u64;
    for (done, (at, s)) in segments.iter().enumerate() {
        match run_segment(lu, nexus, &cscds, s) {
            Ok(b) => bytes += b,
            Err(stop) => {
                if tracked {
                    let failure = match &stop {
                        Stop::Check(sense) => Some(sense.clone()),
                        Stop::Transport(t) => Some(t.sense()),
                        Stop::Conflict => None,
                    };
                    lu.copy_lists.finish(
                        n,
                        h.list_id,
                        ListState::Done {
                            segments: done as u16,
                            bytes,
                            failure,
                        },
                        hold,
                    );
                }
                tracing::debug!(lu = %lu.identity().unique_name(), segment = done, at, "EXTENDED COPY stopped");
                return Err(stop);
            }
        }
    }
    if tracked {
        lu.copy_lists.finish(
            n,
            h.list_id,
            ListState::Done {
                segments: segments.len() as u16,
                bytes,
                failure: None,
            },
            hold,
        );
    }
    Ok(used)
}

/// The LU CSCD `id` names, as seen from `lu` through `nexus`.
fn resolve<'a>(
    lu: &'a LogicalUnit,
    nexus: &Nexus<'_>,
    cscds: &[IdCscd],
    id: u16,
) -> Result<Unit<'a>, Stop> {
    if id == CSCD_ID_THIS_LU {
        return Ok(Unit::This(lu));
    }
    let d = cscds.get(usize::from(id)).ok_or_else(not_reachable)?;
    // A designator of the logical unit: binary NAA, association 00b.
    let naa = d.lu_naa().ok_or_else(not_reachable)?;
    if d.device_type != 0 {
        return Err(SenseCode::INCORRECT_COPY_TARGET_DEVICE_TYPE.into());
    }
    let unit = if naa == lu.identity().naa().as_slice() {
        Unit::This(lu)
    } else {
        Unit::Other(
            lu.copy
                .resolve(nexus.port.relative_port, naa)
                .ok_or_else(not_reachable)?,
        )
    };
    if d.block_len != 0 && d.block_len != unit.block_bytes() {
        return Err(SenseCode::INCORRECT_COPY_TARGET_DEVICE_TYPE.into());
    }
    Ok(unit)
}

/// What `nexus` may do to `unit` as a copy source (`Access::Read`) or destination.
fn admit(unit: &LogicalUnit, nexus: &Nexus<'_>, access: Access) -> Result<(), Stop> {
    if unit.pr_read().conflicts(nexus.it_nexus(), access) {
        return Err(Stop::Conflict);
    }
    if access == Access::Write {
        unit.check_writable()?;
    }
    Ok(())
}

/// Copies segment `s`; the bytes copied.
fn run_segment(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    cscds: &[IdCscd],
    s: &BlockSegment,
) -> Result<u64, Stop> {
    let src = resolve(lu, nexus, cscds, s.source)?;
    let dst = resolve(lu, nexus, cscds, s.destination)?;
    let bs = src.block_bytes();
    if dst.block_bytes() != bs {
        return Err(SenseCode::INCORRECT_COPY_TARGET_DEVICE_TYPE.into());
    }
    let blocks = u64::from(s.blocks);
    if blocks == 0 {
        return Ok(0);
    }
    if blocks * u64::from(bs) > u64::from(MAX_SEGMENT_BYTES) {
        return Err(Sense::invalid_field_in_parameter_list(10, Some(7)).into());
    }
    let n = scsi::BlockCount(u32::from(s.blocks));
    let (sl, dl) = (Lba(s.source_lba), Lba(s.destination_lba));
    if !sl.range_within(n, src.last_lba()) || !dl.range_within(n, dst.last_lba()) {
        return Err(not_reachable());
    }
    admit(&src, nexus, Access::Read)?;
    admit(&dst, nexus, Access::Write)?;
    copy_blocks(&src, sl, &dst, dl, blocks, nexus)?;
    Ok(blocks * u64::from(bs))
}

/// Copies `blocks` blocks from `src` at `sl` to `dst` at `dl` as one point in time of the
/// source (see the module doc); durable as a WRITE without FUA to `dst` is.
pub(crate) fn copy_blocks(
    src: &LogicalUnit,
    sl: Lba,
    dst: &LogicalUnit,
    dl: Lba,
    blocks: u64,
    nexus: &Nexus<'_>,
) -> Result<(), Stop> {
    let same = std::ptr::eq(src, dst);
    if same && sl.0 < dl.0.saturating_add(blocks) && dl.0 < sl.0.saturating_add(blocks) {
        // Overlapping ranges of one LU: in one go with its writers held off, in the
        // direction that reads each block before it is overwritten.
        let _all = src.atomic_order();
        let order = Order {
            lock_src: false,
            lock_dst: false,
            backward: dl.0 > sl.0,
        };
        return chunks(src, sl, dst, dl, blocks, nexus, order);
    }
    {
        let watch = src.watch(sl, blocks);
        chunks(src, sl, dst, dl, blocks, nexus, Order::SHARED)?;
        if !watch.touched() {
            return Ok(());
        }
    }
    // The source changed while it was read: again, with its writers held off (its order
    // held exclusive here, so the loop takes neither it nor — one LU — the destination's).
    tracing::debug!(lu = %src.identity().unique_name(), lba = sl.0, blocks, "copy source written during the copy: copying again with its writes held");
    let _held = src.atomic_order();
    let order = Order {
        lock_src: false,
        lock_dst: !same,
        backward: false,
    };
    chunks(src, sl, dst, dl, blocks, nexus, order)
}

/// Which orders the copy loop takes per step, and its direction.
#[derive(Clone, Copy, Debug)]
pub(super) struct Order {
    /// The source's order, shared, around each read (not when the caller holds it).
    pub(super) lock_src: bool,
    /// The destination's order, shared, around each write (not when the caller holds it).
    pub(super) lock_dst: bool,
    /// Copy from the end (an overlapping copy to higher blocks).
    pub(super) backward: bool,
}

impl Order {
    /// Both orders taken per step, forward: a copy that holds neither.
    pub(super) const SHARED: Order = Order {
        lock_src: true,
        lock_dst: true,
        backward: false,
    };
}

/// The copy loop.
pub(super) fn chunks(
    src: &LogicalUnit,
    sl: Lba,
    dst: &LogicalUnit,
    dl: Lba,
    blocks: u64,
    nexus: &Nexus<'_>,
    order: Order,
) -> Result<(), Stop> {
    let Order {
        lock_src,
        lock_dst,
        backward,
    } = order;
    let bs = u64::from(src.block_bytes());
    let per = (COPY_CHUNK_BYTES as u64 / bs).max(1);
    let mut buf = vec![0u8; (per.min(blocks) * bs) as usize];
    let durable = dst.durable(false);
    dst.durably(dl, blocks, durable, || {
        let mut done = 0;
        while done < blocks {
            if nexus.aborted() {
                return Err(SenseCode::ABORTED_COMMAND.into());
            }
            let n = per.min(blocks - done);
            let off = if backward { blocks - done - n } else { done };
            let b = &mut buf[..(n * bs) as usize];
            {
                let _r = lock_src.then(|| src.read_order());
                src.backend
                    .read_at(Lba(sl.0 + off), b)
                    .map_err(|e| backend_failure(&e, src, Lba(sl.0 + off)))?;
            }
            let _w = lock_dst.then(|| dst.write_order());
            dst.backend
                .write_at(Lba(dl.0 + off), b)
                .map_err(|e| backend_failure(&e, dst, Lba(dl.0 + off)))?;
            done += n;
        }
        Ok(())
    })
}

/// COPY ABORTED, THIRD PARTY DEVICE FAILURE for a backend error (logged: the sense
/// does not say which LU failed).
fn backend_failure(e: &crate::backend::BackendError, lu: &LogicalUnit, lba: Lba) -> Stop {
    tracing::warn!(lu = %lu.identity().unique_name(), lba = lba.0, error = %e, "a copy failed on its copy target");
    if e.is_out_of_space() {
        return backend_sense(e, SenseCode::WRITE_ERROR, lba);
    }
    Sense::with_information(SenseCode::THIRD_PARTY_DEVICE_FAILURE, lba.0).into()
}
