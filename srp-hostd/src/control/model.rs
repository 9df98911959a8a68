//! What an operator asks a running host daemon, and what it answers, as plain data.
//!
//! The same values travel on the control socket as JSON bodies (see `wire`), so every type
//! here is `serde`. Identifiers that are 64-bit GUIDs travel as `0x`-prefixed hex strings
//! (JSON numbers lose precision beyond 2^53).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// One login: a channel from a local port to an IOC's SRP service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session's number within this daemon (never reused while it runs).
    pub id: u32,
    /// The target portal's address.
    pub portal: IpAddr,
    /// The local address the channel runs from.
    pub local: IpAddr,
    /// The IOC's GUID, `0x`-prefixed hex.
    pub ioc_guid: String,
    /// The IOC's IDString as Device Management reported it (empty if unknown).
    pub ioc_name: String,
    /// The SRP target port's identifier extension, `0x`-prefixed hex.
    pub id_ext: String,
    /// The CM service ID, `0x`-prefixed hex.
    pub service_id: String,
    /// `logging-in`, `running`, `blocked` (reconnecting, I/O held), `fail-fast` (reconnecting,
    /// I/O failing), `lost` (device loss expired; the session is being removed) or `failed`
    /// (the first login failed).
    pub state: String,
    /// Successful logins, the first included (more than one: it reconnected).
    pub logins: u64,
    /// Channel losses seen.
    pub losses: u64,
    /// The last login failure or loss cause, if any.
    pub last_error: Option<String>,
    /// SRBs in the miniport now.
    pub outstanding: u32,
    /// The block files of this session's LUNs.
    pub disks: Vec<String>,
    /// The login form that logged in: `ib-cm` or `rdma-cm`.
    #[serde(default)]
    pub login: String,
    /// The driver model the session runs under: `storport` or `iscsi-model`.
    #[serde(default)]
    pub driver: String,
    /// The session's port counters by name, as its provider counts them: packets, and on
    /// the software HCA drops by reason (`icrc_errors`, `unknown_qp`, `pkey_mismatch`,
    /// `wrong_peer`, `wrong_state`, `malformed`, …), NAKs sent and received,
    /// retransmits, and `dropped` (their sum).
    #[serde(default)]
    pub hca: BTreeMap<String, u64>,
    /// The provider, device and port the session runs on (`soft soft:10.0.0.2:4791 port
    /// 1`, `rdma-core rxe0 port 1 gid 1`). Absent from an older daemon's answer: empty.
    #[serde(default)]
    pub provider: String,
    /// How the target's access to this host's memory is fenced: `per-io` (each I/O's
    /// buffer registered for that I/O alone and invalidated when it ends), or a weaker
    /// mode named as such (`trust-target`: all of memory, always). Absent from an older
    /// daemon's answer: empty.
    #[serde(default)]
    pub fencing: String,
    /// What the session's bus and device resets did (a command timeout's last step, or a
    /// cluster challenge's HwResetBus). Absent from an older daemon's answer: all zero.
    #[serde(default)]
    pub resets: ResetInfo,
}

/// A session's resets (`srp_initiator_storport::srp::ResetCounts`, shared by both driver
/// models: the iSCSI model's bus reset is a channel reset, counted as `escalated`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResetInfo {
    /// Reset sequences started (HwResetBus and RESET_DEVICE on a live channel).
    pub sequences: u64,
    /// LOGICAL UNIT RESETs the target answered FUNCTION COMPLETE.
    pub lun_resets: u64,
    /// LOGICAL UNIT RESETs the target refused.
    pub refused: u64,
    /// Resets done as a channel reset (a reset unanswered, the channel down, or the
    /// driver model's bus reset).
    pub escalated: u64,
}

impl From<srp_initiator_storport::srp::ResetCounts> for ResetInfo {
    fn from(c: srp_initiator_storport::srp::ResetCounts) -> Self {
        ResetInfo {
            sequences: c.sequences,
            lun_resets: c.lun_resets,
            refused: c.refused,
            escalated: c.escalated,
        }
    }
}

