//! `srpctl target iocs|ports|luns|sessions|ioc|port|lun|reload|config`: a running target's control socket.
//! Lists print as aligned tables (or JSON with `--json`); `ioc enable|disable` and
//! `port up|down` turn the run-time switches failover drills use; `reload` has the daemon
//! apply its changed file live and `config` prints what it runs.

use crate::hex::to_hex;
use crate::table::table;
use anyhow::{Context, Result};
use serde_json::{Value, json};
use srp_target::config::TargetConfig;
use srp_target::control::{
    DisableMode, IocStatus, LunStatus, PortStatus, SessionStatus, TargetClient,
};
use std::path::{Path, PathBuf};

/// Which socket: `--socket`, else the one `--config` names, else the default of a target
/// without a name.
pub(crate) fn socket_path(socket: Option<&Path>, config: Option<&Path>) -> Result<PathBuf> {
    if let Some(s) = socket {
        return Ok(s.to_path_buf());
    }
    if let Some(c) = config {
        let loaded = TargetConfig::from_path(c).map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(loaded.config.target.control_socket);
    }
    Ok(Path::new(srp_target::config::DEFAULT_CONTROL_DIR).join("target.sock"))
}

fn connect(path: &Path) -> Result<TargetClient> {
    TargetClient::connect(path).with_context(|| {
        format!(
            "cannot reach the target's control socket {} (is `srpctl target run` running? \
             --socket or --config names another)",
            path.display()
        )
    })
}

/// What to list.
#[derive(Clone, Copy, Debug)]
pub(crate) enum List {
    /// IOCs.
    Iocs,
    /// HCA ports.
    Ports,
    /// LUNs.
    Luns,
    /// Sessions.
    Sessions,
}

/// Prints a list from the socket at `path`.
pub(crate) fn list(path: &Path, what: List, as_json: bool) -> Result<()> {
    let mut c = connect(path)?;
    let (value, text) = match what {
        List::Iocs => {
            let v = c.iocs()?;
            (
                Value::Array(v.iter().map(ioc_json).collect()),
                iocs_table(&v),
            )
        }
        List::Ports => {
            let v = c.ports()?;
            (
                Value::Array(v.iter().map(port_json).collect()),
                ports_table(&v),
            )
        }
        List::Luns => {
            let v = c.luns()?;
            (
                Value::Array(v.iter().map(lun_json).collect()),
                luns_table(&v),
            )
        }
        List::Sessions => {
            let v = c.sessions()?;
            (
                Value::Array(v.iter().map(session_json).collect()),
                sessions_table(&v),
            )
        }
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{text}");
    }
    Ok(())
}

/// Has the target re-read its file and apply it; prints what changed (or fails with every
/// reason nothing was).
pub(crate) fn reload(path: &Path, as_json: bool) -> Result<()> {
    let report = connect(path)?.reload()?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    if report.changes.is_empty() {
        println!("reloaded: the file equals the running configuration; nothing changed");
    }
    for c in &report.changes {
        println!("{c}");
    }
    if report.sessions_ended > 0 {
        println!("{} session(s) logged out", report.sessions_ended);
    }
    Ok(())
}

/// Prints the running configuration: TOML, or JSON of the same tables.
pub(crate) fn config(path: &Path, as_json: bool) -> Result<()> {
    let text = connect(path)?.running_config()?;
    if as_json {
        let value: toml::Value = toml::from_str(&text).context("the daemon's configuration")?;
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{text}");
    }
    Ok(())
}

/// Prints the daemon's metrics: Prometheus text, or JSON samples.
pub(crate) fn metrics(path: &Path, as_json: bool) -> Result<()> {
    let text = connect(path)?.metrics()?;
    crate::metrics_http::print(&text, as_json)
}

/// Enables or disables an IOC.
pub(crate) fn set_ioc(path: &Path, name: &str, enabled: bool, drop: bool) -> Result<()> {
    let mode = if drop {
        DisableMode::Drop
    } else {
        DisableMode::Logout
    };
    let ended = connect(path)?.set_ioc(name, enabled, mode)?;
    match (enabled, drop) {
        (true, _) => println!("ioc {name}: enabled"),
        (false, false) => println!("ioc {name}: disabled; {ended} session(s) logged out"),
        (false, true) => println!("ioc {name}: disabled; {ended} session(s) dropped"),
    }
    Ok(())
}

/// Brings a port up or down.
pub(crate) fn set_port(path: &Path, name: &str, up: bool) -> Result<()> {
    let ended = connect(path)?.set_port(name, up)?;
    if up {
        println!("port {name}: up");
    } else {
        println!("port {name}: down; {ended} session(s) dropped");
    }
    Ok(())
}

/// Clears a LUN's latched flush error.
pub(crate) fn clear_flush_error(path: &Path, name: &str) -> Result<()> {
    if connect(path)?.clear_flush_error(name)? {
        println!("lun {name}: flush error cleared; flushes and durable writes are served again");
    } else {
        println!("lun {name}: no flush error was latched");
    }
    Ok(())
}

fn ioc_json(i: &IocStatus) -> Value {
    json!({
        "name": i.name, "guid": format!("{:#018x}", i.guid),
        "id_ext": format!("{:#018x}", i.id_ext),
        "service_id": format!("{:#018x}", i.service_id),
        "enabled": i.enabled, "luns": i.luns, "sessions": i.sessions,
    })
}

