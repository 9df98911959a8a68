//! [`HostClient`]: srpctl's side of the host daemon's control socket. Blocking; lists are
//! fetched page by page until an empty page ([`CtlClient::list_json`]).
//!
//! A list (and the connection's version negotiation) is answered within
//! [`access_layer::ctl::client::REPLY_TIMEOUT`]; LOGIN and LOGOUT wait up to
//! [`SLOW_REPLY`] (a Device Management sweep, then a login and a LUN scan per IOC), and so
//! does SET_PATH (returning a path to service verifies it first: a TEST UNIT READY bounded
//! by the command timeout).

use super::model::{
    DiskInfo, HostAnswer, HostControlError, HostRequest, LoginSpec, PortalInfo, SessionInfo,
    TargetInfo,
};
use super::wire::{decode_answer, encode_request};
use access_layer::ctl::client::REPLY_TIMEOUT as REPLY;
use access_layer::ctl::{CtlClient, CtlError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a login, a logout or a path switch may take.
pub const SLOW_REPLY: Duration = Duration::from_secs(180);

/// A connection to a running host daemon's control socket.
#[derive(Debug)]
pub struct HostClient {
    ctl: CtlClient,
}

/// Why a control request failed, in the operator's terms.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be reached (or did not speak the control protocol).
    #[error(
        "cannot reach the host daemon's control socket {} ({error}); is the host daemon \
         running? (srpctl host run -c host.toml)",
        path.display()
    )]
    Connect {
        /// The socket's path.
        path: PathBuf,
        /// What failed.
        error: CtlError,
    },
    /// The socket or the control protocol failed after connecting (including the daemon
    /// refusing a request it cannot parse).
    #[error("{0}")]
    Protocol(#[from] CtlError),
    /// A reply body did not parse, or answers another request.
    #[error("bad reply from the host daemon: {0}")]
    BadReply(String),
    /// The daemon refused or failed the request; its reason.
    #[error("{0}")]
    Refused(HostControlError),
}

impl HostClient {
    /// Connects to the socket at `path` and negotiates the version.
    pub fn connect(path: impl AsRef<Path>) -> Result<HostClient, ClientError> {
        let path = path.as_ref();
        CtlClient::connect(path)
            .map(|ctl| HostClient { ctl })
            .map_err(|error| ClientError::Connect {
                path: path.to_path_buf(),
                error,
            })
    }

    /// Sends `request` (for a list, its page from `start`) and returns the daemon's answer.
    fn call(
        &mut self,
        request: &HostRequest,
        start: u32,
        wait: Duration,
    ) -> Result<HostAnswer, ClientError> {
        let (opcode, body) =
            encode_request(request, start).map_err(|e| ClientError::BadReply(e.to_string()))?;
        let reply = self.ctl.call_service_within(opcode, body, wait)?;
        decode_answer(&reply)
            .map_err(|e| ClientError::BadReply(e.to_string()))?
            .map_err(ClientError::Refused)
    }

    /// Every entry of a list, page by page until an empty page.
    fn list<T>(
        &mut self,
        request: &HostRequest,
        entries: fn(HostAnswer) -> Result<Vec<T>, HostAnswer>,
    ) -> Result<Vec<T>, ClientError> {
        let (opcode, _) =
            encode_request(request, 0).map_err(|e| ClientError::BadReply(e.to_string()))?;
        match self
            .ctl
            .list_json::<T, HostAnswer, HostControlError>(opcode, entries)
        {
            Ok(Ok(all)) => Ok(all),
            Ok(Err(e)) => Err(ClientError::Refused(e)),
            Err(CtlError::BadJson(why)) => Err(ClientError::BadReply(why)),
            Err(e) => Err(e.into()),
        }
    }

    /// Every session.
    pub fn sessions(&mut self) -> Result<Vec<SessionInfo>, ClientError> {
        self.list(&HostRequest::Sessions, |a| match a {
            HostAnswer::Sessions(v) => Ok(v),
            other => Err(other),
        })
    }

    /// Every disk.
    pub fn disks(&mut self) -> Result<Vec<DiskInfo>, ClientError> {
        self.list(&HostRequest::Disks, |a| match a {
            HostAnswer::Disks(v) => Ok(v),
            other => Err(other),
        })
    }

    /// Sweeps a portal and logs in to its IOCs (all, or the one `spec` names); returns the
    /// sessions created. Waits up to [`SLOW_REPLY`].
    pub fn login(&mut self, spec: LoginSpec) -> Result<Vec<SessionInfo>, ClientError> {
        match self.call(&HostRequest::Login(spec), 0, SLOW_REPLY)? {
            HostAnswer::LoggedIn(v) => Ok(v),
            other => Err(unexpected(&other)),
        }
    }

