//! Load-balance policies (MPIO's `DSM_Load_Balance_Policy_V2` plus Linux's service-time):
//! which usable path the next I/O takes.
//!
//! Contract: [`Selector::select`] sees every path as a [`Candidate`] and returns the index
//! of the chosen one, or `None` when no path is usable. Every policy first keeps only the
//! usable paths of the best ALUA tier present (active/optimized before
//! active/non-optimized: MSDSM turns round robin into round robin with subset for ALUA
//! devices, and so does every policy here), then:
//! - failover only: one path carries everything; it stays put while usable, except that
//!   with failback on a usable preferred path takes over again;
//! - round robin: each in turn;
//! - round robin with subset: each preferred path in turn, the others only when no
//!   preferred path is usable;
//! - least queue depth: fewest I/Os in flight;
//! - weighted paths: lowest weight;
//! - least blocks: fewest blocks in flight;
//! - service time: least (in flight + 1) × the path's recent service time.
//!
//! Ties go round robin, so a deterministic workload spreads evenly across equal paths.
#[allow(unused_imports)]
use crate::prelude::*;

use core::fmt;

/// A load-balance policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// One active path; the others stand by (`DSM_LB_FAILOVER`).
    FailoverOnly,
    /// Every path in turn (`DSM_LB_ROUND_ROBIN`).
    RoundRobin,
    /// The preferred paths in turn, the others only if none is left
    /// (`DSM_LB_ROUND_ROBIN_WITH_SUBSET`).
    RoundRobinSubset,
    /// Fewest outstanding I/Os (`DSM_LB_DYN_LEAST_QUEUE_DEPTH`).
    LeastQueueDepth,
    /// Lowest weight (`DSM_LB_WEIGHTED_PATHS`).
    WeightedPaths,
    /// Fewest outstanding blocks (`DSM_LB_LEAST_BLOCKS`).
    LeastBlocks,
    /// Least expected service time (Linux dm-multipath `service-time`).
    ServiceTime,
}

impl Policy {
    /// Every policy, in MPIO's numbering order.
    pub const ALL: [Policy; 7] = [
        Policy::FailoverOnly,
        Policy::RoundRobin,
        Policy::RoundRobinSubset,
        Policy::LeastQueueDepth,
        Policy::WeightedPaths,
        Policy::LeastBlocks,
        Policy::ServiceTime,
    ];

