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
//! Every segment is resolved and checked before any is copied. The list is then copied in
//! [`super::COPY_CHUNK_BYTES`] steps, every segment's source watched (`watch.rs`); a write to
//! a source meanwhile makes the whole list copy again with the sources' writers held off
//! (they wait; reads and other ranges go on), so the destinations hold the sources as they
//! were at one instant. A list that writes what it reads (an overlapping segment, a later
//! segment writing an earlier one's source) is not copied twice: it is held from the start.
//! A held copy whose source another copy writes (copies never wait for holds) fails with
//! COPY ABORTED rather than copy a mix. An abort (task management) stops the copy between
//! steps.

use super::super::rules::{self, Access};
use super::super::store::{MediumWrites, WriteError};
use super::super::{CmdOutput, Exec, LogicalUnit, Nexus, Stop, backend_sense, data_out};
use super::results::{Failure, ListState};
use super::watch::overlaps;
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
    if h.list_id_usage == 0b01 {
        // LIST ID USAGE 01b is reserved.
        return Err(Sense::invalid_field_in_parameter_list(1, Some(4)).into());
    }
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
    let Some(_permit) = lu.copy.permit(lu) else {
        // BUSY: the command did not run, so its list identifier is not in use.
        if tracked {
            lu.copy_lists.forget(n, h.list_id);
        }
        tracing::info!(lu = %lu.identity().unique_name(), "EXTENDED COPY answered BUSY: {} copies running here, {} in the target (the most at once)", super::manager::COPIES_PER_LU, super::manager::TOTAL_CONCURRENT_COPIES);
        return Ok(CmdOutput {
            status: Status::Busy,
            ..used
        });
    };
    let ended = |segments: usize, bytes: u64, stop: Option<&Stop>| {
        if tracked {
            let failure = stop.map(Failure::of);
            let segments = segments as u16;
            lu.copy_lists.finish(
                n,
                h.list_id,
                ListState::Done {
                    segments,
                    bytes,
                    failure,
                },
                hold,
            );
        }
    };
    // Every segment is resolved and checked before any is copied (LIO too parses the
    // whole list first): a list that cannot run changes nothing.
    let mut plan = Vec::with_capacity(segments.len());
    for (i, (at, s)) in segments.iter().enumerate() {
        match plan_segment(lu, nexus, &cscds, s) {
            Ok(seg) => plan.push(seg),
            Err(stop) => {
                tracing::debug!(lu = %lu.identity().unique_name(), segment = i, at, "EXTENDED COPY refused");
                ended(0, 0, Some(&stop));
                return Err(stop);
            }
        }
    }
    match run_list(&plan, nexus, lu.copy.next_copy_id()) {
        Ok(bytes) => {
            ended(plan.len(), bytes, None);
            Ok(used)
        }
        Err(Stopped {
            segments,
            bytes,
            stop,
        }) => {
            tracing::debug!(lu = %lu.identity().unique_name(), segment = segments, "EXTENDED COPY stopped");
            ended(segments, bytes, Some(&stop));
            Err(stop)
        }
    }
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

/// One block to block segment, resolved and checked.
pub(crate) struct Segment<'a> {
    pub(crate) src: Unit<'a>,
    pub(crate) sl: Lba,
    pub(crate) dst: Unit<'a>,
    pub(crate) dl: Lba,
    pub(crate) blocks: u64,
}

/// Resolves and checks segment `s`.
fn plan_segment<'a>(
    lu: &'a LogicalUnit,
    nexus: &Nexus<'_>,
    cscds: &[IdCscd],
    s: &BlockSegment,
) -> Result<Segment<'a>, Stop> {
    let src = resolve(lu, nexus, cscds, s.source)?;
    let dst = resolve(lu, nexus, cscds, s.destination)?;
    let bs = src.block_bytes();
    if dst.block_bytes() != bs {
        return Err(SenseCode::INCORRECT_COPY_TARGET_DEVICE_TYPE.into());
    }
    let blocks = u64::from(s.blocks);
    if blocks * u64::from(bs) > u64::from(MAX_SEGMENT_BYTES) {
        return Err(Sense::invalid_field_in_parameter_list(10, Some(7)).into());
    }
    let n = scsi::BlockCount(u32::from(s.blocks));
    let (sl, dl) = (Lba(s.source_lba), Lba(s.destination_lba));
    if blocks > 0 && (!sl.range_within(n, src.last_lba()) || !dl.range_within(n, dst.last_lba())) {
        return Err(not_reachable());
    }
    admit(&src, nexus, Access::Read)?;
    admit(&dst, nexus, Access::Write)?;
    Ok(Segment {
        src,
        sl,
        dst,
        dl,
        blocks,
    })
}

/// How far a list got before it stopped.
pub(crate) struct Stopped {
    /// Segments copied whole.
    pub(crate) segments: usize,
    pub(crate) bytes: u64,
    pub(crate) stop: Stop,
}

fn same(a: &LogicalUnit, b: &LogicalUnit) -> bool {
    std::ptr::eq(a, b)
}

