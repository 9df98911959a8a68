//! What the adapter reports to a host daemon ([`AdapterStatus`]), recorded by the DPC as it
//! drains the channel core's events: successful logins, channel losses, the last login
//! failure or loss cause as text, and what the last login negotiated. Once the adapter has
//! logged in, a login failure or a loss is logged at warning level when its text differs
//! from the last one (a target that keeps refusing is logged once, not at every attempt),
//! a login after failures at info; before, whoever started the adapter reports.
//!
//! Contract: [`StatusLog::record`] runs at dispatch level under the adapter lock and only
//! takes the status lock (innermost, held for a few assignments); the reader takes the
//! status lock alone.
#[allow(unused_imports)]
use crate::prelude::*;

use access_layer::mad::cm::CmRejReason;
use ib_verbs::PortCounters;
use srp::initiator::{Event, InitiatorError, LossCause, PortState};

/// The adapter's state as a host daemon displays it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdapterStatus {
    /// The channel core's port state (`None` before HwFindAdapter).
    pub state: Option<PortState>,
    /// Successful logins, re-logins included.
    pub logins: u64,
    /// Channels lost after a successful login.
    pub losses: u64,
    /// The last login failure or channel loss, human-readable; kept after a later
    /// successful login (the cause of the last outage), `None` if there was none.
    pub last_error: Option<String>,
    /// What the last successful login negotiated: (max_it_iu_len, the request limit the
    /// target granted, i.e. the command window).
    pub negotiated: Option<(u32, u32)>,
    /// How the last login failure ended, if the last attempt failed.
    pub last_failure: Option<LoginFailure>,
    /// The login form the adapter sends (`ib-cm` or `rdma-cm`).
    pub login_via: &'static str,
    /// The provider, device and port the adapter runs on (`soft soft:10.0.0.2:4791 port
    /// 1`, `rdma-core rxe0 port 1 gid 1`).
    pub device: String,
    /// How the target's access to the host's memory is fenced
    /// (`srp::initiator::registration::Fencing`).
    pub fencing: &'static str,
    /// The adapter's port counters as its provider counts them: packets, and on the
    /// software HCA drops by reason, NAKs, retransmits.
    pub hca: PortCounters,
}

/// How a login attempt failed, for a caller deciding whether another form could work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginFailure {
    /// The CM REQ was rejected below SRP (no SRP_LOGIN_REJ): an unknown service ID, no
    /// listener, no resources. Another login form may be accepted.
    CmRejected(CmRejReason),
    /// The target refused the login with SRP_LOGIN_REJ: the form is understood.
    LoginRejected,
    /// No answer within the login timeout (or the REQ could not be sent).
    NoAnswer,
    /// The login response was unusable or malformed.
    BadResponse,
}

/// The counters behind [`AdapterStatus`], under the adapter's status lock.
#[derive(Debug, Default)]
pub(crate) struct StatusLog {
    logins: u64,
    losses: u64,
    last_error: Option<String>,
    negotiated: Option<(u32, u32)>,
    /// A CM REJ without an SRP_LOGIN_REJ, named in the login failure it causes.
    cm_reject: Option<CmRejReason>,
    /// The login's CM REQ went unanswered (the CM gave up after its retries).
    cm_timeout: bool,
    last_failure: Option<LoginFailure>,
    /// What was last logged at warning level (logged again only when it changes).
    last_logged: Option<String>,
    /// Who the adapter logs in to, for log lines.
    target: String,
}

impl StatusLog {
    /// An empty log for the adapter logging in to `target` (named in its log lines).
    pub(crate) fn new(target: String) -> Self {
        StatusLog {
            target,
            ..StatusLog::default()
        }
    }

    /// The login's CM REQ was rejected below SRP with `reason`.
    pub(crate) fn note_cm_reject(&mut self, reason: CmRejReason) {
        self.cm_reject = Some(reason);
    }

    /// The login's CM REQ got no answer within the CM's retries.
    pub(crate) fn note_cm_timeout(&mut self) {
        self.cm_timeout = true;
    }

