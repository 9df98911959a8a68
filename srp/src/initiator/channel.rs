//! The initiator channel state machine: one RDMA channel to one target port, its commands,
//! and the port state around it. Received IUs are in `receive`, loss and reconnect in
//! `recovery`; this file holds the state, submission, and the output queues.

use super::InitiatorError;
use super::alloc::boxed::Box;
use super::alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use super::alloc::vec;
use super::alloc::vec::Vec;
use super::command::{CmdId, Command, Completion, Outcome, Refused};
use super::escalation::{EscalationStep, Stage};
use super::login::{LoginForm, LoginParams, Negotiated, RejectAdvice};
use super::pool::{SendKind, SendPool};
use super::tags::TagSlab;
use super::task_mgmt::{TmfCompletion, TmfId};
use super::timers::{PortState, TimerTable, TransportTimers};
use crate::channel::{InitiatorCredits, Spend};
use crate::wire::Tag;
use crate::wire::logout::TLogoutReason;
use crate::wire::tsk_mgmt::TaskMgmtFunction;
use core::time::Duration;
use ib_verbs::time::Time;
use scsi::Lun;

/// Everything configurable about a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitiatorConfig {
    /// What to ask for at login.
    pub login: LoginParams,
    /// reconnect_delay, fast_io_fail_tmo, dev_loss_tmo.
    pub timers: TransportTimers,
    /// Default per-command timeout (the SCSI disk default, 30 s).
    pub cmd_timeout: Duration,
    /// How long a TMF may take (ib_srp `SRP_ABORT_TIMEOUT_MS`, 5 s).
    pub tmf_timeout: Duration,
    /// How long a login attempt may take before it counts as failed.
    pub login_timeout: Duration,
    /// New commands that may wait for a credit before submissions are refused as busy.
    pub max_queued: usize,
}

impl InitiatorConfig {
    /// Linux defaults around `login`.
    pub fn new(login: LoginParams) -> InitiatorConfig {
        InitiatorConfig {
            login,
            timers: TransportTimers::default(),
            cmd_timeout: Duration::from_secs(30),
            tmf_timeout: Duration::from_secs(5),
            login_timeout: Duration::from_secs(20),
            max_queued: 64,
        }
    }
}

/// What the driver must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open the channel: send a CM REQ carrying `private_data` (for [`LoginForm::RdmaCm`],
    /// behind the cma header), then pass the REP or REJ private data to
    /// [`InitiatorChannel::handle_login_rsp`] / [`InitiatorChannel::handle_login_rej`].
    Connect {
        /// Which CM.
        form: LoginForm,
        /// The SRP_LOGIN_REQ bytes.
        private_data: Vec<u8>,
    },
    /// Post a SEND of this IU; report its completion with
    /// [`InitiatorChannel::handle_send_done`].
    Send {
        /// The IU bytes.
        iu: Vec<u8>,
        /// The command an SRP_CMD carries (post its registration work requests in front);
        /// `None` for task management and responses to target requests.
        cmd: Option<CmdId>,
    },
    /// Register this held command's buffer again before it is re-sent after a re-login:
    /// its earlier registration work requests may never have run on the lost queue pair.
    /// Release the old registration, map the buffer anew, and answer with
    /// [`InitiatorChannel::handle_remapped`]; the core then sends an SRP_CMD carrying the new
    /// descriptors (as [`Action::Send`] with `cmd` set).
    Remap(CmdId),
    /// Tear the channel down (DREQ / rdma_disconnect, destroy the QP).
    Disconnect,
    /// A command ended.
    Complete(Completion),
    /// A task management request the caller asked for ended
    /// ([`InitiatorChannel::abort_task`], [`InitiatorChannel::reset_lun`]).
    TmfDone(TmfCompletion),
}

/// Why the channel was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LossCause {
    /// The driver reported a QP error, a DREQ or a CM failure.
    Disconnected,
    /// The target sent SRP_T_LOGOUT.
    TargetLogout(TLogoutReason),
    /// The target broke the protocol (malformed IU, unknown tag).
    Protocol(InitiatorError),
    /// Escalation reached the channel reset step.
    Escalation,
}

