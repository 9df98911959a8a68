//! [`SimNet`]: the simulated network whole devices ([`crate::driver::Hca`] opened with
//! [`crate::driver::HcaConfig::sim`]) run on, and the virtual clock of a simulated run.
//!
//! A device on the net has no socket and no thread: what it sends is scheduled here, and
//! the net's owner delivers it, fires the devices' timers and runs the queued work of the
//! layers above (a channel adapter's completion dispatcher registers as a [`SimTask`]) from
//! one thread, in time order, by [`SimNet::settle`] and [`SimNet::advance_to`]. Every layer
//! reads the time from the net (it is a [`Clock`]), so nothing sleeps: time moves only when
//! the owner moves it, and the run is a function of the seed.
//!
//! Faults are the [`FaultConfig`] knobs (loss, duplication, reordering, delay), cut links
//! between two addresses and links taken down (flaps); every datagram's fate is counted.

use super::{FabricStats, FaultConfig, Rng};
use crate::time::{Clock, Time};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// A device on the net, as the net drives it.
pub trait SimNode: Send + Sync {
    /// Hands port `port` the datagrams that arrived for it now, as one batch.
    fn deliver(&self, port: u8, datagrams: &[(SocketAddr, Vec<u8>)]);
    /// The device's next timer.
    fn next_timer(&self) -> Option<Time>;
    /// Fires the timers due at `now`.
    fn fire_timers(&self, now: Time);
}

/// Zero-time work a layer queued (a channel adapter's verb completions and events): run
/// by [`SimNet::settle`] until none is left.
pub trait SimTask: Send + Sync {
    /// Runs what is queued; how much that was.
    fn run_queued(&self) -> usize;
}

/// A datagram on its way.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Time,
    seq: u64,
    to: IpAddr,
    src: SocketAddr,
    bytes: Vec<u8>,
}

struct State {
    faults: FaultConfig,
    rng: Rng,
    seq: u64,
    queue: BinaryHeap<Reverse<InFlight>>,
    /// Address → device and port; a dropped device's entry is dead until re-attached.
    nodes: BTreeMap<IpAddr, (Weak<dyn SimNode>, u8)>,
    tasks: Vec<Weak<dyn SimTask>>,
    cut: BTreeSet<(IpAddr, IpAddr)>,
    down: BTreeSet<IpAddr>,
    /// Latest delivery time per (from, to): links keep order unless a fault reorders.
    fifo: BTreeMap<(IpAddr, IpAddr), Time>,
    stats: FabricStats,
    trace: bool,
}

/// The simulated network and virtual clock (see the module doc).
pub struct SimNet {
    state: Mutex<State>,
    now: AtomicU64,
    base: std::time::Instant,
}

impl std::fmt::Debug for SimNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimNet")
            .field("now", &self.time())
            .finish_non_exhaustive()
    }
}

impl Clock for SimNet {
    fn now(&self) -> std::time::Instant {
        self.base + std::time::Duration::from_nanos(self.now.load(Ordering::Acquire))
    }
}

