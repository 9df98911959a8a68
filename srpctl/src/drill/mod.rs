//! `srpctl drill failover`: the failover drill of issue #7. A verifying workload runs on a
//! multipath disk's block file (every block carries its LBA, a generation and a CRC; reads
//! check all three), a sampler follows the disk's paths through the host daemon, and the
//! drill goes through its phases — warmup, inject the fault, hold it, restore it, after —
//! printing one status line a second. At the end it prints a summary, writes the report
//! (JSON) and the picture (SVG) if asked, and fails on any I/O error or data mismatch.
//!
//! Modules: `block` (the block format), `workload` (the I/O threads), `sampler` (the host's
//! view of the paths), `fault` (injecting and restoring each fault), `phases` (the phases
//! and the status line), `report` (the numbers), `svg` (the picture).

mod block;
mod fault;
mod guard;
mod phases;
mod report;
mod sampler;
mod svg;
mod workload;

use crate::host_ctl::socket_path;
use anyhow::{Context, Result, bail, ensure};
use clap::{Args, Subcommand, ValueEnum};
use fault::Fault;
use report::{Phase, Report};
use sampler::Samples;
use serde_json::json;
use srp_hostd::control::{DiskInfo, HostClient};
use srp_target::control::DisableMode;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use workload::{Config, Shared, ThreadLog};

/// `srpctl drill …`.
#[derive(Subcommand, Debug)]
pub(crate) enum Drill {
    /// Run a verifying workload on a multipath disk, inject a fault on one of its paths,
    /// restore it, and report the I/O stall, failover and failback times, IOPS per path,
    /// I/O errors and data mismatches (exit status 1 on any error or mismatch).
    ///
    /// It WRITES: the first --region-mb MiB of the disk are overwritten with the drill's
    /// own blocks. A disk that is mounted, attached to a loop device or open in another
    /// process is refused unless --destroy-data is given.
    Failover(FailoverArgs),
}

/// Which fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FaultKind {
    /// The path administratively failed on the host (`srpctl path fail`), then restored.
    Admin,
    /// The IOC behind the path disabled on the target (--target-socket), then enabled.
    Ioc,
    /// The link cut and restored by --link-cmd-down / --link-cmd-up.
    Link,
    /// The target (or one IOC's process) killed by --kill-cmd, restarted by --restart-cmd.
    Kill,
    /// No fault: the verifying workload alone for the three phases (e.g. under network
    /// impairment set up outside the drill).
    None,
}

/// How a disabled IOC ends its sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum IocMode {
    /// SRP_T_LOGOUT and DREQ: the host is told.
    Logout,
    /// Without a word, as a dead controller: the host finds out by its timers.
    Drop,
}

/// `srpctl drill failover` options.
#[derive(Args, Debug)]
pub(crate) struct FailoverArgs {
    /// The host daemon's control socket (default /run/srp-host/srp-host.sock).
    #[arg(short, long, conflicts_with = "name")]
    socket: Option<PathBuf>,
    /// The host daemon's `[host] name`: its socket /run/srp-host/NAME.sock.
    #[arg(long)]
    name: Option<String>,
    /// The disk (name or identity); default: the only disk.
    #[arg(long)]
    disk: Option<String>,
    /// The fault to inject.
    #[arg(long, value_enum, default_value_t = FaultKind::Admin)]
    fault: FaultKind,
    /// The faulted path's session; default: the path carrying the most I/O in the warmup.
    #[arg(long)]
    path: Option<u32>,
    /// The target's control socket (for --fault ioc).
    #[arg(long)]
    target_socket: Option<PathBuf>,
    /// How the IOC's sessions end (for --fault ioc).
    #[arg(long, value_enum, default_value_t = IocMode::Logout)]
    ioc_mode: IocMode,
    /// Shell command cutting the link (for --fault link), e.g.
    /// "ip netns exec tgt ip link set v1 down".
    #[arg(long)]
    link_cmd_down: Option<String>,
    /// Shell command restoring the link (for --fault link).
    #[arg(long)]
    link_cmd_up: Option<String>,
    /// Shell command killing the target process (for --fault kill).
    #[arg(long)]
    kill_cmd: Option<String>,
    /// Shell command restarting it (for --fault kill); must return (start the daemon in
    /// the background).
    #[arg(long)]
    restart_cmd: Option<String>,
    /// Seconds of I/O before the fault.
    #[arg(long, default_value_t = 3.0)]
    warmup: f64,
    /// Seconds the fault lasts.
    #[arg(long, default_value_t = 10.0)]
    fault_secs: f64,
    /// Seconds of I/O after the restore.
    #[arg(long, default_value_t = 5.0)]
    after: f64,
    /// Bytes per I/O: a multiple of the disk's block size.
    #[arg(long = "io-size", visible_alias = "block-size", default_value_t = 4096)]
    io_size: usize,
    /// MiB of the disk the workload uses (from its start; capped at the disk's size).
    #[arg(long, default_value_t = 64)]
    region_mb: u64,
    /// Workload threads (each owns its own blocks).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Write the report here (JSON).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Write the timeline picture here (SVG).
    #[arg(long)]
    picture: Option<PathBuf>,
    /// Overwrite the disk even when it is mounted, attached to a loop device or open in
    /// another process (the drill destroys the first --region-mb MiB of it).
    #[arg(long)]
    destroy_data: bool,
}

