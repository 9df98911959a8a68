//! [`ChannelIo`]: one [`TargetChannel`] on one RC queue pair, driven by completions.
//!
//! Driver order: [`ChannelIo::new`] (registers the channel's memory, creates its CQ and QP),
//! the CM step brings the peer's attributes and the caller calls [`ChannelIo::connect`]
//! (QP to RTS, receives posted, RTU given to the channel), then [`ChannelIo::poll`] in a
//! loop until [`ChannelIo::state`] is [`IoState::Closed`]. Each `poll` drains the CQ first,
//! then the executor's results, so IUs that arrived together are judged together. After
//! polling, the driver passes all its channels to [`settle_aborts`] (a PREEMPT AND ABORT
//! is answered only then).
//!
//! A command moves through its slot: external table READ (if the inline list was partial),
//! data-out READs into the bounce buffer (or the IU's immediate data), execution on the
//! [`Executor`], then data-in WRITEs chained before the SRP_RSP SEND in one post. Protocol
//! faults send SRP_T_LOGOUT and tear the channel down once it is sent; a failed RDMA
//! transfer (bad rkey, range or rights) leaves both QPs in ERR (IBTA 9.9.3), so no
//! T_LOGOUT can travel: the channel is torn down at once, as ib_srpt disconnects.

use super::command::{Phase, Slot, Work, WrKind};
use super::executor::{Done, Executor, Job, NexusInfo, Reply, Staging};
use super::memory::{Layout, sge};
use super::send_queue::{Admit, SendQueue};
use super::verbs::ChannelVerbs;
use crate::channel::{Fault, Request, TargetChannel};
use crate::exec::{LogicalUnit, TransportError};
use crate::login::{ChannelId, Negotiated};
use access_layer::verbs::{ChannelInterface, Doorbell, VerbsError};
use ib_verbs::RcConnect;
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{MrKeys, PdId};
use ib_verbs::wr::{RecvWr, SendFlags, SendOp, SendWr, Wc, WcStatus};
use scsi::{Lun, Sense, SenseCode, Status};
use srp::channel::data::{rdma_ops, residual};
use srp::channel::{Buffer, RdmaOp};
use srp::wire::Tag;
use srp::wire::login::LoginReqFlags;
use srp::wire::logout::TLogoutReason;
use srp::wire::rsp::{Residual, TmfResponse};
use srp::wire::tsk_mgmt::TaskMgmtFunction;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use wirekit::WireRepr;

mod abort;
mod probe;
mod respond;
mod transfer;

pub use abort::{AbortScope, DRAIN_LIMIT, NexusAbort, settle_aborts};

/// Largest single RDMA READ or WRITE we post; longer segments are split.
pub const MAX_RDMA_OP: u32 = 1 << 20;

/// Completions taken per CQ poll.
const POLL_BATCH: usize = 64;

/// Data buffers a channel keeps for reuse: a window's worth (a command holds one, two for
/// bidirectional ones), so at full queue depth none is freed and allocated again — freed
/// large buffers go back to the kernel and fault in afresh, which halved 128 KiB reads.
const SPARE_BUFFERS: usize = 64;

/// What a channel is built from: the login's outcome and what it may reach.
#[derive(Clone)]
pub struct ChannelIoConfig {
    /// The channel's id.
    pub id: ChannelId,
    /// What the login negotiated.
    pub negotiated: Negotiated,
    /// The login request's flags.
    pub login_flags: LoginReqFlags,
    /// Largest transfer of one direction of one command, in bytes.
    pub max_transfer: u64,
    /// Largest external descriptor table fetched, in entries.
    pub max_table_entries: usize,
    /// Entries of the QP's send queue the channel's chains may hold at once
    /// ([`super::verbs::MAX_SEND_WR`] in the daemon); a chain that does not fit waits.
    pub send_queue_depth: usize,
    /// The logical units this nexus sees, by LUN.
    pub luns: Vec<(Lun, Arc<LogicalUnit>)>,
    /// The I_T nexus.
    pub nexus: Arc<NexusInfo>,
}

