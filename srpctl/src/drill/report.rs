//! What a drill measured, computed from the workload's completions and the sampler's
//! samples: the longest stall, failover and failback times, IOPS over time (in total and per
//! path), errors and mismatches; as JSON and as a summary for the terminal.

use super::sampler::Sample;
use super::workload::Failure;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const SEC_US: u64 = 1_000_000;

/// The longest interval in which no I/O completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stall {
    /// When it began (the completion before it), µs since the start.
    pub(crate) start_us: u64,
    /// How long it lasted.
    pub(crate) len_us: u64,
}

/// The longest gap between consecutive completions `done` (sorted, µs) within
/// `from_us..=to_us`, counting the gaps from `from_us` to the first and from the last to
/// `to_us`.
pub(crate) fn max_stall(done: &[u64], from_us: u64, to_us: u64) -> Stall {
    let mut best = Stall::default();
    let mut prev = from_us;
    let inside = done.iter().copied().filter(|&t| t >= from_us && t <= to_us);
    for t in inside.chain(std::iter::once(to_us)) {
        if t - prev > best.len_us {
            best = Stall {
                start_us: prev,
                len_us: t - prev,
            };
        }
        prev = t;
    }
    best
}

/// The first completion at or after `at_us` in `done` (sorted).
pub(crate) fn first_at_or_after(done: &[u64], at_us: u64) -> Option<u64> {
    let i = done.partition_point(|&t| t < at_us);
    done.get(i).copied()
}

/// Completions in each whole second up to `end_us` (a last partial second is left out: its
/// count would read as a drop).
pub(crate) fn per_second(done: &[u64], end_us: u64) -> Vec<u64> {
    let mut bins = vec![0; (end_us / SEC_US).max(1) as usize];
    for &t in done {
        if let Some(b) = bins.get_mut((t / SEC_US) as usize) {
            *b += 1;
        }
    }
    bins
}

/// IOPS of each path in each whole second up to `end_us`: each pair of consecutive samples'
/// counter increase spread evenly over the time between them.
pub(crate) fn path_iops(samples: &[Sample], end_us: u64) -> BTreeMap<u32, Vec<f64>> {
    let seconds = (end_us / SEC_US).max(1) as usize;
    let mut out: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for s in samples {
        for p in &s.paths {
            out.entry(p.session).or_insert_with(|| vec![0.0; seconds]);
        }
    }
    for pair in samples.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.at_us <= a.at_us {
            continue;
        }
        for p in &b.paths {
            let before = a.path(p.session).map_or(0, |q| q.ops);
            // A counter that went back: the path was re-created; count from zero.
            let delta = if p.ops >= before {
                p.ops - before
            } else {
                p.ops
            };
            if delta == 0 {
                continue;
            }
            let Some(series) = out.get_mut(&p.session) else {
                continue;
            };
            let rate = delta as f64 / (b.at_us - a.at_us) as f64;
            let mut t = a.at_us;
            while t < b.at_us {
                let bin = t / SEC_US;
                let until = ((bin + 1) * SEC_US).min(b.at_us);
                if let Some(v) = series.get_mut(bin as usize) {
                    *v += rate * (until - t) as f64;
                }
                t = until;
            }
        }
    }
    out
}

/// When path `session` first shows as not active (or gone) in a sample at or after `at_us`.
pub(crate) fn path_left_active(samples: &[Sample], session: u32, at_us: u64) -> Option<u64> {
    samples
        .iter()
        .filter(|s| s.at_us >= at_us)
        .find(|s| s.path(session).is_none_or(|p| p.state != "active"))
        .map(|s| s.at_us)
}

/// When path `session` — or a path to the same target (IOC and portal) that replaced it, as
/// a session surprise-removed and logged in again — first completes I/O again after
/// `at_us`: the first sample at or after it whose counter (summed over those paths) is
/// above the sample before.
pub(crate) fn path_carries_io(samples: &[Sample], session: u32, at_us: u64) -> Option<u64> {
    let target = samples
        .iter()
        .find_map(|s| s.path(session))
        .map(|p| p.target.clone());
    let ops = |s: &Sample| -> Option<u64> {
        let mut paths = s
            .paths
            .iter()
            .filter(|p| p.session == session || target.as_ref().is_some_and(|t| *t == p.target));
        let first = paths.next()?;
        Some(first.ops + paths.map(|p| p.ops).sum::<u64>())
    };
    samples
        .windows(2)
        .filter(|w| w[1].at_us >= at_us)
        .find(|w| {
            // A replacement path starts its own count: any count on a path that was not
            // there before is I/O carried.
            let fresh = w[1].paths.iter().any(|p| {
                p.ops > 0
                    && w[0].path(p.session).is_none()
                    && (p.session == session || target.as_ref() == Some(&p.target))
            });
            fresh || matches!((ops(&w[0]), ops(&w[1])), (Some(a), Some(b)) if b > a)
        })
        .map(|w| w[1].at_us)
}

