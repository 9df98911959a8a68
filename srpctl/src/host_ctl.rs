//! `srpctl login|logout|persistent|sessions|targets|portals|disks|paths`, `srpctl policy set` and `srpctl path
//! fail|restore`: a running host daemon's control socket (`srpctl host run`). Lists print as
//! aligned tables (`paths` in the shape of `multipath -ll`: a disk, then its paths), or the
//! model's JSON with `--json`; errors, the daemon's refusals included, end the command with
//! its reason and exit code 1.

use crate::table::table;
use anyhow::Result;
use clap::{Args, Subcommand};
use serde_json::Value;
use srp_hostd::config::{DEFAULT_NAME, default_socket};
use srp_hostd::control::{
    DiskInfo, HostClient, LoginSpec, PathInfo, PortalInfo, ResetInfo, SessionInfo, TargetInfo,
};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

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
        /// Keep the login: the daemon records it and logs in again at every start (and
        /// whenever it is down), as the iSCSI initiator's persistent logins.
        #[arg(long)]
        persistent: bool,
        /// The driver model for its sessions: storport or iscsi-model (default: the
        /// portal's, else the host's `driver`).
        #[arg(long)]
        driver: Option<String>,
        #[command(flatten)]
        at: HostCtlArgs,
    },
    /// The persistent logins (`srpctl login --persistent`), or forget one.
    Persistent {
        #[command(subcommand)]
        what: Option<PersistentCmd>,
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
    /// The SRP targets the host daemon's sweeps found (portal, IOC, target port, service
    /// ID) and the sessions logged in to each.
    Targets(HostCtlArgs),
    /// The portals the host daemon knows (configured, or named by a login): local
    /// addresses, driver model, login form, what the last sweep found.
    Portals(HostCtlArgs),
    /// The host daemon's disks, one per logical unit over all its paths: block file,
    /// identity, size, policy, usable/total paths, queued I/O, counters.
    Disks(HostCtlArgs),
    /// Every disk with its paths (as `multipath -ll` / `mpclaim -s -d`): identity and
    /// policy, then per path its session, IOC, portal, state, ALUA state, preference,
    /// in-flight I/O and counters.
    Paths(HostCtlArgs),
    /// A disk's load-balance policy.
    Policy {
        #[command(subcommand)]
        what: PolicyCmd,
    },
    /// Take a path out of service or return it (administratively; for every disk the
    /// path's session carries).
    Path {
        #[command(subcommand)]
        what: PathCmd,
    },
}

/// `srpctl persistent …`.
#[derive(Subcommand, Debug)]
pub(crate) enum PersistentCmd {
    /// Forget a persistent login (its sessions stay until logged out).
    Forget {
        /// Its index (as `srpctl persistent` lists them).
        index: u32,
    },
}

/// `srpctl policy …`.
#[derive(Subcommand, Debug)]
pub(crate) enum PolicyCmd {
    /// Set a disk's load-balance policy at run time.
    Set {
        /// The disk: its name (as `srpctl disks` shows) or identity.
        disk: String,
        /// failover-only, round-robin, round-robin-subset, least-queue-depth,
        /// weighted-paths, least-blocks or service-time.
        policy: String,
        #[command(flatten)]
        at: HostCtlArgs,
    },
}

/// `srpctl path …`.
#[derive(Subcommand, Debug)]
pub(crate) enum PathCmd {
    /// Take a path down administratively: no new I/O goes to it (in-flight I/O completes);
    /// the disk's other paths carry on.
    Fail {
        /// The path's session (as `srpctl paths` shows).
        session: u32,
        #[command(flatten)]
        at: HostCtlArgs,
    },
    /// Return an administratively failed path to service (after a successful path
    /// verify).
    Restore {
        /// The path's session.
        session: u32,
        #[command(flatten)]
        at: HostCtlArgs,
    },
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

/// `srpctl host reload`: what changed (or `--json` the list).
pub(crate) fn reload(at: &HostCtlArgs) -> Result<()> {
    let changes = at.connect()?.reload()?;
    if at.json {
        println!("{}", serde_json::to_string_pretty(&changes)?);
    } else if changes.is_empty() {
        println!("reloaded: the file equals the running configuration; nothing changed");
    } else {
        for c in changes {
            println!("{c}");
        }
    }
    Ok(())
}

/// Which way `srpctl host power` goes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PowerArg {
    /// Down: drivers drained and logged out, then their HCAs.
    Suspend,
    /// Up: HCAs, then their drivers (a fresh login each).
    Resume,
}

