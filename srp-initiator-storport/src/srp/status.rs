//! What the adapter reports to a host daemon ([`AdapterStatus`]), recorded by the DPC as it
//! drains the channel core's events: successful logins, channel losses, the last login
//! failure or loss cause as text, and what the last login negotiated.
//!
//! Contract: [`StatusLog::record`] runs at dispatch level under the adapter lock and only
//! takes the status lock (innermost, held for a few assignments); the reader takes the
//! status lock alone.

use access_layer::mad::cm::CmRejReason;
use srp::initiator::{Event, LossCause, PortState};

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
}

impl StatusLog {
    /// The login's CM REQ was rejected below SRP with `reason`.
    pub(crate) fn note_cm_reject(&mut self, reason: CmRejReason) {
        self.cm_reject = Some(reason);
    }

    /// Notes `ev` if it is a login, a login failure or a loss.
    pub(crate) fn record(&mut self, ev: &Event) {
        match ev {
            Event::LoggedIn(neg) => {
                self.cm_reject = None;
                self.logins += 1;
                self.negotiated = Some((neg.max_it_iu_len, neg.window));
            }
            Event::LoginFailed { error, advice } => {
                let mut text = format!("login failed: {error}");
                if let Some(r) = self.cm_reject.take() {
                    text.push_str(&format!(" (CM REJ reason {r:?})"));
                }
                if let Some(a) = advice {
                    text.push_str(&format!(" (advice: {a:?})"));
                }
                self.last_error = Some(text);
            }
            Event::ChannelLost(cause) => {
                self.losses += 1;
                self.last_error = Some(format!("channel lost: {}", loss_text(cause)));
            }
            _ => {}
        }
    }

    /// The report, with the core's `state`.
    pub(crate) fn snapshot(&self, state: PortState) -> AdapterStatus {
        AdapterStatus {
            state: Some(state),
            logins: self.logins,
            losses: self.losses,
            last_error: self.last_error.clone(),
            negotiated: self.negotiated,
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
    use srp::initiator::InitiatorError;

    #[test]
    fn failures_and_losses_are_text_and_counted() {
        let mut log = StatusLog::default();
        log.record(&Event::LoginFailed {
            error: InitiatorError::ConnectFailed,
            advice: None,
        });
        log.record(&Event::ChannelLost(LossCause::Escalation));
        let s = log.snapshot(PortState::Blocked);
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
        let s = log.snapshot(PortState::New);
        assert_eq!(
            s.last_error.as_deref(),
            Some(
                "login failed: login failed at the connection layer (CM REJ reason InvalidServiceId)"
            )
        );
    }
}
