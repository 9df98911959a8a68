//! The phases of `srpctl drill failover` — warmup, inject the fault, hold it, restore it,
//! after — and the status line printed once a second while they run.

use super::fault::Fault;
use super::report::{self, Phase};
use super::sampler::{self, Samples};
use super::workload::Shared;
use super::{Durations, FailoverArgs, Setup, make_fault};
use anyhow::{Context, Result};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What the phases did: the faulted path, the fault, and when it was injected and restored.
pub(super) struct Outcome {
    /// The faulted path's session.
    pub(super) session: u32,
    /// What the fault is, for the report (`no fault` if none).
    pub(super) what: String,
    /// Errors preparing, injecting or restoring the fault.
    pub(super) fault_errors: Vec<String>,
    /// When the fault was injected, µs since the drill's start.
    pub(super) inject_us: u64,
    /// When it was restored.
    pub(super) restore_us: u64,
}

/// Runs the phases: warmup, picks the path (`--path` or the busiest in the warmup), then
/// injects the fault, holds it, restores it, and runs the after phase. Also returns the
/// fault itself (none if it could not be prepared), for the caller to keep to the end.
pub(super) fn run(
    r: &mut Running,
    a: &FailoverArgs,
    setup: &mut Setup,
    durations: Durations,
) -> Result<(Outcome, Option<Fault>)> {
    r.hold("warmup", durations.warmup);
    let session = match a.path {
        Some(s) => s,
        None => {
            let s = r.samples.lock().unwrap_or_else(PoisonError::into_inner);
            report::busiest_path(&s.samples, r.now_us())
                .or_else(|| setup.disk.paths.first().map(|p| p.session))
                .context("the disk has no path")?
        }
    };
    let mut fault_errors = Vec::new();
    let mut fault = match make_fault(a, &setup.disk, session, &mut setup.shell) {
        Ok(f) => f,
        Err(e) => {
            fault_errors.push(format!("preparing the fault: {e:#}"));
            None
        }
    };
    let what = fault
        .as_ref()
        .map_or_else(|| "no fault".into(), Fault::describe);
    let socket = &setup.socket;
    // `--fault none`: the phases run (and are reported) all the same, nothing is injected.
    let injects = fault.is_some();
    if injects {
        eprintln!("injecting: {what}");
    }
    let inject_us = r.now_us();
    if let Some(Err(e)) = fault.as_mut().map(|f| f.inject(socket)) {
        fault_errors.push(format!("injecting: {e:#}"));
    }
    r.mark("inject", inject_us);
    r.hold("fault", durations.hold);
    if injects {
        eprintln!("restoring (undoing: {what})");
    }
    let restore_us = r.now_us();
    if let Some(Err(e)) = fault.as_mut().map(|f| f.restore(socket)) {
        fault_errors.push(format!("restoring: {e:#}"));
    }
    r.mark("restore", restore_us);
    r.hold("after", durations.after);
    let outcome = Outcome {
        session,
        what,
        fault_errors,
        inject_us,
        restore_us,
    };
    Ok((outcome, fault))
}

/// The running drill: its clock, counters and samples, and the progress display.
pub(super) struct Running {
    t0: Instant,
    shared: Arc<Shared>,
    samples: Arc<Mutex<Samples>>,
    last: (Instant, u64),
    /// The phases so far.
    pub(super) phases: Vec<Phase>,
}

impl Running {
    /// A drill started at `t0`, with no phase yet.
    pub(super) fn new(t0: Instant, shared: Arc<Shared>, samples: Arc<Mutex<Samples>>) -> Running {
        Running {
            t0,
            shared,
            samples,
            last: (t0, 0),
            phases: Vec::new(),
        }
    }

    /// µs since the drill's start.
    pub(super) fn now_us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }

    /// Holds phase `name` for `dur`, printing a status line every second.
    fn hold(&mut self, name: &'static str, dur: Duration) {
        let start_us = self.now_us();
        let end = Instant::now() + dur;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            let tick = self.last.0 + Duration::from_secs(1);
            std::thread::sleep(tick.min(end).saturating_duration_since(now));
            if Instant::now() >= tick {
                self.status(name);
            }
        }
        self.mark(name, start_us);
    }

    fn mark(&mut self, name: &'static str, start_us: u64) {
        let end_us = self.now_us();
        self.phases.push(Phase {
            name,
            start_us,
            end_us,
        });
    }

    /// One status line: phase, elapsed, IOPS, per-path IOPS, errors, mismatches.
    fn status(&mut self, phase: &str) {
        let now = Instant::now();
        let ops = self.shared.ops.load(Ordering::Relaxed);
        let dt = now.duration_since(self.last.0).as_secs_f64().max(1e-3);
        let iops = (ops - self.last.1) as f64 / dt;
        self.last = (now, ops);
        let per_path = {
            let s = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
            recent_path_iops(&s.samples)
        };
        eprintln!(
            "[{phase:<7}] {:6.1}s  IOPS {iops:7.0}  {per_path}  errors {}  mismatches {}",
            self.t0.elapsed().as_secs_f64(),
            self.shared.errors.load(Ordering::Relaxed),
            self.shared.mismatches.load(Ordering::Relaxed),
        );
    }
}

/// Each path's IOPS over about the last second of samples, with its state.
fn recent_path_iops(samples: &[sampler::Sample]) -> String {
    let Some(last) = samples.last() else {
        return "paths: (no sample yet)".into();
    };
    let since = last.at_us.saturating_sub(1_000_000);
    let first = samples
        .iter()
        .find(|s| s.at_us >= since)
        .filter(|s| s.at_us < last.at_us);
    last.paths
        .iter()
        .map(|p| {
            let rate = first
                .and_then(|f| f.path(p.session).map(|q| (f.at_us, q.ops)))
                .map_or(0.0, |(at, ops)| {
                    p.ops.saturating_sub(ops) as f64 / ((last.at_us - at) as f64 / 1e6)
                });
            format!("path {} {:.0} ({})", p.session, rate, p.state)
        })
        .collect::<Vec<_>>()
        .join("  ")
}
