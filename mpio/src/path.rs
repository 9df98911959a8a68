//! One path's state, as a table-driven machine with flap damping. Sans-IO: time is passed
//! in.
//!
//! | state \ event | IoFailed / TransportDown | VerifyOk            | VerifyFailed | AdminDown | AdminUp | HoldExpired |
//! |---------------|--------------------------|---------------------|--------------|-----------|---------|-------------|
//! | Active        | Failed (or Damped)       | Active              | Failed (or Damped) | AdminDown | Active | Active |
//! | Failed        | Failed                   | Active              | Failed       | AdminDown | Failed  | Failed      |
//! | Damped        | Damped                   | Damped              | Damped       | AdminDown | Damped  | Failed      |
//! | AdminDown     | AdminDown                | AdminDown           | AdminDown    | AdminDown | Failed  | AdminDown   |
//!
//! Damping: a path that goes from Active to Failed [`Damping::max_failures`] times within
//! [`Damping::window`] is Damped instead — held out of service for the hold time, which
//! doubles each time it is damped again (up to [`Damping::max_hold`]) and resets once the
//! path stays up for a whole window. A Failed path returns only through a successful path
//! verify; an administratively restored one too.

use crate::clock::Instant;
use alloc::collections::VecDeque;
use core::time::Duration;

/// A path's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathState {
    /// In service.
    Active,
    /// Out of service until a path verify succeeds.
    Failed,
    /// Failed too often: out of service until the hold time passes, then verified.
    Damped,
    /// Taken out of service by the operator.
    AdminDown,
}

impl PathState {
    /// The name operators see.
    pub fn as_str(self) -> &'static str {
        match self {
            PathState::Active => "active",
            PathState::Failed => "failed",
            PathState::Damped => "damped",
            PathState::AdminDown => "admin-down",
        }
    }
}

/// What happens to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathEvent {
    /// An I/O failed on it for a transport reason.
    IoFailed,
    /// Its transport reports the channel down.
    TransportDown,
    /// A path verify (TEST UNIT READY) succeeded.
    VerifyOk,
    /// A path verify failed.
    VerifyFailed,
    /// The operator took it out of service.
    AdminDown,
    /// The operator returned it.
    AdminUp,
    /// The damping hold time passed.
    HoldExpired,
}

/// Flap damping parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damping {
    /// Failures within [`Damping::window`] that damp a path.
    pub max_failures: usize,
    /// The window.
    pub window: Duration,
    /// The first hold time.
    pub hold: Duration,
    /// The longest hold time.
    pub max_hold: Duration,
}

impl Default for Damping {
    fn default() -> Damping {
        Damping {
            max_failures: 3,
            window: Duration::from_secs(60),
            hold: Duration::from_secs(5),
            max_hold: Duration::from_secs(120),
        }
    }
}

/// A path's state machine.
#[derive(Debug, Clone)]
pub struct Path {
    state: PathState,
    damping: Damping,
    failures: VecDeque<Instant>,
    next_hold: Duration,
    hold_until: Option<Instant>,
    up_since: Option<Instant>,
    /// Times taken out of service (Active → Failed or Damped).
    pub failures_total: u64,
}

/// The transition table (see the module doc); `Failed` from Active may become `Damped`.
fn next(state: PathState, event: PathEvent) -> PathState {
    use PathEvent as E;
    use PathState as S;
    match (state, event) {
        (_, E::AdminDown) => S::AdminDown,
        (S::AdminDown, E::AdminUp) => S::Failed,
        (S::AdminDown, _) => S::AdminDown,
        (S::Damped, E::HoldExpired) => S::Failed,
        (S::Damped, _) => S::Damped,
        (S::Active, E::IoFailed | E::TransportDown | E::VerifyFailed) => S::Failed,
        (S::Active, _) => S::Active,
        (S::Failed, E::VerifyOk) => S::Active,
        (S::Failed, _) => S::Failed,
    }
}

impl Path {
    /// A path that starts in service.
    pub fn new(damping: Damping) -> Path {
        Path {
            state: PathState::Active,
            damping,
            failures: VecDeque::new(),
            next_hold: damping.hold,
            hold_until: None,
            up_since: None,
            failures_total: 0,
        }
    }

    /// The state.
    pub fn state(&self) -> PathState {
        self.state
    }

    /// Whether it may carry I/O.
    pub fn usable(&self) -> bool {
        self.state == PathState::Active
    }

