//! [`SoftCa`]: the access layer's channel interface over the software HCA
//! ([`crate::driver::Hca`]).
//!
//! A resource verb queues its engine call to the CA's completion dispatcher, a thread the
//! `SoftCa` owns (the DPC of a real HCA driver), and returns its [`Completion`]. The
//! dispatcher runs queued work in call order, at dispatch level: it makes the engine call
//! and completes the completion, so completion routines run there, never inside the
//! caller's verb call. The HCA's asynchronous events go through the same queue to the
//! consumer's handler, also at dispatch level.
//!
//! Events take that thread hop so a consumer's handler sees them in order with the
//! completions of the verbs that caused them, and never inside the stack of the engine call
//! (a port thread's receive loop or a verb's caller) that produced them — all but CQ
//! notifications. Those are the data path's interrupt (IBAL's completion callback, which a
//! real HCA driver calls from its interrupt DPC), caused by no verb: the handler gets them
//! at once on the thread that produced them, at dispatch level, outside every lock of the
//! HCA, so a handler that only queues work (issues a DPC, rings a doorbell) wakes its
//! consumer without a second thread hop. Data-path verbs (post, poll, arm) are direct
//! engine calls on the caller's thread.

use super::provider_error;
use crate::driver::Hca;
use crate::engine::{CqId, Engine, Event, QpId, RcConnect, SrqId};
use access_layer::verbs::{
    CaAttr, CaCaps, CaStats, ChannelInterface, Completion, DispatchGuard, EventHandler, MrSpec,
    PortAttr, VerbsError,
};
use ib_verbs::mr::{MrKeys, PdId};
use ib_verbs::qp::state::{QpAttrMask, QpState};
use ib_verbs::qp::{QpAttr, QpInit};
use ib_verbs::wr::{ArmMode, RecvWr, SendWr, Wc};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// The CA's life: created, then opened once, then closed for good.
const CREATED: u8 = 0;
const OPEN: u8 = 1;
/// `close_ca` was called: new verbs are refused, queued ones still run.
const CLOSING: u8 = 2;
const CLOSED: u8 = 3;

/// State shared by the verbs' callers and the dispatcher.
struct Shared {
    state: AtomicU8,
    handler: Mutex<Option<EventHandler>>,
    panics: AtomicU64,
    resource_verbs: AtomicU64,
    at_dispatch: AtomicU64,
    cq_notifications: AtomicU64,
}

