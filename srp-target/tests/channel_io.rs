//! The target's channel data path on real HCAs: a test initiator built directly on `hca`
//! verbs (two devices on loopback, 127.0.90.x–127.0.99.x, UDP sockets) sends SRP_CMD IUs to
//! a [`ChannelIo`] and checks the data it moved and the SRP_RSP it got back; hostile
//! initiators (bad rkey, credit overrun, malformed IU) lose their channel only and the
//! target's resources for it are released.
//!
//! The QPs are connected directly with `connect_rc` (the attributes a CM exchange would
//! carry); login over CM is a later step. The initiator and target helpers are
//! verbs/mod.rs's, shared with channel_credits.rs and channel_invalidate.rs.

mod common;
mod verbs;

use common::{cmd_bytes, nexus_data, pattern, ram_lu, read10, srp_cmd, tmf_iu, write10};
use hca::engine::QpId;
use hca::ids::Rkey;
use hca::mr::MrKeys;
use hca::verbs::{WcOpcode, WcStatus};
use scsi::{Lun, Status};
use srp::wire::desc::{DataDesc, DirectBuf, Indirect};
use srp::wire::logout::{TLogout, TLogoutReason};
use srp::wire::rsp::{Residual, Rsp, TmfResponse};
use srp::wire::tsk_mgmt::TaskMgmtFunction;
use srp::wire::{IuType, Tag};
use srp_target::BlockSize;
use srp_target::io::{ChannelIo, Executor, Inline, IoState, Workers};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use verbs::{
    DEADLINE, EP_DATA, EP_TABLE, Ep, IOVA, IT_IU_LEN, Initiator, Target, await_closed, await_iu,
    cmd_iu, connect, ip,
};
use wirekit::WireRepr;
use zerocopy::IntoBytes;

/// A target device at `addr` with a RAM LUN 0.
fn target(addr: IpAddr) -> Target {
    Target::open(addr, ram_lu(2048, BlockSize::B512))
}

/// A channel of `t` of `window` credits, for initiator A's I_T nexus through IOC 0.
fn channel(t: &Target, id: u64, window: u32, executor: Arc<dyn Executor>) -> ChannelIo {
    t.channel(id, window, nexus_data(0), executor)
}

