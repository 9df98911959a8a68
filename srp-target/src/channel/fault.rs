//! Protocol faults: what makes the target log a channel out, and the SRP_T_LOGOUT reason
//! each one is reported with (SRP r16a table 14).

use srp::channel::ChannelError;
use srp::wire::WireError;
use srp::wire::logout::TLogoutReason;
use thiserror::Error;

/// A broken protocol on one channel: send SRP_T_LOGOUT with [`Fault::reason`], then
/// disconnect that channel. Other channels and initiators are not affected.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Fault {
    /// An IU longer than the negotiated initiator-to-target IU length.
    #[error("IU of {len} bytes exceeds the negotiated {max}")]
    IuTooLong {
        /// Received length.
        len: usize,
        /// Negotiated maximum.
        max: u32,
    },
    /// An IU that does not parse (short, or a field out of range).
    #[error("malformed IU: {0}")]
    Malformed(WireError),
    /// An IU type the initiator may not send on a live channel.
    #[error("IU type {0:#04x} is not valid from an initiator on a live channel")]
    WrongIuType(u8),
    /// A response to a request we never sent (CRED_RSP, AER_RSP).
    #[error("spurious {0} with no request outstanding")]
    SpuriousResponse(&'static str),
    /// A descriptor format that was not negotiated.
    #[error("{0}")]
    Descriptor(ChannelError),
    /// A request without a credit.
    #[error("{0}")]
    CreditOverrun(ChannelError),
    /// A request reusing a live tag.
    #[error("{0}")]
    DuplicateTag(ChannelError),
    /// Something arrived on a channel that is closing or closed.
    #[error("IU received on a {0} channel")]
    NotLive(&'static str),
}

impl Fault {
    /// The T_LOGOUT reason. Faults r16a has no code for (a bad field, credit overrun,
    /// duplicate tag) are sent as "no reason specified"; the target's log has the detail.
    pub fn reason(&self) -> TLogoutReason {
        match self {
            Fault::IuTooLong { .. } | Fault::Malformed(WireError::Truncated { .. }) => {
                TLogoutReason::InvalidIuLength
            }
            Fault::WrongIuType(_) => TLogoutReason::InvalidIuType,
            Fault::SpuriousResponse(_) => TLogoutReason::SpuriousResponse,
            Fault::Descriptor(ChannelError::FormatNotNegotiated {
                direction: "data-in",
                ..
            }) => TLogoutReason::UnsupportedDataInFormat,
            Fault::Descriptor(_) => TLogoutReason::UnsupportedDataOutFormat,
            Fault::Malformed(_)
            | Fault::CreditOverrun(_)
            | Fault::DuplicateTag(_)
            | Fault::NotLive(_) => TLogoutReason::NoReason,
        }
    }
}
