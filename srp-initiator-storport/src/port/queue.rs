//! The port's queues, without threads or the miniport: one queue per LU (depth ≤ 255
//! outstanding in the miniport, the rest held here), the adapter-wide holds (Busy, Pause,
//! a bus reset in progress) and the per-LU ones (DeviceBusy, PauseDevice, removal), and a
//! round-robin pick of the next request to start across LUs.
//!
//! Busy(n) holds new requests until the miniport completes `n` (or calls Ready); if it then
//! holds nothing, the hold lapses after the port's busy-retry interval (StorPort retries a
//! busy adapter on a timer). Pause(s) holds until Resume or `s` seconds pass.

use super::srb::LuAddress;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::time::{Duration, Instant};

/// StorPort's per-LU limit without extended SRBs.
pub const MAX_LU_QUEUE_DEPTH: u32 = 255;

/// A Busy hold: lapses after `remaining` completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy {
    pub(crate) remaining: u32,
    pub(crate) since: Instant,
}

/// Holds on one queue (the adapter's or a LU's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Holds {
    pub(crate) busy: Option<Busy>,
    pub(crate) paused_until: Option<Instant>,
}

impl Holds {
    /// Whether the holds stop new requests at `now`; expired ones lapse. `idle`: the
    /// miniport holds nothing on this queue.
    fn holding(&mut self, now: Instant, idle: bool, busy_retry: Duration) -> bool {
        if self.paused_until.is_some_and(|t| now >= t) {
            self.paused_until = None;
        }
        if self
            .busy
            .is_some_and(|b| idle && now.duration_since(b.since) >= busy_retry)
        {
            self.busy = None;
        }
        self.busy.is_some() || self.paused_until.is_some()
    }

    /// When the holds, as they stand, lapse by time alone (`None`: never, or only by an
    /// outside event — a Ready, a Resume, completions). Call after [`Holds::holding`] at
    /// `now`, so an expired one has lapsed.
    fn lapses_at(&self, idle: bool, busy_retry: Duration) -> Option<Instant> {
        let busy = match self.busy {
            Some(b) if idle => Some(b.since + busy_retry),
            Some(_) => return None,
            None => None,
        };
        match (busy, self.paused_until) {
            (Some(b), Some(p)) => Some(b.max(p)),
            (b, p) => b.or(p),
        }
    }

    /// One request of this queue completed.
    fn completed(&mut self) {
        if let Some(b) = &mut self.busy {
            b.remaining = b.remaining.saturating_sub(1);
            if b.remaining == 0 {
                self.busy = None;
            }
        }
    }
}

/// One LU's queue.
#[derive(Debug)]
pub(crate) struct LuQueue<T> {
    /// Held by the port, oldest first; management requests go to the front.
    pub(crate) waiting: VecDeque<(T, bool)>,
    /// Given to the miniport and not completed.
    pub(crate) outstanding: u32,
    pub(crate) depth: u32,
    pub(crate) holds: Holds,
    /// Gone (the port sends it nothing; the miniport is not told).
    pub(crate) removed: bool,
}

impl<T> LuQueue<T> {
    fn new(depth: u32) -> Self {
        LuQueue {
            waiting: VecDeque::new(),
            outstanding: 0,
            depth,
            holds: Holds::default(),
            removed: false,
        }
    }
}

/// All queues.
#[derive(Debug)]
pub(crate) struct Queues<T> {
    pub(crate) lus: BTreeMap<LuAddress, LuQueue<T>>,
    pub(crate) adapter: Holds,
    /// Bus resets in progress (they hold every queue).
    pub(crate) resetting: u32,
    /// Outstanding in the miniport, all LUs.
    pub(crate) outstanding: u32,
    pub(crate) default_depth: u32,
    pub(crate) busy_retry: Duration,
    /// Where the round robin resumes.
    cursor: Option<LuAddress>,
}

impl<T> Queues<T> {
    pub(crate) fn new(default_depth: u32, busy_retry: Duration) -> Self {
        Queues {
            lus: BTreeMap::new(),
            adapter: Holds::default(),
            resetting: 0,
            outstanding: 0,
            default_depth: default_depth.clamp(1, MAX_LU_QUEUE_DEPTH),
            busy_retry,
            cursor: None,
        }
    }

    /// The LU's queue, made on first use.
    pub(crate) fn lu(&mut self, lu: LuAddress) -> &mut LuQueue<T> {
        let depth = self.default_depth;
        self.lus.entry(lu).or_insert_with(|| LuQueue::new(depth))
    }

    /// Queues a request.
    pub(crate) fn push(&mut self, lu: LuAddress, item: T, management: bool) {
        let q = self.lu(lu);
        if management {
            q.waiting.push_front((item, true));
        } else {
            q.waiting.push_back((item, false));
        }
    }

    /// Puts a request back at the head of its LU's queue, holding the LU for `hold` (so a
    /// miniport answering BUSY is not spun on).
    pub(crate) fn requeue(&mut self, lu: LuAddress, item: T, now: Instant, hold: Duration) {
        let q = self.lu(lu);
        q.waiting.push_front((item, false));
        q.holds.paused_until = q.holds.paused_until.max(Some(now + hold));
    }

