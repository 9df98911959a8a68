//! The UDP side of a port: a non-blocking socket on `ip:4791` with batched send
//! (`sendmmsg`, GSO) and receive (`recvmsg` until empty, GRO) through nix's safe
//! wrappers, sized buffers, and DF set so the
//! kernel writes IP ID 0 (what the ICRC assumes for IPv4; see `wire::icrc`).

use crate::engine::Transmit;
use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, MultiHeaders, SockaddrStorage, recvmsg,
    sendmmsg, sendto, setsockopt, sockopt,
};
use nix::{setsockopt_impl, sockopt_impl};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

/// Datagrams per `sendmmsg` call and per receive batch.
pub(crate) const BATCH: usize = 32;
/// Largest receive: a GRO super-datagram (64 KiB) holding several packets.
pub(crate) const MAX_DATAGRAM: usize = 65_536;
/// Most packets one GSO send carries (the kernel's UDP_MAX_SEGMENTS is 64).
const MAX_GSO_SEGMENTS: usize = 64;
/// Most bytes one GSO send carries (a UDP datagram's limit, with room for headers).
const MAX_GSO_BYTES: usize = 65_000;
/// Socket buffer size asked for (the kernel caps it at net.core.{r,w}mem_max unless root).
const SOCK_BUF_BYTES: usize = 8 << 20;

sockopt_impl!(
    /// `IP_MTU_DISCOVER`: with `IP_PMTUDISC_DO` every datagram has DF set, and the kernel
    /// then writes IP ID 0 on an unconnected socket — the ID the ICRC assumes (rxe does the
    /// same). Without it the kernel numbers datagrams and a peer computing the ICRC from the
    /// real header (rxe, tshark + scapy) would reject them.
    IpMtuDiscover, SetOnly, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::c_int
);
sockopt_impl!(
    /// `IPV6_MTU_DISCOVER`, the same for IPv6 (no ID there; never fragment either).
    Ipv6MtuDiscover, SetOnly, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::c_int
);

/// Opens `ip:port` (port 4791 outside tests): non-blocking, large buffers, DF set.
pub(crate) fn bind(ip: IpAddr, port: u16, gro: bool) -> io::Result<Arc<UdpSocket>> {
    let socket = UdpSocket::bind(SocketAddr::new(ip, port))?;
    socket.set_nonblocking(true)?;
    let fd = socket.as_fd();
    match ip {
        IpAddr::V4(_) => setsockopt(&fd, IpMtuDiscover, &libc::IP_PMTUDISC_DO)?,
        IpAddr::V6(_) => setsockopt(&fd, Ipv6MtuDiscover, &libc::IPV6_PMTUDISC_DO)?,
    }
    if gro {
        // Coalesced receives: a GSO burst from our own stack arrives as one buffer.
        setsockopt(&fd, sockopt::UdpGroSegment, &true)?;
    }
    // Larger buffers keep a burst of MTU packets from being dropped on loopback; as root the
    // *Force variants exceed rmem_max. Failure only costs performance.
    if setsockopt(&fd, sockopt::RcvBufForce, &SOCK_BUF_BYTES).is_err() {
        let _ = setsockopt(&fd, sockopt::RcvBuf, &SOCK_BUF_BYTES);
    }
    if setsockopt(&fd, sockopt::SndBufForce, &SOCK_BUF_BYTES).is_err() {
        let _ = setsockopt(&fd, sockopt::SndBuf, &SOCK_BUF_BYTES);
    }
    Ok(Arc::new(socket))
}

/// The receive side of a port, owned by its thread: `recvmsg` calls into its buffers until
/// the socket is empty or [`BATCH`] arrived, handed to the engine as one batch (its ACKs are
/// coalesced per batch). A call per datagram (a GRO buffer brings a whole GSO run in one),
/// and nothing allocated: nix's `recvmmsg` would save calls under load but rebuilds its
/// headers after every productive call (it leaves each `msg_controllen` as the kernel set
/// it, 0 after a datagram without GRO) — 4 allocations a batch — and measured no faster
/// (docs/hca.md, "Performance").
pub(crate) struct Receiver {
    socket: Arc<UdpSocket>,
    bufs: Box<[Vec<u8>; BATCH]>,
    /// The control buffer: room for the GRO segment size.
    cmsg: Vec<u8>,
    /// Whether the socket coalesces (UDP GRO).
    gro: bool,
    /// The last fill stopped because the socket had nothing more.
    drained: bool,
    got: Vec<(usize, Option<SocketAddr>, usize)>,
}

