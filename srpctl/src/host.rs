//! `srpctl host run -c host.toml`: the host daemon in the foreground — portals swept, IOCs
//! logged in to, every LUN a block file in the disks directory — until SIGINT or SIGTERM;
//! `srpctl host check -c host.toml` validates the file and shows what would run.

use anyhow::{Result, anyhow, bail};
use nix::sys::signal::{SigSet, Signal};
use srp_hostd::{HostConfig, HostDaemon};
use std::path::Path;

fn load(path: &Path) -> Result<HostConfig> {
    HostConfig::from_file(path).map_err(|e| anyhow!("{e}\n{}: not valid", path.display()))
}

/// What the configuration asks for, one line each.
fn summary(c: &HostConfig) -> Vec<String> {
    let mut out = vec![format!(
        "host {}: node GUID {:#018x}, initiator ext {:#x}, registration {:?}, queue depth {}, max transfer {} bytes, LUNs 0..{}",
        c.name,
        c.node_guid.0,
        c.initiator_ext,
        c.registration,
        c.queue_depth,
        c.max_transfer,
        c.max_luns
    )];
    let t = &c.timers;
    let show = |d: Option<std::time::Duration>| d.map_or("off".to_owned(), |d| format!("{d:?}"));
    out.push(format!(
        "timers: reconnect_delay {}, fast_io_fail {}, dev_loss {}; command timeout {:?}, sweep every {:?}",
        show(t.reconnect_delay()),
        show(t.fast_io_fail()),
        show(t.dev_loss()),
        c.cmd_timeout,
        c.sweep_interval
    ));
    for p in &c.portals {
        let locals = if p.local.is_empty() {
            "the routed source address".to_owned()
        } else {
            p.local
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let iocs = if p.iocs.is_empty() {
            "every SRP IOC".to_owned()
        } else {
            p.iocs
                .iter()
                .map(|g| format!("{:#018x}", g.0))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!("portal {}: from {locals}; {iocs}", p.address));
    }
    out.push(match &c.rules {
        Some(r) => format!("discovery rules {}", r.display()),
        None => "discovery rules: none (every SRP target found is logged in to)".to_owned(),
    });
    out.push(format!("disks in {}", c.disks_dir.display()));
    out.push(format!("control socket {}", c.control_socket.display()));
    out
}

/// `host check`: the summary, one line each (or a JSON array of them).
pub(crate) fn check(path: &Path, json: bool) -> Result<()> {
    let lines = summary(&load(path)?);
    if json {
        println!("{}", serde_json::to_string_pretty(&lines)?);
    } else {
        for line in lines {
            println!("{line}");
        }
    }
    Ok(())
}

/// `host run`.
pub(crate) fn run(path: &Path, metrics: Option<std::net::SocketAddr>) -> Result<()> {
    let config = load(path)?;
    let notify = crate::notify::Notifier::from_env();
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGHUP);
    signals.thread_block()?;
    let daemon = HostDaemon::start(config, providers::system())
        .map_err(|e| anyhow!("{}: not started: {e}", path.display()))?;
    let sessions = daemon.sessions();
    if sessions.is_empty() {
        daemon_say!(
            "no session yet: portals are swept every {:?}",
            daemon.config().sweep_interval
        );
    }
    for s in &sessions {
        daemon_say!(
            "session {}: {} -> {} IOC {} \"{}\" ({})",
            s.id,
            s.local,
            s.portal,
            s.ioc_guid,
            s.ioc_name,
            s.state
        );
    }
    for d in daemon.disks() {
        let paths: Vec<String> = d
            .paths
            .iter()
            .map(|p| {
                format!(
                    "session {} LUN {} via {} ({})",
                    p.session, p.lun, p.ioc_name, p.state
                )
            })
            .collect();
        daemon_say!(
            "disk {}: {} {} {}, {} blocks of {} bytes, {}; {} path(s): {}",
            d.path,
            d.identity,
            d.vendor,
            d.product,
            d.blocks,
            d.block_size,
            d.policy,
            d.paths.len(),
            paths.join(", ")
        );
    }
    if let Some(s) = daemon.control_socket() {
        daemon_say!("control socket {}", s.display());
    }
    let daemon = std::sync::Arc::new(daemon);
    let metrics_server = match metrics {
        Some(addr) => {
            let d = daemon.clone();
            let server = crate::metrics_http::MetricsServer::start(addr, move || {
                Ok(srp_hostd::metrics::render(&d.sessions(), &d.disks()))
            })
            .map_err(|e| anyhow!("metrics on {addr}: {e}"))?;
            daemon_say!("metrics http://{}/metrics", server.addr());
            Some(server)
        }
        None => None,
    };
    notify.ready(&format!(
        "{} session(s), {} disk(s)",
        daemon.sessions().len(),
        daemon.disks().len()
    ));
    let d = daemon.clone();
    let watchdog = notify.watchdog(move || {
        // The daemon answers its session list: its state is not wedged.
        d.sessions();
        Ok(())
    })?;
    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => {
                notify.reloading();
                match daemon.reload() {
                    Ok(changes) if changes.is_empty() => tracing::info!(
                        file = %path.display(), "SIGHUP: reloaded; nothing changed"),
                    Ok(changes) => tracing::info!(file = %path.display(),
                        changes = %changes.join("; "), "SIGHUP: reloaded"),
                    Err(e) => tracing::error!(file = %path.display(), error = %e,
                        "SIGHUP: reload refused; the running configuration is unchanged"),
                }
                notify.ready("serving (reloaded)");
            }
            Ok(s) => {
                eprintln!("{s}: shutting down");
                break;
            }
            Err(e) => bail!("waiting for a signal: {e}"),
        }
    }
    notify.stopping();
    if let Some(w) = watchdog {
        w.stop();
    }
    // The metrics server holds the daemon too: it stops first.
    drop(metrics_server);
    match std::sync::Arc::try_unwrap(daemon) {
        Ok(d) => d.shutdown(),
        Err(_) => bail!("the host daemon is still shared at shutdown"),
    }
    eprintln!("stopped");
    Ok(())
}
