//! The port's state shared by submitters, the miniport's notifications and the port's
//! worker: one lock over the queues and tables (the port's spin lock; never held while a
//! miniport routine runs), the StartIo lock, the call wrapper that runs every routine at
//! dispatch level under the verifier, the completion path and the bugcheck.
//!
//! The tables are keyed by SRB id (`ib_verbs::IdTable`: no allocation per request), and
//! whatever walks them — timeouts, the bugcheck, a reset's check — sorts the ids first, so
//! it does so in submit order on every run (the simulator replays a run from its seed).

use super::PortMode;
use super::miniport::{Miniport, PortConfigurationInfo, SupportedControlTypes};
use super::queue::Queues;
use super::services::PortServices;
use super::srb::{LuAddress, Srb, SrbId, SrbResult};
use super::status::SrbStatus;
use super::verifier::{Routine, Violation};
use super::{PortConfig, PortEvent};
use access_layer::verbs::Completer;
use ib_verbs::IdTable;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};
use win_port::entry::{DispatchCalls, EntryFault, run_entry};

/// The adapter's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunState {
    /// Requests flow.
    Running,
    /// Stopped (or stopping): requests are queued, none started.
    Stopped,
    /// A verifier violation stopped the port for good.
    BugChecked,
}

/// An SRB the miniport holds.
#[derive(Debug)]
pub(crate) struct Owned<X> {
    pub(crate) srb: Srb<X>,
    /// When StartIo got it (None: between BuildIo and StartIo).
    pub(crate) started: Option<Instant>,
    /// Its timeout already fired.
    pub(crate) timed_out: bool,
}

/// Everything under the port lock.
#[derive(Debug)]
pub(crate) struct State<X> {
    pub(crate) run: RunState,
    pub(crate) queues: Queues<Srb<X>>,
    pub(crate) owned: IdTable<SrbId, Owned<X>>,
    pub(crate) completers: IdTable<SrbId, Completer<SrbResult>>,
    /// Completions for the worker to deliver, in order.
    pub(crate) done: Vec<(Completer<SrbResult>, SrbResult)>,
    pub(crate) events: Vec<PortEvent>,
    pub(crate) violations: Vec<Violation>,
    /// Routines running at dispatch level, for the DPC watchdog.
    pub(crate) calls: DispatchCalls<Routine>,
    pub(crate) info: PortConfigurationInfo,
    pub(crate) supported: SupportedControlTypes,
    pub(crate) shutdown: bool,
    /// The miniport's DPC is queued (`StorPortIssueDpc`).
    pub(crate) dpc_queued: bool,
    /// When HwTimer is due (`RequestTimerCall`).
    pub(crate) timer_at: Option<Instant>,
    /// The DPC and timer threads sleep long: the port holds no request (see
    /// [`Shared::quiet`]); whoever gives them one wakes them ([`Shared::wake_idle`]).
    pub(crate) dpc_idle: bool,
    pub(crate) timer_idle: bool,
    /// [`PortMode::Manual`]: when the timer thread would have last ticked (its schedule:
    /// the next tick is `tick` later); None while the port is quiet (the thread asleep).
    pub(crate) last_tick: Option<Instant>,
}

/// The port shared between its handles and threads.
pub(crate) struct Shared<M: Miniport> {
    pub(crate) miniport: M,
    pub(crate) context: M::HwContext,
    pub(crate) config: PortConfig,
    /// The machine's memory: request buffers live in it.
    pub(crate) memory: std::sync::Arc<super::SystemMemory>,
    /// Completed SRBs, for new requests.
    pub(crate) lookaside: super::srb::Lookaside<M::SrbExtension>,
    /// Completion objects of finished requests, for new ones.
    pub(crate) completions: std::sync::Arc<access_layer::verbs::CompletionPool<super::SrbResult>>,
    pub(crate) state: Mutex<State<M::SrbExtension>>,
    /// Wakes the DPC thread ([`Shared::kick`]).
    pub(crate) dpc_wake: Condvar,
    /// Wakes the timer thread from its idle sleep.
    pub(crate) timer_wake: Condvar,
    pub(crate) bugchecked: AtomicBool,
    startio: Mutex<bool>,
    startio_free: Condvar,
    next_id: AtomicU64,
    me: Weak<Shared<M>>,
}

/// Holds the StartIo lock.
pub(crate) struct StartIoLock<'a> {
    lock: &'a Mutex<bool>,
    free: &'a Condvar,
}

impl Drop for StartIoLock<'_> {
    fn drop(&mut self) {
        *self.lock.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.free.notify_one();
    }
}