/// Polls `io` until its slots are free (the last response's SEND completed).
fn await_quiet(io: &mut ChannelIo) {
    let end = Instant::now() + DEADLINE;
    while io.in_flight() > 0 {
        assert!(Instant::now() < end, "slots still busy: {io:?}");
        io.poll();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(io.channel().outstanding(), 0);
}

/// Checks that everything the target held for a closed channel is released: its QP
/// drained (the closed channel is polled until the drain's marker completes), its memory
/// region no longer registered, its QP gone, nothing in flight.
fn assert_released(t: &Target, io: &mut ChannelIo, keys: MrKeys) {
    assert_eq!(io.state(), IoState::Closed);
    assert_eq!(io.in_flight(), 0);
    assert_eq!(io.channel().outstanding(), 0);
    // The drain's marker, then the release verbs on the CA's dispatcher.
    let end = Instant::now() + DEADLINE;
    while !io.released() {
        assert!(Instant::now() < end, "channel not released: {io:?}");
        io.poll();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(io.mr_keys(), None);
    let qp = QpId::Qp(io.qpn().expect("qpn"));
    t.ca.hca().with(|e, _| {
        assert!(e.dereg_mr(keys).is_err(), "region still registered");
        assert_eq!(e.qp_state(qp), None, "QP still exists");
    });
}

/// Sends one SRP_CMD and returns the SRP_RSP's bytes.
fn exchange(i: &Initiator, ep: &Ep, io: &mut ChannelIo, iu: Vec<u8>) -> Vec<u8> {
    i.send(ep, &[iu]);
    await_iu(i, ep, &mut [io])
}

fn rsp(bytes: &[u8]) -> Rsp<'_> {
    Rsp::parse(bytes).expect("SRP_RSP parses")
}

/// READ(10) of 4 blocks at LBA 40 whose data-in is an indirect descriptor with only the
/// first of `table`'s entries inline: the target must fetch `table` from `EP_TABLE`.
fn read_via_partial_list(
    i: &Initiator,
    ep: &Ep,
    io: &mut ChannelIo,
    tag: u64,
    table: &[DirectBuf],
    inline: &[DirectBuf],
) -> Vec<u8> {
    // DirectBuf is the wire layout of a descriptor, so the table is its bytes.
    i.write(ep, EP_TABLE, table.as_bytes());
    let ind = Indirect {
        table: i.buf(ep, EP_TABLE, (table.len() * 16) as u32),
        total_len: 2048,
        inline,
    };
    let iu = cmd_iu(
        tag,
        &read10(40, 4),
        DataDesc::None,
        DataDesc::Indirect(ind),
        &[],
    );
    exchange(i, ep, io, iu)
}

/// Target on 127.0.`net`.1, initiator on .2, one channel of `window` connected.
fn rig(net: u8, window: u32, ex: Arc<dyn Executor>) -> (Target, Initiator, Ep, ChannelIo) {
    rig_at(net, 1, window, ex)
}

/// As [`rig`], target on 127.0.`net`.`host`, initiator on `host + 1`.
fn rig_at(
    net: u8,
    host: u8,
    window: u32,
    ex: Arc<dyn Executor>,
) -> (Target, Initiator, Ep, ChannelIo) {
    let t = target(ip(net, host));
    let i = Initiator::open(ip(net, host + 1));
    let ep = i.ep(0, window as usize + 2);
    let mut io = channel(&t, 1, window, ex);
    connect(&t, &mut io, &i, &ep);
    (t, i, ep, io)
}

#[test]
fn write_then_read_direct_with_data_check() {
    let (_t, i, ep, mut io) = rig(90, 4, Arc::new(Inline));
    let data = pattern(4096, 7);
    i.write(&ep, EP_DATA, &data);
    let out = DataDesc::Direct(i.buf(&ep, EP_DATA, 4096));
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(1, &write10(8, 8, false), out, DataDesc::None, &[]),
    );
    let r = rsp(&r);
    assert_eq!((r.tag, r.status), (Tag(1), Status::Good), "{r:?}");
    assert_eq!(r.data_out_residual, Residual::None);
    assert_eq!(r.req_lim_delta, 1, "every response returns the credit");

    let into = DataDesc::Direct(i.buf(&ep, EP_DATA + 8192, 4096));
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(2, &read10(8, 8), DataDesc::None, into, &[]),
    );
    let r = rsp(&r);
    assert_eq!((r.tag, r.status), (Tag(2), Status::Good), "{r:?}");
    assert_eq!(r.data_in_residual, Residual::None);
    assert_eq!(i.read(&ep, EP_DATA + 8192, 4096), data);
    await_quiet(&mut io);
}

#[test]
fn indirect_three_segments_both_ways_on_workers() {
    let workers: Arc<dyn Executor> = Arc::new(Workers::new(2, 8).expect("workers"));
    let (_t, i, ep, mut io) = rig(91, 4, workers);
    let data = pattern(3 * 1024, 3);
    // Three scattered pieces of 512, 1536 and 1024 bytes.
    let lens = [512u32, 1536, 1024];
    let offs = [EP_DATA, EP_DATA + 16384, EP_DATA + 40000];
    let mut at = 0usize;
    let segs: Vec<DirectBuf> = lens
        .iter()
        .zip(offs)
        .map(|(&l, o)| {
            i.write(&ep, o, &data[at..at + l as usize]);
            at += l as usize;
            i.buf(&ep, o, l)
        })
        .collect();
    let ind = Indirect {
        table: i.buf(&ep, EP_TABLE, 48),
        total_len: 3072,
        inline: &segs,
    };
    let iu = cmd_iu(
        10,
        &write10(100, 6, false),
        DataDesc::Indirect(ind),
        DataDesc::None,
        &[],
    );
    let r = exchange(&i, &ep, &mut io, iu);
    assert_eq!(rsp(&r).status, Status::Good, "{:?}", rsp(&r));

    // Read back into three other pieces (1024, 1024, 1024).
    let offs_in = [EP_DATA + 100_000, EP_DATA + 200_000, EP_DATA + 300_000];
    let segs_in: Vec<DirectBuf> = offs_in.iter().map(|&o| i.buf(&ep, o, 1024)).collect();
    let ind = Indirect {
        table: i.buf(&ep, EP_TABLE, 48),
        total_len: 3072,
        inline: &segs_in,
    };
    let iu = cmd_iu(
        11,
        &read10(100, 6),
        DataDesc::None,
        DataDesc::Indirect(ind),
        &[],
    );
    let r = exchange(&i, &ep, &mut io, iu);
    assert_eq!(rsp(&r).status, Status::Good);
    let got: Vec<u8> = offs_in.iter().flat_map(|&o| i.read(&ep, o, 1024)).collect();
    assert_eq!(got, data);
}

