//! RECEIVE COPY RESULTS (SPC-4 6.18–6.20, LID1): the copy manager's operating parameters,
//! and the status and failure details of each EXTENDED COPY by list identifier.
//!
//! EXTENDED COPY runs to its end before its status, so a list is seen "in progress" only by
//! a RECEIVE COPY STATUS from another channel while it runs. Results are kept per I_T nexus
//! and list identifier (SPC-4 5.16.4.2) as LIST ID USAGE says: 00b (hold) keeps the status
//! after the copy ends, at most [`MAX_KEPT_LISTS`] per LU, the oldest forgotten first; 10b
//! (discard, what `sg_xcopy` sends to a copy manager holding no data) forgets it when the copy
//! ends; 11b tracks nothing. A list not kept is INVALID FIELD IN CDB at the LIST IDENTIFIER
//! (as libiscsi's CopyStatus test expects of a list whose status was discarded).

use super::super::{Exec, LogicalUnit, Stop, good_data};
use super::{
    MAX_CSCD_DESCRIPTORS, MAX_DESCRIPTOR_LIST_BYTES, MAX_SEGMENT_BYTES, MAX_SEGMENT_DESCRIPTORS,
    manager::TOTAL_CONCURRENT_COPIES,
};
use crate::exec::pr::ItNexus;
use scsi::cdb::{CopyIn, CopyResults};
use scsi::copy::{CSCD_IDENTIFICATION, SEGMENT_BLOCK_TO_BLOCK};
use scsi::{Sense, SenseCode};
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

/// List results kept per LU.
pub const MAX_KEPT_LISTS: usize = 64;

/// Where a copy stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ListState {
    /// Running now.
    Running,
    /// Ended: `failure` is how, if it failed.
    Done {
        segments: u16,
        bytes: u64,
        failure: Option<Failure>,
    },
}

/// How a copy failed: its status (CHECK CONDITION, RESERVATION CONFLICT...) and sense.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) status: scsi::Status,
    pub(crate) sense: Option<Sense>,
}

impl Failure {
    /// How a command that stopped with `stop` ended.
    pub(crate) fn of(stop: &Stop) -> Failure {
        match stop {
            Stop::Check(sense) => Failure {
                status: scsi::Status::CheckCondition,
                sense: Some(sense.clone()),
            },
            Stop::Transport(t) => Failure {
                status: scsi::Status::CheckCondition,
                sense: Some(t.sense()),
            },
            Stop::Conflict => Failure {
                status: scsi::Status::ReservationConflict,
                sense: None,
            },
            Stop::Busy => Failure {
                status: scsi::Status::Busy,
                sense: None,
            },
        }
    }
}

/// The kept results of one LU.
#[derive(Debug, Default)]
pub(crate) struct CopyLists(Mutex<VecDeque<((ItNexus, u8), ListState)>>);

impl CopyLists {
    /// Marks list `id` of `n` running; `false` if it is running already.
    pub(crate) fn start(&self, n: ItNexus, id: u8) -> bool {
        let mut l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if l.iter()
            .any(|(k, s)| *k == (n, id) && *s == ListState::Running)
        {
            return false;
        }
        l.retain(|(k, _)| *k != (n, id));
        while l.len() >= MAX_KEPT_LISTS {
            // The oldest finished one goes; running ones stay (at most the copy limit).
            match l.iter().position(|(_, s)| *s != ListState::Running) {
                Some(i) => {
                    l.remove(i);
                }
                None => break,
            }
        }
        l.push_back(((n, id), ListState::Running));
        true
    }

    /// Records how list `id` of `n` ended; `hold`: keep it for RECEIVE COPY STATUS (LIST
    /// ID USAGE 00b), else forget it.
    pub(crate) fn finish(&self, n: ItNexus, id: u8, state: ListState, hold: bool) {
        if !hold {
            return self.forget(n, id);
        }
        let mut l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, s)) = l.iter_mut().find(|(k, _)| *k == (n, id)) {
            *s = state;
        }
    }

    /// Forgets list `id` of `n`.
    pub(crate) fn forget(&self, n: ItNexus, id: u8) {
        let mut l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        l.retain(|(k, _)| *k != (n, id));
    }

    fn get(&self, n: ItNexus, id: u8) -> Option<ListState> {
        let l = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        l.iter()
            .find(|(k, _)| *k == (n, id))
            .map(|(_, s)| s.clone())
    }
}

/// The descriptor type codes this copy manager implements.
pub const IMPLEMENTED_DESCRIPTORS: [u8; 2] = [SEGMENT_BLOCK_TO_BLOCK, CSCD_IDENTIFICATION];