/// `srpctl host power suspend|resume`: each session's transition (or `--json` the list).
pub(crate) fn power(state: PowerArg, at: &HostCtlArgs) -> Result<()> {
    let lines = at.connect()?.power(state == PowerArg::Suspend)?;
    if at.json {
        println!("{}", serde_json::to_string_pretty(&lines)?);
    } else if lines.is_empty() {
        println!("no session to power");
    } else {
        for l in lines {
            println!("{l}");
        }
    }
    Ok(())
}

/// `srpctl host metrics`: the daemon's lists over its socket, as Prometheus text (or JSON
/// samples).
pub(crate) fn metrics(at: &HostCtlArgs) -> Result<()> {
    let mut c = at.connect()?;
    let text = srp_hostd::metrics::render(&c.sessions()?, &c.disks()?);
    crate::metrics_http::print(&text, at.json)
}

/// Which socket: `socket`, else that of the daemon named `name`, else the default daemon's.
pub(crate) fn socket_path(socket: Option<&Path>, name: Option<&str>) -> PathBuf {
    match (socket, name) {
        (Some(s), _) => s.to_path_buf(),
        (None, Some(n)) => default_socket(n),
        (None, None) => default_socket(DEFAULT_NAME),
    }
}

impl HostCtlArgs {
    /// Which socket: `--socket`, else that of `--name`, else the default daemon's.
    fn path(&self) -> PathBuf {
        socket_path(self.socket.as_deref(), self.name.as_deref())
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
            persistent,
            driver,
            at,
        } => {
            let spec = LoginSpec {
                portal,
                local,
                ioc_guid: ioc,
                persistent,
                driver,
            };
            let created = at.connect()?.login(spec)?;
            print(&at, serde_json::to_value(&created)?, || logged_in(&created))
        }
        HostCtl::Persistent { what: None, at } => {
            let v = at.connect()?.persistent_logins()?;
            print(&at, serde_json::to_value(&v)?, || persistent_table(&v))
        }
        HostCtl::Persistent {
            what: Some(PersistentCmd::Forget { index }),
            at,
        } => {
            let spec = at.connect()?.forget_persistent(index)?;
            print(&at, serde_json::to_value(&spec)?, || {
                format!(
                    "persistent login {index} forgotten: {}\n",
                    persistent_text(&spec)
                )
            })
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
        HostCtl::Targets(at) => {
            let v = at.connect()?.targets()?;
            print(&at, serde_json::to_value(&v)?, || targets_table(&v))
        }
        HostCtl::Portals(at) => {
            let v = at.connect()?.portals()?;
            print(&at, serde_json::to_value(&v)?, || portals_table(&v))
        }
        HostCtl::Sessions(at) => {
            let v = at.connect()?.sessions()?;
            print(&at, serde_json::to_value(&v)?, || sessions_table(&v))
        }
        HostCtl::Disks(at) => {
            let v = at.connect()?.disks()?;
            print(&at, serde_json::to_value(&v)?, || disks_table(&v))
        }
        HostCtl::Paths(at) => {
            let v = at.connect()?.disks()?;
            print(&at, serde_json::to_value(&v)?, || paths_text(&v))
        }
        HostCtl::Policy {
            what: PolicyCmd::Set { disk, policy, at },
        } => {
            let done = at.connect()?.set_policy(&disk, &policy)?;
            print(&at, serde_json::to_value(&done)?, || {
                format!("{}: policy {policy}\n", done.join(" "))
            })
        }
        HostCtl::Path {
            what: PathCmd::Fail { session, at },
        } => switch_path(&at, session, false),
        HostCtl::Path {
            what: PathCmd::Restore { session, at },
        } => switch_path(&at, session, true),
    }
}

