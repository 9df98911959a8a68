//! What an operator asks a running host daemon, and what it answers, as plain data.
//!
//! The same values travel on the control socket as JSON bodies (see `wire`), so every type
//! here is `serde`. Identifiers that are 64-bit GUIDs travel as `0x`-prefixed hex strings
//! (JSON numbers lose precision beyond 2^53).

use serde::{Deserialize, Serialize};
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
}

/// One disk: a LUN of a session, exposed as a block file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskInfo {
    /// The block file's name in the disks directory.
    pub name: String,
    /// The block file's full path.
    pub path: String,
    /// The session it is reached through.
    pub session: u32,
    /// The LUN number.
    pub lun: u32,
    /// The LU's identity from VPD page 0x83 (`naa.…`, `eui.…`, `t10.…`), as multipath keys on.
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
    /// Reads completed (calls of the block device, any size).
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Flushes completed (SYNCHRONIZE CACHE).
    pub flushes: u64,
    /// Calls that failed.
    pub errors: u64,
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
    /// Log out of a session; its disks disappear.
    Logout {
        /// The session's number.
        session: u32,
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
        /// The block files removed with it.
        disks_removed: Vec<String>,
    },
}

/// Why the daemon refused or failed a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum HostControlError {
    /// No session of that number.
    #[error("no session {0}")]
    NoSuchSession(u32),
    /// Nothing to log in to: the sweep found no (matching, not yet logged-in) SRP IOC.
    #[error("nothing to log in to: {0}")]
    NothingToLogIn(String),
    /// Every local address for that portal is in use (one channel per local address).
    #[error("no free local address to reach {0} from (one channel per local address)")]
    NoLocalAddress(IpAddr),
    /// The portal did not answer Device Management, or the login failed.
    #[error("{0}")]
    Failed(String),
    /// A request the daemon cannot parse.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The daemon is stopping.
    #[error("the host daemon is stopping")]
    Stopping,
}

/// What the control service calls: the running daemon (or anything answering as one).
pub trait HostControl: Send + Sync {
    /// Answers one request; may take as long as a login (bounded by the login timeout).
    fn call(&self, request: HostRequest) -> Result<HostAnswer, HostControlError>;
}