/// What happened, for logs and displays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The port changed state.
    StateChanged {
        /// Before.
        from: PortState,
        /// After.
        to: PortState,
    },
    /// A login succeeded.
    LoggedIn(Negotiated),
    /// A login attempt failed; `advice` is set for an SRP_LOGIN_REJ.
    LoginFailed {
        /// Why.
        error: InitiatorError,
        /// What the reject reason suggests.
        advice: Option<RejectAdvice>,
    },
    /// The channel went down.
    ChannelLost(LossCause),
    /// The next reconnect attempt is scheduled.
    ReconnectScheduled {
        /// When.
        at: Time,
        /// Consecutive failed attempts so far.
        failed_reconnects: u32,
    },
    /// A command moved up the error-handling ladder.
    Escalated {
        /// The command.
        id: CmdId,
        /// The step taken.
        step: EscalationStep,
    },
    /// Commands held across an outage were sent again after a re-login.
    HeldIoResent {
        /// How many.
        count: usize,
    },
    /// The target granted credits with SRP_CRED_REQ (answered with SRP_CRED_RSP).
    CreditRequest {
        /// REQUEST LIMIT DELTA.
        delta: u32,
    },
    /// The target reported an asynchronous event (answered with SRP_AER_RSP).
    AsyncEvent {
        /// The LUN it concerns.
        lun: Lun,
        /// Its sense data.
        sense: Vec<u8>,
    },
    /// A late SRP_RSP for a command already ended by a TMF was dropped (credits kept).
    LateResponse(Tag),
}

/// A command sent and not yet answered.
#[derive(Debug)]
pub(super) struct Outstanding {
    pub(super) id: CmdId,
    pub(super) cmd: Command,
    pub(super) deadline: Option<Time>,
    pub(super) stage: Stage,
    /// Its own timeout expired (it fails rather than being re-sent on a channel reset).
    pub(super) timed_out: bool,
}

/// A task management request sent and not yet answered.
#[derive(Debug)]
pub(super) struct TmfEntry {
    pub(super) function: TaskMgmtFunction,
    pub(super) lun: Lun,
    /// The command an ABORT TASK is for.
    pub(super) task: Option<Tag>,
    pub(super) deadline: Time,
    /// Asked for by the caller (not a step of the escalation ladder).
    pub(super) caller: Option<TmfId>,
}

/// What a tag names.
#[derive(Debug)]
pub(super) enum Entry {
    Cmd(Outstanding),
    Tmf(TmfEntry),
}

/// The logged-in channel.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) neg: Negotiated,
    pub(super) credits: InitiatorCredits,
    pub(super) pool: SendPool,
}

/// The channel's connection.
#[derive(Debug)]
pub(super) enum Link {
    /// No channel.
    Down,
    /// A LOGIN_REQ with this tag is out.
    LoggingIn(Tag),
    /// Logged in.
    Up(Session),
    /// SRP_I_LOGOUT was sent; waiting (up to the Logout timer) for the target to disconnect.
    LoggingOut,
}

