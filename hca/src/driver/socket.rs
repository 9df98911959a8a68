//! The UDP side of a port: a non-blocking socket on `ip:4791` with batched send and receive
//! (`sendmmsg`/`recvmmsg`, through nix's safe wrappers), sized buffers, and DF set so the
//! kernel writes IP ID 0 (what the ICRC assumes for IPv4; see `wire::icrc`).

use crate::engine::Transmit;
use nix::sys::socket::{
    MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg, sendmmsg, setsockopt, sockopt,
};
use nix::{setsockopt_impl, sockopt_impl};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

/// Datagrams per `sendmmsg`/`recvmmsg` call.
pub(crate) const BATCH: usize = 32;
/// Largest datagram we receive (MTU 4096 + headers, with room to spare).
pub(crate) const MAX_DATAGRAM: usize = 4096 + 128;
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
pub(crate) fn bind(ip: IpAddr, port: u16) -> io::Result<Arc<UdpSocket>> {
    let socket = UdpSocket::bind(SocketAddr::new(ip, port))?;
    socket.set_nonblocking(true)?;
    let fd = socket.as_fd();
    match ip {
        IpAddr::V4(_) => setsockopt(&fd, IpMtuDiscover, &libc::IP_PMTUDISC_DO)?,
        IpAddr::V6(_) => setsockopt(&fd, Ipv6MtuDiscover, &libc::IPV6_PMTUDISC_DO)?,
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

/// The receive side of a port, owned by its thread.
pub(crate) struct Receiver {
    socket: Arc<UdpSocket>,
    bufs: Vec<Vec<u8>>,
    hdrs: MultiHeaders<SockaddrStorage>,
    got: Vec<(usize, Option<SocketAddr>)>,
}

impl Receiver {
    /// Receive buffers for `socket`.
    pub(crate) fn new(socket: Arc<UdpSocket>) -> Self {
        Receiver {
            socket,
            bufs: (0..BATCH).map(|_| vec![0u8; MAX_DATAGRAM]).collect(),
            hdrs: MultiHeaders::preallocate(BATCH, None),
            got: Vec::with_capacity(BATCH),
        }
    }

    /// Receives up to [`BATCH`] datagrams into the buffers (no lock needed); returns how
    /// many arrived (0 when none were waiting). [`Receiver::datagrams`] hands them out.
    pub(crate) fn fill(&mut self) -> io::Result<usize> {
        let fd = self.socket.as_raw_fd();
        self.got.clear();
        let mut slices: Vec<[IoSliceMut<'_>; 1]> =
            self.bufs.iter_mut().map(|b| [IoSliceMut::new(b)]).collect();
        match recvmmsg(
            fd,
            &mut self.hdrs,
            slices.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        ) {
            Ok(results) => {
                for r in results {
                    let src = r.address.and_then(|a: SockaddrStorage| to_std(&a));
                    self.got.push((r.bytes, src));
                }
            }
            Err(nix::errno::Errno::EAGAIN) => {}
            Err(e) => return Err(io::Error::from(e)),
        }
        Ok(self.got.len())
    }

    /// The datagrams the last [`Receiver::fill`] received.
    pub(crate) fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> {
        self.got
            .iter()
            .zip(&self.bufs)
            .filter_map(|(&(len, src), buf)| src.map(|s| (s, &buf[..len])))
    }
}

/// The send side of a port, shared (behind a lock) by every thread that posts. The
/// `mmsghdr` array holds raw pointers (not `Send`), so it is built per call.
pub(crate) struct Sender {
    socket: Arc<UdpSocket>,
}

impl Sender {
    /// A sender on `socket`.
    pub(crate) fn new(socket: Arc<UdpSocket>) -> Self {
        Sender { socket }
    }

    /// Sends as many of `out` as the socket takes now; returns how many went and in how many
    /// calls (the rest wait for the socket to drain).
    pub(crate) fn send_batch(&mut self, out: &[Transmit]) -> io::Result<(usize, u64)> {
        let fd = self.socket.as_raw_fd();
        let mut hdrs = MultiHeaders::<SockaddrStorage>::preallocate(BATCH.min(out.len()), None);
        let mut sent = 0;
        let mut calls = 0;
        while sent < out.len() {
            calls += 1;
            let chunk = &out[sent..out.len().min(sent + BATCH)];
            let iovs: Vec<[IoSlice<'_>; 1]> =
                chunk.iter().map(|t| [IoSlice::new(&t.bytes)]).collect();
            let addrs: Vec<Option<SockaddrStorage>> = chunk
                .iter()
                .map(|t| Some(SockaddrStorage::from(t.dst)))
                .collect();
            match sendmmsg(fd, &mut hdrs, &iovs, &addrs, [], MsgFlags::MSG_DONTWAIT) {
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

fn to_std(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::from((v4.ip(), v4.port())));
    }
    a.as_sockaddr_in6()
        .map(|v6| SocketAddr::from((v6.ip(), v6.port())))
}
