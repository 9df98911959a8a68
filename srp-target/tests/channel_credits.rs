//! PREEMPT AND ABORT across channels and SRP_CRED_REQ, at the [`ChannelIo`] level: two
//! initiators (two I_T nexuses, each on its own channel) share one RAM LUN; B's commands are
//! held in a gated executor (queued for a worker, not yet run) when A's PREEMPT AND ABORT
//! completes. The test is the driver: it polls the channels and calls [`settle_aborts`]
//! as the daemon loop does. Also: ABORT TASK SET, CLEAR TASK SET and LOGICAL UNIT RESET
//! reach the channels they cover, and a closed channel's queued jobs are not run. Loopback
//! 127.0.107.x.

mod common;
mod verbs;

use common::pr::{PREEMPT_AND_ABORT, REGISTER, RESERVE, WRITE_EXCLUSIVE};
use common::{nexus_data_of, pattern, pr_out, ram_lu, read10, tmf_iu, write10};
use scsi::Lun;
use scsi::Status;
use srp::wire::cred::{CredReq, CredRsp};
use srp::wire::desc::DataDesc;
use srp::wire::logout::{TLogout, TLogoutReason};
use srp::wire::rsp::{Rsp, TmfResponse};
use srp::wire::tsk_mgmt::TaskMgmtFunction;
use srp::wire::{IuType, PortId, Tag};
use srp_target::BlockSize;
use srp_target::io::{
    AbortScope, ChannelIo, Executor, Inline, IoState, Job, NexusAbort, settle_aborts,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use verbs::{DEADLINE, EP_DATA, Ep, Initiator, Target, await_iu, cmd_iu, connect, ip, take_iu};
use wirekit::WireRepr;

const INITIATOR_A: PortId = PortId([0xa0; 16]);
const INITIATOR_B: PortId = PortId([0xb0; 16]);
const KEY_A: u64 = 0xaaaa;
const KEY_B: u64 = 0xbbbb;

/// Runs jobs at once, or parks them (queued for a worker that has not taken them yet)
/// while `hold` is set.
#[derive(Default)]
struct Gate {
    hold: AtomicBool,
    parked: Mutex<Vec<Job>>,
}

impl Executor for Gate {
    fn submit(&self, job: Job) -> Result<(), Job> {
        if self.hold.load(Ordering::SeqCst) {
            self.parked.lock().expect("gate").push(job);
        } else {
            job.run();
        }
        Ok(())
    }
}

impl Gate {
    fn parked(&self) -> usize {
        self.parked.lock().expect("gate").len()
    }

    /// Runs what is parked, as a worker would, and stops holding.
    fn release(&self) {
        self.hold.store(false, Ordering::SeqCst);
        let jobs: Vec<Job> = std::mem::take(&mut *self.parked.lock().expect("gate"));
        jobs.into_iter().for_each(Job::run);
    }
}

/// One initiator's channel: its endpoint, the target channel, the next tag.
struct Side {
    ep: Ep,
    io: ChannelIo,
    tag: u64,
}

/// Target on 127.0.107.`net`, initiators A and B on the next two addresses, each with one
/// channel (window 4) to the shared LUN 0; B's executor is `gate`.
fn rig(net: u8, gate: Arc<Gate>) -> (Target, Initiator, Initiator, Side, Side) {
    let t = Target::open(ip(107, net), ram_lu(2048, BlockSize::B512));
    let (ia, ib) = (
        Initiator::open(ip(107, net + 1)),
        Initiator::open(ip(107, net + 2)),
    );
    let side = |t: &Target, i: &Initiator, id: u64, who: PortId, ex: Arc<dyn Executor>| {
        let ep = i.ep(0, 6);
        let mut io = t.channel(id, 4, nexus_data_of(who, 0), ex);
        connect(t, &mut io, i, &ep);
        Side { ep, io, tag: 0 }
    };
    let a = side(&t, &ia, 1, INITIATOR_A, Arc::new(Inline));
    let b = side(&t, &ib, 2, INITIATOR_B, gate);
    (t, ia, ib, a, b)
}

/// PERSISTENT RESERVE OUT with its 24-byte parameter list as immediate data.
fn pr_out_iu(tag: u64, action: u8, kind: u8, key: u64, sa_key: u64) -> Vec<u8> {
    let (cdb, params) = pr_out(action, kind, key, sa_key, 0);
    cmd_iu(tag, &cdb, DataDesc::Immediate, DataDesc::None, &params)
}

/// Sends `iu` on `s` and returns its SRP_RSP's (tag, status, credits).
fn exchange(i: &Initiator, s: &mut Side, iu: Vec<u8>) -> (Tag, Status, u32) {
    let (tag, status, delta, _) = exchange_sense(i, s, iu);
    (tag, status, delta)
}

/// As [`exchange`], with the sense data's (key, ASC, ASCQ) if there is sense.
fn exchange_sense(
    i: &Initiator,
    s: &mut Side,
    iu: Vec<u8>,
) -> (Tag, Status, u32, Option<(u8, u8, u8)>) {
    i.send(&s.ep, &[iu]);
    let r = await_iu(i, &s.ep, &mut [&mut s.io]);
    let r = Rsp::parse(&r).unwrap_or_else(|e| panic!("SRP_RSP expected: {e} {r:02x?}"));
    let sense = (r.sense.len() >= 14).then(|| (r.sense[2] & 0x0f, r.sense[12], r.sense[13]));
    (r.tag, r.status, r.req_lim_delta, sense)
}

fn next(s: &mut Side) -> u64 {
    s.tag += 1;
    s.tag
}

fn pr(i: &Initiator, s: &mut Side, action: u8, kind: u8, key: u64, sa_key: u64) -> Status {
    let tag = next(s);
    exchange(i, s, pr_out_iu(tag, action, kind, key, sa_key)).1
}

/// WRITE(10) of one block at `lba` whose data-out the target RDMA READs.
fn write_iu(i: &Initiator, s: &mut Side, lba: u32, data: &[u8]) -> Vec<u8> {
    let tag = next(s);
    let off = EP_DATA + u64::from(lba) * 4096;
    i.write(&s.ep, off, data);
    let out = DataDesc::Direct(i.buf(&s.ep, off, 512));
    cmd_iu(tag, &write10(lba, 1, false), out, DataDesc::None, &[])
}

fn read(i: &Initiator, s: &mut Side, lba: u32) -> (Status, Vec<u8>) {
    let tag = next(s);
    let off = EP_DATA + 0x8_0000;
    let into = DataDesc::Direct(i.buf(&s.ep, off, 512));
    let (_, st, _) = exchange(
        i,
        s,
        cmd_iu(tag, &read10(lba, 1), DataDesc::None, into, &[]),
    );
    (st, i.read(&s.ep, off, 512))
}

/// Polls `ios` until `gate` holds `n` jobs.
fn await_parked(gate: &Gate, n: usize, ios: &mut [&mut ChannelIo]) {
    let end = Instant::now() + DEADLINE;
    while gate.parked() < n {
        assert!(Instant::now() < end, "{} of {n} jobs parked", gate.parked());
        ios.iter_mut().for_each(|io| {
            io.poll();
        });
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Polls `io` for `ms` milliseconds and returns every IU `ep` received meanwhile.
fn collect(i: &Initiator, ep: &Ep, io: &mut ChannelIo, ms: u64) -> Vec<Vec<u8>> {
    let end = Instant::now() + Duration::from_millis(ms);
    let mut got = Vec::new();
    while Instant::now() < end {
        io.poll();
        while let Some(iu) = take_iu(i, ep) {
            got.push(iu);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    got
}

fn cred_req(iu: &[u8]) -> CredReq {
    CredReq::parse(iu).unwrap_or_else(|e| panic!("SRP_CRED_REQ expected: {e} {iu:02x?}"))
}

fn cred_rsp(tag: Tag) -> Vec<u8> {
    let mut buf = vec![0u8; 16];
    CredRsp { tag }.emit(&mut buf).expect("fits");
    buf
}

#[test]
fn preempt_and_abort_aborts_the_other_nexus_tasks_and_returns_their_credits() {
    let gate = Arc::new(Gate::default());
    let (t, ia, ib, mut a, mut b) = rig(1, gate.clone());
    // A and B register; B takes Write Exclusive and writes LBA 5.
    assert_eq!(pr(&ia, &mut a, REGISTER, 0, 0, KEY_A), Status::Good);
    assert_eq!(pr(&ib, &mut b, REGISTER, 0, 0, KEY_B), Status::Good);
    assert_eq!(
        pr(&ib, &mut b, RESERVE, WRITE_EXCLUSIVE, KEY_B, 0),
        Status::Good
    );
    let before = pattern(512, 1);
    let iu = write_iu(&ib, &mut b, 5, &before);
    assert_eq!(exchange(&ib, &mut b, iu).1, Status::Good);

    // B's next three WRITEs (two data-out by RDMA READ, one immediate) are queued for a
    // worker that has not taken them.
    gate.hold.store(true, Ordering::SeqCst);
    let mut ius = vec![
        write_iu(&ib, &mut b, 5, &pattern(512, 2)),
        write_iu(&ib, &mut b, 6, &pattern(512, 3)),
    ];
    let tag = next(&mut b);
    ius.push(cmd_iu(
        tag,
        &write10(7, 1, false),
        DataDesc::Immediate,
        DataDesc::None,
        &pattern(512, 4),
    ));
    let aborted: Vec<Tag> = (tag - 2..=tag).map(Tag).collect();
    ib.send(&b.ep, &ius);
    await_parked(&gate, 3, &mut [&mut b.io]);
    assert_eq!(b.io.channel().outstanding(), 3);

    // A preempts B's key and aborts its tasks. A's answer waits until the driver applied
    // the abort to every channel.
    let pa = next(&mut a);
    ia.send(
        &a.ep,
        &[pr_out_iu(
            pa,
            PREEMPT_AND_ABORT,
            WRITE_EXCLUSIVE,
            KEY_A,
            KEY_B,
        )],
    );
    let early = collect(&ia, &a.ep, &mut a.io, 30);
    assert!(early.is_empty(), "answered before the abort: {early:02x?}");
    assert_eq!(settle_aborts(&mut [&mut a.io, &mut b.io]), 1);
    assert_eq!(
        settle_aborts(&mut [&mut a.io, &mut b.io]),
        0,
        "settled once"
    );
    let r = await_iu(&ia, &a.ep, &mut [&mut a.io]);
    let r = Rsp::parse(&r).expect("SRP_RSP");
    assert_eq!((r.tag, r.status), (Tag(pa), Status::Good));

    // B: its tags are free, its three credits come back in one SRP_CRED_REQ.
    assert_eq!(b.io.channel().outstanding(), 0);
    let iu = await_iu(&ib, &b.ep, &mut [&mut b.io]);
    let c = cred_req(&iu);
    assert_eq!(c.req_lim_delta, 3, "{c:?}");

    // The worker takes the queued jobs now: they are not executed and get no response.
    let executed = t.lu.counters().commands;
    gate.release();
    assert_eq!(t.lu.counters().commands, executed, "aborted jobs ran");
    let extra = collect(&ib, &b.ep, &mut b.io, 50);
    assert!(
        extra.is_empty(),
        "responses for aborted tags {aborted:?}: {extra:02x?}"
    );
    assert_eq!(b.io.in_flight(), 0);
    assert_eq!(
        read(&ia, &mut a, 5).1,
        before,
        "the aborted WRITE did not land"
    );
    assert_eq!(read(&ia, &mut a, 6).1, vec![0u8; 512]);
    assert_eq!(read(&ia, &mut a, 7).1, vec![0u8; 512]);

    // B answers the credit request; its channel keeps working, and the reservation is A's.
    ib.send(&b.ep, &[cred_rsp(c.tag)]);
    let quiet = collect(&ib, &b.ep, &mut b.io, 20);
    assert!(quiet.is_empty(), "{quiet:02x?}");
    assert_eq!(b.io.channel().target_requests(), 0);
    assert_eq!(b.io.state(), IoState::Live);
    // B's next command reports the unit attention REGISTRATIONS PREEMPTED (6/2A/05).
    let tag = next(&mut b);
    let tur = cmd_iu(tag, &[0; 6], DataDesc::None, DataDesc::None, &[]);
    let (_, st, _, sense) = exchange_sense(&ib, &mut b, tur);
    assert_eq!(
        (st, sense),
        (Status::CheckCondition, Some((0x6, 0x2a, 0x05)))
    );
    let iu = write_iu(&ib, &mut b, 8, &pattern(512, 5));
    let (tag, st, delta) = exchange(&ib, &mut b, iu);
    assert_eq!(
        (tag, st, delta),
        (Tag(b.tag), Status::ReservationConflict, 1)
    );
    assert_eq!(
        read(&ib, &mut b, 5).0,
        Status::Good,
        "Write Exclusive: B reads"
    );
    assert_eq!(
        pr(&ib, &mut b, RESERVE, WRITE_EXCLUSIVE, KEY_B, 0),
        Status::ReservationConflict,
        "B's registration is gone"
    );
    let iu = write_iu(&ia, &mut a, 8, &pattern(512, 6));
    assert_eq!(exchange(&ia, &mut a, iu).1, Status::Good, "A holds it");
    drop(t);
}

/// B reads `lba` of its own LU (through its gate, which must not be holding).
fn read_b(i: &Initiator, b: &mut Side, lba: u32) -> Vec<u8> {
    let (st, data) = read(i, b, lba);
    assert_eq!(st, Status::Good);
    data
}

#[test]
fn cred_req_one_at_a_time_and_owed_credits_ride_on_responses() {
    let gate = Arc::new(Gate::default());
    let (t, _ia, ib, _a, mut b) = rig(4, gate.clone());
    let b_nexus = nexus_data_of(INITIATOR_B, 0);
    let abort_b = NexusAbort {
        lu: t.lu.clone(),
        scope: AbortScope::Nexuses(vec![b_nexus.nexus().it_nexus()]),
        origin: nexus_data_of(INITIATOR_A, 0).nexus().it_nexus(),
        attention: None,
        drain: srp_target::io::Drain::new(None),
    };
    let hold = |b: &mut Side, n: usize| {
        gate.hold.store(true, Ordering::SeqCst);
        let ius: Vec<Vec<u8>> = (0..n)
            .map(|k| write_iu(&ib, b, 20 + k as u32, &pattern(512, 9)))
            .collect();
        ib.send(&b.ep, &ius);
        await_parked(&gate, n, &mut [&mut b.io]);
    };

    // Another nexus, or another LU, aborts nothing.
    hold(&mut b, 2);
    let other = NexusAbort {
        scope: AbortScope::Nexuses(vec![nexus_data_of(INITIATOR_A, 0).nexus().it_nexus()]),
        ..abort_b.clone()
    };
    assert_eq!(b.io.abort_nexus_tasks(&other), 0);
    let other_lu = NexusAbort {
        lu: Arc::new(ram_lu(8, BlockSize::B512)),
        ..abort_b.clone()
    };
    assert_eq!(b.io.abort_nexus_tasks(&other_lu), 0);
    assert_eq!(b.io.channel().outstanding(), 2);

    // Two aborted on an idle channel: one SRP_CRED_REQ with both credits. No registration
    // or reservation here, so the WRITEs would succeed if the worker still ran them.
    assert_eq!(b.io.abort_nexus_tasks(&abort_b), 2);
    let executed = t.lu.counters().commands;
    gate.release();
    assert_eq!(t.lu.counters().commands, executed, "aborted jobs ran");
    let first = cred_req(&await_iu(&ib, &b.ep, &mut [&mut b.io]));
    assert_eq!(first.req_lim_delta, 2);
    assert_eq!(read_b(&ib, &mut b, 20), vec![0u8; 512], "nothing landed");

    // One more aborted while that request is unanswered: no second CRED_REQ; the credit
    // rides on the next response instead.
    hold(&mut b, 1);
    assert_eq!(b.io.abort_nexus_tasks(&abort_b), 1);
    gate.release();
    let none = collect(&ib, &b.ep, &mut b.io, 30);
    assert!(none.is_empty(), "{none:02x?}");
    let tag = next(&mut b);
    let tur = cmd_iu(tag, &[0; 6], DataDesc::None, DataDesc::None, &[]);
    let (_, st, delta) = exchange(&ib, &mut b, tur);
    assert_eq!(
        (st, delta),
        (Status::Good, 2),
        "its own credit and the owed one"
    );

    // The CRED_RSP costs no credit and needs no answer; then the next owed credits go in a
    // new CRED_REQ.
    ib.send(&b.ep, &[cred_rsp(first.tag)]);
    let none = collect(&ib, &b.ep, &mut b.io, 20);
    assert!(none.is_empty(), "{none:02x?}");
    hold(&mut b, 3);
    assert_eq!(b.io.abort_nexus_tasks(&abort_b), 3);
    gate.release();
    let second = cred_req(&await_iu(&ib, &b.ep, &mut [&mut b.io]));
    assert_eq!(second.req_lim_delta, 3);
    ib.send(&b.ep, &[cred_rsp(second.tag)]);

    // A CRED_RSP nobody asked for is a protocol fault: T_LOGOUT, this channel only.
    ib.send(&b.ep, &[cred_rsp(Tag(0))]);
    let iu = await_iu(&ib, &b.ep, &mut [&mut b.io]);
    assert_eq!(IuType::from(iu[0]), IuType::TLogout, "{iu:02x?}");
    assert_eq!(
        TLogout::parse(&iu).expect("T_LOGOUT").reason,
        TLogoutReason::SpuriousResponse
    );
    let end = Instant::now() + DEADLINE;
    while b.io.state() != IoState::Closed {
        assert!(Instant::now() < end, "not closed: {:?}", b.io);
        b.io.poll();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(
        b.io.close_reason()
            .is_some_and(|r| r.contains("SRP_CRED_RSP")),
        "{:?}",
        b.io.close_reason()
    );
}

#[test]
fn a_closed_channel_s_queued_jobs_are_not_run() {
    let gate = Arc::new(Gate::default());
    let (t, _ia, ib, _a, mut b) = rig(7, gate.clone());
    gate.hold.store(true, Ordering::SeqCst);
    let ius: Vec<Vec<u8>> = (0..3)
        .map(|k| write_iu(&ib, &mut b, 30 + k, &pattern(512, 7)))
        .collect();
    ib.send(&b.ep, &ius);
    await_parked(&gate, 3, &mut [&mut b.io]);
    // The connection goes away (DREQ) with three WRITEs queued for a worker.
    b.io.close("test: initiator disconnected");
    assert_eq!(b.io.state(), IoState::Closed);
    let executed = t.lu.counters().commands;
    gate.release();
    assert_eq!(t.lu.counters().commands, executed, "queued jobs ran");
    b.io.poll();
    assert_eq!(b.io.in_flight(), 0);
}

/// Sends `function` from `a` (with `b` driven too) and checks it completed.
fn tmf(ia: &Initiator, a: &mut Side, b: &mut Side, function: TaskMgmtFunction) {
    let tag = next(a);
    ia.send(&a.ep, &[tmf_iu(tag, Lun::ZERO, function, 0)]);
    let r = await_iu(ia, &a.ep, &mut [&mut a.io, &mut b.io]);
    let r = Rsp::parse(&r).expect("SRP_RSP");
    assert_eq!(
        (r.tag, r.tmf_response()),
        (Tag(tag), Some(TmfResponse::Complete)),
        "{function:?}"
    );
}

/// `n` WRITEs of `b` queued for the gated worker.
fn hold(gate: &Gate, ib: &Initiator, b: &mut Side, n: u32) {
    gate.hold.store(true, Ordering::SeqCst);
    let ius: Vec<Vec<u8>> = (0..n)
        .map(|k| write_iu(ib, b, 50 + k, &pattern(512, 5)))
        .collect();
    ib.send(&b.ep, &ius);
    await_parked(gate, n as usize, &mut [&mut b.io]);
}

/// B's `n` tasks held at `gate` were aborted: none outstanding, their credits back in one
/// SRP_CRED_REQ (answered), and released from the gate they do not run.
fn assert_aborted(t: &Target, gate: &Gate, ib: &Initiator, b: &mut Side, n: u32) {
    assert_eq!(b.io.channel().outstanding(), 0);
    let c = cred_req(&await_iu(ib, &b.ep, &mut [&mut b.io]));
    assert_eq!(c.req_lim_delta, n);
    let executed = t.lu.counters().commands;
    gate.release();
    assert_eq!(t.lu.counters().commands, executed, "aborted tasks ran");
    ib.send(&b.ep, &[cred_rsp(c.tag)]);
}

/// TEST UNIT READY's status and sense (key, ASC, ASCQ).
fn tur(i: &Initiator, s: &mut Side) -> (Status, Option<(u8, u8, u8)>) {
    let tag = next(s);
    let iu = cmd_iu(tag, &[0; 6], DataDesc::None, DataDesc::None, &[]);
    let (_, st, _, sense) = exchange_sense(i, s, iu);
    (st, sense)
}

#[test]
fn task_set_functions_reach_every_channel_they_cover() {
    let gate = Arc::new(Gate::default());
    let (t, ia, ib, mut a, mut b) = rig(10, gate.clone());
    assert_eq!(tur(&ia, &mut a).0, Status::Good);
    assert_eq!(tur(&ib, &mut b).0, Status::Good);

    // ABORT TASK SET covers the sender's I_T nexus only.
    hold(&gate, &ib, &mut b, 2);
    tmf(&ia, &mut a, &mut b, TaskMgmtFunction::AbortTaskSet);
    assert_eq!(b.io.channel().outstanding(), 2);

    // CLEAR TASK SET clears the shared task set: B's tasks are aborted (credits back by
    // CRED_REQ, never run) and B hears COMMANDS CLEARED BY ANOTHER INITIATOR.
    tmf(&ia, &mut a, &mut b, TaskMgmtFunction::ClearTaskSet);
    assert_aborted(&t, &gate, &ib, &mut b, 2);
    assert_eq!(
        tur(&ib, &mut b),
        (Status::CheckCondition, Some((0x6, 0x2f, 0x00)))
    );
    assert_eq!(tur(&ia, &mut a), (Status::Good, None), "not the sender");

    // LOGICAL UNIT RESET: B's task aborted too, and both hear of the reset.
    hold(&gate, &ib, &mut b, 1);
    tmf(&ia, &mut a, &mut b, TaskMgmtFunction::LogicalUnitReset);
    assert_aborted(&t, &gate, &ib, &mut b, 1);
    for (i, s) in [(&ia, &mut a), (&ib, &mut b)] {
        assert_eq!(tur(i, s), (Status::CheckCondition, Some((0x6, 0x29, 0x03))));
        assert_eq!(tur(i, s), (Status::Good, None));
    }
}

/// A RAM disk whose writes wait while held (a job running on a worker, stuck in the
/// backend): (held, writes waiting).
#[derive(Debug, Default)]
struct Stall {
    state: Mutex<(bool, usize)>,
    turn: std::sync::Condvar,
}

impl Stall {
    fn hold(&self, on: bool) {
        self.state.lock().expect("stall").0 = on;
        self.turn.notify_all();
    }

    fn waiting(&self) -> usize {
        self.state.lock().expect("stall").1
    }
}

#[derive(Debug)]
struct StallBackend(srp_target::RamBackend, Arc<Stall>);

impl srp_target::Backend for StallBackend {
    fn block_size(&self) -> BlockSize {
        self.0.block_size()
    }
    fn blocks(&self) -> u64 {
        self.0.blocks()
    }
    fn read_at(&self, lba: scsi::Lba, buf: &mut [u8]) -> Result<(), srp_target::BackendError> {
        self.0.read_at(lba, buf)
    }
    fn write_at(&self, lba: scsi::Lba, buf: &[u8]) -> Result<(), srp_target::BackendError> {
        let s = &self.1;
        let mut g = s.state.lock().expect("stall");
        g.1 += 1;
        while g.0 {
            g = s.turn.wait(g).expect("stall");
        }
        g.1 -= 1;
        drop(g);
        self.0.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), srp_target::BackendError> {
        Ok(())
    }
    fn unmap(
        &self,
        lba: scsi::Lba,
        blocks: scsi::BlockCount,
    ) -> Result<(), srp_target::BackendError> {
        self.0.unmap(lba, blocks)
    }
}

/// Runs each job on a thread of its own, as a worker would.
struct Threads;

impl Executor for Threads {
    fn submit(&self, job: Job) -> Result<(), Job> {
        std::thread::spawn(move || job.run());
        Ok(())
    }
}

/// The system clock moved on by what the test adds.
#[derive(Debug, Default)]
struct Skewed(Mutex<Duration>);

impl hca::time::Clock for Skewed {
    fn now(&self) -> Instant {
        Instant::now() + *self.0.lock().expect("clock")
    }
}

/// A channel of initiator A on 127.0.107.`net` to a LUN whose writes `stall` can hold,
/// its jobs on threads, its clock `clock`.
fn stall_rig(net: u8, stall: &Arc<Stall>, clock: &Arc<Skewed>) -> (Target, Initiator, Side) {
    let backend = srp_target::RamBackend::new(2048, BlockSize::B512).expect("ram");
    let lu = srp_target::LogicalUnit::new(
        Box::new(StallBackend(backend, stall.clone())),
        srp_target::LuConfig::new(common::identity("stall")),
    );
    let t = Target::open(ip(107, net), lu);
    let i = Initiator::open(ip(107, net + 1));
    let ep = i.ep(0, 6);
    let mut io = t.channel(1, 4, nexus_data_of(INITIATOR_A, 0), Arc::new(Threads));
    io.set_clock(clock.clone());
    connect(&t, &mut io, &i, &ep);
    (t, i, Side { ep, io, tag: 0 })
}

/// Drives `s` (and settles its aborts, as the daemon loop does) for `d`, or until `until`
/// holds; the IU other than an SRP_CRED_REQ (those are answered: an aborted task's credit
/// comes back in one) that arrived meanwhile, if any.
fn drive(i: &Initiator, s: &mut Side, d: Duration, until: impl Fn() -> bool) -> Option<Vec<u8>> {
    let end = Instant::now() + d;
    while Instant::now() < end && !until() {
        s.io.poll();
        settle_aborts(&mut [&mut s.io]);
        if let Some(iu) = take_iu(i, &s.ep) {
            if iu.first() != Some(&u8::from(IuType::CredReq)) {
                return Some(iu);
            }
            i.send(&s.ep, &[cred_rsp(cred_req(&iu).tag)]);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

/// The next SRP_RSP on `s` (SRP_CRED_REQs answered on the way).
fn await_rsp(i: &Initiator, s: &mut Side) -> Vec<u8> {
    drive(i, s, DEADLINE, || false).expect("an SRP_RSP")
}

/// Starts a one-block WRITE and drives `s` until its job waits in the stalled backend;
/// its tag.
fn stalled_write(i: &Initiator, s: &mut Side, stall: &Stall) -> u64 {
    stall.hold(true);
    let iu = write_iu(i, s, 9, &pattern(512, 4));
    let tag = s.tag;
    i.send(&s.ep, &[iu]);
    let early = drive(i, s, DEADLINE, || stall.waiting() == 1);
    assert!(
        early.is_none(),
        "an answer before the write ran: {early:02x?}"
    );
    assert_eq!(stall.waiting(), 1, "the write reached the backend");
    tag
}

#[test]
fn task_management_is_answered_after_the_aborted_job_stops() {
    let (stall, clock) = (Arc::new(Stall::default()), Arc::new(Skewed::default()));
    let (_t, i, mut s) = stall_rig(13, &stall, &clock);
    for function in [
        TaskMgmtFunction::AbortTask,
        TaskMgmtFunction::LogicalUnitReset,
        TaskMgmtFunction::AbortTaskSet,
    ] {
        let w = stalled_write(&i, &mut s, &stall);
        let tag = next(&mut s);
        i.send(&s.ep, &[tmf_iu(tag, Lun::ZERO, function, w)]);
        // The task is aborted, but its job still runs on the backend: no answer yet.
        let early = drive(&i, &mut s, Duration::from_millis(150), || false);
        assert!(
            early.is_none(),
            "{function:?} answered while its task ran: {early:02x?}"
        );
        stall.hold(false);
        // The job stops: its write lands, then the TMF answer goes out (and none for it).
        let r = await_rsp(&i, &mut s);
        let r = Rsp::parse(&r).expect("SRP_RSP");
        assert_eq!(
            (r.tag, r.tmf_response()),
            (Tag(tag), Some(TmfResponse::Complete)),
            "{function:?}: the TMF's answer, nothing for the aborted WRITE"
        );
        assert_eq!(
            stall.waiting(),
            0,
            "answered after the job left the backend"
        );
        let late = drive(&i, &mut s, Duration::from_millis(50), || false);
        assert!(
            late.is_none(),
            "an answer for the aborted WRITE: {late:02x?}"
        );
        if function == TaskMgmtFunction::LogicalUnitReset {
            // BUS DEVICE RESET FUNCTION OCCURRED, once.
            let _ = tur(&i, &mut s);
        }
        assert_eq!(tur(&i, &mut s).0, Status::Good);
    }
    assert_eq!(s.io.counters().late_task_mgmt, 0);
}

#[test]
fn a_stuck_backend_holds_an_abort_answer_only_until_the_drain_limit() {
    let (stall, clock) = (Arc::new(Stall::default()), Arc::new(Skewed::default()));
    let (_t, i, mut s) = stall_rig(15, &stall, &clock);
    let w = stalled_write(&i, &mut s, &stall);
    let tag = next(&mut s);
    i.send(
        &s.ep,
        &[tmf_iu(tag, Lun::ZERO, TaskMgmtFunction::AbortTask, w)],
    );
    assert!(drive(&i, &mut s, Duration::from_millis(100), || false).is_none());
    // The backend stays stuck past the limit: the answer goes out, as FAILED (the task is
    // not gone), counted.
    *clock.0.lock().expect("clock") += srp_target::io::channel_io::DRAIN_LIMIT;
    let r = await_rsp(&i, &mut s);
    let r = Rsp::parse(&r).expect("SRP_RSP");
    assert_eq!(
        (r.tag, r.tmf_response()),
        (Tag(tag), Some(TmfResponse::Failed))
    );
    assert_eq!(s.io.counters().late_task_mgmt, 1);
    // The initiator escalates: a LOGICAL UNIT RESET covers the task still running (the
    // core forgot its tag at the abort) and is answered only once it stops.
    let reset = next(&mut s);
    i.send(
        &s.ep,
        &[tmf_iu(
            reset,
            Lun::ZERO,
            TaskMgmtFunction::LogicalUnitReset,
            0,
        )],
    );
    assert!(
        drive(&i, &mut s, Duration::from_millis(100), || false).is_none(),
        "LOGICAL UNIT RESET answered while the aborted write still runs"
    );
    stall.hold(false);
    let r = await_rsp(&i, &mut s);
    let r = Rsp::parse(&r).expect("SRP_RSP");
    assert_eq!(
        (r.tag, r.tmf_response()),
        (Tag(reset), Some(TmfResponse::Complete))
    );
    assert_eq!(s.io.counters().late_task_mgmt, 1);
    // The reset's unit attention, then the LU serves.
    assert_eq!(tur(&i, &mut s).0, Status::CheckCondition);
    assert_eq!(tur(&i, &mut s).0, Status::Good);
    assert!(drive(&i, &mut s, Duration::from_millis(50), || false).is_none());
}