/// A port's counters as the control socket carries them.
pub fn hca_counters(counters: &ib_verbs::PortCounters) -> BTreeMap<String, u64> {
    counters.named().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// One path of a multipath disk: the LUN as one session reaches it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathInfo {
    /// The session (I_T nexus) the path runs over; `srpctl path fail|restore` name it.
    pub session: u32,
    /// The LUN number through that session.
    pub lun: u32,
    /// The IOC's GUID, `0x`-prefixed hex.
    pub ioc_guid: String,
    /// The IOC's IDString.
    pub ioc_name: String,
    /// The target portal.
    pub portal: IpAddr,
    /// The local address.
    pub local: IpAddr,
    /// `active`, `standby` (usable, not chosen by the policy unless needed), `failed`
    /// (transport errors or its session is down; verified again before use), `damped`
    /// (failed too often: held down for a while) or `admin-down` (`srpctl path fail`).
    pub state: String,
    /// The ALUA state of the path's target port group, if the LU reports ALUA
    /// (`active/optimized`, `active/non-optimized`, `standby`, `unavailable`, …).
    pub alua: Option<String>,
    /// Whether the path is preferred (failover-only's active path, round robin with subset's
    /// primary set, the failback target).
    pub preferred: bool,
    /// Its weight under the weighted-paths policy (lower wins).
    pub weight: u32,
    /// I/Os on the path now.
    pub in_flight: u32,
    /// Reads completed on it.
    pub reads: u64,
    /// Writes completed on it.
    pub writes: u64,
    /// Bytes moved through it.
    pub bytes: u64,
    /// I/Os that failed on it (and were retried elsewhere, or surfaced).
    pub errors: u64,
    /// Times it was taken out of service.
    pub failures: u64,
    /// Datagrams its session's HCA port dropped (every reason; the session listing names
    /// them).
    #[serde(default)]
    pub hca_dropped: u64,
    /// Packets its session's HCA port sent again (RC go-back-N).
    #[serde(default)]
    pub retransmits: u64,
}

/// One disk: a logical unit (one VPD 0x83 identity) over all its paths, exposed as one
/// block file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskInfo {
    /// The block file's name in the disks directory (the identity).
    pub name: String,
    /// The block file's full path (empty when the daemon exposes no files).
    pub path: String,
    /// The LU's identity from VPD page 0x83 (`naa.…`, `eui.…`, `t10.…`).
    pub identity: String,
    /// INQUIRY vendor identification.
    pub vendor: String,
    /// INQUIRY product identification.
    pub product: String,
    /// INQUIRY product revision level.
    pub revision: String,
    /// Logical block length in bytes.
    pub block_size: u32,
    /// Capacity in logical blocks.
    pub blocks: u64,
    /// The load-balance policy (`failover-only`, `round-robin`, `round-robin-subset`,
    /// `least-queue-depth`, `weighted-paths`, `least-blocks`, `service-time`).
    pub policy: String,
    /// I/Os waiting for a usable path (queue-if-no-path), now.
    pub queued: u32,
    /// Reads completed (calls of the block device, any size).
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Flushes completed (SYNCHRONIZE CACHE on every usable path).
    pub flushes: u64,
    /// Calls that failed (reported to the disk's user).
    pub errors: u64,
    /// I/Os retried on another path after a transport failure.
    pub failovers: u64,
    /// Latency of completed reads, writes and flushes (the successful try on its path).
    #[serde(default)]
    pub latency: DiskLatency,
    /// Its paths.
    pub paths: Vec<PathInfo>,
}

/// A disk's latency histograms ([`opskit::metrics::Histogram`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiskLatency {
    /// Reads.
    pub read: opskit::metrics::Histogram,
    /// Writes.
    pub write: opskit::metrics::Histogram,
    /// Flushes.
    pub flush: opskit::metrics::Histogram,
}

/// An SRP target port a sweep found (the MS iSCSI initiator's `MSiSCSIInitiator_TargetClass`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// The portal it was found at.
    pub portal: IpAddr,
    /// The IOC's GUID.
    pub ioc_guid: String,
    /// The IOC's IDString.
    pub ioc_name: String,
    /// The target port's identifier extension.
    pub id_ext: String,
    /// Its CM service ID.
    pub service_id: String,
    /// The sessions logged in to it.
    pub sessions: Vec<u32>,
}

/// A portal the daemon knows (`MSiSCSIInitiator_SendTargetPortalClass`): configured, or
/// named by a login.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortalInfo {
    /// The target port's address.
    pub address: IpAddr,
    /// In the configuration file (else only named by a login).
    pub configured: bool,
    /// Its configured local addresses.
    pub local: Vec<IpAddr>,
    /// The driver model its logins run under.
    pub driver: String,
    /// Its login form (`ib-cm`, `rdma-cm`, `auto`).
    pub login: String,
    /// What its last sweep found: `None` before the first, else the number of SRP
    /// services or why it failed.
    pub last_sweep: Option<Result<u32, String>>,
    /// How long ago, in seconds.
    pub swept_secs_ago: Option<u64>,
}

/// Whom to log in to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginSpec {
    /// The target portal.
    pub portal: IpAddr,
    /// The local address to log in from (default: a free one of the portal's configured
    /// local addresses, or the address the kernel routes to the portal from).
    pub local: Option<IpAddr>,
    /// Only this IOC (GUID, `0x`-prefixed hex or plain 16 hex digits); default: every IOC
    /// with an SRP service not logged in to yet.
    pub ioc_guid: Option<String>,
    /// Keep it: the daemon records the login and establishes it again at every start
    /// (and every sweep while it is down), as the iSCSI initiator's persistent logins.
    #[serde(default)]
    pub persistent: bool,
    /// The driver model for its sessions (`storport` or `iscsi-model`); default: the
    /// portal's, else the host's.
    #[serde(default)]
    pub driver: Option<String>,
}

