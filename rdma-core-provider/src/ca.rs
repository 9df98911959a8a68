//! [`RdmaCa`]: the access layer's channel interface over an RDMA device.
//!
//! Resource verbs run on the CA's dispatcher thread, in call order, at dispatch level
//! (their completions are completed there, never inside the verb call), as the software
//! HCA's do. Data-path verbs (post, poll, arm) are direct calls into the device's own
//! user-space provider on the caller's thread. The device's objects live in one table;
//! the data path takes a read lock to find a QP or CQ and holds its handle (an `Arc`)
//! only for the call.
//!
//! What user space cannot do is refused by name: fast registration (no REG_MR work
//! request outside the kernel: `CaCaps::fast_reg` is false — the host fences per I/O with
//! type-2 memory windows instead) and QP1 (the kernel owns it: `create_gsi_qp`).

use crate::bind_fence::{Fence, FenceState, Guard, Segment, is_sentinel, plan, sentinel_wr_id};
use crate::device::DeviceCore;
use crate::events::EventLoop;
use crate::ffi::types::*;
use crate::ffi::verbs::{BindTarget, Cq, Mr, Mw, Pd, Qp, RecvChain, SendChain};
use access_layer::verbs::{
    CaAttr, CaStats, ChannelInterface, Completion, DispatchGuard, EventHandler, MrSpec, PortAttr,
    ProviderError, ProviderErrorKind, VerbsError,
};
use ib_verbs::mr::{Access, MrKeys, PdId};
use ib_verbs::qp::state::{QpAttrMask, QpState, QpType};
use ib_verbs::qp::{QpAttr, QpInit};
use ib_verbs::wr::{ArmMode, RecvWr, SendFlags, SendOp, SendWr, Wc, WcOpcode, WcStatus};
use ib_verbs::{CqId, Lkey, QpId, Qpn, RcConnect, Rkey, SrqId};
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

const CREATED: u8 = 0;
const OPEN: u8 = 1;
const CLOSING: u8 = 2;
const CLOSED: u8 = 3;

/// Completions moved per `ibv_poll_cq` call.
const POLL_BATCH: usize = 32;

/// A QP and the chains its posts are built in (kept between posts: no allocation).
pub(crate) struct QpEntry {
    /// Before `qp`: the sentinel window is deallocated before the QP it is bound to.
    send: Mutex<SendSide>,
    pub(crate) qp: Qp,
    recv: Mutex<RecvChain>,
    /// Successful send completions polled (signaled requests retired), for the bind fence.
    retired: AtomicU64,
}

/// A QP's send side: the chain being built, the bind fence (rxe only) and the plan of a
/// post's segments (kept between posts).
#[derive(Default)]
struct SendSide {
    chain: SendChain,
    fence: Option<Fence>,
    plan: Vec<Segment>,
    /// Whether each request of `chain` is signaled.
    signaled: Vec<bool>,
    /// Signaled requests posted (compared with [`QpEntry::retired`]).
    signaled_posted: u64,
    /// Whether the last request posted is unsignaled (its retirement is not seen).
    tail_unsignaled: bool,
}

impl SendSide {
    /// Counts the first `posted` requests of the chain as posted.
    fn count_posted(&mut self, posted: usize) {
        let posted = &self.signaled[..posted.min(self.signaled.len())];
        self.signaled_posted += posted.iter().filter(|&&s| s).count() as u64;
        if let Some(&last) = posted.last() {
            self.tail_unsignaled = !last;
        }
    }
}

/// The device's objects by the ids the consumer knows them by.
#[derive(Default)]
pub(crate) struct Objects {
    next: u32,
    pds: HashMap<u32, Arc<Pd>>,
    /// By L_Key.
    mrs: HashMap<u32, Arc<Mr>>,
    /// Windows by their key's index (the key without its consumer byte).
    mws: HashMap<u32, Arc<Mw>>,
    cqs: HashMap<u32, Arc<Cq>>,
    pub(crate) qps: HashMap<u32, Arc<QpEntry>>,
}

impl Objects {
    fn id(&mut self) -> u32 {
        self.next = self.next.wrapping_add(1).max(1);
        self.next
    }

    /// CQ `id`'s handle.
    pub(crate) fn cq(&self, id: u32) -> Option<Arc<Cq>> {
        self.cqs.get(&id).cloned()
    }

    /// The CQ whose handle address is `addr` (a completion or async event names it so).
    pub(crate) fn cq_by_addr(&self, addr: usize) -> Option<u32> {
        self.cqs
            .iter()
            .find(|(_, c)| c.addr() == addr)
            .map(|(id, _)| *id)
    }

    /// The QP whose handle address is `addr`.
    pub(crate) fn qp_by_addr(&self, addr: usize) -> Option<u32> {
        self.qps
            .iter()
            .find(|(_, q)| q.qp.addr() == addr)
            .map(|(n, _)| *n)
    }
}

/// State shared by the verbs' callers, the dispatcher and the event thread.
pub(crate) struct Shared {
    pub(crate) dev: DeviceCore,
    state: AtomicU8,
    handler: Mutex<Option<EventHandler>>,
    pub(crate) objects: RwLock<Objects>,
    panics: AtomicU64,
    resource_verbs: AtomicU64,
    at_dispatch: AtomicU64,
    cq_notifications: AtomicU64,
    /// Asynchronous events the access layer has no word for (logged and counted).
    pub(crate) unknown_events: AtomicU64,
    /// Completions whose work request the provider could not read back (a wrong opcode).
    strange_completions: AtomicU32,
    /// Runs of memory-window binds posted behind the sentinel (`bind_fence.rs`).
    fenced_binds: AtomicU64,
    /// Completions of sentinel requests (flushes and failures; never the consumer's).
    sentinel_completions: AtomicU64,
}

