//! [`Side`]: the driver's half of the SRP transport's [`PortSide`] — the requests the
//! driver holds (waiting for its worker, or in the transport), the worker's wake-ups, and
//! the completion of each request to the port exactly once.
//!
//! Locks, in order: `gate` (held by the worker while it moves a request into the
//! transport, and by a reset or removal while it takes everything back), then `state`,
//! then the port's own. A request is completed to the port only while `state` is held and
//! only if it is still in `held`: a reset or removal that emptied `held` has made every
//! request the port's (rule c), and a completion the transport produces for one of them
//! afterwards is dropped here, counted.
//!
//! Sleeping (no `std` needed): the worker sleeps on one event (a kernel event in a driver,
//! a condition variable with `std`: `access_layer::verbs::new_event`), cleared under the
//! state lock before it sleeps and set under the same lock by whoever wakes it, so no
//! wake-up is lost; a passive-level waiter ([`Side::wait_for`]) sleeps on an event of its
//! own that the next progress sets, its deadline on the transport's device clock.

use crate::model::{IscsiPortCalls, Request};
use access_layer::verbs::{KernelEvent, new_event};
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use core::time::Duration;
use ib_verbs::IdTable;
use ib_verbs::sync::{Lock, LockGuard};
use ib_verbs::time::Time;
use srp_initiator::{PortSide, SrbExt};
use win_port::{Srb, SrbId, SrbStatus, SystemMemory};

/// The port as the SRP driver calls it.
pub(crate) type PortCalls = Arc<dyn IscsiPortCalls<SrbExt>>;

/// What the worker and the entry points share, under [`Side::lock`].
#[derive(Default)]
pub(crate) struct SideState {
    /// Requests the driver's `start_request` queued for the worker, oldest first; a
    /// request the transport gave back goes to the front.
    pub(crate) incoming: VecDeque<Request<SrbExt>>,
    /// Every request the driver holds: incoming or in the transport.
    pub(crate) held: IdTable<SrbId, Request<SrbExt>>,
    /// The worker has something to do.
    pub(crate) woken: bool,
    /// The channel is logging in: nothing is submitted until it is up.
    pub(crate) holding: bool,
    /// The worker is to exit.
    pub(crate) stop: bool,
    /// Counts the worker's rounds that did work and the completions handed to the port:
    /// what a passive-level waiter ([`Side::wait_for`]) waits to change.
    pub(crate) progress: u64,
    /// The worker sleeps on [`Side::wake_event`] (so a wake-up sets it).
    sleeping: bool,
    /// Passive-level waiters' events, set when `progress` moves.
    watchers: Vec<Arc<dyn KernelEvent>>,
}

/// The driver's side of the transport (see the module doc).
pub(crate) struct Side {
    pub(crate) port: PortCalls,
    pub(crate) memory: Arc<SystemMemory>,
    /// Serializes moving requests into the transport against taking them all back.
    gate: Lock<()>,
    state: Lock<SideState>,
    /// What the worker sleeps on.
    wake_event: Arc<dyn KernelEvent>,
    /// Completions the transport produced for requests a reset or removal had already
    /// handed to the port.
    pub(crate) dropped_completions: AtomicU64,
}

impl Side {
    /// The side of a driver on `port`; `None` when there is no event to sleep on (no
    /// `std`, and the driver's glue installed no kernel events).
    pub(crate) fn new(port: PortCalls, memory: Arc<SystemMemory>) -> Option<Side> {
        Some(Side {
            port,
            memory,
            gate: Lock::new(()),
            state: Lock::new(SideState::default()),
            wake_event: new_event()?,
            dropped_completions: AtomicU64::new(0),
        })
    }

