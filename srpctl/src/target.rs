//! `srpctl target …`: the target appliance's commands. `check` validates a configuration
//! file exactly as the daemon will and shows what it would export: each IOC's target port
//! identifier, service ID, ports and ACL, and each exported LUN with the identity (NAA,
//! serial) hosts will see through every IOC. `run` starts the daemon
//! ([`srp_target::daemon`]) and serves until SIGINT or SIGTERM.

use anyhow::{Result, anyhow, bail};
use nix::sys::signal::{SigSet, Signal};
use srp_target::LunIdentity;
use srp_target::config::{Acl, AclEntry, Backing, TargetConfig};
use srp_target::daemon::{Daemon, DaemonOptions};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs the daemon for the file at `path` until SIGINT or SIGTERM; then shuts it down
/// (T_LOGOUT, DREQ, bounded in time). Events go to stderr, one line each.
pub(crate) fn run(
    path: &Path,
    rdma_cm_port: Option<u16>,
    control_socket: Option<std::path::PathBuf>,
) -> Result<()> {
    let loaded = match TargetConfig::from_path(path) {
        Ok(l) => l,
        Err(errors) => bail!("{errors}\n{}: not valid; not started", path.display()),
    };
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    // Block the signals before any thread starts, so every thread inherits the mask and
    // only the `sigwait` below takes them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block()?;
    let socket = control_socket.unwrap_or_else(|| loaded.config.target.control_socket.clone());
    let options = DaemonOptions {
        rdma_cm_port,
        control_socket: Some(socket),
        control_access: access_layer::ctl::CtlAccess {
            group: loaded.config.target.control_group,
            ..access_layer::ctl::CtlAccess::default()
        },
        ..DaemonOptions::default()
    };
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
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let got = signals.wait();
            flag.store(true, Ordering::Relaxed);
            let _ = tx.send(got);
        })?;
    while !stop.load(Ordering::Relaxed) {
        if let Ok(ev) = daemon.events().recv_timeout(Duration::from_millis(100)) {
            eprintln!("{ev}");
        }
    }
    if let Ok(Ok(sig)) = rx.recv() {
        eprintln!("{sig}: shutting down");
    }
    let _ = waiter.join();
    for ev in daemon.shutdown() {
        eprintln!("{ev}");
    }
    eprintln!("stopped");
    Ok(())
}

/// Validates the file at `path`; prints the summary (and warnings) or every error.
pub(crate) fn check(path: &Path) -> Result<()> {
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
    print!("{}", summary(&loaded.config));
    Ok(())
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
