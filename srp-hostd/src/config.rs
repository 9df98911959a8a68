//! `host.toml`: what the host daemon logs in to and how.
//!
//! ```toml
//! [host]
//! name = "srp-host"                  # names the default socket and disks directory
//! node_guid = "0x0002c90300beef01"   # default: derived from the name
//! initiator_ext = "0x0"              # the initiator port ID's high half (ib_srp initiator_ext)
//! disks_dir = "/run/srp-host/srp-host/disks"
//! control_socket = "/run/srp-host/srp-host.sock"
//! control_group = "srpadmin"         # optional: its members may use the socket (else root only)
//! state_dir = "/var/lib/srp-host/srp-host"  # persistent logins are kept here
//! registration = "per-io"            # or "trust-target" (the 2005 all-memory region: the
//!                                    # target reaches all memory at any time, and an I/O
//!                                    # given up is not fenced; exempt by design)
//! driver = "storport"                # the initiator's Windows driver model: "storport"
//!                                    # (Server 2003 miniport) or "iscsi-model" (XP)
//! queue_depth = 32                   # per LU
//! max_transfer = "256KiB"
//! max_luns = 16                      # LUN numbers 0..max_luns are scanned
//! cmd_timeout = "30s"
//! login_timeout = "10s"
//! sweep_interval = "5s"              # portals re-swept; lost sessions logged in again
//! login = "auto"                     # "ib-cm", "rdma-cm" or "auto": IB CM first, then
//!                                    # RDMA-CM; the form that worked is kept per IOC
//! rdma_cm_port = 5555                # the targets' RDMA-CM port (ib_srpt's rdma_cm_port)
//! rules = "/etc/srp/host/h1.rules"   # discovery rules: allow/deny per target, login
//!                                    # options (`rules` module); default: every target
//!
//! [timers]                           # ib_srp's defaults; "off" turns one off
//! reconnect_delay = "10s"
//! fast_io_fail = "15s"
//! dev_loss = "600s"
//!
//! [multipath]                        # one disk per LU identity over all its paths
//! policy = "round-robin"             # failover-only, round-robin, round-robin-subset,
//!                                    # least-queue-depth, weighted-paths, least-blocks,
//!                                    # service-time (or MPIO's number 1..7)
//! failback = true                    # a returning preferred path takes over again
//! no_path_retry = "30s"              # I/O waits this long for a path when none is left
//! verify_period = "30s"              # TEST UNIT READY on every active path this often
//! flap_failures = 3                  # this many failures within flap_window damp a path
//! flap_window = "60s"
//! flap_hold = "5s"                   # the first hold; doubles while it keeps flapping
//!
//! [[portal]]
//! address = "192.0.2.10"             # the target port
//! local = ["192.0.2.20"]             # local addresses, one channel each (default: routed)
//! iocs = ["0x0002c90300a1b401"]      # only these IOCs (default: every SRP IOC)
//! preferred = true                   # its paths are preferred (default false)
//! weight = 1                         # its paths' weight for weighted-paths (default 1)
//! login = "rdma-cm"                  # this portal's login form (default: host.login)
//! rdma_cm_port = 5555                # (default: host.rdma_cm_port)
//! partition = "0xffff"               # the P_Key to log in on (default 0xffff)
//! driver = "iscsi-model"             # this portal's driver model (default: host.driver)
//! ```
//!
//! Contract: [`HostConfig::from_str`] reports every problem at once, each with its key;
//! a valid config has at least one portal, distinct local addresses across portals, timers
//! `srp_tmo_valid` accepts, and sizes the miniport can use.

use access_layer::verbs::ProviderKind;
use ib_verbs::Guid;
use mpio::{MpConfig, Policy};
use serde::Deserialize;
use srp::initiator::TransportTimers;
use srp_initiator_storport::srp::{LoginVia, RegistrationMode};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a configuration is unusable: every problem found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {}", .problems.join("; "))]
pub struct ConfigError {
    /// The file (or text) it came from.
    pub origin: String,
    /// Each problem, with its key.
    pub problems: Vec<String>,
}

/// Which login form a portal's targets get (architecture decision 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoginChoice {
    /// The native IB CM form (our target; IB fabrics with DM discovery).
    IbCm,
    /// The RDMA-CM form (Linux ib_srpt over RoCE accepts only this).
    RdmaCm,
    /// IB CM first; if the target rejects it below SRP (ib_srpt: "invalid service ID") or
    /// does not answer, RDMA-CM. The form that logged in is kept for that IOC.
    #[default]
    Auto,
}

