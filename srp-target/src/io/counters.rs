//! Per-session counters: what the control socket reports for each channel. Owned by the
//! channel (one thread drives it), so plain integers.

use scsi::Status;

/// What one channel has done since login.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SessionCounters {
    /// SRP_CMDs received (including refused ones).
    pub commands: u64,
    /// SRP_TSK_MGMTs received.
    pub task_mgmt: u64,
    /// Data-in bytes written to the initiator.
    pub data_in_bytes: u64,
    /// Data-out bytes read from the initiator (and immediate data).
    pub data_out_bytes: u64,
    /// Responses with CHECK CONDITION.
    pub check_conditions: u64,
    /// Responses with BUSY (the backend queue was full).
    pub busy: u64,
    /// Responses with RESERVATION CONFLICT.
    pub reservation_conflicts: u64,
    /// Commands aborted by task management (no response sent for them).
    pub aborted: u64,
    /// Answers given with aborted commands still running on the backend after the drain
    /// limit: a task management function answered FAILED, or a PREEMPT AND ABORT's GOOD
    /// (the reservation change is made) sent anyway.
    pub late_task_mgmt: u64,
    /// Chains of work requests (a response with its WRITEs, READs) that waited for room
    /// in the QP's send queue before they were posted.
    pub send_queue_waits: u64,
}

impl SessionCounters {
    /// Counts a response with `status`.
    pub(crate) fn response(&mut self, status: Status) {
        match status {
            Status::CheckCondition => self.check_conditions += 1,
            Status::Busy => self.busy += 1,
            Status::ReservationConflict => self.reservation_conflicts += 1,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_count_by_status() {
        let mut c = SessionCounters::default();
        for s in [
            Status::Good,
            Status::CheckCondition,
            Status::Busy,
            Status::Busy,
            Status::ReservationConflict,
        ] {
            c.response(s);
        }
        assert_eq!(
            (c.check_conditions, c.busy, c.reservation_conflicts),
            (1, 2, 1)
        );
    }
}
