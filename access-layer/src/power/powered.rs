//! [`PoweredCa`]: a channel interface that queues requests while its HCA is powered down and
//! replays them, in call order, on power-up.
//!
//! The gate is a read-write lock over the power state. A verb takes it shared and, in D0,
//! calls the provider under it (verbs never block, so this is short); otherwise it queues
//! the request under it. A transition takes it exclusively to change the state, so no verb
//! is half-way into the provider when the state changes. Power-up drains the queue one
//! request at a time and switches to D0 in the same exclusive section that finds the queue
//! empty: a request made during the replay queues behind it, so call order is kept.
//!
//! Data-path polling ([`ChannelInterface::poll_cq`], [`ChannelInterface::req_notify_cq`])
//! passes through in every state: completions generated before the power-down stay
//! reachable, and none is lost.
#[allow(unused_imports)]
use crate::prelude::*;

use super::{PowerDevice, PowerState, PowerSwitch};
use crate::verbs::dispatch::DispatchGuard;
use crate::verbs::{ChannelInterface, Completion, EventHandler, VerbsError};
use core::cell::Cell;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use ib_verbs::ids::Qpn;
use ib_verbs::qp::state::{QpAttrMask, QpState};
use ib_verbs::qp::{QpAttr, QpInit};
use ib_verbs::wr::{SendOp, Wc, WcOpcode, WcStatus};
use ib_verbs::{CqId, Event, QpId};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};

/// The error of a request refused because the power-down queue (of `max` requests) is full.
pub fn queue_full(max: usize) -> VerbsError {
    VerbsError::PoweredDownQueueFull { max }
}

/// How a [`PoweredCa`] behaves while down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerPolicy {
    /// Requests queued while down, at most; beyond, resource verbs complete with
    /// [`queue_full`] and posts return it.
    pub max_queued: usize,
    /// Whether power-down resets the QPs made through this CA to ERR, as losing power loses
    /// their connection state: their outstanding and replayed work requests are flushed.
    pub reset_qps: bool,
}

impl Default for PowerPolicy {
    fn default() -> Self {
        PowerPolicy {
            max_queued: 4096,
            reset_qps: false,
        }
    }
}

/// Counters of a [`PoweredCa`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PowerStats {
    /// Requests queued while down.
    pub queued: u64,
    /// Queued requests replayed on power-up.
    pub replayed: u64,
    /// Requests refused because the queue was full.
    pub refused_full: u64,
    /// Work completions made here with `WrFlushErr` for posts the provider refused on replay
    /// (or that a close failed).
    pub flushed_here: u64,
    /// Posts that failed on replay with no CQ to report on (a QP or SRQ this CA did not
    /// create). Should stay 0.
    pub unreported: u64,
}

/// The gate's states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    D0,
    GoingDown,
    D3,
    GoingUp,
}

/// What to do with a queued request.
enum Replay<'a, C> {
    /// Issue it to the provider.
    Run(&'a Arc<Shared<C>>),
    /// Complete it with this error.
    Fail(&'a Arc<Shared<C>>, VerbsError),
}

type Item<C> = Box<dyn FnOnce(Replay<'_, C>) + Send>;

thread_local! {
    /// Set while this thread runs the consumer's event handler, so a synthetic notification
    /// made from inside it does not wait for itself.
    static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
}

/// The consumer's event handler, called one event at a time.
struct Events {
    user: EventHandler,
    serial: Mutex<()>,
}

impl Events {
    fn deliver(&self, e: Event) {
        if IN_HANDLER.with(Cell::get) {
            return (self.user)(e);
        }
        let _one = self.serial.lock().unwrap_or_else(PoisonError::into_inner);
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                IN_HANDLER.with(|f| f.set(false));
            }
        }
        IN_HANDLER.with(|f| f.set(true));
        let _reset = Reset;
        (self.user)(e);
    }
}

#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    replayed: AtomicU64,
    refused_full: AtomicU64,
    flushed_here: AtomicU64,
    unreported: AtomicU64,
}

struct Shared<C> {
    inner: C,
    policy: PowerPolicy,
    gate: RwLock<Gate>,
    queue: Mutex<VecDeque<Item<C>>>,
    /// Set under the queue lock by `close_ca`.
    closed: AtomicBool,
    /// QPs made through this CA and their (send, receive) CQs.
    qps: Mutex<HashMap<QpId, (CqId, CqId)>>,
    /// Work completions made here, per CQ, handed out after the provider's.
    synthetic: Mutex<HashMap<CqId, VecDeque<Wc>>>,
    events: Mutex<Option<Arc<Events>>>,
    counters: Counters,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only short critical sections of this module run under these locks.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<C: ChannelInterface + PowerSwitch + 'static> Shared<C> {
    fn gate(&self) -> RwLockReadGuard<'_, Gate> {
        self.gate.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_gate(&self, g: Gate) {
        *self.gate.write().unwrap_or_else(PoisonError::into_inner) = g;
    }