impl std::fmt::Debug for ChannelIoConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelIoConfig")
            .field("id", &self.id)
            .field("negotiated", &self.negotiated)
            .field("max_transfer", &self.max_transfer)
            .finish()
    }
}

/// Why a channel could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IoError {
    /// The buffers the login asks for do not fit in memory addresses.
    #[error("buffers for window {window} and transfers of {max_transfer} bytes overflow")]
    Layout {
        /// Credits.
        window: u32,
        /// Transfer limit.
        max_transfer: u64,
    },
    /// A verb failed.
    #[error("verb failed: {0}")]
    Verbs(#[from] VerbsError),
}

/// Where a channel's I/O is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoState {
    /// Created, QP not yet connected.
    Idle,
    /// Serving commands.
    Live,
    /// The initiator logged out: finishing what is in flight.
    Draining,
    /// SRP_T_LOGOUT posted; torn down once it is sent.
    LoggingOut,
    /// QP, CQ and memory region released.
    Closed,
}

/// One channel's I/O. See the module docs.
pub struct ChannelIo {
    /// Every verb of the channel: its QP, CQ and region ([`super::verbs`]).
    verbs: ChannelVerbs,
    channel: TargetChannel,
    layout: Layout,
    /// The channel's registered block (the verbs' own).
    mem: Arc<MemBlock>,
    slots: Vec<Option<Slot>>,
    /// Each slot's abort flag, renewed for each command the slot starts.
    flags: Vec<super::executor::AbortFlag>,
    /// The flag of a command still waiting for a slot (never set: aborting a waiting
    /// command forgets it).
    unstarted: super::executor::AbortFlag,
    waiting: VecDeque<Slot>,
    luns: Vec<(Lun, Arc<LogicalUnit>)>,
    nexus: Arc<NexusInfo>,
    executor: Arc<dyn Executor>,
    done_tx: Reply,
    done_rx: Receiver<Done>,
    state: IoState,
    reason: Option<String>,
    counters: super::SessionCounters,
    /// Data buffers of finished commands, kept for the next ones (at most [`SPARE_BUFFERS`]):
    /// a command's data-in and data-out vectors are not allocated anew, and large ones do
    /// not cost a fresh mapping and its page faults every time.
    spare: Vec<Vec<u8>>,
    /// Abort requests raised by completed commands, for the driver ([`abort`]).
    aborts: Vec<abort::NexusAbort>,
    /// Results held until their aborts are applied, with the jobs those aborts wait for.
    held: Vec<(Done, Arc<crate::io::Drain>)>,
    /// Task management requests (by slot) answered once their aborts are applied, with
    /// the jobs those aborts wait for.
    held_tmf: Vec<(usize, Arc<crate::io::Drain>)>,
    /// Answers whose aborts are applied, waiting for the aborted jobs still running on
    /// workers to stop ([`abort`]).
    draining: Vec<abort::Draining>,
    /// An SRP_CRED_REQ SEND is posted and not yet completed.
    cred_in_flight: bool,
    /// When the initiator was last heard from: an IU received, or a SEND or RDMA operation
    /// its QP acknowledged ([`ChannelIo::probe_if_idle`]).
    last_heard: std::time::Instant,
    /// Where `last_heard` is read (the system clock, or a simulated run's).
    clock: std::sync::Arc<dyn ib_verbs::time::Clock>,
    /// The SRP_CRED_REQ in flight is an idle probe.
    probing: bool,
    /// Idle probes sent.
    probes: u64,
    /// The completion array and the received-IU copy, kept between polls.
    wcs: Vec<Wc>,
    iu_buf: Vec<u8>,
    /// The send chain being built (transfers, then the response), posted and emptied by
    /// [`ChannelIo::post`]: its memory is kept, so a command posts without allocating.
    wrs: Vec<SendWr>,
    /// The send queue's credits: chains wait here rather than overflow it.
    sq: SendQueue,
    /// The SRP_RSP being built, kept between responses.
    rsp_buf: Vec<u8>,
}

impl std::fmt::Debug for ChannelIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelIo")
            .field("id", &self.channel.id())
            .field("verbs", &self.verbs)
            .field("state", &self.state)
            .finish()
    }
}

