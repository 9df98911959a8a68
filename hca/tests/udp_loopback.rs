//! Two HCAs in one process on real UDP sockets (loopback, 127.0.x.y:4791) move data by
//! SEND/RECV, RDMA WRITE and RDMA READ at sizes from 1 byte to 4 MiB and every path MTU;
//! every transfer is checksummed.

mod common;

use common::udp::{UdpNode, checksum};
use common::*;
use hca::ids::Psn;
use hca::verbs::{SendOp, WcStatus};
use hca::wire::PathMtu;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const SIZES: [usize; 7] = [1, 255, 4096, 65_537, 1 << 20, 3 << 20, 4 << 20];
const MTUS: [PathMtu; 5] = [
    PathMtu::Mtu256,
    PathMtu::Mtu512,
    PathMtu::Mtu1024,
    PathMtu::Mtu2048,
    PathMtu::Mtu4096,
];

/// A connected pair on 127.0.`net`.2 and 127.0.`net`.3 (each test its own subnet, so tests
/// in this process never share an address).
fn udp_pair(net: u8, mtu: PathMtu) -> (UdpNode, UdpNode, PairOpts) {
    let opts = PairOpts {
        mtu,
        timeout: 12,
        ..PairOpts::default()
    };
    let a_ip = IpAddr::V4(Ipv4Addr::new(127, 0, net, 2));
    let b_ip = IpAddr::V4(Ipv4Addr::new(127, 0, net, 3));
    let a = UdpNode::open(a_ip, opts);
    let b = UdpNode::open(b_ip, opts);
    a.connect(
        b_ip,
        b.qpn,
        Psn::from_wire(0x100),
        Psn::from_wire(0x200),
        opts,
    );
    b.connect(
        a_ip,
        a.qpn,
        Psn::from_wire(0x200),
        Psn::from_wire(0x100),
        opts,
    );
    (a, b, opts)
}

fn transfer(a: &UdpNode, b: &UdpNode, kind: u8, len: usize, tag: u64) {
    let (src, dst) = (0u64, 8u64 << 20);
    let what = ["SEND", "WRITE", "READ"][usize::from(kind)];
    match kind {
        0 => {
            b.post_recv(recv_wr(tag, vec![b.sge(dst, len as u32)]));
            fill(&a.mem, src, len, tag);
            a.post_send(send_wr(tag, SendOp::Send, vec![a.sge(src, len as u32)]));
        }
        1 => {
            fill(&a.mem, src, len, tag);
            let op = SendOp::Write {
                remote_addr: IOVA + dst,
                rkey: b.rkey(),
            };
            a.post_send(send_wr(tag, op, vec![a.sge(src, len as u32)]));
        }
        _ => {
            fill(&b.mem, src, len, tag);
            let op = SendOp::Read {
                remote_addr: IOVA + src,
                rkey: b.rkey(),
            };
            a.post_send(send_wr(tag, op, vec![a.sge(dst, len as u32)]));
        }
    }
    let wcs = a.wait(1, Duration::from_secs(20));
    let stats = || (a.hca.with(|e, _| e.stats()), b.hca.with(|e, _| e.stats()));
    assert_eq!(
        wcs.len(),
        1,
        "{what} {len} B: no completion; stats {:?}",
        stats()
    );
    assert_eq!(
        wcs[0].status,
        WcStatus::Success,
        "{what} {len} B: {:?}; stats {:?}",
        wcs[0],
        stats()
    );
    if kind == 0 {
        let r = b.wait(1, Duration::from_secs(5));
        assert_eq!(r.len(), 1, "{what} {len} B: no receive completion");
        assert_eq!(r[0].byte_len as usize, len);
    }
    let (from, to) = if kind == 2 {
        (&b.mem, &a.mem)
    } else {
        (&a.mem, &b.mem)
    };
    assert_eq!(
        checksum(from, src, len),
        checksum(to, dst, len),
        "{what} {len} B: checksum differs"
    );
}

fn all_sizes(net: u8, kind: u8) {
    for (i, mtu) in MTUS.into_iter().enumerate() {
        let (a, b, _) = udp_pair(net + i as u8, mtu);
        for (j, len) in SIZES.into_iter().enumerate() {
            transfer(&a, &b, kind, len, (i * 100 + j) as u64 + 1);
        }
    }
}

#[test]
fn send_recv_over_udp_every_size_and_mtu() {
    all_sizes(10, 0);
}

#[test]
fn rdma_write_over_udp_every_size_and_mtu() {
    all_sizes(20, 1);
}

#[test]
fn rdma_read_over_udp_every_size_and_mtu() {
    all_sizes(30, 2);
}

#[test]
fn every_operation_without_gso() {
    let opts = PairOpts {
        mtu: PathMtu::Mtu1024,
        timeout: 12,
        ..PairOpts::default()
    };
    let a_ip = IpAddr::V4(Ipv4Addr::new(127, 0, 50, 2));
    let b_ip = IpAddr::V4(Ipv4Addr::new(127, 0, 50, 3));
    let a = UdpNode::open_with(a_ip, opts, false);
    let b = UdpNode::open_with(b_ip, opts, false);
    a.connect(
        b_ip,
        b.qpn,
        Psn::from_wire(0x100),
        Psn::from_wire(0x200),
        opts,
    );
    b.connect(
        a_ip,
        a.qpn,
        Psn::from_wire(0x200),
        Psn::from_wire(0x100),
        opts,
    );
    for (i, len) in [1usize, 65_537, 1 << 20].into_iter().enumerate() {
        for kind in 0..3 {
            transfer(&a, &b, kind, len, 900 + (i * 3) as u64 + u64::from(kind));
        }
    }
}
