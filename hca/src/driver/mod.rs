//! The driver: runs a device [`Engine`] on real UDP sockets.
//!
//! One thread per port waits (epoll via mio) for datagrams, a wake-up or the engine's next
//! deadline, feeds the engine, and sends what it produced with `sendmmsg`. Verbs are direct
//! calls on [`Hca`]: they lock the engine briefly, and datagrams a post produces are sent
//! from the caller's thread right away (the doorbell), so a post never waits for another
//! thread. Nothing here blocks on I/O except [`Hca::wait_event`], meant for threads that may
//! block. Dropping the [`Hca`] stops the threads and closes the sockets.

mod drops;
pub mod link;
mod socket;

use crate::engine::{Engine, Event, Transmit};
use crate::ids::Guid;
use crate::sim::{SimNet, SimNode};
use crate::time::Time;
use crate::wire::PathMtu;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use socket::{Receiver, Sender};
use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SOCKET: Token = Token(0);
const WAKE: Token = Token(1);
/// How long a port thread sleeps when the engine has no deadline (it is woken earlier by
/// any post that arms a timer).
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// What an [`Hca`] is opened with.
#[derive(Clone, Debug)]
pub struct HcaConfig {
    /// The node GUID.
    pub node_guid: Guid,
    /// One address per port; each port binds `address:udp_port`.
    pub ports: Vec<IpAddr>,
    /// The UDP port: 4791 (RoCEv2) unless a test needs another.
    pub udp_port: u16,
    /// Send runs of equal-size packets as one UDP GSO datagram and receive with GRO. On by
    /// default; off when every packet must be a separate datagram on the capture point
    /// (loopback captures see a GSO send unsegmented).
    pub gso: bool,
    /// The first QPN handed out ([`Engine::set_next_qpn`]): distinct ranges for devices
    /// that share a node GUID.
    pub first_qpn: u32,
    /// Run on a simulated network instead of sockets: no socket, no thread; the net
    /// delivers, fires the timers and supplies the clock ([`crate::sim::SimNet`]).
    pub sim: Option<Arc<SimNet>>,
}

impl HcaConfig {
    /// A device with one port per address, on UDP 4791.
    pub fn new(node_guid: Guid, ports: Vec<IpAddr>) -> Self {
        HcaConfig {
            node_guid,
            ports,
            udp_port: Engine::UDP_PORT,
            gso: true,
            first_qpn: 0,
            sim: None,
        }
    }
}

/// Why an HCA could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// A port's address could not be bound.
    #[error("cannot bind port {port} to {addr}: {source}")]
    Bind {
        /// Port number, 1-based.
        port: u8,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The event loop could not be set up.
    #[error("cannot set up the port event loop: {0}")]
    Poll(#[source] io::Error),
    /// No ports were configured.
    #[error("an HCA needs at least one port")]
    NoPorts,
}

type Handler = Arc<dyn Fn(Event) + Send + Sync>;

/// System-call counters of the driver: how well sends and receives batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// `sendmmsg` calls.
    pub send_calls: u64,
    /// Datagrams those calls sent.
    pub datagrams_sent: u64,
    /// Receive batches that returned data (each a `recvmsg` per datagram until the socket
    /// was empty or the batch full).
    pub recv_calls: u64,
    /// Datagrams those calls received.
    pub datagrams_received: u64,
    /// Port-thread wake-ups (epoll returns).
    pub wakeups: u64,
}

#[derive(Default)]
struct IoCounters {
    send_calls: AtomicU64,
    datagrams_sent: AtomicU64,
    recv_calls: AtomicU64,
    datagrams_received: AtomicU64,
    wakeups: AtomicU64,
}

struct Port {
    senders: Mutex<Sender>,
    pending: Mutex<VecDeque<Transmit>>,
    waker: Waker,
}

/// A port's way out: a UDP socket with its thread, or the simulated net.
enum PortIo {
    Udp(Port),
    Sim(SocketAddr),
}

impl PortIo {
    fn wake(&self) {
        if let PortIo::Udp(p) = self {
            let _ = p.waker.wake();
        }
    }
}