impl Shared {
    fn handler(&self) -> Option<EventHandler> {
        self.handler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Delivers `event` to the consumer's handler on the current thread, at dispatch
    /// level; a handler that panics is counted.
    pub(crate) fn deliver(&self, event: ib_verbs::Event) {
        let Some(h) = self.handler() else {
            return;
        };
        if matches!(event, ib_verbs::Event::CqNotify(_)) {
            self.cq_notifications.fetch_add(1, Ordering::Relaxed);
        }
        let _dispatch = DispatchGuard::enter();
        if catch_unwind(AssertUnwindSafe(|| h(event))).is_err() {
            self.panics.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn objects(&self) -> RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The table, to change. Never drop a device object while holding this ([`release`]).
    pub(crate) fn objects_mut(&self) -> RwLockWriteGuard<'_, Objects> {
        self.objects.write().unwrap_or_else(PoisonError::into_inner)
    }
}

type Work = Box<dyn FnOnce(&Shared) + Send>;

enum Job {
    Verb(Work),
    Stop,
}

/// A channel adapter on an RDMA device. See the module doc.
pub struct RdmaCa {
    pub(crate) shared: Arc<Shared>,
    jobs: Sender<Job>,
    dispatcher: Option<JoinHandle<()>>,
    pub(crate) events: EventLoop,
}

impl std::fmt::Debug for RdmaCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaCa")
            .field("device", &self.shared.dev.ctx.name())
            .field("port", &self.shared.dev.port)
            .finish_non_exhaustive()
    }
}

/// An OS error as the access layer reports a provider's refusal.
pub(crate) fn os_error(what: &str, e: &std::io::Error) -> VerbsError {
    let kind = match e.raw_os_error() {
        Some(libc::ENOENT) => ProviderErrorKind::NoSuch,
        Some(libc::EBUSY) => ProviderErrorKind::InUse,
        Some(libc::ENOMEM | libc::EAGAIN | libc::ENOSPC) => ProviderErrorKind::Exhausted,
        Some(libc::EPERM | libc::EACCES) => ProviderErrorKind::Denied,
        Some(libc::EOPNOTSUPP | libc::ENOSYS) => ProviderErrorKind::Unsupported,
        Some(libc::EIO | libc::ENODEV) => ProviderErrorKind::Device,
        Some(libc::EINVAL) => ProviderErrorKind::Invalid,
        _ => ProviderErrorKind::Other,
    };
    VerbsError::Provider(ProviderError::new(kind, format!("{what}: {e}")))
}

fn no_such(what: &str, id: impl std::fmt::Display) -> VerbsError {
    VerbsError::Provider(ProviderError::new(
        ProviderErrorKind::NoSuch,
        format!("no such {what} {id}"),
    ))
}

fn unsupported(what: &str) -> VerbsError {
    VerbsError::Provider(ProviderError::new(ProviderErrorKind::Unsupported, what))
}

impl RdmaCa {
    /// Takes over `dev` and starts the dispatcher and the event thread; the CA is not open
    /// yet.
    pub(crate) fn new(dev: DeviceCore) -> std::io::Result<RdmaCa> {
        let shared = Arc::new(Shared {
            dev,
            state: AtomicU8::new(CREATED),
            handler: Mutex::new(None),
            objects: RwLock::new(Objects::default()),
            panics: AtomicU64::new(0),
            resource_verbs: AtomicU64::new(0),
            at_dispatch: AtomicU64::new(0),
            cq_notifications: AtomicU64::new(0),
            unknown_events: AtomicU64::new(0),
            strange_completions: AtomicU32::new(0),
            fenced_binds: AtomicU64::new(0),
            sentinel_completions: AtomicU64::new(0),
        });
        let (jobs, queue) = channel();
        let s = shared.clone();
        let dispatcher = std::thread::Builder::new()
            .name("rdma-dispatch".into())
            .spawn(move || dispatch(&s, &queue))?;
        let events = EventLoop::start(shared.clone())?;
        Ok(RdmaCa {
            shared,
            jobs,
            dispatcher: Some(dispatcher),
            events,
        })
    }

    fn check_open(&self) -> Result<(), VerbsError> {
        match self.shared.state.load(Ordering::Acquire) {
            OPEN => Ok(()),
            _ => Err(VerbsError::Closed),
        }
    }

    /// Queues `work` for the dispatcher if the CA is open.
    fn submit<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Shared) -> Result<T, VerbsError> + Send + 'static,
    ) -> Completion<T> {
        if let Err(e) = self.check_open() {
            return Completion::ready(Err(e));
        }
        self.shared.resource_verbs.fetch_add(1, Ordering::Relaxed);
        if access_layer::verbs::in_dispatch() {
            self.shared.at_dispatch.fetch_add(1, Ordering::Relaxed);
        }
        self.queue(work)
    }

    fn queue<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Shared) -> Result<T, VerbsError> + Send + 'static,
    ) -> Completion<T> {
        let (done, completion) = Completion::pair();
        let _ = self.jobs.send(Job::Verb(Box::new(move |shared| {
            done.complete(work(shared));
        })));
        completion
    }

    fn ca_attr(shared: &Shared) -> CaAttr {
        let dev = &shared.dev;
        let pa = dev.port_attr().ok();
        CaAttr {
            node_guid: dev.node_guid,
            ports: vec![PortAttr {
                port: 1,
                gid: dev.gid,
                active: pa.is_some_and(|p| p.state == IBV_PORT_ACTIVE),
                link_mtu: pa.as_ref().and_then(DeviceCore::active_mtu),
            }],
            caps: dev.caps,
        }
    }

    /// The device's live objects.
    pub(crate) fn resources(&self) -> ib_verbs::Resources {
        let o = self.shared.objects();
        ib_verbs::Resources {
            qps: o.qps.len(),
            cqs: o.cqs.len(),
            srqs: 0,
            mrs: o.mrs.len() + o.mws.len(),
        }
    }

    /// The QP `qp`'s entry, if it exists.
    fn qp(&self, qp: QpId) -> Result<Arc<QpEntry>, VerbsError> {
        let QpId::Qp(n) = qp else {
            return Err(unsupported("QP1 belongs to the kernel under rdma-core"));
        };
        self.shared
            .objects()
            .qps
            .get(&n.get())
            .cloned()
            .ok_or_else(|| no_such("QP", n))
    }
}

