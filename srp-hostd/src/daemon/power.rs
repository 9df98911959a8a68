//! Suspend and resume of the host's SRP stack (`srpctl host power suspend|resume`), in the
//! original stack's order: each session's adapter is a power domain — the SRP device (the
//! StorPort adapter or the iSCSI-model driver) a child of its HCA — so a suspend drains
//! and logs out every driver before its HCA's ports go inactive, and a resume activates
//! each HCA before its driver logs in again. I/O that reaches a suspended path is held by
//! its port and runs after the resume; multipath sees suspended paths as up, not failed,
//! so nothing fails over and nothing is lost.
//!
//! While suspended a login request is refused with the reason, and a session counts as
//! `suspended` (`Session::state`), not lost: the sweeper neither drops nor rescans it, and
//! since every IOC keeps its session, a sweep logs in to nothing new. Suspends and resumes
//! are serialized with logins and logouts.

use super::{Shared, lock};
use crate::control::{HostAnswer, HostControlError};
use crate::session::Session;
use std::sync::Arc;
use std::time::Duration;

/// How long one session's transition may take (a suspend drains what the driver holds).
const TRANSITION: Duration = Duration::from_secs(30);

impl Shared {
    /// Suspends (`suspend`) or resumes every session; each one's outcome, one line each.
    pub(super) fn power(&self, suspend: bool) -> Result<HostAnswer, HostControlError> {
        let _serial = lock(&self.logins);
        let sessions: Vec<Arc<Session>> = {
            let mut st = lock(&self.state);
            if st.stopping {
                return Err(HostControlError::Stopping);
            }
            if st.suspended == suspend {
                let now = if suspend { "suspended" } else { "running" };
                return Err(HostControlError::AlreadyPowered(now.into()));
            }
            if suspend {
                // First: the sweeper must not take a suspending session for a lost one.
                st.suspended = true;
            }
            st.sessions.values().cloned().collect()
        };
        let (verb, done) = if suspend {
            ("suspend", "suspended")
        } else {
            ("resume", "resumed")
        };
        tracing::info!(sessions = sessions.len(), "power: {verb} of the SRP stack");
        let mut lines = Vec::new();
        let mut failures = Vec::new();
        for s in &sessions {
            let what = format!(
                "session {} ({} to {} from {})",
                s.id(),
                s.port().model().as_str(),
                s.service().portal,
                s.local()
            );
            let r = if suspend {
                s.port().suspend(TRANSITION)
            } else {
                s.port().resume(TRANSITION)
            };
            match r {
                Ok(()) => {
                    tracing::info!(session = s.id(), "power: {done}");
                    lines.push(format!("{what}: {done}"));
                }
                Err(e) => {
                    tracing::warn!(session = s.id(), %e, "power: {verb} failed");
                    failures.push(format!("{what}: {e}"));
                }
            }
        }
        if !suspend {
            lock(&self.state).suspended = false;
            // The sweeper checks the sessions again now.
            self.wake.notify_all();
        }
        if failures.is_empty() {
            Ok(HostAnswer::Powered { sessions: lines })
        } else {
            Err(HostControlError::Failed(format!(
                "the host is {done}, but not every session followed: {}",
                failures.join("; ")
            )))
        }
    }
}