#[test]
fn partial_indirect_list_fetches_the_external_table() {
    let (_t, i, ep, mut io) = rig(92, 4, Arc::new(Inline));
    let data = pattern(2048, 11);
    let direct = DataDesc::Direct(i.buf(&ep, EP_DATA, 2048));
    i.write(&ep, EP_DATA, &data);
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(1, &write10(40, 4, false), direct, DataDesc::None, &[]),
    );
    assert_eq!(rsp(&r).status, Status::Good);

    // Data-in over three segments; only the first is inline, the table holds all three.
    let offs = [EP_DATA + 10_000, EP_DATA + 20_000, EP_DATA + 30_000];
    let lens = [100u32, 900, 1048];
    let segs: Vec<DirectBuf> = offs
        .iter()
        .zip(lens)
        .map(|(&o, l)| i.buf(&ep, o, l))
        .collect();
    let r = read_via_partial_list(&i, &ep, &mut io, 2, &segs, &segs[..1]);
    let r = rsp(&r);
    assert_eq!(r.status, Status::Good, "{r:?}");
    assert_eq!(r.data_in_residual, Residual::None);
    let got: Vec<u8> = offs
        .iter()
        .zip(lens)
        .flat_map(|(&o, l)| i.read(&ep, o, l as usize))
        .collect();
    assert_eq!(got, data);

    // A table that contradicts its inline prefix: CHECK CONDITION, the channel stays up.
    let mut bad = segs.clone();
    bad[0] = i.buf(&ep, EP_DATA + 50_000, 100);
    let r = read_via_partial_list(&i, &ep, &mut io, 3, &bad, &segs[..1]);
    assert_eq!(rsp(&r).status, Status::CheckCondition);
    assert_eq!(io.state(), IoState::Live);
}

#[test]
fn immediate_data_write_reads_back() {
    let (_t, i, ep, mut io) = rig(93, 4, Arc::new(Inline));
    let data = pattern(512, 42);
    let iu = cmd_iu(
        5,
        &write10(3, 1, false),
        DataDesc::Immediate,
        DataDesc::None,
        &data,
    );
    let r = exchange(&i, &ep, &mut io, iu);
    assert_eq!(rsp(&r).status, Status::Good, "{:?}", rsp(&r));
    let into = DataDesc::Direct(i.buf(&ep, EP_DATA, 512));
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(6, &read10(3, 1), DataDesc::None, into, &[]),
    );
    assert_eq!(rsp(&r).status, Status::Good);
    assert_eq!(i.read(&ep, EP_DATA, 512), data);
}

#[test]
fn inquiry_shorter_than_the_buffer_reports_diunder() {
    let (_t, i, ep, mut io) = rig(94, 4, Arc::new(Inline));
    i.write(&ep, EP_DATA, &[0xee; 255]);
    let into = DataDesc::Direct(i.buf(&ep, EP_DATA, 255));
    let inquiry = [0x12, 0, 0, 0, 255, 0];
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(9, &inquiry, DataDesc::None, into, &[]),
    );
    let r = rsp(&r);
    assert_eq!(r.status, Status::Good);
    let Residual::Underflow(n) = r.data_in_residual else {
        panic!("expected DIUNDER, got {r:?}")
    };
    let moved = 255 - n as usize;
    let got = i.read(&ep, EP_DATA, 255);
    // Standard INQUIRY: ADDITIONAL LENGTH (byte 4) + 5 bytes were sent, nothing past them.
    assert_eq!(moved, usize::from(got[4]) + 5);
    assert_eq!(got[0] & 0x1f, 0, "direct-access block device");
    assert!(got[moved..].iter().all(|&b| b == 0xee));
}

