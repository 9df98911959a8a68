//! The userspace impairer: a thread that enters the wire namespace (`setns` is per thread)
//! and relays Ethernet frames between the two ends of each link there (`wa{i}` ⇄ `wb{i}`)
//! through [`Netem`], with one packet socket (AF_PACKET, SOCK_RAW, every protocol).
//!
//! The socket is left unbound: nix builds a `sockaddr_ll` only from one the kernel gave
//! (no `unsafe` here), so each interface's address is learnt from a frame received on it
//! and used to send to that interface — until an end has spoken, frames for it are dropped
//! and counted (`unlearned`). Frames the socket sees leaving (PACKET_OUTGOING: its own
//! sends) are skipped. The thread sleeps in `ppoll` until a frame, the next due time or
//! the stop pipe; everything it drops is counted in [`Stats`].

use super::checksum::{self, Sum};
use super::model::{Counters, Impairment, Netem};
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sched::{CloneFlags, setns};
use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, LinkAddr, MsgFlags, SockFlag, SockProtocol, SockType,
    recvmsg, sendto, setsockopt, socket, sockopt,
};
use nix::sys::time::TimeSpec;
use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `PACKET_OUTGOING` (linux/if_packet.h): a frame this host sent.
const PACKET_OUTGOING: u8 = 4;
/// Frames taken from the socket before the due ones are sent.
const BATCH: usize = 64;
/// The socket's receive buffer: room for bursts while the thread is descheduled.
const RCVBUF_BYTES: usize = 8 << 20;

/// Everything the impairer did, and everything it dropped besides `loss`.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Per direction: link `i`'s a→b is `2i`, b→a `2i + 1`.
    pub dirs: Vec<Counters>,
    /// Copies dropped because their interface had not spoken yet (its address unknown).
    pub unlearned: u64,
    /// Copies the kernel refused to send.
    pub send_errors: u64,
    /// The last send error.
    pub last_send_error: Option<String>,
    /// Frames the kernel dropped before the socket (its receive queue full).
    pub kernel_drops: u64,
    /// Frames larger than the receive buffer (dropped).
    pub truncated: u64,
    /// Frames on interfaces that are no link's end (e.g. lo; skipped).
    pub foreign: u64,
    /// TCP/UDP checksums completed (left partial by the sending veth).
    pub sums_written: u64,
    /// IPv4 TCP/UDP frames too short for their headers (forwarded as they were).
    pub malformed: u64,
    /// The most copies queued at once.
    pub max_queued: usize,
    /// Why the thread stopped early, if it did.
    pub failed: Option<String>,
}

impl Stats {
    /// Link `i`'s two directions.
    pub fn link(&self, i: usize) -> (Counters, Counters) {
        (self.dirs[2 * i], self.dirs[2 * i + 1])
    }
}

/// What the test and the thread share.
#[derive(Debug)]
struct Shared {
    impairment: Mutex<Impairment>,
    stats: Mutex<Stats>,
}

/// The impairer's thread; stopped and joined on drop.
#[derive(Debug)]
pub struct Impairer {
    shared: Arc<Shared>,
    /// The stop pipe's write end: closing it wakes the thread to end.
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

/// One end of a link in the wire namespace.
#[derive(Debug)]
struct End {
    ifindex: usize,
    /// Its address, learnt from a frame received on it.
    addr: Option<LinkAddr>,
}

impl Impairer {
    /// Starts relaying in namespace `netns` between the ends of each of `links` (interface
    /// names there), with no impairment yet; `seed` seeds every direction's decisions.
    /// Panics if the thread cannot enter the namespace or open its socket.
    pub fn start(netns: &str, links: &[(String, String)], seed: u64) -> Impairer {
        let shared = Arc::new(Shared {
            impairment: Mutex::new(Impairment::NONE),
            stats: Mutex::new(Stats::default()),
        });
        let (stop_rx, stop_tx) = nix::unistd::pipe().expect("the stop pipe");
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let path = format!("/run/netns/{netns}");
        let names: Vec<String> = links
            .iter()
            .flat_map(|(a, b)| [a.clone(), b.clone()])
            .collect();
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("impairer".into())
                .spawn(move || thread_main(&path, &names, seed, &shared, &stop_rx, &ready_tx))
                .expect("spawn the impairer")
        };
        let imp = Impairer {
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => imp,
            Ok(Err(e)) => panic!("the impairer could not start: {e}"),
            Err(e) => panic!("the impairer did not start within 10 s: {e}"),
        }
    }

