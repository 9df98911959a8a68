//! `srpctl target …`: the target appliance's commands. `check` validates a configuration
//! file exactly as the daemon will and shows what it would export: each IOC's target port
//! identifier, service ID, ports and ACL, and each exported LUN with the identity (NAA,
//! serial) hosts will see through every IOC. `run` starts the daemon
//! ([`srp_target::daemon`]) and serves until SIGINT or SIGTERM, reloading its file on
//! SIGHUP; under systemd it speaks sd_notify ([`crate::notify`]).

use crate::notify::Notifier;
use anyhow::{Result, anyhow, bail};
use nix::sys::signal::{SigSet, Signal};
use srp_target::LunIdentity;
use srp_target::config::{Acl, AclEntry, Backing, TargetConfig};
use srp_target::control::ControlRequest;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs the daemon for the file at `path` until SIGINT or SIGTERM; then shuts it down
/// (T_LOGOUT, DREQ, bounded in time). SIGHUP re-reads the file and applies it live
/// ([`srp_target::reload`]). Under systemd (`Type=notify`) it says READY once the ports and
/// the control socket are up, feeds the watchdog while the loop answers, and reports
/// reloads and the stop. Events go to stderr, one line each.
pub(crate) fn run(
    path: &Path,
    rdma_cm_port: Option<u16>,
    control_socket: Option<std::path::PathBuf>,
    metrics: Option<std::net::SocketAddr>,
) -> Result<()> {
    let loaded = match TargetConfig::from_path(path) {
        Ok(l) => l,
        Err(errors) => bail!("{errors}\n{}: not valid; not started", path.display()),
    };
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let notify = Notifier::from_env();
    // Block the signals before any thread starts, so every thread inherits the mask and
    // only the `sigwait` below takes them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGHUP);
    signals.thread_block()?;
    let socket = control_socket.unwrap_or_else(|| loaded.config.target.control_socket.clone());
    let options = DaemonOptions {
        rdma_cm_port,
        control_socket: Some(socket),
        control_access: access_layer::ctl::CtlAccess {
            group: loaded.config.target.control_group,
            ..access_layer::ctl::CtlAccess::default()
        },
        config_path: Some(path.to_path_buf()),
        ..DaemonOptions::new(providers::system())
    };
    let iocs = loaded.config.iocs.len();
    let daemon = Daemon::start(loaded.config, options)
        .map_err(|e| anyhow!("{}: not started: {e}", path.display()))?;
    for line in daemon
        .started()
        .ports
        .iter()
        .chain(daemon.started().iocs.iter())
    {
        daemon_say!("{line}");
    }
    if let Some(s) = daemon.control_socket() {
        daemon_say!("control socket {}", s.display());
    }
    let _metrics = match metrics {
        Some(addr) => {
            let handle = daemon.control();
            let server = crate::metrics_http::MetricsServer::start(addr, move || {
                match handle.call(ControlRequest::Metrics) {
                    Ok(srp_target::control::ControlAnswer::Metrics(lines)) => {
                        Ok(lines.iter().map(|l| format!("{l}\n")).collect())
                    }
                    Ok(_) => Err("an answer to another request".into()),
                    Err(e) => Err(e.to_string()),
                }
            })
            .map_err(|e| anyhow!("metrics on {addr}: {e}"))?;
            daemon_say!("metrics http://{}/metrics", server.addr());
            Some(server)
        }
        None => None,
    };
    notify.ready(&format!("serving {iocs} IOC(s)"));
    let stop = Arc::new(AtomicBool::new(false));
    let handle = daemon.control();
    let watchdog = notify.watchdog(move || {
        handle
            .call(ControlRequest::ListIocs)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })?;
    let flag = stop.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = daemon.control();
    let file = path.to_path_buf();
    let n = notify.clone();
    let waiter = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            loop {
                match signals.wait() {
                    Ok(Signal::SIGHUP) => {
                        n.reloading();
                        reload(&handle, &file);
                        n.ready("serving (reloaded)");
                    }
                    got => {
                        flag.store(true, Ordering::Relaxed);
                        let _ = tx.send(got);
                        return;
                    }
                }
            }
        })?;
    // Refusals are written at most once per source and reason per interval, with their
    // count (EventLog); the tick writes those held back when a flood stops.
    let mut log = srp_target::daemon::EventLog::default();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(ev) = daemon.events().recv_timeout(Duration::from_millis(100)) {
            log.log(std::time::Instant::now(), &ev);
        }
        log.tick(std::time::Instant::now());
    }
    if let Ok(Ok(sig)) = rx.recv() {
        eprintln!("{sig}: shutting down");
    }
    notify.stopping();
    let _ = waiter.join();
    if let Some(w) = watchdog {
        w.stop();
    }
    for ev in daemon.shutdown() {
        log.log(std::time::Instant::now(), &ev);
    }
    log.tick(std::time::Instant::now() + log_interval());
    eprintln!("stopped");
    Ok(())
}

/// Past every refusal's interval: what the last tick writes at shutdown.
fn log_interval() -> Duration {
    opskit::ratelog::DEFAULT_INTERVAL
}

/// SIGHUP: re-reads `file` and applies it; the outcome goes to the log (the changes
/// themselves are the daemon's event, printed with the others).
fn reload(handle: &srp_target::control::ControlHandle, file: &Path) {
    match handle.reload_from(file) {
        Ok(_) => tracing::info!(target: "srp_target::reload", file = %file.display(),
            "SIGHUP: reloaded"),
        Err(e) => tracing::error!(target: "srp_target::reload", file = %file.display(),
            error = %e, "SIGHUP: reload refused; the running configuration is unchanged"),
    }
}

