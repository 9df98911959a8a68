//! `srpctl login|logout|sessions|disks`: a running host daemon's control socket
//! (`srpctl host run`). Lists print as aligned tables (or the model's JSON with `--json`);
//! errors, the daemon's refusals included, end the command with its reason and exit code 1.

use anyhow::Result;
use clap::{Args, Subcommand};
use serde_json::Value;
use srp_hostd::config::{DEFAULT_NAME, default_socket};
use srp_hostd::control::{DiskInfo, HostClient, LoginSpec, SessionInfo};
use std::net::IpAddr;
use std::path::PathBuf;

/// The host daemon's commands (top-level subcommands).
#[derive(Subcommand, Debug)]
pub(crate) enum HostCtl {
    /// Sweep a portal (Device Management) and log in to its SRP IOCs through the running
    /// host daemon: each login's LUNs become block files. Prints the sessions created.
    Login {
        /// The portal: the target port's IP address.
        portal: IpAddr,
        /// The local address to log in from (default: a free one of the portal's
        /// configured local addresses, or the address the kernel routes to it from).
        #[arg(long)]
        local: Option<IpAddr>,
        /// Only this IOC (GUID: 0x-prefixed hex or 16 hex digits); default: every SRP IOC
        /// not logged in to yet.
        #[arg(long)]
        ioc: Option<String>,
        #[command(flatten)]
        at: HostCtlArgs,
    },
    /// Log out of a session; its block files disappear.
    Logout {
        /// The session's number (as `srpctl sessions` shows).
        session: u32,
        #[command(flatten)]
        at: HostCtlArgs,
    },
    /// The host daemon's sessions: portal, local address, IOC, state, reconnects, disks.
    Sessions(HostCtlArgs),
    /// The host daemon's disks: block file, session, LUN, identity, size, counters.
    Disks(HostCtlArgs),
}

/// Which host daemon, and how to print.
#[derive(Args, Debug, Clone)]
pub(crate) struct HostCtlArgs {
    /// The control socket's path (default /run/srp-host/srp-host.sock).
    #[arg(short, long, conflicts_with = "name")]
    socket: Option<PathBuf>,
    /// The daemon's `[host] name`: its socket /run/srp-host/NAME.sock.
    #[arg(long)]
    name: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl HostCtlArgs {
    /// Which socket: `--socket`, else that of `--name`, else the default daemon's.
    fn path(&self) -> PathBuf {
        match (&self.socket, &self.name) {
            (Some(s), _) => s.clone(),
            (None, Some(n)) => default_socket(n),
            (None, None) => default_socket(DEFAULT_NAME),
        }
    }

    fn connect(&self) -> Result<HostClient> {
        Ok(HostClient::connect(self.path())?)
    }
}

/// Runs one of the host daemon's commands.
pub(crate) fn run(cmd: HostCtl) -> Result<()> {
    match cmd {
        HostCtl::Login {
            portal,
            local,
            ioc,
            at,
        } => {
            let spec = LoginSpec {
                portal,
                local,
                ioc_guid: ioc,
            };
            let created = at.connect()?.login(spec)?;
            print(&at, serde_json::to_value(&created)?, || logged_in(&created))
        }
        HostCtl::Logout { session, at } => {
            let removed = at.connect()?.logout(session)?;
            print(&at, serde_json::to_value(&removed)?, || {
                format!(
                    "session {session}: logged out; {} disk(s) removed{}{}\n",
                    removed.len(),
                    if removed.is_empty() { "" } else { ": " },
                    removed.join(" ")
                )
            })
        }
        HostCtl::Sessions(at) => {
            let v = at.connect()?.sessions()?;
            print(&at, serde_json::to_value(&v)?, || sessions_table(&v))
        }
        HostCtl::Disks(at) => {
            let v = at.connect()?.disks()?;
            print(&at, serde_json::to_value(&v)?, || disks_table(&v))
        }
    }
}

/// Prints `value` as pretty JSON with `--json`, else `text()`.
fn print(at: &HostCtlArgs, value: Value, text: impl FnOnce() -> String) -> Result<()> {
    if at.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", text());
    }
    Ok(())
}