fn port_json(p: &PortStatus) -> Value {
    json!({
        "name": p.name, "address": p.address.to_string(), "active": p.active,
        "sessions": p.sessions,
        "resources": {"qps": p.resources.qps, "cqs": p.resources.cqs,
                      "srqs": p.resources.srqs, "mrs": p.resources.mrs},
        "provider": p.provider,
        "rx_packets": p.hca.rx_packets(), "tx_packets": p.hca.tx_packets(),
        "hca": p.hca.named().map(|(k, v)| (k.to_owned(), Value::from(v))).collect::<serde_json::Map<String, Value>>(),
    })
}

fn lun_json(l: &LunStatus) -> Value {
    let c = &l.counters;
    json!({
        "name": l.name, "naa": to_hex(&l.naa), "blocks": l.blocks, "block_size": l.block_size,
        "read_only": l.read_only, "write_cache": l.write_cache, "flush_failed": l.flush_failed,
        "counters": {"commands": c.commands, "reads": c.reads, "writes": c.writes,
                     "bytes_read": c.bytes_read, "bytes_written": c.bytes_written,
                     "check_conditions": c.check_conditions,
                     "reservation_conflicts": c.reservation_conflicts,
                     "flush_errors": c.flush_errors},
    })
}

fn session_json(s: &SessionStatus) -> Value {
    let c = &s.counters;
    json!({
        "channel": s.channel, "ioc": s.ioc, "port": s.port,
        "initiator": to_hex(&s.initiator.0), "form": s.form.as_str(), "window": s.window,
        "max_it_iu_len": s.max_it_iu_len, "in_flight": s.in_flight, "age_secs": s.age_secs,
        "counters": {"commands": c.commands, "task_mgmt": c.task_mgmt,
                     "data_in_bytes": c.data_in_bytes, "data_out_bytes": c.data_out_bytes,
                     "check_conditions": c.check_conditions, "busy": c.busy,
                     "reservation_conflicts": c.reservation_conflicts, "aborted": c.aborted,
                     "late_task_mgmt": c.late_task_mgmt},
    })
}

fn iocs_table(v: &[IocStatus]) -> String {
    let rows = v
        .iter()
        .map(|i| {
            vec![
                i.name.clone(),
                format!("{:#018x}", i.guid),
                format!("{:#018x}", i.service_id),
                if i.enabled { "enabled" } else { "disabled" }.into(),
                i.luns.to_string(),
                i.sessions.to_string(),
            ]
        })
        .collect();
    table(
        &["IOC", "GUID", "SERVICE ID", "STATE", "LUNS", "SESSIONS"],
        rows,
    )
}

fn ports_table(v: &[PortStatus]) -> String {
    let rows = v
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.address.to_string(),
                p.provider.clone(),
                if p.active { "up" } else { "down" }.into(),
                p.sessions.to_string(),
                format!(
                    "{}/{}/{}",
                    p.resources.qps, p.resources.cqs, p.resources.mrs
                ),
                crate::counters::transport(p.hca.named()),
            ]
        })
        .collect();
    table(
        &[
            "PORT",
            "ADDRESS",
            "PROVIDER",
            "STATE",
            "SESSIONS",
            "QP/CQ/MR",
            "TRANSPORT",
        ],
        rows,
    )
}

fn luns_table(v: &[LunStatus]) -> String {
    let rows = v
        .iter()
        .map(|l| {
            let c = &l.counters;
            vec![
                l.name.clone(),
                to_hex(&l.naa),
                format!("{}x{}", l.blocks, l.block_size),
                format!(
                    "{}{}{}",
                    if l.read_only { "ro" } else { "rw" },
                    if l.write_cache { ",wce" } else { "" },
                    if l.flush_failed { ",FLUSH-FAILED" } else { "" }
                ),
                c.commands.to_string(),
                format!("{}/{}", c.reads, c.bytes_read),
                format!("{}/{}", c.writes, c.bytes_written),
                format!("{}/{}", c.check_conditions, c.reservation_conflicts),
                c.flush_errors.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "LUN",
            "NAA",
            "BLOCKS",
            "MODE",
            "CMDS",
            "READS/BYTES",
            "WRITES/BYTES",
            "CHECK/CONFLICT",
            "FLUSH-ERR",
        ],
        rows,
    )
}

fn sessions_table(v: &[SessionStatus]) -> String {
    let rows = v
        .iter()
        .map(|s| {
            let c = &s.counters;
            vec![
                s.channel.to_string(),
                s.ioc.clone(),
                s.port.clone(),
                to_hex(&s.initiator.0),
                s.form.as_str().into(),
                format!("{}/{}", s.in_flight, s.window),
                c.commands.to_string(),
                format!("{}/{}", c.data_in_bytes, c.data_out_bytes),
                format!("{}/{}/{}", c.check_conditions, c.busy, c.aborted),
                format!("{}s", s.age_secs),
            ]
        })
        .collect();
    table(
        &[
            "CHANNEL",
            "IOC",
            "PORT",
            "INITIATOR",
            "FORM",
            "INFLIGHT/WINDOW",
            "CMDS",
            "IN/OUT BYTES",
            "CHECK/BUSY/ABORTED",
            "AGE",
        ],
        rows,
    )
}