impl LoginChoice {
    /// Parses `ib-cm`, `rdma-cm` or `auto`.
    pub fn parse(text: &str) -> Option<LoginChoice> {
        match text {
            "ib-cm" => Some(LoginChoice::IbCm),
            "rdma-cm" => Some(LoginChoice::RdmaCm),
            "auto" => Some(LoginChoice::Auto),
            _ => None,
        }
    }

    /// Its name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginChoice::IbCm => "ib-cm",
            LoginChoice::RdmaCm => "rdma-cm",
            LoginChoice::Auto => "auto",
        }
    }

    /// The forms to try, in order, for targets whose RDMA-CM port is `port`.
    pub fn candidates(self, port: u16) -> Vec<LoginVia> {
        match self {
            LoginChoice::IbCm => vec![LoginVia::IbCm],
            LoginChoice::RdmaCm => vec![LoginVia::RdmaCm { port }],
            LoginChoice::Auto => vec![LoginVia::IbCm, LoginVia::RdmaCm { port }],
        }
    }
}

/// Which initiator driver model runs a login (docs/host.md, "Two driver models").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum DriverModel {
    /// The StorPort miniport (`srp-initiator-storport`): the Windows Server 2003 model.
    #[default]
    StorPort,
    /// The iSCSI-model driver (`srp-initiator-iscsi-model`): the Windows XP model.
    IscsiModel,
}

impl DriverModel {
    /// Parses `storport` or `iscsi-model`.
    pub fn parse(text: &str) -> Option<DriverModel> {
        match text {
            "storport" => Some(DriverModel::StorPort),
            "iscsi-model" => Some(DriverModel::IscsiModel),
            _ => None,
        }
    }

    /// Its name in the configuration and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverModel::StorPort => "storport",
            DriverModel::IscsiModel => "iscsi-model",
        }
    }
}

/// The RDMA-CM port Linux ib_srpt is conventionally given (`rdma_cm_port`).
pub const DEFAULT_RDMA_CM_PORT: u16 = 5555;

/// One portal to sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortalConfig {
    /// The target port's address.
    pub address: IpAddr,
    /// Local addresses to log in from, one channel each (empty: the routed source address).
    pub local: Vec<IpAddr>,
    /// Only these IOC GUIDs (empty: every IOC with an SRP service).
    pub iocs: Vec<Guid>,
    /// Its paths are preferred (failover only, round robin with subset, failback).
    pub preferred: bool,
    /// Its paths' weight under weighted paths (lower wins).
    pub weight: u32,
    /// The login form for its targets.
    pub login: LoginChoice,
    /// Its targets' RDMA-CM port.
    pub rdma_cm_port: u16,
    /// The partition (P_Key) its logins use: 0xFFFF, the default partition, unless the
    /// target exports its IOCs on another.
    pub partition: ib_verbs::PKey,
    /// The driver model its logins run under.
    pub driver: DriverModel,
    /// The verbs provider its logins run on: the software RoCE HCA (default) or an RDMA
    /// device through rdma-core.
    pub provider: ProviderKind,
    /// rdma-core: the RDMA device (`rxe0`); `None`: the one holding the local address.
    pub device: Option<String>,
    /// rdma-core: the device's port; `None`: the one holding the local address.
    pub device_port: Option<u8>,
    /// rdma-core: the GID index; `None`: the local address's RoCEv2 GID.
    pub gid_index: Option<u8>,
    /// Targets configured by hand (what Linux's `add_target` is given: id_ext and IOC
    /// GUID), logged in to without a Device Management sweep. Under rdma-core, where the
    /// kernel owns QP1 and we cannot sweep, the only way to name a target.
    pub targets: Vec<StaticTarget>,
}

/// A target named in the configuration rather than found by a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticTarget {
    /// The SRP target port's identifier extension.
    pub id_ext: u64,
    /// The IOC's GUID (the target port identifier's low half; ib_srpt's
    /// `srpt_service_guid`).
    pub ioc_guid: Guid,
}

