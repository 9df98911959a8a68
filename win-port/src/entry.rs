//! How a port runs a driver's entry point under its verifier — the part both emulated
//! ports (StorPort's miniport routines, the iSCSI model's driver entries) share: the entry
//! runs at its level (dispatch: `access-layer`'s [`DispatchGuard`]), a panic is caught, a
//! blocking call at dispatch level is recognised however it was refused, and entries
//! running at dispatch level are listed for the port's watchdog ([`DispatchCalls`]).
//!
//! A blocking call at dispatch level is seen three ways, first match wins: a kernel
//! primitive of [`crate::ke`] noted it on this thread ([`note_blocking`]); `access-layer`'s
//! verifier panicked with "blocking call \`NAME\` at dispatch level" (debug builds); or,
//! in release builds where that verifier refuses the call and counts it instead
//! ([`trips`](access_layer::verbs::verifier::trips), process-wide), the count rose during
//! a dispatch-level entry. Each port turns an [`EntryFault`] into its own violation and
//! bugchecks.
#[allow(unused_imports)]
use crate::prelude::*;

use access_layer::verbs::{DispatchGuard, verifier as al_verifier};
use alloc::collections::BTreeMap;
use core::any::Any;
use core::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// Why an entry point did not return normally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryFault {
    /// It made a blocking call at dispatch level (the call, as the verifier named it).
    BlockingAtDispatch(String),
    /// It panicked (the panic's text).
    Panic(String),
}

thread_local! {
    /// The first blocking call made at dispatch level on this thread since the last take.
    static BLOCKED: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Notes that `call` blocked (or tried to) at dispatch level on this thread.
pub fn note_blocking(call: &'static str) {
    BLOCKED.with(|b| {
        if b.get().is_none() {
            b.set(Some(call));
        }
    });
}

/// Takes this thread's note (see [`note_blocking`]).
pub fn take_blocking() -> Option<&'static str> {
    BLOCKED.with(Cell::take)
}

/// The text of a panic payload.
pub fn panic_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The blocking call named in a panic message of `access-layer`'s verifier, if it is one.
pub fn blocking_call_in(message: &str) -> Option<String> {
    let rest = message.strip_prefix("blocking call `")?;
    let (call, tail) = rest.split_once('`')?;
    (tail == " at dispatch level").then(|| call.to_string())
}

/// Runs `f` — an entry point — at dispatch level if `dispatch` (else as it is called),
/// catching a panic and recognising a blocking call at dispatch level (see the module
/// doc). A blocking call noted outside dispatch level is no fault (passive entries may
/// block).
pub fn run_entry<R>(dispatch: bool, f: impl FnOnce() -> R) -> Result<R, EntryFault> {
    let _ = take_blocking();
    let trips = al_verifier::trips();
    let guard = dispatch.then(DispatchGuard::enter);
    let r = catch_unwind(AssertUnwindSafe(f));
    drop(guard);
    let noted = take_blocking().filter(|_| dispatch);
    // Release builds: the verifier refused a blocking call (and counted it) instead of
    // panicking. The count is process-wide; a trip anywhere is a bug all the same.
    let refused = dispatch && !cfg!(debug_assertions) && al_verifier::trips() > trips;
    match (r, noted) {
        (_, Some(call)) => Err(EntryFault::BlockingAtDispatch(call.to_string())),
        (Ok(_), None) if refused => Err(EntryFault::BlockingAtDispatch(
            "a call the dispatch verifier refused".into(),
        )),
        (Ok(v), None) => Ok(v),
        (Err(payload), None) => {
            let message = panic_text(payload.as_ref());
            match blocking_call_in(&message) {
                Some(call) if dispatch => Err(EntryFault::BlockingAtDispatch(call)),
                _ => Err(EntryFault::Panic(message)),
            }
        }
    }
}

/// The entries running at dispatch level, by call, with when each began: what a port's
/// watchdog (StorPort's DPC watchdog, bugcheck 0x133) looks at on each tick. Kept under
/// the port's lock. `E` names an entry (the port's routine or entry-point type).
#[derive(Debug)]
pub struct DispatchCalls<E> {
    calls: BTreeMap<u64, (E, Instant)>,
    next: u64,
}

impl<E> Default for DispatchCalls<E> {
    fn default() -> Self {
        DispatchCalls {
            calls: BTreeMap::new(),
            next: 0,
        }
    }
}

impl<E: Copy> DispatchCalls<E> {
    /// `entry` began at `now`: its ticket for [`DispatchCalls::leave`].
    pub fn enter(&mut self, entry: E, now: Instant) -> u64 {
        self.next += 1;
        self.calls.insert(self.next, (entry, now));
        self.next
    }

    /// The call with `ticket` returned.
    pub fn leave(&mut self, ticket: u64) {
        self.calls.remove(&ticket);
    }

    /// Whether no entry runs at dispatch level.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The first entry (oldest call) that has run longer than `limit` at `now`.
    pub fn overdue(&self, now: Instant, limit: Duration) -> Option<E> {
        self.calls
            .values()
            .find(|(_, since)| now.saturating_duration_since(*since) > limit)
            .map(|(e, _)| *e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use access_layer::verbs::VerbsError;

    #[test]
    fn reads_the_access_layer_verifier_message() {
        let msg = VerbsError::BlockingAtDispatch {
            call: "Completion::wait",
        }
        .to_string();
        assert_eq!(blocking_call_in(&msg).as_deref(), Some("Completion::wait"));
        assert_eq!(blocking_call_in("index out of bounds"), None);
    }

    #[test]
    fn a_noted_block_counts_only_at_dispatch() {
        let r = run_entry(true, || note_blocking("KeWaitForSingleObject"));
        assert_eq!(
            r,
            Err(EntryFault::BlockingAtDispatch(
                "KeWaitForSingleObject".into()
            ))
        );
        assert_eq!(
            run_entry(false, || note_blocking("KeDelayExecutionThread")),
            Ok(())
        );
        assert_eq!(take_blocking(), None, "the note does not outlive the entry");
    }

    #[test]
    fn a_panic_is_a_fault_and_its_text_kept() {
        let r: Result<(), _> = run_entry(false, || panic!("bad index {}", 3));
        assert_eq!(r, Err(EntryFault::Panic("bad index 3".into())));
        let r: Result<(), _> = run_entry(true, || {
            panic!("blocking call `Completion::wait` at dispatch level")
        });
        assert_eq!(
            r,
            Err(EntryFault::BlockingAtDispatch("Completion::wait".into()))
        );
    }

    #[test]
    fn the_watchdog_sees_the_oldest_overdue_call() {
        let t0 = Instant::now();
        let mut c = DispatchCalls::default();
        let a = c.enter('a', t0);
        let _b = c.enter('b', t0 + Duration::from_millis(5));
        assert_eq!(
            c.overdue(t0 + Duration::from_millis(4), Duration::from_millis(10)),
            None
        );
        assert_eq!(
            c.overdue(t0 + Duration::from_millis(11), Duration::from_millis(10)),
            Some('a')
        );
        c.leave(a);
        assert_eq!(
            c.overdue(t0 + Duration::from_millis(11), Duration::from_millis(10)),
            None
        );
        assert_eq!(
            c.overdue(t0 + Duration::from_millis(16), Duration::from_millis(10)),
            Some('b')
        );
        assert!(!c.is_empty());
    }
}
