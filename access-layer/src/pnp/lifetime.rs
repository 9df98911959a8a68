//! Client lifetime (ARCHITECTURE §3 item 9, "client reference counting"): a registered
//! client holds a reference on its owner while it is open, and once [`ClientHandle::close`]
//! returns, none of its callbacks runs again.
//!
//! Each client is a `Slot`: its callback (which captures the owner), a count of callbacks
//! in flight and its life (open → closing → released), under one mutex. A deliverer
//! `Slot::enter`s before calling (refused once closing) and `Slot::exit`s after; close
//! marks the slot closing, and whoever brings the in-flight count to zero — the closer, or
//! the last callback to return — drops the callback (and with it the owner) outside the
//! lock, then marks the slot released and wakes the closer. So "released" means the owner
//! reference is already gone.
//!
//! A per-thread stack of `Frame`s records which clients' callbacks this thread is
//! running; it is how a close from inside a callback is recognised (it cannot wait for its
//! own frame) and how a close on a manager's delivering thread knows it needs no wait.
//! Generic over the event type so other client kinds can reuse it.
#[allow(unused_imports)]
use crate::prelude::*;

use crate::verbs::{Completer, Completion, VerbsError, verifier};
use core::cell::RefCell;
use core::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// A client's callback, with its owner captured.
pub(crate) type Callback<E> = Arc<dyn Fn(&E) + Send + Sync>;

/// One callback running on this thread: which delivery domain (a manager) and client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The domain delivering (one deliverer at a time per domain).
    pub(crate) domain: u64,
    /// The client called.
    pub(crate) client: u64,
}

thread_local! {
    /// The callbacks this thread is inside, innermost last.
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
}

/// Marks this thread as inside `frame`'s callback until dropped (also on unwind).
pub(crate) struct FrameGuard(());

impl FrameGuard {
    pub(crate) fn enter(frame: Frame) -> FrameGuard {
        FRAMES.with(|f| f.borrow_mut().push(frame));
        FrameGuard(())
    }
}

impl Drop for FrameGuard {
    fn drop(&mut self) {
        FRAMES.with(|f| {
            let popped = f.borrow_mut().pop();
            debug_assert!(popped.is_some(), "frame stack underflow");
        });
    }
}

fn on_this_thread(pred: impl Fn(&Frame) -> bool) -> bool {
    FRAMES.with(|f| f.borrow().iter().any(pred))
}

/// Where a client is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// Callbacks are delivered.
    Open,
    /// No new callback starts; the owner is released when the running ones return.
    Closing,
    /// The callback and its owner are dropped. Final.
    Released,
}

struct Inner<E> {
    life: Life,
    /// Callbacks running now, on any thread.
    in_flight: u32,
    /// `None` once taken for release.
    callback: Option<Callback<E>>,
    /// Completed once released.
    waiters: Vec<Completer<()>>,
}

/// One registered client. See the module doc.
pub(crate) struct Slot<E> {
    id: u64,
    domain: u64,
    inner: Mutex<Inner<E>>,
    released: Condvar,
}

