//! [`ControlHandle`]: the way into the daemon's loop. Requests travel on a channel the
//! loop drains once per turn (it owns every session, so it alone can answer); the caller
//! waits for the answer, bounded in time. In-process users (tests, drills) call it
//! directly; the control socket's service ([`super::service`]) calls it per request.

use super::model::{ControlAnswer, ControlError, ControlRequest};
use crate::config::TargetConfig;
use access_layer::verbs::Doorbell;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, SyncSender, sync_channel};
use std::time::Duration;

/// How long a request waits for the loop by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a reload waits for the loop (it opens new LUNs between two turns).
pub const RELOAD_TIMEOUT: Duration = Duration::from_secs(30);

/// One request in flight to the loop, with where its answer goes.
#[derive(Debug)]
pub struct Pending {
    /// The request.
    pub request: ControlRequest,
    /// Where the answer goes (the caller may have given up: sending can fail).
    pub reply: SyncSender<Result<ControlAnswer, ControlError>>,
}

/// A cloneable handle on a running daemon's loop.
#[derive(Clone, Debug)]
pub struct ControlHandle {
    tx: Sender<Pending>,
    timeout: Duration,
    /// The loop's doorbell, rung after each request (the loop waits on it when idle).
    bell: Option<Arc<Doorbell>>,
}

impl ControlHandle {
    /// A handle and the receiving end the loop drains.
    pub fn pair() -> (ControlHandle, Receiver<Pending>) {
        Self::pair_with_bell(None)
    }

    /// A handle that rings `bell` after each request, and the receiving end.
    pub fn pair_with_bell(bell: Option<Arc<Doorbell>>) -> (ControlHandle, Receiver<Pending>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (
            ControlHandle {
                tx,
                timeout: DEFAULT_TIMEOUT,
                bell,
            },
            rx,
        )
    }

    /// Asks the loop; waits at most the handle's timeout.
    pub fn call(&self, request: ControlRequest) -> Result<ControlAnswer, ControlError> {
        self.call_within(request, self.timeout)
    }

    /// Reads and validates the configuration file at `path` here, off the loop, then has
    /// the loop apply it ([`ControlRequest::Apply`], [`crate::reload`]): the answer says
    /// what changed, or why nothing did (the file is not valid, or a change takes a
    /// restart). Warnings about the file are logged.
    pub fn reload_from(&self, path: &Path) -> Result<ControlAnswer, ControlError> {
        let loaded = TargetConfig::from_path(path)
            .map_err(|errors| ControlError::InvalidConfig(errors.to_string()))?;
        for w in &loaded.warnings {
            tracing::warn!(file = %path.display(), "reload: {w}");
        }
        self.call_within(
            ControlRequest::Apply(Box::new(loaded.config)),
            RELOAD_TIMEOUT,
        )
    }

    /// Asks the loop; waits at most `timeout`.
    pub fn call_within(
        &self,
        request: ControlRequest,
        timeout: Duration,
    ) -> Result<ControlAnswer, ControlError> {
        let (reply, answer) = sync_channel(1);
        self.tx
            .send(Pending { request, reply })
            .map_err(|_| ControlError::Stopped)?;
        if let Some(b) = &self.bell {
            b.ring();
        }
        match answer.recv_timeout(timeout) {
            Ok(a) => a,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(ControlError::Timeout(timeout)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(ControlError::Stopped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::model::ControlAnswer;

    #[test]
    fn answers_come_back_and_a_gone_loop_is_stopped() {
        let (h, rx) = ControlHandle::pair();
        let t = std::thread::spawn(move || {
            let p = rx.recv().expect("request");
            assert_eq!(p.request, ControlRequest::ListIocs);
            let _ = p.reply.send(Ok(ControlAnswer::Iocs(Vec::new())));
            // Then the loop goes away.
        });
        assert_eq!(
            h.call(ControlRequest::ListIocs),
            Ok(ControlAnswer::Iocs(vec![]))
        );
        t.join().expect("join");
        assert_eq!(h.call(ControlRequest::ListLuns), Err(ControlError::Stopped));
    }
}