struct Shared {
    engine: Mutex<Engine>,
    gso: bool,
    epoch: Instant,
    ports: Vec<PortIo>,
    net: Option<Arc<SimNet>>,
    stop: AtomicBool,
    events: Mutex<VecDeque<Event>>,
    event_cv: Condvar,
    handler: Mutex<Option<Handler>>,
    io: IoCounters,
}

/// A software HCA running on UDP sockets.
pub struct Hca {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    addrs: Vec<SocketAddr>,
    mtus: Vec<Option<PathMtu>>,
}

impl std::fmt::Debug for Hca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hca").field("ports", &self.addrs).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another thread while it held the lock must not take the device down.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn now(&self) -> Time {
        if let Some(net) = &self.net {
            return net.time();
        }
        Time(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Sends (and empties) what the engine produced, per port; what the socket does not
    /// take waits. The buffers of datagrams sent go to `spent`, for the engine to reuse.
    fn send(&self, out: &mut Vec<Transmit>, spent: &mut Vec<Vec<u8>>) {
        if out.is_empty() {
            return;
        }
        // One port (every daemon's device): the batch as it is, no regrouping.
        if self.ports.len() == 1 && out.iter().all(|t| t.port == 1) {
            self.send_port(0, out, spent);
            return;
        }
        let mut by_port: Vec<Vec<Transmit>> = (0..self.ports.len()).map(|_| Vec::new()).collect();
        for t in out.drain(..) {
            if let Some(v) = by_port.get_mut(usize::from(t.port).wrapping_sub(1)) {
                v.push(t);
            }
        }
        for (i, mut batch) in by_port.into_iter().enumerate() {
            if !batch.is_empty() {
                self.send_port(i, &mut batch, spent);
            }
        }
    }

    /// Sends (and empties) `batch` on port index `i`, behind what already waits there.
    fn send_port(&self, i: usize, batch: &mut Vec<Transmit>, spent: &mut Vec<Vec<u8>>) {
        let port = match &self.ports[i] {
            PortIo::Udp(p) => p,
            PortIo::Sim(src) => {
                if let Some(net) = &self.net {
                    for t in batch.drain(..) {
                        net.send(*src, t.dst, t.bytes);
                    }
                }
                batch.clear();
                return;
            }
        };
        let mut pending = lock(&port.pending);
        if !pending.is_empty() {
            pending.extend(batch.drain(..));
            let _ = port.waker.wake();
            return;
        }
        let sent = self.send_counted(port, batch);
        if sent < batch.len() {
            pending.extend(batch.drain(sent..));
            let _ = port.waker.wake();
        }
        spent.extend(batch.drain(..).map(|t| t.bytes));
    }

    fn send_counted(&self, port: &Port, batch: &mut [Transmit]) -> usize {
        let (sent, calls) = lock(&port.senders)
            .send_batch(batch, self.gso)
            .unwrap_or((batch.len(), 1));
        self.io.send_calls.fetch_add(calls, Ordering::Relaxed);
        self.io
            .datagrams_sent
            .fetch_add(sent as u64, Ordering::Relaxed);
        sent
    }

    /// Delivers (and empties) events to the handler and the waiting queue.
    fn dispatch(&self, events: &mut Vec<Event>) {
        if events.is_empty() {
            return;
        }
        // The handler is called outside the lock: it may run verbs, and those may produce
        // events of their own. With a handler set, events go only to it.
        let handler = lock(&self.handler).clone();
        match handler {
            Some(h) => events.drain(..).for_each(|e| h(e)),
            None => {
                lock(&self.events).extend(events.drain(..));
                self.event_cv.notify_all();
            }
        }
    }

    /// Runs `f` on the engine, then sends its output and dispatches its events outside the
    /// lock; wakes the port threads if `f` armed an earlier deadline.
    fn with<R>(&self, f: impl FnOnce(&mut Engine, Time) -> R) -> R {
        // This thread's lists, taken out while in use: a handler that calls back in (a
        // nested `with`) gets empty ones of its own.
        let mut sc = SCRATCH.with_borrow_mut(std::mem::take);
        let (r, wake) = {
            let mut e = lock(&self.engine);
            for bytes in sc.spent.drain(..) {
                e.recycle(bytes);
            }
            let before = e.poll_timeout();
            let r = f(&mut e, self.now());
            let after = e.poll_timeout();
            sc.out.extend(std::iter::from_fn(|| e.poll_transmit()));
            sc.events.extend(std::iter::from_fn(|| e.poll_event()));
            let wake = match (before, after) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(b), Some(a)) => a < b,
            };
            (r, wake)
        };
        self.send(&mut sc.out, &mut sc.spent);
        self.dispatch(&mut sc.events);
        SCRATCH.with_borrow_mut(|slot| {
            if slot.out.capacity() <= sc.out.capacity() {
                *slot = sc;
            }
        });
        if wake {
            for p in &self.ports {
                p.wake();
            }
        }
        r
    }
}

