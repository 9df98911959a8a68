//! The project's rate-limited event log: one line per source and reason per interval, with
//! the count since the last line, so that a peer sending garbage cannot fill the log and no
//! event goes unmentioned. The counters stay the caller's (every event is still counted
//! where it happens); this decides only when to write a line.
//!
//! Sans-IO: the time is passed in. The first event of a (source, reason) is written at
//! once; later ones within [`RateLog::interval`] are held and counted; the next event after
//! the interval writes a line with the count held since, and [`RateLog::due`] hands back
//! the counts of keys that went quiet with events held, so that a periodic tick can write
//! them (nothing held is lost when a flood stops). At most [`RateLog::capacity`] keys are
//! remembered; past that, the events of new keys share one overflow key ([`Key::Overflow`]),
//! so the memory a flood of forged sources can take is bounded too.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// The default interval between two lines of one (source, reason).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// The default number of (source, reason) keys remembered.
pub const DEFAULT_CAPACITY: usize = 4096;

/// What a line is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key<K> {
    /// One (source, reason).
    One(K),
    /// Sources beyond the capacity, all reasons together.
    Overflow,
}

/// A line to write now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line<K> {
    /// What it is about.
    pub key: Key<K>,
    /// Events it stands for: this one and those held since the last line of the key.
    pub count: u64,
}

#[derive(Debug)]
struct Entry {
    /// When the last line of the key was written.
    last_line: Instant,
    /// Events since that line, not yet written.
    held: u64,
}

/// The rate-limited log of one kind of event (module doc).
#[derive(Debug)]
pub struct RateLog<K> {
    interval: Duration,
    capacity: usize,
    entries: HashMap<Key<K>, Entry>,
}

impl<K: Clone + Eq + Hash> RateLog<K> {
    /// A log writing at most one line per key per `interval`, remembering `capacity` keys.
    pub fn new(interval: Duration, capacity: usize) -> RateLog<K> {
        RateLog {
            interval,
            capacity: capacity.max(1),
            entries: HashMap::new(),
        }
    }

    /// The shortest time between two lines of one key.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Keys remembered at most (then [`Key::Overflow`]).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// An event of `key` at `now`: the line to write now, if one is due.
    pub fn event(&mut self, now: Instant, key: K) -> Option<Line<K>> {
        let mut key = Key::One(key);
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.forget_quiet(now);
            if self.entries.len() >= self.capacity {
                key = Key::Overflow;
            }
        }
        let interval = self.interval;
        match self.entries.get_mut(&key) {
            None => {
                self.entries.insert(
                    key.clone(),
                    Entry {
                        last_line: now,
                        held: 0,
                    },
                );
                Some(Line { key, count: 1 })
            }
            Some(e) if now.saturating_duration_since(e.last_line) >= interval => {
                let count = e.held + 1;
                e.held = 0;
                e.last_line = now;
                Some(Line { key, count })
            }
            Some(e) => {
                e.held += 1;
                None
            }
        }
    }

    /// The lines due at `now` for keys that held events and whose interval has passed
    /// (a periodic tick writes them); those keys start a new interval.
    pub fn due(&mut self, now: Instant) -> Vec<Line<K>> {
        let interval = self.interval;
        let mut out = Vec::new();
        for (key, e) in &mut self.entries {
            if e.held > 0 && now.saturating_duration_since(e.last_line) >= interval {
                out.push(Line {
                    key: key.clone(),
                    count: e.held,
                });
                e.held = 0;
                e.last_line = now;
            }
        }
        self.forget_quiet(now);
        out
    }

    /// Events held, not yet written, over all keys.
    pub fn held(&self) -> u64 {
        self.entries.values().map(|e| e.held).sum()
    }

    /// Forgets keys with nothing held whose interval has passed: their next event is a
    /// first one again.
    fn forget_quiet(&mut self, now: Instant) {
        let interval = self.interval;
        self.entries
            .retain(|_, e| e.held > 0 || now.saturating_duration_since(e.last_line) < interval);
    }
}

impl<K: Clone + Eq + Hash> Default for RateLog<K> {
    fn default() -> Self {
        RateLog::new(DEFAULT_INTERVAL, DEFAULT_CAPACITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_first_event_is_written_and_a_flood_is_one_line_per_interval_with_its_count() {
        let t0 = Instant::now();
        let mut log = RateLog::new(10 * S, 16);
        assert_eq!(
            log.event(t0, ("10.0.0.1", "invalid service ID")),
            Some(Line {
                key: Key::One(("10.0.0.1", "invalid service ID")),
                count: 1
            })
        );
        // 999 more within the interval: held, counted.
        for i in 1..1000u64 {
            let at = t0 + Duration::from_millis(i * 5);
            assert_eq!(log.event(at, ("10.0.0.1", "invalid service ID")), None);
        }
        assert_eq!(log.held(), 999);
        // Another reason of the same source, and another source: their own first lines.
        assert!(log.event(t0 + S, ("10.0.0.1", "forged path")).is_some());
        assert!(
            log.event(t0 + S, ("10.0.0.2", "invalid service ID"))
                .is_some()
        );
        // The next event after the interval: a line standing for it and the 999 held.
        let l = log.event(t0 + 10 * S, ("10.0.0.1", "invalid service ID"));
        assert_eq!(l.map(|l| l.count), Some(1000));
        assert_eq!(log.held(), 0);
    }

    #[test]
    fn held_events_of_a_flood_that_stopped_come_out_at_the_tick() {
        let t0 = Instant::now();
        let mut log = RateLog::new(10 * S, 16);
        log.event(t0, 7u32);
        log.event(t0 + S, 7);
        log.event(t0 + 2 * S, 7);
        assert_eq!(log.due(t0 + 5 * S), vec![]);
        assert_eq!(
            log.due(t0 + 10 * S),
            vec![Line {
                key: Key::One(7),
                count: 2
            }]
        );
        // Nothing held: nothing more, and the key is forgotten after a quiet interval.
        assert_eq!(log.due(t0 + 30 * S), vec![]);
        assert_eq!(log.event(t0 + 31 * S, 7).map(|l| l.count), Some(1));
    }

    #[test]
    fn sources_beyond_the_capacity_share_the_overflow_key() {
        let t0 = Instant::now();
        let mut log = RateLog::new(10 * S, 4);
        for src in 0..4u32 {
            assert!(log.event(t0, src).is_some());
        }
        // 1000 forged sources: one overflow line, the rest held under it.
        let lines: Vec<_> = (4..1004u32).filter_map(|src| log.event(t0, src)).collect();
        assert_eq!(
            lines,
            vec![Line {
                key: Key::Overflow,
                count: 1
            }]
        );
        assert_eq!(log.held(), 999);
        assert!(log.entries.len() <= 5);
        // Once the known keys have gone quiet, a new source has room again.
        let later = t0 + 20 * S;
        let _ = log.due(later);
        assert_eq!(log.event(later, 9999).map(|l| l.key), Some(Key::One(9999)));
    }
}
