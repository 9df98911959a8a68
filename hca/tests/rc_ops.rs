//! RC data movement on the simulated fabric: SEND/RECV, RDMA WRITE and RDMA READ at sizes
//! from 1 byte to 4 MiB and every path MTU, data checked byte for byte.

mod common;

use common::*;
use hca::sim::FaultConfig;
use hca::verbs::{SendOp, WcOpcode, WcStatus};
use hca::wire::PathMtu;
use std::time::Duration;

const SIZES: [usize; 9] = [1, 3, 255, 1024, 1025, 4096, 65_537, 1 << 20, 4 << 20];
const MTUS: [PathMtu; 5] = [
    PathMtu::Mtu256,
    PathMtu::Mtu512,
    PathMtu::Mtu1024,
    PathMtu::Mtu2048,
    PathMtu::Mtu4096,
];

fn run_op(mtu: PathMtu, len: usize, kind: u8) {
    let opts = PairOpts {
        mtu,
        ..PairOpts::default()
    };
    let (mut f, a, b) = pair(len as u64 ^ u64::from(kind), FaultConfig::default(), opts);
    let src = 0u64;
    let dst = 8 << 20;
    let tag = 77 + len as u64;
    let (op, data_from, data_to) = match kind {
        0 => {
            post_recv(&mut f, &b, recv_wr(9, vec![b.sge(dst, len as u32)]));
            fill(&a.mem, src, len, tag);
            (SendOp::Send, &a.mem, &b.mem)
        }
        1 => {
            fill(&a.mem, src, len, tag);
            (
                SendOp::Write {
                    remote_addr: IOVA + dst,
                    rkey: b.rkey(),
                },
                &a.mem,
                &b.mem,
            )
        }
        _ => {
            fill(&b.mem, src, len, tag);
            (
                SendOp::Read {
                    remote_addr: IOVA + src,
                    rkey: b.rkey(),
                },
                &b.mem,
                &a.mem,
            )
        }
    };
    let local = if kind == 2 {
        a.sge(dst, len as u32)
    } else {
        a.sge(src, len as u32)
    };
    post_send(&mut f, &a, send_wr(1, op, vec![local]));
    let mut wcs = Vec::new();
    let (an, bn) = (&a, &b);
    let ok = f.run_until(Duration::from_secs(5), |f| {
        poll(f, an, &mut wcs);
        if kind == 0 {
            poll(f, bn, &mut wcs);
        }
        wcs.len() == if kind == 0 { 2 } else { 1 }
    });
    assert!(ok, "mtu {mtu:?} len {len} kind {kind}: completions {wcs:?}");
    for wc in &wcs {
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
    }
    if kind == 0 {
        let recv = wcs
            .iter()
            .find(|w| w.opcode == WcOpcode::Recv)
            .expect("recv completion");
        assert_eq!(recv.byte_len as usize, len);
    }
    // Data moves from the source area of one side to the destination area of the other.
    assert!(
        read(data_from, src, len) == read(data_to, dst, len),
        "mtu {mtu:?} len {len} kind {kind}: data differs"
    );
}

#[test]
fn send_recv_every_size_and_mtu() {
    for mtu in MTUS {
        for len in SIZES {
            run_op(mtu, len, 0);
        }
    }
}

#[test]
fn rdma_write_every_size_and_mtu() {
    for mtu in MTUS {
        for len in SIZES {
            run_op(mtu, len, 1);
        }
    }
}

#[test]
fn rdma_read_every_size_and_mtu() {
    for mtu in MTUS {
        for len in SIZES {
            run_op(mtu, len, 2);
        }
    }
}
