//! The adapter's completion context (its "DPC"): one round polls the GSI port and the CM,
//! the RC completion queue and the channel core's timers, feeds the core, executes what it
//! yields, and completes SRBs. A round runs at dispatch level and never blocks; the
//! miniport's DPC routine (on the port's DPC, queued by the device's CQ notifications)
//! runs rounds, and HwStartIo / HwInitialize execute the actions they cause with the same
//! code.
#[allow(unused_imports)]
use crate::prelude::*;

use super::adapter::{Adapter, Inner, RECV_WR, SEND_WR, SLOT};
use super::side::PortSide;
use super::{SrbExt, outcome};
use access_layer::cm::ConnEvent;
use access_layer::mad::cm::CmRejReason;
use ib_verbs::wr::{ArmMode, Wc, WcOpcode, WcStatus};
use srp::initiator::{Action, Completion, Event};
use win_port::{Srb, SrbStatus};

/// SRBs to complete once the adapter lock is dropped.
pub(crate) type Done = Vec<Srb<SrbExt>>;

#[cfg(feature = "std")]
std::thread_local! {
    /// This thread's list of SRBs to complete, kept between rounds (taken while in use: a
    /// completion routine that re-enters the miniport gets a list of its own).
    static DONE_SPARE: core::cell::RefCell<Done> = const { core::cell::RefCell::new(Vec::new()) };
}

/// Spare lists of SRBs to complete (no `std`: no thread-locals in a kernel).
#[cfg(not(feature = "std"))]
static DONE_SPARE: crate::scratch::Stash<Srb<SrbExt>> = crate::scratch::Stash::new();

/// An empty list of SRBs to complete, with memory from an earlier round.
pub(crate) fn done_list() -> Done {
    #[cfg(feature = "std")]
    {
        DONE_SPARE.with_borrow_mut(core::mem::take)
    }
    #[cfg(not(feature = "std"))]
    {
        DONE_SPARE.take()
    }
}

impl Adapter {
    /// One DPC round; returns how much it did (MADs, CM events, completions, timers fired,
    /// core actions): 0 means there was nothing to do.
    pub(crate) fn round(&self, port: &dyn PortSide) -> usize {
        let mut done = done_list();
        let mut n;
        {
            let mut s = self.lock();
            n = self.verbs_done(&mut s);
            n += self.pump_cm(&mut s);
            n += self.pump_cq(&mut s);
            let now = self.now();
            if s.ch.channel.poll_timeout().is_some_and(|t| t <= now) {
                s.ch.channel.handle_timeout(now);
                n += 1;
            }
            n += self.run_actions(&mut s, port, &mut done);
        }
        complete_all(port, done);
        n
    }

    /// After a round that did nothing: arms the RC and GSI completion queues (their next
    /// completion fires a CQ notification, whose handler queues the DPC), runs one more
    /// round for what completed before the arm, and returns when the DPC must run anyway:
    /// at the core's or the CM's next timer, at most `max` from now. `None`: that round
    /// found work, run again at once.
    pub(crate) fn idle(
        &self,
        port: &dyn PortSide,
        max: core::time::Duration,
    ) -> Option<core::time::Duration> {
        {
            let mut s = self.lock();
            let _ = self.ca.req_notify_cq(s.post.cq, ArmMode::NextCompletion);
            s.link.cm.arm();
        }
        if self.round(port) > 0 {
            return None;
        }
        let s = self.lock();
        let now = self.now();
        let until = |t: Option<ib_verbs::time::Time>| {
            t.map(|t| core::time::Duration::from_nanos(t.0.saturating_sub(now.0)))
        };
        let wait = [
            until(s.ch.channel.poll_timeout()),
            until(s.link.cm.poll_timeout()),
        ]
        .into_iter()
        .flatten()
        .fold(max, core::cmp::Ord::min);
        Some(wait)
    }

    /// The connection manager's round (MADs both ways and its timers, the IOC watch's
    /// sweeps among them), its events to the core; returns what it did and the events.
    fn pump_cm(&self, s: &mut Inner) -> usize {
        let now = self.now();
        let mut n = s.link.cm.poll(now);
        if let Some(w) = &mut s.link.watch {
            n += w.collect(&mut *s.link.cm);
        }
        let events: Vec<ConnEvent> = core::iter::from_fn(|| s.link.cm.poll_event()).collect();
        n += events.len();
        for ev in events {
            tracing::debug!(?ev, "cm event");
            self.cm_event(s, ev);
        }
        n
    }

