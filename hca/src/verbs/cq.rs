//! Completion queues: a bounded ring of work completions with one-shot notification arming
//! (IBTA §11.4.2; `ibv_req_notify_cq`).

use super::wr::{ArmMode, Wc, WcStatus};
use std::collections::VecDeque;

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    entries: VecDeque<Wc>,
    capacity: usize,
    armed: Option<ArmMode>,
    notify: bool,
    overflowed: bool,
}

/// The queue was full: the completion is lost and the CQ is in error (IBTA class G).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("completion queue overrun ({capacity} entries)")]
pub struct CqOverrun {
    /// The queue's capacity.
    pub capacity: usize,
}

impl Cq {
    /// A queue for up to `capacity` unpolled completions.
    pub fn new(capacity: usize) -> Self {
        Cq {
            entries: VecDeque::with_capacity(capacity.min(4096)),
            capacity,
            armed: None,
            notify: false,
            overflowed: false,
        }
    }

    /// Adds a completion, firing an armed notification if it qualifies.
    pub fn push(&mut self, wc: Wc) -> Result<(), CqOverrun> {
        if self.overflowed || self.entries.len() >= self.capacity {
            self.overflowed = true;
            return Err(CqOverrun {
                capacity: self.capacity,
            });
        }
        let fires = match self.armed {
            Some(ArmMode::NextCompletion) => true,
            Some(ArmMode::Solicited) => wc.solicited || wc.status != WcStatus::Success,
            None => false,
        };
        if fires {
            self.armed = None;
            self.notify = true;
        }
        self.entries.push_back(wc);
        Ok(())
    }

    /// Moves up to `max` completions, oldest first, into `out`; returns how many.
    pub fn poll(&mut self, max: usize, out: &mut Vec<Wc>) -> usize {
        let n = max.min(self.entries.len());
        out.extend(self.entries.drain(..n));
        n
    }

    /// Arms the next notification (one-shot, as `ibv_req_notify_cq`).
    pub fn arm(&mut self, mode: ArmMode) {
        self.armed = match (self.armed, mode) {
            // A stronger arm wins over a weaker one already set.
            (Some(ArmMode::NextCompletion), _) => Some(ArmMode::NextCompletion),
            _ => Some(mode),
        };
    }

    /// Whether a notification fired since the last call (clears it).
    pub fn take_notification(&mut self) -> bool {
        core::mem::take(&mut self.notify)
    }

    /// Unpolled completions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a completion was lost to overrun.
    pub fn is_overrun(&self) -> bool {
        self.overflowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Qpn;
    use crate::verbs::wr::WcOpcode;

    fn wc(id: u64, status: WcStatus, solicited: bool) -> Wc {
        Wc {
            solicited,
            ..Wc::new(id, status, WcOpcode::Recv, Qpn::GSI)
        }
    }

    #[test]
    fn notification_is_one_shot_and_respects_solicited() {
        let mut cq = Cq::new(8);
        cq.push(wc(1, WcStatus::Success, false)).expect("room");
        assert!(!cq.take_notification(), "not armed");
        cq.arm(ArmMode::Solicited);
        cq.push(wc(2, WcStatus::Success, false)).expect("room");
        assert!(!cq.take_notification(), "unsolicited success does not fire");
        cq.push(wc(3, WcStatus::Success, true)).expect("room");
        assert!(cq.take_notification());
        cq.push(wc(4, WcStatus::Success, true)).expect("room");
        assert!(!cq.take_notification(), "one shot");
        cq.arm(ArmMode::Solicited);
        cq.push(wc(5, WcStatus::RemAccessErr, false)).expect("room");
        assert!(cq.take_notification(), "errors fire a solicited arm");
        let mut out = Vec::new();
        assert_eq!(cq.poll(10, &mut out), 5);
        assert_eq!(
            out.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
    }

    #[test]
    fn overrun_is_reported_and_sticky() {
        let mut cq = Cq::new(1);
        cq.push(wc(1, WcStatus::Success, false)).expect("room");
        assert_eq!(
            cq.push(wc(2, WcStatus::Success, false)),
            Err(CqOverrun { capacity: 1 })
        );
        assert!(cq.is_overrun());
    }
}
