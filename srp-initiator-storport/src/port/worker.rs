//! The port's DPC and timer. The DPC runs the miniport's DPC routine when queued
//! (`StorPortIssueDpc`) and its HwTimer when due, delivers completions to submitters (their
//! routines run at dispatch level; held while a bus reset runs) and starts requests that
//! completions, Ready and Resume released — one pass, so a completion the miniport's DPC
//! reports reaches its submitter without another hop. The timer never calls the miniport,
//! so a routine stuck at dispatch level cannot stop it: it runs the DPC watchdog and the
//! request timeouts.
//!
//! One implementation of each: [`dpc_pass`] and [`timer_pass`] do the work at a given
//! instant. In [`PortMode::Threads`](super::PortMode::Threads) two threads loop around them
//! with their waits (each timeout's bus reset on a thread of its own); in
//! [`PortMode::Manual`](super::PortMode::Manual) [`run_due`] calls them, on the owner's
//! thread, with the reset inline, and [`next_due`] says when they next have work.

use super::ResetCause;
use super::miniport::Miniport;
use super::shared::{RunState, Shared, State};
use super::verifier::Routine;
use access_layer::verbs::Completer;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Completions swapped out of the port's list to be delivered with no lock held.
type Done = Vec<(Completer<super::SrbResult>, super::SrbResult)>;

/// How long the DPC and timer threads sleep while the port holds no request (they are
/// woken when one comes): an idle port costs about nothing.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// At most this many passes per [`run_due`] (a miniport that queues its DPC from its DPC
/// forever would otherwise never let it return; the rest stays due).
const MAX_PASSES: usize = 10_000;

/// One DPC pass at `now`: completions waiting, the miniport's DPC routine if queued, its
/// HwTimer if due, the completions they made, then the requests the queues release.
/// Nothing while a bus reset holds the DPC. `done` is scratch (goes back empty, with its
/// memory, so a pass allocates nothing). Returns how much it did (0: nothing).
pub(crate) fn dpc_pass<M: Miniport>(shared: &Shared<M>, now: Instant, done: &mut Done) -> usize {
    let (dpc, timer) = {
        let mut s = shared.lock();
        if s.shutdown || s.queues.resetting > 0 {
            return 0;
        }
        let timer = s.timer_at.is_some_and(|t| t <= now);
        if timer {
            s.timer_at = None;
        }
        // A bugchecked port calls the miniport no more.
        let live = s.run != RunState::BugChecked;
        std::mem::swap(done, &mut s.done);
        (std::mem::take(&mut s.dpc_queued) && live, timer && live)
    };
    let mut work = done.len();
    for (completer, result) in done.drain(..) {
        completer.complete(Ok(result));
    }
    let port = shared.services();
    for (run, routine) in [(dpc, Routine::Dpc), (timer, Routine::Timer)] {
        if !run {
            continue;
        }
        work += 1;
        let r = shared.call(routine, true, || match routine {
            Routine::Timer => shared.miniport.timer(&port),
            _ => shared.miniport.dpc(&port),
        });
        if let Err(v) = r {
            shared.bugcheck(v);
        }
    }
    // What the miniport's DPC completed goes back now, in this pass (unless a bus reset
    // began meanwhile: then at the end of it).
    {
        let mut s = shared.lock();
        if s.queues.resetting == 0 {
            std::mem::swap(done, &mut s.done);
        }
    }
    work += done.len();
    for (completer, result) in done.drain(..) {
        completer.complete(Ok(result));
    }
    work + shared.pump()
}

/// One timer tick at `now`: the DPC watchdog and the request timeouts; returns the paths
/// whose bus to reset (the caller resets them: on threads of their own, or inline).
pub(crate) fn timer_pass<M: Miniport>(shared: &Shared<M>, now: Instant) -> Vec<u8> {
    shared.tick(now)
}

/// Waits until the DPC has something to do (or its next tick); false once the port shuts
/// down.
fn dpc_wait<M: Miniport>(shared: &Shared<M>) -> bool {
    let mut s = shared.lock();
    // A bus reset holds completions and the miniport's DPC until HwResetBus returned and
    // was checked.
    let holding = s.queues.resetting > 0;
    let now = shared.now();
    let timer_due = s.timer_at.is_some_and(|t| t <= now);
    let idle = s.done.is_empty() && !s.dpc_queued && !timer_due;
    if (idle || holding) && !s.shutdown {
        // Until the next tick (a long one when the port holds nothing) or the miniport's
        // timer, whichever comes first.
        let quiet = Shared::<M>::quiet(&s) && !holding;
        let tick = if quiet { IDLE_TICK } else { shared.config.tick };
        let wait = s
            .timer_at
            .map(|t| t.saturating_duration_since(now))
            .map_or(tick, |w| w.min(tick));
        s.dpc_idle = quiet;
        s = shared
            .dpc_wake
            .wait_timeout(s, wait)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
        s.dpc_idle = false;
    }
    !s.shutdown
}

/// The DPC thread, until the port shuts down.
pub(crate) fn run_dpc<M: Miniport>(shared: Arc<Shared<M>>) {
    let mut done = Vec::new();
    while dpc_wait(&shared) {
        dpc_pass(&shared, shared.now(), &mut done);
    }
}

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
        for path in timer_pass(&shared, shared.now()) {
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

/// Manual mode: when the timer thread would tick next (`None` while the port is quiet,
/// when it would sleep until woken; the schedule restarts then).
fn next_tick<M: Miniport>(
    shared: &Shared<M>,
    s: &mut State<M::SrbExtension>,
    now: Instant,
) -> Option<Instant> {
    if Shared::<M>::quiet(s) {
        s.last_tick = None;
        return None;
    }
    Some(*s.last_tick.get_or_insert(now) + shared.config.tick)
}

/// Manual mode: everything due at the clock's `now()`, until nothing more is (see
/// [`Port::run_due`](super::Port::run_due)). DPC passes first, then the tick if due (its
/// bus resets inline).
pub(crate) fn run_due<M: Miniport>(shared: &Shared<M>) -> usize {
    let mut done = Vec::new();
    let mut total = 0;
    for _ in 0..MAX_PASSES {
        let now = shared.now();
        let mut work = dpc_pass(shared, now, &mut done);
        let tick_due = {
            let mut s = shared.lock();
            let due = !s.shutdown && next_tick(shared, &mut s, now).is_some_and(|t| t <= now);
            if due {
                s.last_tick = Some(now);
            }
            due
        };
        if tick_due {
            work += 1;
            for path in timer_pass(shared, now) {
                let _ = shared.reset_bus(path, ResetCause::Timeout);
                work += 1;
            }
        }
        if work == 0 {
            break;
        }
        total += work;
    }
    total
}

/// Manual mode: the earliest instant at which [`run_due`] has work (see
/// [`Port::next_due`](super::Port::next_due)); `now` when something is due already.
pub(crate) fn next_due<M: Miniport>(shared: &Shared<M>) -> Option<Instant> {
    let now = shared.now();
    let mut s = shared.lock();
    if s.shutdown {
        return None;
    }
    let mut due: Option<Instant> = None;
    let mut at = |t: Instant| due = Some(due.map_or(t, |d| d.min(t)));
    let released = s.run == RunState::Running && s.queues.startable(now);
    if s.queues.resetting == 0 && (s.dpc_queued || !s.done.is_empty() || released) {
        at(now);
    }
    if let Some(t) = s.timer_at {
        at(t);
    }
    if let Some(t) = next_tick(shared, &mut s, now) {
        at(t);
    }
    if let Some(t) = s.queues.next_release(now) {
        at(t);
    }
    due.map(|t| t.max(now))
}
