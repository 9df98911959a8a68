//! Login, loss and reconnect: the SRP transport class behaviour around one channel.
//!
//! On a loss the outstanding commands are taken back (those that timed out fail, the rest
//! are held), the port goes BLOCKED, fast_io_fail and dev_loss start (fast_io_fail from the
//! first loss while held commands re-sent after a re-login have had no SRP_RSP, so a target
//! that accepts every login but never answers properly cannot hold them), and a reconnect is
//! scheduled after reconnect_delay (at once after an escalation's channel reset, as a SCSI
//! host reset). A failed attempt schedules the next with [`reconnect_backoff`]; attempts go on
//! until dev_loss, however many fail. A re-login resends the held commands; those with data
//! descriptors are first handed to the driver with [`Action::Remap`], since the registration
//! work requests chained before their first SEND may never have run on the lost queue pair,
//! and are re-sent once [`InitiatorChannel::handle_remapped`] brings their new descriptors.

use super::InitiatorError;
use super::alloc::vec::Vec;
use super::channel::{Action, Entry, Event, InitiatorChannel, Link, LossCause, Session};
use super::command::{CmdId, DataDescriptors, Outcome, Remapped};
use super::login::{Negotiated, RejectAdvice};
use super::pool::SendPool;
use super::timers::{PortEvent, PortState, TimerKind, reconnect_backoff};
use crate::channel::InitiatorCredits;
use crate::wire::Tag;
use crate::wire::login::{LoginRej, LoginRsp};
use ib_verbs::time::Time;
use wirekit::WireRepr;

impl InitiatorChannel {
    /// Starts a login: the first one (port NEW), or a manual reconnect of a blocked port
    /// (needed when reconnect_delay is off). Ignored while a login is out, when logged in,
    /// or when the port is LOST.
    pub fn connect(&mut self, now: Time) {
        if matches!(self.link, Link::Down) && self.state != PortState::Lost {
            self.start_login(now);
        }
    }

    fn start_login(&mut self, now: Time) {
        self.logins += 1;
        let tag = Tag(self.logins);
        self.timers.stop(TimerKind::Reconnect);
        self.timers
            .set(TimerKind::Login, now + self.cfg.login_timeout);
        self.link = Link::LoggingIn(tag);
        self.actions.push_back(Action::Connect {
            form: self.login.form,
            private_data: self.login.private_data(tag),
        });
    }

    /// The CM REP arrived with this SRP_LOGIN_RSP private data.
    pub fn handle_login_rsp(&mut self, now: Time, bytes: &[u8]) {
        let Link::LoggingIn(sent) = self.link else {
            return;
        };
        let neg = LoginRsp::parse(bytes)
            .map_err(InitiatorError::MalformedLogin)
            .and_then(|rsp| Negotiated::from_rsp(&self.login, sent, &rsp));
        match neg {
            Ok(neg) => self.logged_in(now, neg),
            Err(e) => {
                // The CM connection exists; tear it down before trying again.
                self.actions.push_back(Action::Disconnect);
                self.login_failed(now, e, None);
            }
        }
    }

    /// The CM REJ arrived with this SRP_LOGIN_REJ private data.
    pub fn handle_login_rej(&mut self, now: Time, bytes: &[u8]) {
        if !matches!(self.link, Link::LoggingIn(_)) {
            return;
        }
        match LoginRej::parse(bytes) {
            Ok(rej) => {
                let advice = RejectAdvice::for_reject(&self.login, &rej);
                if let RejectAdvice::RetryWithFormats(f) = advice {
                    self.login.buf_fmts = f;
                }
                let e = InitiatorError::LoginRejected {
                    reason: rej.reason,
                    retryable: advice.retryable(),
                };
                self.login_failed(now, e, Some(advice));
            }
            Err(e) => self.login_failed(now, InitiatorError::MalformedLogin(e), None),
        }
    }

    /// The channel failed below SRP: QP error, DREQ, CM timeout or a REJ without SRP data.
    pub fn handle_disconnect(&mut self, now: Time) {
        match self.link {
            Link::Down => {}
            Link::LoggingIn(_) => self.login_failed(now, InitiatorError::ConnectFailed, None),
            Link::Up(_) => self.lose_channel(now, LossCause::Disconnected),
            // The target closed the channel after our SRP_I_LOGOUT.
            Link::LoggingOut => self.end_logout(),
        }
    }

