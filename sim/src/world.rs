//! One simulated run: the net, the target, the host and the workload, stepped from one
//! thread in virtual time.
//!
//! The loop does everything due now — the net's deliveries, device timers and queued verb
//! completions, the target's loop, the host's ports, multipath and commands, the workload's
//! next commands, the fault schedule — until a pass finds nothing, then moves the clock to
//! the earliest time anyone has work. No thread is started and nothing sleeps, so the run
//! is a function of its seed: [`run`] twice with one seed gives the same [`Report`].

use crate::faults::{Fault, FaultMix, FaultPlan};
use crate::host::{HostSetup, SimHost};
use crate::target::SimTarget;
use crate::workload::{Shape, Workload, WorkloadStats};
use hca::sim::{FabricStats, Rng, SimNet};
use ib_verbs::time::Time;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

/// The target's port addresses and the host's (never bound: the net is simulated).
const TARGET: [IpAddr; 2] = [
    IpAddr::V4(Ipv4Addr::new(127, 0, 180, 1)),
    IpAddr::V4(Ipv4Addr::new(127, 0, 180, 2)),
];
const HOST: [IpAddr; 2] = [
    IpAddr::V4(Ipv4Addr::new(127, 0, 180, 11)),
    IpAddr::V4(Ipv4Addr::new(127, 0, 180, 12)),
];

/// The longest a run may take in virtual time before it counts as stalled.
const LIMIT: Duration = Duration::from_secs(900);

/// How many log lines a failure report keeps.
const LOG_LINES: usize = 60;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scenario {
    /// The seed: everything else random is drawn from it.
    pub seed: u64,
    /// The workload.
    pub shape: Shape,
    /// The kinds of faults drawn.
    pub mix: FaultMix,
    /// Inject the lying flush ([`crate::disk::SimDisk::inject_lying_flush`]).
    pub lying_flush: bool,
}

impl Scenario {
    /// The default scenario of `seed`.
    pub fn new(seed: u64) -> Scenario {
        Scenario {
            seed,
            shape: Shape::default(),
            mix: FaultMix::default(),
            lying_flush: false,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// The host's setup it drew.
    pub setup: HostSetup,
    /// The faults it drew.
    pub plan: FaultPlan,
    /// Virtual time the run took.
    pub virtual_time: Duration,
    /// The workload's counters.
    pub workload: WorkloadStats,
    /// Reads checked against the model.
    pub reads_checked: u64,
    /// Commands moved to another path after a path failure.
    pub failovers: u64,
    /// The net's counters.
    pub net: FabricStats,
    /// Target crashes.
    pub crashes: u64,
    /// Sectors a crash set back.
    pub sectors_lost: u64,
    /// Passes of the loop.
    pub steps: u64,
    /// Times someone said it had work due and did none (the clock then moved 1 µs).
    pub idle_wakeups: u64,
    /// Threads of the process when the run ended, before tearing down (the run starts
    /// none: this is the caller's count).
    pub threads: usize,
    /// A digest of the whole run's log: equal digests, equal runs.
    pub digest: u64,
    /// The scheduled faults that happened, in order (a crash scheduled while the target
    /// was already down does not happen).
    pub fired: Vec<Fault>,
    /// The link faults (flaps and partitions) that happened, each with whether a command
    /// moved to the other path while it lasted.
    pub link_faults: Vec<LinkFault>,
}

/// A link fault that happened, and what multipath did about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkFault {
    /// The fault.
    pub fault: Fault,
    /// Commands in flight on its path when it began.
    pub in_flight: u32,
    /// Whether a command moved to the other path while it lasted.
    pub failover: bool,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The seed (`SIM_SEED` replays it).
    pub seed: u64,
    /// What went wrong.
    pub reason: String,
    /// The last lines of the run's log.
    pub log: Vec<String>,
    /// The run as far as it got.
    pub report: Report,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {} failed: {}", self.seed, self.reason)?;
        writeln!(f, "host: {:?}", self.report.setup)?;
        writeln!(f, "faults: {:?}", self.report.plan)?;
        writeln!(
            f,
            "at {:?} virtual: {:?}, {} reads checked, {} failovers, {} crashes, net {:?}",
            self.report.virtual_time,
            self.report.workload,
            self.report.reads_checked,
            self.report.failovers,
            self.report.crashes,
            self.report.net
        )?;
        writeln!(
            f,
            "replay: SIM_SEED={} cargo test -p srp-sim --test whole_stack sim_seed -- --ignored --nocapture",
            self.seed
        )?;
        for l in &self.log {
            writeln!(f, "  {l}")?;
        }
        Ok(())
    }
}

