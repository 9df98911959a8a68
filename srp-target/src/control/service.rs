//! The control socket's target service: service messages ([`super::wire`]) to
//! [`ControlRequest`]s on a [`ControlHandle`], answers back to bytes. Runs on the control
//! server's connection threads; the loop answers between its turns.

use super::handle::ControlHandle;
use super::model::{ControlAnswer, ControlError, ControlRequest};
use super::wire::{
    Done, LIST_IOCS, LIST_LUNS, LIST_PORTS, LIST_SESSIONS, ListPage, Page, SET_IOC, SET_LUN,
    SET_PORT, SetIoc, SetLun, SetPort,
};
use access_layer::ctl::wire::{CtlStatus, ErrorReply, REPLY_BIT};
use access_layer::ctl::{CtlService, Reply, Request};
use wirekit::WireRepr;

/// The target's control service over a running daemon's [`ControlHandle`].
#[derive(Debug)]
pub struct TargetService {
    handle: ControlHandle,
}

impl TargetService {
    /// The service of the daemon behind `handle`.
    pub fn new(handle: ControlHandle) -> TargetService {
        TargetService { handle }
    }
}

fn error(status: CtlStatus) -> Reply {
    Reply::Error(ErrorReply::new(status))
}

fn encode<'a>(
    opcode: u16,
    repr: &impl WireRepr<'a, Error = access_layer::ctl::WireError>,
) -> Reply {
    let mut body = vec![0; repr.buffer_len()];
    match repr.emit(&mut body) {
        Ok(_) => Reply::Service {
            opcode: opcode | REPLY_BIT,
            body,
        },
        // A name or count that does not fit the format: the daemon's, not the client's.
        Err(_) => error(CtlStatus::Internal),
    }
}

impl CtlService for TargetService {
    fn handle(&self, req: &Request) -> Reply {
        let Request::Service { opcode, body } = req else {
            return error(CtlStatus::WrongSocket);
        };
        let opcode = *opcode;
        let (request, start) = match opcode {
            LIST_IOCS | LIST_PORTS | LIST_LUNS | LIST_SESSIONS => {
                let Ok(page) = ListPage::parse(body) else {
                    return error(CtlStatus::Malformed);
                };
                let r = match opcode {
                    LIST_IOCS => ControlRequest::ListIocs,
                    LIST_PORTS => ControlRequest::ListPorts,
                    LIST_LUNS => ControlRequest::ListLuns,
                    _ => ControlRequest::ListSessions,
                };
                (r, page.start)
            }
            SET_IOC => match SetIoc::parse(body) {
                Ok(s) => (
                    ControlRequest::SetIoc {
                        name: s.name,
                        enabled: s.enabled,
                        mode: s.mode,
                    },
                    0,
                ),
                Err(_) => return error(CtlStatus::Malformed),
            },
            SET_PORT => match SetPort::parse(body) {
                Ok(s) => (
                    ControlRequest::SetPort {
                        name: s.name,
                        enabled: s.enabled,
                    },
                    0,
                ),
                Err(_) => return error(CtlStatus::Malformed),
            },
            SET_LUN => match SetLun::parse(body) {
                Ok(SetLun {
                    name,
                    clear_flush_error: true,
                }) => (ControlRequest::ClearFlushError { name }, 0),
                // Nothing asked: a list of what a LUN can be told grows here.
                Ok(_) | Err(_) => return error(CtlStatus::Malformed),
            },
            _ => return error(CtlStatus::UnknownOpcode),
        };
        match self.handle.call(request) {
            Ok(ControlAnswer::Iocs(v)) => encode(opcode, &Page::of(v, start)),
            Ok(ControlAnswer::Ports(v)) => encode(opcode, &Page::of(v, start)),
            Ok(ControlAnswer::Luns(v)) => encode(opcode, &Page::of(v, start)),
            Ok(ControlAnswer::Sessions(v)) => encode(opcode, &Page::of(v, start)),
            Ok(ControlAnswer::Done { sessions_ended }) => encode(opcode, &Done { sessions_ended }),
            Err(
                ControlError::NoSuchIoc(_)
                | ControlError::NoSuchPort(_)
                | ControlError::NoSuchLun(_),
            ) => error(CtlStatus::NotFound),
            Err(ControlError::Stopped | ControlError::Timeout(_)) => error(CtlStatus::Internal),
        }
    }
}