impl Hca {
    /// Opens a device: binds every port and starts its thread.
    pub fn open(config: HcaConfig) -> Result<Hca, DriverError> {
        if config.ports.is_empty() {
            return Err(DriverError::NoPorts);
        }
        if let Some(net) = config.sim.clone() {
            return Ok(Self::open_sim(config, net));
        }
        let mut sockets = Vec::new();
        let mut polls = Vec::new();
        let mut ports = Vec::new();
        let mut addrs = Vec::new();
        for (i, &ip) in config.ports.iter().enumerate() {
            let addr = SocketAddr::new(ip, config.udp_port);
            let sock = socket::bind(ip, config.udp_port, config.gso).map_err(|source| {
                DriverError::Bind {
                    port: (i + 1) as u8,
                    addr,
                    source,
                }
            })?;
            addrs.push(sock.local_addr().unwrap_or(addr));
            let poll = Poll::new().map_err(DriverError::Poll)?;
            let fd = sock.as_raw_fd();
            poll.registry()
                .register(&mut SourceFd(&fd), SOCKET, Interest::READABLE)
                .map_err(DriverError::Poll)?;
            let waker = Waker::new(poll.registry(), WAKE).map_err(DriverError::Poll)?;
            ports.push(PortIo::Udp(Port {
                senders: Mutex::new(Sender::new(sock.clone())),
                pending: Mutex::new(VecDeque::new()),
                waker,
            }));
            sockets.push(sock);
            polls.push(poll);
        }
        let shared = Arc::new(Shared {
            engine: Mutex::new({
                let mut e = Engine::new(config.node_guid, &config.ports);
                e.set_next_qpn(config.first_qpn);
                e
            }),
            gso: config.gso,
            epoch: Instant::now(),
            ports,
            net: None,
            stop: AtomicBool::new(false),
            events: Mutex::new(VecDeque::new()),
            event_cv: Condvar::new(),
            handler: Mutex::new(None),
            io: IoCounters::default(),
        });
        let mut threads = Vec::new();
        let gro = config.gso;
        for (i, (sock, poll)) in sockets.into_iter().zip(polls).enumerate() {
            let shared = shared.clone();
            let port = (i + 1) as u8;
            let addr = addrs[i];
            let t = std::thread::Builder::new()
                .name(format!("hca-port{port}"))
                .spawn(move || port_thread(&shared, port, Receiver::new(sock, gro), poll, addr))
                .map_err(DriverError::Poll)?;
            threads.push(t);
        }
        let mtus = addrs.iter().map(|a| link::active_mtu(a.ip())).collect();
        Ok(Hca {
            shared,
            threads,
            addrs,
            mtus,
        })
    }