    /// Notes `ev` if it is a login, a login failure or a loss.
    pub(crate) fn record(&mut self, ev: &Event) {
        match ev {
            Event::LoggedIn(neg) => {
                self.cm_reject = None;
                self.cm_timeout = false;
                self.last_failure = None;
                self.logins += 1;
                self.negotiated = Some((neg.max_it_iu_len, neg.window));
                if self.last_logged.take().is_some() {
                    tracing::info!(target = %self.target, "logged in again");
                }
            }
            Event::LoginFailed { error, advice } => {
                let mut text = format!("login failed: {error}");
                let cm = self.cm_reject.take();
                if core::mem::take(&mut self.cm_timeout) {
                    text.push_str(" (no answer to the CM REQ)");
                }
                if let Some(r) = cm {
                    text.push_str(&format!(" (CM REJ reason {} {r:?})", u16::from(r)));
                }
                if let Some(a) = advice {
                    text.push_str(&format!(" (advice: {a:?})"));
                }
                self.last_failure = Some(match (error, cm) {
                    (_, Some(r)) => LoginFailure::CmRejected(r),
                    (InitiatorError::LoginRejected { .. }, None) => LoginFailure::LoginRejected,
                    (InitiatorError::ConnectFailed, None) => LoginFailure::NoAnswer,
                    _ => LoginFailure::BadResponse,
                });
                self.warn_once(&text);
                self.last_error = Some(text);
            }
            Event::ChannelLost(cause) => {
                self.losses += 1;
                let text = format!("channel lost: {}", loss_text(cause));
                self.warn_once(&text);
                self.last_error = Some(text);
            }
            _ => {}
        }
    }

    /// Logs `text` at warning level unless it is what was logged last. Before the first
    /// login the caller that started the adapter reports failures (a host daemon trying
    /// forms and sweeping), so they go to debug here.
    fn warn_once(&mut self, text: &str) {
        if self.logins == 0 {
            tracing::debug!(target = %self.target, "{text}");
        } else if self.last_logged.as_deref() != Some(text) {
            tracing::warn!(target = %self.target, "{text}");
            self.last_logged = Some(text.to_owned());
        }
    }

    /// The report, with the core's `state`.
    pub(crate) fn snapshot(
        &self,
        state: PortState,
        login_via: &'static str,
        device: String,
        fencing: &'static str,
        hca: PortCounters,
    ) -> AdapterStatus {
        AdapterStatus {
            state: Some(state),
            logins: self.logins,
            losses: self.losses,
            last_error: self.last_error.clone(),
            negotiated: self.negotiated,
            last_failure: self.last_failure,
            login_via,
            device,
            fencing,
            hca,
        }
    }
}

fn loss_text(cause: &LossCause) -> String {
    match cause {
        LossCause::Disconnected => "disconnected (QP error, DREQ or CM failure)".into(),
        LossCause::TargetLogout(r) => format!("target logout: {}", r.description()),
        LossCause::Protocol(e) => format!("protocol error: {e}"),
        LossCause::Escalation => "error handling escalated to a channel reset".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_losses_are_text_and_counted() {
        let mut log = StatusLog::default();
        log.record(&Event::LoginFailed {
            error: InitiatorError::ConnectFailed,
            advice: None,
        });
        log.record(&Event::ChannelLost(LossCause::Escalation));
        let s = log.snapshot(
            PortState::Blocked,
            "ib-cm",
            String::new(),
            "per-io",
            PortCounters::default(),
        );
        assert_eq!(s.state, Some(PortState::Blocked));
        assert_eq!((s.logins, s.losses), (0, 1));
        assert_eq!(
            s.last_error.as_deref(),
            Some("channel lost: error handling escalated to a channel reset")
        );
        assert_eq!(s.negotiated, None);
    }

    #[test]
    fn a_cm_reject_is_named_in_the_login_failure_it_causes() {
        let mut log = StatusLog::default();
        log.note_cm_reject(CmRejReason::InvalidServiceId);
        log.record(&Event::LoginFailed {
            error: InitiatorError::ConnectFailed,
            advice: None,
        });
        let s = log.snapshot(
            PortState::New,
            "ib-cm",
            String::new(),
            "per-io",
            PortCounters::default(),
        );
        assert_eq!(
            s.last_error.as_deref(),
            Some(
                "login failed: login failed at the connection layer (CM REJ reason 8 InvalidServiceId)"
            )
        );
        assert_eq!(
            s.last_failure,
            Some(LoginFailure::CmRejected(CmRejReason::InvalidServiceId))
        );
    }
}
