//! How a passive-level caller waits for a [`Completion`](super::Completion) in a build with
//! no `std` (a kernel driver): on a kernel event the driver's glue makes
//! (`KeInitializeEvent`, `KeSetEvent`, `KeWaitForSingleObject`), installed once with
//! [`install_kernel_wait`]. With `std` a waiter sleeps on a condition variable instead and
//! this is not used.

use alloc::sync::Arc;
use core::time::Duration;
#[cfg(not(feature = "std"))]
use ib_verbs::sync::SetOnce;

/// A notification event (KEVENT): set once, waited on by one thread.
pub trait KernelEvent: Send + Sync {
    /// Sets the event, releasing its waiter (`KeSetEvent`; callable at dispatch level).
    fn set(&self);
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
