//! netem's decisions, without I/O: what happens to each frame entering one direction of a
//! link — lost, duplicated, delayed (with jitter) or sent at once (reordered) — and the
//! timer queue that holds it until it is due. Seeded, so a frame sequence replays.
//!
//! Driver's order: [`Netem::handle_frame`] for each frame received, then
//! [`Netem::poll_transmit`] until it has nothing due, then wait for the next frame or until
//! [`Netem::poll_timeout`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::time::{Duration, Instant};

/// What netem does to each direction, as `tc qdisc add … netem loss L% delay D J reorder
/// R% duplicate P%`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairment {
    /// Frames dropped, percent.
    pub loss_pct: f64,
    /// Delay of every frame not reordered.
    pub delay: Duration,
    /// The delay varies uniformly by ± this (frames then overtake one another, as in
    /// netem's time-sorted queue).
    pub jitter: Duration,
    /// Frames sent at once instead of delayed, percent (netem's `reorder`, gap 1): they
    /// overtake the delayed ones.
    pub reorder_pct: f64,
    /// Frames sent twice, percent (the copy decided afresh: lost, delayed or at once).
    pub duplicate_pct: f64,
}

impl Impairment {
    /// Nothing: every frame forwarded at once.
    pub const NONE: Impairment = Impairment {
        loss_pct: 0.0,
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        reorder_pct: 0.0,
        duplicate_pct: 0.0,
    };

    /// The arguments after `netem` for `tc qdisc add dev X root netem …`.
    pub fn tc_args(&self) -> Vec<String> {
        let us = |d: Duration| format!("{}us", d.as_micros());
        vec![
            "loss".into(),
            format!("{}%", self.loss_pct),
            "delay".into(),
            us(self.delay),
            us(self.jitter),
            "reorder".into(),
            format!("{}%", self.reorder_pct),
            "duplicate".into(),
            format!("{}%", self.duplicate_pct),
        ]
    }
}

impl fmt::Display for Impairment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "loss {}%, delay {:?} ± {:?}, reorder {}%, duplicate {}%",
            self.loss_pct, self.delay, self.jitter, self.reorder_pct, self.duplicate_pct
        )
    }
}

/// splitmix64: small, seeded, good enough for coin flips.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: f64) -> bool {
        pct > 0.0 && self.unit() * 100.0 < pct
    }
}

/// What happened to one direction's frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames that entered.
    pub frames: u64,
    /// Frames (or copies) dropped by `loss`.
    pub lost: u64,
    /// Frames that got a second copy.
    pub duplicated: u64,
    /// Copies held for `delay ± jitter`.
    pub delayed: u64,
    /// Copies sent at once (`reorder`).
    pub at_once: u64,
    /// Copies handed out for sending.
    pub sent: u64,
    /// Copies sent after a frame that entered later: reordering as the receiver sees it.
    pub overtaken: u64,
}

impl Counters {
    /// `self` plus `o`, field by field.
    pub fn add(&self, o: &Counters) -> Counters {
        Counters {
            frames: self.frames + o.frames,
            lost: self.lost + o.lost,
            duplicated: self.duplicated + o.duplicated,
            delayed: self.delayed + o.delayed,
            at_once: self.at_once + o.at_once,
            sent: self.sent + o.sent,
            overtaken: self.overtaken + o.overtaken,
        }
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} frames: {} lost, {} duplicated, {} delayed, {} sent at once, {} sent, \
             {} overtaken",
            self.frames,
            self.lost,
            self.duplicated,
            self.delayed,
            self.at_once,
            self.sent,
            self.overtaken
        )
    }
}

/// One direction: its generator, counters and the arrival order of its frames.
#[derive(Debug)]
struct Direction {
    rng: Rng,
    counters: Counters,
    /// Arrival number of the next frame.
    next_seq: u64,
    /// The highest arrival number sent so far (plus one; 0: none).
    sent_above: u64,
}

/// A copy waiting to be sent: ordered by due time, then by when it was queued.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    due: Instant,
    order: u64,
    dir: usize,
    seq: u64,
    frame: Vec<u8>,
}