impl LoginSpec {
    /// A login to every SRP IOC at `portal` from a free local address, not persistent,
    /// under the configured driver model.
    pub fn to(portal: IpAddr) -> LoginSpec {
        LoginSpec {
            portal,
            local: None,
            ioc_guid: None,
            persistent: false,
            driver: None,
        }
    }

    /// Whether two specs name the same login (persistence aside).
    pub fn same_login(&self, other: &LoginSpec) -> bool {
        self.portal == other.portal
            && self.local == other.local
            && self.ioc_guid == other.ioc_guid
            && self.driver == other.driver
    }
}

/// A request to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostRequest {
    /// Every session.
    Sessions,
    /// Every disk.
    Disks,
    /// Sweep a portal and log in to its IOCs (all, or one).
    Login(LoginSpec),
    /// Log out of a session; its paths go (a disk with no path left disappears).
    Logout {
        /// The session's number.
        session: u32,
    },
    /// Set a disk's load-balance policy.
    SetPolicy {
        /// The disk's name (or identity).
        disk: String,
        /// The policy's name (see [`DiskInfo::policy`]).
        policy: String,
    },
    /// Take a path (a session, for every disk it carries) out of service, or return it.
    SetPath {
        /// The session.
        session: u32,
        /// `false`: administratively down (no new I/O; in-flight I/O completes); `true`:
        /// back in service after a successful path verify.
        enabled: bool,
    },
    /// List the persistent logins.
    PersistentLogins,
    /// Forget persistent login `index` (its sessions stay until logged out).
    RemovePersistent {
        /// Its index in the list.
        index: u32,
    },
    /// List the SRP targets the sweeps found.
    Targets,
    /// List the portals.
    Portals,
    /// Re-read the configuration file and take it (`daemon/reload.rs`).
    Reload,
    /// Power the host's SRP stack down (`suspend`: every session's driver drained and
    /// logged out, then its HCA) or up (`!suspend`: each HCA, then its driver, which logs in
    /// again); I/O that arrives while down is held and runs after the resume.
    Power {
        /// Down (`true`) or up.
        suspend: bool,
    },
}

/// The daemon's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostAnswer {
    /// For [`HostRequest::Sessions`].
    Sessions(Vec<SessionInfo>),
    /// For [`HostRequest::Disks`].
    Disks(Vec<DiskInfo>),
    /// For [`HostRequest::Login`]: the sessions created (each already logged in and scanned).
    LoggedIn(Vec<SessionInfo>),
    /// For [`HostRequest::Logout`].
    LoggedOut {
        /// The block files removed with it (disks it was the last path of).
        disks_removed: Vec<String>,
    },
    /// For [`HostRequest::SetPolicy`] and [`HostRequest::SetPath`]: the disks affected.
    Done {
        /// Their names.
        disks: Vec<String>,
    },
    /// The persistent logins, in the order they were added.
    Persistent(Vec<LoginSpec>),
    /// The persistent login removed.
    Forgotten(LoginSpec),
    /// The SRP targets found, by portal.
    Targets(Vec<TargetInfo>),
    /// The portals.
    Portals(Vec<PortalInfo>),
    /// For [`HostRequest::Reload`]: what changed, one line each.
    Reloaded {
        /// The changes.
        changes: Vec<String>,
    },
    /// For [`HostRequest::Power`]: each session's transition, one line each.
    Powered {
        /// The lines.
        sessions: Vec<String>,
    },
}

/// Why the daemon refused or failed a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum HostControlError {
    /// No session of that number.
    #[error("no session {0}")]
    NoSuchSession(u32),
    /// No disk of that name or identity.
    #[error("no disk {0:?}")]
    NoSuchDisk(String),
    /// Not a policy name.
    #[error(
        "unknown policy {0:?}: failover-only, round-robin, round-robin-subset, least-queue-depth, weighted-paths, least-blocks or service-time"
    )]
    NoSuchPolicy(String),
    /// Nothing to log in to: the sweep found no (matching, not yet logged-in) SRP IOC.
    #[error("nothing to log in to: {0}")]
    NothingToLogIn(String),
    /// Every local address for that portal is in use (one channel per local address).
    #[error("no free local address to reach {0} from (one channel per local address)")]
    NoLocalAddress(IpAddr),
    /// The portal did not answer Device Management, or the login failed.
    #[error("{0}")]
    Failed(String),
    /// No persistent login with that index.
    #[error("no persistent login {0}")]
    NoSuchPersistent(u32),
    /// A request the daemon cannot parse.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The daemon is stopping.
    #[error("the host daemon is stopping")]
    Stopping,
    /// The host's SRP stack is powered down: no login until it resumes.
    #[error("the host is suspended: `srpctl host power resume` first")]
    Suspended,
    /// A power request that asks for the state the host is in already.
    #[error("the host is {0} already")]
    AlreadyPowered(String),
}

/// What the control service calls: the running daemon (or anything answering as one).
pub trait HostControl: Send + Sync {
    /// Answers one request; may take as long as a login (bounded by the login timeout).
    fn call(&self, request: HostRequest) -> Result<HostAnswer, HostControlError>;
}
