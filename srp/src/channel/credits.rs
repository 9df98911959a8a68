//! Request-limit (credit) accounting, SRP r16a 5.4 and 6.x.
//!
//! The target grants the initiator a window of credits at login (LOGIN_RSP REQUEST LIMIT
//! DELTA); each SRP_CMD and SRP_TSK_MGMT spends one; every SRP_RSP (and SRP_CRED_REQ,
//! SRP_AER_REQ) gives some back. Responses to target requests (CRED_RSP, AER_RSP) and
//! I_LOGOUT cost nothing. A target whose window equals its posted receive buffers can
//! therefore never be overrun by a conforming initiator, and detects one that is not.

use super::ChannelError;

/// The target's view: how many credits the initiator holds, how many requests are in
/// progress, and how many credits are owed back without a response to carry them.
///
/// Invariant: `available + in_progress + owed == window`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetCredits {
    window: u32,
    available: u32,
    in_progress: u32,
    owed: u32,
}

impl TargetCredits {
    /// A channel granting `window` credits (the receive buffers posted for it). The initiator
    /// holds all of them after the LOGIN_RSP carrying [`TargetCredits::login_delta`].
    pub fn new(window: u32) -> TargetCredits {
        TargetCredits {
            window,
            available: window,
            in_progress: 0,
            owed: 0,
        }
    }

    /// REQUEST LIMIT DELTA for the LOGIN_RSP.
    pub fn login_delta(&self) -> u32 {
        self.window
    }

    /// The window granted at login.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// Credits the initiator holds as far as the target knows.
    pub fn available(&self) -> u32 {
        self.available
    }

    /// Requests received and not yet answered or dropped.
    pub fn in_progress(&self) -> u32 {
        self.in_progress
    }

    /// Counts a received SRP_CMD or SRP_TSK_MGMT. An overrun is not counted: the IU arrived
    /// in a receive buffer the initiator had no right to, and the channel should be logged
    /// out.
    pub fn on_request(&mut self) -> Result<(), ChannelError> {
        if self.available == 0 {
            return Err(ChannelError::CreditOverrun {
                window: self.window,
            });
        }
        self.available -= 1;
        self.in_progress += 1;
        Ok(())
    }

    /// Answers one in-progress request: returns the REQUEST LIMIT DELTA for its SRP_RSP,
    /// its own credit plus every credit owed (ib_srpt: `1 + xchg(req_lim_delta, 0)`).
    pub fn on_response(&mut self) -> Result<u32, ChannelError> {
        if self.in_progress == 0 {
            return Err(ChannelError::NoOutstandingRequest);
        }
        self.in_progress -= 1;
        let delta = 1 + self.owed;
        self.owed = 0;
        self.available += delta;
        Ok(delta)
    }

    /// Finishes one in-progress request that gets no SRP_RSP (e.g. aborted by a task
    /// management function): its credit rides on the next response or credit request.
    pub fn on_dropped(&mut self) -> Result<(), ChannelError> {
        if self.in_progress == 0 {
            return Err(ChannelError::NoOutstandingRequest);
        }
        self.in_progress -= 1;
        self.owed += 1;
        Ok(())
    }

    /// The REQUEST LIMIT DELTA for an SRP_CRED_REQ returning every owed credit, or `None`
    /// when nothing is owed. Use when owed credits would otherwise wait for a response that
    /// may never come (an idle channel whose last commands were aborted).
    pub fn take_owed(&mut self) -> Option<u32> {
        if self.owed == 0 {
            return None;
        }
        let delta = self.owed;
        self.owed = 0;
        self.available += delta;
        Some(delta)
    }
}

/// The initiator's view: its request limit, with one credit kept back for task management so
/// an abort can always be sent (as ib_srp's `__srp_get_tx_iu`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct InitiatorCredits {
    req_lim: u32,
    starved: u64,
}

/// What a request to send is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spend {
    /// An SRP_CMD: needs two credits in hand and spends one.
    Command,
    /// An SRP_TSK_MGMT: may spend the last credit.
    TaskManagement,
    /// A response to a target request (CRED_RSP, AER_RSP): free.
    Response,
}

impl InitiatorCredits {
    /// Credits from the LOGIN_RSP REQUEST LIMIT DELTA.
    pub fn new(login_delta: u32) -> InitiatorCredits {
        InitiatorCredits {
            req_lim: login_delta,
            starved: 0,
        }
    }

    /// Commands that can be queued at once: the window less the task-management reserve.
    pub fn max_commands(&self) -> u32 {
        self.req_lim.saturating_sub(1)
    }

    /// Current request limit.
    pub fn req_lim(&self) -> u32 {
        self.req_lim
    }

