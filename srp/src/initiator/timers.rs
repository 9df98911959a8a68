//! The SRP transport class timers and port states (Linux `scsi_transport_srp.c`).
//!
//! After a transport error the port is BLOCKED: I/O is held and reconnects are tried every
//! `reconnect_delay` (slowing after ten failures). At `fast_io_fail_tmo` the held I/O fails
//! (FAIL_FAST) so multipath can retry it elsewhere while reconnects continue; at
//! `dev_loss_tmo` the port is LOST and the caller removes the disk. A successful reconnect in
//! BLOCKED or FAIL_FAST returns to RUNNING. `None` means "off", as a negative value in sysfs.

use super::InitiatorError;
use core::time::Duration;
use ib_verbs::time::Time;

/// SCSI_DEVICE_BLOCK_MAX_TIMEOUT: the longest a SCSI device may stay blocked.
pub const BLOCK_MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// The three transport timers, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportTimers {
    reconnect_delay: Option<Duration>,
    fast_io_fail: Option<Duration>,
    dev_loss: Option<Duration>,
}

impl Default for TransportTimers {
    /// ib_srp's defaults: 10 s, 15 s, 600 s.
    fn default() -> TransportTimers {
        TransportTimers {
            reconnect_delay: Some(Duration::from_secs(10)),
            fast_io_fail: Some(Duration::from_secs(15)),
            dev_loss: Some(Duration::from_secs(600)),
        }
    }
}

impl TransportTimers {
    /// Validates as `srp_tmo_valid`: not all off; a reconnect delay, when on, is not zero;
    /// fast_io_fail at most 600 s; with fast_io_fail off, dev_loss at most 600 s;
    /// fast_io_fail below dev_loss when both are on.
    pub fn new(
        reconnect_delay: Option<Duration>,
        fast_io_fail: Option<Duration>,
        dev_loss: Option<Duration>,
    ) -> Result<TransportTimers, InitiatorError> {
        let bad = InitiatorError::InvalidTimers;
        if reconnect_delay.is_none() && fast_io_fail.is_none() && dev_loss.is_none() {
            return Err(bad(
                "reconnect_delay, fast_io_fail_tmo and dev_loss_tmo are all off",
            ));
        }
        if reconnect_delay == Some(Duration::ZERO) {
            return Err(bad("reconnect_delay must not be 0 (use off)"));
        }
        if fast_io_fail.is_some_and(|f| f > BLOCK_MAX_TIMEOUT) {
            return Err(bad("fast_io_fail_tmo exceeds 600 s"));
        }
        if fast_io_fail.is_none() && dev_loss.is_some_and(|d| d > BLOCK_MAX_TIMEOUT) {
            return Err(bad(
                "dev_loss_tmo exceeds 600 s while fast_io_fail_tmo is off",
            ));
        }
        if let (Some(f), Some(d)) = (fast_io_fail, dev_loss)
            && f >= d
        {
            return Err(bad("fast_io_fail_tmo must be below dev_loss_tmo"));
        }
        Ok(TransportTimers {
            reconnect_delay,
            fast_io_fail,
            dev_loss,
        })
    }

    /// Delay before the first reconnect attempt and the backoff unit.
    pub fn reconnect_delay(&self) -> Option<Duration> {
        self.reconnect_delay
    }

    /// Time from the loss to failing held I/O.
    pub fn fast_io_fail(&self) -> Option<Duration> {
        self.fast_io_fail
    }

    /// Time from the loss to giving the device up.
    pub fn dev_loss(&self) -> Option<Duration> {
        self.dev_loss
    }
}

/// The wait after `failed_reconnects` consecutive failures (`srp_reconnect_work`):
/// `reconnect_delay × min(100, max(1, failed_reconnects − 10))`.
pub fn reconnect_backoff(reconnect_delay: Duration, failed_reconnects: u32) -> Duration {
    let factor = failed_reconnects.saturating_sub(10).clamp(1, 100);
    reconnect_delay.saturating_mul(factor)
}