/// The path that completed the most I/O in samples before `until_us`.
pub(crate) fn busiest_path(samples: &[Sample], until_us: u64) -> Option<u32> {
    let seen: Vec<&Sample> = samples.iter().filter(|s| s.at_us <= until_us).collect();
    let (first, last) = (seen.first()?, seen.last()?);
    last.paths
        .iter()
        .map(|p| {
            let before = first.path(p.session).map_or(0, |q| q.ops);
            (p.ops.saturating_sub(before), p.session)
        })
        .max_by_key(|&(ops, session)| (ops, std::cmp::Reverse(session)))
        .map(|(_, session)| session)
}

/// One phase of the drill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Phase {
    /// `warmup`, `inject`, `fault`, `restore`, `after`.
    pub(crate) name: &'static str,
    /// Its start, µs since the drill's start.
    pub(crate) start_us: u64,
    /// Its end.
    pub(crate) end_us: u64,
}

/// Everything a drill found.
#[derive(Clone, Debug)]
pub(crate) struct Report {
    /// The disk's name and identity, its policy at the start.
    pub(crate) disk: String,
    /// The disk's identity.
    pub(crate) identity: String,
    /// The disk's policy.
    pub(crate) policy: String,
    /// The fault's kind (`admin`, `ioc`, `link`, `kill`, `none`).
    pub(crate) fault_kind: String,
    /// The fault, described.
    pub(crate) fault: String,
    /// The faulted path's session.
    pub(crate) session: u32,
    /// The options the drill ran with.
    pub(crate) settings: Value,
    /// Phases in order.
    pub(crate) phases: Vec<Phase>,
    /// When the fault was injected (the injection started).
    pub(crate) inject_us: u64,
    /// When the restore started.
    pub(crate) restore_us: u64,
    /// The end of the run.
    pub(crate) end_us: u64,
    /// Successful completions (sorted, µs).
    pub(crate) done: Vec<u64>,
    /// Successful reads and writes.
    pub(crate) reads: u64,
    /// Successful writes.
    pub(crate) writes: u64,
    /// I/O errors and data mismatches, in time order.
    pub(crate) failures: Vec<Failure>,
    /// Failures of the fault's own injection or restore.
    pub(crate) fault_errors: Vec<String>,
    /// The sampler's samples.
    pub(crate) samples: Vec<Sample>,
    /// Polls of the host daemon that failed.
    pub(crate) failed_polls: u64,
}

fn ms(us: u64) -> f64 {
    (us as f64 / 100.0).round() / 10.0
}

impl Report {
    /// The longest stall of the whole run.
    pub(crate) fn stall(&self) -> Stall {
        max_stall(&self.done, 0, self.end_us)
    }

    /// Fault injected → first I/O completion after it.
    pub(crate) fn failover_us(&self) -> Option<u64> {
        first_at_or_after(&self.done, self.inject_us).map(|t| t - self.inject_us)
    }

    /// Fault injected → the host shows the faulted path not active.
    pub(crate) fn path_down_us(&self) -> Option<u64> {
        path_left_active(&self.samples, self.session, self.inject_us).map(|t| t - self.inject_us)
    }

    /// Fault restored → the faulted path carries I/O again.
    pub(crate) fn failback_us(&self) -> Option<u64> {
        path_carries_io(&self.samples, self.session, self.restore_us).map(|t| t - self.restore_us)
    }

    /// I/O errors.
    pub(crate) fn errors(&self) -> usize {
        self.failures.iter().filter(|f| !f.mismatch).count()
    }

    /// Data mismatches.
    pub(crate) fn mismatches(&self) -> usize {
        self.failures.iter().filter(|f| f.mismatch).count()
    }

    /// No error, no mismatch, and the fault went in and out.
    pub(crate) fn passed(&self) -> bool {
        self.failures.is_empty() && self.fault_errors.is_empty()
    }

