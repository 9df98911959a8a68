//! Third-party checks of what the soft HCA puts on the wire: its loopback traffic is captured
//! with dumpcap, every frame must dissect in tshark as RoCEv2/InfiniBand with no malformed or
//! error-level expert entries, and a separate implementation (tests/wire/icrc_check.py,
//! Python's zlib) must recompute the same ICRC from the real IP headers.
//!
//! Runs with UDP GSO off (see `traffic`); segments of a GSO send carry ICRCs for IPv4 IDs
//! 0, 1, 2, … as kernel segmentation numbers them, which the loopback tests verify through
//! the receive path.
//!
//! Needs tshark and dumpcap (Debian package tshark, installed by scripts/test.sh) and root or
//! capture rights on `lo`. Set HCA_SKIP_WIRE_CHECK=1 to skip where that is impossible.

mod common;

use common::udp::UdpNode;
use common::*;
use hca::ids::{Psn, QKey, Qpn};
use hca::qp::QpInit;
use hca::qp::state::{QpAttrMask, QpState, QpType};
use hca::verbs::{SendOp, SendWr, UdDest, WcStatus};
use hca::wire::PathMtu;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Traffic of every kind the engine emits: SEND, WRITE with immediate, READ (multi-packet),
/// ACKs, an RNR NAK, a UD datagram to QP1 and a remote access NAK.
fn traffic(net: u8) {
    let opts = PairOpts {
        mtu: PathMtu::Mtu1024,
        timeout: 12,
        ..PairOpts::default()
    };
    let (a_ip, b_ip) = (
        IpAddr::V4(Ipv4Addr::new(127, 0, net, 2)),
        IpAddr::V4(Ipv4Addr::new(127, 0, net, 3)),
    );
    // GSO off: on loopback a GSO send is captured unsegmented, as one datagram holding
    // several packets; here every packet must be its own frame.
    let a = UdpNode::open_with(a_ip, opts, false);
    let b = UdpNode::open_with(b_ip, opts, false);
    a.connect(
        b_ip,
        b.qpn,
        Psn::from_wire(0x00ff_fff0),
        Psn::from_wire(0x10),
        opts,
    );
    b.connect(
        a_ip,
        a.qpn,
        Psn::from_wire(0x10),
        Psn::from_wire(0x00ff_fff0),
        opts,
    );
    let wait_ok = |n: &UdpNode, what: &str| {
        let wcs = n.wait(1, Duration::from_secs(10));
        assert_eq!(
            wcs.first().map(|w| w.status),
            Some(WcStatus::Success),
            "{what}: {wcs:?}"
        );
    };
    // SEND before the receive is posted: an RNR NAK, then delivery.
    fill(&a.mem, 0, 3000, 1);
    a.post_send(send_wr(1, SendOp::Send, vec![a.sge(0, 3000)]));
    std::thread::sleep(Duration::from_millis(20));
    b.post_recv(recv_wr(2, vec![b.sge(1 << 20, 4096)]));
    wait_ok(&a, "SEND");
    wait_ok(&b, "RECV");
    b.post_recv(recv_wr(3, vec![b.sge(1 << 20, 16)]));
    let op = SendOp::WriteWithImm {
        remote_addr: IOVA + (2 << 20),
        rkey: b.rkey(),
        imm: 0xfeed,
    };
    a.post_send(send_wr(4, op, vec![a.sge(0, 5000)]));
    wait_ok(&a, "WRITE");
    wait_ok(&b, "WRITE imm");
    let op = SendOp::Read {
        remote_addr: IOVA + (2 << 20),
        rkey: b.rkey(),
    };
    a.post_send(send_wr(5, op, vec![a.sge(4 << 20, 10_000)]));
    wait_ok(&a, "READ");
    // A MAD-sized datagram between the ports' GSI QPs.
    let gsi = |n: &UdpNode| {
        n.hca.with(|e, now| {
            let init = QpInit {
                qp_type: QpType::Ud,
                pd: n.pd,
                send_cq: n.cq,
                recv_cq: n.cq,
                srq: None,
                max_send_wr: 16,
                max_recv_wr: 16,
                max_sge: 2,
                sq_sig_all: true,
            };
            let qp = e.create_gsi_qp(1, init).expect("GSI");
            let attr = hca::qp::QpAttr {
                state: QpState::Init,
                qkey: QKey::GSI,
                ..Default::default()
            };
            let m =
                QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY;
            e.modify_qp(now, qp, &attr, m).expect("INIT");
            let attr = hca::qp::QpAttr {
                state: QpState::Rtr,
                ..Default::default()
            };
            e.modify_qp(now, qp, &attr, QpAttrMask::STATE).expect("RTR");
            let attr = hca::qp::QpAttr {
                state: QpState::Rts,
                ..Default::default()
            };
            e.modify_qp(now, qp, &attr, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
                .expect("RTS");
            qp
        })
    };
    let (ga, gb) = (gsi(&a), gsi(&b));
    b.hca
        .with(|e, now| e.post_recv(now, gb, recv_wr(6, vec![b.sge(6 << 20, 40 + 256)])))
        .expect("recv");
    // A Device Management Get(IOUnitInfo): base version 1, class 0x06, class version 1,
    // method Get, TID 0x1234, attribute 0x0010; the rest of the 256 bytes zero.
    let mut mad = [0u8; 256];
    mad[..4].copy_from_slice(&[0x01, 0x06, 0x01, 0x01]);
    mad[8..16].copy_from_slice(&0x1234u64.to_be_bytes());
    mad[16..18].copy_from_slice(&0x0010u16.to_be_bytes());
    a.mem.write(0, &mad).expect("MAD");
    let ud = UdDest {
        gid: hca::ids::Gid::from_ip(b_ip),
        qpn: Qpn::GSI,
        qkey: QKey::GSI,
        pkey_index: 0,
    };
    let wr = SendWr {
        ud: Some(ud),
        ..send_wr(7, SendOp::Send, vec![a.sge(0, 256)])
    };
    a.hca
        .with(|e, now| e.post_send(now, ga, wr))
        .expect("UD send");
    wait_ok(&a, "UD send");
    wait_ok(&b, "UD recv");
    // A WRITE with a wrong key: the responder NAKs (remote access error).
    let op = SendOp::Write {
        remote_addr: IOVA,
        rkey: hca::ids::Rkey(b.rkey().0 ^ 0x100),
    };
    a.post_send(send_wr(8, op, vec![a.sge(0, 64)]));
    let wcs = a.wait(1, Duration::from_secs(10));
    assert_eq!(
        wcs.first().map(|w| w.status),
        Some(WcStatus::RemAccessErr),
        "{wcs:?}"
    );
}

#[test]
fn tshark_dissects_every_frame_and_icrc_matches_an_independent_implementation() {
    if testkit::skip_wire_check() {
        eprintln!("HCA_SKIP_WIRE_CHECK set: wire check skipped");
        return;
    }
    let dir = testkit::scratch_dir("hca-wire");
    let file = dir.join("roce.pcap");
    let net = 60;
    let cap = testkit::Capture::start(&file, &format!("udp port 4791 and net 127.0.{net}.0/24"));
    traffic(net);
    let file = cap.stop();

    let n = testkit::tshark_field(&file, "frame.number").len();
    assert!(
        n >= 20,
        "expected the whole exchange in the capture, got {n} frames"
    );
    let opcodes = testkit::tshark_field(&file, "infiniband.bth.opcode");
    assert_eq!(
        opcodes.len(),
        n,
        "frames tshark did not decode as InfiniBand BTH: {opcodes:?}"
    );
    let seen: std::collections::BTreeSet<u32> = opcodes
        .iter()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    // SEND First/Last, WRITE First/Last with immediate, READ request/response First/Last,
    // ACK (ACK, RNR NAK and NAK), UD SEND Only.
    for op in [0, 2, 6, 9, 12, 13, 15, 17, 100] {
        assert!(
            seen.contains(&op),
            "opcode {op} missing from the capture: {seen:?}"
        );
    }
    let bad = testkit::tshark_problems(&file);
    assert!(
        bad.trim().is_empty(),
        "tshark flags frames as malformed or erroneous:\n{bad}"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wire/icrc_check.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&file)
        .output()
        .expect("run python3");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "independent ICRC check failed:\n{text}"
    );
    assert!(
        text.contains(&format!("{n} packets, {n} ICRC ok")),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
