//! UD on the simulated fabric, through two GSI QPs (QP1, Q_Key 0x80010000) exchanging
//! MAD-sized datagrams: the 40-byte GRH area ahead of the payload (IPv4 header in its last 20
//! bytes, as rxe), the receive completion's source fields, and the silent drops UD makes
//! (wrong Q_Key, no receive posted) and the local length errors it reports.

mod common;

use common::*;
use hca::ids::{Gid, QKey, Qpn};
use hca::qp::UD_GRH_LEN;
use hca::sim::{Fabric, FaultConfig};
use hca::verbs::{SendOp, SendWr, UdDest, WcOpcode, WcStatus};
use std::net::IpAddr;

/// A MAD.
const MAD_LEN: usize = 256;
/// Where datagrams are sent from, and received into, in each node's memory.
const SRC: u64 = 0;
const DST: u64 = 64 << 10;

fn gsi_pair(seed: u64) -> (Fabric, Node, Node) {
    let mut f = Fabric::new(seed, FaultConfig::default());
    let a = gsi_node(&mut f, 2, QKey::GSI);
    let b = gsi_node(&mut f, 3, QKey::GSI);
    (f, a, b)
}

/// A signaled UD SEND of `len` bytes at `SRC + off` to `to`'s GSI with Q_Key `qkey`.
fn ud_send(wr_id: u64, from: &Node, to: &Node, off: u64, len: u32, qkey: QKey) -> SendWr {
    SendWr {
        ud: Some(UdDest {
            gid: Gid::from_ip(to.ip),
            qpn: Qpn::GSI,
            qkey,
            pkey_index: 0,
        }),
        ..send_wr(wr_id, SendOp::Send, vec![from.sge(SRC + off, len)])
    }
}

/// A receive of `len` bytes at `DST + off`.
fn ud_recv(wr_id: u64, n: &Node, off: u64, len: u32) -> hca::verbs::RecvWr {
    recv_wr(wr_id, vec![n.sge(DST + off, len)])
}

const RECV_LEN: u32 = (UD_GRH_LEN + MAD_LEN) as u32;

/// The IPv4 header checksum of `h` is valid (RFC 791; Linux's `ib_get_rdma_header_version`
/// trusts an IPv4 GRH only if it is).
fn ipv4_checksum_ok(h: &[u8]) -> bool {
    let sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    (folded & 0xffff) + (folded >> 16) == 0xffff
}

fn octets(ip: IpAddr) -> [u8; 4] {
    match ip {
        IpAddr::V4(v4) => v4.octets(),
        IpAddr::V6(_) => panic!("test nodes are IPv4"),
    }
}

#[test]
fn gsi_qps_exchange_mads_with_the_grh_ahead_of_the_payload() {
    let (mut f, a, b) = gsi_pair(51);
    assert_eq!(UD_GRH_LEN, 40);
    for (from, to) in [(&a, &b), (&b, &a)] {
        for i in 0..3u64 {
            post_recv(&mut f, to, ud_recv(100 + i, to, i * 1024, RECV_LEN));
            fill(&from.mem, SRC + i * 1024, MAD_LEN, 7 + i);
            post_send(
                &mut f,
                from,
                ud_send(i, from, to, i * 1024, MAD_LEN as u32, QKey::GSI),
            );
        }
        settle(&mut f);
        let sent = drain(&mut f, from);
        assert_eq!(
            statuses(&sent),
            [
                (0, WcStatus::Success),
                (1, WcStatus::Success),
                (2, WcStatus::Success)
            ]
        );
        assert!(
            sent.iter()
                .all(|w| w.opcode == WcOpcode::Send && w.qpn == Qpn::GSI)
        );
        let got = drain(&mut f, to);
        assert_eq!(
            statuses(&got),
            [
                (100, WcStatus::Success),
                (101, WcStatus::Success),
                (102, WcStatus::Success)
            ],
            "datagrams arrive in order on a clean fabric: {got:?}"
        );
        for (i, wc) in (0u64..).zip(&got) {
            assert_eq!(wc.opcode, WcOpcode::Recv);
            assert_eq!(wc.qpn, Qpn::GSI);
            assert_eq!(wc.src_qp, Some(Qpn::GSI));
            assert_eq!(wc.src_gid, Some(Gid::from_ip(from.ip)));
            assert_eq!(wc.byte_len as usize, 40 + MAD_LEN);
            assert_eq!(wc.imm, None);
            let buf = read(&to.mem, DST + i * 1024, 40 + MAD_LEN);
            let (grh, payload) = buf.split_at(40);
            assert!(
                payload == read(&from.mem, SRC + i * 1024, MAD_LEN),
                "payload after the GRH"
            );
            assert_eq!(
                &grh[..20],
                &[0u8; 20],
                "IPv4: the first 20 bytes are unused"
            );
            let ip = &grh[20..];
            assert_eq!(ip[0], 0x45, "version 4, IHL 5");
            assert_eq!(ip[9], 17, "protocol UDP");
            assert_eq!(&ip[12..16], &octets(from.ip), "source address");
            assert_eq!(&ip[16..20], &octets(to.ip), "destination address");
            // The header of the datagram as it was on the wire: IP 20 + UDP 8 + BTH 12 +
            // DETH 8 + MAD 256 + ICRC 4.
            let total = u16::from_be_bytes([ip[2], ip[3]]);
            assert_eq!(total, 20 + 8 + 12 + 8 + 256 + 4, "IPv4 total length");
            assert!(ipv4_checksum_ok(ip), "IPv4 header checksum: {ip:02x?}");
        }
    }
}