/// Port (rport) states, plus `New` for a port that has never logged in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// Not yet logged in; commands are refused.
    New,
    /// Logged in; commands flow.
    Running,
    /// Transport lost; I/O held, reconnect attempts running.
    Blocked,
    /// fast_io_fail expired; I/O fails with a transport-failfast outcome, reconnects go on.
    FailFast,
    /// dev_loss expired; everything fails, the caller removes the disk. Terminal.
    Lost,
}

/// What moves the port between states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// A login (first or re-login) succeeded.
    LoggedIn,
    /// The channel was lost (disconnect, T_LOGOUT, protocol error, escalation) or a
    /// reconnect attempt failed.
    TransportLost,
    /// fast_io_fail_tmo expired.
    FastIoFailExpired,
    /// dev_loss_tmo expired.
    DevLossExpired,
    /// The initiator logged out (an operator's logout, the adapter stopping).
    LoggedOut,
}

impl PortState {
    /// The transition table.
    pub fn next(self, event: PortEvent) -> Result<PortState, InitiatorError> {
        use PortEvent as E;
        use PortState as S;
        Ok(match (self, event) {
            // First login, or a re-login ending the outage.
            (S::New | S::Blocked | S::FailFast, E::LoggedIn) => S::Running,
            // A failed first login leaves the port unborn; the caller may try again.
            (S::New, E::TransportLost) => S::New,
            // A loss blocks I/O; a failed reconnect keeps the state it finds.
            (S::Running | S::Blocked, E::TransportLost) => S::Blocked,
            (S::FailFast, E::TransportLost) => S::FailFast,
            // Held I/O is failed; the port stays for reconnects.
            (S::Blocked, E::FastIoFailExpired) => S::FailFast,
            // The device is gone, held I/O or not.
            (S::Blocked | S::FailFast, E::DevLossExpired) => S::Lost,
            // A logout ends the port from any state; a new login needs a new channel.
            (_, E::LoggedOut) => S::Lost,
            (from, event) => return Err(InitiatorError::IllegalTransition { from, event }),
        })
    }
}

/// The channel's timers, one slot each; per-command deadlines are kept with the commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerKind {
    /// The current login attempt gives up.
    Login,
    /// The next reconnect attempt starts.
    Reconnect,
    /// Held I/O fails.
    FastIoFail,
    /// The port is lost.
    DevLoss,
    /// A logout stops waiting for the target to disconnect and disconnects itself.
    Logout,
}

const KINDS: [TimerKind; 5] = [
    TimerKind::Login,
    TimerKind::Reconnect,
    TimerKind::FastIoFail,
    TimerKind::DevLoss,
    TimerKind::Logout,
];

/// An enum-indexed timer table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TimerTable {
    at: [Option<Time>; 5],
}

impl TimerTable {
    /// Arms `kind` for `at`.
    pub(super) fn set(&mut self, kind: TimerKind, at: Time) {
        self.at[kind as usize] = Some(at);
    }

    /// Disarms `kind`.
    pub(super) fn stop(&mut self, kind: TimerKind) {
        self.at[kind as usize] = None;
    }

    /// The earliest armed timer.
    pub(super) fn next(&self) -> Option<Time> {
        self.at.iter().flatten().min().copied()
    }

    /// Disarms and returns the timers due at `now`, in table order.
    pub(super) fn expire(&mut self, now: Time) -> impl Iterator<Item = TimerKind> + use<> {
        let mut due = [None; 5];
        for (i, k) in KINDS.iter().enumerate() {
            if self.at[i].is_some_and(|t| t <= now) {
                self.at[i] = None;
                due[i] = Some(*k);
            }
        }
        due.into_iter().flatten()
    }
}

#[cfg(test)]
#[path = "timers_tests.rs"]
mod tests;