    /// A device on the simulated net: its ports attached at their addresses, no socket,
    /// no thread, no link MTU (a passive side follows the peer's offer).
    fn open_sim(config: HcaConfig, net: Arc<SimNet>) -> Hca {
        let addrs: Vec<SocketAddr> = config
            .ports
            .iter()
            .map(|&ip| SocketAddr::new(ip, Engine::UDP_PORT))
            .collect();
        let shared = Arc::new(Shared {
            engine: Mutex::new({
                let mut e = Engine::new(config.node_guid, &config.ports);
                e.set_next_qpn(config.first_qpn);
                e
            }),
            gso: false,
            epoch: Instant::now(),
            ports: addrs.iter().map(|&a| PortIo::Sim(a)).collect(),
            net: Some(net.clone()),
            stop: AtomicBool::new(false),
            events: Mutex::new(VecDeque::new()),
            event_cv: Condvar::new(),
            handler: Mutex::new(None),
            io: IoCounters::default(),
        });
        let node: Arc<dyn SimNode> = shared.clone();
        for (i, a) in addrs.iter().enumerate() {
            net.attach(a.ip(), (i + 1) as u8, Arc::downgrade(&node));
        }
        Hca {
            shared,
            threads: Vec::new(),
            mtus: vec![None; addrs.len()],
            addrs,
        }
    }

    /// The simulated net the device runs on, if it does.
    pub fn sim_net(&self) -> Option<&Arc<SimNet>> {
        self.shared.net.as_ref()
    }

    /// The bound address of each port.
    pub fn port_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Port `port`'s (1-based) active MTU: what its link carries, as rxe derives it
    /// ([`link::active_mtu`], read when the device opened); [`link::FALLBACK_MTU`] when
    /// the link's MTU could not be read or the port does not exist.
    pub fn active_mtu(&self, port: u8) -> PathMtu {
        self.link_mtu(port).unwrap_or(link::FALLBACK_MTU)
    }

    /// Port `port`'s active MTU if its link's MTU was read; `None` if not (a passive side
    /// then follows the peer's offer as it is: a path MTU below the peer's breaks rxe,
    /// which wants every middle packet exactly one path MTU long).
    pub fn link_mtu(&self, port: u8) -> Option<PathMtu> {
        usize::from(port)
            .checked_sub(1)
            .and_then(|i| self.mtus.get(i).copied())
            .flatten()
    }

    /// The device's clock (what [`Hca::with`] passes its verbs), without taking the
    /// engine's lock.
    pub fn now(&self) -> Time {
        self.shared.now()
    }

    /// Runs a verb: `f` gets the engine and the current time. Datagrams it produces are sent
    /// before this returns; events go to the handler and to [`Hca::poll_event`].
    pub fn with<R>(&self, f: impl FnOnce(&mut Engine, Time) -> R) -> R {
        self.shared.with(f)
    }

    /// Calls `handler` for every asynchronous event, from the thread that produced it
    /// (a port thread or a verb's caller), outside every lock of the HCA; it must not block.
    /// While a handler is set, events are not queued for [`Hca::poll_event`].
    pub fn set_event_handler(&self, handler: impl Fn(Event) + Send + Sync + 'static) {
        *lock(&self.shared.handler) = Some(Arc::new(handler));
    }

    /// How the port threads and doorbells used the kernel so far.
    pub fn io_stats(&self) -> IoStats {
        let c = &self.shared.io;
        IoStats {
            send_calls: c.send_calls.load(Ordering::Relaxed),
            datagrams_sent: c.datagrams_sent.load(Ordering::Relaxed),
            recv_calls: c.recv_calls.load(Ordering::Relaxed),
            datagrams_received: c.datagrams_received.load(Ordering::Relaxed),
            wakeups: c.wakeups.load(Ordering::Relaxed),
        }
    }

    /// The next queued event, if any.
    pub fn poll_event(&self) -> Option<Event> {
        lock(&self.shared.events).pop_front()
    }

