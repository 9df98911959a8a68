//! Aborts across channels (part of [`super::ChannelIo`]): PREEMPT AND ABORT and the credits
//! that aborted commands owe.
//!
//! A PERSISTENT RESERVE OUT / PREEMPT AND ABORT completes in a worker on the channel that
//! sent it, but the tasks it aborts (SPC-4 5.13.11.2.6: every task of each preempted I_T
//! nexus for that LU, on all its channels, through any target port) live on other
//! channels. So the channel raises a [`NexusAbort`] and holds the command's response; the
//! driver, which owns every channel, applies the request to each of them and then lets the
//! held responses go ([`settle_aborts`]). Once the initiator sees GOOD for the PREEMPT AND
//! ABORT, no task of a preempted nexus that was in the task set when the loop applied the
//! abort gets a response, and none still queued reaches the medium.
//!
//! Task management functions whose task set spans channels go the same way: ABORT TASK
//! SET (every channel of the I_T nexus), CLEAR TASK SET and LOGICAL UNIT RESET (every
//! channel of every I_T nexus, the task set being shared: TST=000b); their SRP_RSP is
//! likewise held until the driver applied them. CLEAR TASK SET tells the other I_T nexuses
//! whose tasks it aborted with COMMANDS CLEARED BY ANOTHER INITIATOR (TAS=0, SAM-5).
//!
//! An abort stops what has not started at once, but a job already running on a backend
//! worker (a copy between its 1 MiB steps, a large WRITE) stops only when it next looks at
//! its abort flag. SAM-5 completes a task management function after its tasks are
//! aborted, and an initiator told "gone" may rewrite the blocks (ESXi copies by itself
//! after aborting an XCOPY): so each held answer also waits, on a [`Drain`], for the
//! aborted jobs still running on any channel to stop. The last one to stop rings the
//! waiting loop's doorbell; no polling. A backend stuck past [`DRAIN_LIMIT`] does not
//! wedge the channel: the answer then goes out (a task management function as FAILED, the
//! task not yet gone), counted (the session's `late_task_mgmt`, [`ChannelIo::counters`])
//! and logged.
//!
//! An aborted command gets no SRP_RSP (TAS=0, as the control mode page reports): its tag
//! is freed and its credit is owed. Owed credits ride on the next SRP_RSP; when none is
//! about to carry them (at the end of each poll, after every response of the turn was
//! built), they go back in an SRP_CRED_REQ, one at a time.

use super::*;
use crate::exec::pr::ItNexus;
use crate::exec::ua::To;
use crate::io::Drain;
use std::time::{Duration, Instant};

/// How long an answer waits for aborted jobs to stop before it goes out anyway (under the
/// initiators' task management timeouts: Linux ib_srp waits 5 s for an ABORT TASK's
/// answer). The serving loop wakes at least every 100 ms, so the limit holds to that.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(3);

/// An answer waiting for aborted jobs to stop.
#[derive(Debug)]
pub(super) enum Waiter {
    /// A task management request, by slot.
    Tmf(usize),
    /// A PREEMPT AND ABORT's result.
    Result(Done),
}

/// An answer, the jobs it waits for, and since when.
#[derive(Debug)]
pub(super) struct Draining {
    waiter: Waiter,
    drain: Arc<Drain>,
    since: Instant,
}

/// Whose tasks a [`NexusAbort`] aborts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbortScope {
    /// Those of these I_T nexuses (PREEMPT AND ABORT, ABORT TASK SET).
    Nexuses(Vec<ItNexus>),
    /// Every I_T nexus's (CLEAR TASK SET, LOGICAL UNIT RESET).
    All,
}

/// Abort the tasks of `scope` for this logical unit.
#[derive(Clone)]
pub struct NexusAbort {
    /// The logical unit (the same `Arc` whatever LUN number an IOC maps it to).
    pub lu: Arc<LogicalUnit>,
    /// Whose tasks.
    pub scope: AbortScope,
    /// The I_T nexus that asked.
    pub origin: ItNexus,
    /// The unit attention for every other I_T nexus that lost tasks, if any.
    pub attention: Option<SenseCode>,
    /// Counts the aborted jobs still running, on any channel: the answer waits for them.
    pub drain: Arc<Drain>,
}

impl std::fmt::Debug for NexusAbort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NexusAbort")
            .field("lu", &self.lu.identity())
            .field("scope", &self.scope)
            .field("origin", &self.origin)
            .field("attention", &self.attention)
            .field("running", &self.drain.left())
            .finish()
    }
}