    /// Queues `item`; call with the gate held shared. Gives it back with the reason when
    /// the CA is closed or the queue is full.
    fn enqueue(&self, item: Item<C>) -> Result<(), (Item<C>, VerbsError)> {
        let mut q = lock(&self.queue);
        if self.closed.load(Ordering::Acquire) {
            return Err((item, VerbsError::Closed));
        }
        if q.len() >= self.policy.max_queued {
            self.counters.refused_full.fetch_add(1, Ordering::Relaxed);
            return Err((item, queue_full(self.policy.max_queued)));
        }
        q.push_back(item);
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Replays the queue in order, then opens the gate (see the module doc).
    fn drain(self: &Arc<Self>) {
        loop {
            let item = {
                let mut g = self.gate.write().unwrap_or_else(PoisonError::into_inner);
                match lock(&self.queue).pop_front() {
                    Some(item) => item,
                    None => {
                        *g = Gate::D0;
                        return;
                    }
                }
            };
            self.counters.replayed.fetch_add(1, Ordering::Relaxed);
            item(Replay::Run(self));
        }
    }

    /// Reports failed posts of `qp` as `WrFlushErr` completions on its send (`send`) or
    /// receive CQ, and notifies the consumer.
    fn flush_here(&self, qp: QpId, send: bool, wrs: &[(u64, WcOpcode)]) {
        let n = wrs.len() as u64;
        let cq = lock(&self.qps)
            .get(&qp)
            .map(|&(s, r)| if send { s } else { r });
        let Some(cq) = cq else {
            self.counters.unreported.fetch_add(n, Ordering::Relaxed);
            return;
        };
        let qpn = match qp {
            QpId::Qp(n) => n,
            QpId::Gsi(_) => Qpn::GSI,
        };
        lock(&self.synthetic).entry(cq).or_default().extend(
            wrs.iter()
                .map(|&(id, op)| Wc::new(id, WcStatus::WrFlushErr, op, qpn)),
        );
        self.counters.flushed_here.fetch_add(n, Ordering::Relaxed);
        // A spurious notification is harmless (the consumer polls and finds nothing); a
        // missing one would strand these completions.
        let events = lock(&self.events).clone();
        if let Some(events) = events {
            let _dispatch = DispatchGuard::enter();
            events.deliver(Event::CqNotify(cq));
        }
    }

    /// Remembers `qp`'s CQs once it exists.
    fn track(self: &Arc<Self>, c: Completion<QpId>, init: &QpInit) -> Completion<QpId> {
        let (done, out) = Completion::pair();
        let (s, cqs) = (self.clone(), (init.send_cq, init.recv_cq));
        c.on_complete(move |r| {
            if let Ok(qp) = r {
                lock(&s.qps).insert(qp, cqs);
            }
            done.complete(r);
        });
        out
    }
}

/// The opcode a work completion of `op` carries.
fn send_opcode(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) => WcOpcode::Send,
        SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        SendOp::LocalInv(_) => WcOpcode::LocalInv,
        _ => WcOpcode::RegMr,
    }
}

/// What [`join_all`] runs at the end.
type Then = Box<dyn FnOnce() + Send>;

/// Runs `then` once every completion in `cs` has completed (whatever its result).
fn join_all(cs: Vec<Completion<()>>, then: impl FnOnce() + Send + 'static) {
    if cs.is_empty() {
        return then();
    }
    let left = Arc::new(AtomicUsize::new(cs.len()));
    let then: Arc<Mutex<Option<Then>>> = Arc::new(Mutex::new(Some(Box::new(then))));
    for c in cs {
        let (left, then) = (left.clone(), then.clone());
        c.on_complete(move |_| {
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                let f = lock(&then).take();
                if let Some(f) = f {
                    f();
                }
            }
        });
    }
}

/// A channel adapter with power states over provider `C`. See the module doc.
pub struct PoweredCa<C> {
    shared: Arc<Shared<C>>,
}

impl<C> fmt::Debug for PoweredCa<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gate = *self
            .shared
            .gate
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("PoweredCa")
            .field("gate", &gate)
            .finish_non_exhaustive()
    }
}

