//! The port's two threads and what the timer escalates to.
//!
//! `iscsiport-dpc` delivers completions to submitters and starts the requests that
//! completions, resumes and resets released. `iscsiport-timer` never calls the driver, so
//! an entry stuck at dispatch level cannot stop it: every tick it runs the dispatch
//! watchdog and the request timeouts; a timed-out request makes the port reset its bus,
//! on a thread of its own.
//!
//! A reset holds the queue, waits until no request is being started, calls
//! [`Driver::reset`](super::Driver::reset) at dispatch level, then completes every request
//! the driver still holds on that bus with `SRB_STATUS_BUS_RESET` (they are flushed: a
//! later completion of one is a violation).

use super::driver::Driver;
use super::lifecycle::Lifecycle;
use super::request::FlushCause;
use super::shared::Shared;
use super::verifier::{EntryPoint, Violation};
use super::{PortError, PortEvent, ResetCause, SrbId, SrbStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the threads sleep while the port holds nothing (they are woken when it does).
const IDLE: Duration = Duration::from_secs(1);

impl<D: Driver> Shared<D> {
    /// Resets bus `path_id` (see the module doc); true if the driver reported success.
    pub(crate) fn reset_bus(&self, path_id: u8, cause: ResetCause) -> Result<bool, PortError> {
        {
            let mut s = self.lock();
            match s.life {
                Lifecycle::BugChecked => return Err(PortError::BugChecked),
                life if !life.accepts() => return Err(PortError::NotAccepting(life)),
                _ => s.resetting += 1,
            }
        }
        let r = self.reset_held(path_id, cause);
        self.lock().resetting -= 1;
        self.changed.notify_all();
        self.pump();
        r
    }

    fn reset_held(&self, path_id: u8, cause: ResetCause) -> Result<bool, PortError> {
        // No request is being started while the driver resets.
        if !self.wait_until(None, |s| !s.pumping) {
            return Err(PortError::BugChecked);
        }
        let handle = self.handle();
        let ok = self
            .call(EntryPoint::Reset, || self.driver.reset(&handle, path_id))
            .map_err(|v| self.fail(v))?;
        let mut s = self.lock();
        if s.life == Lifecycle::BugChecked {
            return Err(PortError::BugChecked);
        }
        let mut flushed: Vec<SrbId> = s
            .outstanding
            .iter()
            .filter(|(_, o)| o.request.address().path_id == path_id)
            .map(|(id, _)| id)
            .collect();
        flushed.sort();
        for id in &flushed {
            self.flush(&mut s, *id, SrbStatus::BUS_RESET, FlushCause::Reset);
        }
        tracing::warn!(path_id, ?cause, ok, flushed = flushed.len(), "bus reset");
        s.events.push(PortEvent::BusReset {
            path_id,
            cause,
            success: ok,
            flushed,
        });
        drop(s);
        self.deliver();
        Ok(ok)
    }

    /// One timer tick at `now`: the watchdog, then request timeouts. Returns the buses to
    /// reset.
    pub(crate) fn tick(&self, now: Instant) -> Vec<u8> {
        let mut s = self.lock();
        if matches!(s.life, Lifecycle::BugChecked | Lifecycle::Unloaded) {
            return Vec::new();
        }
        let limit = self.config.dispatch_watchdog;
        let stuck = s.calls.overdue(now, limit);
        if let Some(entry) = stuck {
            drop(s);
            self.bugcheck(Violation::DispatchWatchdog {
                entry,
                limit_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
            });
            return Vec::new();
        }
        let mut expired = Vec::new();
        for (id, o) in s.outstanding.iter_mut() {
            let late = now.saturating_duration_since(o.started) > o.request.timeout();
            if late && !o.timed_out {
                o.timed_out = true;
                expired.push((id, o.request.address(), o.request.tag()));
            }
        }
        // In submit order, as the buses to reset.
        expired.sort_by_key(|&(id, ..)| id);
        let mut paths = Vec::new();
        for (id, lu, tag) in expired {
            s.events.push(PortEvent::RequestTimedOut { id, lu, tag });
            if !paths.contains(&lu.path_id) {
                paths.push(lu.path_id);
            }
        }
        paths
    }
}

/// The DPC thread, until the port shuts down.
pub(crate) fn run_dpc<D: Driver>(shared: Arc<Shared<D>>) {
    loop {
        {
            let mut s = shared.lock();
            if !s.kicked && !s.shutdown {
                s = shared
                    .dpc_wake
                    .wait_timeout(s, IDLE)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            if s.shutdown {
                return;
            }
            s.kicked = false;
        }
        shared.deliver();
        shared.pump();
    }
}

/// The timer thread, until the port shuts down: a tick while the driver holds requests or
/// runs a dispatch-level entry, asleep (woken by the next one) otherwise.
pub(crate) fn run_timer<D: Driver>(shared: Arc<Shared<D>>) {
    loop {
        {
            let mut s = shared.lock();
            if s.shutdown {
                return;
            }
            let busy = !s.outstanding.is_empty() || !s.calls.is_empty();
            let wait = if busy { shared.config.tick } else { IDLE };
            s.timer_idle = !busy;
            let mut s = shared
                .timer_wake
                .wait_timeout(s, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
            s.timer_idle = false;
            if s.shutdown {
                return;
            }
        }
        for path in shared.tick(shared.now()) {
            let sh = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("iscsiport-reset-{path}"))
                .spawn(move || {
                    let _ = sh.reset_bus(path, ResetCause::Timeout);
                });
            if spawned.is_err() {
                // No thread to spare: reset from here rather than never.
                let _ = shared.reset_bus(path, ResetCause::Timeout);
            }
        }
    }
}
