//! The lifetime of a target channel, as a transition table.
//!
//! `Connecting` (CM REP sent, RTU not yet seen) → `Live` → `Draining` (logout, fault or
//! disconnect: no new requests, outstanding ones finish or are dropped) → `Closed`.

use core::fmt;

/// Where a channel is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelState {
    /// Login accepted, CM RTU not yet received: IUs are parked.
    Connecting,
    /// Carrying requests.
    Live,
    /// Closing: nothing new is accepted; outstanding requests complete or are dropped.
    Draining,
    /// Gone: every resource may be released.
    Closed,
}

/// What happens to a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelEvent {
    /// CM RTU (or the first IU, which proves the initiator saw the REP).
    Rtu,
    /// SRP_I_LOGOUT, a T_LOGOUT we sent, CM DREQ, a QP error, or a new SINGLE login.
    Close,
    /// The last outstanding request finished.
    Drained,
}

use ChannelEvent as E;
use ChannelState as S;

/// Every allowed transition; anything else leaves the state unchanged and is reported.
const TRANSITIONS: &[(ChannelState, ChannelEvent, ChannelState)] = &[
    (S::Connecting, E::Rtu, S::Live),
    (S::Connecting, E::Close, S::Draining),
    (S::Live, E::Rtu, S::Live),
    (S::Live, E::Close, S::Draining),
    (S::Draining, E::Close, S::Draining),
    (S::Draining, E::Drained, S::Closed),
    (S::Closed, E::Close, S::Closed),
];

/// An event that has no transition from the current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadTransition {
    /// The state.
    pub from: ChannelState,
    /// The event.
    pub event: ChannelEvent,
}

impl fmt::Display for BadTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no transition from {:?} on {:?}", self.from, self.event)
    }
}

impl ChannelState {
    /// The state after `event`, or the refusal.
    pub fn next(self, event: ChannelEvent) -> Result<ChannelState, BadTransition> {
        TRANSITIONS
            .iter()
            .find(|(from, ev, _)| *from == self && *ev == event)
            .map(|(_, _, to)| *to)
            .ok_or(BadTransition { from: self, event })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_is_in_the_table_or_refused() {
        let states = [S::Connecting, S::Live, S::Draining, S::Closed];
        let events = [E::Rtu, E::Close, E::Drained];
        let mut allowed = 0;
        for s in states {
            for e in events {
                match s.next(e) {
                    Ok(_) => allowed += 1,
                    Err(b) => assert_eq!(b, BadTransition { from: s, event: e }),
                }
            }
        }
        assert_eq!(allowed, TRANSITIONS.len());
        assert_eq!(S::Connecting.next(E::Rtu), Ok(S::Live));
        assert_eq!(S::Live.next(E::Close), Ok(S::Draining));
        assert_eq!(S::Draining.next(E::Drained), Ok(S::Closed));
        assert!(S::Live.next(E::Drained).is_err());
        assert!(S::Closed.next(E::Rtu).is_err());
        assert_eq!(
            S::Closed.next(E::Rtu).map_err(|b| b.to_string()),
            Err("no transition from Closed on Rtu".into())
        );
    }
}