impl Shared {
    fn handler(&self) -> Option<EventHandler> {
        self.handler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Delivers a CQ notification on the current thread, at dispatch level; a handler
    /// that panics is counted, as on the dispatcher.
    fn notify(&self, event: Event) {
        let Some(handler) = self.handler() else {
            return;
        };
        self.cq_notifications.fetch_add(1, Ordering::Relaxed);
        let _dispatch = DispatchGuard::enter();
        if catch_unwind(AssertUnwindSafe(|| handler(event))).is_err() {
            self.panics.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn set_handler(&self, h: Option<EventHandler>) {
        *self.handler.lock().unwrap_or_else(PoisonError::into_inner) = h;
    }
}

/// Work for the dispatcher: an engine call that completes its completion.
type Work = Box<dyn FnOnce(&Hca, &Shared) + Send>;

enum Job {
    Verb(Work),
    Event(Event),
    Stop,
}

/// A channel adapter on a software HCA. See the module doc.
pub struct SoftCa {
    hca: Arc<Hca>,
    shared: Arc<Shared>,
    jobs: Sender<Job>,
    dispatcher: Option<JoinHandle<()>>,
    /// On a simulated net: the queue the net runs instead of a dispatcher thread.
    sim: Option<Arc<SimDispatch>>,
}

/// The dispatcher of a CA on a simulated net ([`crate::sim::SimNet`]): no thread; the net's
/// owner runs its queue ([`crate::sim::SimTask`]), and so does a blocking caller
/// (`SyncCa`) before it waits.
struct SimDispatch {
    hca: Arc<Hca>,
    shared: Arc<Shared>,
    queue: Mutex<Receiver<Job>>,
}

impl crate::sim::SimTask for SimDispatch {
    fn run_queued(&self) -> usize {
        let mut n = 0;
        loop {
            // One job at a time, the queue unlocked while it runs: a routine may queue more.
            let job = self
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .try_recv();
            let Ok(job) = job else {
                return n;
            };
            n += 1;
            if !run_job(&self.hca, &self.shared, job) {
                return n;
            }
        }
    }
}

impl fmt::Debug for SoftCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SoftCa")
            .field("hca", &self.hca)
            .field("state", &self.shared.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl SoftCa {
    /// Takes over `hca` (and its event handler) and starts the completion dispatcher; the
    /// CA is not open yet ([`ChannelInterface::open_ca`]).
    pub fn new(hca: Hca) -> std::io::Result<SoftCa> {
        SoftCa::shared(Arc::new(hca))
    }

    /// As [`SoftCa::new`], over a device its caller also keeps (a test that drives the
    /// engine beside the CA's verbs).
    pub fn shared(hca: Arc<Hca>) -> std::io::Result<SoftCa> {
        let shared = Arc::new(Shared {
            state: AtomicU8::new(CREATED),
            handler: Mutex::new(None),
            panics: AtomicU64::new(0),
            resource_verbs: AtomicU64::new(0),
            at_dispatch: AtomicU64::new(0),
            cq_notifications: AtomicU64::new(0),
        });
        let (jobs, queue) = channel();
        let (dispatcher, sim) = match hca.sim_net() {
            Some(net) => {
                let sim = Arc::new(SimDispatch {
                    hca: hca.clone(),
                    shared: shared.clone(),
                    queue: Mutex::new(queue),
                });
                let task: Arc<dyn crate::sim::SimTask> = sim.clone();
                net.register(Arc::downgrade(&task));
                (None, Some(sim))
            }
            None => {
                let (hca, shared) = (hca.clone(), shared.clone());
                let t = std::thread::Builder::new()
                    .name("softca-dispatch".into())
                    .spawn(move || dispatcher(&hca, &shared, queue))?;
                (Some(t), None)
            }
        };
        // The HCA calls this from a port thread or a verb's caller, outside its locks: a CQ
        // notification goes to the handler at once (module doc); anything else is only
        // queued (an unbounded channel send never blocks).
        let events = jobs.clone();
        let direct = shared.clone();
        hca.set_event_handler(move |e| match e {
            Event::CqNotify(_) => direct.notify(e),
            _ => {
                let _ = events.send(Job::Event(e));
            }
        });
        Ok(SoftCa {
            hca,
            shared,
            jobs,
            dispatcher,
            sim,
        })
    }

    /// The HCA, for management outside the verbs (port up/down, statistics). Its event
    /// queue belongs to the CA, which drains it: events go to the consumer's handler.
    pub fn hca(&self) -> &Hca {
        &self.hca
    }

    /// How many completion routines or event handlers panicked on the dispatcher. The
    /// dispatcher survives them (the panic hook has printed each); in debug builds a
    /// verifier trip there counts here.
    pub fn routine_panics(&self) -> u64 {
        self.shared.panics.load(Ordering::Relaxed)
    }

    /// What the CA has done so far.
    pub fn stats(&self) -> CaStats {
        let s = &self.shared;
        CaStats {
            resource_verbs: s.resource_verbs.load(Ordering::Relaxed),
            resource_verbs_at_dispatch: s.at_dispatch.load(Ordering::Relaxed),
            cq_notifications: s.cq_notifications.load(Ordering::Relaxed),
            routine_panics: s.panics.load(Ordering::Relaxed),
            ..CaStats::default()
        }
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
        work: impl FnOnce(&Hca) -> Result<T, VerbsError> + Send + 'static,
    ) -> Completion<T> {
        if let Err(e) = self.check_open() {
            return Completion::ready(Err(e));
        }
        self.shared.resource_verbs.fetch_add(1, Ordering::Relaxed);
        if access_layer::verbs::in_dispatch() {
            self.shared.at_dispatch.fetch_add(1, Ordering::Relaxed);
        }
        self.queue(move |hca, _| work(hca))
    }

    /// Queues `work` whatever the state. Should the dispatcher be gone, the job drops
    /// here and its completion is abandoned (no routine can be registered yet).
    fn queue<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Hca, &Shared) -> Result<T, VerbsError> + Send + 'static,
    ) -> Completion<T> {
        let (done, completion) = Completion::pair();
        let _ = self.jobs.send(Job::Verb(Box::new(move |hca, shared| {
            done.complete(work(hca, shared));
        })));
        completion
    }

    /// A resource verb that is one engine call.
    fn engine<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine, ib_verbs::time::Time) -> Result<T, crate::engine::VerbsError>
        + Send
        + 'static,
    ) -> Completion<T> {
        self.submit(move |hca| hca.with(f).map_err(provider_error))
    }

