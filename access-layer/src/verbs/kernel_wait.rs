//! How a passive-level caller waits for a [`Completion`](super::Completion) in a build with
//! no `std` (a kernel driver): on a kernel event the driver's glue makes
//! (`KeInitializeEvent`, `KeSetEvent`, `KeWaitForSingleObject`), installed once with
//! [`install_kernel_wait`]. With `std` a waiter sleeps on a condition variable instead and
//! this is not used.

use alloc::sync::Arc;
use core::time::Duration;
#[cfg(not(feature = "std"))]
use ib_verbs::sync::SetOnce;

/// A notification event (KEVENT): set, waited on, cleared for the next wait.
pub trait KernelEvent: Send + Sync {
    /// Sets the event, releasing its waiter (`KeSetEvent`; callable at dispatch level).
    fn set(&self);
    /// Clears the event, so the next wait sleeps until the next set (`KeClearEvent`;
    /// callable at dispatch level).
    fn clear(&self);
    /// Waits until the event is set or `timeout` passes (`None`: no limit); whether it was
    /// set (`KeWaitForSingleObject`; passive level only).
    fn wait(&self, timeout: Option<Duration>) -> bool;
}

/// The kernel's waiting calls, as a driver's glue installs them.
#[derive(Clone, Copy, Debug)]
pub struct KernelWait {
    /// A fresh, unset event.
    pub new_event: fn() -> Arc<dyn KernelEvent>,
}

#[cfg(not(feature = "std"))]
static KERNEL_WAIT: SetOnce<KernelWait> = SetOnce::new();

/// Installs the kernel's waiting calls (a driver's `DriverEntry`); whether this was the
/// first install. With `std` waits use the system's condition variables and this does
/// nothing (returns `false`).
pub fn install_kernel_wait(wait: KernelWait) -> bool {
    #[cfg(not(feature = "std"))]
    {
        KERNEL_WAIT.set(wait)
    }
    #[cfg(feature = "std")]
    {
        let _ = wait;
        false
    }
}

/// A fresh, unset event for a passive-level waiter of the layers above (a driver's worker
/// sleeping until it is woken): a condition variable with `std`; with no `std` the
/// installed kernel event, `None` if the driver's glue installed none.
pub fn new_event() -> Option<Arc<dyn KernelEvent>> {
    #[cfg(feature = "std")]
    {
        Some(Arc::new(StdEvent::default()))
    }
    #[cfg(not(feature = "std"))]
    {
        kernel_wait().map(|k| (k.new_event)())
    }
}

/// A notification event on the system's condition variable (`std`).
#[cfg(feature = "std")]
#[derive(Default)]
struct StdEvent {
    set: std::sync::Mutex<bool>,
    cond: std::sync::Condvar,
}

#[cfg(feature = "std")]
impl KernelEvent for StdEvent {
    fn set(&self) {
        *self
            .set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.cond.notify_all();
    }

    fn clear(&self) {
        *self
            .set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = false;
    }

    fn wait(&self, timeout: Option<Duration>) -> bool {
        // Waiting is blocking: the dispatch verifier's rule holds here as for a Completion.
        if super::verifier::may_block("KernelEvent::wait").is_err() {
            return false;
        }
        let set = self
            .set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match timeout {
            None => *self
                .cond
                .wait_while(set, |s| !*s)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            Some(t) => {
                *self
                    .cond
                    .wait_timeout_while(set, t, |s| !*s)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0
            }
        }
    }
}

/// The installed calls (no `std`).
#[cfg(not(feature = "std"))]
pub(crate) fn kernel_wait() -> Option<&'static KernelWait> {
    KERNEL_WAIT.get()
}

/// A waker that sets a kernel event: a waiting thread polls the completion like a future
/// and sleeps on the event between polls (the `no_std` build and the tests).
#[cfg(any(not(feature = "std"), test))]
pub(crate) struct EventWaker(pub(crate) Arc<dyn KernelEvent>);

#[cfg(any(not(feature = "std"), test))]
impl alloc::task::Wake for EventWaker {
    fn wake(self: Arc<Self>) {
        self.0.set();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.set();
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn an_event_set_before_or_during_a_wait_releases_it_and_an_unset_one_times_out() {
        let e = new_event().expect("std events");
        assert!(
            !e.wait(Some(Duration::from_millis(20))),
            "unset: the wait times out"
        );
        let setter = e.clone();
        let t = std::thread::spawn(move || setter.set());
        assert!(
            e.wait(Some(Duration::from_secs(10))),
            "set by another thread"
        );
        t.join().expect("setter");
        assert!(e.wait(None), "a notification event stays set");
        e.clear();
        assert!(
            !e.wait(Some(Duration::from_millis(20))),
            "cleared: the wait times out again"
        );
    }
}
