//! Send-queue credits of one channel, sans-IO: how many work requests the QP's send queue
//! holds, and the chains that wait for room.
//!
//! A chain (a command's RDMA WRITEs and its SRP_RSP, a descriptor table's READ, a data-out
//! command's READs, an SRP_CRED_REQ) takes one entry per work request until a signaled
//! request at or after it completes: completions on an RC send queue come in order, so the
//! completion of a signaled request frees it and every unsignaled one posted before it.
//! A chain that does not fit waits, in order, behind any chain already waiting, and goes
//! out when completions make room — the device never sees more than the queue holds (a
//! full queue's refusal would tear the channel down: ib_srp with `never_register=1` sends
//! up to 255 descriptors per command, each its own WRITE, at any queue depth).

use ib_verbs::wr::{SendFlags, SendWr};
use std::collections::VecDeque;

/// The send queue's accounting.
#[derive(Debug)]
pub struct SendQueue {
    depth: usize,
    used: usize,
    /// Per signaled request posted and not completed: its work request id and the entries
    /// its completion frees (itself and the unsignaled ones before it).
    signaled: VecDeque<(u64, usize)>,
    /// Unsignaled requests posted after the last signaled one.
    trailing: usize,
    /// Chains waiting for room, in order.
    waiting: VecDeque<Vec<SendWr>>,
    /// Chains that had to wait.
    deferred: u64,
}

/// What [`SendQueue::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Post it now (it is counted).
    Post,
    /// It waits (taken); post what [`SendQueue::completed`] hands back later.
    Wait,
    /// Longer than the whole queue: it can never go.
    TooLong {
        /// Its work requests.
        len: usize,
        /// The queue's depth.
        depth: usize,
    },
}

impl SendQueue {
    /// A queue of `depth` entries, empty.
    pub fn new(depth: usize) -> SendQueue {
        SendQueue {
            depth,
            used: 0,
            signaled: VecDeque::new(),
            trailing: 0,
            waiting: VecDeque::new(),
            deferred: 0,
        }
    }

    /// Entries in use.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Chains waiting for room now.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Chains that have had to wait, ever.
    pub fn deferred(&self) -> u64 {
        self.deferred
    }

    fn count(&mut self, chain: &[SendWr]) {
        self.used += chain.len();
        for wr in chain {
            self.trailing += 1;
            if wr.flags.contains(SendFlags::SIGNALED) {
                self.signaled.push_back((wr.wr_id, self.trailing));
                self.trailing = 0;
            }
        }
    }

    /// A chain to post: [`Admit::Post`] (counted; the caller posts `chain` as it is) or
    /// [`Admit::Wait`] (taken out of `chain`, which is left empty).
    pub fn admit(&mut self, chain: &mut Vec<SendWr>) -> Admit {
        let len = chain.len();
        if len > self.depth {
            return Admit::TooLong {
                len,
                depth: self.depth,
            };
        }
        if self.waiting.is_empty() && self.used + len <= self.depth {
            self.count(chain);
            return Admit::Post;
        }
        self.deferred += 1;
        self.waiting.push_back(std::mem::take(chain));
        Admit::Wait
    }

    /// A send completion for `wr_id`: the entries it frees come back, and the waiting chains
    /// that fit now are handed out, in order, counted, to be posted.
    pub fn completed(&mut self, wr_id: u64) -> Vec<Vec<SendWr>> {
        if self.signaled.front().is_some_and(|&(id, _)| id == wr_id) {
            if let Some((_, n)) = self.signaled.pop_front() {
                self.used = self.used.saturating_sub(n);
            }
        }
        let mut ready = Vec::new();
        while let Some(next) = self.waiting.front() {
            if self.used + next.len() > self.depth {
                break;
            }
            if let Some(chain) = self.waiting.pop_front() {
                self.count(&chain);
                ready.push(chain);
            }
        }
        ready
    }

    /// The channel is closing: nothing waits any more.
    pub fn clear(&mut self) {
        self.waiting.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ib_verbs::wr::SendOp;

    fn wr(id: u64, signaled: bool) -> SendWr {
        SendWr {
            wr_id: id,
            op: SendOp::Send,
            sg_list: Default::default(),
            flags: if signaled {
                SendFlags::SIGNALED
            } else {
                SendFlags::empty()
            },
            ud: None,
        }
    }

    /// `writes` unsignaled WRITEs and a signaled response `id`.
    fn chain(id: u64, writes: u64) -> Vec<SendWr> {
        let mut c: Vec<SendWr> = (0..writes).map(|w| wr(id * 1000 + w, false)).collect();
        c.push(wr(id, true));
        c
    }

    #[test]
    fn a_chain_that_does_not_fit_waits_and_goes_when_completions_make_room() {
        let mut q = SendQueue::new(8);
        let mut a = chain(1, 4);
        assert_eq!(q.admit(&mut a), Admit::Post);
        assert_eq!(a.len(), 5, "posted as it is");
        let mut b = chain(2, 3);
        assert_eq!(q.admit(&mut b), Admit::Wait, "5 + 4 > 8");
        assert!(b.is_empty());
        // A small one behind it waits too: order is kept.
        let mut c = chain(3, 0);
        assert_eq!(q.admit(&mut c), Admit::Wait);
        assert_eq!((q.used(), q.waiting(), q.deferred()), (5, 2, 2));
        // An unknown completion (an unsignaled request's error) frees nothing.
        assert!(q.completed(1001).is_empty());
        let ready = q.completed(1);
        assert_eq!(ready.len(), 2, "both fit once chain 1 is done");
        assert_eq!(ready[0].last().map(|w| w.wr_id), Some(2));
        assert_eq!(ready[1].last().map(|w| w.wr_id), Some(3));
        assert_eq!(q.used(), 5);
        q.completed(2);
        q.completed(3);
        assert_eq!(q.used(), 0);
    }

    #[test]
    fn the_queue_never_holds_more_than_its_depth() {
        let mut q = SendQueue::new(16);
        let mut posted = 0usize;
        let mut in_flight: VecDeque<u64> = VecDeque::new();
        for id in 1..200u64 {
            let mut c = chain(id, id % 7);
            if q.admit(&mut c) == Admit::Post {
                posted += c.len();
                in_flight.push_back(id);
            }
            assert!(q.used() <= 16, "{} used", q.used());
            if id % 3 == 0 {
                if let Some(done) = in_flight.pop_front() {
                    for r in q.completed(done) {
                        posted += r.len();
                        in_flight.extend(r.last().map(|w| w.wr_id));
                    }
                }
            }
            assert!(q.used() <= 16, "{} used", q.used());
        }
        while let Some(done) = in_flight.pop_front() {
            for r in q.completed(done) {
                posted += r.len();
                in_flight.extend(r.last().map(|w| w.wr_id));
            }
        }
        assert_eq!((q.used(), q.waiting()), (0, 0));
        assert!(posted > 0);
    }

    #[test]
    fn a_chain_longer_than_the_queue_is_refused_by_name() {
        let mut q = SendQueue::new(4);
        let mut c = chain(1, 9);
        assert_eq!(q.admit(&mut c), Admit::TooLong { len: 10, depth: 4 });
        assert_eq!(c.len(), 10, "left with the caller");
    }
}