/// Whether copying `plan` again gives what copying it once did: no segment writes what
/// it or an earlier segment read (a later one may: it reads what the earlier wrote, again).
fn replayable(plan: &[Segment<'_>]) -> bool {
    plan.iter().enumerate().all(|(j, d)| {
        plan[..=j]
            .iter()
            .all(|s| !same(&s.src, &d.dst) || !overlaps(s.sl.0, s.blocks, d.dl.0, d.blocks))
    })
}

/// Copies every segment of `plan` in order as one point in time of their sources (see the
/// module doc); the bytes copied. `owner` names the copy to the watches.
pub(crate) fn run_list(
    plan: &[Segment<'_>],
    nexus: &Nexus<'_>,
    owner: u64,
) -> Result<u64, Stopped> {
    let watch_all = || -> Vec<_> {
        plan.iter()
            .filter(|s| s.blocks > 0)
            .map(|s| s.src.watch_by(owner, s.sl, s.blocks))
            .collect()
    };
    if replayable(plan) {
        // Optimistically, the sources' writers going on; if one wrote a source meanwhile,
        // again with them held.
        let watches = watch_all();
        let bytes = copy_all(plan, nexus, owner)?;
        if !watches.iter().any(|w| w.touched()) {
            return Ok(bytes);
        }
        tracing::debug!(
            segments = plan.len(),
            "copy source written during the copy: copying again with its writers held"
        );
    }
    // The sources' own writers held off (they wait; reads and other ranges go on): only a
    // copy can still write a source, and then this one fails rather than copy a mix.
    let _holds: Vec<_> = plan
        .iter()
        .filter(|s| s.blocks > 0)
        .map(|s| s.src.hold(s.sl, s.blocks))
        .collect();
    let watches = watch_all();
    let bytes = copy_all(plan, nexus, owner)?;
    if let Some(s) = plan
        .iter()
        .filter(|s| s.blocks > 0)
        .zip(&watches)
        .find_map(|(s, w)| w.touched().then_some(s))
    {
        tracing::warn!(lu = %s.src.identity().unique_name(), lba = s.sl.0, blocks = s.blocks, "a copy failed: another copy wrote its source while it was held (COPY ABORTED)");
        s.src.count_copy_collision();
        return Err(Stopped {
            segments: 0,
            bytes,
            stop: Sense::with_information(SenseCode::THIRD_PARTY_DEVICE_FAILURE, s.sl.0).into(),
        });
    }
    Ok(bytes)
}

/// Copies the segments one after the other.
fn copy_all(plan: &[Segment<'_>], nexus: &Nexus<'_>, owner: u64) -> Result<u64, Stopped> {
    let mut bytes = 0;
    for (i, s) in plan.iter().enumerate() {
        if s.blocks == 0 {
            continue;
        }
        // Overlapping ranges of one LU: in the direction that reads each block before it is
        // overwritten.
        let order = Order {
            backward: same(&s.src, &s.dst)
                && s.dl.0 > s.sl.0
                && overlaps(s.sl.0, s.blocks, s.dl.0, s.blocks),
            owner: Some(owner),
        };
        let mut written = 0;
        // Durable as a WRITE without FUA to the destination is (its rule), per segment.
        let writes = rules::copy_target_writes(&s.dst);
        let r = chunks(
            &s.src,
            s.sl,
            &writes,
            s.dl,
            s.blocks,
            nexus,
            order,
            &mut written,
        );
        writes.finish(r).map_err(|stop| Stopped {
            segments: i,
            bytes,
            stop,
        })?;
        bytes += s.blocks * u64::from(s.src.block_bytes());
    }
    Ok(bytes)
}

/// How the copy loop runs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Order {
    /// Copy from the end (an overlapping copy to higher blocks).
    pub(super) backward: bool,
    /// The copy writing, to the watches (its own are not touched by its writes).
    pub(super) owner: Option<u64>,
}

impl Order {
    /// Forward, touching every watch of the destination.
    pub(super) const SHARED: Order = Order {
        backward: false,
        owner: None,
    };
}

/// The copy loop: [`super::COPY_CHUNK_BYTES`] steps, each read under the source's order
/// and written (and noted to the destination's watches) under the destination's, neither
/// held across steps; an abort stops it between steps. `written` counts the blocks
/// written (how far a failed copy got).
#[allow(clippy::too_many_arguments)] // two LUs, two LBAs, a length, the nexus, how, progress
pub(super) fn chunks(
    src: &LogicalUnit,
    sl: Lba,
    dst: &MediumWrites<'_>,
    dl: Lba,
    blocks: u64,
    nexus: &Nexus<'_>,
    order: Order,
    written: &mut u64,
) -> Result<(), Stop> {
    let Order { backward, owner } = order;
    let bs = u64::from(src.block_bytes());
    let per = (COPY_CHUNK_BYTES as u64 / bs).max(1);
    let mut buf = vec![0u8; (per.min(blocks) * bs) as usize];
    let dst_lu = dst.lu();
    // Each step notes its own range to the destination's watches (the door does).
    let mut done = 0;
    while done < blocks {
        if nexus.aborted() {
            return Err(SenseCode::ABORTED_COMMAND.into());
        }
        let n = per.min(blocks - done);
        let off = if backward { blocks - done - n } else { done };
        let b = &mut buf[..(n * bs) as usize];
        {
            let _r = src.read_order();
            src.backend
                .read_at(Lba(sl.0 + off), b)
                .map_err(|e| backend_failure(&e, src, Lba(sl.0 + off)))?;
        }
        let _w = dst_lu.write_order();
        let at = Lba(dl.0 + off);
        dst.write_at_by(owner, at, b).map_err(|e| match e {
            WriteError::Refused(stop) => stop,
            WriteError::Backend(e) => backend_failure(&e, dst_lu, at),
        })?;
        done += n;
        *written += n;
    }
    Ok(())
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
