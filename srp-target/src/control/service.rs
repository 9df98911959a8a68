//! The control socket's target service: service messages ([`super::wire`]) to
//! [`ControlRequest`]s on a [`ControlHandle`], answers back to JSON. Runs on the control
//! server's connection threads; the loop answers between its turns. A RELOAD re-reads the
//! daemon's configuration file here, off the loop ([`ControlHandle::reload_from`]).

use super::handle::ControlHandle;
use super::model::{ControlError, ControlRequest};
use super::wire::{decode_request, encode_answer};
use access_layer::ctl::wire::{CtlStatus, ErrorReply, REPLY_BIT};
use access_layer::ctl::{CtlService, Reply, Request};
use std::path::PathBuf;

/// The target's control service over a running daemon's [`ControlHandle`].
#[derive(Debug)]
pub struct TargetService {
    handle: ControlHandle,
    /// The configuration file a RELOAD re-reads, if the daemon was started from one.
    config_path: Option<PathBuf>,
}

impl TargetService {
    /// The service of the daemon behind `handle`, started from the file `config_path`.
    pub fn new(handle: ControlHandle, config_path: Option<PathBuf>) -> TargetService {
        TargetService {
            handle,
            config_path,
        }
    }
}

impl CtlService for TargetService {
    fn handle(&self, req: &Request) -> Reply {
        let Request::Service { opcode, body } = req else {
            return Reply::Error(ErrorReply::new(CtlStatus::WrongSocket));
        };
        let (request, start) = match decode_request(*opcode, body) {
            Ok(r) => r,
            Err(status) => return Reply::Error(ErrorReply::new(status)),
        };
        let answer = match request {
            ControlRequest::Reload => match &self.config_path {
                Some(path) => self.handle.reload_from(path),
                None => Err(ControlError::NoConfigFile),
            },
            other => self.handle.call(other),
        };
        Reply::Service {
            opcode: opcode | REPLY_BIT,
            body: encode_answer(answer, start),
        }
    }
}
