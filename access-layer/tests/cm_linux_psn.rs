//! The CM's Starting PSN, pinned against Linux: a capture of Linux 6.1 ib_srp (rdma_rxe in a
//! QEMU guest, tests/interop) logging in to our target over RDMA-CM on 2026-11-25. Linux's
//! CM reads each Starting PSN as the PSN the message's *sender* expects to receive
//! (drivers/infiniband/core/cm.c: `ib_send_cm_req` sets the active side's `rq_psn` from its
//! REQ, `cm_req_handler` the passive side's `sq_psn` from the REQ, `ib_send_cm_rep` the
//! passive side's `rq_psn` from its REP, `cm_rep_handler` the active side's `sq_psn` from
//! the REP). Our target and initiator once read it the other way round, and Linux NAKed the
//! first SRP_CMD with a PSN sequence error (linux-interop.md).

use access_layer::cm::{CmConfig, CmEndpoint, CmEvent, QpPsns};
use access_layer::mad::cm::CmRejReason;
use access_layer::mad::{CmMessage, MadAddress, MadBody, parse_any};
use ib_verbs::time::Time;
use ib_verbs::{Gid, Guid, Psn};

/// Linux's REQ: the whole IPv4 datagram (IP 20, UDP 8, BTH 12, DETH 8, MAD 256, ICRC 4).
const LINUX_REQ: &str = "45000134298040004011f3e8c0a84d01c0a84dfed87212b7012000006400ffff0000000180000000800100000000\
    0001010702030000000000000002b9e9e93d00100000000000003de9e9b90000000000000000010615b3505400ff\
    fe77000100000000000000000000110400000000000000a17bacf4a7ffff37f0ffffffff00000000000000000000\
    ffffc0a84d0100000000000000000000ffffc0a84dfecabe10000040009800000000000000000000000000000000\
    000000000000000000000000000000000000000000000000000000000040ec12000000000000000000000000c0a8\
    4d01000000000000000000000000c0a84dfe000000000000000000068000000020440000000000000000505400ff\
    fe7700010002c90300c0ff010002c90300c0ff01004400000000000050febf77";
/// Our target's REP to it.
const OUR_REP: &str = "450001340000400040111d69c0a84dfec0a84d0112b712b701201d826400ffff0000000100000000800100000000\
    0001010702030000000000000002b9e9e93d0013000000000000000000013de9e9b9000000000000110000000000\
    009e3700040401e00002c90300c0ff00c00000000000002000000000000000000000204400000200000680000000\
    00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
    00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
    00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
    000000000000000000000000000000000000000000000000000000006e824f63";
/// Linux's first request on the new channel: an RC SEND Only carrying SRP_CMD (INQUIRY).
const LINUX_FIRST_SEND: &str = "4500006c299340004011f49dc0a84d01c0a84dfeebd312b7005800000400ffff0000001180009e37020000000001\
    00001c000000000000000000000000000000000000000000000012000000240000000000000000000000ff24915f\
    3fed9a00000003510000002468f88cb4";

fn hex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// The MAD of a captured UD datagram to QP1.
fn mad(dgram: &[u8]) -> CmMessage {
    let mad = &dgram[20 + 8 + 12 + 8..20 + 8 + 12 + 8 + 256];
    match parse_any(mad).expect("a MAD").body {
        MadBody::Cm(m) => m,
        other => panic!("not a CM MAD: {other:?}"),
    }
}

/// The PSN in the BTH of a captured datagram.
fn bth_psn(dgram: &[u8]) -> Psn {
    let b = &dgram[20 + 8..];
    Psn::from_wire(u32::from_be_bytes([0, b[9], b[10], b[11]]))
}

#[test]
fn each_side_sends_from_the_psn_the_other_side_offered() {
    let CmMessage::Req(req) = mad(&hex(LINUX_REQ)) else {
        panic!("not a REQ")
    };
    let CmMessage::Rep(rep) = mad(&hex(OUR_REP)) else {
        panic!("not a REP")
    };
    assert_eq!(req.starting_psn, Psn::from_wire(0x7b_acf4));
    assert_eq!(rep.starting_psn, Psn::from_wire(0x00_9e37));
    // Linux, the active side, sent its first SRP_CMD from our REP's Starting PSN.
    let first = hex(LINUX_FIRST_SEND);
    assert_eq!(first[28], 0x04, "RC SEND Only");
    assert_eq!(bth_psn(&first), rep.starting_psn);
    assert_eq!(
        QpPsns::active(req.starting_psn, &rep).sq_psn,
        bth_psn(&first)
    );
    // Our side, passive: we send from the REQ's Starting PSN and receive from our REP's.
    let ours = QpPsns::passive(&req, rep.starting_psn);
    assert_eq!(ours.sq_psn, req.starting_psn);
    assert_eq!(ours.rq_psn, bth_psn(&first));
}