    /// The report as JSON (times in ms since the start, one decimal).
    pub(crate) fn to_json(&self) -> Value {
        let stall = self.stall();
        let opt = |v: Option<u64>| v.map(ms);
        let paths: BTreeMap<String, Vec<f64>> = path_iops(&self.samples, self.end_us)
            .into_iter()
            .map(|(s, v)| (s.to_string(), v.iter().map(|x| x.round()).collect()))
            .collect();
        let failures = |mismatch: bool| -> Vec<Value> {
            self.failures
                .iter()
                .filter(|f| f.mismatch == mismatch)
                .map(|f| json!({"at_ms": ms(f.at_us), "what": f.what}))
                .collect()
        };
        json!({
            "passed": self.passed(),
            "disk": {"name": self.disk, "identity": self.identity, "policy": self.policy},
            "fault": {"kind": self.fault_kind, "what": self.fault, "path": self.session,
                      "errors": self.fault_errors},
            "settings": self.settings,
            "phases": self.phases.iter().map(|p| json!({
                "name": p.name, "start_ms": ms(p.start_us), "end_ms": ms(p.end_us)
            })).collect::<Vec<_>>(),
            "inject_ms": ms(self.inject_us),
            "restore_ms": ms(self.restore_us),
            "end_ms": ms(self.end_us),
            "io": {"reads": self.reads, "writes": self.writes,
                   "errors": self.errors(), "mismatches": self.mismatches()},
            "max_stall": {"start_ms": ms(stall.start_us), "ms": ms(stall.len_us)},
            "failover_ms": opt(self.failover_us()),
            "path_not_active_ms": opt(self.path_down_us()),
            "failback_ms": opt(self.failback_us()),
            "iops": per_second(&self.done, self.end_us),
            "iops_per_path": paths,
            "samples": self.samples.iter().map(|s| json!({
                "at_ms": ms(s.at_us),
                "queued": s.queued,
                "paths": s.paths.iter().map(|p| json!({
                    "session": p.session, "ops": p.ops, "state": p.state,
                    "in_flight": p.in_flight,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "failed_polls": self.failed_polls,
            "errors": failures(false),
            "mismatches": failures(true),
        })
    }

    /// The summary's failover and failback lines.
    fn failover_lines(&self) -> String {
        let dur = |v: Option<u64>, what: &str| match v {
            Some(us) => format!("{} ms", ms(us)),
            None => format!("never ({what})"),
        };
        format!(
            "failover: first I/O completed {} after the fault; the host showed path {} \
             not active after {}\n\
             failback: {}\n",
            dur(self.failover_us(), "no I/O completed after the fault"),
            self.session,
            dur(self.path_down_us(), "it stayed active"),
            match self.failback_us() {
                Some(us) => format!(
                    "path {} carried I/O again {} ms after the restore",
                    self.session,
                    ms(us)
                ),
                None => format!(
                    "path {} carried no I/O again before the end of the run (--after)",
                    self.session
                ),
            },
        )
    }

    /// The summary printed at the end.
    pub(crate) fn summary(&self) -> String {
        let secs = |us: u64| format!("{:.1} s", us as f64 / 1e6);
        let stall = self.stall();
        let total = self.reads + self.writes;
        let mut out = format!(
            "drill failover: disk {} ({}), policy {}\n\
             fault: {} at {}, restored at {}\n\
             I/O: {} reads, {} writes ({:.0} IOPS average), {} errors, {} mismatches\n\
             max I/O stall: {} ms, from {}\n",
            self.disk,
            self.identity,
            self.policy,
            self.fault,
            secs(self.inject_us),
            secs(self.restore_us),
            self.reads,
            self.writes,
            total as f64 / (self.end_us.max(1) as f64 / 1e6),
            self.errors(),
            self.mismatches(),
            ms(stall.len_us),
            secs(stall.start_us),
        );
        // With no fault there is no failover or failback to speak of.
        if self.fault_kind != "none" {
            out.push_str(&self.failover_lines());
        }
        for f in self.failures.iter().take(10) {
            out.push_str(&format!(
                "  {} at {}: {}\n",
                if f.mismatch { "MISMATCH" } else { "I/O ERROR" },
                secs(f.at_us),
                f.what
            ));
        }
        if self.failures.len() > 10 {
            out.push_str(&format!("  … {} more\n", self.failures.len() - 10));
        }
        for e in &self.fault_errors {
            out.push_str(&format!("  FAULT: {e}\n"));
        }
        out.push_str(if self.passed() {
            "PASSED: no I/O error, no data mismatch\n"
        } else {
            "FAILED\n"
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::sampler::PathSample;

    fn sample(at_ms: u64, paths: &[(u32, u64, &str)]) -> Sample {
        Sample {
            at_us: at_ms * 1000,
            queued: 0,
            paths: paths
                .iter()
                .map(|&(session, ops, state)| PathSample {
                    session,
                    // Session 3 is session 1 logged in again (the same IOC at the same portal).
                    target: format!("ioc{}", if session == 3 { 1 } else { session }),
                    ops,
                    state: state.into(),
                    in_flight: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn the_longest_gap_is_the_stall() {
        // Completions every 10 ms, a hole from 3.00 s to 3.25 s.
        let mut done: Vec<u64> = (0..300).map(|i| i * 10_000).collect();
        done.extend((325..600).map(|i| i * 10_000));
        let s = max_stall(&done, 0, 6_000_000);
        assert_eq!(
            s,
            Stall {
                start_us: 2_990_000,
                len_us: 260_000
            }
        );
        // The gap to the end of the run counts (I/O stuck at the end).
        let s = max_stall(&done, 0, 8_000_000);
        assert_eq!(s.start_us, 5_990_000);
        assert_eq!(s.len_us, 2_010_000);
        // No completion at all: the whole window.
        assert_eq!(max_stall(&[], 100, 900).len_us, 800);
        // Failover: the first completion after the fault at 3.1 s.
        assert_eq!(first_at_or_after(&done, 3_100_000), Some(3_250_000));
        assert_eq!(first_at_or_after(&done, 7_000_000), None);
        assert_eq!(per_second(&done, 6_000_000)[3], 75);
        assert_eq!(per_second(&done, 6_000_000)[2], 100);
    }

    #[test]
    fn path_times_come_from_the_samples() {
        let samples = vec![
            sample(0, &[(1, 0, "active"), (2, 0, "active")]),
            sample(200, &[(1, 100, "active"), (2, 100, "active")]),
            sample(400, &[(1, 150, "active"), (2, 200, "active")]),
            // Fault at 500 ms on path 1.
            sample(600, &[(1, 150, "admin-down"), (2, 400, "active")]),
            sample(800, &[(1, 150, "admin-down"), (2, 600, "active")]),
            // Restored at 900 ms.
            sample(1000, &[(1, 150, "active"), (2, 700, "active")]),
            sample(1200, &[(1, 250, "active"), (2, 800, "active")]),
        ];
        assert_eq!(busiest_path(&samples, 400_000), Some(2));
        assert_eq!(path_left_active(&samples, 1, 500_000), Some(600_000));
        assert_eq!(path_carries_io(&samples, 1, 900_000), Some(1_200_000));
        assert_eq!(path_left_active(&samples, 2, 500_000), None);
        // Path 1 surprise-removed and back as session 3: its target's I/O is the failback.
        let replaced = vec![
            sample(400, &[(1, 150, "active"), (2, 200, "active")]),
            sample(600, &[(2, 400, "active")]),
            sample(1000, &[(2, 700, "active"), (3, 0, "active")]),
            sample(1200, &[(2, 800, "active"), (3, 40, "active")]),
        ];
        assert_eq!(path_left_active(&replaced, 1, 500_000), Some(600_000));
        assert_eq!(path_carries_io(&replaced, 1, 900_000), Some(1_200_000));
        assert_eq!(path_carries_io(&replaced, 2, 900_000), Some(1_000_000));
        let iops = path_iops(&samples, 2_000_000);
        assert_eq!(iops.len(), 2);
        // Second 0: path 1 did 150 ops, path 2 did 700 ops; second 1: 100 and 100.
        assert!((iops[&1][0] - 150.0).abs() < 1e-6, "{iops:?}");
        assert!((iops[&2][0] - 700.0).abs() < 1e-6, "{iops:?}");
        assert!((iops[&1][1] - 100.0).abs() < 1e-6, "{iops:?}");
        assert!((iops[&2][1] - 100.0).abs() < 1e-6, "{iops:?}");
    }

    #[test]
    fn the_report_derives_its_numbers() {
        let done: Vec<u64> = (0..100)
            .map(|i| i * 50_000)
            .filter(|t| !(2_000_000..2_400_000).contains(t))
            .collect();
        let r = Report {
            disk: "d".into(),
            identity: "naa.1".into(),
            policy: "round-robin".into(),
            fault_kind: "admin".into(),
            fault: "path 1 administratively failed".into(),
            session: 1,
            settings: json!({}),
            phases: vec![],
            inject_us: 2_010_000,
            restore_us: 4_000_000,
            end_us: 5_000_000,
            done,
            reads: 40,
            writes: 52,
            failures: vec![],
            fault_errors: vec![],
            samples: vec![],
            failed_polls: 0,
        };
        assert_eq!(r.stall().len_us, 450_000);
        assert_eq!(r.failover_us(), Some(390_000));
        assert!(r.passed());
        let v = r.to_json();
        assert_eq!(v["max_stall"]["ms"], json!(450.0));
        assert_eq!(v["failover_ms"], json!(390.0));
        assert!(
            r.summary()
                .ends_with("PASSED: no I/O error, no data mismatch\n")
        );
        assert!(
            r.summary()
                .contains("failover: first I/O completed 390 ms after")
        );
        // No fault: no failover or failback line, the rest as ever.
        let none = Report {
            fault_kind: "none".into(),
            fault: "no fault".into(),
            ..r
        };
        let text = none.summary();
        assert!(
            !text.contains("\nfailover:") && !text.contains("\nfailback:"),
            "{text}"
        );
        assert!(text.contains("max I/O stall: 450 ms"), "{text}");
    }
}