/// One SRP initiator channel; see the module docs for the driver's calling order.
#[derive(Debug)]
pub struct InitiatorChannel {
    pub(super) cfg: InitiatorConfig,
    /// The login parameters in use (formats may narrow after a reject).
    pub(super) login: LoginParams,
    pub(super) state: PortState,
    pub(super) link: Link,
    pub(super) tags: TagSlab<Entry>,
    pub(super) deadlines: BTreeSet<(Time, Tag)>,
    /// Commands waiting for a credit, and commands held while the port is blocked.
    pub(super) waiting: VecDeque<(CmdId, Command)>,
    /// Held commands asked for with [`Action::Remap`], until the driver answers.
    pub(super) remapping: BTreeMap<CmdId, Command>,
    /// CRED_RSP / AER_RSP waiting for a send slot.
    pub(super) responses: VecDeque<Vec<u8>>,
    /// Tags ended by a TMF whose late SRP_RSP is tolerated.
    pub(super) retired: VecDeque<Tag>,
    pub(super) timers: TimerTable,
    pub(super) failed_reconnects: u32,
    /// When the channel was first lost, while the held commands re-sent after a re-login
    /// have had no SRP_RSP yet: fast_io_fail counts from here, so a target that accepts
    /// every re-login but never answers them properly (a malformed SRP_RSP, a refused RDMA
    /// transfer) cannot hold them forever.
    pub(super) unhealthy_since: Option<Time>,
    pub(super) logins: u64,
    next_id: u64,
    pub(super) next_tmf: u64,
    pub(super) actions: VecDeque<Action>,
    pub(super) events: VecDeque<Event>,
    /// IU buffers the driver handed back ([`InitiatorChannel::recycle_iu`]), for the next
    /// SRP_CMDs: encoding a command allocates nothing in the steady state.
    pub(super) spare_ius: Vec<Vec<u8>>,
}

/// IU buffers kept for reuse: a window's worth.
const SPARE_IUS: usize = 256;

impl InitiatorChannel {
    /// Hands back an [`Action::Send`]'s IU once it is copied out, for a later SRP_CMD.
    pub fn recycle_iu(&mut self, iu: Vec<u8>) {
        if self.spare_ius.len() < SPARE_IUS && iu.capacity() > 0 {
            self.spare_ius.push(iu);
        }
    }

    /// A channel that has not logged in yet; call [`InitiatorChannel::connect`].
    pub fn new(cfg: InitiatorConfig) -> InitiatorChannel {
        InitiatorChannel {
            login: cfg.login,
            cfg,
            state: PortState::New,
            link: Link::Down,
            tags: TagSlab::new(0),
            deadlines: BTreeSet::new(),
            waiting: VecDeque::new(),
            remapping: BTreeMap::new(),
            responses: VecDeque::new(),
            retired: VecDeque::new(),
            timers: TimerTable::default(),
            failed_reconnects: 0,
            unhealthy_since: None,
            logins: 0,
            next_id: 0,
            next_tmf: 0,
            actions: VecDeque::new(),
            spare_ius: Vec::new(),
            events: VecDeque::new(),
        }
    }

    /// The port state.
    pub fn state(&self) -> PortState {
        self.state
    }

    /// What the current login negotiated, when logged in.
    pub fn negotiated(&self) -> Option<Negotiated> {
        match &self.link {
            Link::Up(s) => Some(s.neg),
            _ => None,
        }
    }

    /// The request limit, when logged in.
    pub fn req_lim(&self) -> Option<u32> {
        match &self.link {
            Link::Up(s) => Some(s.credits.req_lim()),
            _ => None,
        }
    }

    /// Commands and TMFs sent and not answered.
    pub fn outstanding(&self) -> usize {
        self.tags.len()
    }

    /// Commands waiting for a credit, held during an outage, or being registered again.
    pub fn queued(&self) -> usize {
        self.waiting.len() + self.remapping.len()
    }

    /// Consecutive failed reconnect attempts.
    pub fn failed_reconnects(&self) -> u32 {
        self.failed_reconnects
    }

