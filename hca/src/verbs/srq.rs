//! Shared receive queues: receive work requests several QPs draw from, with a low-water
//! limit that raises an asynchronous event once (`IBV_EVENT_SRQ_LIMIT_REACHED`).

use super::wr::RecvWr;
use std::collections::VecDeque;

/// A shared receive queue.
#[derive(Debug)]
pub struct Srq {
    queue: VecDeque<RecvWr>,
    max_wr: usize,
    limit: Option<usize>,
}

/// The queue already holds `max_wr` requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shared receive queue full ({max_wr} requests)")]
pub struct SrqFull {
    /// Capacity.
    pub max_wr: usize,
}

impl Srq {
    /// A queue for up to `max_wr` receive requests.
    pub fn new(max_wr: usize) -> Self {
        Srq {
            queue: VecDeque::new(),
            max_wr,
            limit: None,
        }
    }

    /// Posts a receive request.
    pub fn post(&mut self, wr: RecvWr) -> Result<(), SrqFull> {
        if self.queue.len() >= self.max_wr {
            return Err(SrqFull {
                max_wr: self.max_wr,
            });
        }
        self.queue.push_back(wr);
        Ok(())
    }

    /// Arms the limit event: it fires once when fewer than `limit` requests remain.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = Some(limit);
    }

    /// Takes the oldest request; the flag says the armed limit was just crossed.
    pub fn pop(&mut self) -> Option<(RecvWr, bool)> {
        let wr = self.queue.pop_front()?;
        let crossed = matches!(self.limit, Some(l) if self.queue.len() < l);
        if crossed {
            self.limit = None;
        }
        Some((wr, crossed))
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether none are waiting.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_fires_once_below_the_mark() {
        let mut srq = Srq::new(4);
        for id in 0..4 {
            srq.post(RecvWr {
                wr_id: id,
                sg_list: [].into(),
            })
            .expect("room");
        }
        assert!(
            srq.post(RecvWr {
                wr_id: 9,
                sg_list: [].into()
            })
            .is_err()
        );
        srq.set_limit(2);
        assert_eq!(srq.pop().map(|(w, c)| (w.wr_id, c)), Some((0, false)));
        assert_eq!(srq.pop().map(|(w, c)| (w.wr_id, c)), Some((1, false)));
        assert_eq!(srq.pop().map(|(w, c)| (w.wr_id, c)), Some((2, true)));
        assert_eq!(srq.pop().map(|(w, c)| (w.wr_id, c)), Some((3, false)));
        assert!(srq.pop().is_none());
    }
}