/// Runs a drill.
pub(crate) fn run(drill: Drill) -> Result<()> {
    match drill {
        Drill::Failover(a) => failover(a),
    }
}

fn secs(name: &str, v: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| anyhow::anyhow!("--{name} must be seconds ≥ 0"))
}

/// The disk named `want` (name or identity), or the only one.
fn pick_disk(disks: Vec<DiskInfo>, want: Option<&str>) -> Result<DiskInfo> {
    let names = || {
        disks
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match want {
        Some(w) => disks
            .iter()
            .find(|d| d.name == w || d.identity == w)
            .cloned()
            .with_context(|| format!("no disk {w:?} (the host daemon has: {})", names())),
        None if disks.len() == 1 => Ok(disks.into_iter().next().context("one disk")?),
        None if disks.is_empty() => bail!("the host daemon has no disks (srpctl login …)"),
        None => bail!(
            "the host daemon has several disks; pick one with --disk ({})",
            names()
        ),
    }
}

/// The fault for `a`, on path `session` of `disk` (none for `--fault none`); link and kill
/// commands run in `shell`.
fn make_fault(
    a: &FailoverArgs,
    disk: &DiskInfo,
    session: u32,
    shell: &mut Option<fault::Shell>,
) -> Result<Option<Fault>> {
    let need = |v: &Option<String>, what: &str| {
        v.clone()
            .with_context(|| format!("--fault {:?} needs --{what}", a.fault))
    };
    Ok(Some(match a.fault {
        FaultKind::None => return Ok(None),
        FaultKind::Admin => Fault::Admin { session },
        FaultKind::Ioc => {
            let socket = a
                .target_socket
                .clone()
                .context("--fault ioc needs --target-socket (the target's control socket)")?;
            let path = disk
                .paths
                .iter()
                .find(|p| p.session == session)
                .with_context(|| format!("disk {} has no path {session}", disk.name))?;
            let ioc = fault::ioc_of(&socket, path)?;
            let mode = match a.ioc_mode {
                IocMode::Logout => DisableMode::Logout,
                IocMode::Drop => DisableMode::Drop,
            };
            Fault::Ioc { socket, ioc, mode }
        }
        FaultKind::Link => Fault::Link {
            down: need(&a.link_cmd_down, "link-cmd-down")?,
            up: need(&a.link_cmd_up, "link-cmd-up")?,
            shell: shell.take().context("no shell for the fault commands")?,
        },
        FaultKind::Kill => Fault::Kill {
            kill: need(&a.kill_cmd, "kill-cmd")?,
            restart: need(&a.restart_cmd, "restart-cmd")?,
            shell: shell.take().context("no shell for the fault commands")?,
        },
    }))
}

/// The drill's settings, checked, and what it opened before any I/O.
struct Setup {
    /// The host daemon's control socket.
    socket: PathBuf,
    /// The block file (dropped before the shell, as the drill always did).
    file: Arc<std::fs::File>,
    /// Whether the block file is open with O_DIRECT.
    o_direct: bool,
    /// The shell for link and kill commands, until the fault takes it.
    shell: Option<fault::Shell>,
    /// The disk.
    disk: DiskInfo,
    /// The workload's configuration.
    cfg: Config,
    /// Bytes of the disk the workload uses.
    region: u64,
}

/// The lengths of the timed phases.
#[derive(Clone, Copy, Debug)]
struct Durations {
    warmup: Duration,
    hold: Duration,
    after: Duration,
}

impl Durations {
    fn of(a: &FailoverArgs) -> Result<Durations> {
        Ok(Durations {
            warmup: secs("warmup", a.warmup)?,
            hold: secs("fault-secs", a.fault_secs)?,
            after: secs("after", a.after)?,
        })
    }
}

/// The workload and sampler threads.
struct Threads {
    workers: Vec<JoinHandle<ThreadLog>>,
    sampler: JoinHandle<()>,
    stop_sampler: Arc<AtomicBool>,
}

fn failover(a: FailoverArgs) -> Result<()> {
    let socket = socket_path(a.socket.as_deref(), a.name.as_deref());
    let durations = Durations::of(&a)?;
    let mut setup = prepare(&a, socket)?;
    print_banner(&a, &setup);

    let t0 = Instant::now();
    let shared = Arc::new(Shared::default());
    let samples = Arc::new(Mutex::new(Samples::default()));
    let threads = start_threads(&setup, t0, &shared, &samples);
    let mut r = phases::Running::new(t0, shared.clone(), samples.clone());
    // The fault (its shell, for link and kill) lives to the end of the drill.
    let (outcome, _fault) = phases::run(&mut r, &a, &mut setup, durations)?;
    let (logs, end_us) = threads.stop(&shared, &r)?;

    let (samples, failed_polls) = {
        let mut s = samples.lock().unwrap_or_else(PoisonError::into_inner);
        (std::mem::take(&mut s.samples), s.failed_polls)
    };
    let report = build_report(
        &a,
        &setup,
        r.phases,
        &outcome,
        end_us,
        logs,
        (samples, failed_polls),
    );
    finish(&a, &report)
}

/// Connects to the host daemon, picks the disk, checks the options, starts the shell for
/// the fault commands and opens the block file.
fn prepare(a: &FailoverArgs, socket: PathBuf) -> Result<Setup> {
    let disk = pick_disk(HostClient::connect(&socket)?.disks()?, a.disk.as_deref())?;
    check_disk_and_options(a, &disk)?;
    // The shell for link and kill commands, started before the block file is open (see
    // fault::Shell).
    let shell = match a.fault {
        FaultKind::Link | FaultKind::Kill => Some(fault::Shell::start()?),
        FaultKind::Admin | FaultKind::Ioc | FaultKind::None => None,
    };
    let disk_bytes = disk.blocks.saturating_mul(u64::from(disk.block_size));
    let region = (a.region_mb << 20).min(disk_bytes);
    let blocks = region / a.io_size as u64;
    ensure!(
        blocks >= a.threads as u64,
        "the region ({region} bytes) holds fewer {}-byte blocks than threads",
        a.io_size
    );
    guard::check_unused(disk.path.as_ref(), a.region_mb, a.destroy_data)?;
    let (file, o_direct) =
        workload::open(disk.path.as_ref()).with_context(|| format!("opening {}", disk.path))?;
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id()) << 32;
    let cfg = Config {
        io_size: a.io_size,
        block_size: disk.block_size,
        blocks,
        threads: a.threads,
        run,
    };
    Ok(Setup {
        socket,
        file: Arc::new(file),
        o_direct,
        shell,
        disk,
        cfg,
        region,
    })
}