impl<C: ChannelInterface + PowerSwitch + 'static> PoweredCa<C> {
    /// Wraps `inner`, powered on (D0).
    pub fn new(inner: C, policy: PowerPolicy) -> PoweredCa<C> {
        PoweredCa {
            shared: Arc::new(Shared {
                inner,
                policy,
                gate: RwLock::new(Gate::D0),
                queue: Mutex::new(VecDeque::new()),
                closed: AtomicBool::new(false),
                qps: Mutex::new(HashMap::new()),
                synthetic: Mutex::new(HashMap::new()),
                events: Mutex::new(None),
                counters: Counters::default(),
            }),
        }
    }

    /// The provider.
    pub fn inner(&self) -> &C {
        &self.shared.inner
    }

    /// D0 only once a power-up has replayed its queue; D3 from the start of a power-down.
    pub fn power_state(&self) -> PowerState {
        match *self.shared.gate() {
            Gate::D0 => PowerState::D0,
            _ => PowerState::D3,
        }
    }

    /// Requests waiting for power-up.
    pub fn queued(&self) -> usize {
        lock(&self.shared.queue).len()
    }

    /// The counters.
    pub fn stats(&self) -> PowerStats {
        let c = &self.shared.counters;
        PowerStats {
            queued: c.queued.load(Ordering::Relaxed),
            replayed: c.replayed.load(Ordering::Relaxed),
            refused_full: c.refused_full.load(Ordering::Relaxed),
            flushed_here: c.flushed_here.load(Ordering::Relaxed),
            unreported: c.unreported.load(Ordering::Relaxed),
        }
    }

    /// A resource verb: straight to the provider in D0, queued otherwise.
    fn verb<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Arc<Shared<C>>) -> Completion<T> + Send + 'static,
    ) -> Completion<T> {
        let s = &self.shared;
        let refused = {
            let gate = s.gate();
            if *gate == Gate::D0 {
                return f(s);
            }
            let (done, completion) = Completion::pair();
            let item: Item<C> = Box::new(move |r| match r {
                Replay::Run(s) => f(s).on_complete(move |res| done.complete(res)),
                Replay::Fail(_, e) => done.complete(Err(e)),
            });
            match s.enqueue(item) {
                Ok(()) => return completion,
                Err((item, e)) => (item, e, completion),
            }
        };
        let (item, e, completion) = refused;
        item(Replay::Fail(s, e));
        completion
    }

    /// A post: straight to the provider in D0 (`direct`), queued otherwise (`item`).
    fn post<W>(
        &self,
        wr: W,
        direct: impl FnOnce(&C, W) -> Result<(), VerbsError>,
        item: impl FnOnce(W) -> Item<C>,
    ) -> Result<(), VerbsError> {
        let s = &self.shared;
        let gate = s.gate();
        if *gate == Gate::D0 {
            return direct(&s.inner, wr);
        }
        s.enqueue(item(wr)).map_err(|(_, e)| e)
    }
}

impl<C: ChannelInterface + PowerSwitch + 'static> PowerDevice for PoweredCa<C> {
    fn name(&self) -> String {
        "hca".into()
    }

    /// Closes the gate, resets the QPs if the policy says so, then switches the HCA off.
    fn power_down(&self) -> Completion<()> {
        let s = self.shared.clone();
        {
            let mut g = s.gate.write().unwrap_or_else(PoisonError::into_inner);
            match *g {
                Gate::D0 => *g = Gate::GoingDown,
                Gate::GoingDown | Gate::D3 => return Completion::ready(Ok(())),
                Gate::GoingUp => {
                    return Completion::ready(Err(VerbsError::Unsupported {
                        verb: "power_down while powering up",
                    }));
                }
            }
        }
        let resets = if s.policy.reset_qps {
            let qps: Vec<QpId> = lock(&s.qps).keys().copied().collect();
            let err = QpAttr {
                state: QpState::Err,
                ..QpAttr::default()
            };
            qps.into_iter()
                .map(|qp| s.inner.modify_qp(qp, err, QpAttrMask::STATE))
                .collect()
        } else {
            Vec::new()
        };
        let (done, completion) = Completion::pair();
        join_all(resets, move || {
            let s2 = s.clone();
            s.inner.set_power(PowerState::D3).on_complete(move |r| {
                match &r {
                    Ok(()) => s2.set_gate(Gate::D3),
                    // Still on: replay what queued meanwhile and reopen.
                    Err(_) => s2.drain(),
                }
                done.complete(r);
            });
        });
        completion
    }

    /// Switches the HCA on, replays the queue, then opens the gate.
    fn power_up(&self) -> Completion<()> {
        let s = self.shared.clone();
        {
            let mut g = s.gate.write().unwrap_or_else(PoisonError::into_inner);
            match *g {
                Gate::D3 => *g = Gate::GoingUp,
                Gate::GoingUp | Gate::D0 => return Completion::ready(Ok(())),
                Gate::GoingDown => {
                    return Completion::ready(Err(VerbsError::Unsupported {
                        verb: "power_up while powering down",
                    }));
                }
            }
        }
        let (done, completion) = Completion::pair();
        let s2 = s.clone();
        s.inner.set_power(PowerState::D0).on_complete(move |r| {
            match &r {
                Ok(()) => s2.drain(),
                Err(_) => s2.set_gate(Gate::D3),
            }
            done.complete(r);
        });
        completion
    }
}

mod ci_impl;
