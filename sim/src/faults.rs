//! The faults of one run, drawn from its seed: the net's standing impairments (loss,
//! duplication, reordering, delay) and a schedule of events — link flaps, partitions
//! between a host port and its target port, target crashes with their restarts.

use hca::sim::{FaultConfig, Rng};
use std::time::Duration;

/// One scheduled fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Path `path`'s host link goes down for `down`.
    Flap {
        /// The path (0 or 1).
        path: usize,
        /// How long.
        down: Duration,
    },
    /// Path `path`'s host port and target port cannot reach each other for `cut`.
    Partition {
        /// The path.
        path: usize,
        /// How long.
        cut: Duration,
    },
    /// The target loses power; it is started again after `down`.
    Crash {
        /// How long it stays down.
        down: Duration,
    },
}

/// The faults of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    /// The net's impairments for the whole run.
    pub net: FaultConfig,
    /// Events, each at a fraction (0 to 1) of the workload's span from the start of the
    /// I/O.
    pub events: Vec<(f64, Fault)>,
}

/// Which kinds of faults a run may draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultMix {
    /// Loss, duplication, reordering.
    pub impair: bool,
    /// Link flaps and partitions.
    pub links: bool,
    /// Target crashes.
    pub crashes: bool,
}

impl Default for FaultMix {
    fn default() -> Self {
        FaultMix {
            impair: true,
            links: true,
            crashes: true,
        }
    }
}

fn millis(rng: &mut Rng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.range(lo, hi))
}

impl FaultPlan {
    /// The plan of seed `seed`, of the kinds `mix` allows.
    pub fn draw(seed: u64, mix: FaultMix) -> FaultPlan {
        let mut rng = Rng::new(seed ^ 0x6661_756c_7473);
        let pick =
            |rng: &mut Rng, options: &[f64]| options[rng.range(0, options.len() as u64) as usize];
        let mut net = FaultConfig {
            delay_ns: (2_000, 2_000 + rng.range(1_000, 40_000)),
            ..FaultConfig::default()
        };
        if mix.impair {
            net.drop_rate = pick(&mut rng, &[0.0, 0.0, 0.001, 0.005, 0.02]);
            net.dup_rate = pick(&mut rng, &[0.0, 0.0, 0.002, 0.01]);
            net.reorder_rate = pick(&mut rng, &[0.0, 0.0, 0.005, 0.02]);
            net.reorder_extra_ns = rng.range(10_000, 200_000);
        }
        let mut events = Vec::new();
        let n = rng.range(0, 4);
        for _ in 0..n {
            let at = rng.range(2, 80) as f64 / 100.0;
            let kind = rng.range(0, 3);
            let fault = match kind {
                0 if mix.links => Fault::Flap {
                    path: rng.range(0, 2) as usize,
                    down: millis(&mut rng, 100, 8_000),
                },
                1 if mix.links => Fault::Partition {
                    path: rng.range(0, 2) as usize,
                    cut: millis(&mut rng, 100, 8_000),
                },
                2 if mix.crashes => Fault::Crash {
                    down: millis(&mut rng, 10, 4_000),
                },
                _ => continue,
            };
            events.push((at, fault));
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        FaultPlan { net, events }
    }
}