    /// The next action for the driver.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next event to report.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`InitiatorChannel::handle_timeout`] is due next.
    pub fn poll_timeout(&self) -> Option<Time> {
        let cmd = self.deadlines.first().map(|(t, _)| *t);
        match (self.timers.next(), cmd) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Submits a SCSI command. It is sent at once when a credit, a send slot and a tag are
    /// free, waits otherwise (and while the port is blocked), and completes at once with
    /// [`Outcome::TransportFailFast`] or [`Outcome::NoConnect`] in FAIL_FAST or LOST.
    /// Refused, and handed back, before the first login, when the wait queue is full, or
    /// when it cannot be encoded for the negotiated IU size.
    pub fn submit(&mut self, now: Time, cmd: Command) -> Result<CmdId, Refused> {
        let refuse = |reason, command| {
            Err(Refused {
                reason,
                command: Box::new(command),
            })
        };
        let fail_now = match self.state {
            PortState::New => return refuse(InitiatorError::WrongState(PortState::New), cmd),
            PortState::Running | PortState::Blocked => None,
            PortState::FailFast => Some(Outcome::TransportFailFast),
            PortState::Lost => Some(Outcome::NoConnect),
        };
        if let Link::Up(s) = &self.link {
            let mut scratch = self.spare_ius.pop().unwrap_or_default();
            let encodable = cmd.encode_into(Tag(0), &s.neg, &mut scratch);
            self.spare_ius.push(scratch);
            if let Err(e) = encodable {
                return refuse(e, cmd);
            }
        }
        let id = CmdId(self.next_id);
        if let Some(outcome) = fail_now {
            self.next_id += 1;
            self.complete(id, outcome);
            return Ok(id);
        }
        if !self.waiting.is_empty() || !self.can_issue(SendKind::Command) {
            if self.waiting.len() >= self.cfg.max_queued {
                let queued = self.waiting.len();
                return refuse(InitiatorError::Busy { queued }, cmd);
            }
            self.next_id += 1;
            self.waiting.push_back((id, cmd));
            return Ok(id);
        }
        self.next_id += 1;
        self.issue(now, id, cmd);
        Ok(id)
    }

    /// Whether a send of `kind` has a credit, a send slot and a tag (commands leave one of
    /// each for task management).
    pub(super) fn can_issue(&self, kind: SendKind) -> bool {
        let Link::Up(s) = &self.link else {
            return false;
        };
        let (credits, tags) = match kind {
            SendKind::Command => (
                s.credits.req_lim() > 1,
                self.tags.len() < s.neg.window as usize,
            ),
            SendKind::TaskManagement => (s.credits.req_lim() > 0, self.tags.has_room()),
            SendKind::Response => (true, true),
        };
        credits && tags && s.pool.can_take(kind)
    }

    /// Spends a credit and a send slot for `kind` (after [`Self::can_issue`]).
    pub(super) fn spend(&mut self, kind: SendKind) -> bool {
        let Link::Up(s) = &mut self.link else {
            return false;
        };
        let spend = match kind {
            SendKind::Command => Spend::Command,
            SendKind::TaskManagement => Spend::TaskManagement,
            SendKind::Response => Spend::Response,
        };
        s.pool.can_take(kind) && s.credits.try_spend(spend) && s.pool.take(kind)
    }

    /// Sends a command that [`Self::can_issue`] allowed.
    pub(super) fn issue(&mut self, now: Time, id: CmdId, cmd: Command) {
        let Link::Up(s) = &self.link else {
            self.waiting.push_front((id, cmd));
            return;
        };
        let neg = s.neg;
        let deadline = now + cmd.timeout.unwrap_or(self.cfg.cmd_timeout);
        let entry = Entry::Cmd(Outstanding {
            id,
            cmd,
            deadline: Some(deadline),
            stage: Stage::Running,
            timed_out: false,
        });
        let tag = match self.tags.insert(entry) {
            Ok(tag) => tag,
            Err(Entry::Cmd(o)) => {
                self.waiting.push_front((o.id, o.cmd));
                return;
            }
            Err(Entry::Tmf(_)) => return,
        };
        let mut bytes = self.spare_ius.pop().unwrap_or_default();
        let encoded = match self.tags.get(tag) {
            Some(Entry::Cmd(o)) => o.cmd.encode_into(tag, &neg, &mut bytes).map(|()| bytes),
            _ => Err(InitiatorError::SendAccounting),
        };
        match encoded {
            Ok(bytes) if self.spend(SendKind::Command) => {
                self.deadlines.insert((deadline, tag));
                self.actions.push_back(Action::Send {
                    iu: bytes,
                    cmd: Some(id),
                });
            }
            Ok(_) => {
                // No credit after all: back to the head of the queue.
                if let Some(Entry::Cmd(o)) = self.tags.remove(tag) {
                    self.waiting.push_front((o.id, o.cmd));
                }
            }
            Err(_) => {
                // Encodable at submission, not under a later login's smaller IU size: the
                // SCSI layer may retry it.
                if let Some(Entry::Cmd(o)) = self.tags.remove(tag) {
                    self.complete(o.id, Outcome::Reset);
                }
            }
        }
    }

    /// Sends a TMF; `None` when no credit, slot or tag is left for it.
    pub(super) fn send_tmf(
        &mut self,
        now: Time,
        function: TaskMgmtFunction,
        lun: Lun,
        task: Option<Tag>,
        caller: Option<TmfId>,
    ) -> Option<Tag> {
        use crate::wire::SolicitFlags;
        use crate::wire::tsk_mgmt::TskMgmt;
        use wirekit::WireRepr;
        if !self.can_issue(SendKind::TaskManagement) {
            return None;
        }
        let deadline = now + self.cfg.tmf_timeout;
        let tag = self
            .tags
            .insert(Entry::Tmf(TmfEntry {
                function,
                lun,
                task,
                deadline,
                caller,
            }))
            .ok()?;
        let iu = TskMgmt {
            flags: SolicitFlags::empty(),
            tag,
            lun,
            function,
            task_tag: task.unwrap_or_default(),
        };
        let mut bytes = vec![0; iu.buffer_len()];
        if iu.emit(&mut bytes).is_err() || !self.spend(SendKind::TaskManagement) {
            self.tags.remove(tag);
            return None;
        }
        self.deadlines.insert((deadline, tag));
        self.actions.push_back(Action::Send {
            iu: bytes,
            cmd: None,
        });
        Some(tag)
    }

    /// Sends what waits: responses to target requests first, then queued commands.
    pub(super) fn drain(&mut self, now: Time) {
        while !self.responses.is_empty() && self.spend(SendKind::Response) {
            if let Some(iu) = self.responses.pop_front() {
                self.actions.push_back(Action::Send { iu, cmd: None });
            }
        }
        while !self.waiting.is_empty() && self.can_issue(SendKind::Command) {
            if let Some((id, cmd)) = self.waiting.pop_front() {
                self.issue(now, id, cmd);
            }
        }
    }

    /// A send posted on the live channel completed. Flushed sends of a destroyed queue pair
    /// must not be reported: the loss already forgot them.
    pub fn handle_send_done(&mut self, now: Time) -> Result<(), InitiatorError> {
        let Link::Up(s) = &mut self.link else {
            // Sends flushed with a destroyed QP were already forgotten.
            return Ok(());
        };
        s.pool.release()?;
        self.drain(now);
        Ok(())
    }

    /// Queues a command's completion.
    pub(super) fn complete(&mut self, id: CmdId, outcome: Outcome) {
        self.actions
            .push_back(Action::Complete(Completion { id, outcome }));
    }

    /// Remembers a tag ended by a TMF, so its late response is tolerated.
    pub(super) fn retire(&mut self, tag: Tag) {
        let cap = self.tags_capacity();
        while self.retired.len() >= cap.max(1) {
            self.retired.pop_front();
        }
        self.retired.push_back(tag);
    }

    fn tags_capacity(&self) -> usize {
        match &self.link {
            Link::Up(s) => s.neg.window as usize + 2,
            _ => 1,
        }
    }

    /// Moves the port state, reporting the change.
    pub(super) fn move_state(&mut self, event: super::timers::PortEvent) {
        match self.state.next(event) {
            Ok(to) if to != self.state => {
                self.events.push_back(Event::StateChanged {
                    from: self.state,
                    to,
                });
                self.state = to;
            }
            Ok(_) => {}
            Err(e) => debug_assert!(false, "{e}"),
        }
    }
}