impl Receiver {
    /// The socket's descriptor (for readiness registration).
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.socket.as_raw_fd()
    }

    /// Receive buffers for `socket`.
    pub(crate) fn new(socket: Arc<UdpSocket>, gro: bool) -> Self {
        let space = if gro {
            nix::cmsg_space!(i32).capacity()
        } else {
            0
        };
        Receiver {
            socket,
            bufs: Box::new(std::array::from_fn(|_| vec![0u8; MAX_DATAGRAM])),
            cmsg: vec![0u8; space],
            gro,
            drained: false,
            got: Vec::with_capacity(BATCH),
        }
    }

    /// Receives what is waiting, up to [`BATCH`] datagrams, into the buffers (no lock
    /// needed); returns how many arrived (0 when none were waiting).
    /// [`Receiver::datagrams`] hands them out; [`Receiver::drained`] says whether the
    /// socket is empty now.
    pub(crate) fn fill(&mut self) -> io::Result<usize> {
        self.got.clear();
        self.drained = false;
        while self.got.len() < BATCH {
            if !self.one()? {
                self.drained = true;
                break;
            }
        }
        Ok(self.got.len())
    }

    /// Whether the last [`Receiver::fill`] emptied the socket (no need to call it again
    /// before the next readiness event).
    pub(crate) fn drained(&self) -> bool {
        self.drained
    }

    /// One `recvmsg` into the next buffer; false when nothing was waiting.
    fn one(&mut self) -> io::Result<bool> {
        let fd = self.socket.as_raw_fd();
        let k = self.got.len();
        let mut iov = [IoSliceMut::new(&mut self.bufs[k])];
        let cmsg = if self.gro {
            Some(self.cmsg.as_mut_slice())
        } else {
            None
        };
        match recvmsg::<SockaddrStorage>(fd, &mut iov, cmsg, MsgFlags::MSG_DONTWAIT) {
            Ok(r) => {
                let src = r.address.and_then(|a| to_std(&a));
                // A GRO buffer says the size of its segments; a plain datagram is one.
                let seg = gro_segment(r.cmsgs().ok()).unwrap_or(r.bytes.max(1));
                self.got.push((r.bytes, src, seg));
                Ok(true)
            }
            Err(nix::errno::Errno::EAGAIN) => Ok(false),
            Err(e) => Err(io::Error::from(e)),
        }
    }

    /// The packets the last [`Receiver::fill`] received: each GRO buffer split into its
    /// segments (each carried its own IPv4 ID, which the engine's ICRC check solves for).
    pub(crate) fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> {
        self.got
            .iter()
            .zip(self.bufs.iter())
            .flat_map(|(&(len, src, seg), buf)| {
                buf[..len]
                    .chunks(seg)
                    .filter_map(move |pkt| src.map(|s| (s, pkt)))
            })
    }
}

/// The segment size a GRO buffer's control message gives, if any.
fn gro_segment<'a>(cmsgs: Option<impl Iterator<Item = ControlMessageOwned> + 'a>) -> Option<usize> {
    cmsgs?
        .find_map(|m| match m {
            ControlMessageOwned::UdpGroSegments(n) => usize::try_from(n).ok(),
            _ => None,
        })
        .filter(|&n| n > 0)
}

/// The send side of a port, shared (behind a lock) by every thread that posts.
pub(crate) struct Sender {
    socket: Arc<UdpSocket>,
}

/// A thread's `mmsghdr` arrays for `sendmmsg`, built once: they hold raw pointers (not
/// `Send`), so they live with the thread rather than in the shared [`Sender`]. `plain`
/// carries [`BATCH`] headers without control data; `gso` one header with room for the
/// segment-size control message, which every GSO send encodes afresh.
struct SendHeaders {
    plain: MultiHeaders<SockaddrStorage>,
    gso: MultiHeaders<SockaddrStorage>,
}

thread_local! {
    static SEND_HEADERS: std::cell::RefCell<SendHeaders> = std::cell::RefCell::new(SendHeaders {
        plain: MultiHeaders::preallocate(BATCH, None),
        gso: MultiHeaders::preallocate(1, Some(nix::cmsg_space!(u16))),
    });
}

impl Sender {
    /// A sender on `socket`.
    pub(crate) fn new(socket: Arc<UdpSocket>) -> Self {
        Sender { socket }
    }

    /// Sends as many of `out` as the socket takes now; returns how many went and in how many
    /// calls (the rest wait for the socket to drain). With `gso`, runs of equal-size packets
    /// to one destination go out as one UDP GSO send each; the kernel numbers the segments'
    /// IPv4 IDs 0, 1, 2, … so packet `k` of a run gets its ICRC recomputed for ID `k`
    /// (IPv6 has no ID and needs nothing). Nothing is allocated: the I/O vectors and
    /// addresses are on the stack, the headers the thread's own.
    pub(crate) fn send_batch(
        &mut self,
        out: &mut [Transmit],
        gso: bool,
    ) -> io::Result<(usize, u64)> {
        SEND_HEADERS.with_borrow_mut(|h| self.send_with(h, out, gso))
    }