#[test]
fn ud_send_with_immediate_delivers_it() {
    let (mut f, a, b) = gsi_pair(52);
    post_recv(&mut f, &b, ud_recv(100, &b, 0, RECV_LEN));
    let mut wr = ud_send(1, &a, &b, 0, 64, QKey::GSI);
    wr.op = SendOp::SendWithImm(0xdead_beef);
    post_send(&mut f, &a, wr);
    settle(&mut f);
    let got = drain(&mut f, &b);
    assert_eq!(statuses(&got), [(100, WcStatus::Success)]);
    assert_eq!(got[0].imm, Some(0xdead_beef));
    assert_eq!(got[0].byte_len, 40 + 64);
}

#[test]
fn a_datagram_with_the_wrong_qkey_is_dropped_and_counted() {
    let (mut f, a, b) = gsi_pair(53);
    post_recv(&mut f, &b, ud_recv(100, &b, 0, RECV_LEN));
    // High bit clear, so the work request's Q_Key is sent as is.
    post_send(&mut f, &a, ud_send(1, &a, &b, 0, 64, QKey(0x0000_1234)));
    settle(&mut f);
    assert_eq!(
        statuses(&drain(&mut f, &a)),
        [(1, WcStatus::Success)],
        "UD senders never know"
    );
    assert!(drain(&mut f, &b).is_empty(), "dropped");
    assert_eq!(f.hca(b.hca).stats().qkey_mismatch, 1);
    // The receive was not consumed: the next good datagram takes it.
    post_send(&mut f, &a, ud_send(2, &a, &b, 0, 64, QKey::GSI));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(100, WcStatus::Success)]);
    assert_eq!(f.hca(b.hca).stats().qkey_mismatch, 1);
}

#[test]
fn the_gsi_checks_the_well_known_qkey_whatever_modify_set() {
    // QP1's Q_Key is 0x80010000 by definition (rxe check_keys: `qpn == 1 ? GSI_QKEY : ...`),
    // so a GSI brought up with another Q_Key still takes GSI datagrams, and only those.
    let mut f = Fabric::new(54, FaultConfig::default());
    let a = gsi_node(&mut f, 2, QKey::GSI);
    let b = gsi_node(&mut f, 3, QKey(0));
    post_recv(&mut f, &b, ud_recv(100, &b, 0, RECV_LEN));
    post_send(&mut f, &a, ud_send(1, &a, &b, 0, 64, QKey(0)));
    settle(&mut f);
    assert!(drain(&mut f, &b).is_empty(), "Q_Key 0 is not QP1's");
    assert_eq!(f.hca(b.hca).stats().qkey_mismatch, 1);
    post_send(&mut f, &a, ud_send(2, &a, &b, 0, 64, QKey::GSI));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(100, WcStatus::Success)]);
    assert_eq!(f.hca(b.hca).stats().qkey_mismatch, 1);
}

#[test]
fn a_datagram_larger_than_the_port_mtu_completes_with_local_length_error() {
    let (mut f, a, b) = gsi_pair(55);
    post_recv(&mut f, &b, ud_recv(100, &b, 0, 40 + 4096));
    let mut too_big = ud_send(1, &a, &b, 0, 4097, QKey::GSI);
    too_big.flags = hca::verbs::SendFlags::empty(); // errors complete even when unsignaled
    post_send(&mut f, &a, too_big);
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::LocLenErr)]);
    assert_eq!(f.stats().sent, 0, "nothing reached the wire");
    // Exactly the port MTU is fine.
    post_send(&mut f, &a, ud_send(2, &a, &b, 0, 4096, QKey::GSI));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(2, WcStatus::Success)]);
    let got = drain(&mut f, &b);
    assert_eq!(statuses(&got), [(100, WcStatus::Success)]);
    assert_eq!(got[0].byte_len, 40 + 4096);
}

#[test]
fn a_datagram_with_no_receive_posted_is_dropped_and_counted() {
    let (mut f, a, b) = gsi_pair(56);
    post_send(&mut f, &a, ud_send(1, &a, &b, 0, 64, QKey::GSI));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(1, WcStatus::Success)]);
    assert_eq!(f.hca(b.hca).stats().no_recv_posted, 1);
    // No RNR for UD: a receive posted later does not get the dropped datagram.
    post_recv(&mut f, &b, ud_recv(100, &b, 0, RECV_LEN));
    settle(&mut f);
    assert!(drain(&mut f, &b).is_empty());
    fill(&a.mem, SRC, 64, 3);
    post_send(&mut f, &a, ud_send(2, &a, &b, 0, 64, QKey::GSI));
    settle(&mut f);
    let got = drain(&mut f, &b);
    assert_eq!(statuses(&got), [(100, WcStatus::Success)]);
    assert_eq!(read(&b.mem, DST + 40, 64), read(&a.mem, SRC, 64));
    assert_eq!(f.hca(b.hca).stats().no_recv_posted, 1);
}

#[test]
fn a_receive_without_room_for_the_grh_completes_with_local_length_error() {
    let (mut f, a, b) = gsi_pair(57);
    // Room for the MAD but not for the GRH in front of it.
    post_recv(&mut f, &b, ud_recv(100, &b, 0, MAD_LEN as u32));
    post_recv(&mut f, &b, ud_recv(101, &b, 1024, RECV_LEN));
    post_send(&mut f, &a, ud_send(1, &a, &b, 0, MAD_LEN as u32, QKey::GSI));
    post_send(&mut f, &a, ud_send(2, &a, &b, 0, MAD_LEN as u32, QKey::GSI));
    settle(&mut f);
    let got = drain(&mut f, &b);
    assert_eq!(
        statuses(&got),
        [(100, WcStatus::LocLenErr), (101, WcStatus::Success)],
        "a UD receive error does not stop the QP: {got:?}"
    );
}