/// Checks the disk, the workload's options and the fault's own options, before any I/O
/// (the faulted path is not known yet).
fn check_disk_and_options(a: &FailoverArgs, disk: &DiskInfo) -> Result<()> {
    ensure!(
        !disk.path.is_empty(),
        "disk {} has no block file (the host daemon exposes no files)",
        disk.name
    );
    ensure!(a.threads >= 1, "--threads must be at least 1");
    let bs = disk.block_size as usize;
    ensure!(
        bs > 0 && a.io_size >= 512 && a.io_size % bs == 0 && a.io_size >= block::HEADER_LEN,
        "--io-size {} must be a multiple of the disk's block size {bs} (at least 512)",
        a.io_size
    );
    if let Some(s) = a.path {
        ensure!(
            disk.paths.iter().any(|p| p.session == s),
            "disk {} has no path {s} (its paths: {:?})",
            disk.name,
            disk.paths.iter().map(|p| p.session).collect::<Vec<_>>()
        );
    }
    let (need_a, need_b) = match a.fault {
        FaultKind::Admin | FaultKind::None => (None, None),
        FaultKind::Ioc => (Some(("target-socket", a.target_socket.is_some())), None),
        FaultKind::Link => (
            Some(("link-cmd-down", a.link_cmd_down.is_some())),
            Some(("link-cmd-up", a.link_cmd_up.is_some())),
        ),
        FaultKind::Kill => (
            Some(("kill-cmd", a.kill_cmd.is_some())),
            Some(("restart-cmd", a.restart_cmd.is_some())),
        ),
    };
    for (what, given) in [need_a, need_b].into_iter().flatten() {
        ensure!(given, "--fault {:?} needs --{what}", a.fault);
    }
    Ok(())
}

/// The line saying what the drill is about to do.
fn print_banner(a: &FailoverArgs, setup: &Setup) {
    let disk = &setup.disk;
    eprintln!(
        "drill failover: disk {} ({}), {} path(s), policy {}; {} threads of {}-byte I/O over \
         {} MiB{}; fault {:?}",
        disk.name,
        disk.identity,
        disk.paths.len(),
        disk.policy,
        a.threads,
        a.io_size,
        setup.region >> 20,
        if setup.o_direct { ", O_DIRECT" } else { "" },
        a.fault
    );
}