impl<E> Slot<E> {
    /// An open client `id` of delivery domain `domain`.
    pub(crate) fn new(domain: u64, id: u64, callback: Callback<E>) -> Slot<E> {
        Slot {
            id,
            domain,
            inner: Mutex::new(Inner {
                life: Life::Open,
                in_flight: 0,
                callback: Some(callback),
                waiters: Vec::new(),
            }),
            released: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<E>> {
        // Callbacks never run under this lock, so a poisoned one only means a panic in
        // this module's few lines; the counters stay consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The client's id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Whether callbacks are still delivered.
    pub(crate) fn is_open(&self) -> bool {
        self.lock().life == Life::Open
    }

    /// Starts a callback: the callback to call if the client is open. Every `Some` must be
    /// followed by one [`Slot::exit`], after the returned reference is dropped.
    pub(crate) fn enter(&self) -> Option<Callback<E>> {
        let mut inner = self.lock();
        if inner.life != Life::Open {
            return None;
        }
        let cb = inner.callback.clone()?;
        inner.in_flight += 1;
        Some(cb)
    }

    /// Ends a callback started by [`Slot::enter`]; the last one out of a closing client
    /// releases it.
    pub(crate) fn exit(&self) {
        let release = {
            let mut inner = self.lock();
            debug_assert!(inner.in_flight > 0, "exit without enter");
            inner.in_flight = inner.in_flight.saturating_sub(1);
            Self::take_if_idle(&mut inner)
        };
        if let Some(cb) = release {
            self.release(cb);
        }
    }

    /// The callback to release, if the client is closing with nothing in flight and nobody
    /// took it yet.
    fn take_if_idle(inner: &mut Inner<E>) -> Option<Callback<E>> {
        if inner.life == Life::Closing && inner.in_flight == 0 {
            inner.callback.take()
        } else {
            None
        }
    }

    /// Drops the callback (and the owner it holds) outside the lock — the owner's drop may
    /// close other clients, or this one through its handle — then marks the slot released.
    fn release(&self, cb: Callback<E>) {
        drop(cb);
        let waiters = {
            let mut inner = self.lock();
            inner.life = Life::Released;
            core::mem::take(&mut inner.waiters)
        };
        self.released.notify_all();
        for w in waiters {
            w.complete(Ok(()));
        }
    }

    /// Marks the client closing (idempotent) and releases it now if nothing is in flight;
    /// `waiter` completes once released.
    fn begin_close(&self, waiter: Option<Completer<()>>) {
        let release = {
            let mut inner = self.lock();
            if inner.life == Life::Released {
                drop(inner);
                if let Some(w) = waiter {
                    w.complete(Ok(()));
                }
                return;
            }
            inner.life = Life::Closing;
            inner.waiters.extend(waiter);
            Self::take_if_idle(&mut inner)
        };
        if let Some(cb) = release {
            self.release(cb);
        }
    }

    /// Blocks until released.
    fn wait_released(&self) {
        let mut inner = self.lock();
        while inner.life != Life::Released {
            inner = self
                .released
                .wait(inner)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// How [`ClientHandle::close`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// No callback of the client is running or will run, and its owner reference is
    /// dropped.
    Released,
    /// Called from inside the client's own callback, which cannot be waited for: no new
    /// callback starts, and the owner reference is dropped as the running callback (and
    /// any still running on other threads) returns.
    Deferred,
}

/// A registered client; closing it (or dropping it) ends its callbacks.
///
/// Dropping the handle without [`ClientHandle::close`] closes without waiting, like
/// [`ClientHandle::close_async`] with the completion ignored.
#[must_use = "dropping the handle closes the client"]
pub struct ClientHandle<E> {
    slot: Arc<Slot<E>>,
}

impl<E> fmt::Debug for ClientHandle<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHandle")
            .field("id", &self.slot.id)
            .field("open", &self.slot.is_open())
            .finish()
    }
}

impl<E> ClientHandle<E> {
    pub(crate) fn new(slot: Arc<Slot<E>>) -> ClientHandle<E> {
        ClientHandle { slot }
    }

    /// The client's id, unique in the process.
    pub fn id(&self) -> u64 {
        self.slot.id
    }

    /// Closes the client and waits until none of its callbacks is running; when this
    /// returns [`Closed::Released`], no callback of this client runs again and the owner
    /// reference taken at registration is dropped.
    ///
    /// From inside the client's own callback it does not wait (that would wait for itself)
    /// and returns [`Closed::Deferred`]. From a callback of another client of the same
    /// manager it never needs to wait (the manager delivers one callback at a time).
    ///
    /// # Errors
    /// Anywhere else at dispatch level the wait could block: the verifier trips (a panic
    /// in debug builds, [`VerbsError::BlockingAtDispatch`] in release). Either way the
    /// handle is dropped, which closes without waiting. Use [`ClientHandle::close_async`]
    /// there.
    pub fn close(self) -> Result<Closed, VerbsError> {
        let slot = &self.slot;
        if on_this_thread(|f| f.client == slot.id) {
            slot.begin_close(None);
            return Ok(Closed::Deferred);
        }
        let delivering_here = on_this_thread(|f| f.domain == slot.domain);
        if !delivering_here {
            verifier::may_block("pnp::ClientHandle::close")?;
        }
        slot.begin_close(None);
        debug_assert!(
            !delivering_here || slot.lock().life == Life::Released,
            "one deliverer per manager: nothing of this client can be in flight here"
        );
        slot.wait_released();
        Ok(Closed::Released)
    }

    /// Closes the client without waiting: no new callback starts, and the completion
    /// completes (at dispatch level, from whichever thread ends the last running callback,
    /// or at once) when the owner reference is dropped. Allowed anywhere, including the
    /// client's own callback.
    pub fn close_async(self) -> Completion<()> {
        let (done, completion) = Completion::pair();
        self.slot.begin_close(Some(done));
        completion
    }
}

impl<E> Drop for ClientHandle<E> {
    fn drop(&mut self) {
        // Idempotent: after close/close_async this changes nothing.
        self.slot.begin_close(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicU32, Ordering};

    fn slot(owner: &Arc<AtomicU32>) -> Arc<Slot<u32>> {
        let owner = owner.clone();
        Arc::new(Slot::new(
            1,
            7,
            Arc::new(move |e: &u32| {
                owner.fetch_add(*e, Ordering::SeqCst);
            }),
        ))
    }

    #[test]
    fn close_releases_the_owner_and_refuses_later_calls() {
        let owner = Arc::new(AtomicU32::new(0));
        let s = slot(&owner);
        let cb = s.enter().expect("open");
        cb(&1);
        drop(cb);
        s.exit();
        assert_eq!(Arc::strong_count(&owner), 2);
        let h = ClientHandle::new(s.clone());
        assert_eq!(h.close(), Ok(Closed::Released));
        assert_eq!(Arc::strong_count(&owner), 1, "owner reference dropped");
        assert!(s.enter().is_none());
        assert_eq!(owner.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn close_waits_for_the_running_callback() {
        let owner = Arc::new(AtomicU32::new(0));
        let s = slot(&owner);
        let cb = s.enter().expect("open");
        let h = ClientHandle::new(s.clone());
        let closer = std::thread::spawn(move || h.close());
        std::thread::sleep(core::time::Duration::from_millis(50));
        assert!(!closer.is_finished(), "close must wait for the callback");
        assert!(s.enter().is_none(), "no new callback once closing");
        drop(cb);
        s.exit();
        assert_eq!(closer.join().expect("closer"), Ok(Closed::Released));
        assert_eq!(Arc::strong_count(&owner), 1);
    }

    #[test]
    fn close_inside_own_frame_defers_and_async_completes_on_exit() {
        let owner = Arc::new(AtomicU32::new(0));
        let s = slot(&owner);
        let cb = s.enter().expect("open");
        let done = {
            let _f = FrameGuard::enter(Frame {
                domain: 1,
                client: 7,
            });
            let h = ClientHandle::new(s.clone());
            let c = ClientHandle::new(s.clone()).close_async();
            assert_eq!(h.close(), Ok(Closed::Deferred));
            c
        };
        assert!(!done.is_complete());
        drop(cb);
        s.exit();
        assert!(done.is_complete());
        assert_eq!(Arc::strong_count(&owner), 1);
    }
}