    /// Logs out for good (an operator's logout, the adapter stopping): SRP_I_LOGOUT on a live
    /// channel (no response, no credit: SRP r16a 6.5), every command ended with
    /// [`Outcome::NoConnect`] and every caller TMF with `NotSent`, timers stopped, and the
    /// port LOST, so nothing reconnects (a new login needs a new channel). After an
    /// I_LOGOUT the channel waits up to `linger` for the target to disconnect (it closes a
    /// channel it was asked to log out) before asking for [`Action::Disconnect`] itself;
    /// without a live channel, Disconnect comes at once.
    pub fn logout(&mut self, now: Time, linger: core::time::Duration) {
        use super::pool::SendKind;
        use crate::wire::logout::ILogout;
        let up = matches!(self.link, Link::Up(_));
        let mut sent = false;
        if up && self.spend(SendKind::Response) {
            let iu = ILogout { tag: Tag(0) };
            let mut bytes = super::alloc::vec![0; iu.buffer_len()];
            if iu.emit(&mut bytes).is_ok() {
                self.actions.push_back(Action::Send {
                    iu: bytes,
                    cmd: None,
                });
                sent = true;
            }
        }
        for tag in self.tags.tags() {
            match self.tags.remove(tag) {
                Some(Entry::Cmd(o)) => self.complete(o.id, Outcome::NoConnect),
                Some(Entry::Tmf(t)) => {
                    if let Some(id) = t.caller {
                        self.tmf_done(id, super::TmfResult::NotSent);
                    }
                }
                None => {}
            }
        }
        self.fail_held(Outcome::NoConnect);
        self.deadlines.clear();
        self.retired.clear();
        self.responses.clear();
        self.timers = Default::default();
        self.unhealthy_since = None;
        match self.link {
            Link::Up(_) if sent => {
                self.link = Link::LoggingOut;
                self.timers.set(TimerKind::Logout, now + linger);
            }
            Link::Up(_) | Link::LoggingIn(_) => self.end_logout(),
            Link::LoggingOut | Link::Down => {}
        }
        self.move_state(PortEvent::LoggedOut);
    }

    fn end_logout(&mut self) {
        self.timers.stop(TimerKind::Logout);
        self.link = Link::Down;
        self.actions.push_back(Action::Disconnect);
    }

    fn logged_in(&mut self, now: Time, neg: Negotiated) {
        self.timers.stop(TimerKind::Login);
        self.timers.stop(TimerKind::Reconnect);
        self.timers.stop(TimerKind::FastIoFail);
        self.timers.stop(TimerKind::DevLoss);
        self.failed_reconnects = 0;
        self.retired.clear();
        self.responses.clear();
        self.tags.set_capacity(neg.window as usize + 2);
        self.link = Link::Up(Session {
            neg,
            credits: InitiatorCredits::new(neg.window),
            pool: SendPool::new(neg.window),
        });
        self.events.push_back(Event::LoggedIn(neg));
        self.move_state(PortEvent::LoggedIn);
        let held = self.waiting.len();
        if held == 0 {
            // Nothing to re-send: nothing for this channel to prove before the next loss.
            self.unhealthy_since = None;
        }
        self.ask_remaps();
        self.drain(now);
        if held > 0 {
            self.events.push_back(Event::HeldIoResent {
                count: held - self.waiting.len(),
            });
        }
    }

    /// Moves every held command with data descriptors to `remapping`, asking the driver to
    /// register its buffer again.
    fn ask_remaps(&mut self) {
        let mut keep = super::alloc::collections::VecDeque::new();
        while let Some((id, cmd)) = self.waiting.pop_front() {
            if cmd.data == DataDescriptors::None {
                keep.push_back((id, cmd));
            } else {
                self.actions.push_back(Action::Remap(id));
                self.remapping.insert(id, cmd);
            }
        }
        self.waiting = keep;
    }

    /// The driver's answer to [`Action::Remap`] for `id`: the command goes back to the queue
    /// (in submission order among the held) with its new descriptors, and is sent when a
    /// credit allows; [`Remapped::Failed`] completes it with [`Outcome::Reset`]. False if
    /// the core no longer holds `id` (it ended meanwhile, e.g. at fast_io_fail): the driver
    /// then releases what it mapped.
    pub fn handle_remapped(&mut self, now: Time, id: CmdId, answer: Remapped) -> bool {
        let Some(mut cmd) = self.remapping.remove(&id) else {
            return false;
        };
        match answer {
            Remapped::Failed => {
                self.complete(id, Outcome::Reset);
                return true;
            }
            Remapped::Unchanged => {}
            Remapped::New {
                data,
                imm_data,
                remote_invalidate,
            } => {
                cmd.data = data;
                cmd.imm_data = imm_data;
                cmd.remote_invalidate = remote_invalidate;
            }
        }
        let at = self
            .waiting
            .iter()
            .position(|(w, _)| *w > id)
            .unwrap_or(self.waiting.len());
        self.waiting.insert(at, (id, cmd));
        self.drain(now);
        true
    }

    fn login_failed(&mut self, now: Time, error: InitiatorError, advice: Option<RejectAdvice>) {
        self.timers.stop(TimerKind::Login);
        self.link = Link::Down;
        self.events.push_back(Event::LoginFailed { error, advice });
        self.move_state(PortEvent::TransportLost);
        if matches!(self.state, PortState::Blocked | PortState::FailFast) {
            self.failed_reconnects = self.failed_reconnects.saturating_add(1);
            self.schedule_reconnect(now, false);
        }
    }