/// Our passive CM listening on the captured REQ's service, fed that REQ as if from `src`.
fn feed_linux_req(src: std::net::Ipv4Addr) -> (Vec<CmEvent>, Vec<CmMessage>) {
    feed_linux_req_on(src, vec![ib_verbs::PKey::DEFAULT], 0)
}

/// [`feed_linux_req`] with our port's P_Key table `pkeys`, the REQ arriving on partition
/// `pkey_index` of it.
fn feed_linux_req_on(
    src: std::net::Ipv4Addr,
    pkeys: Vec<ib_verbs::PKey>,
    pkey_index: u16,
) -> (Vec<CmEvent>, Vec<CmMessage>) {
    let dgram = hex(LINUX_REQ);
    let CmMessage::Req(req) = mad(&dgram) else {
        panic!("not a REQ")
    };
    let mut cm = CmEndpoint::new(CmConfig {
        local_ca_guid: Guid(0x0002_c903_00c0_ff01),
        local_gid: Gid::from_ip(std::net::Ipv4Addr::new(192, 168, 77, 254).into()),
        port: 1,
        time_wait: std::time::Duration::from_secs(1),
        agent_id: 1,
        first_comm_id: 0x100,
    });
    cm.listen(req.service_id).expect("listen");
    cm.set_pkey_table(pkeys);
    let from = MadAddress::gsi(1, Gid::from_ip(src.into())).on_partition(pkey_index);
    cm.handle_mad(
        Time(0),
        from,
        &dgram[20 + 8 + 12 + 8..20 + 8 + 12 + 8 + 256],
    );
    let events: Vec<CmEvent> = std::iter::from_fn(|| cm.poll_event()).collect();
    let sent: Vec<CmMessage> = std::iter::from_fn(|| cm.poll_transmit())
        .map(
            |m| match parse_any(m.mad.as_bytes()).expect("our MAD").body {
                MadBody::Cm(c) => c,
                other => panic!("not CM: {other:?}"),
            },
        )
        .collect();
    (events, sent)
}

#[test]
fn a_req_must_name_the_address_it_came_from() {
    // Linux's REQ names its own address (192.168.77.1, the datagram's source) as the
    // primary path's local GID: from there it is taken to the consumer.
    let dgram = hex(LINUX_REQ);
    assert_eq!(&dgram[12..16], &[192, 168, 77, 1], "the IPv4 source");
    let (events, sent) = feed_linux_req(std::net::Ipv4Addr::new(192, 168, 77, 1));
    assert!(
        matches!(events.as_slice(), [CmEvent::ReqReceived { .. }]),
        "{events:?}"
    );
    assert!(sent.is_empty(), "nothing sent before the consumer decides");
    // The same REQ sent from another address: refused on the wire and reported.
    let (events, sent) = feed_linux_req(std::net::Ipv4Addr::new(192, 168, 77, 66));
    assert!(
        matches!(
            events.as_slice(),
            [CmEvent::ReqRefused {
                reason: CmRejReason::InvalidGid,
                ..
            }]
        ),
        "{events:?}"
    );
    match sent.as_slice() {
        [CmMessage::Rej(rej)] => assert_eq!(rej.reason, CmRejReason::InvalidGid),
        other => panic!("no REJ: {other:?}"),
    }
}

#[test]
fn a_req_must_name_the_partition_it_came_on() {
    // Linux's REQ names the default partition (P_Key 0xFFFF, rxe has no other).
    let linux = std::net::Ipv4Addr::new(192, 168, 77, 1);
    let table = vec![ib_verbs::PKey(0x8001), ib_verbs::PKey::DEFAULT];
    // Arrived on the default partition (index 1 here): taken to the consumer.
    let (events, _) = feed_linux_req_on(linux, table.clone(), 1);
    assert!(
        matches!(events.as_slice(), [CmEvent::ReqReceived { from, .. }] if from.pkey_index == 1),
        "{events:?}"
    );
    // The same REQ arriving on partition 0x8001: it names a partition it did not come on,
    // refused as Linux refuses a path whose P_Key it cannot use (REJ 12).
    let (events, sent) = feed_linux_req_on(linux, table, 0);
    assert!(
        matches!(
            events.as_slice(),
            [CmEvent::ReqRefused {
                reason: CmRejReason::InvalidGid,
                ..
            }]
        ),
        "{events:?}"
    );
    assert!(matches!(sent.as_slice(), [CmMessage::Rej(_)]), "{sent:?}");
}