fn switch_path(at: &HostCtlArgs, session: u32, enabled: bool) -> Result<()> {
    let done = at.connect()?.set_path(session, enabled)?;
    print(at, serde_json::to_value(&done)?, || {
        format!(
            "path {session}: {} for {} disk(s){}{}\n",
            if enabled {
                "restored"
            } else {
                "failed (admin-down)"
            },
            done.len(),
            if done.is_empty() { "" } else { ": " },
            done.join(" ")
        )
    })
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

fn targets_table(v: &[TargetInfo]) -> String {
    let rows = v
        .iter()
        .map(|t| {
            vec![
                t.portal.to_string(),
                if t.ioc_name.is_empty() {
                    t.ioc_guid.clone()
                } else {
                    format!("{} ({})", t.ioc_name, t.ioc_guid)
                },
                t.id_ext.clone(),
                t.service_id.clone(),
                if t.sessions.is_empty() {
                    "-".into()
                } else {
                    t.sessions
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                },
            ]
        })
        .collect();
    table(&["PORTAL", "IOC", "ID_EXT", "SERVICE ID", "SESSIONS"], rows)
}

fn portals_table(v: &[PortalInfo]) -> String {
    let rows = v
        .iter()
        .map(|p| {
            vec![
                p.address.to_string(),
                if p.configured { "yes" } else { "no" }.into(),
                if p.local.is_empty() {
                    "(routed)".into()
                } else {
                    p.local
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                },
                p.driver.clone(),
                p.login.clone(),
                match (&p.last_sweep, p.swept_secs_ago) {
                    (None, _) => "never".into(),
                    (Some(Ok(n)), ago) => {
                        format!("{n} SRP service(s), {}s ago", ago.unwrap_or(0))
                    }
                    (Some(Err(e)), ago) => format!("failed {}s ago: {e}", ago.unwrap_or(0)),
                },
            ]
        })
        .collect();
    table(
        &[
            "PORTAL",
            "CONFIGURED",
            "LOCAL",
            "DRIVER",
            "LOGIN",
            "LAST SWEEP",
        ],
        rows,
    )
}

/// One persistent login in words.
fn persistent_text(l: &LoginSpec) -> String {
    format!(
        "portal {} from {} IOC {} driver {}",
        l.portal,
        l.local
            .map_or("(any free local address)".into(), |a| a.to_string()),
        l.ioc_guid.as_deref().unwrap_or("(every SRP IOC)"),
        l.driver.as_deref().unwrap_or("(configured)")
    )
}

fn persistent_table(v: &[LoginSpec]) -> String {
    let rows = v
        .iter()
        .enumerate()
        .map(|(i, l)| {
            vec![
                i.to_string(),
                l.portal.to_string(),
                l.local.map_or("-".into(), |a| a.to_string()),
                l.ioc_guid.clone().unwrap_or_else(|| "*".into()),
                l.driver.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table(&["INDEX", "PORTAL", "LOCAL", "IOC", "DRIVER"], rows)
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
                s.login.clone(),
                s.driver.clone(),
                s.provider.clone(),
                s.fencing.clone(),
                format!("{}/{}", s.logins, s.losses),
                resets(&s.resets),
                s.outstanding.to_string(),
                s.disks.len().to_string(),
                crate::counters::transport(s.hca.iter().map(|(k, v)| (k.as_str(), *v))),
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
            "LOGIN",
            "DRIVER",
            "PROVIDER",
            "FENCING",
            "LOGINS/LOSSES",
            "RESETS",
            "OUTSTANDING",
            "DISKS",
            "TRANSPORT",
            "LAST ERROR",
        ],
        rows,
    )
}

/// A session's resets in a few words: `-` when none, else LUN resets answered, then the
/// refused and escalated ones when there were any (`2 lun, 1 escalated`).
fn resets(r: &ResetInfo) -> String {
    if *r == ResetInfo::default() {
        return "-".to_owned();
    }
    let mut words = vec![format!("{} lun", r.lun_resets)];
    if r.refused > 0 {
        words.push(format!("{} refused", r.refused));
    }
    if r.escalated > 0 {
        words.push(format!("{} escalated", r.escalated));
    }
    words.join(", ")
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

/// Whether a path can take I/O now (the policy may still leave a standby path idle).
fn usable(p: &PathInfo) -> bool {
    matches!(p.state.as_str(), "active" | "standby")
}

fn disks_table(v: &[DiskInfo]) -> String {
    let rows = v
        .iter()
        .map(|d| {
            let up = d.paths.iter().filter(|p| usable(p)).count();
            vec![
                d.name.clone(),
                d.identity.clone(),
                size(u128::from(d.blocks) * u128::from(d.block_size)),
                d.policy.clone(),
                format!("{up}/{}", d.paths.len()),
                d.queued.to_string(),
                format!(
                    "{}/{}/{}/{}/{}",
                    d.reads, d.writes, d.flushes, d.errors, d.failovers
                ),
            ]
        })
        .collect();
    table(
        &[
            "DISK",
            "IDENTITY",
            "SIZE",
            "POLICY",
            "PATHS",
            "QUEUED",
            "READS/WRITES/FLUSHES/ERRORS/FAILOVERS",
        ],
        rows,
    )
}

/// The IOC of a path: its IDString and GUID, or the GUID alone.
fn path_ioc(p: &PathInfo) -> String {
    if p.ioc_name.is_empty() {
        p.ioc_guid.clone()
    } else {
        format!("{} ({})", p.ioc_name, p.ioc_guid)
    }
}

/// Each disk as `multipath -ll` shows one: a line naming it, a line of its settings, then
/// its paths as an indented table.
fn paths_text(v: &[DiskInfo]) -> String {
    let mut out = String::new();
    for (i, d) in v.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let up = d.paths.iter().filter(|p| usable(p)).count();
        out.push_str(&format!(
            "{} {} {} {} {}\n",
            d.name, d.identity, d.vendor, d.product, d.revision
        ));
        out.push_str(&format!(
            "size={} ({}x{}) policy={} paths={up}/{} queued={} failovers={} file={}\n",
            size(u128::from(d.blocks) * u128::from(d.block_size)),
            d.blocks,
            d.block_size,
            d.policy,
            d.paths.len(),
            d.queued,
            d.failovers,
            if d.path.is_empty() { "-" } else { &d.path },
        ));
        let rows = d
            .paths
            .iter()
            .map(|p| {
                vec![
                    p.session.to_string(),
                    p.lun.to_string(),
                    path_ioc(p),
                    p.portal.to_string(),
                    p.local.to_string(),
                    p.state.clone(),
                    p.alua.clone().unwrap_or_else(|| "-".into()),
                    if p.preferred { "yes" } else { "no" }.into(),
                    p.in_flight.to_string(),
                    format!("{}/{}", p.reads, p.writes),
                    size(u128::from(p.bytes)),
                    format!("{}/{}", p.errors, p.failures),
                    format!("{}/{}", p.hca_dropped, p.retransmits),
                ]
            })
            .collect();
        let paths = table(
            &[
                "SESSION",
                "LUN",
                "IOC",
                "PORTAL",
                "LOCAL",
                "STATE",
                "ALUA",
                "PREFERRED",
                "IN-FLIGHT",
                "READS/WRITES",
                "BYTES",
                "ERRORS/FAILURES",
                "DROPS/RETX",
            ],
            rows,
        );
        for line in paths.lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    if v.is_empty() {
        out.push_str("no disks\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_read_in_a_few_words() {
        assert_eq!(resets(&ResetInfo::default()), "-");
        let r = ResetInfo {
            sequences: 1,
            lun_resets: 2,
            refused: 0,
            escalated: 0,
        };
        assert_eq!(resets(&r), "2 lun");
        let r = ResetInfo {
            refused: 1,
            escalated: 3,
            ..r
        };
        assert_eq!(resets(&r), "2 lun, 1 refused, 3 escalated");
    }

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

    fn path(session: u32, state: &str) -> PathInfo {
        PathInfo {
            session,
            lun: 0,
            ioc_guid: format!("0x0002c90300de000{session}"),
            ioc_name: format!("ioc-{session}"),
            portal: "127.0.150.1".parse().expect("ip"),
            local: "127.0.150.2".parse().expect("ip"),
            state: state.into(),
            alua: (session == 1).then(|| "active/optimized".into()),
            preferred: session == 1,
            weight: 1,
            in_flight: 3,
            reads: 10,
            writes: 20,
            bytes: 30 * 4096,
            errors: 1,
            failures: 2,
            hca_dropped: 3,
            retransmits: 4,
        }
    }

    fn disk() -> DiskInfo {
        DiskInfo {
            name: "naa.6001405abc".into(),
            path: "/run/srp-host/srp-host/disks/naa.6001405abc".into(),
            identity: "naa.6001405abc".into(),
            vendor: "SRPT".into(),
            product: "soft disk".into(),
            revision: "0001".into(),
            block_size: 512,
            blocks: 131072,
            policy: "round-robin".into(),
            queued: 0,
            reads: 5,
            writes: 6,
            flushes: 7,
            errors: 0,
            failovers: 4,
            latency: Default::default(),
            paths: vec![path(1, "active"), path(2, "admin-down")],
        }
    }

    #[test]
    fn disks_show_one_row_per_multipath_disk() {
        let text = disks_table(&[disk()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for cell in [
            "naa.6001405abc",
            "64.0 MiB",
            "round-robin",
            "1/2",
            "5/6/7/0/4",
        ] {
            assert!(lines[1].contains(cell), "{cell}: {text}");
        }
    }

    #[test]
    fn paths_show_each_disk_then_its_paths() {
        let text = paths_text(&[disk()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[0].starts_with("naa.6001405abc naa.6001405abc SRPT soft disk 0001"));
        assert!(lines[1].contains("policy=round-robin paths=1/2"), "{text}");
        assert!(lines[2].starts_with("  SESSION"), "{text}");
        for cell in [
            "ioc-1 (0x0002c90300de0001)",
            "127.0.150.1",
            "active/optimized",
            "yes",
        ] {
            assert!(lines[3].contains(cell), "{cell}: {text}");
        }
        assert!(lines[4].contains("admin-down"), "{text}");
        assert_eq!(paths_text(&[]), "no disks\n");
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
