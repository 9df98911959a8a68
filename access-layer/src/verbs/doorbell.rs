//! [`Doorbell`]: how a completion wakes the thread that serves it — the interrupt that
//! queues a DPC. A CQ notification handler (or a worker that finished a command, or a
//! control request) rings it; the serving thread drains everything, re-arms its CQs, checks
//! once more, and waits on it. A ring while nobody waits is kept for the next wait, so none
//! is lost between a check and the wait.
//!
//! The driver loop, as the target daemon and the SRP miniport run it:
//!
//! ```text
//! loop {
//!     if turn() == 0 {          // poll every CQ, handle what came
//!         arm_every_cq();       // req_notify_cq(NextCompletion)
//!         if turn() == 0 {      // what completed before the arm
//!             bell.wait(until_next_timer);
//!         }
//!     }
//! }
//! ```

use core::time::Duration;
use std::sync::{Condvar, Mutex, PoisonError};

/// A wake-up flag and the condition variable that waits for it.
#[derive(Debug, Default)]
pub struct Doorbell {
    rung: Mutex<bool>,
    cv: Condvar,
}

impl Doorbell {
    /// A doorbell nobody has rung.
    pub fn new() -> Doorbell {
        Doorbell::default()
    }

    /// Wakes the waiter (now, or at its next wait). Never blocks for long: callable from
    /// an event handler at dispatch level.
    pub fn ring(&self) {
        *self.rung.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cv.notify_one();
    }

    /// Waits until rung or `timeout` passes, and clears the ring; returns whether it was
    /// rung. Blocks: for the serving thread at passive level only.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut rung = self.rung.lock().unwrap_or_else(PoisonError::into_inner);
        if !*rung && !timeout.is_zero() {
            rung = self
                .cv
                .wait_timeout_while(rung, timeout, |r| !*r)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        core::mem::take(&mut *rung)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_ring_before_the_wait_is_kept_and_one_during_it_wakes() {
        let bell = Arc::new(Doorbell::new());
        bell.ring();
        assert!(bell.wait(Duration::from_secs(5)), "kept");
        assert!(!bell.wait(Duration::ZERO), "cleared by the wait");
        let t = Instant::now();
        assert!(
            !bell.wait(Duration::from_millis(20)),
            "nobody rang: times out"
        );
        assert!(t.elapsed() >= Duration::from_millis(20));
        let b = bell.clone();
        let ringer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            b.ring();
        });
        let t = Instant::now();
        assert!(bell.wait(Duration::from_secs(10)), "woken");
        assert!(t.elapsed() < Duration::from_secs(5));
        ringer.join().expect("join");
    }
}
