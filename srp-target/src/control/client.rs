//! [`TargetClient`]: srpctl's side of the target's control socket. Blocking; lists are
//! fetched page by page until an empty page ([`CtlClient::list_json`]).

use super::model::{
    ControlAnswer, ControlError, ControlRequest, DisableMode, IocStatus, LunStatus, PortStatus,
    ReloadReport, SessionStatus,
};
use super::wire::encode_request;
use access_layer::ctl::client::REPLY_TIMEOUT;
use access_layer::ctl::{CtlClient, CtlError};
use std::path::Path;
use std::time::Duration;

/// How long a reload may take (new LUNs are opened, sessions logged out).
pub const RELOAD_REPLY: Duration = Duration::from_secs(60);

/// A connection to a running target's control socket.
#[derive(Debug)]
pub struct TargetClient {
    ctl: CtlClient,
}

/// Why a control request failed, in the operator's terms.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket or the protocol failed.
    #[error("{0}")]
    Ctl(#[from] CtlError),
    /// The daemon has no object of that name.
    #[error("the target has no {what} named {name:?}")]
    NotFound {
        /// "IOC", "port" or "LUN".
        what: &'static str,
        /// The name asked for.
        name: String,
    },
    /// The daemon refused or failed the request; its reason.
    #[error("{0}")]
    Refused(ControlError),
    /// A reply that answers another request.
    #[error("bad reply from the target: {0}")]
    BadReply(String),
}

impl From<ControlError> for ClientError {
    fn from(e: ControlError) -> ClientError {
        match e {
            ControlError::NoSuchIoc(name) => ClientError::NotFound { what: "IOC", name },
            ControlError::NoSuchPort(name) => ClientError::NotFound { what: "port", name },
            ControlError::NoSuchLun(name) => ClientError::NotFound { what: "LUN", name },
            other => ClientError::Refused(other),
        }
    }
}

impl TargetClient {
    /// Connects to the socket at `path`.
    pub fn connect(path: impl AsRef<Path>) -> Result<TargetClient, ClientError> {
        Ok(TargetClient {
            ctl: CtlClient::connect(path)?,
        })
    }

    fn opcode(request: &ControlRequest) -> Result<u16, ClientError> {
        encode_request(request, 0)
            .map(|(op, _)| op)
            .ok_or_else(|| ClientError::BadReply("an in-process request".into()))
    }

    fn list<T>(
        &mut self,
        request: ControlRequest,
        entries: fn(ControlAnswer) -> Result<Vec<T>, ControlAnswer>,
    ) -> Result<Vec<T>, ClientError> {
        let opcode = Self::opcode(&request)?;
        match self
            .ctl
            .list_json::<T, ControlAnswer, ControlError>(opcode, entries)
        {
            Ok(Ok(all)) => Ok(all),
            Ok(Err(e)) => Err(e.into()),
            Err(CtlError::BadJson(why)) => Err(ClientError::BadReply(why)),
            Err(e) => Err(e.into()),
        }
    }

    fn call(
        &mut self,
        request: &ControlRequest,
        wait: Duration,
    ) -> Result<ControlAnswer, ClientError> {
        let (opcode, body) = encode_request(request, 0)
            .ok_or_else(|| ClientError::BadReply("an in-process request".into()))?;
        let reply = self.ctl.call_service_within(opcode, body, wait)?;
        access_layer::ctl::json::parse_reply::<ControlAnswer, ControlError>(&reply)
            .map_err(|e| ClientError::BadReply(e.to_string()))?
            .map_err(ClientError::from)
    }

    /// The IOCs.
    pub fn iocs(&mut self) -> Result<Vec<IocStatus>, ClientError> {
        self.list(ControlRequest::ListIocs, |a| match a {
            ControlAnswer::Iocs(v) => Ok(v),
            other => Err(other),
        })
    }

    /// The HCA ports.
    pub fn ports(&mut self) -> Result<Vec<PortStatus>, ClientError> {
        self.list(ControlRequest::ListPorts, |a| match a {
            ControlAnswer::Ports(v) => Ok(v),
            other => Err(other),
        })
    }

    /// The LUNs with their counters.
    pub fn luns(&mut self) -> Result<Vec<LunStatus>, ClientError> {
        self.list(ControlRequest::ListLuns, |a| match a {
            ControlAnswer::Luns(v) => Ok(v),
            other => Err(other),
        })
    }

    /// The live sessions with their counters.
    pub fn sessions(&mut self) -> Result<Vec<SessionStatus>, ClientError> {
        self.list(ControlRequest::ListSessions, |a| match a {
            ControlAnswer::Sessions(v) => Ok(v),
            other => Err(other),
        })
    }

    /// The running configuration as TOML text.
    pub fn running_config(&mut self) -> Result<String, ClientError> {
        let lines = self.list(ControlRequest::RunningConfig, |a| match a {
            ControlAnswer::Config(v) => Ok(v),
            other => Err(other),
        })?;
        Ok(lines.iter().map(|l| format!("{l}\n")).collect())
    }

    /// The metrics, Prometheus text.
    pub fn metrics(&mut self) -> Result<String, ClientError> {
        let lines = self.list(ControlRequest::Metrics, |a| match a {
            ControlAnswer::Metrics(v) => Ok(v),
            other => Err(other),
        })?;
        Ok(lines.iter().map(|l| format!("{l}\n")).collect())
    }

    /// Has the daemon re-read its configuration file and apply it: what changed, or every
    /// reason it cannot (nothing changed then).
    pub fn reload(&mut self) -> Result<ReloadReport, ClientError> {
        match self.call(&ControlRequest::Reload, RELOAD_REPLY)? {
            ControlAnswer::Reloaded(r) => Ok(r),
            _ => Err(ClientError::BadReply("an answer to another request".into())),
        }
    }

    fn switch(&mut self, request: &ControlRequest) -> Result<u32, ClientError> {
        match self.call(request, REPLY_TIMEOUT)? {
            ControlAnswer::Done { sessions_ended } => Ok(sessions_ended),
            _ => Err(ClientError::BadReply("an answer to another request".into())),
        }
    }

    /// Enables or disables IOC `name`; returns how many sessions were ended.
    pub fn set_ioc(
        &mut self,
        name: &str,
        enabled: bool,
        mode: DisableMode,
    ) -> Result<u32, ClientError> {
        self.switch(&ControlRequest::SetIoc {
            name: name.to_string(),
            enabled,
            mode,
        })
    }

    /// Brings port `name` up or down; returns how many sessions were ended.
    pub fn set_port(&mut self, name: &str, enabled: bool) -> Result<u32, ClientError> {
        self.switch(&ControlRequest::SetPort {
            name: name.to_string(),
            enabled,
        })
    }

    /// Clears LUN `name`'s latched flush error; returns whether one was latched.
    pub fn clear_flush_error(&mut self, name: &str) -> Result<bool, ClientError> {
        Ok(self.switch(&ControlRequest::ClearFlushError {
            name: name.to_string(),
        })? != 0)
    }
}
