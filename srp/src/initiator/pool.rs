//! Send-slot accounting: the IUs posted and not yet completed on the send queue.
//!
//! As ib_srp's tx ring (`queue_size + 2`): the negotiated window for commands, one slot kept
//! for task management and one for responses to target requests (CRED_RSP, AER_RSP), so an
//! abort or a credit response can always be posted while commands fill the ring.

use super::InitiatorError;

/// What a SEND is, for the reserve rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendKind {
    /// SRP_CMD: may not take the last two slots.
    Command,
    /// SRP_TSK_MGMT: may not take the last slot.
    TaskManagement,
    /// CRED_RSP, AER_RSP, I_LOGOUT: may take any slot.
    Response,
}

/// Send slots in use, bounded by `capacity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendPool {
    capacity: u32,
    in_flight: u32,
}

impl SendPool {
    /// A pool for a window of `window` commands (`window + 2` slots).
    pub fn new(window: u32) -> SendPool {
        SendPool {
            capacity: window.saturating_add(2),
            in_flight: 0,
        }
    }

    /// Slots in all.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Sends posted and not completed.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Whether a send of `kind` may be posted now.
    pub fn can_take(&self, kind: SendKind) -> bool {
        let reserve = match kind {
            SendKind::Command => 2,
            SendKind::TaskManagement => 1,
            SendKind::Response => 0,
        };
        self.in_flight + reserve < self.capacity
    }

    /// Takes a slot; `false` when the reserve rule forbids it.
    pub fn take(&mut self, kind: SendKind) -> bool {
        if !self.can_take(kind) {
            return false;
        }
        self.in_flight += 1;
        true
    }

    /// Returns the slot of a completed send.
    pub fn release(&mut self) -> Result<(), InitiatorError> {
        if self.in_flight == 0 {
            return Err(InitiatorError::SendAccounting);
        }
        self.in_flight -= 1;
        Ok(())
    }

    /// Forgets every posted send (the queue pair was destroyed, its sends flushed).
    pub fn reset(&mut self, window: u32) {
        *self = SendPool::new(window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_keep_a_slot_for_tmf_and_one_for_responses() {
        let mut p = SendPool::new(2);
        assert_eq!(p.capacity(), 4);
        assert!(p.take(SendKind::Command));
        assert!(p.take(SendKind::Command));
        assert!(!p.take(SendKind::Command));
        assert!(p.take(SendKind::TaskManagement));
        assert!(!p.take(SendKind::TaskManagement));
        assert!(p.take(SendKind::Response));
        assert!(!p.take(SendKind::Response));
        assert_eq!(p.in_flight(), 4);
        p.release().expect("posted");
        assert!(p.can_take(SendKind::Response));
        assert!(!p.can_take(SendKind::TaskManagement));
        for _ in 0..3 {
            p.release().expect("posted");
        }
        assert_eq!(p.release(), Err(InitiatorError::SendAccounting));
    }
}