    /// Logs out of session `session`; returns the block files removed with it. Waits up to
    /// [`SLOW_REPLY`].
    pub fn logout(&mut self, session: u32) -> Result<Vec<String>, ClientError> {
        match self.call(&HostRequest::Logout { session }, 0, SLOW_REPLY)? {
            HostAnswer::LoggedOut { disks_removed } => Ok(disks_removed),
            other => Err(unexpected(&other)),
        }
    }

    /// Sets disk `disk`'s (name or identity) load-balance policy to `policy` (a name as
    /// [`DiskInfo::policy`] lists them); returns the disks affected.
    pub fn set_policy(&mut self, disk: &str, policy: &str) -> Result<Vec<String>, ClientError> {
        let request = HostRequest::SetPolicy {
            disk: disk.to_string(),
            policy: policy.to_string(),
        };
        match self.call(&request, 0, REPLY)? {
            HostAnswer::Done { disks } => Ok(disks),
            other => Err(unexpected(&other)),
        }
    }

    /// Takes the path of session `session` (for every disk it carries) out of service
    /// (`enabled == false`: administratively down, in-flight I/O completes) or returns it
    /// after a successful path verify; returns the disks affected. Waits up to
    /// [`SLOW_REPLY`].
    pub fn set_path(&mut self, session: u32, enabled: bool) -> Result<Vec<String>, ClientError> {
        match self.call(&HostRequest::SetPath { session, enabled }, 0, SLOW_REPLY)? {
            HostAnswer::Done { disks } => Ok(disks),
            other => Err(unexpected(&other)),
        }
    }

    /// The persistent logins, in the order they were added.
    pub fn persistent_logins(&mut self) -> Result<Vec<LoginSpec>, ClientError> {
        self.list(&HostRequest::PersistentLogins, |a| match a {
            HostAnswer::Persistent(v) => Ok(v),
            other => Err(other),
        })
    }

    /// The SRP targets the sweeps found.
    pub fn targets(&mut self) -> Result<Vec<TargetInfo>, ClientError> {
        self.list(&HostRequest::Targets, |a| match a {
            HostAnswer::Targets(v) => Ok(v),
            other => Err(other),
        })
    }

    /// The portals: configured, or named by a login.
    pub fn portals(&mut self) -> Result<Vec<PortalInfo>, ClientError> {
        self.list(&HostRequest::Portals, |a| match a {
            HostAnswer::Portals(v) => Ok(v),
            other => Err(other),
        })
    }

    /// Has the daemon re-read its configuration file and take it; what changed. Waits up
    /// to [`SLOW_REPLY`] (a new portal is swept at once).
    pub fn reload(&mut self) -> Result<Vec<String>, ClientError> {
        match self.call(&HostRequest::Reload, 0, SLOW_REPLY)? {
            HostAnswer::Reloaded { changes } => Ok(changes),
            other => Err(unexpected(&other)),
        }
    }

    /// Suspends (`suspend`) or resumes the host's SRP stack; each session's transition,
    /// one line each. Waits up to [`SLOW_REPLY`] (a suspend drains what each driver holds).
    pub fn power(&mut self, suspend: bool) -> Result<Vec<String>, ClientError> {
        match self.call(&HostRequest::Power { suspend }, 0, SLOW_REPLY)? {
            HostAnswer::Powered { sessions } => Ok(sessions),
            other => Err(unexpected(&other)),
        }
    }

    /// Forgets persistent login `index` (its sessions stay until logged out); returns it.
    pub fn forget_persistent(&mut self, index: u32) -> Result<LoginSpec, ClientError> {
        match self.call(&HostRequest::RemovePersistent { index }, 0, REPLY)? {
            HostAnswer::Forgotten(spec) => Ok(spec),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(answer: &HostAnswer) -> ClientError {
    let kind = match answer {
        HostAnswer::Sessions(_) => "Sessions",
        HostAnswer::Disks(_) => "Disks",
        HostAnswer::LoggedIn(_) => "LoggedIn",
        HostAnswer::LoggedOut { .. } => "LoggedOut",
        HostAnswer::Done { .. } => "Done",
        HostAnswer::Persistent(_) => "Persistent",
        HostAnswer::Forgotten(_) => "Forgotten",
        HostAnswer::Targets(_) => "Targets",
        HostAnswer::Portals(_) => "Portals",
        HostAnswer::Reloaded { .. } => "Reloaded",
        HostAnswer::Powered { .. } => "Powered",
    };
    ClientError::BadReply(format!("a {kind} answer to another request"))
}