/// RECEIVE COPY RESULTS.
pub(crate) fn receive(lu: &LogicalUnit, n: ItNexus, c: &CopyIn, din: &mut Vec<u8>) -> Exec {
    let alloc = usize::try_from(c.alloc_len).unwrap_or(usize::MAX);
    match c.action {
        CopyResults::OperatingParameters => operating_parameters(lu, din),
        CopyResults::Status => status(lu, n, c, din)?,
        CopyResults::FailureDetails => failure_details(lu, n, c, din)?,
        CopyResults::RodTokenInformation => {
            return super::token::rod_token_information(lu, n, c, din);
        }
    }
    good_data(din, alloc)
}

fn operating_parameters(lu: &LogicalUnit, din: &mut Vec<u8>) {
    let granularity = lu.block_bytes().trailing_zeros() as u8;
    din.resize(44, 0);
    din[4] = 0x01; // SNLID: LIST ID USAGE 11b is supported
    din[8..10].copy_from_slice(&MAX_CSCD_DESCRIPTORS.to_be_bytes());
    din[10..12].copy_from_slice(&MAX_SEGMENT_DESCRIPTORS.to_be_bytes());
    din[12..16].copy_from_slice(&MAX_DESCRIPTOR_LIST_BYTES.to_be_bytes());
    din[16..20].copy_from_slice(&MAX_SEGMENT_BYTES.to_be_bytes());
    // MAXIMUM INLINE DATA LENGTH, HELD DATA LIMIT, MAXIMUM STREAM DEVICE TRANSFER SIZE: 0.
    din[34..36].copy_from_slice(&(TOTAL_CONCURRENT_COPIES as u16).to_be_bytes());
    din[36] = TOTAL_CONCURRENT_COPIES as u8; // MAXIMUM CONCURRENT COPIES
    din[37] = granularity; // DATA SEGMENT GRANULARITY (log2 bytes): a block
    din[38] = granularity; // INLINE DATA GRANULARITY
    din[39] = granularity; // HELD DATA GRANULARITY
    din[43] = IMPLEMENTED_DESCRIPTORS.len() as u8;
    din.extend_from_slice(&IMPLEMENTED_DESCRIPTORS);
    let len = (din.len() - 4) as u32;
    din[..4].copy_from_slice(&len.to_be_bytes());
}

/// INVALID FIELD IN CDB at the LIST IDENTIFIER: no such list of this I_T nexus.
fn unknown_list() -> Stop {
    Sense::invalid_field_in_cdb(2, Some(7)).into()
}

/// COPY MANAGER STATUS values (LID1).
const IN_PROGRESS: u8 = 0x00;
const COMPLETED_OK: u8 = 0x01;
const COMPLETED_WITH_ERRORS: u8 = 0x02;

fn status(lu: &LogicalUnit, n: ItNexus, c: &CopyIn, din: &mut Vec<u8>) -> Result<(), Stop> {
    let id = c.list_id as u8;
    let state = lu.copy_lists.get(n, id).ok_or_else(unknown_list)?;
    let (status, segments, bytes) = match state {
        ListState::Running => (IN_PROGRESS, 0, 0),
        ListState::Done {
            segments,
            bytes,
            failure,
        } => (
            if failure.is_some() {
                COMPLETED_WITH_ERRORS
            } else {
                COMPLETED_OK
            },
            segments,
            bytes,
        ),
    };
    // TRANSFER COUNT UNITS: bytes (00h) while they fit 32 bits, else KiB (01h).
    let (units, count) = match u32::try_from(bytes) {
        Ok(b) => (0x00, b),
        Err(_) => (0x01, u32::try_from(bytes >> 10).unwrap_or(u32::MAX)),
    };
    din.extend_from_slice(&8u32.to_be_bytes());
    din.push(status);
    din.extend_from_slice(&segments.to_be_bytes());
    din.push(units);
    din.extend_from_slice(&count.to_be_bytes());
    Ok(())
}

fn failure_details(
    lu: &LogicalUnit,
    n: ItNexus,
    c: &CopyIn,
    din: &mut Vec<u8>,
) -> Result<(), Stop> {
    let id = c.list_id as u8;
    let state = lu.copy_lists.get(n, id).ok_or_else(unknown_list)?;
    let failure = match state {
        ListState::Done {
            failure: Some(f), ..
        } => f,
        // Running, or ended well: AVAILABLE DATA 0.
        _ => {
            din.extend_from_slice(&[0; 4]);
            return Ok(());
        }
    };
    let mut sense = Vec::new();
    if let Some(s) = &failure.sense {
        sense.resize(wirekit::WireRepr::buffer_len(s), 0);
        wirekit::WireRepr::emit(s, &mut sense)
            .map_err(|_| Stop::Check(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE)))?;
    }
    din.resize(60, 0);
    din[56] = u8::from(failure.status); // COPY COMMAND STATUS
    din[58..60].copy_from_slice(&(sense.len() as u16).to_be_bytes());
    din.extend_from_slice(&sense);
    let len = (din.len() - 4) as u32;
    din[..4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}
