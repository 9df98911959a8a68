//! The daemon's channel bounds at login ([`crate::config::ChannelGuards`]): a login is
//! refused, with INSUFFICIENT RESOURCES and the reason logged, when accepting it would
//! exceed the channels allowed in all, from its address, or still unconfirmed. Whatever a
//! flood of REQs claims, the channels it can make — and the memory they hold — are bounded.

use crate::config::ChannelGuards;

/// The channels there are now, as the limits count them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Every channel.
    pub channels: usize,
    /// Channels whose logins came from the new login's address.
    pub from_address: usize,
    /// Channels whose REP is sent and not yet confirmed (no RTU).
    pub half_open: usize,
}

/// Why a new login must be refused, if it must.
pub fn refusal(g: &ChannelGuards, now: Census) -> Option<String> {
    if now.channels >= g.max_channels {
        return Some(format!(
            "the target has {} channels, its limit (max_channels)",
            now.channels
        ));
    }
    if now.from_address >= g.max_channels_per_address {
        return Some(format!(
            "{} channels already come from this address, its limit (max_channels_per_address)",
            now.from_address
        ));
    }
    if now.half_open >= g.max_half_open {
        return Some(format!(
            "{} logins are waiting for their initiators' RTU, the limit (max_half_open)",
            now.half_open
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_refuses_at_its_limit_and_names_itself() {
        let g = ChannelGuards {
            idle_probe: None,
            max_channels: 10,
            max_channels_per_address: 4,
            max_half_open: 2,
        };
        let c = |channels, from_address, half_open| Census {
            channels,
            from_address,
            half_open,
        };
        assert_eq!(refusal(&g, c(9, 3, 1)), None);
        assert!(refusal(&g, c(10, 0, 0)).is_some_and(|r| r.contains("max_channels)")));
        assert!(refusal(&g, c(5, 4, 0)).is_some_and(|r| r.contains("max_channels_per_address")));
        assert!(refusal(&g, c(5, 1, 2)).is_some_and(|r| r.contains("max_half_open")));
    }
}
