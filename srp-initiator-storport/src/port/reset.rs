//! Bus resets and the port's timers: a request the miniport holds past its timeout makes
//! the port reset its bus (StorPort's escalation on a timed-out request: HwResetBus), and
//! a routine running at dispatch level past the DPC watchdog bugchecks the port.
//!
//! A reset holds every queue, takes the StartIo lock, calls HwResetBus, and then checks
//! that the miniport holds no request on that path any more; any left are completed with
//! `SRB_STATUS_BUS_RESET` by the port and reported as a violation.

use super::miniport::Miniport;
use super::shared::{RunState, Shared};
use super::srb::SrbId;
use super::status::SrbStatus;
use super::verifier::{Routine, Violation};
use super::{PortError, PortEvent, ResetCause};
use std::time::Instant;

impl<M: Miniport> Shared<M> {
    /// Resets bus `path` (see the module doc).
    pub(crate) fn reset_bus(&self, path: u8, cause: ResetCause) -> Result<bool, PortError> {
        {
            let mut s = self.lock();
            if s.run == RunState::BugChecked {
                return Err(PortError::BugChecked);
            }
            s.queues.resetting += 1;
        }
        let r = self.reset_locked(path, cause);
        self.lock().queues.resetting -= 1;
        self.kick();
        r
    }

    fn reset_locked(&self, path: u8, cause: ResetCause) -> Result<bool, PortError> {
        let Some(_startio) = self.start_io_lock() else {
            return Err(PortError::BugChecked);
        };
        let port = self.services();
        let ok = match self.call(Routine::ResetBus, true, || {
            self.miniport.reset_bus(&port, path)
        }) {
            Ok(ok) => ok,
            Err(v) => {
                self.bugcheck(v);
                return Err(PortError::BugChecked);
            }
        };
        let mut s = self.lock();
        s.events.push(PortEvent::BusReset {
            path,
            cause,
            success: ok,
        });
        let mut left: Vec<SrbId> = s
            .owned
            .iter()
            .filter(|(_, o)| o.started.is_some() && o.srb.address().path_id == path)
            .map(|(id, _)| id)
            .collect();
        left.sort();
        for id in &left {
            self.force_complete(&mut s, *id, SrbStatus::BUS_RESET);
        }
        drop(s);
        if !left.is_empty() {
            self.bugcheck(Violation::OutstandingAfterReset { path, ids: left });
        }
        Ok(ok)
    }

    /// One timer tick: the DPC watchdog, then request timeouts. Returns the paths to
    /// reset.
    pub(crate) fn tick(&self, now: Instant) -> Vec<u8> {
        let mut s = self.lock();
        let limit = self.config.dpc_watchdog;
        let stuck = s.calls.overdue(now, limit);
        if let Some(routine) = stuck.filter(|_| s.run != RunState::BugChecked) {
            drop(s);
            self.bugcheck(Violation::DpcWatchdog {
                routine,
                limit_ms: limit.as_millis() as u64,
            });
            return Vec::new();
        }
        let mut expired = Vec::new();
        for (id, o) in s.owned.iter_mut() {
            let late = o
                .started
                .is_some_and(|t| now.duration_since(t) > o.srb.timeout());
            if late && !o.timed_out {
                o.timed_out = true;
                expired.push((id, o.srb.address()));
            }
        }
        // In submit order, as the paths to reset.
        expired.sort_by_key(|&(id, _)| id);
        let mut paths = Vec::new();
        for (id, lu) in expired {
            s.events.push(PortEvent::RequestTimedOut { id, lu });
            if !paths.contains(&lu.path_id) {
                paths.push(lu.path_id);
            }
        }
        paths
    }
}