    /// A data-path verb: a direct engine call on the caller's thread.
    fn direct<T>(
        &self,
        f: impl FnOnce(&mut Engine, ib_verbs::time::Time) -> Result<T, crate::engine::VerbsError>,
    ) -> Result<T, VerbsError> {
        self.check_open()?;
        self.hca.with(f).map_err(provider_error)
    }
}

fn ca_attr(hca: &Hca) -> CaAttr {
    hca.with(|e, _| CaAttr {
        node_guid: e.node_guid(),
        ports: (1u8..)
            .zip(e.ports())
            .map(|(port, p)| PortAttr {
                port,
                gid: p.gid(),
                active: p.active,
                link_mtu: hca.link_mtu(port),
            })
            .collect(),
        caps: CaCaps {
            fast_reg: true,
            mem_windows: false,
        },
    })
}

/// The dispatcher thread: runs queued verbs and delivers events, each at dispatch level,
/// until [`Job::Stop`].
fn dispatcher(hca: &Hca, shared: &Shared, queue: Receiver<Job>) {
    // Waiting for work is the idle loop, not a call made at dispatch level: the marker is
    // raised per job.
    while let Ok(job) = queue.recv() {
        if !run_job(hca, shared, job) {
            break;
        }
    }
}

/// Runs one job at dispatch level; false at [`Job::Stop`].
fn run_job(hca: &Hca, shared: &Shared, job: Job) -> bool {
    let run: Box<dyn FnOnce() + '_> = match job {
        Job::Stop => return false,
        Job::Verb(work) => Box::new(move || work(hca, shared)),
        Job::Event(event) => {
            // Every event also lands in the HCA's own queue, which nobody reads when a
            // handler consumes them: drain it so it stays bounded.
            while hca.poll_event().is_some() {}
            let Some(handler) = shared.handler() else {
                return true;
            };
            Box::new(move || handler(event))
        }
    };
    let _dispatch = DispatchGuard::enter();
    if catch_unwind(AssertUnwindSafe(run)).is_err() {
        shared.panics.fetch_add(1, Ordering::Relaxed);
    }
    true
}

