//! The port's state shared by submitters, the driver's threads and the port's own: one
//! lock over the queues and tables (never held while a driver entry runs), the wrapper
//! that runs every entry at its level under the verifier, starting requests, the
//! completion and flush paths, and the bugcheck.

use super::driver::Driver;
use super::handle::PortHandle;
use super::lifecycle::{LifeEvent, Lifecycle};
use super::queue::{Queued, Queues};
use super::request::{End, FlushCause, QueueTag, Request, RequestLookaside, RequestState};
use super::verifier::{EntryPoint, Violation};
use super::{LuAddress, PortConfig, PortError, PortEvent, SrbId, SrbResult, SrbStatus};
use crate::model::{DriverInfo, Level};
use access_layer::verbs::{Completer, CompletionPool};
use ib_verbs::IdTable;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};
use win_port::SystemMemory;
use win_port::entry::{DispatchCalls, EntryFault, run_entry};
use win_port::srb::Lookaside;

/// Pages of a port's own memory when none is given (16 MiB).
const DEFAULT_PAGES: usize = 4096;

/// How long a waiter on [`Shared::changed`] sleeps between looks (a bugcheck may come from
/// a thread that does not signal).
const RECHECK: Duration = Duration::from_millis(10);

/// A request the driver holds.
pub(crate) struct Outstanding<X> {
    pub(crate) request: Request<X>,
    pub(crate) completer: Completer<SrbResult>,
    /// When the driver got it, on the port's clock.
    pub(crate) started: Instant,
    /// Its timeout already fired.
    pub(crate) timed_out: bool,
}

/// Everything under the port lock.
pub(crate) struct State<X> {
    pub(crate) life: Lifecycle,
    pub(crate) queues: Queues<X>,
    /// By id (no allocation per request); whatever walks it (timeouts, flushes) sorts
    /// the ids first, so it does so in submit order.
    pub(crate) outstanding: IdTable<SrbId, Outstanding<X>>,
    /// Completions for submitters, delivered outside the lock.
    pub(crate) done: Vec<(Completer<SrbResult>, SrbResult)>,
    pub(crate) events: Vec<PortEvent>,
    pub(crate) violations: Vec<Violation>,
    /// Entries running at dispatch level, for the watchdog.
    pub(crate) calls: DispatchCalls<EntryPoint>,
    pub(crate) info: DriverInfo,
    /// Resets running (they hold the queue).
    pub(crate) resetting: u32,
    /// A thread is starting requests; `pump_again`: another asked meanwhile.
    pub(crate) pumping: bool,
    pump_again: bool,
    /// The DPC thread has work.
    pub(crate) kicked: bool,
    /// The timer thread sleeps long (the driver holds nothing): wake it for a request or
    /// a dispatch-level entry.
    pub(crate) timer_idle: bool,
    pub(crate) shutdown: bool,
}

/// The port shared between its handles and threads.
pub(crate) struct Shared<D: Driver> {
    pub(crate) driver: D,
    pub(crate) config: PortConfig,
    pub(crate) memory: Arc<SystemMemory>,
    /// SRBs, requests and submitters' completions the port ended, kept for new requests
    /// (the system's lookaside lists): a request in the steady state allocates none.
    pub(crate) lookaside: Lookaside<D::Extension>,
    requests: RequestLookaside<D::Extension>,
    pub(crate) completions: Arc<CompletionPool<SrbResult>>,
    state: Mutex<State<D::Extension>>,
    /// The last delivered batch's emptied vector, for the next batch.
    spare_done: Mutex<Vec<(Completer<SrbResult>, SrbResult)>>,
    /// Wakes the DPC thread.
    pub(crate) dpc_wake: Condvar,
    /// Wakes the timer thread out of its idle sleep.
    pub(crate) timer_wake: Condvar,
    /// A request ended, a pump or a reset finished, or the port bugchecked.
    pub(crate) changed: Condvar,
    bugchecked: AtomicBool,
    unloaded: AtomicBool,
    next_id: AtomicU64,
    me: Weak<Shared<D>>,
}