/// The run's log: every line hashed into the digest, the last few kept.
#[derive(Debug, Default)]
struct Log {
    lines: VecDeque<String>,
    digest: u64,
    /// `SIM_LOG` set: every line on stderr as well.
    echo: bool,
    /// `SIM_TRACE_LBA=n`: every command touching block `n` logged.
    trace_lba: Option<u64>,
}

impl Log {
    fn line(&mut self, now: Time, text: String) {
        let line = format!("{:>10.6}s {text}", now.0 as f64 / 1e9);
        for b in line.bytes() {
            self.digest = (self.digest ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        if self.echo {
            eprintln!("{line}");
        }
        if self.lines.len() == LOG_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }
}

struct World {
    net: Arc<SimNet>,
    target: SimTarget,
    host: SimHost,
    workload: Workload,
    plan: FaultPlan,
    /// Fault events still to happen, with their virtual time; and their ends.
    schedule: Vec<(Time, Action)>,
    rng: Rng,
    log: Log,
    started: Option<Time>,
    steps: u64,
    idle_wakeups: u64,
    seed: u64,
    setup: HostSetup,
    workload_span: Duration,
    /// The faults that happened: when, what, the reads checked and failovers until then.
    fired: Vec<Fired>,
    /// Scheduled faults skipped, with why (a crash while the target was down).
    skipped: Vec<String>,
    /// Commands that failed to the workload while a path was up: the multipath promise
    /// broken.
    failed_with_a_path_up: Vec<String>,
}

/// A fault that happened.
#[derive(Debug, Clone, Copy)]
struct Fired {
    at: Time,
    fault: Fault,
    reads: u64,
    failovers: u64,
    /// Failovers by its end (link faults: when the link came back or the cut healed).
    failovers_by_end: Option<u64>,
    /// Commands in flight on its path when it began (link faults).
    in_flight: u32,
}

/// Something the schedule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Fault(Fault),
    LinkUp(usize),
    Heal(usize),
    Restart,
}

/// Runs `scenario`: its report, or why it failed.
pub fn run(scenario: &Scenario) -> Result<Report, Box<Failure>> {
    let seed = scenario.seed;
    let plan = FaultPlan::draw(seed, scenario.mix);
    let net = SimNet::new(seed, hca::sim::FaultConfig::default());
    let fail_early = |reason: String| {
        Box::new(Failure {
            seed,
            reason,
            log: Vec::new(),
            report: empty_report(seed, &plan),
        })
    };
    let target =
        SimTarget::start(&net, TARGET, seed).map_err(|e| fail_early(format!("target: {e}")))?;
    if scenario.lying_flush {
        target.disk().inject_lying_flush();
    }
    let paths: Vec<(IpAddr, IpAddr, srp_target::config::IocConfig)> = (0..2)
        .map(|i| (HOST[i], TARGET[i], target.iocs()[i].clone()))
        .collect();
    let setup = HostSetup::draw(seed);
    let host = SimHost::start(&net, &paths, setup).map_err(|e| fail_early(format!("host: {e}")))?;
    let mut w = World {
        net: net.clone(),
        target,
        host,
        workload: Workload::new(scenario.shape, seed),
        plan: plan.clone(),
        schedule: Vec::new(),
        rng: Rng::new(seed ^ 0x0063_7261_7368),
        log: Log {
            echo: std::env::var_os("SIM_LOG").is_some(),
            trace_lba: std::env::var("SIM_TRACE_LBA")
                .ok()
                .and_then(|v| v.parse().ok()),
            ..Log::default()
        },
        started: None,
        steps: 0,
        idle_wakeups: 0,
        seed,
        setup,
        workload_span: scenario.shape.span,
        fired: Vec::new(),
        skipped: Vec::new(),
        failed_with_a_path_up: Vec::new(),
    };
    let outcome = w.run();
    let report = w.report();
    let log: Vec<String> = w.log.lines.iter().cloned().collect();
    // Everything the run built goes; a device still alive after that is held by a
    // reference cycle (a leak every run would repeat).
    drop(w);
    let leaked = net.live_devices();
    let outcome = match outcome {
        Ok(()) if !leaked.is_empty() => Err(format!(
            "the devices at {leaked:?} are still alive after the run ended (a reference cycle keeps them)"
        )),
        other => other,
    };
    match outcome {
        Ok(()) => Ok(report),
        Err(reason) => Err(Box::new(Failure {
            seed,
            reason,
            log,
            report,
        })),
    }
}

fn empty_report(seed: u64, plan: &FaultPlan) -> Report {
    Report {
        seed,
        setup: HostSetup::draw(seed),
        plan: plan.clone(),
        virtual_time: Duration::ZERO,
        workload: WorkloadStats::default(),
        reads_checked: 0,
        failovers: 0,
        net: FabricStats::default(),
        crashes: 0,
        sectors_lost: 0,
        steps: 0,
        idle_wakeups: 0,
        threads: 0,
        digest: 0,
        fired: Vec::new(),
        link_faults: Vec::new(),
    }
}

impl World {
    fn now(&self) -> Time {
        self.net.time()
    }

