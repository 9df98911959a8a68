//! Completion objects, the IRP analogue: a verb returns a [`Completion`] at once, and the
//! provider later completes it through the matching [`Completer`], exactly once.
//!
//! The result goes to exactly one consumer: the completion routine registered with
//! [`Completion::on_complete`], or else the first of [`Completion::try_take`],
//! [`Completion::wait`], [`Completion::wait_timeout`] or an `.await`. Every other consumer
//! gets [`VerbsError::AlreadyClaimed`], and every registered routine is called exactly once.
//! Routines run at dispatch level ([`super::in_dispatch`]) and never under this module's
//! lock, so they may register further routines and start further verbs, but not block.
#[allow(unused_imports)]
use crate::prelude::*;

use super::VerbsError;
use super::dispatch::DispatchGuard;
#[cfg(any(not(feature = "std"), test))]
use super::kernel_wait::{EventWaker, KernelEvent};
#[cfg(feature = "std")]
use super::verifier;
use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use ib_verbs::sync::{Lock, LockGuard};
#[cfg(feature = "std")]
use std::sync::{Condvar, PoisonError};
#[cfg(feature = "std")]
use std::time::{Duration, Instant};

/// A completion routine.
type Routine<T> = Box<dyn FnOnce(Result<T, VerbsError>) + Send>;

enum Slot<T> {
    /// Not completed yet.
    Pending,
    /// Completed; nobody has taken the result.
    Ready(Result<T, VerbsError>),
    /// Completed and delivered.
    Claimed,
}

struct State<T> {
    slot: Slot<T>,
    routine: Option<Routine<T>>,
    wakers: Vec<Waker>,
}

impl<T> State<T> {
    /// The result for a taker, once completed.
    fn take_if_done(&mut self) -> Option<Result<T, VerbsError>> {
        match core::mem::replace(&mut self.slot, Slot::Claimed) {
            Slot::Pending => {
                self.slot = Slot::Pending;
                None
            }
            Slot::Ready(r) => Some(r),
            Slot::Claimed => Some(Err(VerbsError::AlreadyClaimed)),
        }
    }
}

struct Inner<T> {
    state: Lock<State<T>>,
    /// Wakes blocked waiters (`std`; a kernel caller takes the routine or `.await`).
    #[cfg(feature = "std")]
    done: Condvar,
}

impl<T> Inner<T> {
    fn new() -> Arc<Inner<T>> {
        Arc::new(Inner {
            state: Lock::new(State {
                slot: Slot::Pending,
                routine: None,
                wakers: Vec::new(),
            }),
            #[cfg(feature = "std")]
            done: Condvar::new(),
        })
    }

    fn lock(&self) -> LockGuard<'_, State<T>> {
        // Routines never run under this lock, so a poisoned lock only means a panic in
        // this module's own short critical sections; the state is still consistent.
        self.state.lock()
    }

    fn complete(&self, result: Result<T, VerbsError>) {
        let (routine, wakers) = {
            let mut s = self.lock();
            if !matches!(s.slot, Slot::Pending) {
                debug_assert!(false, "completed twice");
                return;
            }
            let wakers = core::mem::take(&mut s.wakers);
            match s.routine.take() {
                Some(routine) => {
                    s.slot = Slot::Claimed;
                    (Some((routine, result)), wakers)
                }
                None => {
                    s.slot = Slot::Ready(result);
                    (None, wakers)
                }
            }
        };
        #[cfg(feature = "std")]
        self.done.notify_all();
        wakers.into_iter().for_each(Waker::wake);
        if let Some((routine, result)) = routine {
            run_routine(routine, result);
        }
    }
}

/// Calls a completion routine at dispatch level.
fn run_routine<T>(routine: Routine<T>, result: Result<T, VerbsError>) {
    let _dispatch = DispatchGuard::enter();
    routine(result);
}

/// The consumer's side of an asynchronous operation: a cheap clonable handle; all clones
/// share one result, delivered once (see the module doc).
pub struct Completion<T> {
    inner: Arc<Inner<T>>,
}

/// The provider's side: completes the operation once. Dropping it uncompleted completes
/// it with [`VerbsError::Abandoned`], so no consumer waits forever.
pub struct Completer<T> {
    inner: Option<Arc<Inner<T>>>,
    /// Where the completed object goes for reuse, if it came from a pool.
    pool: Option<Arc<CompletionPool<T>>>,
}

