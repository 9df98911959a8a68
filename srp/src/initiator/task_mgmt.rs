//! Task management the caller asks for (StorPort's ABORT_COMMAND and RESET_LOGICAL_UNIT, a
//! SCSI error handler): ABORT TASK for one command, LOGICAL UNIT RESET for one LUN. They use
//! the credit and send slot held back for task management, like the escalation ladder, but
//! move no command along it: a failed caller TMF leaves the commands as they were (their own
//! timeouts still escalate). Each ends with exactly one [`Action::TmfDone`].
//!
//! - ABORT TASK answered FUNCTION COMPLETE: the command completes with [`Outcome::Aborted`]
//!   (a late SRP_RSP for it is tolerated). A command not sent yet (waiting for a credit,
//!   held across an outage, being registered again) is aborted at once, without a TMF. A
//!   command the core no longer holds is [`TmfResult::NotFound`].
//! - LOGICAL UNIT RESET answered FUNCTION COMPLETE: every command sent to the LUN and not
//!   answered completes with [`Outcome::Reset`]; commands not sent yet are not affected.
//!
//! SRP has no TARGET RESET (SRP r16a 6.7: ABORT TASK, ABORT TASK SET, CLEAR TASK SET,
//! LOGICAL UNIT RESET, CLEAR ACA); a driver resets a whole target by resetting the channel.

use super::alloc::vec::Vec;
use super::channel::{Action, Entry, InitiatorChannel, Link, TmfEntry};
use super::command::{CmdId, Outcome};
use super::escalation::Trigger;
use crate::wire::Tag;
use crate::wire::tsk_mgmt::TaskMgmtFunction;
use ib_verbs::time::Time;
use scsi::Lun;

/// The core's name for a caller's task management request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TmfId(pub u64);

/// How a caller's task management request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmfResult {
    /// FUNCTION COMPLETE: the command was aborted, or the LUN's commands were reset.
    Complete,
    /// ABORT TASK for a command the core no longer holds (it completed first).
    NotFound,
    /// The target answered with another code (FUNCTION NOT SUPPORTED, FUNCTION REJECTED…).
    Rejected,
    /// No answer within `tmf_timeout`.
    TimedOut,
    /// Not sent (not logged in, no task management credit or slot), or the channel went
    /// down before the answer.
    NotSent,
}

/// A caller's task management request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmfCompletion {
    /// Which request.
    pub id: TmfId,
    /// How it ended.
    pub result: TmfResult,
}

impl InitiatorChannel {
    /// Asks the target to abort command `cmd` (SRP_TSK_MGMT ABORT TASK); the answer comes as
    /// [`Action::TmfDone`] with the returned id, after the command's own completion.
    pub fn abort_task(&mut self, now: Time, cmd: CmdId) -> TmfId {
        let id = self.next_tmf_id();
        if self.take_unsent(cmd) {
            self.complete(cmd, Outcome::Aborted);
            self.tmf_done(id, TmfResult::Complete);
            return id;
        }
        let found = self
            .tags
            .tags()
            .into_iter()
            .find_map(|t| match self.tags.get(t) {
                Some(Entry::Cmd(o)) if o.id == cmd => Some((t, o.cmd.lun)),
                _ => None,
            });
        let Some((tag, lun)) = found else {
            self.tmf_done(id, TmfResult::NotFound);
            return id;
        };
        let sent = self.send_tmf(now, TaskMgmtFunction::AbortTask, lun, Some(tag), Some(id));
        if sent.is_none() {
            self.tmf_done(id, TmfResult::NotSent);
        }
        id
    }

    /// Asks the target to reset logical unit `lun` (SRP_TSK_MGMT LOGICAL UNIT RESET); the
    /// answer comes as [`Action::TmfDone`] with the returned id, after the completions of
    /// the commands it ended.
    pub fn reset_lun(&mut self, now: Time, lun: Lun) -> TmfId {
        let id = self.next_tmf_id();
        let sent = self.send_tmf(now, TaskMgmtFunction::LogicalUnitReset, lun, None, Some(id));
        if sent.is_none() {
            self.tmf_done(id, TmfResult::NotSent);
        }
        id
    }

    /// Takes back command `cmd` if it was never sent (waiting for a credit, or being
    /// registered again after an outage): it completes with [`Outcome::Reset`] and never
    /// reaches the target. False when the target may have it (or the core no longer holds
    /// it): only a TMF or a channel reset ends it there. No TMF is sent. For a driver that
    /// must hand every request back at once (StorPort's HwResetBus) while the target's
    /// task set is reset behind it.
    pub fn withdraw(&mut self, cmd: CmdId) -> bool {
        let unsent = self.take_unsent(cmd);
        if unsent {
            self.complete(cmd, Outcome::Reset);
        }
        unsent
    }

    /// Removes `cmd` from the commands not sent yet (waiting for a credit, or being
    /// registered again); whether it was one.
    fn take_unsent(&mut self, cmd: CmdId) -> bool {
        match self.waiting.iter().position(|(w, _)| *w == cmd) {
            Some(at) => self.waiting.remove(at).is_some(),
            None => self.remapping.remove(&cmd).is_some(),
        }
    }

    fn next_tmf_id(&mut self) -> TmfId {
        self.next_tmf += 1;
        TmfId(self.next_tmf)
    }

    pub(super) fn tmf_done(&mut self, id: TmfId, result: TmfResult) {
        self.actions
            .push_back(Action::TmfDone(TmfCompletion { id, result }));
    }

    /// A caller's TMF answered (`TmfSucceeded` / `TmfFailed`) or timed out.
    pub(super) fn on_caller_tmf(&mut self, t: &TmfEntry, trigger: Trigger) {
        let Some(id) = t.caller else {
            return;
        };
        let mut result = match trigger {
            Trigger::TmfSucceeded => TmfResult::Complete,
            Trigger::TmfFailed => TmfResult::Rejected,
            Trigger::TmfTimedOut | Trigger::CommandTimedOut => TmfResult::TimedOut,
        };
        if result == TmfResult::Complete {
            match (t.function, t.task) {
                (TaskMgmtFunction::AbortTask, Some(task)) => {
                    if !self.end_cmd(task, Outcome::Aborted) {
                        result = TmfResult::NotFound;
                    }
                }
                _ => {
                    let on_lun: Vec<Tag> = self
                        .tags
                        .tags()
                        .into_iter()
                        .filter(|x| matches!(self.tags.get(*x), Some(Entry::Cmd(o)) if o.cmd.lun == t.lun))
                        .collect();
                    for x in on_lun {
                        self.end_cmd(x, Outcome::Reset);
                    }
                }
            }
        }
        self.tmf_done(id, result);
    }

    /// Ends the sent command `tag` without its response (which is tolerated if it comes).
    fn end_cmd(&mut self, tag: Tag, outcome: Outcome) -> bool {
        if !matches!(self.tags.get(tag), Some(Entry::Cmd(_))) {
            return false;
        }
        let Some(Entry::Cmd(o)) = self.tags.remove(tag) else {
            return false;
        };
        if let Some(d) = o.deadline {
            self.deadlines.remove(&(d, tag));
        }
        self.retire(tag);
        self.complete(o.id, outcome);
        true
    }

    /// Whether a logout is waiting for the target to disconnect.
    pub fn is_logging_out(&self) -> bool {
        matches!(self.link, Link::LoggingOut)
    }
}