    /// The name operators use.
    pub fn name(self) -> &'static str {
        match self {
            Policy::FailoverOnly => "failover-only",
            Policy::RoundRobin => "round-robin",
            Policy::RoundRobinSubset => "round-robin-subset",
            Policy::LeastQueueDepth => "least-queue-depth",
            Policy::WeightedPaths => "weighted-paths",
            Policy::LeastBlocks => "least-blocks",
            Policy::ServiceTime => "service-time",
        }
    }

    /// By name, or by MPIO's number (`mpclaim -l -d <n> <policy>`: 1 to 6; 7 is ours).
    pub fn parse(text: &str) -> Option<Policy> {
        let t = text.trim();
        if let Ok(n) = t.parse::<usize>() {
            return (1..=7).contains(&n).then(|| Policy::ALL[n - 1]);
        }
        Policy::ALL.into_iter().find(|p| p.name() == t)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A path as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Candidate {
    /// It may carry I/O now.
    pub usable: bool,
    /// Preferred (configured, or the ALUA preferred group).
    pub preferred: bool,
    /// ALUA tier: 0 active/optimized (or no ALUA), 1 active/non-optimized.
    pub tier: u8,
    /// Weight (weighted paths; lower wins).
    pub weight: u32,
    /// I/Os in flight.
    pub in_flight: u32,
    /// Blocks in flight.
    pub blocks_in_flight: u64,
    /// Recent service time per I/O in microseconds (0: unknown).
    pub service_us: u64,
}

/// A disk's policy and its memory (round-robin cursor, failover-only's active path).
#[derive(Debug, Clone)]
pub struct Selector {
    policy: Policy,
    failback: bool,
    cursor: usize,
    active: Option<usize>,
    /// Scratch lists reused by every [`Selector::select`]: no allocation per I/O.
    eligible: Vec<usize>,
    preferred: Vec<usize>,
}

impl Selector {
    /// `policy`; `failback`: a returning preferred path takes over again (failover only).
    pub fn new(policy: Policy, failback: bool) -> Selector {
        Selector {
            policy,
            failback,
            cursor: 0,
            active: None,
            eligible: Vec::new(),
            preferred: Vec::new(),
        }
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Changes the policy (at run time; in-flight I/O is unaffected).
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
        self.active = None;
    }

    /// Whether failback is on.
    pub fn failback(&self) -> bool {
        self.failback
    }

    /// The path failover only uses now, if it chose one.
    pub fn active(&self) -> Option<usize> {
        self.active
    }

    /// The path for the next I/O of `blocks` blocks (see the module contract).
    pub fn select(&mut self, paths: &[Candidate]) -> Option<usize> {
        let best_tier = paths.iter().filter(|c| c.usable).map(|c| c.tier).min()?;
        let mut eligible = core::mem::take(&mut self.eligible);
        eligible.clear();
        eligible
            .extend((0..paths.len()).filter(|&i| paths[i].usable && paths[i].tier == best_tier));
        let pick = self.select_among(paths, &eligible);
        self.eligible = eligible;
        Some(pick)
    }

    /// The pick among `eligible` (non-empty: the usable paths of the best tier).
    fn select_among(&mut self, paths: &[Candidate], eligible: &[usize]) -> usize {
        match self.policy {
            Policy::FailoverOnly => self.failover_only(paths, eligible),
            Policy::RoundRobin => self.rotate(eligible),
            Policy::RoundRobinSubset => {
                let mut preferred = core::mem::take(&mut self.preferred);
                preferred.clear();
                preferred.extend(eligible.iter().copied().filter(|&i| paths[i].preferred));
                let pick = if preferred.is_empty() {
                    self.rotate(eligible)
                } else {
                    self.rotate(&preferred)
                };
                self.preferred = preferred;
                pick
            }
            Policy::LeastQueueDepth => self.least(eligible, |c| u128::from(c.in_flight), paths),
            Policy::WeightedPaths => self.least(eligible, |c| u128::from(c.weight), paths),
            Policy::LeastBlocks => self.least(eligible, |c| u128::from(c.blocks_in_flight), paths),
            Policy::ServiceTime => self.least(
                eligible,
                |c| (u128::from(c.in_flight) + 1) * u128::from(c.service_us.max(1)),
                paths,
            ),
        }
    }

    /// The next of `set` after the cursor.
    fn rotate(&mut self, set: &[usize]) -> usize {
        let pick = set
            .iter()
            .copied()
            .find(|&i| i >= self.cursor)
            .unwrap_or(set[0]);
        self.cursor = pick + 1;
        pick
    }

    /// The lowest `key` of `set`; ties in turn.
    fn least(
        &mut self,
        set: &[usize],
        key: impl Fn(&Candidate) -> u128,
        paths: &[Candidate],
    ) -> usize {
        let min = set.iter().map(|&i| key(&paths[i])).min().unwrap_or(0);
        let tied: Vec<usize> = set
            .iter()
            .copied()
            .filter(|&i| key(&paths[i]) == min)
            .collect();
        self.rotate(&tied)
    }

    fn failover_only(&mut self, paths: &[Candidate], eligible: &[usize]) -> usize {
        let preferred = eligible.iter().copied().find(|&i| paths[i].preferred);
        let current = self
            .active
            .filter(|&i| paths.get(i).is_some_and(|c| c.usable));
        let pick = match (current, preferred) {
            (Some(c), Some(p)) if self.failback && c != p => p,
            (Some(c), _) => c,
            (None, Some(p)) => p,
            (None, None) => eligible[0],
        };
        self.active = Some(pick);
        pick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(n: usize) -> Vec<Candidate> {
        vec![
            Candidate {
                usable: true,
                ..Candidate::default()
            };
            n
        ]
    }

    fn spread(sel: &mut Selector, paths: &[Candidate], n: usize) -> Vec<usize> {
        let mut count = vec![0; paths.len()];
        for _ in 0..n {
            count[sel.select(paths).expect("a path")] += 1;
        }
        count
    }

    #[test]
    fn names_and_numbers() {
        for p in Policy::ALL {
            assert_eq!(Policy::parse(p.name()), Some(p));
        }
        assert_eq!(Policy::parse("4"), Some(Policy::LeastQueueDepth));
        assert_eq!(Policy::parse("0"), None);
        assert_eq!(Policy::parse("fastest"), None);
    }

    #[test]
    fn round_robin_turns_and_skips_unusable_paths() {
        let mut paths = up(3);
        let mut s = Selector::new(Policy::RoundRobin, false);
        assert_eq!(spread(&mut s, &paths, 300), vec![100, 100, 100]);
        paths[1].usable = false;
        assert_eq!(spread(&mut s, &paths, 300), vec![150, 0, 150]);
        paths.iter_mut().for_each(|p| p.usable = false);
        assert_eq!(s.select(&paths), None);
    }

    #[test]
    fn alua_optimized_paths_first() {
        let mut paths = up(3);
        paths[0].tier = 1;
        let mut s = Selector::new(Policy::RoundRobin, false);
        assert_eq!(spread(&mut s, &paths, 100), vec![0, 50, 50]);
        paths[1].usable = false;
        paths[2].usable = false;
        assert_eq!(
            spread(&mut s, &paths, 10),
            vec![10, 0, 0],
            "non-optimized when alone"
        );
    }

    #[test]
    fn subset_prefers_its_members() {
        let mut paths = up(3);
        paths[0].preferred = true;
        paths[2].preferred = true;
        let mut s = Selector::new(Policy::RoundRobinSubset, false);
        assert_eq!(spread(&mut s, &paths, 100), vec![50, 0, 50]);
        paths[0].usable = false;
        paths[2].usable = false;
        assert_eq!(spread(&mut s, &paths, 10), vec![0, 10, 0]);
    }

    #[test]
    fn failover_only_sticks_and_fails_back_when_asked() {
        let mut paths = up(2);
        paths[0].preferred = true;
        let mut s = Selector::new(Policy::FailoverOnly, true);
        assert_eq!(spread(&mut s, &paths, 10), vec![10, 0]);
        paths[0].usable = false;
        assert_eq!(spread(&mut s, &paths, 10), vec![0, 10]);
        paths[0].usable = true;
        assert_eq!(spread(&mut s, &paths, 10), vec![10, 0], "failback");
        let mut s = Selector::new(Policy::FailoverOnly, false);
        paths[0].usable = false;
        assert_eq!(spread(&mut s, &paths, 5), vec![0, 5]);
        paths[0].usable = true;
        assert_eq!(
            spread(&mut s, &paths, 5),
            vec![0, 5],
            "no failback: it stays"
        );
    }

    #[test]
    fn least_metrics_and_weights() {
        let mut paths = up(3);
        paths[0].in_flight = 4;
        paths[1].in_flight = 1;
        paths[2].in_flight = 1;
        let mut s = Selector::new(Policy::LeastQueueDepth, false);
        assert_eq!(spread(&mut s, &paths, 10), vec![0, 5, 5]);
        paths[1].blocks_in_flight = 100;
        let mut s = Selector::new(Policy::LeastBlocks, false);
        assert_eq!(spread(&mut s, &paths, 10), vec![5, 0, 5]);
        paths[0].weight = 1;
        paths[1].weight = 5;
        paths[2].weight = 5;
        let mut s = Selector::new(Policy::WeightedPaths, false);
        assert_eq!(spread(&mut s, &paths, 10), vec![10, 0, 0]);
        let mut paths = up(2);
        paths[0].service_us = 100;
        paths[1].service_us = 300;
        paths[0].in_flight = 2; // 3 × 100 = 300 ties 1 × 300
        let mut s = Selector::new(Policy::ServiceTime, false);
        assert_eq!(spread(&mut s, &paths, 10), vec![5, 5]);
        paths[0].in_flight = 1;
        assert_eq!(spread(&mut s, &paths, 10), vec![10, 0]);
    }
}