/// Validates the file at `path`; prints the summary (or with `json` the configuration as
/// JSON) and the warnings, or every error.
pub(crate) fn check(path: &Path, json: bool) -> Result<()> {
    let loaded = match TargetConfig::from_path(path) {
        Ok(l) => l,
        Err(errors) => bail!(
            "{errors}\n{}: not valid; nothing would start",
            path.display()
        ),
    };
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let stores = check_stores(&loaded.config);
    if json {
        let text = srp_target::config::emit::to_toml(&loaded.config);
        let value: toml::Value = toml::from_str(&text)?;
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", summary(&loaded.config));
    }
    for line in &stores.notes {
        eprintln!("{line}");
    }
    if !stores.refused.is_empty() {
        bail!(
            "{}\n{}: valid, but {} store(s) would be refused",
            stores.refused.join("\n"),
            path.display(),
            stores.refused.len()
        );
    }
    Ok(())
}

/// What the check found of the LUNs' stores.
#[derive(Default)]
struct Stores {
    /// One line per store the running instance serves or the target would create.
    notes: Vec<String>,
    /// One line per store the target would refuse.
    refused: Vec<String>,
}

/// Opens every file and device LUN's store as the target would (and releases it): one
/// held by the running instance of this configuration — its control socket's peer — is
/// noted as served by it, not an error (an operator's check, a unit's start-up check).
fn check_stores(c: &TargetConfig) -> Stores {
    use srp_target::backend::claim::{StoreCheck, check_store};
    let running = srp_target::backend::claim::socket_peer_pid(&c.target.control_socket);
    let mut out = Stores::default();
    for l in &c.luns {
        match check_store(l, running) {
            StoreCheck::Free => {}
            StoreCheck::WillBeCreated => out
                .notes
                .push(format!("lun {}: the image does not exist yet; the target creates it (mode 0600)", l.name)),
            StoreCheck::ServedByRunning(pid) => out.notes.push(format!(
                "lun {}: held by the running target of this configuration (pid {pid}): served, not an error",
                l.name
            )),
            StoreCheck::Missing(e) => out.notes.push(format!(
                "warning: lun {}: {e}: the target will not start until it exists",
                l.name
            )),
            StoreCheck::Refused(e) => out.refused.push(format!("lun {}: {e}", l.name)),
        }
    }
    out
}

fn backing(b: &Backing) -> String {
    match b {
        Backing::File {
            path,
            size_bytes: Some(n),
        } => format!("file {} ({n} bytes, created if missing)", path.display()),
        Backing::File {
            path,
            size_bytes: None,
        } => format!("file {} (must exist)", path.display()),
        Backing::Device { path } => format!("device {}", path.display()),
        Backing::Ram { size_bytes } => format!("ram ({size_bytes} bytes)"),
        Backing::Rbd(r) => format!(
            "rbd {} (cluster {}, client {})",
            r.name(),
            r.conf.display(),
            r.client.as_deref().unwrap_or("admin")
        ),
    }
}

fn acl(a: &Acl) -> String {
    match a {
        Acl::Any => "any initiator".into(),
        Acl::Only(entries) => entries
            .iter()
            .map(|e| match e {
                AclEntry::PortId(p) => format!("port {p}"),
                AclEntry::Guid(g) => format!("guid {g}"),
                AclEntry::Address(a) => format!("any port from {a}"),
                AclEntry::PortIdFrom(p, a) => format!("port {p} from {a}"),
                AclEntry::GuidFrom(g, a) => format!("guid {g} from {a}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The human-readable view of a valid configuration.
fn summary(c: &TargetConfig) -> String {
    let mut s = String::new();
    let name = c.target.name.as_deref().unwrap_or("(unnamed)");
    let _ = writeln!(
        s,
        "target {name}: node GUID {}, RDMA-CM port {}",
        c.target.node_guid, c.target.rdma_cm_port
    );
    let _ = writeln!(
        s,
        "state directory {} (saved mode pages, persistent reservations under APTPL)",
        c.target.state_dir.display()
    );
    for p in &c.ports {
        let _ = writeln!(s, "port {}: {}", p.name, p.address);
    }
    for l in &c.luns {
        let id = LunIdentity::derive(&l.name, c.target.oui);
        let _ = writeln!(
            s,
            "lun {}: {}, {}-byte blocks{}{}{}, serial {}",
            id,
            backing(&l.backing),
            l.block_size.bytes(),
            if l.read_only { ", read-only" } else { "" },
            if l.write_cache {
                ""
            } else {
                ", write cache off"
            },
            if l.write_cache_changeable {
                ", write cache changeable (MODE SELECT; saved in the state directory)"
            } else {
                ""
            },
            id.serial()
        );
    }
    for i in &c.iocs {
        let _ = writeln!(
            s,
            "ioc {}: {} target port {} service 0x{:016x} on {} — {:?}, allow {}",
            i.name,
            if i.enabled { "enabled" } else { "disabled" },
            i.target_port_id(),
            i.service_id.0,
            i.ports.join(", "),
            i.alua,
            acl(&i.allow)
        );
        for (lun, lname) in &i.exports {
            let n = lun.number().map_or_else(|_| "?".into(), |n| n.to_string());
            let _ = writeln!(s, "  LUN {n} = {lname}");
        }
    }
    s
}