    /// Takes the next request the holds and depths allow, counting it outstanding.
    pub(crate) fn next(&mut self, now: Instant) -> Option<(LuAddress, T)> {
        let idle = self.outstanding == 0;
        if self.resetting > 0 || self.adapter.holding(now, idle, self.busy_retry) {
            return None;
        }
        let retry = self.busy_retry;
        // Every LU once, round robin from the one after the cursor (walked key by key: no
        // list of them is built per request).
        let mut prev = self.cursor;
        for _ in 0..self.lus.len() {
            let Some(lu) = prev
                .and_then(|c| {
                    self.lus
                        .range((Bound::Excluded(c), Bound::Unbounded))
                        .next()
                })
                .or_else(|| self.lus.iter().next())
                .map(|(k, _)| *k)
            else {
                break;
            };
            prev = Some(lu);
            let Some(q) = self.lus.get_mut(&lu) else {
                continue;
            };
            let Some(&(_, management)) = q.waiting.front() else {
                continue;
            };
            let lu_idle = q.outstanding == 0;
            let held = q.holds.holding(now, lu_idle, retry) || q.outstanding >= q.depth;
            if q.removed || (held && !management) {
                continue;
            }
            let (item, _) = q.waiting.pop_front()?;
            q.outstanding += 1;
            self.outstanding += 1;
            self.cursor = Some(lu);
            return Some((lu, item));
        }
        None
    }

    /// The earliest instant after `now` at which a hold lapses with a request waiting
    /// behind it (holds that expired by `now` lapse here): what a manual-mode port must
    /// wake for. `None` while nothing waits or nothing lapses by time alone.
    pub(crate) fn next_release(&mut self, now: Instant) -> Option<Instant> {
        let retry = self.busy_retry;
        let mut next: Option<Instant> = None;
        let mut waiting = false;
        for q in self.lus.values_mut() {
            if q.waiting.is_empty() || q.removed {
                continue;
            }
            waiting = true;
            let idle = q.outstanding == 0;
            if q.holds.holding(now, idle, retry) {
                next = min_some(next, q.holds.lapses_at(idle, retry));
            }
        }
        let idle = self.outstanding == 0;
        if waiting && self.adapter.holding(now, idle, retry) {
            next = min_some(next, self.adapter.lapses_at(idle, retry));
        }
        next
    }

    /// Whether [`Queues::next`] would give a request at `now` (holds that expired lapse).
    pub(crate) fn startable(&mut self, now: Instant) -> bool {
        let retry = self.busy_retry;
        if self.resetting > 0 || self.adapter.holding(now, self.outstanding == 0, retry) {
            return false;
        }
        self.lus.values_mut().any(|q| {
            let Some(&(_, management)) = q.waiting.front() else {
                return false;
            };
            let held = q.holds.holding(now, q.outstanding == 0, retry) || q.outstanding >= q.depth;
            !q.removed && (management || !held)
        })
    }

    /// A request of `lu` the miniport held completed.
    pub(crate) fn completed(&mut self, lu: LuAddress) {
        let q = self.lu(lu);
        debug_assert!(q.outstanding > 0, "LU {lu} outstanding underflow");
        q.outstanding = q.outstanding.saturating_sub(1);
        q.holds.completed();
        debug_assert!(self.outstanding > 0, "adapter outstanding underflow");
        self.outstanding = self.outstanding.saturating_sub(1);
        self.adapter.completed();
    }

    /// Everything waiting, all LUs (for a bugcheck).
    pub(crate) fn drain_all(&mut self) -> Vec<T> {
        self.lus
            .values_mut()
            .flat_map(|q| q.waiting.drain(..).map(|(t, _)| t))
            .collect()
    }
}

/// The earlier of two optional instants.
fn min_some(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: LuAddress = LuAddress::new(0, 0, 0);
    const B: LuAddress = LuAddress::new(0, 0, 1);

    #[test]
    fn depth_holds_and_management_passes() {
        let now = Instant::now();
        let mut q = Queues::new(2, Duration::from_secs(1));
        for i in 0..4 {
            q.push(A, i, false);
        }
        assert_eq!(q.next(now), Some((A, 0)));
        assert_eq!(q.next(now), Some((A, 1)));
        assert_eq!(q.next(now), None, "depth 2 reached");
        q.push(A, 99, true);
        assert_eq!(q.next(now), Some((A, 99)), "management goes past the depth");
        q.completed(A);
        q.completed(A);
        assert_eq!(q.next(now), Some((A, 2)));
    }

    #[test]
    fn round_robin_and_busy_countdown() {
        let now = Instant::now();
        let mut q = Queues::new(255, Duration::from_secs(1));
        for i in 0..3 {
            q.push(A, i, false);
            q.push(B, 10 + i, false);
        }
        let got: Vec<_> = (0..4).filter_map(|_| q.next(now)).map(|(_, i)| i).collect();
        assert_eq!(got, vec![0, 10, 1, 11]);
        q.adapter.busy = Some(Busy {
            remaining: 2,
            since: now,
        });
        assert_eq!(q.next(now), None);
        q.completed(A);
        assert_eq!(q.next(now), None, "one of two completions");
        q.completed(B);
        assert!(q.next(now).is_some(), "busy lapses after two completions");
        q.adapter.paused_until = Some(now + Duration::from_millis(5));
        assert_eq!(q.next(now), None);
        assert!(
            q.next(now + Duration::from_millis(6)).is_some(),
            "pause expires"
        );
    }
}
