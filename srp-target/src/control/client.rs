//! [`TargetClient`]: srpctl's side of the target's control socket. Blocking; lists are
//! fetched page by page until the total is reached.

use super::model::{DisableMode, IocStatus, LunStatus, PortStatus, SessionStatus};
use super::wire::{
    Done, Fixed, LIST_IOCS, LIST_LUNS, LIST_PORTS, LIST_SESSIONS, ListPage, Page, SET_IOC, SET_LUN,
    SET_PORT, SetIoc, SetLun, SetPort,
};
use access_layer::ctl::wire::CtlStatus;
use access_layer::ctl::{CtlClient, CtlError, WireError};
use std::path::Path;
use wirekit::WireRepr;

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
    /// A reply did not parse.
    #[error("bad reply: {0}")]
    Wire(#[from] WireError),
    /// The daemon has no object of that name.
    #[error("the target has no {what} named {name:?}")]
    NotFound {
        /// "IOC" or "port".
        what: &'static str,
        /// The name asked for.
        name: String,
    },
    /// The list changed size while it was being read page by page.
    #[error("the list changed while being read; try again")]
    Changed,
}

fn encode<'a>(repr: &impl WireRepr<'a, Error = WireError>) -> Result<Vec<u8>, WireError> {
    let mut body = vec![0; repr.buffer_len()];
    repr.emit(&mut body)?;
    Ok(body)
}

impl TargetClient {
    /// Connects to the socket at `path`.
    pub fn connect(path: impl AsRef<Path>) -> Result<TargetClient, ClientError> {
        Ok(TargetClient {
            ctl: CtlClient::connect(path)?,
        })
    }

    fn list<T: Fixed>(&mut self, opcode: u16) -> Result<Vec<T>, ClientError> {
        let mut all = Vec::new();
        loop {
            let start = u32::try_from(all.len()).map_err(|_| ClientError::Changed)?;
            let body = self
                .ctl
                .call_service(opcode, encode(&ListPage { start })?)?;
            let page = Page::<T>::parse(&body)?;
            let done = page.entries.is_empty();
            all.extend(page.entries);
            if all.len() >= page.total as usize {
                return Ok(all);
            }
            if done {
                return Err(ClientError::Changed);
            }
        }
    }

    /// The IOCs.
    pub fn iocs(&mut self) -> Result<Vec<IocStatus>, ClientError> {
        self.list(LIST_IOCS)
    }

    /// The HCA ports.
    pub fn ports(&mut self) -> Result<Vec<PortStatus>, ClientError> {
        self.list(LIST_PORTS)
    }

    /// The LUNs with their counters.
    pub fn luns(&mut self) -> Result<Vec<LunStatus>, ClientError> {
        self.list(LIST_LUNS)
    }

    /// The live sessions with their counters.
    pub fn sessions(&mut self) -> Result<Vec<SessionStatus>, ClientError> {
        self.list(LIST_SESSIONS)
    }

    fn switch(
        &mut self,
        opcode: u16,
        body: Vec<u8>,
        what: &'static str,
        name: &str,
    ) -> Result<u32, ClientError> {
        match self.ctl.call_service(opcode, body) {
            Ok(b) => Ok(Done::parse(&b)?.sessions_ended),
            Err(e) if e.status() == Some(CtlStatus::NotFound) => Err(ClientError::NotFound {
                what,
                name: name.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Enables or disables IOC `name`; returns how many sessions were ended.
    pub fn set_ioc(
        &mut self,
        name: &str,
        enabled: bool,
        mode: DisableMode,
    ) -> Result<u32, ClientError> {
        let body = encode(&SetIoc {
            name: name.to_string(),
            enabled,
            mode,
        })?;
        self.switch(SET_IOC, body, "IOC", name)
    }

    /// Brings port `name` up or down; returns how many sessions were ended.
    pub fn set_port(&mut self, name: &str, enabled: bool) -> Result<u32, ClientError> {
        let body = encode(&SetPort {
            name: name.to_string(),
            enabled,
        })?;
        self.switch(SET_PORT, body, "port", name)
    }

    /// Clears LUN `name`'s latched flush error; returns whether one was latched.
    pub fn clear_flush_error(&mut self, name: &str) -> Result<bool, ClientError> {
        let body = encode(&SetLun {
            name: name.to_string(),
            clear_flush_error: true,
        })?;
        Ok(self.switch(SET_LUN, body, "LUN", name)? != 0)
    }
}
