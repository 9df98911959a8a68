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

use crate::port::{PortHandle, Request, SrbId, SrbStatus, SystemMemory};
use srp_initiator::{PortSide, SrbExt};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use win_port::Srb;

use super::SrpDriver;

/// What the worker and the entry points share, under [`Side::lock`].
#[derive(Default)]
pub(crate) struct SideState {
    /// Requests [`Driver::start_request`](crate::port::Driver::start_request) queued for
    /// the worker, oldest first; a request the transport gave back goes to the front.
    pub(crate) incoming: VecDeque<Request<SrbExt>>,
    /// Every request the driver holds: incoming or in the transport.
    pub(crate) held: HashMap<SrbId, Request<SrbExt>>,
    /// The worker has something to do.
    pub(crate) woken: bool,
    /// The channel is logging in: nothing is submitted until it is up.
    pub(crate) holding: bool,
    /// The worker is to exit.
    pub(crate) stop: bool,
    /// Counts the worker's rounds that did work and the completions handed to the port:
    /// what a passive-level waiter ([`Side::wait_for`]) waits to change.
    pub(crate) progress: u64,
}

/// The driver's side of the transport (see the module doc).
pub(crate) struct Side {
    pub(crate) port: PortHandle<SrpDriver>,
    pub(crate) memory: Arc<SystemMemory>,
    /// Serializes moving requests into the transport against taking them all back.
    pub(crate) gate: Mutex<()>,
    state: Mutex<SideState>,
    pub(crate) wake: Condvar,
    /// Signalled when `progress` moves.
    progressed: Condvar,
    /// Completions the transport produced for requests a reset or removal had already
    /// handed to the port.
    pub(crate) dropped_completions: AtomicU64,
}

impl Side {
    pub(crate) fn new(port: PortHandle<SrpDriver>, memory: Arc<SystemMemory>) -> Side {
        Side {
            port,
            memory,
            gate: Mutex::new(()),
            state: Mutex::new(SideState::default()),
            wake: Condvar::new(),
            progressed: Condvar::new(),
            dropped_completions: AtomicU64::new(0),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SideState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn gate(&self) -> MutexGuard<'_, ()> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a request for the worker (dispatch level: a short lock, a notify).
    pub(crate) fn queue(&self, request: Request<SrbExt>) {
        let mut s = self.lock();
        s.held.insert(request.request_id(), request.clone());
        s.incoming.push_back(request);
        s.woken = true;
        drop(s);
        self.wake.notify_one();
    }

    /// Completes `request` with `status` now, if the driver still holds it.
    pub(crate) fn finish(&self, s: &mut SideState, request: &Request<SrbExt>, status: SrbStatus) {
        if s.held.remove(&request.request_id()).is_some() {
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
            s.held.remove(&r.request_id());
        }
        let inside = s.held.drain().map(|(_, r)| r).collect();
        (waiting, inside)
    }

    /// Something moved (a round did work, a request went back to the port): wakes the
    /// passive-level waiters.
    pub(crate) fn progress(&self, s: &mut SideState) {
        s.progress = s.progress.wrapping_add(1);
        self.progressed.notify_all();
    }

    /// Waits (passive level: removal, power) until `done()` holds or `bound` passes,
    /// looking again each time the worker makes progress; whether it holds. `done` runs
    /// without the side's lock held (it may take the transport's).
    pub(crate) fn wait_for(&self, bound: Duration, mut done: impl FnMut() -> bool) -> bool {
        let end = std::time::Instant::now() + bound;
        loop {
            let seen = self.lock().progress;
            if done() {
                return true;
            }
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            let s = self.lock();
            drop(
                self.progressed
                    .wait_timeout_while(s, left, |s| s.progress == seen)
                    .unwrap_or_else(PoisonError::into_inner),
            );
        }
    }

    /// How many requests the driver holds.
    pub(crate) fn held(&self) -> usize {
        self.lock().held.len()
    }

    /// Waits (passive level, the worker) until woken or `timeout` passes.
    pub(crate) fn wait_for_work(&self, timeout: Duration) -> MutexGuard<'_, SideState> {
        let s = self.lock();
        let (mut s, _) = self
            .wake
            .wait_timeout_while(s, timeout, |s| !s.woken && !s.stop)
            .unwrap_or_else(PoisonError::into_inner);
        s.woken = false;
        s
    }
}

impl PortSide for Side {
    fn complete(&self, srb: &Srb<SrbExt>) {
        let mut s = self.lock();
        match s.held.remove(&srb.id()) {
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
        self.lock().woken = true;
        self.wake.notify_one();
    }

    fn hold(&self, _timeout_secs: u32) {
        self.lock().holding = true;
    }

    fn release(&self) {
        let mut s = self.lock();
        s.holding = false;
        s.woken = true;
        drop(s);
        self.wake.notify_one();
    }

    fn system_memory(&self) -> Option<Arc<SystemMemory>> {
        Some(self.memory.clone())
    }
}