impl SimNet {
    /// An empty net whose randomness comes from `seed`; its clock starts at 1 ms.
    pub fn new(seed: u64, faults: FaultConfig) -> Arc<SimNet> {
        Arc::new(SimNet {
            state: Mutex::new(State {
                faults,
                rng: Rng::new(seed),
                seq: 0,
                queue: BinaryHeap::new(),
                nodes: BTreeMap::new(),
                tasks: Vec::new(),
                cut: BTreeSet::new(),
                down: BTreeSet::new(),
                fifo: BTreeMap::new(),
                stats: FabricStats::default(),
                trace: std::env::var_os("HCA_SIM_TRACE").is_some(),
            }),
            now: AtomicU64::new(1_000_000),
            base: std::time::Instant::now(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The virtual time.
    pub fn time(&self) -> Time {
        Time(self.now.load(Ordering::Acquire))
    }

    /// The `Instant` a virtual time stands for (what [`Clock::now`] returns at it).
    pub fn instant_at(&self, t: Time) -> std::time::Instant {
        self.base + std::time::Duration::from_nanos(t.0)
    }

    /// The virtual time an `Instant` of this net's clock stands for.
    pub fn time_of(&self, i: std::time::Instant) -> Time {
        Time(u64::try_from(i.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX))
    }

    /// Moves the clock forward to `t` (never back).
    pub fn advance_to(&self, t: Time) {
        self.now.fetch_max(t.0, Ordering::AcqRel);
    }

    /// A random value from the net's generator (for the owner's own seeded choices, so one
    /// seed drives the whole run).
    pub fn random(&self) -> u64 {
        self.lock().rng.next_u64()
    }

    /// The fault knobs now.
    pub fn faults(&self) -> FaultConfig {
        self.lock().faults
    }

    /// Changes the fault knobs.
    pub fn set_faults(&self, faults: FaultConfig) {
        self.lock().faults = faults;
    }

    /// Cuts (or heals) the link between addresses `a` and `b`, both directions.
    pub fn cut(&self, a: IpAddr, b: IpAddr, cut: bool) {
        let mut s = self.lock();
        for pair in [(a, b), (b, a)] {
            if cut {
                s.cut.insert(pair);
            } else {
                s.cut.remove(&pair);
            }
        }
    }

    /// Takes the link of address `ip` down (everything to or from it is lost) or up.
    pub fn set_link(&self, ip: IpAddr, up: bool) {
        let mut s = self.lock();
        if up {
            s.down.remove(&ip);
        } else {
            s.down.insert(ip);
        }
    }

    /// What the net did so far.
    pub fn stats(&self) -> FabricStats {
        self.lock().stats
    }

    /// Datagrams in flight.
    pub fn in_flight(&self) -> usize {
        self.lock().queue.len()
    }

    /// The addresses whose device is still alive (its last owner has not dropped it): after
    /// a simulation has dropped everything it built, any left are kept by a reference
    /// cycle — a leak.
    pub fn live_devices(&self) -> Vec<IpAddr> {
        self.lock()
            .nodes
            .iter()
            .filter(|(_, (n, _))| n.strong_count() > 0)
            .map(|(ip, _)| *ip)
            .collect()
    }

    /// Attaches a device's port `port` at address `ip` (replacing a dead device there).
    pub fn attach(&self, ip: IpAddr, port: u8, node: Weak<dyn SimNode>) {
        self.lock().nodes.insert(ip, (node, port));
    }

    /// Registers queued work to run in [`SimNet::settle`].
    pub fn register(&self, task: Weak<dyn SimTask>) {
        let mut s = self.lock();
        s.tasks.retain(|t| t.strong_count() > 0);
        s.tasks.push(task);
    }

    /// Schedules a datagram from `src` to `dst` (a device's send).
    pub fn send(&self, src: SocketAddr, dst: SocketAddr, mut bytes: Vec<u8>) {
        let now = self.time();
        let mut s = self.lock();
        s.stats.sent += 1;
        let (from, to) = (src.ip(), dst.ip());
        let alive = s.nodes.get(&to).is_some_and(|(n, _)| n.strong_count() > 0);
        if !alive || s.cut.contains(&(from, to)) || s.down.contains(&from) || s.down.contains(&to) {
            s.stats.cut += 1;
            trace(&s, now, "cut", from, to, &bytes);
            return;
        }
        let faults = s.faults;
        if s.rng.chance(faults.drop_rate) {
            s.stats.dropped += 1;
            trace(&s, now, "drop", from, to, &bytes);
            return;
        }
        let copies = if s.rng.chance(faults.dup_rate) { 2 } else { 1 };
        s.stats.duplicated += copies - 1;
        for c in 0..copies {
            let delay = s.rng.range(faults.delay_ns.0, faults.delay_ns.1);
            let mut at = Time(now.0 + delay);
            if s.rng.chance(faults.reorder_rate) {
                s.stats.reordered += 1;
                at = Time(at.0 + faults.reorder_extra_ns);
            } else {
                let last = s.fifo.entry((from, to)).or_default();
                at = at.max(*last);
                *last = at;
            }
            s.seq += 1;
            let seq = s.seq;
            let bytes = if c + 1 == copies {
                std::mem::take(&mut bytes)
            } else {
                bytes.clone()
            };
            s.queue.push(Reverse(InFlight {
                at,
                seq,
                to,
                src,
                bytes,
            }));
        }
    }

    /// When the net next has something to do (a delivery or a device timer).
    pub fn next_event(&self) -> Option<Time> {
        let (packet, nodes) = {
            let s = self.lock();
            let nodes: Vec<Arc<dyn SimNode>> = live_nodes(&s);
            (s.queue.peek().map(|Reverse(p)| p.at), nodes)
        };
        let timer = nodes.iter().filter_map(|n| n.next_timer()).min();
        match (packet, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Does everything due at the current time — deliveries, device timers, queued work —
    /// until nothing is left; how much that was.
    pub fn settle(&self) -> usize {
        let mut total = 0;
        loop {
            let mut n = self.run_tasks();
            n += self.deliver_due();
            n += self.fire_timers();
            if n == 0 {
                return total;
            }
            total += n;
        }
    }

    fn run_tasks(&self) -> usize {
        let tasks: Vec<Arc<dyn SimTask>> =
            self.lock().tasks.iter().filter_map(Weak::upgrade).collect();
        tasks.iter().map(|t| t.run_queued()).sum()
    }

    /// Delivers every datagram due now, batched per destination as one receive call
    /// would take them.
    fn deliver_due(&self) -> usize {
        let now = self.time();
        let mut n = 0;
        loop {
            let (node, port, batch) = {
                let mut s = self.lock();
                let Some(Reverse(first)) = s.queue.peek() else {
                    return n;
                };
                if first.at > now {
                    return n;
                }
                let to = first.to;
                let mut batch = Vec::new();
                while let Some(Reverse(p)) = s.queue.peek() {
                    if p.at > now || p.to != to {
                        break;
                    }
                    if let Some(Reverse(p)) = s.queue.pop() {
                        batch.push((p.src, p.bytes));
                    }
                }
                let target = s
                    .nodes
                    .get(&to)
                    .and_then(|(w, port)| Some((w.upgrade()?, *port)));
                let Some((node, port)) = target.filter(|_| !s.down.contains(&to)) else {
                    s.stats.cut += batch.len() as u64;
                    continue;
                };
                s.stats.delivered += batch.len() as u64;
                for (src, bytes) in &batch {
                    trace(&s, now, "deliver", src.ip(), to, bytes);
                }
                (node, port, batch)
            };
            n += batch.len();
            node.deliver(port, &batch);
        }
    }

    fn fire_timers(&self) -> usize {
        let now = self.time();
        let nodes = live_nodes(&self.lock());
        let mut n = 0;
        for node in nodes {
            if node.next_timer().is_some_and(|t| t <= now) {
                node.fire_timers(now);
                n += 1;
            }
        }
        n
    }
}

/// The devices attached and alive, each once, in address order.
fn live_nodes(s: &State) -> Vec<Arc<dyn SimNode>> {
    let mut out: Vec<Arc<dyn SimNode>> = Vec::new();
    for (w, _) in s.nodes.values() {
        if let Some(n) = w.upgrade()
            && !out.iter().any(|o| Arc::ptr_eq(o, &n))
        {
            out.push(n);
        }
    }
    out
}

fn trace(s: &State, now: Time, what: &str, from: IpAddr, to: IpAddr, bytes: &[u8]) {
    if s.trace {
        super::trace_line(now, what, &from.to_string(), &to.to_string(), bytes);
    }
}