impl ChannelIo {
    /// Registers the channel's memory in `pd` and creates its CQ and RC QP (in RESET),
    /// through the channel adapter `ca`'s verbs, waiting for each (passive level: the
    /// serving loop, as ib_srpt creates its QP in its CM handler). Backend results ring
    /// `bell`, the serving loop's doorbell (its CQ's notifications ring it through the
    /// CA's event handler; see [`ChannelIo::arm`]).
    pub fn new(
        ca: Arc<dyn ChannelInterface>,
        pd: PdId,
        config: ChannelIoConfig,
        executor: Arc<dyn Executor>,
        bell: Option<Arc<Doorbell>>,
    ) -> Result<ChannelIo, IoError> {
        let n = config.negotiated;
        let layout = Layout::new(
            n.window,
            n.it_iu_len,
            n.ti_iu_len,
            config.max_transfer,
            config.max_table_entries,
        )
        .ok_or(IoError::Layout {
            window: n.window,
            max_transfer: config.max_transfer,
        })?;
        let verbs = ChannelVerbs::create(ca, pd, &layout, config.send_queue_depth, config.id.0)?;
        let mem = verbs.mem().clone();
        let channel = TargetChannel::new(
            config.id,
            n,
            config.login_flags,
            config.max_transfer,
            config.max_table_entries,
        );
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let done_tx = Reply::new(done_tx, bell);
        Ok(ChannelIo {
            verbs,
            channel,
            layout,
            mem,
            slots: vec![None; layout.window],
            flags: (0..layout.window).map(|_| Default::default()).collect(),
            unstarted: Default::default(),
            waiting: VecDeque::new(),
            luns: config.luns,
            nexus: config.nexus,
            executor,
            done_tx,
            done_rx,
            state: IoState::Idle,
            reason: None,
            counters: super::SessionCounters::default(),
            spare: Vec::new(),
            aborts: Vec::new(),
            held: Vec::new(),
            held_tmf: Vec::new(),
            draining: Vec::new(),
            cred_in_flight: false,
            last_heard: std::time::Instant::now(),
            clock: ib_verbs::time::system_clock(),
            probing: false,
            probes: 0,
            wcs: Vec::with_capacity(POLL_BATCH),
            iu_buf: Vec::new(),
            wrs: Vec::new(),
            sq: SendQueue::new(config.send_queue_depth),
            rsp_buf: Vec::new(),
        })
    }

    /// The QP's number, for the CM REP.
    pub fn qpn(&self) -> Option<ib_verbs::Qpn> {
        self.verbs.qpn()
    }

    /// Whether the channel's QP, CQ and region are released (after [`IoState::Closed`],
    /// once its QP is drained and the provider has run the verbs that release them: keep
    /// polling a closed channel until then).
    pub fn released(&self) -> bool {
        self.verbs.released()
    }

    /// Where the channel is.
    pub fn state(&self) -> IoState {
        self.state
    }

    /// The sans-IO channel.
    pub fn channel(&self) -> &TargetChannel {
        &self.channel
    }

    /// Why the channel closed (a fault, a failed transfer), if it did for a reason.
    pub fn close_reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The channel's memory region, while registered.
    pub fn mr_keys(&self) -> Option<MrKeys> {
        self.verbs.mr_keys()
    }

    /// What the channel has done since login.
    pub fn counters(&self) -> super::SessionCounters {
        super::SessionCounters {
            send_queue_waits: self.sq.deferred(),
            ..self.counters
        }
    }

    /// Commands in a slot or waiting for one.
    pub fn in_flight(&self) -> usize {
        self.slots.iter().flatten().count() + self.waiting.len()
    }

    /// Connects the QP to the initiator's (what the CM does with REQ/REP/RTU), posts the
    /// receive buffers and makes the channel live.
    pub fn connect(&mut self, peer: &RcConnect) -> Result<(), IoError> {
        self.verbs.connect(peer)?;
        for i in 0..self.layout.recvs {
            self.post_recv(i)?;
        }
        self.state = IoState::Live;
        for iu in self.channel.on_rtu() {
            self.on_iu(&iu);
        }
        Ok(())
    }

