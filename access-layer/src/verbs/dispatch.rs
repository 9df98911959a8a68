//! The dispatch-context marker: a per-thread flag meaning "this code must not block" (the
//! Windows DISPATCH_LEVEL). It is set inside completion callbacks, on the completion
//! dispatcher thread of a provider and, later, by the port-driver models around BuildIo and
//! StartIo; [`super::verifier`] checks it before anything blocks.
//!
//! With `std` the level is a thread-local count of guards. Without it (a kernel driver) the
//! level is the processor's IRQL: the driver's glue installs the kernel's calls with
//! [`install_kernel_level`] (`KeGetCurrentIrql`, `KeRaiseIrql`, `KeLowerIrql`); until it
//! does, nothing is at dispatch level and a guard changes nothing.

use core::marker::PhantomData;

#[cfg(feature = "std")]
std::thread_local! {
    /// How many [`DispatchGuard`]s are alive on this thread (callbacks nest).
    static DEPTH: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}

/// The kernel's IRQL calls, as a driver's glue installs them (no `std`).
#[derive(Clone, Copy, Debug)]
pub struct KernelLevel {
    /// Whether the processor runs at DISPATCH_LEVEL or above (`KeGetCurrentIrql() >= 2`).
    pub at_dispatch: fn() -> bool,
    /// Raises to DISPATCH_LEVEL, returning the previous IRQL (`KeRaiseIrql`).
    pub raise: fn() -> u8,
    /// Lowers back to an IRQL `raise` returned (`KeLowerIrql`).
    pub lower: fn(u8),
}

#[cfg(not(feature = "std"))]
static KERNEL_LEVEL: ib_verbs::sync::SetOnce<KernelLevel> = ib_verbs::sync::SetOnce::new();

/// Installs the kernel's IRQL calls (a driver's `DriverEntry`); whether this was the first
/// install. With `std` the marker is per thread and this does nothing (returns `false`).
pub fn install_kernel_level(level: KernelLevel) -> bool {
    #[cfg(not(feature = "std"))]
    {
        KERNEL_LEVEL.set(level)
    }
    #[cfg(feature = "std")]
    {
        let _ = level;
        false
    }
}

/// While alive, the current thread is at dispatch level. Guards nest; the thread is back at
/// passive level once the last one drops (also when a panic unwinds through it).
#[derive(Debug)]
#[must_use = "the thread leaves dispatch level when the guard drops"]
pub struct DispatchGuard {
    /// The IRQL to lower back to (no `std`, once the kernel's calls are installed).
    #[cfg(not(feature = "std"))]
    previous: Option<u8>,
    /// The marker is per thread, so the guard must drop on the thread that made it.
    _not_send: PhantomData<*const ()>,
}

impl DispatchGuard {
    /// Raises the current thread to dispatch level until the guard drops.
    pub fn enter() -> DispatchGuard {
        #[cfg(feature = "std")]
        DEPTH.with(|d| d.set(d.get().saturating_add(1)));
        DispatchGuard {
            #[cfg(not(feature = "std"))]
            previous: KERNEL_LEVEL.get().map(|k| (k.raise)()),
            _not_send: PhantomData,
        }
    }
}

impl Drop for DispatchGuard {
    fn drop(&mut self) {
        #[cfg(feature = "std")]
        DEPTH.with(|d| {
            debug_assert!(d.get() > 0, "dispatch depth underflow");
            d.set(d.get().saturating_sub(1));
        });
        #[cfg(not(feature = "std"))]
        if let (Some(k), Some(previous)) = (KERNEL_LEVEL.get(), self.previous) {
            (k.lower)(previous);
        }
    }
}

/// Whether the current thread is at dispatch level (must not block).
pub fn in_dispatch() -> bool {
    #[cfg(feature = "std")]
    {
        DEPTH.with(|d| d.get() > 0)
    }
    #[cfg(not(feature = "std"))]
    {
        KERNEL_LEVEL.get().is_some_and(|k| (k.at_dispatch)())
    }
}

/// Runs `f` at dispatch level: the way a completion routine or a port driver's StartIo is
/// called.
pub fn at_dispatch<R>(f: impl FnOnce() -> R) -> R {
    let _guard = DispatchGuard::enter();
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_nest_and_unwind() {
        assert!(!in_dispatch());
        {
            let _a = DispatchGuard::enter();
            assert!(in_dispatch());
            {
                let _b = DispatchGuard::enter();
                assert!(in_dispatch());
            }
            assert!(in_dispatch(), "the outer guard still holds");
        }
        assert!(!in_dispatch());
        let r = std::panic::catch_unwind(|| at_dispatch(|| panic!("inside")));
        assert!(r.is_err());
        assert!(
            !in_dispatch(),
            "a panic leaves dispatch level on the way out"
        );
    }

    #[test]
    fn marker_is_per_thread() {
        let _g = DispatchGuard::enter();
        let other = std::thread::spawn(in_dispatch).join().expect("thread");
        assert!(!other);
        assert!(in_dispatch());
    }
}