    fn log(&mut self, text: String) {
        let now = self.now();
        self.log.line(now, text);
    }

    fn report(&self) -> Report {
        let snapshot = self.host.snapshot();
        Report {
            seed: self.plan_seed(),
            setup: self.setup,
            plan: self.plan.clone(),
            virtual_time: Duration::from_nanos(self.now().0),
            workload: self.workload.stats,
            reads_checked: self.workload.reads_checked(),
            failovers: snapshot.map_or(0, |s| s.failovers),
            net: self.net.stats(),
            crashes: self.target.crashes,
            sectors_lost: self.target.disk().stats().lost,
            steps: self.steps,
            idle_wakeups: self.idle_wakeups,
            threads: thread_count(),
            digest: self.log.digest,
            fired: self.fired.iter().map(|f| f.fault).collect(),
            link_faults: self
                .fired
                .iter()
                .filter(|f| !matches!(f.fault, Fault::Crash { .. }))
                .map(|f| LinkFault {
                    fault: f.fault,
                    in_flight: f.in_flight,
                    failover: f.failovers_by_end.is_some_and(|n| n > f.failovers),
                })
                .collect(),
        }
    }

    /// Commands in flight on path `path` now (the host keys its paths by index).
    fn in_flight_on(&self, path: usize) -> u32 {
        self.host.snapshot().map_or(0, |s| {
            s.paths
                .iter()
                .filter(|p| p.key as usize == path)
                .map(|p| p.in_flight)
                .sum()
        })
    }

    fn failovers(&self) -> u64 {
        self.host.snapshot().map_or(0, |s| s.failovers)
    }

    fn plan_seed(&self) -> u64 {
        self.seed
    }

    /// Runs until the workload is done, or fails.
    fn run(&mut self) -> Result<(), String> {
        self.log(format!(
            "seed {}: host {:?}, faults {:?}",
            self.seed, self.setup, self.plan
        ));
        let limit = self.now() + LIMIT;
        loop {
            self.settle()?;
            if self.workload.is_done() {
                self.log("workload done".into());
                return self.verdict();
            }
            if !self.workload.violations.is_empty() || !self.failed_with_a_path_up.is_empty() {
                return self.verdict();
            }
            let next = self.next_event();
            let now = self.now();
            match next {
                None => {
                    return Err(format!(
                        "stalled: nothing left to do with {} commands in flight",
                        self.host.in_flight()
                    ));
                }
                Some(t) if t > limit => {
                    return Err(format!(
                        "stalled: {} commands still in flight after {LIMIT:?} of virtual time",
                        self.host.in_flight()
                    ));
                }
                // Someone said it had work now and did none: a microsecond later, so the
                // run moves on (counted in the log).
                Some(t) if t <= now => {
                    self.idle_wakeups += 1;
                    let who = self.due_now(now);
                    self.log(format!("idle wakeup: {who} had work due and did none"));
                    self.net.advance_to(Time(now.0 + 1_000));
                }
                Some(t) => self.net.advance_to(t),
            }
        }
    }

    /// Does everything due now, until a pass finds nothing.
    fn settle(&mut self) -> Result<(), String> {
        let mut passes = 0u32;
        loop {
            self.steps += 1;
            passes += 1;
            if passes > 100_000 {
                return Err("livelock: 100 000 passes at one virtual instant".into());
            }
            let mut n = self.net.settle();
            n += self.target.turn();
            n += self.host.run_due();
            n += self.faults()?;
            n += self.io();
            for e in self.target.events() {
                self.log(format!("target: {e}"));
            }
            if n == 0 {
                return Ok(());
            }
        }
    }