impl ChannelIo {
    /// A result that names I_T nexuses to abort (PREEMPT AND ABORT) raises a
    /// [`NexusAbort`] and is held until [`ChannelIo::release_held`]; anything else is
    /// handed back to be answered now.
    pub(super) fn hold_for_abort(&mut self, n: usize, mut done: Done) -> Option<Done> {
        let Ok(out) = &mut done.result else {
            return Some(done);
        };
        if out.abort_nexuses.is_empty() {
            return Some(done);
        }
        // The PR state already changed, so even a channel logging out raises the request.
        let lun = match self.slots.get(n) {
            Some(Some(s)) if s.phase == Phase::Executing && matches!(s.work, Work::Scsi { .. }) => {
                Some(s.lun)
            }
            _ => None,
        };
        let Some((_, lu)) = self.luns.iter().find(|(l, _)| Some(*l) == lun) else {
            // A stale result, or no logical unit behind the LUN: nothing to abort.
            out.abort_nexuses.clear();
            return Some(done);
        };
        let nexuses = std::mem::take(&mut out.abort_nexuses);
        let drain = self.done_tx.drain();
        self.aborts.push(NexusAbort {
            lu: lu.clone(),
            scope: AbortScope::Nexuses(nexuses),
            origin: self.nexus.nexus().it_nexus(),
            attention: None,
            drain: drain.clone(),
        });
        self.held.push((done, drain));
        None
    }

    /// ABORT TASK SET, CLEAR TASK SET, LOGICAL UNIT RESET of `lun` in slot `n` (this
    /// channel's tasks already aborted, their running jobs counted in `drain`): raises the
    /// [`NexusAbort`] for the other channels and holds the response; false if there is
    /// nothing to hold for.
    pub(super) fn hold_task_set_tmf(
        &mut self,
        n: usize,
        function: TaskMgmtFunction,
        lun: Lun,
        drain: &Arc<Drain>,
    ) -> bool {
        let Some((_, lu)) = self.luns.iter().find(|(l, _)| *l == lun) else {
            return false;
        };
        let me = self.nexus.nexus().it_nexus();
        let (scope, attention) = match function {
            TaskMgmtFunction::AbortTaskSet => (AbortScope::Nexuses(vec![me]), None),
            TaskMgmtFunction::ClearTaskSet => (
                AbortScope::All,
                Some(SenseCode::COMMANDS_CLEARED_BY_ANOTHER_INITIATOR),
            ),
            // BUS DEVICE RESET FUNCTION OCCURRED is already established for every nexus.
            TaskMgmtFunction::LogicalUnitReset => (AbortScope::All, None),
            _ => return false,
        };
        self.aborts.push(NexusAbort {
            lu: lu.clone(),
            scope,
            origin: me,
            attention,
            drain: drain.clone(),
        });
        self.held_tmf.push((n, drain.clone()));
        true
    }

    /// The abort requests raised since the last call. The driver applies each to every
    /// channel ([`ChannelIo::abort_nexus_tasks`]), then calls [`ChannelIo::release_held`]
    /// on the channels it took them from; [`settle_aborts`] does all three.
    pub fn take_aborts(&mut self) -> Vec<NexusAbort> {
        std::mem::take(&mut self.aborts)
    }

    /// Whether abort requests wait to be settled (a cheap check before [`settle_aborts`]).
    pub fn has_aborts(&self) -> bool {
        !self.aborts.is_empty()
    }

    /// Aborts this channel's tasks for `req.lu` if its I_T nexus is in `req.scope`: queued
    /// ones are dropped, those executing finish with no response, their tags are freed and
    /// their credits owed; `req.attention` is established if this is another nexus and it
    /// lost tasks. Returns how many tasks it aborted.
    pub fn abort_nexus_tasks(&mut self, req: &NexusAbort) -> usize {
        let me = self.nexus.nexus().it_nexus();
        if let AbortScope::Nexuses(list) = &req.scope {
            if !list.contains(&me) {
                return 0;
            }
        }
        let luns: Vec<Lun> = self
            .luns
            .iter()
            .filter(|(_, lu)| Arc::ptr_eq(lu, &req.lu))
            .map(|(l, _)| *l)
            .collect();
        if luns.is_empty() {
            return 0;
        }
        let aborted = self.abort(|_, l| luns.contains(&l), &req.drain);
        if let Some(code) = req.attention.filter(|_| aborted > 0 && me != req.origin) {
            req.lu.unit_attention(To::One(me), code);
        }
        aborted
    }