    /// Waits up to `timeout` for an event (for threads that may block).
    pub fn wait_event(&self, timeout: Duration) -> Option<Event> {
        let deadline = Instant::now() + timeout;
        let mut q = lock(&self.shared.events);
        loop {
            if let Some(e) = q.pop_front() {
                return Some(e);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            q = self
                .shared
                .event_cv
                .wait_timeout(q, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

impl Drop for Hca {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for p in &self.shared.ports {
            p.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One port's loop: receive, fire timers, flush what waits, sleep until the next of a
/// datagram, a wake-up or the engine's deadline.
fn port_thread(shared: &Shared, port: u8, mut rx: Receiver, mut poll: Poll, addr: SocketAddr) {
    let mut events = Events::with_capacity(8);
    let idx = usize::from(port) - 1;
    let mut drops = drops::DropLog::new(addr);
    let fd = rx.raw_fd();
    // Whether the socket is registered for writability too: only while datagrams wait for
    // room in its send buffer (the readiness event, not a timer, sends them on).
    let mut writable = false;
    while !shared.stop.load(Ordering::SeqCst) {
        let deadline = lock(&shared.engine).poll_timeout();
        let wait = deadline.map(|t| Duration::from_nanos(t.0.saturating_sub(shared.now().0)));
        let wait = wait.unwrap_or(IDLE_WAIT).min(IDLE_WAIT);
        let want = match &shared.ports[idx] {
            PortIo::Udp(p) => !lock(&p.pending).is_empty(),
            PortIo::Sim(_) => false,
        };
        if want != writable {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            // Re-registering reports the current readiness again (edge-triggered epoll
            // re-arms on EPOLL_CTL_MOD), so room that appeared meanwhile is not missed.
            if poll
                .registry()
                .reregister(&mut SourceFd(&fd), SOCKET, interest)
                .is_ok()
            {
                writable = want;
            }
        }
        // Should re-registration fail, a short wait keeps pending datagrams moving.
        let wait = if want && !writable {
            wait.min(Duration::from_millis(1))
        } else {
            wait
        };
        if poll.poll(&mut events, Some(wait)).is_err() {
            continue; // EINTR
        }
        shared.io.wakeups.fetch_add(1, Ordering::Relaxed);
        // Receive everything waiting: the system call outside the engine lock, then one lock
        // per batch.
        loop {
            let n = rx.fill().unwrap_or(0);
            if n == 0 {
                break;
            }
            shared.io.recv_calls.fetch_add(1, Ordering::Relaxed);
            shared
                .io
                .datagrams_received
                .fetch_add(n as u64, Ordering::Relaxed);
            // One batch: the ACKs it asks for are coalesced per QP.
            shared.with(|e, now| e.handle_datagrams(now, port, rx.datagrams()));
            if rx.drained() {
                break;
            }
        }
        let stats = shared.with(|e, now| {
            if e.poll_timeout().is_some_and(|t| t <= now) {
                e.handle_timeout(now);
            }
            e.port_stats(port)
        });
        if let Some(s) = stats {
            drops.check(Instant::now(), &s);
        }
        flush_pending(shared, idx);
    }
}

/// Sends what an earlier send could not.
fn flush_pending(shared: &Shared, idx: usize) {
    let PortIo::Udp(port) = &shared.ports[idx] else {
        return;
    };
    let mut pending = lock(&port.pending);
    if pending.is_empty() {
        return;
    }
    let sent = shared.send_counted(port, pending.make_contiguous());
    pending.drain(..sent);
}

/// A thread's lists for [`Shared::with`], kept between calls so that a call allocates
/// nothing in the steady state: the engine's output and events, and the buffers of sent
/// datagrams on their way back to the engine (returned at the thread's next call).
#[derive(Default)]
struct Scratch {
    out: Vec<Transmit>,
    events: Vec<Event>,
    spent: Vec<Vec<u8>>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

impl SimNode for Shared {
    fn deliver(&self, port: u8, datagrams: &[(SocketAddr, Vec<u8>)]) {
        self.with(|e, now| {
            e.handle_datagrams(now, port, datagrams.iter().map(|(a, b)| (*a, b.as_slice())))
        });
    }

    fn next_timer(&self) -> Option<Time> {
        lock(&self.engine).poll_timeout()
    }

    fn fire_timers(&self, now: Time) {
        self.with(|e, _| {
            if e.poll_timeout().is_some_and(|t| t <= now) {
                e.handle_timeout(now);
            }
        });
    }
}