/// Completion objects kept for reuse, as IRPs come from a lookaside list: one is handed
/// out again once its result was delivered and every handle to it is gone, so an
/// operation started through [`CompletionPool::pair`] allocates nothing in the steady
/// state. A pool is per user (a port, a channel), shared by its threads.
pub struct CompletionPool<T> {
    retired: Lock<Vec<Arc<Inner<T>>>>,
}

/// Completed objects a pool keeps at most.
const POOL_DEPTH: usize = 256;
/// Retired objects one `pair` looks at (the oldest are likeliest to be free).
const POOL_SCAN: usize = 8;

impl<T> fmt::Debug for CompletionPool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionPool").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> CompletionPool<T> {
    /// An empty pool.
    pub fn new() -> Arc<CompletionPool<T>> {
        Arc::new(CompletionPool {
            retired: Lock::new(Vec::new()),
        })
    }

    /// [`Completion::pair`], reusing a completed object when one is free.
    pub fn pair(self: &Arc<Self>) -> (Completer<T>, Completion<T>) {
        let reused = {
            let mut r = self.retired.lock();
            let free = r
                .iter()
                .take(POOL_SCAN)
                .position(|a| Arc::strong_count(a) == 1);
            free.map(|i| r.swap_remove(i))
        };
        let inner = match reused {
            Some(mut inner) => {
                if let Some(i) = Arc::get_mut(&mut inner) {
                    let s = i.state.get_mut();
                    s.slot = Slot::Pending;
                    s.routine = None;
                    s.wakers.clear();
                }
                inner
            }
            None => Inner::new(),
        };
        (
            Completer {
                inner: Some(inner.clone()),
                pool: Some(self.clone()),
            },
            Completion { inner },
        )
    }
}

impl<T> CompletionPool<T> {
    fn retire(&self, inner: Arc<Inner<T>>) {
        let mut r = self.retired.lock();
        if r.len() < POOL_DEPTH {
            r.push(inner);
        }
    }
}

impl<T> Clone for Completion<T> {
    fn clone(&self) -> Self {
        Completion {
            inner: self.inner.clone(),
        }
    }
}

impl<T> fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.inner.lock().slot {
            Slot::Pending => "pending",
            Slot::Ready(_) => "ready",
            Slot::Claimed => "claimed",
        };
        f.debug_struct("Completion").field("state", &state).finish()
    }
}

impl<T> fmt::Debug for Completer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Completion<T> {
    /// A new pending operation: the provider keeps the [`Completer`], the consumer gets the
    /// [`Completion`].
    pub fn pair() -> (Completer<T>, Completion<T>) {
        let inner = Inner::new();
        (
            Completer {
                inner: Some(inner.clone()),
                pool: None,
            },
            Completion { inner },
        )
    }

    /// An operation that is already complete (e.g. refused before it started).
    pub fn ready(result: Result<T, VerbsError>) -> Completion<T> {
        let (completer, completion) = Completion::pair();
        completer.complete(result);
        completion
    }

    /// Whether the operation has completed (its result may already be claimed).
    pub fn is_complete(&self) -> bool {
        !matches!(self.inner.lock().slot, Slot::Pending)
    }

    /// Registers the completion routine: `routine` gets the result at dispatch level, when
    /// the operation completes, or right here if it already has. A routine registered after
    /// the result went to another consumer (or a second routine) gets
    /// [`VerbsError::AlreadyClaimed`]. Never blocks.
    pub fn on_complete(&self, routine: impl FnOnce(Result<T, VerbsError>) + Send + 'static) {
        let now = {
            let mut s = self.inner.lock();
            match s.slot {
                Slot::Pending if s.routine.is_none() => {
                    s.routine = Some(Box::new(routine));
                    return;
                }
                Slot::Pending => Err(VerbsError::AlreadyClaimed),
                Slot::Ready(_) | Slot::Claimed => {
                    s.take_if_done().unwrap_or(Err(VerbsError::AlreadyClaimed))
                }
            }
        };
        run_routine(Box::new(routine), now);
    }

    /// The result, if the operation completed and no other consumer claimed it (then
    /// `Some(Err(AlreadyClaimed))`); `None` while pending. Never blocks.
    pub fn try_take(&self) -> Option<Result<T, VerbsError>> {
        self.inner.lock().take_if_done()
    }

