//! The dispatch-context marker: a per-thread flag meaning "this code must not block" (the
//! Windows DISPATCH_LEVEL). It is set inside completion callbacks, on the completion
//! dispatcher thread of a provider and, later, by the port-driver models around BuildIo and
//! StartIo; [`super::verifier`] checks it before anything blocks.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    /// How many [`DispatchGuard`]s are alive on this thread (callbacks nest).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// While alive, the current thread is at dispatch level. Guards nest; the thread is back at
/// passive level once the last one drops (also when a panic unwinds through it).
#[derive(Debug)]
#[must_use = "the thread leaves dispatch level when the guard drops"]
pub struct DispatchGuard {
    /// The marker is per thread, so the guard must drop on the thread that made it.
    _not_send: PhantomData<*const ()>,
}

impl DispatchGuard {
    /// Raises the current thread to dispatch level until the guard drops.
    pub fn enter() -> DispatchGuard {
        DEPTH.with(|d| d.set(d.get().saturating_add(1)));
        DispatchGuard {
            _not_send: PhantomData,
        }
    }
}

impl Drop for DispatchGuard {
    fn drop(&mut self) {
        DEPTH.with(|d| {
            debug_assert!(d.get() > 0, "dispatch depth underflow");
            d.set(d.get().saturating_sub(1));
        });
    }
}

/// Whether the current thread is at dispatch level (must not block).
pub fn in_dispatch() -> bool {
    DEPTH.with(|d| d.get() > 0)
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