    fn cm_event(&self, s: &mut Inner, ev: ConnEvent) {
        let ours = |c| s.link.conn == Some(c);
        let now = self.now();
        match ev {
            ConnEvent::Response { conn, private_data } if ours(conn) => {
                // The login response goes to the core once the QP is connected.
                let connecting = self.accept_rep(s, conn, private_data);
                if !connecting {
                    s.ch.channel.handle_disconnect(now);
                }
            }
            ConnEvent::Rejected {
                conn,
                reason,
                private_data,
            } if ours(conn) => {
                s.link.conn = None;
                // Only a consumer-defined REJ carries an SRP_LOGIN_REJ (as ib_srp's
                // srp_cm_rej_handler); any other (an unknown service ID, no QP, a timeout)
                // is a connection-layer failure, whose zero-filled private data is no IU.
                if reason == CmRejReason::ConsumerDefined {
                    s.ch.channel.handle_login_rej(now, &private_data);
                } else {
                    self.status().note_cm_reject(reason);
                    s.ch.channel.handle_disconnect(now);
                }
            }
            ConnEvent::TimedOut { conn }
            | ConnEvent::DisconnectRequested { conn }
            | ConnEvent::Disconnected { conn }
                if ours(conn) =>
            {
                if matches!(ev, ConnEvent::TimedOut { .. }) {
                    self.status().note_cm_timeout();
                }
                if matches!(ev, ConnEvent::DisconnectRequested { .. }) {
                    let _ = s.link.cm.disconnect(conn);
                }
                s.link.conn = None;
                s.ch.channel.handle_disconnect(now);
            }
            _ => {}
        }
    }

    /// Completions: receives to the core, SENDs to the core, registration requests to the
    /// pool; a failed completion on the live QP is a channel loss. Returns how many.
    fn pump_cq(&self, s: &mut Inner) -> usize {
        let cq = s.post.cq;
        // The adapter's completion array, reused round after round.
        let mut wcs: Vec<Wc> = core::mem::take(&mut s.post.wcs);
        wcs.clear();
        let _ = self.ca.poll_cq(cq, 256, &mut wcs);
        let polled = wcs.len();
        let live = s.link.qp.map(|(_, qpn)| qpn);
        for wc in wcs.drain(..) {
            let current = Some(wc.qpn) == live;
            if self
                .reg()
                .handle_send_done(wc.wr_id, wc.status)
                .unwrap_or(true)
            {
                s.post.inflight_inv.remove(&wc.wr_id);
                if current && !matches!(wc.status, WcStatus::Success | WcStatus::WrFlushErr) {
                    // A bind, REG_MR or LOCAL_INV the device refused: the QP is in error
                    // now (its command fails with the channel).
                    tracing::warn!(
                        ?wc,
                        "a registration work request failed: the channel is lost"
                    );
                    s.link.qp_failed = true;
                }
            } else if !current {
                // A flushed request of a QP already destroyed: forgotten with it.
            } else if wc.status != WcStatus::Success {
                tracing::warn!(?wc, "failed completion: the channel is lost");
                s.link.qp_failed = true;
            } else if wc.opcode == WcOpcode::Recv && wc.wr_id & RECV_WR != 0 {
                let i = (wc.wr_id & 0xffff_ffff) as usize;
                // Copied out of the receive slot through the stack (a slot's size).
                let mut iu = [0u8; SLOT as usize];
                let iu = &mut iu[..(wc.byte_len as usize).min(SLOT as usize)];
                let at = Self::recv_offset(i) as usize;
                if self.ctrl.read(at, iu).is_ok() {
                    let now = self.now();
                    s.ch.channel.handle_recv(now, iu, wc.invalidated);
                }
                if !self.post_recv(s, i) {
                    s.link.qp_failed = true;
                }
            } else if wc.wr_id & SEND_WR != 0 {
                s.post.send_free.push((wc.wr_id & 0xffff_ffff) as usize);
                let now = self.now();
                if s.ch.channel.handle_send_done(now).is_err() {
                    s.link.qp_failed = true;
                }
            }
        }
        s.post.wcs = wcs;
        polled
    }

    /// Drains the core: actions, then events. Reports a QP failure noticed on the way.
    pub(crate) fn run_actions(&self, s: &mut Inner, port: &dyn PortSide, done: &mut Done) -> usize {
        let mut n = 0;
        loop {
            if s.link.qp_failed {
                s.link.qp_failed = false;
                let now = self.now();
                s.ch.channel.handle_disconnect(now);
            }
            let Some(a) = s.ch.channel.poll_action() else {
                break;
            };
            n += 1;
            match a {
                Action::Connect { private_data, .. } => self.start_connect(s, private_data),
                Action::Send { iu, cmd } => {
                    self.post_iu(s, &iu, cmd);
                    s.ch.channel.recycle_iu(iu);
                }
                Action::Remap(id) => self.remap(s, id),
                Action::Disconnect => self.teardown(s),
                Action::Complete(c) => self.finish(s, c, done),
                Action::TmfDone(c) => self.tmf_done(s, port, c, done),
            }
        }
        while let Some(ev) = s.ch.channel.poll_event() {
            n += 1;
            tracing::debug!(?ev, "srp channel event");
            self.status().record(&ev);
            if let Event::LoggedIn(neg) = ev {
                let retries = {
                    let mut reg = self.reg();
                    reg.set_immediate_limit(&neg);
                    reg.take_retries()
                };
                self.post_reg(s, retries);
                if self.resume_sequence(s, port, done) {
                    // A bus or device reset goes on on the new channel, paused until done.
                    n += self.run_actions(s, port, done);
                } else if s.ch.paused {
                    s.ch.paused = false;
                    port.release();
                }
            }
        }
        n
    }