impl<M: Miniport> Shared<M> {
    pub(crate) fn new(
        miniport: M,
        context: M::HwContext,
        config: PortConfig,
        me: Weak<Self>,
    ) -> Self {
        let memory = config
            .memory
            .clone()
            .unwrap_or_else(|| super::SystemMemory::new(super::memory::DEFAULT_PAGES));
        Shared {
            miniport,
            context,
            memory,
            lookaside: Default::default(),
            completions: access_layer::verbs::CompletionPool::new(),
            state: Mutex::new(State {
                run: RunState::Stopped,
                queues: Queues::new(config.lu_queue_depth, config.busy_retry),
                owned: IdTable::new(),
                completers: IdTable::new(),
                done: Vec::new(),
                events: Vec::new(),
                violations: Vec::new(),
                calls: DispatchCalls::default(),
                info: PortConfigurationInfo::default(),
                supported: SupportedControlTypes::default(),
                shutdown: false,
                dpc_queued: false,
                timer_at: None,
                dpc_idle: false,
                timer_idle: false,
                last_tick: None,
            }),
            config,
            dpc_wake: Condvar::new(),
            timer_wake: Condvar::new(),
            bugchecked: AtomicBool::new(false),
            startio: Mutex::new(false),
            startio_free: Condvar::new(),
            next_id: AtomicU64::new(1),
            me,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State<M::SrbExtension>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Now, on the port's clock (never `Instant::now()`: under the simulator the clock is
    /// virtual).
    pub(crate) fn now(&self) -> Instant {
        self.config.clock.now()
    }

    /// Whether the owner drives the port ([`PortMode::Manual`]).
    pub(crate) fn manual(&self) -> bool {
        self.config.mode == PortMode::Manual
    }

    /// Wakes the DPC thread: the state changed (work is marked in it — a queued DPC,
    /// completions, a released request — which is all a manual-mode port, with no thread
    /// to wake, looks at: [`Port::next_due`](super::Port::next_due)).
    pub(crate) fn kick(&self) {
        self.dpc_wake.notify_all();
    }

    /// What the miniport gets to call back on.
    pub(crate) fn services(&self) -> PortServices<M> {
        PortServices::new(self.me.clone())
    }

    pub(crate) fn next_id(&self) -> SrbId {
        SrbId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn is_bugchecked(&self) -> bool {
        self.bugchecked.load(Ordering::Acquire)
    }

    /// Takes the StartIo lock; None once the port bugchecked (a StartIo may be stuck
    /// holding it forever). In manual mode the one thread never waits for it: held means
    /// the owner called back into the port from inside HwStartIo (re-entry), which panics
    /// (inside a miniport routine the verifier reports the panic) rather than deadlock.
    pub(crate) fn start_io_lock(&self) -> Option<StartIoLock<'_>> {
        let mut held = self.startio.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if self.is_bugchecked() {
                return None;
            }
            assert!(
                !(*held && self.manual()),
                "manual-mode port re-entered while the StartIo lock is held"
            );
            if !*held {
                *held = true;
                return Some(StartIoLock {
                    lock: &self.startio,
                    free: &self.startio_free,
                });
            }
            held = self
                .startio_free
                .wait_timeout(held, Duration::from_millis(10))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Runs miniport routine `f` (at dispatch level if `dispatch`), watched by the DPC
    /// watchdog, catching panics and blocking calls as violations.
    pub(crate) fn call<R>(
        &self,
        routine: Routine,
        dispatch: bool,
        f: impl FnOnce() -> R,
    ) -> Result<R, Violation> {
        let ticket = dispatch.then(|| {
            let mut s = self.lock();
            let now = self.now();
            // The DPC watchdog watches it.
            let ticket = s.calls.enter(routine, now);
            if s.timer_idle {
                s.timer_idle = false;
                self.timer_wake.notify_all();
            }
            ticket
        });
        let r = run_entry(dispatch, f);
        if let Some(t) = ticket {
            self.lock().calls.leave(t);
        }
        r.map_err(|fault| match fault {
            EntryFault::BlockingAtDispatch(call) => Violation::BlockingAtDispatch { routine, call },
            EntryFault::Panic(message) => Violation::MiniportPanic { routine, message },
        })
    }

    /// RequestComplete: hands the SRB back to its submitter (through the worker).
    pub(crate) fn request_complete(&self, srb: &Srb<M::SrbExtension>) {
        if !srb.mark_completed() {
            if !self.is_bugchecked() {
                self.bugcheck(Violation::DoubleCompletion { id: srb.id() });
            }
            return;
        }
        let status = srb.status();
        if matches!(
            status.code(),
            SrbStatus::PENDING | SrbStatus::INTERNAL_ERROR
        ) {
            self.bugcheck(Violation::BadStatus {
                id: srb.id(),
                status,
            });
            return;
        }
        let busy = status.code() == SrbStatus::BUSY;
        // BUSY: StorPort discards the SRB and issues a new one (windows.md §2.4).
        let reissue = busy.then(|| srb.reissue(&self.lookaside));
        let result = (!busy).then(|| srb.take_result(None, false));
        let mut s = self.lock();
        if s.run == RunState::BugChecked {
            return;
        }
        let Some(owned) = s.owned.remove(srb.id()) else {
            drop(s);
            self.bugcheck(Violation::NotOwned { id: srb.id() });
            return;
        };
        s.queues.completed(srb.address());
        if let Some(again) = reissue {
            let now = self.now();
            s.queues
                .requeue(srb.address(), again, now, self.config.tick);
        } else if let (Some(c), Some(result)) = (s.completers.remove(srb.id()), result) {
            s.done.push((c, result));
        }
        drop(s);
        self.lookaside.retire(owned.srb);
        self.kick();
    }

    /// Completes an SRB the miniport holds on the port's own authority (`status`).
    pub(crate) fn force_complete(
        &self,
        s: &mut State<M::SrbExtension>,
        id: SrbId,
        status: SrbStatus,
    ) {
        if let Some(o) = s.owned.remove(id) {
            s.queues.completed(o.srb.address());
            o.srb.mark_completed();
            if let Some(c) = s.completers.remove(id) {
                s.done.push((c, o.srb.take_result(Some(status), true)));
            }
        }
    }

    /// Completes a request the miniport never saw with `status`.
    pub(crate) fn complete_unstarted(
        &self,
        s: &mut State<M::SrbExtension>,
        srb: &Srb<M::SrbExtension>,
        status: SrbStatus,
    ) {
        srb.mark_completed();
        if let Some(c) = s.completers.remove(srb.id()) {
            s.done.push((c, srb.take_result(Some(status), true)));
        }
    }

    /// Whether the port holds no request and runs no routine: nothing can time out, no
    /// hold can expire with a request behind it. Its threads may then sleep long.
    pub(crate) fn quiet(s: &State<M::SrbExtension>) -> bool {
        s.owned.is_empty()
            && s.calls.is_empty()
            && s.done.is_empty()
            && s.queues.lus.values().all(|q| q.waiting.is_empty())
    }

    /// Wakes the DPC and timer threads out of an idle sleep (a request or a routine call
    /// is coming); cheap when they are not asleep.
    /// In manual mode this starts the timer's schedule instead.
    pub(crate) fn wake_idle(&self, s: &mut State<M::SrbExtension>) {
        if self.manual() && s.last_tick.is_none() {
            s.last_tick = Some(self.now());
        }
        if s.dpc_idle {
            s.dpc_idle = false;
            self.dpc_wake.notify_all();
        }
        if s.timer_idle {
            s.timer_idle = false;
            self.timer_wake.notify_all();
        }
    }

    /// A verifier violation: record it, fail everything with INTERNAL_ERROR, accept
    /// nothing more. Later completions from the miniport are ignored.
    pub(crate) fn bugcheck(&self, violation: Violation) {
        let mut s = self.lock();
        s.violations.push(violation.clone());
        if s.run == RunState::BugChecked {
            return;
        }
        s.run = RunState::BugChecked;
        self.bugchecked.store(true, Ordering::Release);
        s.events.push(PortEvent::BugCheck(violation));
        let owned: Vec<SrbId> = s.owned.ids_in_order();
        for id in owned {
            self.force_complete(&mut s, id, SrbStatus::INTERNAL_ERROR);
        }
        for srb in s.queues.drain_all() {
            self.complete_unstarted(&mut s, &srb, SrbStatus::INTERNAL_ERROR);
        }
        // Delivered from here: the DPC thread may be the one stuck in the miniport.
        let done = std::mem::take(&mut s.done);
        drop(s);
        for (completer, result) in done {
            completer.complete(Ok(result));
        }
        self.kick();
        self.startio_free.notify_all();
    }

    /// Refuses waiting requests of a removed LU with NO_DEVICE.
    pub(crate) fn flush_lu(&self, s: &mut State<M::SrbExtension>, lu: LuAddress) {
        let waiting: Vec<_> = s.queues.lu(lu).waiting.drain(..).collect();
        for (srb, _) in waiting {
            self.complete_unstarted(s, &srb, SrbStatus::NO_DEVICE);
        }
    }
}