/// Starts the workload threads and the sampler.
fn start_threads(
    setup: &Setup,
    t0: Instant,
    shared: &Arc<Shared>,
    samples: &Arc<Mutex<Samples>>,
) -> Threads {
    let cfg = setup.cfg;
    let stop_sampler = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..cfg.threads)
        .map(|i| {
            let (f, s) = (setup.file.clone(), shared.clone());
            std::thread::spawn(move || workload::worker(f, cfg, s, t0, i))
        })
        .collect();
    let sampler = {
        let (sock, name, out, stop) = (
            setup.socket.clone(),
            setup.disk.name.clone(),
            samples.clone(),
            stop_sampler.clone(),
        );
        std::thread::spawn(move || sampler::run(sock, name, out, stop, t0))
    };
    Threads {
        workers,
        sampler,
        stop_sampler,
    }
}

impl Threads {
    /// Stops the workload, then the sampler; the threads' logs and the workload's end (µs).
    fn stop(self, shared: &Shared, r: &phases::Running) -> Result<(Vec<ThreadLog>, u64)> {
        shared.stop.store(true, Ordering::Relaxed);
        let mut logs = Vec::new();
        for w in self.workers {
            logs.push(
                w.join()
                    .map_err(|_| anyhow::anyhow!("a workload thread panicked"))?,
            );
        }
        let end_us = r.now_us();
        self.stop_sampler.store(true, Ordering::Relaxed);
        let _ = self.sampler.join();
        Ok((logs, end_us))
    }
}

/// The threads' successful completions (sorted times, reads, writes) and their failures
/// (sorted by time).
fn tally(logs: Vec<ThreadLog>) -> (Vec<u64>, u64, u64, Vec<workload::Failure>) {
    let mut done: Vec<u64> = Vec::new();
    let (mut reads, mut writes) = (0, 0);
    let mut failures = Vec::new();
    for log in logs {
        for c in log.completions.iter().filter(|c| c.ok) {
            done.push(c.at_us);
            if c.write {
                writes += 1;
            } else {
                reads += 1;
            }
        }
        failures.extend(log.failures);
    }
    done.sort_unstable();
    failures.sort_by_key(|f| f.at_us);
    (done, reads, writes, failures)
}

/// The report of the finished drill.
fn build_report(
    a: &FailoverArgs,
    setup: &Setup,
    phases: Vec<Phase>,
    outcome: &phases::Outcome,
    end_us: u64,
    logs: Vec<ThreadLog>,
    (samples, failed_polls): (Vec<sampler::Sample>, u64),
) -> Report {
    let (done, reads, writes, failures) = tally(logs);
    let disk = &setup.disk;
    Report {
        disk: disk.name.clone(),
        identity: disk.identity.clone(),
        policy: disk.policy.clone(),
        fault_kind: format!("{:?}", a.fault).to_lowercase(),
        fault: outcome.what.clone(),
        session: outcome.session,
        settings: json!({
            "socket": setup.socket.display().to_string(),
            "block_file": disk.path,
            "o_direct": setup.o_direct,
            "warmup_s": a.warmup, "fault_s": a.fault_secs, "after_s": a.after,
            "io_size": a.io_size, "region_bytes": setup.region, "threads": a.threads,
            "run_id": format!("{:#018x}", setup.cfg.run),
            "sample_period_ms": sampler::PERIOD.as_millis() as u64,
        }),
        phases,
        inject_us: outcome.inject_us,
        restore_us: outcome.restore_us,
        end_us,
        done,
        reads,
        writes,
        failures,
        fault_errors: outcome.fault_errors.clone(),
        samples,
        failed_polls,
    }
}

/// Writes the report and the picture if asked, prints the summary, and fails on any I/O
/// error, data mismatch or fault error.
fn finish(a: &FailoverArgs, report: &Report) -> Result<()> {
    if let Some(p) = &a.report {
        let text = serde_json::to_string_pretty(&report.to_json())?;
        std::fs::write(p, text + "\n").with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.picture {
        std::fs::write(p, svg::render(report))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    print!("{}", report.summary());
    if let Some(p) = &a.report {
        println!("report: {}", p.display());
    }
    if let Some(p) = &a.picture {
        println!("picture: {}", p.display());
    }
    ensure!(
        report.passed(),
        "the drill failed: {} I/O error(s), {} data mismatch(es), {} fault error(s)",
        report.errors(),
        report.mismatches(),
        report.fault_errors.len()
    );
    Ok(())
}