    /// When [`Path::handle_timeout`] is due (the end of a hold).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.hold_until
    }

    /// Time passed: ends a hold that is over.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.hold_until.is_some_and(|t| t <= now) {
            self.hold_until = None;
            self.handle(PathEvent::HoldExpired, now);
        }
        // A path that stayed up a whole window starts afresh.
        if self.state == PathState::Active
            && self
                .up_since
                .is_some_and(|t| crate::clock::since(now, t) >= self.damping.window)
        {
            self.next_hold = self.damping.hold;
            self.failures.clear();
        }
    }

    /// Applies `event` at `now`; the new state.
    pub fn handle(&mut self, event: PathEvent, now: Instant) -> PathState {
        let before = self.state;
        let mut after = next(before, event);
        if before == PathState::Active && after == PathState::Failed {
            self.failures_total += 1;
            self.failures.push_back(now);
            while self
                .failures
                .front()
                .is_some_and(|&t| crate::clock::since(now, t) > self.damping.window)
            {
                self.failures.pop_front();
            }
            if self.failures.len() >= self.damping.max_failures {
                after = PathState::Damped;
                self.hold_until = Some(now + self.next_hold);
                self.next_hold = (self.next_hold * 2).min(self.damping.max_hold);
                self.failures.clear();
            }
        }
        if after == PathState::AdminDown {
            self.hold_until = None;
        }
        if after == PathState::Active && before != PathState::Active {
            self.up_since = Some(now);
        }
        self.state = after;
        after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_paths_return_through_verify_only() {
        let t = Instant::now();
        let mut p = Path::new(Damping::default());
        assert_eq!(p.handle(PathEvent::IoFailed, t), PathState::Failed);
        assert_eq!(p.handle(PathEvent::AdminUp, t), PathState::Failed);
        assert_eq!(p.handle(PathEvent::VerifyFailed, t), PathState::Failed);
        assert_eq!(p.handle(PathEvent::VerifyOk, t), PathState::Active);
        assert_eq!(p.failures_total, 1);
        assert_eq!(p.handle(PathEvent::AdminDown, t), PathState::AdminDown);
        assert_eq!(p.handle(PathEvent::VerifyOk, t), PathState::AdminDown);
        assert_eq!(p.handle(PathEvent::AdminUp, t), PathState::Failed);
        assert_eq!(p.handle(PathEvent::VerifyOk, t), PathState::Active);
    }

    #[test]
    fn flapping_is_damped_with_growing_holds() {
        let t0 = Instant::now();
        let d = Damping::default();
        let mut p = Path::new(d);
        let mut t = t0;
        for _ in 0..2 {
            p.handle(PathEvent::TransportDown, t);
            p.handle(PathEvent::VerifyOk, t);
            t += Duration::from_secs(1);
        }
        assert_eq!(p.handle(PathEvent::TransportDown, t), PathState::Damped);
        assert_eq!(p.poll_timeout(), Some(t + d.hold));
        assert_eq!(p.handle(PathEvent::VerifyOk, t), PathState::Damped, "held");
        p.handle_timeout(t + d.hold);
        assert_eq!(p.state(), PathState::Failed);
        t += d.hold;
        p.handle(PathEvent::VerifyOk, t);
        for _ in 0..2 {
            p.handle(PathEvent::IoFailed, t);
            p.handle(PathEvent::VerifyOk, t);
        }
        assert_eq!(p.handle(PathEvent::IoFailed, t), PathState::Damped);
        assert_eq!(p.poll_timeout(), Some(t + d.hold * 2), "the hold doubled");
        // A whole quiet window resets the hold.
        p.handle_timeout(t + d.hold * 2);
        p.handle(PathEvent::VerifyOk, t + d.hold * 2);
        p.handle_timeout(t + d.hold * 2 + d.window);
        for _ in 0..3 {
            p.handle(PathEvent::IoFailed, t + d.hold * 2 + d.window);
            p.handle(PathEvent::VerifyOk, t + d.hold * 2 + d.window);
        }
        assert_eq!(p.state(), PathState::Damped);
        assert_eq!(p.poll_timeout(), Some(t + d.hold * 2 + d.window + d.hold));
    }

    #[test]
    fn failures_outside_the_window_do_not_count() {
        let t = Instant::now();
        let d = Damping::default();
        let mut p = Path::new(d);
        for k in 0..5u32 {
            let at = t + (d.window + Duration::from_secs(1)) * k;
            assert_eq!(p.handle(PathEvent::IoFailed, at), PathState::Failed);
            p.handle(PathEvent::VerifyOk, at);
        }
    }
}