    pub(crate) fn lock(&self) -> LockGuard<'_, SideState> {
        self.state.lock()
    }

    pub(crate) fn gate(&self) -> LockGuard<'_, ()> {
        self.gate.lock()
    }

    /// Marks work for the worker and wakes it if it sleeps (under the state lock).
    fn wake_worker(&self, s: &mut SideState) {
        s.woken = true;
        if s.sleeping {
            self.wake_event.set();
        }
    }

    /// Tells the worker to exit and wakes it.
    pub(crate) fn stop(&self) {
        let mut s = self.lock();
        s.stop = true;
        self.wake_worker(&mut s);
    }

    /// Queues a request for the worker (dispatch level: a short lock, a wake-up).
    pub(crate) fn queue(&self, request: Request<SrbExt>) {
        let mut s = self.lock();
        s.held.insert(request.request_id(), request.clone());
        s.incoming.push_back(request);
        self.wake_worker(&mut s);
    }

    /// Completes `request` with `status` now, if the driver still holds it.
    pub(crate) fn finish(&self, s: &mut SideState, request: &Request<SrbExt>, status: SrbStatus) {
        if s.held.remove(request.request_id()).is_some() {
            request.set_status(status);
            self.port.complete_request(request);
        }
    }

    /// Takes back every request the driver holds (a reset, a removal): from now on they
    /// are the port's, or the caller's to fail. Returns those that never reached the
    /// transport and those that did.
    pub(crate) fn take_all(&self) -> (Vec<Request<SrbExt>>, Vec<Request<SrbExt>>) {
        let mut s = self.lock();
        let waiting: Vec<_> = s.incoming.drain(..).collect();
        for r in &waiting {
            s.held.remove(r.request_id());
        }
        let inside = s.held.drain_by_id().into_iter().map(|(_, r)| r).collect();
        (waiting, inside)
    }

    /// Something moved (a round did work, a request went back to the port): wakes the
    /// passive-level waiters.
    pub(crate) fn progress(&self, s: &mut SideState) {
        s.progress = s.progress.wrapping_add(1);
        for w in s.watchers.drain(..) {
            w.set();
        }
    }

    /// Waits (passive level: removal, power) until `done()` holds or `bound` passes on
    /// the clock `now` reads (the transport's device clock), looking again each time the
    /// worker makes progress; whether it holds. `done` runs without the side's lock held
    /// (it may take the transport's).
    pub(crate) fn wait_for(
        &self,
        bound: Duration,
        now: impl Fn() -> Time,
        mut done: impl FnMut() -> bool,
    ) -> bool {
        let end = now() + bound;
        loop {
            let seen = self.lock().progress;
            if done() {
                return true;
            }
            let left = end.since(now());
            if left.is_zero() {
                return false;
            }
            let Some(event) = new_event() else {
                return false;
            };
            {
                let mut s = self.lock();
                if s.progress != seen {
                    continue;
                }
                s.watchers.push(event.clone());
            }
            if !event.wait(Some(left)) {
                // The rest of the bound passed with no progress.
                self.lock().watchers.retain(|w| !Arc::ptr_eq(w, &event));
                return done();
            }
        }
    }

    /// How many requests the driver holds.
    pub(crate) fn held(&self) -> usize {
        self.lock().held.len()
    }

    /// Waits (passive level, the worker) until woken or `timeout` passes; returns with the
    /// state locked and the wake-up consumed.
    pub(crate) fn wait_for_work(&self, timeout: Duration) -> LockGuard<'_, SideState> {
        let mut s = self.lock();
        if !s.woken && !s.stop {
            // Cleared under the lock a waker sets it under: no wake-up is lost.
            self.wake_event.clear();
            s.sleeping = true;
            drop(s);
            self.wake_event.wait(Some(timeout));
            s = self.lock();
            s.sleeping = false;
        }
        s.woken = false;
        s
    }
}

impl PortSide for Side {
    fn complete(&self, srb: &Srb<SrbExt>) {
        let mut s = self.lock();
        match s.held.remove(srb.id()) {
            // Under the lock, so a reset or removal cannot hand it to the port meanwhile.
            Some(request) => {
                self.port.complete_request(&request);
                self.progress(&mut s);
            }
            None => {
                self.dropped_completions.fetch_add(1, Relaxed);
                tracing::debug!(id = %srb.id(), "a completion for a request the port already flushed");
            }
        }
    }

    fn wake(&self) {
        self.wake_worker(&mut self.lock());
    }

    fn hold(&self, _timeout_secs: u32) {
        self.lock().holding = true;
    }

    fn release(&self) {
        let mut s = self.lock();
        s.holding = false;
        self.wake_worker(&mut s);
    }

    fn system_memory(&self) -> Option<Arc<SystemMemory>> {
        Some(self.memory.clone())
    }
}

#[cfg(all(test, feature = "std"))]
#[path = "side_tests.rs"]
mod tests;