#[test]
fn unmapped_lun_answers_inquiry_and_refuses_the_rest() {
    let (_t, i, ep, mut io) = rig_at(94, 3, 4, Arc::new(Inline));
    let lun3 = Lun::from_number(3).expect("3");
    i.write(&ep, EP_DATA, &[0xee; 96]);
    let into = DataDesc::Direct(i.buf(&ep, EP_DATA, 96));
    let inquiry = srp_cmd(1, lun3, &[0x12, 0, 0, 0, 96, 0], DataDesc::None, into);
    let r = exchange(&i, &ep, &mut io, cmd_bytes(&inquiry));
    assert_eq!(rsp(&r).status, Status::Good);
    assert_eq!(
        i.read(&ep, EP_DATA, 1)[0],
        0x7f,
        "qualifier 011b, no device type"
    );
    let tur = srp_cmd(2, lun3, &tur(), DataDesc::None, DataDesc::None);
    let r = exchange(&i, &ep, &mut io, cmd_bytes(&tur));
    let r = rsp(&r);
    assert_eq!(r.status, Status::CheckCondition);
    // Fixed sense: key byte 2, ASC byte 12, ASCQ byte 13.
    assert_eq!(
        (r.sense[2] & 0x0f, r.sense[12], r.sense[13]),
        (0x5, 0x25, 0x00)
    );
}

#[test]
fn bad_rkey_closes_that_channel_only() {
    let t = target(ip(95, 1));
    let i = Initiator::open(ip(95, 2));
    let (ep_a, ep_b) = (i.ep(0, 6), i.ep(1, 6));
    let mut a = channel(&t, 1, 4, Arc::new(Inline));
    let mut b = channel(&t, 2, 4, Arc::new(Inline));
    connect(&t, &mut a, &i, &ep_a);
    connect(&t, &mut b, &i, &ep_b);
    let keys = a.mr_keys().expect("registered");

    // Data-out under an rkey the initiator never issued: the target's RDMA READ is NAKed.
    let bogus = DirectBuf::new(IOVA + EP_DATA, Rkey(i.rkey().0 ^ 0x5a5a_0000), 4096);
    i.send(
        &ep_a,
        &[cmd_iu(
            1,
            &write10(0, 8, false),
            DataDesc::Direct(bogus),
            DataDesc::None,
            &[],
        )],
    );
    await_closed(&mut a);
    assert!(
        a.close_reason().is_some_and(|r| r.contains("RemAccessErr")),
        "{:?}",
        a.close_reason()
    );
    assert_released(&t, &mut a, keys);
    // The initiator's QP went to ERR with the NAK; its receives flush.
    let end = Instant::now() + DEADLINE;
    let mut flushed = false;
    while !flushed && Instant::now() < end {
        flushed = i
            .poll(&ep_a)
            .iter()
            .any(|w| w.status == WcStatus::WrFlushErr);
    }
    assert!(flushed, "initiator QP A not in error");

    // The other channel keeps working.
    let data = pattern(4096, 1);
    i.write(&ep_b, EP_DATA, &data);
    let out = DataDesc::Direct(i.buf(&ep_b, EP_DATA, 4096));
    let r = exchange(
        &i,
        &ep_b,
        &mut b,
        cmd_iu(2, &write10(0, 8, false), out, DataDesc::None, &[]),
    );
    assert_eq!(rsp(&r).status, Status::Good);
    let into = DataDesc::Direct(i.buf(&ep_b, EP_DATA + 8192, 4096));
    let r = exchange(
        &i,
        &ep_b,
        &mut b,
        cmd_iu(3, &read10(0, 8), DataDesc::None, into, &[]),
    );
    assert_eq!(rsp(&r).status, Status::Good);
    assert_eq!(i.read(&ep_b, EP_DATA + 8192, 4096), data);
    assert_eq!(b.state(), IoState::Live);
}

/// Waits until every SEND of `ep` completed (the target's HCA acknowledged them, so their
/// receive completions wait in the target's CQ).
fn await_sends(i: &Initiator, ep: &Ep, n: usize) {
    let end = Instant::now() + DEADLINE;
    let mut done = 0;
    while done < n {
        assert!(Instant::now() < end, "sends not acknowledged");
        for wc in i.poll(ep) {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            done += usize::from(wc.opcode == WcOpcode::Send);
        }
    }
}