fn logged_in(created: &[SessionInfo]) -> String {
    created
        .iter()
        .map(|s| {
            format!(
                "session {}: logged in to {} from {}: {} disk(s){}{}\n",
                s.id,
                ioc(s),
                s.local,
                s.disks.len(),
                if s.disks.is_empty() { "" } else { ": " },
                s.disks.join(" ")
            )
        })
        .collect()
}

/// The IOC as an operator names it: its IDString and GUID, or the GUID alone.
fn ioc(s: &SessionInfo) -> String {
    if s.ioc_name.is_empty() {
        format!("{} at {}", s.ioc_guid, s.portal)
    } else {
        format!("{} ({}) at {}", s.ioc_name, s.ioc_guid, s.portal)
    }
}

/// Rows under a header, columns padded to their widest cell (as `srpctl target`'s).
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn sessions_table(v: &[SessionInfo]) -> String {
    let rows = v
        .iter()
        .map(|s| {
            vec![
                s.id.to_string(),
                s.portal.to_string(),
                s.local.to_string(),
                if s.ioc_name.is_empty() {
                    s.ioc_guid.clone()
                } else {
                    s.ioc_name.clone()
                },
                s.state.clone(),
                format!("{}/{}", s.logins, s.losses),
                s.outstanding.to_string(),
                s.disks.len().to_string(),
                s.last_error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "PORTAL",
            "LOCAL",
            "IOC",
            "STATE",
            "LOGINS/LOSSES",
            "OUTSTANDING",
            "DISKS",
            "LAST ERROR",
        ],
        rows,
    )
}

/// `bytes` in binary units, one decimal (`1.0 GiB`).
fn size(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    let mut scaled = bytes;
    while scaled >= 1024 * 1024 && unit + 2 < UNITS.len() {
        scaled /= 1024;
        unit += 1;
    }
    if scaled < 1024 {
        return format!("{scaled} {}", UNITS[unit]);
    }
    // One decimal from the last two steps, without floats losing big values.
    format!(
        "{}.{} {}",
        scaled / 1024,
        scaled % 1024 * 10 / 1024,
        UNITS[unit + 1]
    )
}

fn disks_table(v: &[DiskInfo]) -> String {
    let rows = v
        .iter()
        .map(|d| {
            vec![
                d.name.clone(),
                d.session.to_string(),
                d.lun.to_string(),
                size(u128::from(d.blocks) * u128::from(d.block_size)),
                format!("{}x{}", d.blocks, d.block_size),
                d.identity.clone(),
                format!("{} {} {}", d.vendor, d.product, d.revision),
                format!("{}/{}/{}/{}", d.reads, d.writes, d.flushes, d.errors),
            ]
        })
        .collect();
    table(
        &[
            "DISK",
            "SESSION",
            "LUN",
            "SIZE",
            "BLOCKS",
            "IDENTITY",
            "VENDOR PRODUCT REV",
            "READS/WRITES/FLUSHES/ERRORS",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_operators_expect() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(2048 * 512), "1.0 MiB");
        assert_eq!(size(1 << 30), "1.0 GiB");
        assert_eq!(size(3 << 40), "3.0 TiB");
        assert_eq!(size(u128::from(u64::MAX) * 4096), "67108863.9 PiB");
    }

    #[test]
    fn the_socket_follows_socket_then_name() {
        let args = |socket: Option<&str>, name: Option<&str>| HostCtlArgs {
            socket: socket.map(PathBuf::from),
            name: name.map(String::from),
            json: false,
        };
        assert_eq!(
            args(None, None).path(),
            PathBuf::from("/run/srp-host/srp-host.sock")
        );
        assert_eq!(
            args(None, Some("rack2")).path(),
            PathBuf::from("/run/srp-host/rack2.sock")
        );
        assert_eq!(
            args(Some("/tmp/h.sock"), None).path(),
            PathBuf::from("/tmp/h.sock")
        );
    }
}