    /// Arms the channel's CQ: its next completion fires a CQ notification to the device's
    /// event handler (which rings the serving loop's doorbell). Call after [`ChannelIo::poll`]
    /// found nothing, then poll once more before waiting: a completion that came between
    /// the poll and the arm fires no notification.
    pub fn arm(&self) {
        if self.state == IoState::Closed && !self.verbs.draining() {
            return;
        }
        self.verbs.arm();
    }

    /// Handles what completed; returns how many completions and results it handled.
    pub fn poll(&mut self) -> usize {
        if self.state == IoState::Closed {
            while self.done_rx.try_recv().is_ok() {}
            return self.poll_drain();
        }
        let mut wcs = std::mem::take(&mut self.wcs);
        wcs.clear();
        self.verbs.poll(POLL_BATCH, &mut wcs);
        let mut n = wcs.len();
        for wc in &wcs {
            self.on_wc(wc);
        }
        if wcs.iter().any(|wc| wc.status == WcStatus::Success) {
            self.last_heard = self.clock.now();
        }
        self.wcs = wcs;
        while let Ok(done) = self.done_rx.try_recv() {
            n += 1;
            self.on_done(done);
        }
        if !self.draining.is_empty() {
            n += self.answer_drained();
        }
        // Every response of this turn is built: credits still owed have nothing to ride on.
        self.send_owed_credits();
        if self.state == IoState::Draining && self.in_flight() == 0 {
            self.teardown(None);
        }
        n
    }

    /// A closed channel whose QP drains: its completions (all flushed, discarded) until
    /// the drain's marker, then the release. How many completions it took.
    fn poll_drain(&mut self) -> usize {
        if !self.verbs.draining() {
            return 0;
        }
        let mut wcs = std::mem::take(&mut self.wcs);
        wcs.clear();
        self.verbs.poll(POLL_BATCH, &mut wcs);
        let now = std::time::Instant::now();
        let n = wcs.len();
        if !wcs.iter().any(|wc| self.verbs.drained(Some(wc), now)) {
            self.verbs.drained(None, now);
        }
        self.wcs = wcs;
        n
    }

    /// A data buffer of `len` zero bytes, reusing a spare one.
    pub(super) fn buffer(&mut self, len: usize) -> Vec<u8> {
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.resize(len, 0);
        v
    }

    /// Keeps `v` for a later command (up to [`SPARE_BUFFERS`]).
    pub(super) fn recycle(&mut self, v: Vec<u8>) {
        if v.capacity() > 0 && self.spare.len() < SPARE_BUFFERS {
            self.spare.push(v);
        }
    }

    fn post_recv(&self, i: usize) -> Result<(), VerbsError> {
        let lkey = self.lkey();
        let wr = RecvWr {
            wr_id: WrKind::Recv(i).encode(),
            sg_list: [sge(lkey, self.layout.recv(i), self.layout.recv_len as u32)].into(),
        };
        self.verbs.post_recv(wr)
    }

    /// Posts the chain in [`ChannelIo::wrs`] (emptied either way) — or, when the send queue
    /// has no room for it, keeps it waiting behind the chains already waiting
    /// ([`SendQueue`]); it goes out as completions make room.
    fn post(&mut self) -> Result<(), String> {
        match self.sq.admit(&mut self.wrs) {
            Admit::Post => self.verbs.post(&mut self.wrs).map_err(|e| e.to_string()),
            Admit::Wait => Ok(()),
            Admit::TooLong { len, depth } => {
                self.wrs.clear();
                Err(format!(
                    "a chain of {len} work requests is longer than the send queue ({depth})"
                ))
            }
        }
    }

    /// A send completion of ours: its entries come back to the send queue, and the chains
    /// that waited for them are posted.
    fn send_completed(&mut self, wr_id: u64) {
        for mut chain in self.sq.completed(wr_id) {
            if let Err(e) = self.verbs.post(&mut chain) {
                return self.teardown(Some(format!("post send: {e}")));
            }
        }
    }

    fn lkey(&self) -> ib_verbs::ids::Lkey {
        self.verbs.lkey()
    }