    /// How often a command found no credit (ib_srp's `zero_req_lim`).
    pub fn starved(&self) -> u64 {
        self.starved
    }

    /// Takes a credit for `what`, or returns `false` (the caller reports busy and retries
    /// after the next response).
    pub fn try_spend(&mut self, what: Spend) -> bool {
        let need = match what {
            Spend::Command => 2,
            Spend::TaskManagement => 1,
            Spend::Response => return true,
        };
        if self.req_lim < need {
            if what == Spend::Command {
                self.starved += 1;
            }
            return false;
        }
        self.req_lim -= 1;
        true
    }

    /// Adds the REQUEST LIMIT DELTA of an SRP_RSP, SRP_CRED_REQ or SRP_AER_REQ.
    pub fn add(&mut self, delta: u32) {
        self.req_lim = self.req_lim.saturating_add(delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invariant(c: &TargetCredits) {
        assert_eq!(c.available + c.in_progress + c.owed, c.window, "{c:?}");
    }

    #[test]
    fn window_spent_then_overrun_detected() {
        let mut c = TargetCredits::new(3);
        assert_eq!(c.login_delta(), 3);
        for _ in 0..3 {
            c.on_request().expect("within window");
            invariant(&c);
        }
        assert_eq!(
            c.on_request(),
            Err(ChannelError::CreditOverrun { window: 3 })
        );
        invariant(&c);
        assert_eq!(c.on_response(), Ok(1));
        c.on_request().expect("credit returned");
        invariant(&c);
    }

    #[test]
    fn dropped_credit_rides_on_next_response() {
        let mut c = TargetCredits::new(4);
        c.on_request().expect("credit");
        c.on_request().expect("credit");
        c.on_request().expect("credit");
        c.on_dropped().expect("in progress");
        c.on_dropped().expect("in progress");
        invariant(&c);
        assert_eq!(c.available(), 1);
        assert_eq!(c.on_response(), Ok(3));
        assert_eq!(c.available(), 4);
        invariant(&c);
        assert_eq!(c.take_owed(), None);
    }

    #[test]
    fn owed_credits_returned_by_cred_req() {
        let mut c = TargetCredits::new(2);
        c.on_request().expect("credit");
        c.on_dropped().expect("in progress");
        assert_eq!(c.take_owed(), Some(1));
        assert_eq!(c.available(), 2);
        invariant(&c);
    }

    #[test]
    fn response_without_request_is_an_error() {
        let mut c = TargetCredits::new(2);
        assert_eq!(c.on_response(), Err(ChannelError::NoOutstandingRequest));
        assert_eq!(c.on_dropped(), Err(ChannelError::NoOutstandingRequest));
        invariant(&c);
    }

    #[test]
    fn invariant_holds_over_a_pseudo_random_walk() {
        let mut c = TargetCredits::new(16);
        let mut x: u32 = 0x1234_5678;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let _ = match x % 4 {
                0 | 1 => c.on_request().map(|_| 0),
                2 => c.on_response(),
                _ => c.on_dropped().map(|_| 0),
            };
            invariant(&c);
        }
    }

    #[test]
    fn initiator_keeps_one_credit_for_task_management() {
        let mut i = InitiatorCredits::new(3);
        assert_eq!(i.max_commands(), 2);
        assert!(i.try_spend(Spend::Command));
        assert!(i.try_spend(Spend::Command));
        assert!(!i.try_spend(Spend::Command));
        assert_eq!(i.starved(), 1);
        assert!(i.try_spend(Spend::Response));
        assert!(i.try_spend(Spend::TaskManagement));
        assert!(!i.try_spend(Spend::TaskManagement));
        i.add(2);
        assert!(i.try_spend(Spend::Command));
        assert_eq!(i.req_lim(), 1);
    }

    #[test]
    fn conforming_initiator_never_overruns_the_target() {
        let mut t = TargetCredits::new(8);
        let mut i = InitiatorCredits::new(t.login_delta());
        let mut pending = Vec::new();
        for round in 0..1000u32 {
            while i.try_spend(if round % 7 == 0 {
                Spend::TaskManagement
            } else {
                Spend::Command
            }) {
                t.on_request()
                    .expect("a conforming initiator never overruns");
                pending.push(round);
            }
            // Answer half, drop one now and then.
            for k in 0..pending.len().div_ceil(2) {
                if k == 0 && round % 5 == 0 {
                    t.on_dropped().expect("outstanding");
                } else {
                    i.add(t.on_response().expect("outstanding"));
                }
            }
            let keep = pending.len() / 2;
            pending.truncate(keep);
            invariant(&t);
        }
    }
}