impl RdmaCa {
    /// Posts `wrs` on `qp` as the bind fence plans it (one `ibv_post_send` per segment;
    /// a single one when the device needs no fence or the list has no bind to fence). On
    /// an error, the consumer's requests before the index it names were posted.
    fn post_segments(
        &self,
        entry: &QpEntry,
        side: &mut SendSide,
        wrs: &[SendWr],
        o: &Objects,
    ) -> Result<(), VerbsError> {
        let qp = &entry.qp;
        let state = side.fence.as_ref().map_or(FenceState::Broken, |f| f.state);
        let idle =
            side.signaled_posted == entry.retired.load(Ordering::Acquire) && !side.tail_unsignaled;
        let mut segments = std::mem::take(&mut side.plan);
        plan(
            state,
            idle,
            wrs.len(),
            |i| matches!(wrs[i].op, SendOp::BindMw { .. }),
            &mut segments,
        );
        let r = self.post_planned(qp, side, &segments, wrs, o);
        side.plan = segments;
        r
    }

    /// [`Self::post_segments`] once planned.
    fn post_planned(
        &self,
        qp: &Qp,
        side: &mut SendSide,
        segments: &[Segment],
        wrs: &[SendWr],
        o: &Objects,
    ) -> Result<(), VerbsError> {
        let wr_id = sentinel_wr_id(qp.num());
        let mut binds = Vec::new();
        for seg in segments {
            side.chain.clear();
            side.signaled.clear();
            let guard = if side.fence.is_some() {
                seg.guard
            } else {
                Guard::None
            };
            if let Some(f) = side.fence.as_ref() {
                push_guard(&mut side.chain, f, guard, wr_id, &mut binds);
                side.signaled.resize(guard.len(), false);
            }
            let g = guard.len();
            for i in seg.wrs.clone() {
                side.signaled
                    .push(wrs[i].flags.contains(SendFlags::SIGNALED));
                if let Err(e) = push_send(&mut side.chain, &wrs[i], o, &mut binds) {
                    side.signaled.pop();
                    // Those before `i` are not posted yet: post them, then report `i`.
                    let r = qp.post_send(&mut side.chain);
                    let posted = r.as_ref().map_or_else(|(j, _)| *j, |()| side.chain.len());
                    side.count_posted(posted);
                    settle(&mut side.fence, guard, posted, &mut binds);
                    return Err(match r {
                        Err((j, err)) => post_list_error(seg.wrs.start + j.saturating_sub(g), &err),
                        Ok(()) => VerbsError::PostList {
                            index: i,
                            source: provider(e),
                        },
                    });
                }
            }
            let r = qp.post_send(&mut side.chain);
            let posted = r.as_ref().map_or_else(|(j, _)| *j, |()| side.chain.len());
            side.count_posted(posted);
            settle(&mut side.fence, guard, posted, &mut binds);
            if let Err((j, err)) = r {
                return Err(post_list_error(seg.wrs.start + j.saturating_sub(g), &err));
            }
            if guard == Guard::InvalidateRebind {
                self.shared.fenced_binds.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// A completion of a sentinel request (unsignaled: a flush or a failure), counted; a
    /// failure (the QP's error with it) logged.
    fn sentinel_done(&self, w: &ibv_wc) {
        self.shared
            .sentinel_completions
            .fetch_add(1, Ordering::Relaxed);
        let status = WcStatus::from(u8::try_from(w.status).unwrap_or(21));
        if status == WcStatus::WrFlushErr {
            tracing::debug!(
                qpn = w.qp_num,
                "a bind-fence request flushed (the QP is in error)"
            );
        } else {
            tracing::warn!(
                qpn = w.qp_num,
                ?status,
                vendor_err = w.vendor_err,
                "a bind-fence request failed: the QP is in error (counted)"
            );
        }
    }
}

/// The sentinel's requests of `guard` appended to `chain` (its rebind recorded in `binds`).
fn push_guard(
    chain: &mut SendChain,
    f: &Fence,
    guard: Guard,
    wr_id: u64,
    binds: &mut Vec<(usize, Arc<Mw>, u32)>,
) {
    let empty = core::iter::empty();
    if guard == Guard::InvalidateRebind {
        let key = f.mw.rkey();
        chain.push(
            wr_id,
            IBV_WR_LOCAL_INV,
            IBV_SEND_FENCE,
            empty,
            key,
            (0, 0),
            None,
        );
    }
    if guard != Guard::None {
        let key = f.next_key();
        binds.push((chain.len(), f.mw.clone(), key));
        chain.push(
            wr_id,
            IBV_WR_BIND_MW,
            0,
            core::iter::empty(),
            0,
            (0, 0),
            Some(BindTarget {
                mw: &f.mw,
                new_rkey: key,
                mr: &f.mr,
                addr: f.iova,
                length: 1,
                access: 0,
            }),
        );
    }
}

/// After a post of which the first `posted` requests went in: the next bind of a window
/// names it by the key this one gave it (rdma-core leaves a type-2 window's key to its
/// consumer; rxe refuses a stale one), and the fence's state follows its guard.
fn settle(
    fence: &mut Option<Fence>,
    guard: Guard,
    posted: usize,
    binds: &mut Vec<(usize, Arc<Mw>, u32)>,
) {
    for (at, mw, rkey) in binds.drain(..) {
        if at < posted {
            mw.set_rkey(rkey);
        }
    }
    if let Some(f) = fence.as_mut() {
        let before = f.state;
        f.state = guard.after(before, posted);
        if f.state == FenceState::Broken && before != FenceState::Broken {
            tracing::warn!(
                "a post stopped between the bind fence's LOCAL_INV and its rebind: this \
                 QP's memory-window binds go unfenced from now on (rxe may replay them)"
            );
        }
    }
}

/// The dispatcher: runs queued verbs at dispatch level until [`Job::Stop`].
fn dispatch(shared: &Shared, queue: &Receiver<Job>) {
    while let Ok(job) = queue.recv() {
        let Job::Verb(work) = job else {
            return;
        };
        let _dispatch = DispatchGuard::enter();
        if catch_unwind(AssertUnwindSafe(|| work(shared))).is_err() {
            shared.panics.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for RdmaCa {
    fn drop(&mut self) {
        self.events.stop();
        let _ = self.jobs.send(Job::Stop);
        if let Some(t) = self.dispatcher.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        // Every object goes now, QPs first (they hold their CQs and PDs): the handles'
        // drops destroy them in dependency order.
        let mut o = self
            .shared
            .objects
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        o.qps.clear();
        o.mws.clear();
        o.mrs.clear();
        o.cqs.clear();
        o.pds.clear();
    }
}

/// `Access` as `IBV_ACCESS_*` (the same values).
fn access_bits(a: Access) -> u32 {
    a.bits()
}

/// `QpState` as `IBV_QPS_*`.
fn qp_state(s: QpState) -> u32 {
    match s {
        QpState::Reset => IBV_QPS_RESET,
        QpState::Init => IBV_QPS_INIT,
        QpState::Rtr => IBV_QPS_RTR,
        QpState::Rts => IBV_QPS_RTS,
        QpState::Sqd => IBV_QPS_SQD,
        QpState::Sqe => IBV_QPS_SQE,
        QpState::Err => IBV_QPS_ERR,
    }
}

fn state_of(s: u32) -> QpState {
    match s {
        IBV_QPS_RESET => QpState::Reset,
        IBV_QPS_INIT => QpState::Init,
        IBV_QPS_RTR => QpState::Rtr,
        IBV_QPS_RTS => QpState::Rts,
        IBV_QPS_SQD => QpState::Sqd,
        IBV_QPS_SQE => QpState::Sqe,
        _ => QpState::Err,
    }
}

impl Shared {
    /// The address vector towards `dest` from our port and GID.
    fn ah(&self, dest: ib_verbs::Gid, grh: Option<&ibv_global_route>) -> ibv_ah_attr {
        let mut route = ibv_global_route {
            dgid: ibv_gid { raw: dest.0 },
            flow_label: 0,
            sgid_index: self.dev.gid_index,
            hop_limit: 64,
            traffic_class: 0,
        };
        if let Some(g) = grh {
            route.flow_label = g.flow_label;
            route.hop_limit = g.hop_limit.max(1);
            route.traffic_class = g.traffic_class;
        }
        ibv_ah_attr {
            grh: route,
            dlid: 0,
            sl: 0,
            src_path_bits: 0,
            static_rate: 0,
            is_global: 1,
            port_num: self.dev.port,
        }
    }

    /// `QpAttr` as `ibv_qp_attr` (the consumer's port 1 is our device port).
    fn qp_attr(&self, a: &QpAttr) -> ibv_qp_attr {
        ibv_qp_attr {
            qp_state: qp_state(a.state),
            cur_qp_state: qp_state(a.cur_state),
            path_mtu: u32::from(u8::from(a.path_mtu)),
            qkey: a.qkey.0,
            rq_psn: a.rq_psn.get(),
            sq_psn: a.sq_psn.get(),
            dest_qp_num: a.dest_qpn.get(),
            qp_access_flags: access_bits(a.access),
            ah_attr: self.ah(a.dest_gid, None),
            pkey_index: a.pkey_index,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: self.dev.port,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            ..ibv_qp_attr::default()
        }
    }

    /// RESET → INIT → RTR → RTS as `peer` says.
    fn connect_rc(&self, qp: &Qp, peer: &RcConnect) -> Result<(), VerbsError> {
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_INIT,
            pkey_index: peer.pkey_index,
            port_num: self.dev.port,
            qp_access_flags: access_bits(peer.access),
            ..ibv_qp_attr::default()
        };
        qp.modify(
            &mut a,
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
        )
        .map_err(|e| os_error("modify QP to INIT", &e))?;
        let grh = ibv_global_route {
            dgid: ibv_gid {
                raw: peer.dest_gid.0,
            },
            flow_label: peer.flow_label,
            sgid_index: self.dev.gid_index,
            hop_limit: peer.hop_limit,
            traffic_class: peer.traffic_class,
        };
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_RTR,
            path_mtu: u32::from(u8::from(peer.path_mtu)),
            dest_qp_num: peer.dest_qpn.get(),
            rq_psn: peer.rq_psn.get(),
            max_dest_rd_atomic: peer.max_dest_rd_atomic.min(self.dev.max_rd_atom.0),
            min_rnr_timer: peer.min_rnr_timer,
            ah_attr: self.ah(peer.dest_gid, Some(&grh)),
            ..ibv_qp_attr::default()
        };
        qp.modify(
            &mut a,
            IBV_QP_STATE
                | IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER,
        )
        .map_err(|e| os_error("modify QP to RTR", &e))?;
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_RTS,
            timeout: peer.timeout,
            retry_cnt: peer.retry_cnt,
            rnr_retry: peer.rnr_retry,
            sq_psn: peer.sq_psn.get(),
            max_rd_atomic: peer.max_rd_atomic.min(self.dev.max_rd_atom.1),
            ..ibv_qp_attr::default()
        };
        qp.modify(
            &mut a,
            IBV_QP_STATE
                | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_SQ_PSN
                | IBV_QP_MAX_QP_RD_ATOMIC,
        )
        .map_err(|e| os_error("modify QP to RTS", &e))
    }
}

/// A work completion as the access layer reads it.
pub(crate) fn wc_of(w: &ibv_wc, strange: &AtomicU32) -> Wc {
    let status = WcStatus::from(u8::try_from(w.status).unwrap_or(21));
    let opcode = match w.opcode {
        IBV_WC_SEND => WcOpcode::Send,
        IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
        IBV_WC_RDMA_READ => WcOpcode::RdmaRead,
        IBV_WC_BIND_MW => WcOpcode::BindMw,
        IBV_WC_LOCAL_INV => WcOpcode::LocalInv,
        IBV_WC_RECV => WcOpcode::Recv,
        IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvRdmaWithImm,
        _ => {
            // Meaningful on success only; an error completion's opcode is undefined.
            if status == WcStatus::Success {
                strange.fetch_add(1, Ordering::Relaxed);
            }
            WcOpcode::Send
        }
    };
    let mut wc = Wc::new(w.wr_id, status, opcode, Qpn::from_wire(w.qp_num));
    wc.byte_len = w.byte_len;
    if w.wc_flags & IBV_WC_WITH_IMM != 0 {
        wc.imm = Some(u32::from_be(w.imm_or_inv));
    }
    // A remote invalidation: IBV_WC_WITH_INV, or — rxe's user CQE copies the kernel's
    // flags, where IB_WC_WITH_INVALIDATE is 1 << 2, user space's IBV_WC_IP_CSUM_OK, which
    // no device sets for an RC receive — that bit on a receive (Linux 6.1 rxe,
    // `rxe_resp.c:do_complete`; pinned in ca_tests.rs and against rxe in tests/device.rs).
    let inv = w.wc_flags & IBV_WC_WITH_INV != 0
        || (w.opcode == IBV_WC_RECV && w.wc_flags & IBV_WC_IP_CSUM_OK != 0);
    if inv && status == WcStatus::Success {
        wc.invalidated = Some(Rkey(w.imm_or_inv));
    }
    wc
}

/// Drops a device object taken out of the table — after the table's lock is released:
/// `ibv_destroy_cq` and `ibv_destroy_qp` wait until the event thread has acked every event
/// it read for them, and the event thread takes the table's lock to find them. Dropped
/// under the lock, the destroy and the event thread waited for each other for ever (every
/// later verb timed out behind the dispatcher: logins refused "insufficient resources").
fn release<T>(gone: Option<T>) -> Option<()> {
    gone.map(drop)
}

/// A send work request appended to `chain`, resolving windows and regions in `o`. A bind
/// is recorded in `binds` (its index in the chain, the window, the window's new key): the
/// key is written into the window once the bind is posted, not before (the library reads
/// `mw->rkey` as the window's *current* key when it posts the bind).
fn push_send(
    chain: &mut SendChain,
    wr: &SendWr,
    o: &Objects,
    binds: &mut Vec<(usize, Arc<Mw>, u32)>,
) -> Result<(), VerbsError> {
    let mut flags = 0;
    if wr.flags.contains(SendFlags::SIGNALED) {
        flags |= IBV_SEND_SIGNALED;
    }
    if wr.flags.contains(SendFlags::FENCE) {
        flags |= IBV_SEND_FENCE;
    }
    if wr.flags.contains(SendFlags::SOLICITED) {
        flags |= IBV_SEND_SOLICITED;
    }
    let sges = wr.sg_list.iter().map(|s| ibv_sge {
        addr: s.addr,
        length: s.len,
        lkey: s.lkey.0,
    });
    match &wr.op {
        SendOp::Send => chain.push(wr.wr_id, IBV_WR_SEND, flags, sges, 0, (0, 0), None),
        SendOp::SendWithImm(imm) => chain.push(
            wr.wr_id,
            IBV_WR_SEND_WITH_IMM,
            flags,
            sges,
            imm.to_be(),
            (0, 0),
            None,
        ),
        SendOp::SendWithInv(rkey) => chain.push(
            wr.wr_id,
            IBV_WR_SEND_WITH_INV,
            flags,
            sges,
            rkey.0,
            (0, 0),
            None,
        ),
        SendOp::Write { remote_addr, rkey } => chain.push(
            wr.wr_id,
            IBV_WR_RDMA_WRITE,
            flags,
            sges,
            0,
            (*remote_addr, rkey.0),
            None,
        ),
        SendOp::WriteWithImm {
            remote_addr,
            rkey,
            imm,
        } => chain.push(
            wr.wr_id,
            IBV_WR_RDMA_WRITE_WITH_IMM,
            flags,
            sges,
            imm.to_be(),
            (*remote_addr, rkey.0),
            None,
        ),
        SendOp::Read { remote_addr, rkey } => chain.push(
            wr.wr_id,
            IBV_WR_RDMA_READ,
            flags,
            sges,
            0,
            (*remote_addr, rkey.0),
            None,
        ),
        SendOp::LocalInv(key) => chain.push(
            wr.wr_id,
            IBV_WR_LOCAL_INV,
            flags | IBV_SEND_FENCE,
            sges,
            *key,
            (0, 0),
            None,
        ),
        SendOp::BindMw {
            rkey,
            region,
            addr,
            len,
            access,
        } => {
            let mw = o
                .mws
                .get(&(rkey.0 >> 8))
                .ok_or_else(|| no_such("memory window", format!("{:#x}", rkey.0)))?;
            let mr = o
                .mrs
                .get(&region.0)
                .ok_or_else(|| no_such("memory region", format!("{:#x}", region.0)))?;
            binds.push((chain.len(), mw.clone(), rkey.0));
            chain.push(
                wr.wr_id,
                IBV_WR_BIND_MW,
                flags,
                core::iter::empty(),
                0,
                (0, 0),
                Some(BindTarget {
                    mw,
                    new_rkey: rkey.0,
                    mr,
                    addr: *addr,
                    length: *len,
                    access: access_bits(*access),
                }),
            );
        }
        SendOp::RegMr { .. } => {
            return Err(unsupported(
                "fast registration (REG_MR) is a kernel-only work request: under rdma-core \
                 the host fences with memory windows",
            ));
        }
    }
    Ok(())
}

impl ChannelInterface for RdmaCa {
    fn open_ca(&self, on_event: EventHandler) -> Completion<CaAttr> {
        let opened =
            self.shared
                .state
                .compare_exchange(CREATED, OPEN, Ordering::AcqRel, Ordering::Acquire);
        if opened.is_err() {
            return Completion::ready(Err(VerbsError::Closed));
        }
        *self
            .shared
            .handler
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(on_event);
        self.queue(|s| Ok(RdmaCa::ca_attr(s)))
    }

    fn close_ca(&self) -> Completion<()> {
        let closing =
            self.shared
                .state
                .compare_exchange(OPEN, CLOSING, Ordering::AcqRel, Ordering::Acquire);
        if closing.is_err() {
            return Completion::ready(Err(VerbsError::Closed));
        }
        self.queue(|s| {
            *s.handler.lock().unwrap_or_else(PoisonError::into_inner) = None;
            s.state.store(CLOSED, Ordering::Release);
            Ok(())
        })
    }

    fn query_ca(&self) -> Completion<CaAttr> {
        self.submit(|s| Ok(RdmaCa::ca_attr(s)))
    }

    fn alloc_pd(&self) -> Completion<PdId> {
        self.submit(|s| {
            let pd = Pd::alloc(&s.dev.ctx).map_err(|e| os_error("ibv_alloc_pd", &e))?;
            let mut o = s.objects.write().unwrap_or_else(PoisonError::into_inner);
            let id = o.id();
            o.pds.insert(id, pd);
            Ok(PdId(id))
        })
    }

    fn dealloc_pd(&self, pd: PdId) -> Completion<()> {
        self.submit(move |s| {
            let gone = s.objects_mut().pds.remove(&pd.0);
            release(gone).ok_or_else(|| no_such("PD", pd.0))
        })
    }

    fn reg_mr(&self, pd: PdId, spec: MrSpec) -> Completion<MrKeys> {
        self.submit(move |s| {
            let p = s
                .objects()
                .pds
                .get(&pd.0)
                .cloned()
                .ok_or_else(|| no_such("PD", pd.0))?;
            let mr = Mr::reg(
                &p,
                &spec.block,
                spec.offset,
                spec.len,
                spec.iova,
                access_bits(spec.access),
            )
            .map_err(|e| os_error("ibv_reg_mr", &e))?;
            let keys = MrKeys {
                lkey: Lkey(mr.lkey()),
                rkey: spec.access.is_remote().then_some(Rkey(mr.rkey())),
            };
            let mut o = s.objects.write().unwrap_or_else(PoisonError::into_inner);
            o.mrs.insert(mr.lkey(), Arc::new(mr));
            Ok(keys)
        })
    }

    fn alloc_fast_reg_mr(&self, _pd: PdId, _max_pages: usize) -> Completion<MrKeys> {
        Completion::ready(Err(unsupported(
            "fast-registration regions are kernel-only: under rdma-core the host fences \
             with memory windows",
        )))
    }

    fn dereg_mr(&self, keys: MrKeys) -> Completion<()> {
        self.submit(move |s| {
            let gone = s.objects_mut().mrs.remove(&keys.lkey.0);
            release(gone).ok_or_else(|| no_such("memory region", format!("{:#x}", keys.lkey.0)))
        })
    }

    fn alloc_mw(&self, pd: PdId) -> Completion<Rkey> {
        self.submit(move |s| {
            if !s.dev.caps.mem_windows {
                return Err(unsupported("the device has no type-2 memory windows"));
            }
            let p = s
                .objects()
                .pds
                .get(&pd.0)
                .cloned()
                .ok_or_else(|| no_such("PD", pd.0))?;
            let mw = Mw::alloc(&p).map_err(|e| os_error("ibv_alloc_mw", &e))?;
            let rkey = mw.rkey();
            let mut o = s.objects.write().unwrap_or_else(PoisonError::into_inner);
            o.mws.insert(rkey >> 8, Arc::new(mw));
            Ok(Rkey(rkey))
        })
    }

    fn dealloc_mw(&self, rkey: Rkey) -> Completion<()> {
        self.submit(move |s| {
            let gone = s.objects_mut().mws.remove(&(rkey.0 >> 8));
            release(gone).ok_or_else(|| no_such("memory window", format!("{:#x}", rkey.0)))
        })
    }

    fn create_cq(&self, capacity: usize) -> Completion<CqId> {
        self.submit(move |s| {
            let mut o = s.objects.write().unwrap_or_else(PoisonError::into_inner);
            let id = o.id();
            let mut cqe = u32::try_from(capacity).unwrap_or(u32::MAX);
            if s.dev.fence_binds {
                // Room for the flushes of the sentinels' requests (as many at most as the
                // consumer's own), as the send queues are made deeper for them.
                cqe = cqe.saturating_mul(2).min(s.dev.max_cqe.max(cqe));
            }
            let cq = Cq::create(&s.dev.ctx, cqe, u64::from(id), &s.dev.channel)
                .map_err(|e| os_error("ibv_create_cq", &e))?;
            o.cqs.insert(id, Arc::new(cq));
            Ok(CqId(id))
        })
    }

    fn destroy_cq(&self, cq: CqId) -> Completion<()> {
        self.submit(move |s| {
            let gone = {
                let mut o = s.objects_mut();
                let c = o.cqs.get(&cq.0).ok_or_else(|| no_such("CQ", cq.0))?;
                // A QP on it holds its handle: refused as the library refuses (EBUSY).
                if Arc::strong_count(c) > 1 {
                    return Err(os_error(
                        "ibv_destroy_cq",
                        &std::io::Error::from_raw_os_error(libc::EBUSY),
                    ));
                }
                o.cqs.remove(&cq.0)
            };
            release(gone).ok_or_else(|| no_such("CQ", cq.0))
        })
    }

    fn create_srq(&self, _max_wr: usize) -> Completion<SrqId> {
        Completion::ready(Err(VerbsError::Unsupported {
            verb: "create_srq (not used by the stack over rdma-core)",
        }))
    }

    fn modify_srq_limit(&self, _srq: SrqId, _limit: usize) -> Completion<()> {
        Completion::ready(Err(VerbsError::Unsupported {
            verb: "modify_srq_limit",
        }))
    }

    fn destroy_srq(&self, _srq: SrqId) -> Completion<()> {
        Completion::ready(Err(VerbsError::Unsupported {
            verb: "destroy_srq",
        }))
    }

    fn create_qp(&self, init: QpInit) -> Completion<QpId> {
        self.submit(move |s| {
            if init.srq.is_some() {
                return Err(VerbsError::Unsupported {
                    verb: "create_qp on an SRQ",
                });
            }
            let o = s.objects();
            let pd = o
                .pds
                .get(&init.pd.0)
                .cloned()
                .ok_or_else(|| no_such("PD", init.pd.0))?;
            let scq = o
                .cqs
                .get(&init.send_cq.0)
                .cloned()
                .ok_or_else(|| no_such("CQ", init.send_cq.0))?;
            let rcq = o
                .cqs
                .get(&init.recv_cq.0)
                .cloned()
                .ok_or_else(|| no_such("CQ", init.recv_cq.0))?;
            drop(o);
            let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
            let fenced = s.dev.fence_binds && init.qp_type == QpType::Rc;
            let mut max_send_wr = n(init.max_send_wr);
            if fenced {
                // Two sentinel requests per run of binds, and every run has a bind and a
                // SEND of the consumer's: twice as deep covers them (plus the first bind).
                max_send_wr = max_send_wr
                    .saturating_mul(2)
                    .saturating_add(1)
                    .min(s.dev.max_qp_wr.max(max_send_wr));
            }
            let cap = ibv_qp_cap {
                max_send_wr,
                max_recv_wr: n(init.max_recv_wr),
                max_send_sge: n(init.max_sge.max(1)),
                max_recv_sge: n(init.max_sge.max(1)),
                max_inline_data: 0,
            };
            let qp_type = match init.qp_type {
                QpType::Rc => IBV_QPT_RC,
                QpType::Ud => IBV_QPT_UD,
            };
            let fence = if fenced {
                let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
                Some(Fence::new(&pd, access).map_err(|e| os_error("the bind fence", &e))?)
            } else {
                None
            };
            let qp = Qp::create(&pd, &scq, &rcq, qp_type, cap, init.sq_sig_all)
                .map_err(|e| os_error("ibv_create_qp", &e))?;
            let num = qp.num();
            let entry = QpEntry {
                send: Mutex::new(SendSide {
                    fence,
                    ..SendSide::default()
                }),
                qp,
                recv: Mutex::new(RecvChain::default()),
                retired: AtomicU64::new(0),
            };
            s.objects
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .qps
                .insert(num, Arc::new(entry));
            Ok(QpId::Qp(Qpn::from_wire(num)))
        })
    }

    fn create_gsi_qp(&self, _port: u8, _init: QpInit) -> Completion<QpId> {
        Completion::ready(Err(unsupported(
            "QP1 belongs to the kernel under rdma-core (its CM and MAD services)",
        )))
    }

    fn modify_qp(&self, qp: QpId, attr: QpAttr, mask: QpAttrMask) -> Completion<()> {
        let entry = self.qp(qp);
        self.submit(move |s| {
            let e = entry?;
            let mut a = s.qp_attr(&attr);
            let bits = i32::try_from(mask.bits()).unwrap_or(0);
            e.qp.modify(&mut a, bits)
                .map_err(|err| os_error("ibv_modify_qp", &err))?;
            if mask.contains(QpAttrMask::STATE) && attr.state == QpState::Reset {
                // Back to an empty queue: a fresh sentinel, bound by the next first post.
                let mut send = e.send.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(f) = send.fence.as_mut() {
                    f.renew().map_err(|err| os_error("the bind fence", &err))?;
                }
                send.signaled_posted = 0;
                send.tail_unsignaled = false;
                e.retired.store(0, Ordering::Release);
            }
            Ok(())
        })
    }

    fn connect_rc(&self, qp: QpId, peer: RcConnect) -> Completion<()> {
        let entry = self.qp(qp);
        self.submit(move |s| s.connect_rc(&entry?.qp, &peer))
    }

    fn query_qp(&self, qp: QpId) -> Completion<QpState> {
        let entry = self.qp(qp);
        self.submit(move |_| Ok(state_of(entry?.qp.state())))
    }

    fn destroy_qp(&self, qp: QpId) -> Completion<()> {
        self.submit(move |s| {
            let QpId::Qp(n) = qp else {
                return Err(unsupported("QP1 belongs to the kernel"));
            };
            // Dropping the last handle destroys the QP (a poster mid-call holds one).
            let gone = s.objects_mut().qps.remove(&n.get());
            release(gone).ok_or_else(|| no_such("QP", n))
        })
    }

    fn post_send(&self, qp: QpId, wr: SendWr) -> Result<(), VerbsError> {
        let mut one = vec![wr];
        self.post_send_list(qp, &mut one)
    }

    fn post_send_list(&self, qp: QpId, wrs: &mut Vec<SendWr>) -> Result<(), VerbsError> {
        if let Err(e) = self.check_open() {
            wrs.clear();
            return Err(e);
        }
        let entry = match self.qp(qp) {
            Ok(e) => e,
            Err(e) => {
                wrs.clear();
                return Err(e);
            }
        };
        let mut side = entry.send.lock().unwrap_or_else(PoisonError::into_inner);
        let side = &mut *side;
        // Windows and regions named by the chain stay alive: `o` is held for the posts.
        let o = self.shared.objects();
        let r = self.post_segments(&entry, side, wrs, &o);
        side.chain.clear();
        wrs.clear();
        drop(o);
        r
    }

    fn post_recv(&self, qp: QpId, wr: RecvWr) -> Result<(), VerbsError> {
        self.check_open()?;
        let entry = self.qp(qp)?;
        let mut chain = entry.recv.lock().unwrap_or_else(PoisonError::into_inner);
        chain.clear();
        chain.push(
            wr.wr_id,
            wr.sg_list.iter().map(|s| ibv_sge {
                addr: s.addr,
                length: s.len,
                lkey: s.lkey.0,
            }),
        );
        let r = entry.qp.post_recv(&mut chain);
        chain.clear();
        r.map_err(|(_, e)| os_error("post_recv", &e))
    }

    fn post_srq_recv(&self, _srq: SrqId, _wr: RecvWr) -> Result<(), VerbsError> {
        Err(VerbsError::Unsupported {
            verb: "post_srq_recv",
        })
    }

    fn poll_cq(&self, cq: CqId, max: usize, out: &mut Vec<Wc>) -> Result<usize, VerbsError> {
        self.check_open()?;
        let c = self
            .shared
            .objects()
            .cqs
            .get(&cq.0)
            .cloned()
            .ok_or_else(|| no_such("CQ", cq.0))?;
        // The bind fence counts each QP's retired send requests.
        let o = self.shared.dev.fence_binds.then(|| self.shared.objects());
        let mut buf = [ibv_wc::default(); POLL_BATCH];
        let mut total = 0;
        let mut delivered = 0;
        while total < max {
            let want = (max - total).min(POLL_BATCH);
            let n = c
                .poll(&mut buf[..want])
                .map_err(|e| os_error("ibv_poll_cq", &e))?;
            for w in &buf[..n] {
                if is_sentinel(w.wr_id) {
                    self.sentinel_done(w);
                    continue;
                }
                if let Some(o) = o.as_ref()
                    && w.status == IBV_WC_SUCCESS
                    && !matches!(w.opcode, IBV_WC_RECV | IBV_WC_RECV_RDMA_WITH_IMM)
                    && let Some(e) = o.qps.get(&w.qp_num)
                {
                    e.retired.fetch_add(1, Ordering::Release);
                }
                out.push(wc_of(w, &self.shared.strange_completions));
                delivered += 1;
            }
            total += n;
            if n < want {
                break;
            }
        }
        Ok(delivered)
    }

    fn req_notify_cq(&self, cq: CqId, mode: ArmMode) -> Result<(), VerbsError> {
        self.check_open()?;
        let c = self
            .shared
            .objects()
            .cqs
            .get(&cq.0)
            .cloned()
            .ok_or_else(|| no_such("CQ", cq.0))?;
        c.req_notify(mode == ArmMode::Solicited)
            .map_err(|e| os_error("ibv_req_notify_cq", &e))
    }

    fn stats(&self) -> CaStats {
        let s = &self.shared;
        CaStats {
            resource_verbs: s.resource_verbs.load(Ordering::Relaxed),
            resource_verbs_at_dispatch: s.at_dispatch.load(Ordering::Relaxed),
            cq_notifications: s.cq_notifications.load(Ordering::Relaxed),
            routine_panics: s.panics.load(Ordering::Relaxed),
            fenced_binds: s.fenced_binds.load(Ordering::Relaxed),
            own_completions: s.sentinel_completions.load(Ordering::Relaxed),
        }
    }
}

fn provider(e: VerbsError) -> ProviderError {
    match e {
        VerbsError::Provider(p) => p,
        other => ProviderError::new(ProviderErrorKind::Other, other.to_string()),
    }
}

fn post_list_error(index: usize, e: &std::io::Error) -> VerbsError {
    VerbsError::PostList {
        index,
        source: provider(os_error("ibv_post_send", e)),
    }
}