fn expect_logout(iu: &[u8], reason: TLogoutReason) {
    assert_eq!(IuType::from(iu[0]), IuType::TLogout, "{iu:02x?}");
    let l = TLogout::parse(iu).expect("T_LOGOUT parses");
    assert_eq!(l.reason, reason);
}

#[test]
fn credit_overrun_is_logged_out() {
    let workers: Arc<dyn Executor> = Arc::new(Workers::new(1, 8).expect("workers"));
    let (t, i, ep, mut io) = rig(96, 2, workers);
    let keys = io.mr_keys().expect("registered");
    // Three TEST UNIT READYs on a window of two, all arrived before the target looks.
    let tur = [0u8; 6];
    let ius: Vec<Vec<u8>> = (1..=3)
        .map(|tag| cmd_iu(tag, &tur, DataDesc::None, DataDesc::None, &[]))
        .collect();
    i.send(&ep, &ius);
    await_sends(&i, &ep, 3);
    let iu = await_iu(&i, &ep, &mut [&mut io]);
    expect_logout(&iu, TLogoutReason::NoReason);
    await_closed(&mut io);
    assert!(
        io.close_reason().is_some_and(|r| r.contains("credit")),
        "{:?}",
        io.close_reason()
    );
    assert_released(&t, &mut io, keys);
}

#[test]
fn malformed_iu_is_logged_out_and_others_keep_working() {
    let t = target(ip(97, 1));
    let i = Initiator::open(ip(97, 2));
    let (ep_a, ep_b) = (i.ep(0, 6), i.ep(1, 6));
    let mut a = channel(&t, 1, 4, Arc::new(Inline));
    let mut b = channel(&t, 2, 4, Arc::new(Inline));
    connect(&t, &mut a, &i, &ep_a);
    connect(&t, &mut b, &i, &ep_b);
    let keys = a.mr_keys().expect("registered");
    // An SRP_CMD cut short after 10 bytes.
    let mut short = cmd_iu(1, &tur(), DataDesc::None, DataDesc::None, &[]);
    short.truncate(10);
    i.send(&ep_a, &[short]);
    let iu = await_iu(&i, &ep_a, &mut [&mut a]);
    expect_logout(&iu, TLogoutReason::InvalidIuLength);
    await_closed(&mut a);
    assert_released(&t, &mut a, keys);

    let r = exchange(
        &i,
        &ep_b,
        &mut b,
        cmd_iu(2, &tur(), DataDesc::None, DataDesc::None, &[]),
    );
    assert_eq!(rsp(&r).status, Status::Good);
}

#[test]
fn many_hostile_channels_leak_nothing() {
    let t = target(ip(98, 1));
    let i = Initiator::open(ip(98, 2));
    // Issue #5: nothing leaks across 1000 hostile events. Each round is a fresh channel
    // that gets a truncated SRP_CMD, an unknown IU type, or an IU longer than negotiated.
    for round in 0..1000u64 {
        let ep = i.ep(round % 4, 6);
        let mut io = channel(&t, round, 4, Arc::new(Inline));
        connect(&t, &mut io, &i, &ep);
        let keys = io.mr_keys().expect("registered");
        match round % 3 {
            0 | 1 => {
                let iu = if round % 3 == 0 {
                    vec![IuType::Cmd.into(), 0, 0]
                } else {
                    vec![0x7f; 64]
                };
                i.send(&ep, &[iu]);
                let got = await_iu(&i, &ep, &mut [&mut io]);
                assert_eq!(IuType::from(got[0]), IuType::TLogout);
            }
            _ => {
                // Longer than the receive buffers: the HCA refuses it (the initiator's SEND
                // fails, both QPs go to error), so no T_LOGOUT can travel; the target
                // channel must still close and release everything.
                i.send(&ep, &[vec![IuType::Cmd.into(); IT_IU_LEN as usize + 1]]);
            }
        }
        await_closed(&mut io);
        assert_released(&t, &mut io, keys);
        i.hca
            .with(|e, now| e.destroy_qp(now, ep.qp))
            .expect("destroy");
        i.hca.with(|e, _| e.destroy_cq(ep.cq)).expect("destroy cq");
    }
}