    fn schedule_reconnect(&mut self, now: Time, at_once: bool) {
        let Some(delay) = self.cfg.timers.reconnect_delay() else {
            return;
        };
        let at = if at_once {
            now
        } else {
            now + reconnect_backoff(delay, self.failed_reconnects)
        };
        self.timers.set(TimerKind::Reconnect, at);
        self.events.push_back(Event::ReconnectScheduled {
            at,
            failed_reconnects: self.failed_reconnects,
        });
    }

    /// Drops the live channel: timed-out commands fail, the others are held for re-sending.
    pub(super) fn lose_channel(&mut self, now: Time, cause: LossCause) {
        if !matches!(self.link, Link::Up(_)) {
            return;
        }
        self.link = Link::Down;
        self.actions.push_back(Action::Disconnect);
        let escalation = cause == LossCause::Escalation;
        self.events.push_back(Event::ChannelLost(cause));
        self.deadlines.clear();
        self.retired.clear();
        self.responses.clear();
        let mut held = Vec::new();
        for tag in self.tags.tags() {
            match self.tags.remove(tag) {
                Some(Entry::Cmd(o)) if o.timed_out => self.complete(o.id, Outcome::TimedOut),
                Some(Entry::Cmd(o)) => held.push((o.id, o.cmd)),
                Some(Entry::Tmf(t)) => {
                    if let Some(id) = t.caller {
                        self.tmf_done(id, super::TmfResult::NotSent);
                    }
                }
                None => {}
            }
        }
        // Outstanding commands go back ahead of those that never left, oldest first.
        held.sort_by_key(|(id, _)| *id);
        for c in held.into_iter().rev() {
            self.waiting.push_front(c);
        }
        self.move_state(PortEvent::TransportLost);
        // From the first loss since the last SRP_RSP: a re-login alone does not restart it.
        let since = *self.unhealthy_since.get_or_insert(now);
        if let Some(d) = self.cfg.timers.fast_io_fail() {
            self.timers.set(TimerKind::FastIoFail, since + d);
        }
        if let Some(d) = self.cfg.timers.dev_loss() {
            self.timers.set(TimerKind::DevLoss, now + d);
        }
        self.schedule_reconnect(now, escalation);
    }

    /// Fails every held command (and every one being registered again) with `outcome`.
    fn fail_held(&mut self, outcome: Outcome) {
        let mut ids: Vec<CmdId> = self.waiting.drain(..).map(|(id, _)| id).collect();
        ids.extend(core::mem::take(&mut self.remapping).into_keys());
        ids.sort();
        for id in ids {
            self.complete(id, outcome.clone());
        }
    }

    /// Runs whatever is due at `now`: channel timers, then command and TMF deadlines.
    pub fn handle_timeout(&mut self, now: Time) {
        let due: Vec<TimerKind> = self.timers.expire(now).collect();
        for kind in due {
            match kind {
                TimerKind::Logout => {
                    if matches!(self.link, Link::LoggingOut) {
                        self.end_logout();
                    }
                }
                TimerKind::Login => {
                    if matches!(self.link, Link::LoggingIn(_)) {
                        self.actions.push_back(Action::Disconnect);
                        self.login_failed(now, InitiatorError::ConnectFailed, None);
                    }
                }
                TimerKind::Reconnect => {
                    if matches!(self.link, Link::Down)
                        && matches!(self.state, PortState::Blocked | PortState::FailFast)
                    {
                        self.start_login(now);
                    }
                }
                TimerKind::FastIoFail => {
                    if self.state == PortState::Blocked {
                        self.move_state(PortEvent::FastIoFailExpired);
                        self.fail_held(Outcome::TransportFailFast);
                    }
                }
                TimerKind::DevLoss => {
                    if matches!(self.state, PortState::Blocked | PortState::FailFast) {
                        self.move_state(PortEvent::DevLossExpired);
                        self.fail_held(Outcome::NoConnect);
                        self.timers = Default::default();
                        if matches!(self.link, Link::LoggingIn(_)) {
                            self.actions.push_back(Action::Disconnect);
                        }
                        self.link = Link::Down;
                    }
                }
            }
        }
        self.expire_deadlines(now);
    }

    /// Multipath's `terminate_rport_io`: while the port is blocked, end the hold now as if
    /// fast_io_fail expired — held commands complete with
    /// [`Outcome::TransportFailFast`] and are never resent on this channel (another path
    /// carries them); reconnects go on, dev_loss still runs. Anything else: nothing.
    pub fn fail_fast_now(&mut self, now: Time) {
        let _ = now;
        if self.state == PortState::Blocked {
            self.timers.stop(TimerKind::FastIoFail);
            self.move_state(PortEvent::FastIoFailExpired);
            self.fail_held(Outcome::TransportFailFast);
        }
    }
}
