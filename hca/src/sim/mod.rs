//! A seeded, deterministic fabric for the sans-IO engines: datagrams between HCAs with
//! loss, duplication, reordering, delay and partitions, on a virtual clock.
//!
//! Faults are knobs on [`FaultConfig`]; the whole run is a function of the seed, which tests
//! print on failure so a run can be replayed. The fabric steps the engines exactly as a
//! driver would: it delivers datagrams and fires timers in time order, and drains each
//! engine's transmits after every input.

mod net;
mod rng;

pub use net::{SimNet, SimNode, SimTask};
pub use rng::Rng;

use crate::engine::Engine;
use crate::time::Time;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::net::{IpAddr, SocketAddr};

/// Fault knobs. Rates are probabilities per datagram.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultConfig {
    /// Datagrams dropped.
    pub drop_rate: f64,
    /// Datagrams delivered twice.
    pub dup_rate: f64,
    /// Datagrams held back long enough that later ones overtake them.
    pub reorder_rate: f64,
    /// One-way delay, nanoseconds: uniform in `delay_ns.0..delay_ns.1`.
    pub delay_ns: (u64, u64),
    /// Extra delay of a reordered datagram, nanoseconds.
    pub reorder_extra_ns: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            drop_rate: 0.0,
            dup_rate: 0.0,
            reorder_rate: 0.0,
            delay_ns: (5_000, 10_000),
            reorder_extra_ns: 40_000,
        }
    }
}

/// A datagram on its way.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Time,
    seq: u64,
    from: usize,
    hca: usize,
    port: u8,
    src: SocketAddr,
    bytes: Vec<u8>,
}

/// Counters of what the fabric did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Datagrams handed to the fabric.
    pub sent: u64,
    /// Delivered (duplicates count twice).
    pub delivered: u64,
    /// Dropped by `drop_rate`.
    pub dropped: u64,
    /// Dropped by a partition or an unknown address.
    pub cut: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Reordered.
    pub reordered: u64,
}

/// HCAs joined by a simulated network.
pub struct Fabric {
    /// The fault knobs, changeable between steps.
    pub faults: FaultConfig,
    /// Print every datagram's fate to stderr (what tests turn on to debug a seed).
    pub trace: bool,
    rng: Rng,
    now: Time,
    seq: u64,
    hcas: Vec<Engine>,
    addrs: HashMap<IpAddr, (usize, u8)>,
    cut: BTreeSet<(usize, usize)>,
    /// Latest delivery time per (from, to): links keep order unless a fault reorders.
    fifo: HashMap<(usize, usize), Time>,
    queue: BinaryHeap<Reverse<InFlight>>,
    stats: FabricStats,
}

impl Fabric {
    /// An empty fabric whose randomness comes from `seed`.
    pub fn new(seed: u64, faults: FaultConfig) -> Self {
        Fabric {
            faults,
            trace: std::env::var_os("HCA_SIM_TRACE").is_some(),
            rng: Rng::new(seed),
            now: Time(1_000_000),
            seq: 0,
            hcas: Vec::new(),
            addrs: HashMap::new(),
            cut: BTreeSet::new(),
            fifo: HashMap::new(),
            queue: BinaryHeap::new(),
            stats: FabricStats::default(),
        }
    }

    /// Attaches an HCA; returns its index.
    pub fn add(&mut self, engine: Engine) -> usize {
        let i = self.hcas.len();
        for (p, port) in engine.ports().iter().enumerate() {
            self.addrs.insert(port.ip, (i, (p + 1) as u8));
        }
        self.hcas.push(engine);
        i
    }

    /// The HCA at `i`.
    pub fn hca(&mut self, i: usize) -> &mut Engine {
        &mut self.hcas[i]
    }

    /// The virtual time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Counters.
    pub fn stats(&self) -> FabricStats {
        self.stats
    }

    /// Cuts (or heals) the link between HCAs `a` and `b` in both directions.
    pub fn partition(&mut self, a: usize, b: usize, cut: bool) {
        for pair in [(a, b), (b, a)] {
            if cut {
                self.cut.insert(pair);
            } else {
                self.cut.remove(&pair);
            }
        }
    }

    fn log(&self, what: &str, from: usize, to: usize, bytes: &[u8]) {
        if self.trace {
            trace_line(self.now, what, &from.to_string(), &to.to_string(), bytes);
        }
    }