    /// Blocks until the operation completes and returns its result: only for threads that
    /// may block. At dispatch level this trips the [`verifier`] (a panic in debug builds,
    /// [`VerbsError::BlockingAtDispatch`] in release) and leaves the completion untouched,
    /// so the caller can still take the asynchronous path.
    #[cfg(feature = "std")]
    pub fn wait(&self) -> Result<T, VerbsError> {
        verifier::may_block("Completion::wait")?;
        let mut s = self.inner.lock();
        loop {
            if let Some(r) = s.take_if_done() {
                return r;
            }
            s = self
                .inner
                .done
                .wait(s)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// As [`Completion::wait`], giving up with [`VerbsError::TimedOut`] after `timeout`
    /// (the operation goes on; its result can still be taken later).
    #[cfg(feature = "std")]
    pub fn wait_timeout(&self, timeout: Duration) -> Result<T, VerbsError> {
        verifier::may_block("Completion::wait_timeout")?;
        let deadline = Instant::now() + timeout;
        let mut s = self.inner.lock();
        loop {
            if let Some(r) = s.take_if_done() {
                return r;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return Err(VerbsError::TimedOut);
            };
            s = self
                .inner
                .done
                .wait_timeout(s, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

/// The blocking waits with no `std` (a kernel driver): the waiter polls the completion as a
/// future and sleeps on a kernel event ([`super::kernel_wait`]) the completion sets; without
/// the kernel's calls installed a wait is [`VerbsError::Unsupported`].
#[cfg(not(feature = "std"))]
impl<T: Send + 'static> Completion<T> {
    /// As the `std` build's `wait`: blocks until the operation completes (passive level).
    pub fn wait(&self) -> Result<T, VerbsError> {
        self.wait_kernel("Completion::wait", None)
    }

    /// As the `std` build's `wait_timeout`.
    pub fn wait_timeout(&self, timeout: core::time::Duration) -> Result<T, VerbsError> {
        self.wait_kernel("Completion::wait_timeout", Some(timeout))
    }

    fn wait_kernel(
        &self,
        call: &'static str,
        timeout: Option<core::time::Duration>,
    ) -> Result<T, VerbsError> {
        super::verifier::may_block(call)?;
        let Some(kernel) = super::kernel_wait::kernel_wait() else {
            return Err(VerbsError::Unsupported { verb: call });
        };
        self.wait_on_event(&(kernel.new_event)(), timeout)
    }
}

/// The kernel wait itself: built where it is used, the `no_std` build and the tests.
#[cfg(any(not(feature = "std"), test))]
impl<T: Send + 'static> Completion<T> {
    /// Waits on `event` (a kernel event with no `std`; any [`KernelEvent`] in tests): polls
    /// the completion as a future whose waker sets the event, and sleeps on the event
    /// between polls. Only the completion sets it, once its result is stored, so a wait
    /// that ends with the event unset is the timeout.
    pub(crate) fn wait_on_event(
        &self,
        event: &Arc<dyn KernelEvent>,
        timeout: Option<core::time::Duration>,
    ) -> Result<T, VerbsError> {
        let waker = Waker::from(Arc::new(EventWaker(event.clone())));
        let mut cx = Context::from_waker(&waker);
        let mut this = self.clone();
        loop {
            if let Poll::Ready(r) = Pin::new(&mut this).poll(&mut cx) {
                return r;
            }
            if !event.wait(timeout) {
                return Err(VerbsError::TimedOut);
            }
        }
    }
}

/// Awaiting takes the result like [`Completion::try_take`]; any executor works, as the
/// completing thread wakes every task that polled.
impl<T: Send + 'static> Future for Completion<T> {
    type Output = Result<T, VerbsError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.inner.lock();
        if let Some(r) = s.take_if_done() {
            return Poll::Ready(r);
        }
        if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            s.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl<T> Completer<T> {
    /// Completes the operation: runs the completion routine (here, at dispatch level) or
    /// hands the result to the first taker, and wakes waiters and tasks.
    pub fn complete(mut self, result: Result<T, VerbsError>) {
        if let Some(inner) = self.inner.take() {
            inner.complete(result);
            if let Some(pool) = self.pool.take() {
                pool.retire(inner);
            }
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.complete(Err(VerbsError::Abandoned));
        }
    }
}

#[cfg(test)]
#[path = "completion_tests.rs"]
mod tests;