/// netem on several directions, with one timer queue.
#[derive(Debug)]
pub struct Netem {
    impairment: Impairment,
    dirs: Vec<Direction>,
    queue: BinaryHeap<Reverse<Pending>>,
    order: u64,
    /// The most copies ever queued at once.
    pub max_queued: usize,
}

impl Netem {
    /// `directions` directions, each with its own generator derived from `seed`; no
    /// impairment until [`Netem::set`].
    pub fn new(seed: u64, directions: usize) -> Netem {
        let mut root = Rng::new(seed);
        Netem {
            impairment: Impairment::NONE,
            dirs: (0..directions)
                .map(|_| Direction {
                    rng: Rng::new(root.next_u64()),
                    counters: Counters::default(),
                    next_seq: 0,
                    sent_above: 0,
                })
                .collect(),
            queue: BinaryHeap::new(),
            order: 0,
            max_queued: 0,
        }
    }

    /// Applies `imp` to the frames that enter from now on.
    pub fn set(&mut self, imp: Impairment) {
        self.impairment = imp;
    }

    /// Direction `dir`'s counters.
    pub fn counters(&self, dir: usize) -> Counters {
        self.dirs[dir].counters
    }

    /// A frame entering direction `dir` at `now`: netem's order — a duplicate decided, then
    /// loss (of one of the copies); each copy left is delayed or sent at once, the duplicate
    /// after a loss decision of its own (netem re-enqueues it).
    pub fn handle_frame(&mut self, now: Instant, dir: usize, frame: &[u8]) {
        let imp = self.impairment;
        let d = &mut self.dirs[dir];
        d.counters.frames += 1;
        let seq = d.next_seq;
        d.next_seq += 1;
        let dup = d.rng.chance(imp.duplicate_pct);
        let lost = d.rng.chance(imp.loss_pct);
        if dup {
            d.counters.duplicated += 1;
        }
        if lost {
            d.counters.lost += 1;
        }
        let mut copies = usize::from(!lost);
        if dup {
            if d.rng.chance(imp.loss_pct) {
                d.counters.lost += 1;
            } else {
                copies += 1;
            }
        }
        for _ in 0..copies {
            let due = self.due(now, dir);
            self.order += 1;
            self.queue.push(Reverse(Pending {
                due,
                order: self.order,
                dir,
                seq,
                frame: frame.to_vec(),
            }));
        }
        self.max_queued = self.max_queued.max(self.queue.len());
    }

    /// When one copy entering `dir` at `now` is due: at once (`reorder`, or no delay), or
    /// after `delay ± jitter`.
    fn due(&mut self, now: Instant, dir: usize) -> Instant {
        let imp = self.impairment;
        let d = &mut self.dirs[dir];
        if imp.delay.is_zero() && imp.jitter.is_zero() {
            return now;
        }
        if d.rng.chance(imp.reorder_pct) {
            d.counters.at_once += 1;
            return now;
        }
        d.counters.delayed += 1;
        let spread = imp.jitter.as_secs_f64() * (2.0 * d.rng.unit() - 1.0);
        let delay = (imp.delay.as_secs_f64() + spread).max(0.0);
        now + Duration::from_secs_f64(delay)
    }