#[test]
fn task_management_answers_and_abort_in_flight_sends_no_response() {
    let (_t, i, ep, mut io) = rig(99, 4, Arc::new(Inline));
    for (tag, function, task, want) in [
        (1, TaskMgmtFunction::AbortTask, 77, TmfResponse::Complete),
        (2, TaskMgmtFunction::ClearAca, 0, TmfResponse::NotSupported),
        (
            3,
            TaskMgmtFunction::LogicalUnitReset,
            0,
            TmfResponse::Complete,
        ),
    ] {
        let r = exchange(&i, &ep, &mut io, tmf_iu(tag, Lun::ZERO, function, task));
        assert_eq!(rsp(&r).tmf_response(), Some(want), "{function:?}");
    }
    // The reset is a unit attention for every I_T nexus, the resetting one included (SAM-5):
    // CHECK CONDITION, UNIT ATTENTION, BUS DEVICE RESET FUNCTION OCCURRED, then cleared.
    let probe = || cmd_iu(30, &tur(), DataDesc::None, DataDesc::None, &[]);
    let r = exchange(&i, &ep, &mut io, probe());
    let r = rsp(&r);
    assert_eq!(r.status, Status::CheckCondition);
    assert_eq!(
        (r.sense[2] & 0x0f, r.sense[12], r.sense[13]),
        (0x6, 0x29, 0x03)
    );
    assert_eq!(
        rsp(&exchange(&i, &ep, &mut io, probe())).status,
        Status::Good
    );

    // A WRITE whose data-out is still being read when ABORT TASK arrives: the WRITE gets
    // no SRP_RSP and does not reach the LU; its credit rides on the TMF's response.
    let before = pattern(512, 9);
    let into = DataDesc::Direct(i.buf(&ep, EP_DATA, 512));
    i.write(&ep, EP_DATA + 4096, &before);
    let out = DataDesc::Direct(i.buf(&ep, EP_DATA + 4096, 512));
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(4, &write10(7, 1, false), out, DataDesc::None, &[]),
    );
    assert_eq!(rsp(&r).status, Status::Good);
    i.write(&ep, EP_DATA + 8192, &pattern(512, 10));
    let out = DataDesc::Direct(i.buf(&ep, EP_DATA + 8192, 512));
    let ius = [
        cmd_iu(5, &write10(7, 1, false), out, DataDesc::None, &[]),
        tmf_iu(6, Lun::ZERO, TaskMgmtFunction::AbortTask, 5),
    ];
    i.send(&ep, &ius);
    await_sends(&i, &ep, 2);
    let r = await_iu(&i, &ep, &mut [&mut io]);
    let r = rsp(&r);
    assert_eq!(
        (r.tag, r.tmf_response()),
        (Tag(6), Some(TmfResponse::Complete))
    );
    assert_eq!(
        r.req_lim_delta, 2,
        "the aborted command's credit comes back too"
    );
    await_quiet(&mut io);
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(7, &read10(7, 1), DataDesc::None, into, &[]),
    );
    assert_eq!(rsp(&r).tag, Tag(7), "no response for the aborted tag 5");
    assert_eq!(i.read(&ep, EP_DATA, 512), before);
}

#[test]
fn oversized_transfer_is_check_condition_and_the_channel_stays() {
    let (_t, i, ep, mut io) = rig_at(99, 3, 4, Arc::new(Inline));
    // 1 MiB described against a 256 KiB limit.
    let out = DataDesc::Direct(i.buf(&ep, EP_DATA, 1 << 20));
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(1, &write10(0, 2048, false), out, DataDesc::None, &[]),
    );
    let r = rsp(&r);
    assert_eq!(r.status, Status::CheckCondition);
    // Fixed sense: key ILLEGAL REQUEST, ASC/ASCQ 24h/00h INVALID FIELD IN CDB.
    assert_eq!(
        (r.sense[2] & 0x0f, r.sense[12], r.sense[13]),
        (0x5, 0x24, 0x00)
    );
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(2, &tur(), DataDesc::None, DataDesc::None, &[]),
    );
    assert_eq!(rsp(&r).status, Status::Good);
}

fn tur() -> [u8; 6] {
    [0; 6]
}