    /// The earliest time anyone has work.
    fn next_event(&self) -> Option<Time> {
        let at = |i: std::time::Instant| self.net.time_of(i);
        let candidates = [
            self.net.next_event(),
            self.target.next_due().map(at),
            self.host.next_due().map(at),
            self.schedule.iter().map(|(t, _)| *t).min(),
            self.started
                .and_then(|s| self.workload.next_due(self.now() - s).map(|d| s + d)),
        ];
        candidates.into_iter().flatten().min()
    }

    /// Who says it has work due at `now` (for the log of an idle wakeup).
    fn due_now(&self, now: Time) -> String {
        let at = |i: std::time::Instant| self.net.time_of(i);
        let due = |t: Option<Time>| t.is_some_and(|t| t <= now);
        let mut who = Vec::new();
        if due(self.net.next_event()) {
            who.push("the net");
        }
        if due(self.target.next_due().map(at)) {
            who.push("the target");
        }
        if due(self.host.next_due().map(at)) {
            who.push("the host");
        }
        if due(self.schedule.iter().map(|(t, _)| *t).min()) {
            who.push("the fault schedule");
        }
        who.join(", ")
    }

    /// The workload's commands in and out.
    fn io(&mut self) -> usize {
        if !self.host.is_ready() {
            return 0;
        }
        if self.started.is_none() {
            let now = self.now();
            self.started = Some(now);
            let identity = self.host.identity().cloned();
            self.log(format!("multipath disk ready: {identity:?}"));
            self.net.set_faults(self.plan.net);
            let span = self.workload_span;
            let events = self.plan.events.clone();
            for (after, fault) in events {
                self.schedule
                    .push((now + span.mul_f64(after), Action::Fault(fault)));
            }
        }
        let mut n = 0;
        for (id, op, result) in self.host.take_finished() {
            n += 1;
            if self.traced(&op) {
                let r = result
                    .as_ref()
                    .map(|d| d.as_ref().map(|d| d.len() / crate::model::BLOCK));
                let generations = match (&op, &result) {
                    (crate::host::Op::Read { lba, .. }, Ok(Some(d))) => d
                        .chunks(crate::model::BLOCK)
                        .enumerate()
                        .map(|(i, c)| format!("{:?}", crate::model::decode(lba + i as u64, c)))
                        .collect::<Vec<_>>()
                        .join(","),
                    _ => String::new(),
                };
                self.log(format!("trace: command {id} ended {r:?} [{generations}]"));
            }
            if let Err(e) = &result {
                let what = match op {
                    crate::host::Op::Read { lba, .. } => format!("READ at {lba}"),
                    crate::host::Op::Write { lba, .. } => format!("WRITE at {lba}"),
                    crate::host::Op::Flush => "SYNCHRONIZE CACHE".into(),
                };
                self.log(format!("command {id} ({what}) failed: {e}"));
                // The multipath promise: a command fails to the disk's user only when no
                // path could carry it.
                let up: Vec<u32> = self.host.snapshot().map_or_else(Vec::new, |s| {
                    s.paths.iter().filter(|p| p.active).map(|p| p.key).collect()
                });
                if !up.is_empty() {
                    let line = format!(
                        "command {id} ({what}) failed to the workload ({e}) while path(s) {up:?} were up"
                    );
                    self.log(line.clone());
                    self.failed_with_a_path_up.push(line);
                }
            }
            self.workload.finished(id, &result);
        }
        let elapsed = self.now() - self.started.unwrap_or(self.now());
        for (id, op) in self.workload.next_ops(elapsed) {
            n += 1;
            if self.traced(&op) {
                let what = match &op {
                    crate::host::Op::Read { lba, blocks } => format!("READ {lba}+{blocks}"),
                    crate::host::Op::Write { lba, data, fua } => format!(
                        "WRITE {lba}+{} gen {:?} fua {fua}",
                        data.len() / crate::model::BLOCK,
                        crate::model::decode(*lba, &data[..crate::model::BLOCK])
                    ),
                    crate::host::Op::Flush => "FLUSH".into(),
                };
                self.log(format!("trace: command {id} issued: {what}"));
            }
            self.host.submit(id, op);
        }
        n
    }

    /// Whether `op` touches the traced block (every flush does).
    fn traced(&self, op: &crate::host::Op) -> bool {
        let Some(t) = self.log.trace_lba else {
            return false;
        };
        match op {
            crate::host::Op::Read { lba, blocks } => (*lba..lba + u64::from(*blocks)).contains(&t),
            crate::host::Op::Write { lba, data, .. } => {
                (*lba..lba + (data.len() / crate::model::BLOCK) as u64).contains(&t)
            }
            crate::host::Op::Flush => true,
        }
    }