impl Drop for SoftCa {
    fn drop(&mut self) {
        let _ = self.jobs.send(Job::Stop);
        if let Some(t) = self.dispatcher.take() {
            // Dropped by a routine on the dispatcher itself: it stops after this job and
            // drops the HCA there.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl ChannelInterface for SoftCa {
    fn stats(&self) -> CaStats {
        SoftCa::stats(self)
    }

    fn run_queued(&self) -> usize {
        self.sim
            .as_ref()
            .map_or(0, |s| crate::sim::SimTask::run_queued(&**s))
    }

    fn open_ca(&self, on_event: EventHandler) -> Completion<CaAttr> {
        let opened =
            self.shared
                .state
                .compare_exchange(CREATED, OPEN, Ordering::AcqRel, Ordering::Acquire);
        if opened.is_err() {
            return Completion::ready(Err(VerbsError::Closed));
        }
        self.shared.set_handler(Some(on_event));
        self.queue(|hca, _| Ok(ca_attr(hca)))
    }

    fn close_ca(&self) -> Completion<()> {
        let closing =
            self.shared
                .state
                .compare_exchange(OPEN, CLOSING, Ordering::AcqRel, Ordering::Acquire);
        if closing.is_err() {
            return Completion::ready(Err(VerbsError::Closed));
        }
        // Queued behind every verb accepted before: those complete first.
        self.queue(|_, shared| {
            shared.set_handler(None);
            shared.state.store(CLOSED, Ordering::Release);
            Ok(())
        })
    }

    fn query_ca(&self) -> Completion<CaAttr> {
        self.submit(|hca| Ok(ca_attr(hca)))
    }

    fn alloc_pd(&self) -> Completion<PdId> {
        self.engine(|e, _| Ok(e.alloc_pd()))
    }

    fn dealloc_pd(&self, _pd: PdId) -> Completion<()> {
        // The engine's PDs are names only; nothing to free.
        self.submit(|_| Ok(()))
    }

    fn reg_mr(&self, pd: PdId, spec: MrSpec) -> Completion<MrKeys> {
        self.engine(move |e, _| {
            e.reg_mr(
                pd,
                spec.block,
                spec.offset,
                spec.len,
                spec.iova,
                spec.access,
            )
        })
    }

    fn alloc_fast_reg_mr(&self, pd: PdId, max_pages: usize) -> Completion<MrKeys> {
        self.engine(move |e, _| e.alloc_fast_reg_mr(pd, max_pages))
    }

    fn dereg_mr(&self, keys: MrKeys) -> Completion<()> {
        self.engine(move |e, _| e.dereg_mr(keys))
    }

    fn create_cq(&self, capacity: usize) -> Completion<CqId> {
        self.engine(move |e, _| Ok(e.create_cq(capacity)))
    }

    fn destroy_cq(&self, cq: CqId) -> Completion<()> {
        self.engine(move |e, _| e.destroy_cq(cq))
    }

    fn create_srq(&self, max_wr: usize) -> Completion<SrqId> {
        self.engine(move |e, _| Ok(e.create_srq(max_wr)))
    }

    fn modify_srq_limit(&self, srq: SrqId, limit: usize) -> Completion<()> {
        self.engine(move |e, _| e.srq_set_limit(srq, limit))
    }

    fn destroy_srq(&self, _srq: SrqId) -> Completion<()> {
        // The engine cannot destroy an SRQ yet.
        self.submit(|_| {
            Err(VerbsError::Unsupported {
                verb: "destroy_srq",
            })
        })
    }

    fn create_qp(&self, init: QpInit) -> Completion<QpId> {
        self.engine(move |e, _| e.create_qp(init))
    }

    fn create_gsi_qp(&self, port: u8, init: QpInit) -> Completion<QpId> {
        self.engine(move |e, _| e.create_gsi_qp(port, init))
    }

    fn modify_qp(&self, qp: QpId, attr: QpAttr, mask: QpAttrMask) -> Completion<()> {
        self.engine(move |e, now| e.modify_qp(now, qp, &attr, mask))
    }

    fn connect_rc(&self, qp: QpId, peer: RcConnect) -> Completion<()> {
        self.engine(move |e, now| e.connect_rc(now, qp, &peer))
    }

    fn query_qp(&self, qp: QpId) -> Completion<QpState> {
        self.engine(move |e, _| {
            e.qp_state(qp).ok_or(crate::engine::VerbsError::NoSuch {
                what: "QP",
                id: qp_id_number(qp),
            })
        })
    }

    fn destroy_qp(&self, qp: QpId) -> Completion<()> {
        self.engine(move |e, now| e.destroy_qp(now, qp))
    }

    fn post_send(&self, qp: QpId, wr: SendWr) -> Result<(), VerbsError> {
        self.direct(|e, now| e.post_send(now, qp, wr))
    }

    fn post_send_list(&self, qp: QpId, wrs: &mut Vec<SendWr>) -> Result<(), VerbsError> {
        if let Err(e) = self.check_open() {
            wrs.clear();
            return Err(e);
        }
        self.hca
            .with(|e, now| e.post_send_list(now, qp, wrs.drain(..)))
            .map_err(|(index, source)| VerbsError::PostList {
                index,
                source: super::provider_error_of(source),
            })
    }

    fn post_recv(&self, qp: QpId, wr: RecvWr) -> Result<(), VerbsError> {
        self.direct(|e, now| e.post_recv(now, qp, wr))
    }

    fn post_srq_recv(&self, srq: SrqId, wr: RecvWr) -> Result<(), VerbsError> {
        self.direct(|e, _| e.post_srq_recv(srq, wr))
    }

    fn poll_cq(&self, cq: CqId, max: usize, out: &mut Vec<Wc>) -> Result<usize, VerbsError> {
        self.direct(|e, _| e.poll_cq(cq, max, out))
    }

    fn req_notify_cq(&self, cq: CqId, mode: ArmMode) -> Result<(), VerbsError> {
        self.direct(|e, _| e.req_notify_cq(cq, mode))
    }
}

/// The number a [`QpId`] is reported under in errors.
fn qp_id_number(qp: QpId) -> u64 {
    match qp {
        QpId::Qp(n) => n.get().into(),
        QpId::Gsi(port) => port.into(),
    }
}