    /// The next copy due at `now`, with its direction.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(usize, Vec<u8>)> {
        if self.queue.peek().is_none_or(|p| p.0.due > now) {
            return None;
        }
        let Reverse(p) = self.queue.pop()?;
        let d = &mut self.dirs[p.dir];
        d.counters.sent += 1;
        if p.seq + 1 < d.sent_above {
            d.counters.overtaken += 1;
        }
        d.sent_above = d.sent_above.max(p.seq + 1);
        Some((p.dir, p.frame))
    }

    /// When the next copy is due (none queued: `None`).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.queue.peek().map(|p| p.0.due)
    }

    /// Copies queued now.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAOS: Impairment = Impairment {
        loss_pct: 1.0,
        delay: Duration::from_millis(2),
        jitter: Duration::from_millis(1),
        reorder_pct: 5.0,
        duplicate_pct: 1.0,
    };

    /// Feeds `n` frames 100 µs apart into direction 0 and drains everything; the frames'
    /// numbers in the order they came out.
    fn run(n: u32, imp: Impairment, seed: u64) -> (Netem, Vec<u32>) {
        let mut m = Netem::new(seed, 2);
        m.set(imp);
        let t0 = Instant::now();
        let mut out = Vec::new();
        let mut drain = |m: &mut Netem, now| {
            while let Some((dir, f)) = m.poll_transmit(now) {
                assert_eq!(dir, 0);
                out.push(u32::from_be_bytes(f[..4].try_into().expect("4 bytes")));
            }
        };
        for i in 0..n {
            let now = t0 + Duration::from_micros(100 * u64::from(i));
            drain(&mut m, now);
            m.handle_frame(now, 0, &i.to_be_bytes());
        }
        // Past every due time (the last frame plus the longest delay).
        let end = t0 + Duration::from_micros(100 * u64::from(n)) + Duration::from_secs(1);
        drain(&mut m, end);
        assert_eq!(m.queued(), 0);
        (m, out)
    }

    #[test]
    fn no_impairment_forwards_in_order_at_once() {
        let mut m = Netem::new(1, 1);
        let now = Instant::now();
        m.handle_frame(now, 0, b"a");
        m.handle_frame(now, 0, b"b");
        assert_eq!(m.poll_timeout(), Some(now));
        assert_eq!(m.poll_transmit(now), Some((0, b"a".to_vec())));
        assert_eq!(m.poll_transmit(now), Some((0, b"b".to_vec())));
        assert_eq!(m.poll_transmit(now), None);
        let c = m.counters(0);
        assert_eq!((c.frames, c.sent, c.lost, c.overtaken), (2, 2, 0, 0));
    }

    #[test]
    fn delay_holds_frames_until_due() {
        let mut m = Netem::new(1, 1);
        m.set(Impairment {
            delay: Duration::from_millis(2),
            ..Impairment::NONE
        });
        let now = Instant::now();
        m.handle_frame(now, 0, b"a");
        assert_eq!(m.poll_transmit(now), None);
        assert_eq!(m.poll_timeout(), Some(now + Duration::from_millis(2)));
        assert!(m.poll_transmit(now + Duration::from_millis(2)).is_some());
    }

    #[test]
    fn the_rates_come_out_as_set() {
        let n = 200_000;
        let (m, out) = run(n, CHAOS, 7);
        let c = m.counters(0);
        let pct = |x: u64| x as f64 * 100.0 / f64::from(n);
        // Each within a fifth of its rate (about 10 standard deviations at 1 %).
        assert!((pct(c.lost) - 1.0).abs() < 0.2, "{c}");
        assert!((pct(c.duplicated) - 1.0).abs() < 0.2, "{c}");
        let copies = c.delayed + c.at_once;
        assert!(
            (c.at_once as f64 * 100.0 / copies as f64 - 5.0).abs() < 1.0,
            "{c}"
        );
        assert_eq!(c.sent, copies);
        assert_eq!(c.sent as usize, out.len());
        assert_eq!(c.frames + c.duplicated, c.sent + c.lost);
        // Frames sent at once overtake the delayed ones, and jitter (± 1 ms over frames
        // 100 µs apart) reorders delayed ones too: far more than the 5 % sent at once.
        assert!(pct(c.overtaken) > 10.0, "{c}");
        // Nothing is sent twice but the duplicates.
        let mut seen = out.clone();
        seen.sort_unstable();
        seen.dedup();
        let twice = (out.len() - seen.len()) as u64;
        assert!(
            twice > 0 && twice <= c.duplicated,
            "{twice} sent twice; {c}"
        );
    }

    #[test]
    fn a_seed_replays_and_directions_differ() {
        let (_, a) = run(5000, CHAOS, 42);
        let (_, b) = run(5000, CHAOS, 42);
        let (_, c) = run(5000, CHAOS, 43);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let m = Netem::new(42, 2);
        assert_ne!(m.dirs[0].rng.0, m.dirs[1].rng.0);
    }

    #[test]
    fn tc_arguments() {
        assert_eq!(
            CHAOS.tc_args().join(" "),
            "loss 1% delay 2000us 1000us reorder 5% duplicate 1%"
        );
    }
}