    /// Applies `imp` to every direction from the next frame on.
    pub fn set(&self, imp: Impairment) {
        *self
            .shared
            .impairment
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = imp;
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.shared
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Impairer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: enters the namespace and opens the socket, tells `ready` whether it could,
/// then relays until the stop pipe closes (a failure goes to the stats).
fn thread_main(
    path: &str,
    names: &[String],
    seed: u64,
    shared: &Arc<Shared>,
    stop: &OwnedFd,
    ready: &mpsc::SyncSender<Result<(), String>>,
) {
    let (sock, ends) = match open(path, names) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    if let Err(e) = Relay::new(sock, ends, seed, shared.clone()).run(stop) {
        shared
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failed = Some(e);
    }
}

/// Enters namespace `path` (this thread only), opens the packet socket and finds each
/// named interface.
fn open(path: &str, names: &[String]) -> Result<(OwnedFd, Vec<End>), String> {
    let ns = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    setns(ns.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns {path}: {e}"))?;
    let sock = socket(
        AddressFamily::Packet,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::EthAll,
    )
    .map_err(|e| format!("packet socket: {e}"))?;
    setsockopt(&sock, sockopt::RcvBufForce, &RCVBUF_BYTES)
        .map_err(|e| format!("SO_RCVBUFFORCE: {e}"))?;
    // Each receive then reports the socket's drops so far.
    setsockopt(&sock, sockopt::RxqOvfl, &1).map_err(|e| format!("SO_RXQ_OVFL: {e}"))?;
    let ends = names
        .iter()
        .map(|n| {
            nix::net::if_::if_nametoindex(n.as_str())
                .map(|i| End {
                    ifindex: i as usize,
                    addr: None,
                })
                .map_err(|e| format!("interface {n}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    Ok((sock, ends))
}

/// The relay loop's state. End `e` receives direction `e`'s frames and sends direction
/// `e ^ 1`'s.
struct Relay {
    sock: OwnedFd,
    ends: Vec<End>,
    netem: Netem,
    shared: Arc<Shared>,
    stats: Stats,
    buf: Vec<u8>,
    /// Room for the drop count each receive carries (SO_RXQ_OVFL).
    cmsg: Vec<u8>,
}

impl Relay {
    fn new(sock: OwnedFd, ends: Vec<End>, seed: u64, shared: Arc<Shared>) -> Relay {
        let n = ends.len();
        Relay {
            sock,
            ends,
            netem: Netem::new(seed, n),
            shared,
            stats: Stats {
                dirs: vec![Counters::default(); n],
                ..Stats::default()
            },
            buf: vec![0; 65_536],
            cmsg: nix::cmsg_space!(u32),
        }
    }

    /// Receives, sends what is due, sleeps; until the stop pipe closes.
    fn run(&mut self, stop: &OwnedFd) -> Result<(), String> {
        loop {
            let imp = *self
                .shared
                .impairment
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.netem.set(imp);
            for _ in 0..BATCH {
                if !self.receive()? {
                    break;
                }
            }
            self.send_due();
            self.publish();
            let wait = self
                .netem
                .poll_timeout()
                .map(|t| t.saturating_duration_since(Instant::now()));
            if wait == Some(Duration::ZERO) {
                continue;
            }
            let mut fds = [
                PollFd::new(self.sock.as_fd(), PollFlags::POLLIN),
                PollFd::new(stop.as_fd(), PollFlags::POLLIN),
            ];
            match ppoll(&mut fds, wait.map(TimeSpec::from), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(format!("ppoll: {e}")),
            }
            if fds[1].revents().is_some_and(|r| !r.is_empty()) {
                return Ok(());
            }
        }
    }

    /// Takes one frame from the socket if there is one (false: none waiting).
    fn receive(&mut self) -> Result<bool, String> {
        let (len, from, truncated) = {
            let mut iov = [IoSliceMut::new(&mut self.buf)];
            let msg = match recvmsg::<LinkAddr>(
                self.sock.as_raw_fd(),
                &mut iov,
                Some(&mut self.cmsg),
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(m) => m,
                Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => return Ok(false),
                Err(e) => return Err(format!("recvmsg: {e}")),
            };
            if let Ok(cmsgs) = msg.cmsgs() {
                for c in cmsgs {
                    if let ControlMessageOwned::RxqOvfl(n) = c {
                        self.stats.kernel_drops = u64::from(n);
                    }
                }
            }
            (
                msg.bytes,
                msg.address,
                msg.flags.contains(MsgFlags::MSG_TRUNC),
            )
        };
        let Some(from) = from else {
            return Ok(true);
        };
        if from.pkttype() == PACKET_OUTGOING {
            return Ok(true);
        }
        let Some(dir) = self.ends.iter().position(|e| e.ifindex == from.ifindex()) else {
            self.stats.foreign += 1;
            return Ok(true);
        };
        self.ends[dir].addr = Some(from);
        if truncated {
            self.stats.truncated += 1;
            return Ok(true);
        }
        let frame = &mut self.buf[..len];
        match checksum::complete(frame) {
            Sum::Written => self.stats.sums_written += 1,
            Sum::Malformed => self.stats.malformed += 1,
            Sum::Right | Sum::Untouched => {}
        }
        self.netem.handle_frame(Instant::now(), dir, frame);
        Ok(true)
    }

    /// Sends every copy now due to the other end of its link.
    fn send_due(&mut self) {
        let now = Instant::now();
        while let Some((dir, frame)) = self.netem.poll_transmit(now) {
            let Some(to) = self.ends[dir ^ 1].addr else {
                self.stats.unlearned += 1;
                continue;
            };
            if let Err(e) = sendto(self.sock.as_raw_fd(), &frame, &to, MsgFlags::empty()) {
                self.stats.send_errors += 1;
                self.stats.last_send_error = Some(format!("{e} ({} bytes)", frame.len()));
            }
        }
    }

    /// Copies the counters where the test reads them.
    fn publish(&mut self) {
        for (d, c) in self.stats.dirs.iter_mut().enumerate() {
            *c = self.netem.counters(d);
        }
        self.stats.max_queued = self.netem.max_queued;
        let mut s = self
            .shared
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        s.clone_from(&self.stats);
    }
}
