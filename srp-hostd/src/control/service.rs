//! The control socket's host service: service messages ([`super::wire`]) to [`HostRequest`](super::model::HostRequest)s on a
//! [`HostControl`], its answers back to JSON bodies. Runs on the control server's
//! connection threads; a login holds its connection's thread until the daemon answers.

use super::model::HostControl;
use super::wire::{decode_request, encode_answer};
use access_layer::ctl::wire::{CtlStatus, ErrorReply, REPLY_BIT};
use access_layer::ctl::{CtlService, Reply, Request};
use std::sync::Arc;

/// The host daemon's control service, over anything answering as the daemon.
pub struct HostService {
    control: Arc<dyn HostControl>,
}

impl std::fmt::Debug for HostService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostService").finish_non_exhaustive()
    }
}

impl HostService {
    /// The service of the daemon behind `control`.
    pub fn new(control: Arc<dyn HostControl>) -> HostService {
        HostService { control }
    }
}

fn error(status: CtlStatus) -> Reply {
    Reply::Error(ErrorReply::new(status))
}

impl CtlService for HostService {
    fn handle(&self, req: &Request) -> Reply {
        let Request::Service { opcode, body } = req else {
            // ListCas, OpenCa, QueryCa, QueryPort: a CA socket's requests.
            return error(CtlStatus::WrongSocket);
        };
        let (request, start) = match decode_request(*opcode, body) {
            Ok(r) => r,
            Err(status) => return error(status),
        };
        Reply::Service {
            opcode: *opcode | REPLY_BIT,
            body: encode_answer(self.control.call(request), start),
        }
    }
}