    /// The fault schedule.
    fn faults(&mut self) -> Result<usize, String> {
        let now = self.now();
        let mut n = 0;
        while let Some(i) = self.schedule.iter().position(|(t, _)| *t <= now) {
            let (_, action) = self.schedule.swap_remove(i);
            n += 1;
            self.log(format!("fault: {action:?}"));
            if let Action::Fault(fault) = action {
                if matches!(fault, Fault::Crash { .. }) && !self.target.is_up() {
                    self.skipped
                        .push(format!("{fault:?}: the target was already down"));
                } else {
                    let (reads, failovers) = (self.workload.reads_checked(), self.failovers());
                    let in_flight = match fault {
                        Fault::Flap { path, .. } | Fault::Partition { path, .. } => {
                            self.in_flight_on(path)
                        }
                        Fault::Crash { .. } => 0,
                    };
                    self.fired.push(Fired {
                        at: now,
                        fault,
                        reads,
                        failovers,
                        failovers_by_end: None,
                        in_flight,
                    });
                }
            }
            if let Action::LinkUp(path) | Action::Heal(path) = action {
                let failovers = self.failovers();
                if let Some(f) = self.fired.iter_mut().rev().find(|f| {
                    f.failovers_by_end.is_none()
                        && matches!(f.fault, Fault::Flap { path: p, .. } | Fault::Partition { path: p, .. } if p == path)
                }) {
                    f.failovers_by_end = Some(failovers);
                }
            }
            match action {
                Action::Fault(Fault::Flap { path, down }) => {
                    self.net.set_link(HOST[path], false);
                    self.schedule.push((now + down, Action::LinkUp(path)));
                }
                Action::Fault(Fault::Partition { path, cut }) => {
                    self.net.cut(HOST[path], TARGET[path], true);
                    self.schedule.push((now + cut, Action::Heal(path)));
                }
                Action::Fault(Fault::Crash { down }) => {
                    if self.target.is_up() {
                        self.target.crash(&mut self.rng);
                        self.workload.crash();
                        self.schedule.push((now + down, Action::Restart));
                    }
                }
                Action::LinkUp(path) => self.net.set_link(HOST[path], true),
                Action::Heal(path) => self.net.cut(HOST[path], TARGET[path], false),
                Action::Restart => self.target.restart()?,
            }
        }
        Ok(n)
    }

    /// Whether the run passed: no read contradicted the model; no command failed to the
    /// workload while a path was up; and the run did what its seed scheduled — every
    /// fault scheduled inside it happened (a crash while the target was down excepted),
    /// every crash crashed the target, and reads were checked, after every fault too.
    fn verdict(&self) -> Result<(), String> {
        if let Some(v) = self.workload.violations.first() {
            return Err(format!(
                "{} read(s) contradict the acknowledged writes; first: {v}",
                self.workload.violations.len()
            ));
        }
        if let Some(first) = self.failed_with_a_path_up.first() {
            return Err(format!(
                "{} command(s) failed to the workload while another path was up; first: {first}",
                self.failed_with_a_path_up.len()
            ));
        }
        if !self.workload.is_done() {
            return Ok(());
        }
        let reads = self.workload.reads_checked();
        if reads == 0 {
            return Err("the run checked no reads".into());
        }
        // Scheduled inside the run: still pending when it ended means it never happened.
        let now = self.now();
        let started = self.started.unwrap_or(now);
        let inside = self
            .plan
            .events
            .iter()
            .filter(|(after, _)| started + self.workload_span.mul_f64(*after) <= now)
            .count();
        if self.fired.len() + self.skipped.len() < inside {
            return Err(format!(
                "{inside} fault(s) scheduled inside the run, {} happened ({} skipped)",
                self.fired.len(),
                self.skipped.len()
            ));
        }
        let crashes = self
            .fired
            .iter()
            .filter(|f| matches!(f.fault, Fault::Crash { .. }))
            .count() as u64;
        if self.target.crashes < crashes {
            return Err(format!(
                "{crashes} crash(es) happened on schedule, the target crashed {} time(s)",
                self.target.crashes
            ));
        }
        if let Some(f) = self.fired.iter().find(|f| f.reads >= reads) {
            return Err(format!(
                "no read checked after {:?} at {:?} ({} reads checked by then, {reads} in all)",
                f.fault, f.at, f.reads
            ));
        }
        Ok(())
    }
}

/// The threads of this process now (Linux: the entries of `/proc/self/task`).
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count)
}