    fn on_wc(&mut self, wc: &Wc) {
        let Some(kind) = WrKind::decode(wc.wr_id) else {
            return;
        };
        if wc.status != WcStatus::Success {
            self.sq.clear();
            if self.probing && wc.status != WcStatus::WrFlushErr {
                let why = format!(
                    "idle probe unanswered: the initiator is gone ({:?} after {:?} of silence)",
                    wc.status,
                    self.last_heard.elapsed()
                );
                return self.teardown(Some(why));
            }
            match (self.state, kind) {
                (IoState::LoggingOut, WrKind::Logout) => self.teardown(None),
                // The QP went to ERR: everything after the failure is flushed.
                (_, _) if wc.status == WcStatus::WrFlushErr => {
                    self.teardown(Some(format!("{kind:?} flushed: the QP is in error")));
                }
                _ => self.teardown(Some(format!("{kind:?} failed: {:?}", wc.status))),
            }
            return;
        }
        if !matches!(kind, WrKind::Recv(_)) {
            self.send_completed(wc.wr_id);
        }
        match kind {
            WrKind::Recv(i) => self.on_recv(i, wc.byte_len),
            WrKind::Table(n) => self.on_table(n),
            WrKind::DataOut(n) => self.on_read(n),
            WrKind::DataIn(_) => {}
            WrKind::Rsp(n) => self.free(n),
            WrKind::Logout => self.teardown(None),
            WrKind::Cred => {
                self.cred_in_flight = false;
                self.probing = false;
            }
            // Posted only once the channel is closed (polled by `poll_drain`).
            WrKind::Drain => {}
        }
    }

    fn on_recv(&mut self, i: usize, len: u32) {
        let len = (len as usize).min(self.layout.recv_len as usize);
        // Into the channel's IU copy, reused from one IU to the next.
        let mut iu = std::mem::take(&mut self.iu_buf);
        iu.clear();
        iu.resize(len, 0);
        let copied = self.mem.read(self.layout.recv(i) as usize, &mut iu).is_ok();
        if copied && self.state == IoState::Live {
            // The IU is copied out: the buffer can take the next one at once.
            match self.post_recv(i) {
                Ok(()) => self.on_iu(&iu),
                Err(e) => self.teardown(Some(format!("repost receive: {e}"))),
            }
        }
        self.iu_buf = iu;
    }

    fn on_iu(&mut self, iu: &[u8]) {
        let (tag, lun, work) = match self.channel.on_recv(iu) {
            Ok(Request::Command {
                tag,
                lun,
                cdb,
                plan,
                imm_data,
                remote_invalidate,
                ..
            }) => (
                tag,
                lun,
                Work::Scsi {
                    cdb,
                    data_out: plan.data_out,
                    data_in: plan.data_in,
                    imm_data,
                    remote_invalidate,
                },
            ),
            Ok(Request::BadCommand { tag, lun, error }) => (tag, lun, Work::Bad(error)),
            Ok(Request::TaskMgmt {
                tag,
                lun,
                function,
                task_tag,
            }) => (tag, lun, Work::Tmf { function, task_tag }),
            Ok(Request::Logout) => {
                self.state = IoState::Draining;
                return;
            }
            Ok(Request::None) => return,
            Err(fault) => return self.fault(&fault),
        };
        match work {
            Work::Tmf { .. } => self.counters.task_mgmt += 1,
            Work::Scsi { .. } | Work::Bad(_) => self.counters.commands += 1,
        }
        let slot = Slot {
            tag,
            lun,
            work,
            phase: Phase::Executing,
            abort: self.unstarted.clone(),
        };
        match self.slots.iter().position(Option::is_none) {
            Some(n) => self.start(n, slot),
            None => self.waiting.push_back(slot),
        }
    }

    fn start(&mut self, n: usize, mut slot: Slot) {
        if let Some(flag) = self.flags.get_mut(n) {
            slot.abort = flag.renew();
        }
        let tmf = match slot.work {
            Work::Tmf { function, task_tag } => Some((function, task_tag)),
            _ => None,
        };
        let bad = matches!(slot.work, Work::Bad(_));
        self.slots[n] = Some(slot);
        match tmf {
            Some((function, task_tag)) => self.tmf(n, function, task_tag),
            // A per-command descriptor check failed (transfer or table too long): ILLEGAL
            // REQUEST, INVALID FIELD IN CDB, as ib_srpt answers an oversized transfer.
            None if bad => self.check(n, Sense::new(SenseCode::INVALID_FIELD_IN_CDB)),
            None => self.advance(n),
        }
    }

