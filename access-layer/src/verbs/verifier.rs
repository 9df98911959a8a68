//! The dispatch-context verifier (the Driver Verifier IRQL check, in miniature): every call
//! that can block asks [`may_block`] first. At dispatch level ([`super::in_dispatch`]) that
//! is a bug in the caller: debug and test builds panic with the name of the call, so the
//! test that exercises the path fails where the bug is; release builds refuse the call with
//! [`VerbsError::BlockingAtDispatch`] and count it ([`trips`]) instead of stalling a
//! completion thread.
#[allow(unused_imports)]
use crate::prelude::*;

use super::VerbsError;
use super::dispatch::in_dispatch;
use core::sync::atomic::{AtomicU64, Ordering};

/// Blocking calls refused at dispatch level since the process started.
static TRIPS: AtomicU64 = AtomicU64::new(0);

/// Checks that the current thread may block before `call` (named as in the panic message,
/// e.g. `"Completion::wait"`) does.
///
/// # Panics
/// At dispatch level in builds with debug assertions.
pub fn may_block(call: &'static str) -> Result<(), VerbsError> {
    check(call, in_dispatch(), cfg!(debug_assertions))
}

/// How many blocking calls the verifier caught at dispatch level, in any thread.
pub fn trips() -> u64 {
    TRIPS.load(Ordering::Relaxed)
}

/// The check, with the context and the build mode as inputs so both modes are testable.
fn check(call: &'static str, at_dispatch: bool, panic: bool) -> Result<(), VerbsError> {
    if !at_dispatch {
        return Ok(());
    }
    TRIPS.fetch_add(1, Ordering::Relaxed);
    let err = VerbsError::BlockingAtDispatch { call };
    if panic {
        panic!("{err}");
    }
    Err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::dispatch::DispatchGuard;

    #[test]
    fn passive_level_may_block() {
        assert_eq!(may_block("test::passive"), Ok(()));
        assert_eq!(check("test::passive", false, true), Ok(()));
    }

    #[test]
    fn release_mode_refuses_and_counts() {
        let before = trips();
        assert_eq!(
            check("test::release", true, false),
            Err(VerbsError::BlockingAtDispatch {
                call: "test::release"
            })
        );
        assert!(trips() > before);
    }

    #[test]
    fn debug_mode_panics_naming_the_call() {
        let _g = DispatchGuard::enter();
        let r = std::panic::catch_unwind(|| check("Completion::wait", true, true));
        let payload = r.expect_err("must panic");
        let msg = payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert_eq!(msg, "blocking call `Completion::wait` at dispatch level");
        if cfg!(debug_assertions) {
            assert!(std::panic::catch_unwind(|| may_block("test::debug")).is_err());
        } else {
            assert!(may_block("test::debug").is_err());
        }
    }
}
