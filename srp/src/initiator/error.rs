//! The one error enum of the initiator core: refused submissions, login failures, timer
//! configuration errors and the peer's protocol violations (each of which resets the channel).

use super::timers::PortState;
use crate::wire::login::LoginRejReason;
use crate::wire::{IuType, Tag, WireError};
use thiserror::Error;

/// Why the initiator core refused something or dropped the channel.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum InitiatorError {
    /// No credit, send slot or tag for the command and the wait queue is full (the port
    /// driver reports busy and retries later).
    #[error("busy: no credit and the wait queue holds {queued} commands")]
    Busy {
        /// Commands already waiting.
        queued: usize,
    },
    /// The command cannot be encoded (CDB too long, descriptor inconsistent).
    #[error("command cannot be encoded: {0}")]
    BadCommand(WireError),
    /// An operation that needs a logged-in channel was asked for in another state.
    #[error("not possible in port state {0:?}")]
    WrongState(PortState),
    /// The target refused the login with SRP_LOGIN_REJ.
    #[error("login rejected: {reason:?} (retryable: {retryable})")]
    LoginRejected {
        /// The SRP reason code.
        reason: LoginRejReason,
        /// Whether trying again later (or with the formats the target listed) can succeed.
        retryable: bool,
    },
    /// The LOGIN_RSP grants something unusable.
    #[error("login response unusable: {0}")]
    BadLoginResponse(&'static str),
    /// The login reply did not parse.
    #[error("login reply malformed: {0}")]
    MalformedLogin(WireError),
    /// No login reply within the login timeout, or the CM connection failed.
    #[error("login failed at the connection layer")]
    ConnectFailed,
    /// A received IU did not parse (the channel is reset).
    #[error("malformed IU from the target: {0}")]
    MalformedIu(WireError),
    /// A response carried a tag no request of ours holds (stale generation, forged, or
    /// never issued); the channel is reset.
    #[error("response for unknown or stale tag {0}")]
    UnknownTag(Tag),
    /// The target sent an IU an initiator never receives on a live channel.
    #[error("unexpected IU {0:?} from the target")]
    UnexpectedIu(IuType),
    /// The transport timers are inconsistent (Linux `srp_tmo_valid`).
    #[error("invalid transport timers: {0}")]
    InvalidTimers(&'static str),
    /// An illegal port state transition was asked for.
    #[error("illegal port transition from {from:?} on {event:?}")]
    IllegalTransition {
        /// The state the port was in.
        from: PortState,
        /// What happened.
        event: super::timers::PortEvent,
    },
    /// The driver reported more completed sends than were posted.
    #[error("send completion without a posted send")]
    SendAccounting,
}