impl PortalConfig {
    /// A portal at `address` with every default (login "auto", RDMA-CM port 5555).
    pub fn new(address: IpAddr) -> PortalConfig {
        PortalConfig {
            address,
            local: Vec::new(),
            iocs: Vec::new(),
            preferred: false,
            weight: 1,
            login: LoginChoice::default(),
            rdma_cm_port: DEFAULT_RDMA_CM_PORT,
            partition: ib_verbs::PKey::DEFAULT,
            driver: DriverModel::default(),
            provider: ProviderKind::Soft,
            device: None,
            device_port: None,
            gid_index: None,
            targets: Vec::new(),
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// The daemon's name.
    pub name: String,
    /// The node GUID of every adapter (the initiator port ID's low half).
    pub node_guid: Guid,
    /// The initiator port ID's high half.
    pub initiator_ext: u64,
    /// Where the block files appear (a FUSE mount).
    pub disks_dir: PathBuf,
    /// The control socket.
    pub control_socket: PathBuf,
    /// A group (its ID) whose members may use the control socket too (mode 0660); without
    /// one, root and the daemon's user only (0600).
    pub control_group: Option<u32>,
    /// Where the daemon keeps its state across restarts (the persistent logins).
    pub state_dir: PathBuf,
    /// Memory registration.
    pub registration: RegistrationMode,
    /// The driver model logins run under (a portal may say otherwise).
    pub driver: DriverModel,
    /// The verbs provider logins run on (a portal may say otherwise).
    pub provider: ProviderKind,
    /// Per-LU queue depth.
    pub queue_depth: u32,
    /// Largest transfer per command.
    pub max_transfer: u32,
    /// LUN numbers scanned: 0..max_luns.
    pub max_luns: u8,
    /// Per-command timeout before the abort ladder.
    pub cmd_timeout: Duration,
    /// How long a login may take.
    pub login_timeout: Duration,
    /// How often portals are swept for sessions to (re-)establish.
    pub sweep_interval: Duration,
    /// The default login form (a portal may override it).
    pub login: LoginChoice,
    /// The default RDMA-CM port of targets (a portal may override it).
    pub rdma_cm_port: u16,
    /// reconnect_delay, fast_io_fail, dev_loss.
    pub timers: TransportTimers,
    /// Multipath: the default policy and timers of every disk.
    pub multipath: MpConfig,
    /// The portals.
    pub portals: Vec<PortalConfig>,
    /// The discovery rules file ([`crate::rules`]): which services the sweeps log in to and
    /// with which options; `None`: every service, the host's options.
    pub rules: Option<PathBuf>,
    /// The file it was read from ([`HostConfig::from_file`]): what a reload re-reads.
    pub source: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    host: RawHost,
    #[serde(default)]
    timers: RawTimers,
    #[serde(default)]
    multipath: RawMultipath,
    #[serde(default)]
    portal: Vec<RawPortal>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMultipath {
    policy: Option<toml::Value>,
    failback: Option<bool>,
    no_path_retry: Option<String>,
    verify_period: Option<String>,
    flap_failures: Option<i64>,
    flap_window: Option<String>,
    flap_hold: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Option<String>,
    node_guid: Option<String>,
    initiator_ext: Option<String>,
    disks_dir: Option<PathBuf>,
    control_socket: Option<PathBuf>,
    control_group: Option<String>,
    state_dir: Option<PathBuf>,
    registration: Option<String>,
    driver: Option<String>,
    provider: Option<String>,
    queue_depth: Option<i64>,
    max_transfer: Option<toml::Value>,
    max_luns: Option<i64>,
    cmd_timeout: Option<String>,
    login_timeout: Option<String>,
    sweep_interval: Option<String>,
    login: Option<String>,
    rdma_cm_port: Option<i64>,
    rules: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTimers {
    reconnect_delay: Option<String>,
    fast_io_fail: Option<String>,
    dev_loss: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPortal {
    address: String,
    #[serde(default)]
    local: Vec<String>,
    #[serde(default)]
    iocs: Vec<String>,
    preferred: Option<bool>,
    weight: Option<i64>,
    login: Option<String>,
    rdma_cm_port: Option<i64>,
    partition: Option<String>,
    driver: Option<String>,
    provider: Option<String>,
    device: Option<String>,
    device_port: Option<i64>,
    gid_index: Option<i64>,
    #[serde(default)]
    target: Vec<RawTarget>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    id_ext: String,
    ioc_guid: String,
}

/// The default daemon name.
pub const DEFAULT_NAME: &str = "srp-host";

/// The default control socket of a daemon named `name`.
pub fn default_socket(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/srp-host/{name}.sock"))
}

/// A duration: digits with a unit (`opskit::units::parse_duration`, shared with the target).
pub use opskit::units::parse_duration;

/// A size: bytes as an integer, or a string through the one size parser of both
/// configurations ([`opskit::units::parse_size`]: `"256KiB"`, `"1MiB"`, `"1 MB"`).
pub(crate) fn parse_size(v: &toml::Value) -> Result<u64, String> {
    match v {
        toml::Value::Integer(n) if *n > 0 => Ok(*n as u64),
        toml::Value::String(s) => opskit::units::parse_size(s).map_err(|e| e.to_string()),
        _ => Err(format!(
            "invalid size {v}: expected bytes or a string as \"256KiB\""
        )),
    }
}

/// A 64-bit identifier as hex, `0x` optional, colons allowed, up to 16 digits: the one
/// identifier parser of both configurations ([`ib_verbs::ids::parse_id64`]).
pub fn parse_id64(text: &str) -> Result<u64, String> {
    ib_verbs::ids::parse_id64(text, false).ok_or_else(|| {
        format!(
            "invalid identifier {text:?}: expected 1 to 16 hex digits (\"0x\" and colons allowed)"
        )
    })
}

/// A node GUID derived from a name: a fixed locally-administered prefix and a hash.
fn derived_guid(name: &str) -> Guid {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    Guid(0x0253_5250_0000_0000 | (h & 0xffff_ffff))
}

impl HostConfig {
    /// A configuration with the given portals and every default (for the demo and tests).
    pub fn with_portals(name: &str, portals: Vec<PortalConfig>) -> HostConfig {
        HostConfig {
            name: name.to_owned(),
            node_guid: derived_guid(name),
            initiator_ext: 0,
            disks_dir: PathBuf::from(format!("/run/srp-host/{name}/disks")),
            control_socket: default_socket(name),
            control_group: None,
            state_dir: PathBuf::from(format!("/var/lib/srp-host/{name}")),
            registration: RegistrationMode::default(),
            driver: DriverModel::default(),
            provider: ProviderKind::Soft,
            queue_depth: 32,
            max_transfer: 256 << 10,
            max_luns: 16,
            cmd_timeout: Duration::from_secs(30),
            login_timeout: Duration::from_secs(10),
            sweep_interval: Duration::from_secs(5),
            login: LoginChoice::default(),
            rdma_cm_port: DEFAULT_RDMA_CM_PORT,
            timers: TransportTimers::default(),
            multipath: MpConfig::default(),
            portals,
            rules: None,
            source: None,
        }
    }

    /// Reads and validates `path`.
    pub fn from_file(path: &Path) -> Result<HostConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: path.display().to_string(),
            problems: vec![format!("cannot read: {e}")],
        })?;
        let mut c = HostConfig::from_str(&text, &path.display().to_string())?;
        c.source = Some(path.to_path_buf());
        Ok(c)
    }

    /// Parses and validates `text` (named `origin` in errors).
    pub fn from_str(text: &str, origin: &str) -> Result<HostConfig, ConfigError> {
        let fail = |problems| ConfigError {
            origin: origin.to_owned(),
            problems,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| fail(vec![e.to_string()]))?;
        let mut p = Vec::new();
        let h = raw.host;
        let name = h.name.unwrap_or_else(|| DEFAULT_NAME.to_owned());
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            p.push(format!("host.name {name:?}: 1 to 64 of A-Z a-z 0-9 . _ -"));
        }
        let mut c = HostConfig::with_portals(&name, Vec::new());
        if let Some(g) = h.node_guid {
            match parse_id64(&g) {
                Ok(0) => p.push("host.node_guid: must not be 0".into()),
                Ok(v) => c.node_guid = Guid(v),
                Err(e) => p.push(format!("host.node_guid: {e}")),
            }
        }
        if let Some(x) = h.initiator_ext {
            match parse_id64(&x) {
                Ok(v) => c.initiator_ext = v,
                Err(e) => p.push(format!("host.initiator_ext: {e}")),
            }
        }
        if let Some(d) = h.disks_dir {
            if d.is_absolute() {
                c.disks_dir = d;
            } else {
                p.push(format!("host.disks_dir {}: must be absolute", d.display()));
            }
        }
        if let Some(d) = h.state_dir {
            if d.is_absolute() {
                c.state_dir = d;
            } else {
                p.push(format!("host.state_dir {}: must be absolute", d.display()));
            }
        }
        if let Some(s) = h.control_socket {
            if !s.is_absolute() || s.as_os_str().len() > 107 {
                p.push(format!(
                    "host.control_socket {}: must be absolute and under 108 bytes",
                    s.display()
                ));
            } else {
                c.control_socket = s;
            }
        }
        if let Some(g) = h.control_group {
            let found = match g.parse::<u32>() {
                Ok(gid) => nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)),
                Err(_) => nix::unistd::Group::from_name(&g),
            };
            match found {
                Ok(Some(group)) => c.control_group = Some(group.gid.as_raw()),
                _ => p.push(format!(
                    "host.control_group {g:?}: no such group on this host (a group name or numeric ID)"
                )),
            }
        }
        match h.registration.as_deref() {
            None | Some("per-io") => {}
            Some("trust-target") => c.registration = RegistrationMode::TrustTarget,
            Some(o) => p.push(format!(
                "host.registration {o:?}: \"per-io\" or \"trust-target\""
            )),
        }
        let model = |key: &str, v: &Option<String>, p: &mut Vec<String>| {
            v.as_deref().and_then(|t| {
                let m = DriverModel::parse(t);
                if m.is_none() {
                    p.push(format!("{key} {t:?}: \"storport\" or \"iscsi-model\""));
                }
                m
            })
        };
        if let Some(m) = model("host.driver", &h.driver, &mut p) {
            c.driver = m;
        }
        let provider = |key: &str, v: &Option<String>, p: &mut Vec<String>| {
            v.as_deref().and_then(|t| {
                t.parse::<ProviderKind>()
                    .map_err(|e| p.push(format!("{key}: {e}")))
                    .ok()
            })
        };
        if let Some(k) = provider("host.provider", &h.provider, &mut p) {
            c.provider = k;
        }
        if let Some(q) = h.queue_depth {
            match u32::try_from(q) {
                Ok(v @ 1..=255) => c.queue_depth = v,
                _ => p.push(format!("host.queue_depth {q}: 1 to 255")),
            }
        }
        if let Some(m) = &h.max_transfer {
            match parse_size(m) {
                Ok(v) if (4096..=(8 << 20)).contains(&v) && v % 512 == 0 => {
                    c.max_transfer = v as u32
                }
                Ok(v) => p.push(format!(
                    "host.max_transfer {v}: 4 KiB to 8 MiB, a multiple of 512"
                )),
                Err(e) => p.push(format!("host.max_transfer: {e}")),
            }
        }
        if let Some(n) = h.max_luns {
            match u8::try_from(n) {
                Ok(v @ 1..=255) => c.max_luns = v,
                _ => p.push(format!("host.max_luns {n}: 1 to 255")),
            }
        }
        let mut dur = |key: &str, v: Option<String>, slot: &mut Duration| {
            if let Some(t) = v {
                match parse_duration(&t) {
                    Ok(d) if !d.is_zero() => *slot = d,
                    Ok(_) => p.push(format!("{key}: must not be 0")),
                    Err(e) => p.push(format!("{key}: {e}")),
                }
            }
        };
        dur("host.cmd_timeout", h.cmd_timeout, &mut c.cmd_timeout);
        dur("host.login_timeout", h.login_timeout, &mut c.login_timeout);
        dur(
            "host.sweep_interval",
            h.sweep_interval,
            &mut c.sweep_interval,
        );
        let choice = |key: &str, v: &Option<String>, p: &mut Vec<String>| {
            v.as_deref().and_then(|t| {
                let c = LoginChoice::parse(t);
                if c.is_none() {
                    p.push(format!("{key} {t:?}: \"ib-cm\", \"rdma-cm\" or \"auto\""));
                }
                c
            })
        };
        let port = |key: &str, v: Option<i64>, p: &mut Vec<String>| {
            v.and_then(|n| match u16::try_from(n) {
                Ok(v @ 1..) => Some(v),
                _ => {
                    p.push(format!("{key} {n}: 1 to 65535"));
                    None
                }
            })
        };
        if let Some(l) = choice("host.login", &h.login, &mut p) {
            c.login = l;
        }
        if let Some(r) = h.rules {
            if !r.is_absolute() {
                p.push(format!("host.rules {}: must be absolute", r.display()));
            } else {
                match crate::rules::Rules::from_file(&r) {
                    Ok(_) => c.rules = Some(r),
                    Err(problems) => {
                        p.extend(problems.into_iter().map(|e| format!("host.rules: {e}")))
                    }
                }
            }
        }
        if let Some(v) = port("host.rdma_cm_port", h.rdma_cm_port, &mut p) {
            c.rdma_cm_port = v;
        }
        let defaults = TransportTimers::default();
        let mut timer = |key: &str, v: Option<String>, default: Option<Duration>| match v.as_deref()
        {
            None => default,
            Some("off") => None,
            Some(t) => match parse_duration(t) {
                Ok(d) => Some(d),
                Err(e) => {
                    p.push(format!("timers.{key}: {e}"));
                    default
                }
            },
        };
        let t = raw.timers;
        let reconnect = timer(
            "reconnect_delay",
            t.reconnect_delay,
            defaults.reconnect_delay(),
        );
        let fast = timer("fast_io_fail", t.fast_io_fail, defaults.fast_io_fail());
        let loss = timer("dev_loss", t.dev_loss, defaults.dev_loss());
        match TransportTimers::new(reconnect, fast, loss) {
            Ok(v) => c.timers = v,
            Err(e) => p.push(format!("timers: {e}")),
        }
        let m = raw.multipath;
        if let Some(v) = &m.policy {
            let text = match v {
                toml::Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            match Policy::parse(&text) {
                Some(pol) => c.multipath.policy = pol,
                None => p.push(format!(
                    "multipath.policy {text:?}: failover-only, round-robin, round-robin-subset, \
                     least-queue-depth, weighted-paths, least-blocks, service-time (or 1..7)"
                )),
            }
        }
        if let Some(f) = m.failback {
            c.multipath.failback = f;
        }
        let mut mdur = |key: &str, v: Option<String>, slot: &mut Duration, zero_ok: bool| {
            if let Some(t) = v {
                match parse_duration(&t) {
                    Ok(d) if zero_ok || !d.is_zero() => *slot = d,
                    Ok(_) => p.push(format!("multipath.{key}: must not be 0")),
                    Err(e) => p.push(format!("multipath.{key}: {e}")),
                }
            }
        };
        mdur(
            "no_path_retry",
            m.no_path_retry,
            &mut c.multipath.no_path_retry,
            true,
        );
        mdur(
            "verify_period",
            m.verify_period,
            &mut c.multipath.verify_period,
            false,
        );
        mdur(
            "flap_window",
            m.flap_window,
            &mut c.multipath.damping.window,
            false,
        );
        mdur(
            "flap_hold",
            m.flap_hold,
            &mut c.multipath.damping.hold,
            false,
        );
        c.multipath.damping.max_hold = c.multipath.damping.max_hold.max(c.multipath.damping.hold);
        if let Some(n) = m.flap_failures {
            match usize::try_from(n) {
                Ok(v @ 1..=100) => c.multipath.damping.max_failures = v,
                _ => p.push(format!("multipath.flap_failures {n}: 1 to 100")),
            }
        }
        if raw.portal.is_empty() {
            p.push("no [[portal]]: nothing to log in to".into());
        }
        let mut locals = Vec::new();
        for (i, rp) in raw.portal.iter().enumerate() {
            let address = match rp.address.parse::<IpAddr>() {
                Ok(a) => a,
                Err(_) => {
                    p.push(format!(
                        "portal[{i}].address {:?}: not an IP address",
                        rp.address
                    ));
                    continue;
                }
            };
            let mut portal = PortalConfig {
                preferred: rp.preferred.unwrap_or(false),
                login: choice(&format!("portal[{i}].login"), &rp.login, &mut p).unwrap_or(c.login),
                rdma_cm_port: port(
                    &format!("portal[{i}].rdma_cm_port"),
                    rp.rdma_cm_port,
                    &mut p,
                )
                .unwrap_or(c.rdma_cm_port),
                driver: model(&format!("portal[{i}].driver"), &rp.driver, &mut p)
                    .unwrap_or(c.driver),
                provider: provider(&format!("portal[{i}].provider"), &rp.provider, &mut p)
                    .unwrap_or(c.provider),
                device: rp.device.clone(),
                ..PortalConfig::new(address)
            };
            let small = |key: &str, v: Option<i64>, min: u8, p: &mut Vec<String>| {
                v.and_then(|n| match u8::try_from(n) {
                    Ok(v) if v >= min => Some(v),
                    _ => {
                        p.push(format!("portal[{i}].{key} {n}: {min} to 255"));
                        None
                    }
                })
            };
            portal.device_port = small("device_port", rp.device_port, 1, &mut p);
            portal.gid_index = small("gid_index", rp.gid_index, 0, &mut p);
            let names_a_device =
                portal.device.is_some() || rp.device_port.is_some() || rp.gid_index.is_some();
            if names_a_device && portal.provider != ProviderKind::RdmaCore {
                p.push(format!(
                    "portal[{i}]: device, device_port and gid_index name an RDMA device: set \
                     provider = \"rdma-core\""
                ));
            }
            for (j, t) in rp.target.iter().enumerate() {
                match (parse_id64(&t.id_ext), parse_id64(&t.ioc_guid)) {
                    (Ok(id_ext), Ok(guid)) => portal.targets.push(StaticTarget {
                        id_ext,
                        ioc_guid: Guid(guid),
                    }),
                    (Err(e), _) => p.push(format!("portal[{i}].target[{j}].id_ext: {e}")),
                    (_, Err(e)) => p.push(format!("portal[{i}].target[{j}].ioc_guid: {e}")),
                }
            }
            if let Some(k) = &rp.partition {
                match k.parse::<ib_verbs::PKey>() {
                    Ok(v) => portal.partition = v,
                    Err(e) => p.push(format!("portal[{i}].partition: {e}")),
                }
            }
            if let Some(w) = rp.weight {
                match u32::try_from(w) {
                    Ok(v) => portal.weight = v,
                    Err(_) => p.push(format!("portal[{i}].weight {w}: 0 to 4294967295")),
                }
            }
            for l in &rp.local {
                match l.parse::<IpAddr>() {
                    Ok(a) if locals.contains(&a) => p.push(format!(
                        "portal[{i}].local {a}: listed twice (one channel per local address)"
                    )),
                    // Our soft HCA would bind the target's own UDP endpoint; an RDMA
                    // device reaches a target on its own address through the kernel's
                    // loopback (as Linux ib_srp does).
                    Ok(a) if a == address && portal.provider != ProviderKind::RdmaCore => {
                        p.push(format!("portal[{i}].local {a}: the portal's own address"))
                    }
                    Ok(a) => {
                        locals.push(a);
                        portal.local.push(a);
                    }
                    Err(_) => p.push(format!("portal[{i}].local {l:?}: not an IP address")),
                }
            }
            for g in &rp.iocs {
                match parse_id64(g) {
                    Ok(v) => portal.iocs.push(Guid(v)),
                    Err(e) => p.push(format!("portal[{i}].iocs: {e}")),
                }
            }
            c.portals.push(portal);
        }
        if p.is_empty() { Ok(c) } else { Err(fail(p)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rdma_core_portal_names_its_device_and_targets() {
        let c = HostConfig::from_str(
            r#"
[host]
provider = "rdma-core"
[[portal]]
address = "192.0.2.1"
local = ["192.0.2.1"]
device = "rxe0"
device_port = 1
gid_index = 1
[[portal.target]]
id_ext = "0x0002c90300c0ff01"
ioc_guid = "0002:c903:00c0:ff01"
[[portal]]
address = "192.0.2.9"
provider = "soft"
"#,
            "t.toml",
        )
        .expect("valid");
        let p = &c.portals[0];
        assert_eq!(p.provider, ProviderKind::RdmaCore);
        // A target on the host's own address: the kernel's loopback under rdma-core.
        assert_eq!(p.local, vec!["192.0.2.1".parse::<IpAddr>().expect("ip")]);
        assert_eq!(
            (p.device.as_deref(), p.device_port, p.gid_index),
            (Some("rxe0"), Some(1), Some(1))
        );
        assert_eq!(
            p.targets,
            vec![StaticTarget {
                id_ext: 0x0002_c903_00c0_ff01,
                ioc_guid: Guid(0x0002_c903_00c0_ff01),
            }]
        );
        assert_eq!(c.portals[1].provider, ProviderKind::Soft);
    }

    #[test]
    fn provider_mistakes_are_named_by_key() {
        let e = HostConfig::from_str(
            r#"
[host]
provider = "verbs"
[[portal]]
address = "192.0.2.1"
local = ["192.0.2.1"]
device = "rxe0"
[[portal.target]]
id_ext = "zz"
ioc_guid = "0x1"
"#,
            "t.toml",
        )
        .expect_err("invalid");
        let text = e.to_string();
        for want in [
            "host.provider",
            "portal[0].local 192.0.2.1: the portal's own address",
            "portal[0]: device, device_port and gid_index name an RDMA device",
            "id_ext",
        ] {
            assert!(text.contains(want), "{want} missing: {text}");
        }
    }

    #[test]
    fn a_full_file_parses() {
        let c = HostConfig::from_str(
            r#"
[host]
name = "h1"
node_guid = "0x0002c90300beef01"
registration = "trust-target"
driver = "iscsi-model"
state_dir = "/var/lib/srp-test/h1"
queue_depth = 16
max_transfer = "128KiB"
max_luns = 4
cmd_timeout = "20s"
sweep_interval = "500ms"
[timers]
reconnect_delay = "1s"
fast_io_fail = "3s"
dev_loss = "off"
[multipath]
policy = "least-queue-depth"
failback = false
no_path_retry = "2s"
flap_hold = "1s"
[[portal]]
address = "127.0.0.1"
local = ["127.0.0.2", "127.0.0.3"]
iocs = ["0002:c903:00a1:b401"]
preferred = true
weight = 3
partition = "0x8001"
driver = "storport"
[[portal]]
address = "127.0.0.4"
"#,
            "t.toml",
        )
        .expect("valid");
        assert_eq!(c.multipath.policy, Policy::LeastQueueDepth);
        assert!(!c.multipath.failback);
        assert_eq!(c.multipath.no_path_retry, Duration::from_secs(2));
        assert_eq!(c.multipath.damping.hold, Duration::from_secs(1));
        assert!(c.portals[0].preferred);
        assert_eq!(c.portals[0].weight, 3);
        assert_eq!(c.portals[0].partition, ib_verbs::PKey(0x8001));
        assert_eq!(c.name, "h1");
        assert_eq!(c.node_guid, Guid(0x0002_c903_00be_ef01));
        assert_eq!(c.registration, RegistrationMode::TrustTarget);
        assert_eq!(
            (c.queue_depth, c.max_transfer, c.max_luns),
            (16, 128 << 10, 4)
        );
        assert_eq!(c.sweep_interval, Duration::from_millis(500));
        assert_eq!(c.timers.dev_loss(), None);
        assert_eq!(c.portals[0].local.len(), 2);
        assert_eq!(c.portals[0].iocs, vec![Guid(0x0002_c903_00a1_b401)]);
        assert_eq!(c.control_socket, PathBuf::from("/run/srp-host/h1.sock"));
        assert_eq!(c.state_dir, PathBuf::from("/var/lib/srp-test/h1"));
        assert_eq!(c.driver, DriverModel::IscsiModel);
        assert_eq!(c.portals[0].driver, DriverModel::StorPort, "overridden");
        assert_eq!(c.portals[1].driver, DriverModel::IscsiModel, "the host's");
    }

    #[test]
    fn a_portal_partition_is_a_p_key() {
        let portal =
            |k: &str| format!("[[portal]]\naddress = \"127.0.0.1\"\npartition = \"{k}\"\n");
        let c = HostConfig::from_str(&portal("0xffff"), "h.toml").expect("valid");
        assert_eq!(c.portals[0].partition, ib_verbs::PKey::DEFAULT);
        for bad in ["0x8000", "zz", "0x18001"] {
            let e = HostConfig::from_str(&portal(bad), "h.toml").expect_err(bad);
            assert!(e.to_string().contains("portal[0].partition"), "{e}");
        }
        let plain =
            HostConfig::from_str("[[portal]]\naddress = \"127.0.0.1\"\n", "h.toml").expect("valid");
        assert_eq!(plain.portals[0].partition, ib_verbs::PKey::DEFAULT);
    }

    #[test]
    fn a_control_group_is_resolved_or_reported() {
        let portal = "[[portal]]\naddress = \"127.0.0.1\"\n";
        for g in ["root", "0"] {
            let text = format!("[host]\ncontrol_group = \"{g}\"\n{portal}");
            let c = HostConfig::from_str(&text, "h.toml").expect("root's group exists");
            assert_eq!(c.control_group, Some(0), "{g}");
        }
        let c = HostConfig::from_str(portal, "h.toml").expect("valid");
        assert_eq!(c.control_group, None);
        let text = format!("[host]\ncontrol_group = \"no-such-group-here\"\n{portal}");
        let e = HostConfig::from_str(&text, "h.toml").expect_err("unknown group");
        assert!(
            e.to_string()
                .contains("host.control_group \"no-such-group-here\": no such group"),
            "{e}"
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let e = HostConfig::from_str(
            r#"
[host]
queue_depth = 0
max_transfer = "3MB"
cmd_timeout = "soon"
registration = "yolo"
driver = "scsiport"
state_dir = "relative/dir"
[timers]
reconnect_delay = "off"
fast_io_fail = "off"
dev_loss = "off"
[multipath]
policy = "fastest"
flap_failures = 0
[[portal]]
address = "target.example"
[[portal]]
address = "127.0.0.1"
local = ["127.0.0.2", "127.0.0.2"]
"#,
            "bad.toml",
        )
        .expect_err("invalid");
        let all = e.to_string();
        for key in [
            "host.queue_depth",
            "host.max_transfer",
            "host.cmd_timeout",
            "host.registration",
            "host.driver \"scsiport\": \"storport\" or \"iscsi-model\"",
            "host.state_dir relative/dir: must be absolute",
            "timers:",
            "portal[0].address",
            "portal[1].local 127.0.0.2: listed twice",
            "multipath.policy",
            "multipath.flap_failures",
        ] {
            assert!(all.contains(key), "{key} missing from {all}");
        }
        assert!(HostConfig::from_str("", "empty").is_err(), "no portal");
        assert!(
            HostConfig::from_str("[host]\nfoo = 1\n", "x").is_err(),
            "unknown key"
        );
    }

    #[test]
    fn durations_and_ids() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("1.5s").is_err());
        assert_eq!(parse_id64("0x10"), Ok(16));
        assert!(parse_id64("0x").is_err());
        assert!(parse_id64("12345678901234567").is_err());
    }
}
