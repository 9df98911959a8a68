//! The kernel services a miniport may call, with the verifier's hooks: what a miniport's
//! blocking primitives go through. At dispatch level, [`KeEvent::wait`], [`recv_timeout`]
//! and [`delay_execution`] are bugs (KeWaitForSingleObject / KeDelayExecutionThread at
//! DISPATCH_LEVEL bugcheck): the call is noted for the port, then `access-layer`'s verifier
//! trips (a panic in debug builds, an error in release), so the routine's caller — the
//! port — reports a blocking call at dispatch level ([`crate::entry`]). [`stall_execution`]
//! (KeStallExecutionProcessor) spins and is allowed anywhere.
//!
//! These are free functions with no port, so no port's clock: they measure real time
//! (a stall is the processor kept busy, a wait a thread blocked — both real), and each
//! returns after at most its real duration, whatever any virtual clock does. The SRP
//! miniport calls none of them; a miniport that must stall under a manual-mode port (the
//! simulator's virtual time) calls its port's own stall (StorPort: `PortServices::stall_execution`),
//! which follows the port.
#[allow(unused_imports)]
use crate::prelude::*;

use crate::entry;
use access_layer::verbs::{in_dispatch, verifier as al_verifier};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Why a kernel wait failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeError {
    /// A blocking call at dispatch level (release builds; debug builds panic).
    #[error("blocking call `{call}` at dispatch level")]
    BlockingAtDispatch {
        /// The call.
        call: &'static str,
    },
    /// The wait timed out.
    #[error("wait timed out")]
    TimedOut,
    /// The other end of the channel is gone.
    #[error("channel disconnected")]
    Disconnected,
}

/// Checks that the caller may block before `call` does.
fn may_block(call: &'static str) -> Result<(), KeError> {
    if in_dispatch() {
        entry::note_blocking(call);
    }
    al_verifier::may_block(call).map_err(|_| KeError::BlockingAtDispatch { call })
}

/// KeStallExecutionProcessor / StorPortStallExecution: spins for `d` of real time (see the
/// module doc for why not on a port's clock).
pub fn stall_execution(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        core::hint::spin_loop();
    }
}

/// KeDelayExecutionThread: sleeps; passive level only.
pub fn delay_execution(d: Duration) -> Result<(), KeError> {
    may_block("KeDelayExecutionThread")?;
    std::thread::sleep(d);
    Ok(())
}

/// A blocking receive (KeWaitForSingleObject on the channel's event); passive level only.
pub fn recv_timeout<T>(rx: &Receiver<T>, timeout: Duration) -> Result<T, KeError> {
    may_block("KeWaitForSingleObject")?;
    rx.recv_timeout(timeout).map_err(|e| match e {
        RecvTimeoutError::Timeout => KeError::TimedOut,
        RecvTimeoutError::Disconnected => KeError::Disconnected,
    })
}

/// A notification event (KEVENT): set and clear anywhere, wait at passive level only.
#[derive(Debug, Default)]
pub struct KeEvent {
    set: Mutex<bool>,
    cv: Condvar,
}

impl KeEvent {
    /// KeSetEvent: wakes every waiter.
    pub fn set(&self) {
        *self.set.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cv.notify_all();
    }

    /// KeClearEvent.
    pub fn clear(&self) {
        *self.set.lock().unwrap_or_else(PoisonError::into_inner) = false;
    }

    /// KeReadStateEvent: never blocks.
    pub fn is_set(&self) -> bool {
        *self.set.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// KeWaitForSingleObject: waits until set, up to `timeout`.
    pub fn wait(&self, timeout: Duration) -> Result<(), KeError> {
        may_block("KeWaitForSingleObject")?;
        let g = self.set.lock().unwrap_or_else(PoisonError::into_inner);
        let (g, _) = self
            .cv
            .wait_timeout_while(g, timeout, |set| !*set)
            .unwrap_or_else(PoisonError::into_inner);
        if *g { Ok(()) } else { Err(KeError::TimedOut) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use access_layer::verbs::at_dispatch;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    #[test]
    fn waits_work_at_passive_and_trap_at_dispatch() {
        let ev = KeEvent::default();
        assert_eq!(ev.wait(Duration::from_millis(1)), Err(KeError::TimedOut));
        ev.set();
        assert_eq!(ev.wait(Duration::from_secs(1)), Ok(()));
        assert_eq!(entry::take_blocking(), None);
        let r = catch_unwind(AssertUnwindSafe(|| at_dispatch(|| ev.wait(Duration::ZERO))));
        if cfg!(debug_assertions) {
            assert!(r.is_err(), "debug builds panic");
        } else {
            assert!(matches!(r, Ok(Err(KeError::BlockingAtDispatch { .. }))));
        }
        assert_eq!(entry::take_blocking(), Some("KeWaitForSingleObject"));
        at_dispatch(|| stall_execution(Duration::from_micros(10)));
        assert_eq!(entry::take_blocking(), None, "stalling is allowed");
    }
}
