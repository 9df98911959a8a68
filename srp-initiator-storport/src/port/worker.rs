//! The port's two threads. The DPC runs the miniport's DPC routine when queued
//! (`StorPortIssueDpc`) and its HwTimer when due, delivers completions to submitters (their
//! routines run at dispatch level; held while a bus reset runs) and starts requests that
//! completions, Ready and Resume released — one thread, so a completion the miniport's DPC
//! reports reaches its submitter without another hop. The timer never calls the miniport,
//! so a routine stuck at dispatch level cannot stop it: it runs the DPC watchdog and the
//! request timeouts (each timeout starts a bus reset on a thread of its own).

use super::ResetCause;
use super::miniport::Miniport;
use super::shared::{RunState, Shared};
use super::verifier::Routine;
use std::sync::Arc;
use std::time::Instant;

/// What one pass of the DPC found to do.
struct Pass {
    dpc: bool,
    timer: bool,
}

/// The DPC thread, until the port shuts down.
pub(crate) fn run_dpc<M: Miniport>(shared: Arc<Shared<M>>) {
    // Completions are swapped out of the port's list into this one, which goes back empty
    // with its memory: delivering them allocates nothing.
    let mut done = Vec::new();
    loop {
        let pass = {
            let mut s = shared.lock();
            // A bus reset holds completions and the miniport's DPC until HwResetBus
            // returned and was checked.
            let holding = s.queues.resetting > 0;
            let timer_due = s.timer_at.is_some_and(|t| t <= Instant::now());
            let idle = s.done.is_empty() && !s.dpc_queued && !timer_due;
            if (idle || holding) && !s.shutdown {
                // Until the next tick (a long one when the port holds nothing) or the
                // miniport's timer, whichever comes first.
                let quiet = Shared::<M>::quiet(&s) && !holding;
                let tick = if quiet { IDLE_TICK } else { shared.config.tick };
                let wait = s
                    .timer_at
                    .map(|t| t.saturating_duration_since(Instant::now()))
                    .map_or(tick, |w| w.min(tick));
                s.dpc_idle = quiet;
                s = shared
                    .kick
                    .wait_timeout(s, wait)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
                s.dpc_idle = false;
            }
            if s.shutdown {
                return;
            }
            if s.queues.resetting > 0 {
                continue;
            }
            let timer = s.timer_at.is_some_and(|t| t <= Instant::now());
            if timer {
                s.timer_at = None;
            }
            // A bugchecked port calls the miniport no more.
            let live = s.run != RunState::BugChecked;
            std::mem::swap(&mut done, &mut s.done);
            Pass {
                dpc: std::mem::take(&mut s.dpc_queued) && live,
                timer: timer && live,
            }
        };
        for (completer, result) in done.drain(..) {
            completer.complete(Ok(result));
        }
        let port = shared.services();
        for (run, routine) in [(pass.dpc, Routine::Dpc), (pass.timer, Routine::Timer)] {
            if !run {
                continue;
            }
            let r = shared.call(routine, true, || match routine {
                Routine::Timer => shared.miniport.timer(&port),
                _ => shared.miniport.dpc(&port),
            });
            if let Err(v) = r {
                shared.bugcheck(v);
            }
        }
        // What the miniport's DPC completed goes back now, on this thread (unless a bus
        // reset began meanwhile: then at the end of it).
        {
            let mut s = shared.lock();
            if s.queues.resetting == 0 {
                std::mem::swap(&mut done, &mut s.done);
            }
        }
        for (completer, result) in done.drain(..) {
            completer.complete(Ok(result));
        }
        shared.pump();
    }
}

/// How long the DPC and timer threads sleep while the port holds no request (they are
/// woken when one comes): an idle port costs about nothing.
const IDLE_TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// The timer thread, until the port shuts down: a tick while the port holds requests or
/// runs a routine, asleep (woken by the next one) while it is quiet.
pub(crate) fn run_timer<M: Miniport>(shared: Arc<Shared<M>>) {
    loop {
        {
            let mut s = shared.lock();
            if s.shutdown {
                return;
            }
            if Shared::<M>::quiet(&s) {
                s.timer_idle = true;
                s = shared
                    .timer_wake
                    .wait_timeout(s, IDLE_TICK)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
                s.timer_idle = false;
                if s.shutdown {
                    return;
                }
            }
        }
        std::thread::sleep(shared.config.tick);
        for path in shared.tick(Instant::now()) {
            let sh = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("storport-reset-{path}"))
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