    fn send_with(
        &mut self,
        hdrs: &mut SendHeaders,
        out: &mut [Transmit],
        gso: bool,
    ) -> io::Result<(usize, u64)> {
        let fd = self.socket.as_raw_fd();
        let src = self.socket.local_addr()?.ip();
        let mut sent = 0;
        let mut calls = 0;
        while sent < out.len() {
            let run = if gso { gso_run(&out[sent..]) } else { 1 };
            calls += 1;
            if run > 1 {
                let seg = out[sent].bytes.len();
                if src.is_ipv4() {
                    for (k, t) in out[sent..sent + run].iter_mut().enumerate().skip(1) {
                        restamp_icrc(t, 0, k as u16);
                    }
                }
                let mut iovs = [IoSlice::new(&[]); MAX_GSO_SEGMENTS];
                for (v, t) in iovs.iter_mut().zip(&out[sent..sent + run]) {
                    *v = IoSlice::new(&t.bytes);
                }
                let addr = [Some(SockaddrStorage::from(out[sent].dst))];
                let seg16 = seg as u16;
                let cmsg = [ControlMessage::UdpGsoSegments(&seg16)];
                let msg = [&iovs[..run]];
                let r = sendmmsg(fd, &mut hdrs.gso, &msg, addr, cmsg, MsgFlags::MSG_DONTWAIT)
                    .map(|r| r.count());
                match r {
                    Ok(1..) => sent += run,
                    Ok(0) | Err(nix::errno::Errno::EAGAIN) => {
                        if src.is_ipv4() {
                            // Restore the ID-0 ICRC: the packets may go out in another run.
                            for (k, t) in out[sent..sent + run].iter_mut().enumerate().skip(1) {
                                restamp_icrc(t, k as u16, 0);
                            }
                        }
                        break;
                    }
                    Err(nix::errno::Errno::ECONNREFUSED) => sent += run,
                    Err(e) => return Err(io::Error::from(e)),
                }
                continue;
            }
            // Single packets, batched with sendmmsg.
            let end = (sent..out.len().min(sent + BATCH))
                .take_while(|&i| i == sent || !gso || gso_run(&out[i..]) == 1)
                .last()
                .map_or(sent + 1, |i| i + 1);
            if end == sent + 1 {
                // One packet: a plain sendto.
                let t = &out[sent];
                let addr = SockaddrStorage::from(t.dst);
                match sendto(fd, &t.bytes, &addr, MsgFlags::MSG_DONTWAIT) {
                    Ok(_) | Err(nix::errno::Errno::ECONNREFUSED) => sent += 1,
                    Err(nix::errno::Errno::EAGAIN) => break,
                    Err(e) => return Err(io::Error::from(e)),
                }
                continue;
            }
            let chunk = &out[sent..end];
            let mut iovs = [[IoSlice::new(&[])]; BATCH];
            let mut addrs = [None; BATCH];
            for ((v, a), t) in iovs.iter_mut().zip(addrs.iter_mut()).zip(chunk) {
                *v = [IoSlice::new(&t.bytes)];
                *a = Some(SockaddrStorage::from(t.dst));
            }
            let n = chunk.len();
            match sendmmsg(
                fd,
                &mut hdrs.plain,
                &iovs[..n],
                &addrs[..n],
                [],
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(results) => {
                    let n = results.count();
                    if n == 0 {
                        break;
                    }
                    sent += n;
                }
                Err(nix::errno::Errno::EAGAIN) => break,
                // A peer that is gone (ICMP unreachable on loopback) must not stop the port:
                // the datagram is lost, as a NIC would lose it.
                Err(nix::errno::Errno::ECONNREFUSED) => sent += 1,
                Err(e) => return Err(io::Error::from(e)),
            }
        }
        Ok((sent, calls))
    }
}

/// How many packets from the start of `out` can share one GSO send: same destination, the
/// same size (the last may be shorter), within the segment and byte limits.
fn gso_run(out: &[Transmit]) -> usize {
    let Some(first) = out.first() else { return 0 };
    let seg = first.bytes.len();
    let mut n = 1;
    let mut bytes = seg;
    while n < out.len().min(MAX_GSO_SEGMENTS) {
        let t = &out[n];
        if t.dst != first.dst || t.bytes.len() > seg || bytes + t.bytes.len() > MAX_GSO_BYTES {
            break;
        }
        n += 1;
        bytes += t.bytes.len();
        if t.bytes.len() < seg {
            break; // a shorter packet can only end a run
        }
    }
    n
}

/// Rewrites a packet's ICRC, computed for IPv4 ID `from`, for ID `to` (no pass over the
/// packet: `wire::icrc::restamp_ipv4_id`).
fn restamp_icrc(t: &mut Transmit, from: u16, to: u16) {
    crate::wire::icrc::restamp_ipv4_id(&mut t.bytes, from, to);
}

fn to_std(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::from((v4.ip(), v4.port())));
    }
    a.as_sockaddr_in6()
        .map(|v6| SocketAddr::from((v6.ip(), v6.port())))
}
