//! The shadow of one target channel: what the driver has been told and what it may expect,
//! kept from the requests, responses and faults the core hands out, and compared with what
//! the core says of itself after every step.
//!
//! Credits are conserved: the initiator's credits, the requests in progress, the credits
//! owed by aborted requests and those spent on refused IUs always add up to the window.

use srp::wire::Tag;
use srp_target::channel::core::Pending;
use srp_target::channel::{ChannelState, TargetChannel};
use std::collections::{BTreeMap, BTreeSet};

/// What the channel must look like from outside.
#[derive(Debug)]
pub struct Model {
    /// The credit window granted at login.
    pub window: u32,
    /// Credits the initiator holds (granted by the login and every response since).
    pub credits: u32,
    /// Credits of aborted requests, not yet returned.
    pub owed: u32,
    /// Credits spent by IUs the channel refused after counting them (a duplicate tag): in
    /// progress forever, the channel being logged out.
    pub spent_on_faults: u32,
    /// Requests in progress, by tag.
    pub live: BTreeMap<Tag, Pending>,
    /// The tags handed to the driver in a request (the others are in progress only because
    /// the channel counted them before faulting).
    pub announced: BTreeSet<Tag>,
    /// SRP_CRED_REQs sent and not answered.
    pub target_requests: u32,
    /// Where the channel is.
    pub state: ChannelState,
    /// IUs received before the RTU, in order.
    pub parked: Vec<Vec<u8>>,
    /// A protocol fault logged the channel out.
    pub faulted: bool,
}

impl Model {
    /// A channel just accepted with `window` credits.
    pub fn new(window: u32) -> Model {
        Model {
            window,
            credits: window,
            owed: 0,
            spent_on_faults: 0,
            live: BTreeMap::new(),
            announced: BTreeSet::new(),
            target_requests: 0,
            state: ChannelState::Connecting,
            parked: Vec::new(),
            faulted: false,
        }
    }

    /// The driver got a request for `tag`: it spent a credit and its tag was free.
    pub fn admit(&mut self, tag: Tag, pending: Pending) {
        assert!(
            self.credits > 0,
            "request {tag:?} admitted without a credit"
        );
        assert!(
            !self.live.contains_key(&tag),
            "tag {tag:?} admitted while already in progress"
        );
        self.credits -= 1;
        self.live.insert(tag, pending);
        self.announced.insert(tag);
    }

    /// Tags the driver may answer, in order.
    pub fn announced(&self) -> Vec<Tag> {
        self.announced.iter().copied().collect()
    }

    /// A response for `tag` carried `delta` credits: its own and every one owed.
    pub fn answered(&mut self, tag: Tag, delta: u32) {
        assert!(self.live.remove(&tag).is_some());
        self.announced.remove(&tag);
        assert_eq!(
            delta,
            1 + self.owed,
            "REQUEST LIMIT DELTA of the response to {tag:?}"
        );
        self.credits += delta;
        self.owed = 0;
        self.drained();
    }

    /// SRP_I_LOGOUT, a T_LOGOUT sent, or a close: nothing new is accepted.
    pub fn close(&mut self) {
        self.state = match self.state {
            ChannelState::Connecting | ChannelState::Live | ChannelState::Draining => {
                ChannelState::Draining
            }
            ChannelState::Closed => ChannelState::Closed,
        };
    }

    /// What the core does after answering or dropping: a draining channel with nothing in
    /// progress is closed.
    pub fn drained(&mut self) {
        if self.state == ChannelState::Draining && self.live.is_empty() {
            self.state = ChannelState::Closed;
        }
    }

    /// Compares the core with the model.
    pub fn check(&self, ch: &TargetChannel) {
        assert_eq!(ch.state(), self.state, "channel state");
        assert_eq!(ch.outstanding(), self.live.len(), "requests in progress");
        for (tag, p) in &self.live {
            assert_eq!(ch.pending(*tag), Some(p), "state of tag {tag:?}");
        }
        assert!(self.announced.iter().all(|t| self.live.contains_key(t)));
        assert_eq!(ch.target_requests(), self.target_requests);
        assert!(self.target_requests <= 1, "one target request at a time");
        assert!(self.credits <= self.window, "credits beyond the window");
        let in_progress = u32::try_from(self.live.len()).unwrap_or(u32::MAX);
        assert_eq!(
            self.credits + in_progress + self.owed + self.spent_on_faults,
            self.window,
            "credits are conserved"
        );
        assert!(
            self.live.len() <= self.window as usize,
            "more requests in progress than the window"
        );
        if self.state == ChannelState::Closed {
            assert!(self.live.is_empty(), "closed with requests in progress");
        }
        if self.faulted {
            assert_ne!(self.state, ChannelState::Live, "a faulted channel is live");
        }
    }
}
