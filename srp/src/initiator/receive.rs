//! Received IUs on a live channel: SRP_RSP for commands and TMFs (with the escalation that
//! TMF answers drive), SRP_CRED_REQ, SRP_AER_REQ and SRP_T_LOGOUT. A malformed IU, a response
//! for an unknown or stale tag, or an IU an initiator never receives resets the channel.

use super::InitiatorError;
use super::alloc::vec;
use super::alloc::vec::Vec;
use super::channel::{Entry, Event, InitiatorChannel, Link, LossCause};
use super::command::{Outcome, Response};
use super::escalation::{self, EscalationStep, Next, Stage, Trigger};
use crate::wire::aer::AerRsp;
use crate::wire::cred::CredRsp;
use crate::wire::rsp::{Rsp, TmfResponse};
use crate::wire::tsk_mgmt::TaskMgmtFunction;
use crate::wire::{AnyIu, Tag};
use ib_verbs::Rkey;
use ib_verbs::time::Time;
use scsi::Lun;
use wirekit::WireRepr;

fn encode<'a, T: WireRepr<'a>>(iu: &T) -> Vec<u8> {
    let mut b = vec![0; iu.buffer_len()];
    let n = iu.emit(&mut b).unwrap_or(0);
    b.truncate(n);
    b
}

impl InitiatorChannel {
    /// An IU arrived in a receive buffer. `invalidated` is the rkey the target invalidated
    /// with a SEND with Invalidate, as the receive completion reported it.
    pub fn handle_recv(&mut self, now: Time, bytes: &[u8], invalidated: Option<Rkey>) {
        if !matches!(self.link, Link::Up(_)) {
            // A receive completing after the channel went down belongs to the old QP.
            return;
        }
        let iu = match AnyIu::parse(bytes) {
            Ok(iu) => iu,
            Err(e) => {
                return self.lose_channel(now, LossCause::Protocol(InitiatorError::MalformedIu(e)));
            }
        };
        match iu {
            AnyIu::Rsp(rsp) => self.on_rsp(now, &rsp, invalidated),
            AnyIu::CredReq(c) => {
                self.add_credits(c.req_lim_delta);
                self.events.push_back(Event::CreditRequest {
                    delta: c.req_lim_delta,
                });
                self.responses.push_back(encode(&CredRsp { tag: c.tag }));
            }
            AnyIu::AerReq(a) => {
                // As ib_srp: take the credits, log the event, acknowledge it.
                self.add_credits(a.req_lim_delta);
                self.events.push_back(Event::AsyncEvent {
                    lun: a.lun,
                    sense: a.sense.to_vec(),
                });
                self.responses.push_back(encode(&AerRsp { tag: a.tag }));
            }
            AnyIu::TLogout(t) => return self.lose_channel(now, LossCause::TargetLogout(t.reason)),
            other => {
                let e = InitiatorError::UnexpectedIu(other.iu_type());
                return self.lose_channel(now, LossCause::Protocol(e));
            }
        }
        self.drain(now);
    }

    fn add_credits(&mut self, delta: u32) {
        if let Link::Up(s) = &mut self.link {
            s.credits.add(delta);
        }
    }

    fn on_rsp(&mut self, now: Time, rsp: &Rsp<'_>, invalidated: Option<Rkey>) {
        let Some(entry) = self.tags.remove(rsp.tag) else {
            if let Some(at) = self.retired.iter().position(|t| *t == rsp.tag) {
                self.retired.remove(at);
                self.add_credits(rsp.req_lim_delta);
                self.events.push_back(Event::LateResponse(rsp.tag));
                return;
            }
            let e = InitiatorError::UnknownTag(rsp.tag);
            return self.lose_channel(now, LossCause::Protocol(e));
        };
        self.add_credits(rsp.req_lim_delta);
        // A well-formed answer to a live tag: the channel works again.
        self.unhealthy_since = None;
        match entry {
            Entry::Cmd(o) => {
                if let Some(d) = o.deadline {
                    self.deadlines.remove(&(d, rsp.tag));
                }
                let response = Response {
                    status: rsp.status,
                    sense: rsp.sense.to_vec(),
                    data_in_residual: rsp.data_in_residual,
                    data_out_residual: rsp.data_out_residual,
                    invalidated,
                };
                self.complete(o.id, Outcome::Done(response));
            }
            Entry::Tmf(t) => {
                self.deadlines.remove(&(t.deadline, rsp.tag));
                // ib_srp: no response data means success; otherwise RSP_CODE in byte 3.
                let ok = matches!(rsp.tmf_response(), None | Some(TmfResponse::Complete));
                let trigger = if ok {
                    Trigger::TmfSucceeded
                } else {
                    Trigger::TmfFailed
                };
                if t.caller.is_some() {
                    return self.on_caller_tmf(&t, trigger);
                }
                self.on_tmf_result(now, rsp.tag, t.function, t.lun, t.task, trigger);
            }
        }
    }