impl<D: Driver> Shared<D> {
    pub(crate) fn new(driver: D, config: PortConfig, me: Weak<Self>) -> Self {
        let memory = config
            .memory
            .clone()
            .unwrap_or_else(|| SystemMemory::new(DEFAULT_PAGES));
        let info = DriverInfo::default();
        Shared {
            driver,
            memory,
            lookaside: Lookaside::default(),
            requests: RequestLookaside::default(),
            completions: CompletionPool::new(),
            state: Mutex::new(State {
                life: Lifecycle::Starting,
                queues: Queues::new(usize::from(info.tags_per_lu)),
                outstanding: IdTable::new(),
                done: Vec::new(),
                events: Vec::new(),
                violations: Vec::new(),
                calls: DispatchCalls::default(),
                info,
                resetting: 0,
                pumping: false,
                pump_again: false,
                kicked: false,
                timer_idle: false,
                shutdown: false,
            }),
            config,
            spare_done: Mutex::new(Vec::new()),
            dpc_wake: Condvar::new(),
            timer_wake: Condvar::new(),
            changed: Condvar::new(),
            bugchecked: AtomicBool::new(false),
            unloaded: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            me,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State<D::Extension>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Now, on the port's clock.
    pub(crate) fn now(&self) -> Instant {
        self.config.clock.now()
    }

    /// What the driver gets to call back on.
    pub(crate) fn handle(&self) -> PortHandle<D> {
        PortHandle::new(self.me.clone())
    }

    pub(crate) fn next_id(&self) -> SrbId {
        SrbId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn is_bugchecked(&self) -> bool {
        self.bugchecked.load(Ordering::Acquire)
    }

    pub(crate) fn is_unloaded(&self) -> bool {
        self.unloaded.load(Ordering::Acquire)
    }

    pub(crate) fn set_unloaded(&self) {
        self.unloaded.store(true, Ordering::Release);
    }

    /// Moves the port along its table; an illegal move is the owner's error.
    pub(crate) fn transition(
        s: &mut State<D::Extension>,
        event: LifeEvent,
    ) -> Result<Lifecycle, PortError> {
        match s.life.on(event) {
            Ok(next) => {
                s.life = next;
                Ok(next)
            }
            Err((Lifecycle::BugChecked, _)) => Err(PortError::BugChecked),
            Err((from, event)) => Err(PortError::IllegalTransition { from, event }),
        }
    }

    /// Wakes the timer thread if it sleeps long.
    fn wake_timer(&self, s: &mut State<D::Extension>) {
        if s.timer_idle {
            s.timer_idle = false;
            self.timer_wake.notify_all();
        }
    }

    /// Hands every waiting completion to its submitter (routines run at dispatch level,
    /// here), with no lock held.
    pub(crate) fn deliver(&self) -> usize {
        // The batch's vector goes back as the next one's spare: no allocation per batch.
        let mut batch = std::mem::take(
            &mut *self
                .spare_done
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        std::mem::swap(&mut self.lock().done, &mut batch);
        let n = batch.len();
        for (completer, result) in batch.drain(..) {
            completer.complete(Ok(result));
        }
        *self
            .spare_done
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = batch;
        n
    }

    /// Waits (in real time, rechecking) until `ready` holds; false if the port bugchecked
    /// or `deadline` (on the port's clock) passed first.
    pub(crate) fn wait_until(
        &self,
        deadline: Option<Instant>,
        mut ready: impl FnMut(&State<D::Extension>) -> bool,
    ) -> bool {
        let mut s = self.lock();
        loop {
            if ready(&s) {
                return true;
            }
            if s.life == Lifecycle::BugChecked || deadline.is_some_and(|d| self.now() >= d) {
                return false;
            }
            s = self
                .changed
                .wait_timeout(s, RECHECK)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Runs driver entry `entry` at its level, watched by the dispatch watchdog, catching
    /// panics and blocking calls at dispatch level as violations.
    pub(crate) fn call<R>(&self, entry: EntryPoint, f: impl FnOnce() -> R) -> Result<R, Violation> {
        let dispatch = entry.level() == Level::Dispatch;
        let ticket = dispatch.then(|| {
            let mut s = self.lock();
            let now = self.now();
            let ticket = s.calls.enter(entry, now);
            self.wake_timer(&mut s);
            ticket
        });
        let r = run_entry(dispatch, f);
        if let Some(t) = ticket {
            self.lock().calls.leave(t);
        }
        r.map_err(|fault| match fault {
            EntryFault::BlockingAtDispatch(call) => Violation::BlockingAtDispatch { entry, call },
            EntryFault::Panic(message) => Violation::DriverPanic { entry, message },
        })
    }

    /// Bugchecks with `v` and returns the error for the owner.
    pub(crate) fn fail(&self, v: Violation) -> PortError {
        self.bugcheck(v.clone());
        PortError::BugCheck(v)
    }

    /// Starts requests (the driver's StartIo-like entry, serialized, at dispatch level)
    /// until the queues hold the rest; returns how many. A caller finding another thread
    /// at it leaves the work to that one.
    pub(crate) fn pump(&self) -> usize {
        {
            let mut s = self.lock();
            if s.pumping {
                s.pump_again = true;
                return 0;
            }
            s.pumping = true;
        }
        let handle = self.handle();
        let mut started = 0;
        loop {
            let request = {
                let mut s = self.lock();
                let open = s.life == Lifecycle::Running && s.resetting == 0 && !s.shutdown;
                match open.then(|| s.queues.next()).flatten() {
                    Some((
                        Queued {
                            owner, completer, ..
                        },
                        tag,
                    )) => {
                        let request = self.requests.start(owner, tag);
                        let started = self.now();
                        self.wake_timer(&mut s);
                        s.outstanding.insert(
                            request.id(),
                            Outstanding {
                                request: request.clone(),
                                completer,
                                started,
                                timed_out: false,
                            },
                        );
                        request
                    }
                    None if s.pump_again => {
                        s.pump_again = false;
                        continue;
                    }
                    None => {
                        s.pumping = false;
                        drop(s);
                        self.changed.notify_all();
                        return started;
                    }
                }
            };
            let r = self.call(EntryPoint::StartRequest, || {
                self.driver.start_request(&handle, request)
            });
            if let Err(v) = r {
                self.bugcheck(v);
            }
            started += 1;
        }
    }

    /// The driver's completion (rules b, c, d): hands the request back to its submitter.
    pub(crate) fn complete_request(&self, request: &Request<D::Extension>) {
        let id = request.id();
        let mut s = self.lock();
        if s.life == Lifecycle::BugChecked {
            return;
        }
        let ours = s
            .outstanding
            .get(id)
            .is_some_and(|o| o.request.same(request));
        if !ours {
            let v = match request.state() {
                RequestState::Completed => Violation::DoubleCompletion { id },
                RequestState::Flushed(cause) => Violation::CompletionAfterFlush { id, cause },
                // Started, yet not ours: another port's request.
                RequestState::Started => Violation::UnknownTag {
                    lu: request.address(),
                    tag: request.tag(),
                    id: Some(id),
                },
            };
            drop(s);
            return self.bugcheck(v);
        }
        let status = request.status();
        if matches!(
            status.code(),
            SrbStatus::PENDING | SrbStatus::INTERNAL_ERROR
        ) {
            drop(s);
            return self.bugcheck(Violation::BadStatus { id, status });
        }
        if let Some(o) = s.outstanding.remove(id) {
            let ended = o.request.end(End::Complete);
            debug_assert!(ended.is_ok(), "an outstanding request is started");
            o.request.owner().mark_completed();
            s.queues.ended(o.request.address(), o.request.tag());
            s.done
                .push((o.completer, o.request.owner().take_result(None, false)));
            self.retire(o.request);
        }
        s.kicked = true;
        drop(s);
        self.dpc_wake.notify_all();
        self.changed.notify_all();
    }

    /// The driver's completion by tag alone (rule b: an unknown tag is a violation).
    pub(crate) fn complete_tagged(&self, lu: LuAddress, tag: QueueTag, status: SrbStatus) {
        let request = {
            let s = self.lock();
            if s.life == Lifecycle::BugChecked {
                return;
            }
            Self::outstanding_by_tag(&s, lu, tag)
        };
        match request {
            Some(r) => {
                r.set_status(status);
                self.complete_request(&r);
            }
            None => self.bugcheck(Violation::UnknownTag { lu, tag, id: None }),
        }
    }

    /// The request outstanding in the driver under `tag` on `lu` (a tag a waiting request
    /// reserved is not).
    pub(crate) fn outstanding_by_tag(
        s: &State<D::Extension>,
        lu: LuAddress,
        tag: QueueTag,
    ) -> Option<Request<D::Extension>> {
        let id = s.queues.lus.get(&lu)?.tags.get(tag)?;
        s.outstanding.get(*id).map(|o| o.request.clone())
    }

    /// Completes a request the driver holds on the port's own authority.
    pub(crate) fn flush(
        &self,
        s: &mut State<D::Extension>,
        id: SrbId,
        status: SrbStatus,
        cause: FlushCause,
    ) {
        if let Some(o) = s.outstanding.remove(id) {
            let ended = o.request.end(End::Flush(cause));
            debug_assert!(ended.is_ok(), "an outstanding request is started");
            o.request.owner().mark_completed();
            s.queues.ended(o.request.address(), o.request.tag());
            let result = o.request.owner().take_result(Some(status), true);
            s.done.push((o.completer, result));
            self.retire(o.request);
        }
    }

    /// Keeps an ended request and its SRB for new ones.
    fn retire(&self, request: Request<D::Extension>) {
        self.lookaside.retire(request.owner().srb().clone());
        self.requests.retire(request);
    }

    /// Completes a request the driver never saw with `status`.
    pub(crate) fn fail_queued(
        s: &mut State<D::Extension>,
        item: Queued<D::Extension>,
        status: SrbStatus,
    ) {
        item.owner.mark_completed();
        let result = item.owner.take_result(Some(status), true);
        s.done.push((item.completer, result));
    }

    /// A verifier violation: record it, fail everything queued or outstanding with
    /// INTERNAL_ERROR (delivered from here: the DPC thread may be the one stuck in the
    /// driver), accept nothing more. Later completions from the driver are ignored.
    pub(crate) fn bugcheck(&self, violation: Violation) {
        let mut s = self.lock();
        s.violations.push(violation.clone());
        if s.life == Lifecycle::BugChecked {
            return;
        }
        tracing::error!(%violation, "iSCSI-model port bugcheck");
        s.events.push(PortEvent::BugCheck(violation));
        if Self::transition(&mut s, LifeEvent::BugCheck).is_err() {
            // Unloaded: nothing is left to fail.
            return;
        }
        self.bugchecked.store(true, Ordering::Release);
        for id in s.outstanding.ids_in_order() {
            self.flush(&mut s, id, SrbStatus::INTERNAL_ERROR, FlushCause::BugCheck);
        }
        for item in s.queues.drain(None) {
            Self::fail_queued(&mut s, item, SrbStatus::INTERNAL_ERROR);
        }
        drop(s);
        self.deliver();
        self.changed.notify_all();
        self.dpc_wake.notify_all();
    }

    /// A driver service called after unload: recorded (the port is gone for the driver).
    pub(crate) fn after_unload(&self, call: &'static str) {
        self.bugcheck(Violation::CallAfterUnload { call });
    }

    /// The driver reported `lu` gone (`gone`) or back: a gone LU's waiting requests fail
    /// with NO_DEVICE and new ones are refused the same way.
    pub(crate) fn set_lu_gone(&self, lu: LuAddress, gone: bool) {
        let mut s = self.lock();
        s.queues.lu(lu).gone = gone;
        if gone {
            for item in s.queues.drain(Some(lu)) {
                Self::fail_queued(&mut s, item, SrbStatus::NO_DEVICE);
            }
            s.events.push(PortEvent::DeviceRemoved(lu));
        } else {
            s.events.push(PortEvent::DeviceArrived(lu));
        }
        s.kicked = true;
        drop(s);
        self.dpc_wake.notify_all();
    }
}