    /// Ends the channel from the target's side: sends SRP_T_LOGOUT with `reason` (a newer
    /// SINGLE login, shutdown) and tears down once it is sent. An idle channel (QP never
    /// connected) is torn down at once; a closed one is left alone.
    pub fn logout(&mut self, reason: TLogoutReason, why: &str) {
        match self.state {
            IoState::Live | IoState::Draining => {
                self.reason = Some(why.to_string());
                self.send_logout(reason);
            }
            IoState::Idle => self.teardown(Some(why.to_string())),
            IoState::LoggingOut | IoState::Closed => {}
        }
    }

    /// A reload changed what this channel's IOC exports (or the target's port groups):
    /// commands from now on find their LU in `luns` and run with `nexus`; commands already
    /// started finish with what they started with.
    pub fn set_exports(&mut self, luns: Vec<(Lun, Arc<LogicalUnit>)>, nexus: Arc<NexusInfo>) {
        self.luns = luns;
        self.nexus = nexus;
    }

    /// The initiator port identifier of the channel's I_T nexus.
    pub fn initiator(&self) -> srp::wire::PortId {
        self.nexus.initiator
    }

    /// This channel was its I_T nexus's last: tells each LU it sees that the nexus is
    /// gone (a SCSI-2 reservation it held ends, [`LogicalUnit::it_nexus_lost`]).
    pub fn it_nexus_lost(&self) {
        let nexus = self.nexus.nexus();
        for (_, lu) in &self.luns {
            lu.it_nexus_lost(&nexus);
        }
    }

    /// Releases the channel at once (the CM connection went away: DREQ, timeout).
    pub fn close(&mut self, why: &str) {
        self.teardown(Some(why.to_string()));
    }

    fn fault(&mut self, fault: &Fault) {
        if self.state != IoState::Live && self.state != IoState::Draining {
            return;
        }
        self.reason = Some(fault.to_string());
        self.send_logout(fault.reason());
    }

    fn send_logout(&mut self, reason: TLogoutReason) {
        let mut buf = vec![0u8; self.layout.send_len as usize];
        let Some(len) = self.channel.logout(reason, &mut buf) else {
            return self.teardown(None);
        };
        let off = self.layout.send(self.layout.window);
        let _ = self.mem.write(off as usize, &buf[..len]);
        let wr = SendWr {
            wr_id: WrKind::Logout.encode(),
            op: SendOp::Send,
            sg_list: [sge(self.lkey(), off, len as u32)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        self.state = IoState::LoggingOut;
        self.waiting.clear();
        self.wrs.push(wr);
        if self.post().is_err() {
            self.teardown(None);
        }
    }

    /// Ends the channel: its QP is drained and then released with the CQ and the memory
    /// region ([`super::verbs`]; [`ChannelIo::released`] says when). Commands in flight are
    /// dropped; their executor results, if any come, are discarded.
    fn teardown(&mut self, reason: Option<String>) {
        if self.state == IoState::Closed {
            return;
        }
        if reason.is_some() && self.reason.is_none() {
            self.reason = reason;
        }
        self.verbs.start_teardown();
        self.channel.abort_matching(|_, _| true);
        self.channel.close();
        // Nothing can answer them now: jobs still queued for a worker are not run (those
        // running finish, their results are discarded).
        self.slots.iter().flatten().for_each(|s| s.abort.set());
        self.slots.iter_mut().for_each(|s| *s = None);
        self.waiting.clear();
        self.held.clear();
        self.held_tmf.clear();
        self.draining.clear();
        self.state = IoState::Closed;
    }
}

impl Drop for ChannelIo {
    fn drop(&mut self) {
        self.teardown(None);
        // Dropped before its drain ended: released now, in order ([`ChannelVerbs`]).
        self.verbs.release();
    }
}