/// A closed channel's QP is drained before its memory goes: at close the QP is moved to
/// ERR and the drain's marker posted, and while its flushed completions are not yet
/// polled the region stays registered and the QP exists (a device may still be working
/// through its queue); polling takes the marker, and only then are QP, CQ and region
/// released (SCST's and SPDK's order; Linux ib_srp's 7dad6b2e440d).
#[test]
fn a_closed_channel_is_drained_before_its_memory_is_released() {
    let (t, _i, _ep, mut io) = rig(92, 7, Arc::new(Inline));
    let keys = io.mr_keys().expect("registered");
    let qp = QpId::Qp(io.qpn().expect("qpn"));
    io.close("test: drain");
    // The ERR transition and the marker run on the CA's dispatcher: wait for the QP's
    // state, without polling the channel.
    let end = Instant::now() + DEADLINE;
    while t.ca.hca().with(|e, _| e.qp_state(qp)) != Some(hca::qp::state::QpState::Err) {
        assert!(Instant::now() < end, "QP not moved to ERR: {io:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !io.released(),
        "released before the drain's marker was polled"
    );
    assert_eq!(io.mr_keys(), Some(keys), "the region went before the drain");
    assert!(
        t.ca.hca().with(|e, _| e.qp_state(qp)).is_some(),
        "the QP went before the drain"
    );
    assert_released(&t, &mut io, keys);
}

/// More WRITEs than the send queue holds, from commands all waiting at once: the chains
/// that do not fit wait for completions (counted) instead of overflowing the queue, which
/// the device refuses — and a refused post tears the channel down. Here the queue holds 40
/// entries and 8 READs of 12 scattered 512-byte pieces each need 8 × 13 = 104.
#[test]
fn chains_beyond_the_send_queue_wait_for_room() {
    let mut t = target(ip(96, 5));
    t.send_queue_depth = 40;
    let i = Initiator::open(ip(96, 6));
    let ep = i.ep(0, 10);
    let mut io = channel(&t, 1, 8, Arc::new(Inline));
    connect(&t, &mut io, &i, &ep);
    let data = pattern(12 * 512, 5);
    i.write(&ep, EP_DATA, &data);
    let out = DataDesc::Direct(i.buf(&ep, EP_DATA, 12 * 512));
    let r = exchange(
        &i,
        &ep,
        &mut io,
        cmd_iu(1, &write10(64, 12, false), out, DataDesc::None, &[]),
    );
    assert_eq!(rsp(&r).status, Status::Good);
    // Eight READs of the same 12 blocks, each into 12 pieces 1 KiB apart, sent together
    // (two chains of four IUs) before the target polls once.
    let ius: Vec<Vec<u8>> = (0..8u64)
        .map(|k| {
            let segs: Vec<DirectBuf> = (0..12u64)
                .map(|p| i.buf(&ep, EP_DATA + 65_536 + k * 16_384 + p * 1024, 512))
                .collect();
            let ind = Indirect {
                table: i.buf(&ep, EP_TABLE, 12 * 16),
                total_len: 12 * 512,
                inline: &segs,
            };
            cmd_iu(
                10 + k,
                &read10(64, 12),
                DataDesc::None,
                DataDesc::Indirect(ind),
                &[],
            )
        })
        .collect();
    i.send(&ep, &ius[..4]);
    await_sends(&i, &ep, 4);
    i.send(&ep, &ius[4..]);
    await_sends(&i, &ep, 4);
    let mut good = 0;
    for _ in 0..8 {
        let r = await_iu(&i, &ep, &mut [&mut io]);
        assert_eq!(rsp(&r).status, Status::Good, "{:?}", rsp(&r));
        good += 1;
    }
    assert_eq!(good, 8);
    assert_eq!(io.state(), IoState::Live, "the channel stays up");
    for k in 0..8u64 {
        let got: Vec<u8> = (0..12u64)
            .flat_map(|p| i.read(&ep, EP_DATA + 65_536 + k * 16_384 + p * 1024, 512))
            .collect();
        assert_eq!(got, data, "command {k}'s pieces");
    }
    assert!(
        io.counters().send_queue_waits > 0,
        "some chains waited: {:?}",
        io.counters()
    );
    await_quiet(&mut io);
}