    /// `Action::Remap`: a held command is re-sent on a new QP; its REG_MRs may not have run
    /// on the old one. Map its buffer anew (new regions, new keys), discard the old
    /// mapping, and hand the core the new descriptors; the new REG_MRs wait for its SEND.
    fn remap(&self, s: &mut Inner, id: srp::initiator::CmdId) {
        use srp::initiator::Remapped;
        let now = self.now();
        let Some(a) = s.ch.cmds.get_mut(id) else {
            s.ch.channel.handle_remapped(now, id, Remapped::Failed);
            return;
        };
        if a.handle.keys().is_empty() {
            // No per-command regions (the all-memory region of TrustTarget): the region
            // belongs to the PD, not the lost QP, so the descriptors stay valid.
            s.ch.channel.handle_remapped(now, id, Remapped::Unchanged);
            return;
        }
        let mapped = self.map_srb(&a.srb, a.dir);
        let Ok(m) = mapped else {
            // finish() discards the old mapping when the core reports the reset.
            s.ch.channel.handle_remapped(now, id, Remapped::Failed);
            return;
        };
        let old = core::mem::replace(&mut a.handle, m.handle);
        s.post.pending_reg.remove(id);
        self.discard(old);
        if !m.pre_wrs.is_empty() {
            s.post.pending_reg.insert(id, m.pre_wrs);
        }
        self.remapped
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let answer = Remapped::New {
            data: m.data,
            imm_data: m.imm_data,
            remote_invalidate: m.remote_invalidate,
        };
        s.ch.channel.handle_remapped(now, id, answer);
    }

    /// A command ended: unmap (LOCAL_INV unless the target invalidated) after a response,
    /// discard its regions otherwise (their REG_MRs may not have run), set the SRB's
    /// status. A read's data is already in the SRB's pages: the HCA wrote it there.
    fn finish(&self, s: &mut Inner, c: Completion, done: &mut Done) {
        let Some(a) = s.ch.cmds.remove(c.id) else {
            return; // Its SRB was already completed by a bus reset.
        };
        let invalidated = match &c.outcome {
            srp::initiator::Outcome::Done(r) => {
                Adapter::note_lun(s, &a.srb, r);
                r.invalidated
            }
            _ => None,
        };
        let never_posted = s.post.pending_reg.remove(c.id).is_some();
        if matches!(c.outcome, srp::initiator::Outcome::Done(_)) && !never_posted {
            // The target answered: its REG_MRs ran on the live QP.
            let invs = self.reg().unmap(a.handle, invalidated).unwrap_or_default();
            self.post_reg(s, invs);
        } else {
            self.discard(a.handle);
        }
        let aborted_by_request = c.outcome == srp::initiator::Outcome::Aborted
            && s.ch.mgmt.values().any(|m| m.abort_of == Some(c.id));
        if aborted_by_request {
            // ABORT_COMMAND worked: the SRB it named completes ABORTED (a timeout's abort
            // stays TIMEOUT).
            a.srb.set_status(SrbStatus::ABORTED);
        } else {
            outcome::apply(&a.srb, &c.outcome);
        }
        done.push(a.srb);
    }

    /// A management SRB's TMF ended: ABORT_COMMAND is SUCCESS on FUNCTION COMPLETE and
    /// ABORT_FAILED otherwise (the command had completed, the target refused, no answer);
    /// RESET_LOGICAL_UNIT is SUCCESS or ERROR. A LUN reset of a bus or device reset goes
    /// on with its sequence ([`super::reset`]).
    fn tmf_done(
        &self,
        s: &mut Inner,
        port: &dyn PortSide,
        c: srp::initiator::TmfCompletion,
        done: &mut Done,
    ) {
        use srp::initiator::TmfResult;
        if s.ch.target_reset.as_ref().is_some_and(|r| r.owns(c.id)) {
            return self.lun_reset_done(s, port, c.result, done);
        }
        let Some(m) = s.ch.mgmt.remove(&c.id) else {
            return; // Already completed by a bus reset.
        };
        let status = match (c.result, m.abort_of) {
            (TmfResult::Complete, _) => SrbStatus::SUCCESS,
            (_, Some(_)) => SrbStatus::ABORT_FAILED,
            (_, None) => SrbStatus::ERROR,
        };
        tracing::debug!(?c, ?status, "management SRB done");
        m.srb.set_status(status);
        done.push(m.srb);
    }
}

/// RequestComplete for each (outside the adapter lock).
pub(crate) fn complete_all(port: &dyn PortSide, mut done: Done) {
    for srb in done.drain(..) {
        port.complete(&srb);
    }
    #[cfg(feature = "std")]
    DONE_SPARE.with_borrow_mut(|spare| {
        if spare.capacity() < done.capacity() {
            *spare = done;
        }
    });
    #[cfg(not(feature = "std"))]
    DONE_SPARE.give(done);
}