    fn schedule(&mut self, from: usize, port: u8, t: crate::engine::Transmit) {
        self.stats.sent += 1;
        self.log("send", from, usize::MAX, &t.bytes);
        let Some(&(to, to_port)) = self.addrs.get(&t.dst.ip()) else {
            self.stats.cut += 1;
            return;
        };
        if self.cut.contains(&(from, to)) {
            self.stats.cut += 1;
            return;
        }
        if self.rng.chance(self.faults.drop_rate) {
            self.stats.dropped += 1;
            self.log("drop", from, to, &t.bytes);
            return;
        }
        let src_ip = self.hcas[from].ports()[usize::from(port) - 1].ip;
        let src = SocketAddr::new(src_ip, Engine::UDP_PORT);
        let copies = if self.rng.chance(self.faults.dup_rate) {
            2
        } else {
            1
        };
        self.stats.duplicated += copies - 1;
        for _ in 0..copies {
            let delay = self
                .rng
                .range(self.faults.delay_ns.0, self.faults.delay_ns.1);
            let mut at = Time(self.now.0 + delay);
            if self.rng.chance(self.faults.reorder_rate) {
                self.stats.reordered += 1;
                at = Time(at.0 + self.faults.reorder_extra_ns);
            } else {
                let last = self.fifo.entry((from, to)).or_default();
                at = at.max(*last);
                *last = at;
            }
            self.seq += 1;
            self.queue.push(Reverse(InFlight {
                at,
                seq: self.seq,
                from,
                hca: to,
                port: to_port,
                src,
                bytes: t.bytes.clone(),
            }));
        }
    }

    fn drain(&mut self) {
        for i in 0..self.hcas.len() {
            while let Some(t) = self.hcas[i].poll_transmit() {
                let port = t.port;
                self.schedule(i, port, t);
            }
        }
    }

    /// Does the next thing due (a delivery or a timer); returns false when nothing is left.
    pub fn step(&mut self) -> bool {
        self.drain();
        let next_packet = self.queue.peek().map(|Reverse(p)| p.at);
        let next_timer = self.hcas.iter().filter_map(|h| h.poll_timeout()).min();
        let at = match (next_packet, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return false,
        };
        self.now = self.now.max(at);
        if next_packet == Some(at) {
            // Everything due now for the same port arrives as one batch, as one receive
            // system call takes what waits (the engine coalesces the batch's ACKs).
            let mut batch = Vec::new();
            while let Some(Reverse(p)) = self.queue.peek() {
                let same = batch
                    .first()
                    .is_none_or(|f: &InFlight| (f.hca, f.port) == (p.hca, p.port));
                if p.at != at || !same {
                    break;
                }
                if let Some(Reverse(p)) = self.queue.pop() {
                    self.stats.delivered += 1;
                    self.log("deliver", p.from, p.hca, &p.bytes);
                    batch.push(p);
                }
            }
            if let Some(first) = batch.first() {
                let (hca, port) = (first.hca, first.port);
                let datagrams = batch.iter().map(|p| (p.src, p.bytes.as_slice()));
                self.hcas[hca].handle_datagrams(self.now, port, datagrams);
            }
        } else {
            for h in &mut self.hcas {
                if h.poll_timeout().is_some_and(|t| t <= at) {
                    h.handle_timeout(at);
                }
            }
        }
        self.drain();
        true
    }

    /// Steps until `done` holds, nothing is left to do, or `limit` of virtual time passes;
    /// returns whether `done` held.
    pub fn run_until(
        &mut self,
        limit: core::time::Duration,
        mut done: impl FnMut(&mut Fabric) -> bool,
    ) -> bool {
        let end = self.now + limit;
        loop {
            if done(self) {
                return true;
            }
            if self.now > end || !self.step() {
                return done(self);
            }
        }
    }
}

/// One datagram's fate on stderr (`HCA_SIM_TRACE`).
fn trace_line(now: Time, what: &str, from: &str, to: &str, bytes: &[u8]) {
    match crate::wire::Packet::parse(bytes) {
        Ok(p) => {
            let aeth = p
                .aeth
                .map(|a| format!(" {:?} msn {}", a.syndrome, a.msn))
                .unwrap_or_default();
            eprintln!(
                "{:>12} {what:<8} {from}->{to} {:?} qp {} psn {:#08x}{}{aeth} len {}",
                now.0,
                p.bth.opcode,
                p.bth.dest_qp,
                p.bth.psn.get(),
                if p.bth.ack_req { " A" } else { "" },
                p.payload.len()
            );
        }
        Err(e) => eprintln!("{:>12} {what:<8} {from}->{to} unparsable: {e}", now.0),
    }
}