    /// The PREEMPT AND ABORT results and task management requests held back have their
    /// aborts applied: each is answered once the aborted jobs it waits for stopped (at
    /// once if none runs). Then any credits the aborts left owed are sent.
    pub fn release_held(&mut self) {
        for (done, drain) in std::mem::take(&mut self.held) {
            self.drain_then_answer(Waiter::Result(done), drain);
        }
        for (n, drain) in std::mem::take(&mut self.held_tmf) {
            self.drain_then_answer(Waiter::Tmf(n), drain);
        }
        self.send_owed_credits();
    }

    /// Answers `waiter` once `drain` is done (now, if it is).
    pub(super) fn drain_then_answer(&mut self, waiter: Waiter, drain: Arc<Drain>) {
        if drain.is_done() {
            return self.answer_waiter(waiter, true);
        }
        self.draining.push(Draining {
            waiter,
            drain,
            since: self.clock.now(),
        });
    }

    /// Answers the waiters whose jobs stopped, and those that waited [`DRAIN_LIMIT`] (a
    /// stuck backend); returns how many it answered.
    pub(super) fn answer_drained(&mut self) -> usize {
        let now = self.clock.now();
        let mut answered = 0;
        for d in std::mem::take(&mut self.draining) {
            // Read once: a job stopping meanwhile must not make a late answer look on time.
            let stopped = d.drain.is_done();
            let late = now.saturating_duration_since(d.since) >= DRAIN_LIMIT;
            if !stopped && !late {
                self.draining.push(d);
                continue;
            }
            if !stopped {
                self.counters.late_task_mgmt += 1;
                tracing::warn!(
                    channel = self.channel.id().0,
                    running = d.drain.left(),
                    "aborted commands still running on the backend after {DRAIN_LIMIT:?}: answering without them ({:?})",
                    d.waiter
                );
            }
            self.answer_waiter(d.waiter, stopped);
            answered += 1;
        }
        answered
    }

    /// A task management request is FUNCTION COMPLETE if its aborted jobs `stopped`, else
    /// FAILED (its tasks are not gone yet); a held result goes out as it is.
    fn answer_waiter(&mut self, waiter: Waiter, stopped: bool) {
        match waiter {
            Waiter::Tmf(n) if stopped => self.answer_tmf(n, TmfResponse::Complete),
            Waiter::Tmf(n) => self.answer_tmf(n, TmfResponse::Failed),
            Waiter::Result(done) => self.on_done(done),
        }
    }

    /// Credits owed by aborted commands go back in an SRP_CRED_REQ when the channel is
    /// live and no earlier one is unanswered (see [`TargetChannel::cred_req`]).
    pub(super) fn send_owed_credits(&mut self) {
        if self.state != IoState::Live || self.cred_in_flight {
            return;
        }
        // SRP_CRED_REQ is 16 bytes (no allocation on this per-poll path); its buffer holds
        // ti_iu_len, and a channel that negotiated less gets its credits on responses only.
        let mut buf = [0u8; 16];
        if self.layout.send_len < buf.len() as u64 {
            return;
        }
        let Some(len) = self.channel.cred_req(&mut buf) else {
            return;
        };
        let off = self.layout.cred();
        if self.mem.write(off as usize, &buf[..len]).is_err() {
            return self.teardown(Some("credit request buffer out of range".into()));
        }
        let wr = SendWr {
            wr_id: WrKind::Cred.encode(),
            op: SendOp::Send,
            sg_list: [sge(self.lkey(), off, len as u32)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        self.cred_in_flight = true;
        self.wrs.push(wr);
        self.post_or_die();
    }
}

/// Applies every abort request raised on `channels` to all of them, then answers the
/// commands that raised them and sends owed credits. The driver calls it after polling
/// its channels (all of the target's channels, so every IOC and port is covered); returns
/// how many requests it settled.
pub fn settle_aborts(channels: &mut [&mut ChannelIo]) -> usize {
    let reqs: Vec<NexusAbort> = channels.iter_mut().flat_map(|c| c.take_aborts()).collect();
    if reqs.is_empty() {
        return 0;
    }
    for req in &reqs {
        for c in channels.iter_mut() {
            c.abort_nexus_tasks(req);
        }
    }
    for c in channels.iter_mut() {
        c.release_held();
    }
    reqs.len()
}