    /// A TMF answered, failed, or timed out: move the commands it was for.
    pub(super) fn on_tmf_result(
        &mut self,
        now: Time,
        tmf: Tag,
        function: TaskMgmtFunction,
        lun: Lun,
        task: Option<Tag>,
        trigger: Trigger,
    ) {
        let targets: Vec<Tag> = match (function, task) {
            (TaskMgmtFunction::AbortTask, Some(t)) => vec![t],
            _ => self
                .tags
                .tags()
                .into_iter()
                .filter(|t| {
                    matches!(self.tags.get(*t), Some(Entry::Cmd(o))
                        if o.cmd.lun == lun && o.stage == Stage::Resetting { tmf })
                })
                .collect(),
        };
        for t in targets {
            let ok_stage = matches!(self.tags.get(t), Some(Entry::Cmd(o))
                if matches!(o.stage, Stage::Aborting { tmf: x } | Stage::Resetting { tmf: x } if x == tmf));
            if ok_stage {
                self.escalate(now, t, trigger);
            }
            if !matches!(self.link, Link::Up(_)) {
                // A channel reset ended everything.
                return;
            }
        }
    }

    /// Applies `trigger` to the command `tag` and takes the step the ladder names.
    pub(super) fn escalate(&mut self, now: Time, tag: Tag, mut trigger: Trigger) {
        loop {
            let Some(Entry::Cmd(o)) = self.tags.get_mut(tag) else {
                return;
            };
            if trigger == Trigger::CommandTimedOut {
                o.timed_out = true;
                o.deadline = None;
            }
            let (id, lun, stage) = (o.id, o.cmd.lun, o.stage);
            match escalation::next(stage, trigger) {
                Next::Ignore => return,
                Next::Finish(outcome) => {
                    self.tags.remove(tag);
                    self.retire(tag);
                    return self.complete(id, outcome);
                }
                Next::Step(step) => {
                    self.events.push_back(Event::Escalated { id, step });
                    let sent = match step {
                        EscalationStep::AbortTask => self
                            .send_tmf(now, TaskMgmtFunction::AbortTask, lun, Some(tag), None)
                            .map(|tmf| Stage::Aborting { tmf }),
                        EscalationStep::LunReset => self.lun_reset(now, lun),
                        EscalationStep::ChannelReset => {
                            return self.lose_channel(now, LossCause::Escalation);
                        }
                    };
                    match sent {
                        Some(stage) => {
                            if let Some(Entry::Cmd(o)) = self.tags.get_mut(tag) {
                                o.stage = stage;
                            }
                            return;
                        }
                        None => {
                            // The step could not be taken: count it as failed.
                            if let Some(Entry::Cmd(o)) = self.tags.get_mut(tag) {
                                o.stage = match step {
                                    EscalationStep::AbortTask => Stage::Aborting { tmf: Tag(0) },
                                    _ => Stage::Resetting { tmf: Tag(0) },
                                };
                            }
                            trigger = Trigger::TmfFailed;
                        }
                    }
                }
            }
        }
    }

    /// Sends LOGICAL UNIT RESET for `lun` (or joins one already out) and moves every
    /// command on the LUN under it.
    fn lun_reset(&mut self, now: Time, lun: Lun) -> Option<Stage> {
        let on_lun: Vec<Tag> = self
            .tags
            .tags()
            .into_iter()
            .filter(|t| matches!(self.tags.get(*t), Some(Entry::Cmd(o)) if o.cmd.lun == lun))
            .collect();
        let existing = on_lun.iter().find_map(|t| match self.tags.get(*t) {
            Some(Entry::Cmd(o)) => match o.stage {
                Stage::Resetting { tmf } if tmf != Tag(0) => Some(tmf),
                _ => None,
            },
            _ => None,
        });
        let tmf = match existing {
            Some(tmf) => tmf,
            None => self.send_tmf(now, TaskMgmtFunction::LogicalUnitReset, lun, None, None)?,
        };
        for t in on_lun {
            if let Some(Entry::Cmd(o)) = self.tags.get_mut(t) {
                o.stage = Stage::Resetting { tmf };
            }
        }
        Some(Stage::Resetting { tmf })
    }

    /// Per-command and per-TMF deadlines due at `now`.
    pub(super) fn expire_deadlines(&mut self, now: Time) {
        while let Some(&(at, tag)) = self.deadlines.first() {
            if at > now {
                return;
            }
            self.deadlines.remove(&(at, tag));
            match self.tags.get(tag) {
                Some(Entry::Cmd(_)) => self.escalate(now, tag, Trigger::CommandTimedOut),
                Some(Entry::Tmf(_)) => {
                    if let Some(Entry::Tmf(t)) = self.tags.remove(tag) {
                        // Its credit stays with the target; a late answer is tolerated.
                        self.retire(tag);
                        if t.caller.is_some() {
                            self.on_caller_tmf(&t, Trigger::TmfTimedOut);
                            continue;
                        }
                        self.on_tmf_result(
                            now,
                            tag,
                            t.function,
                            t.lun,
                            t.task,
                            Trigger::TmfTimedOut,
                        );
                    }
                }
                None => {}
            }
        }
    }
}
