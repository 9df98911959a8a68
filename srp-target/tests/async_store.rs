//! The executor over a store whose I/O completes asynchronously (`exec/aio.rs`; a Ceph
//! image in production, `daemon_rbd.rs`): here a RAM store whose operations wait until the
//! test completes them, so that what must happen while they are in flight is seen — a
//! worker starting eight writes without waiting for any; COMPARE AND WRITE waiting for the
//! writes in flight and seeing them whole; a FUA write's flush before its GOOD; a failed
//! flush latched; an abort's wait lasting until the store is done; a reservation conflict
//! answered before the store is touched; a completion the store lost still answered.

mod common;

use common::pr::{REGISTER, RESERVE, WRITE_EXCLUSIVE};
use common::{INITIATOR_A, compare_and_write, identity, nexus_data_of, pr_out, read10, write10};
use ib_verbs::mem::MemBlock;
use scsi::{BlockCount, Lba, SenseCode, Status};
use srp::wire::PortId;
use srp_target::BlockSize;
use srp_target::backend::{AsyncIo, Backend, BackendError, IoDone, Op, OwnedSpan, RamBackend};
use srp_target::exec::{LogicalUnit, LuConfig};
use srp_target::io::{AbortFlag, Done, Drain, Job, NexusInfo, Reply, Staging};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BLOCKS: u64 = 1024;
const INITIATOR_B: PortId = PortId([0xb0; 16]);

/// What the store does with an operation when the test completes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Flush,
}

type Pending = (Kind, Box<dyn FnOnce(bool) + Send>);

/// RAM whose asynchronous operations are held until [`Held::complete`].
#[derive(Debug)]
struct Held {
    ram: Arc<RamBackend>,
    state: Arc<HeldState>,
}

#[derive(Default)]
struct HeldState {
    pending: Mutex<Vec<Pending>>,
    /// Every operation started, in order.
    log: Mutex<Vec<Kind>>,
}

impl std::fmt::Debug for HeldState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeldState")
    }
}

impl HeldState {
    fn pending(&self) -> usize {
        self.pending.lock().expect("pending").len()
    }

    fn log(&self) -> Vec<Kind> {
        self.log.lock().expect("log").clone()
    }

    /// Completes the oldest held operation (`ok`: as the store did it; else failed).
    fn complete_one(&self, ok: bool) -> Kind {
        let (kind, run) = {
            let mut p = self.pending.lock().expect("pending");
            assert!(!p.is_empty(), "nothing held");
            p.remove(0)
        };
        run(ok);
        kind
    }

    /// Completes every held operation, those they start included.
    fn complete_all(&self) {
        while self.pending() > 0 {
            self.complete_one(true);
        }
    }

    /// Drops the oldest held operation without completing it (a store that lost it).
    fn lose_one(&self) {
        let p = self.pending.lock().expect("pending").remove(0);
        drop(p);
    }
}

fn failed(op: Op) -> BackendError {
    BackendError::Io {
        op,
        path: "held".into(),
        source: std::io::Error::from_raw_os_error(5),
    }
}

impl Held {
    fn hold(
        &self,
        kind: Kind,
        run: impl FnOnce() -> Result<(), BackendError> + Send + 'static,
        done: IoDone,
    ) {
        self.state.log.lock().expect("log").push(kind);
        let op = match kind {
            Kind::Read => Op::Read,
            Kind::Write => Op::Write,
            Kind::Flush => Op::Flush,
        };
        self.state.pending.lock().expect("pending").push((
            kind,
            Box::new(move |ok| done(if ok { run() } else { Err(failed(op)) })),
        ));
    }
}

impl Backend for Held {
    fn block_size(&self) -> BlockSize {
        self.ram.block_size()
    }
    fn blocks(&self) -> u64 {
        self.ram.blocks()
    }
    fn read_at(&self, lba: Lba, buf: &mut [u8]) -> Result<(), BackendError> {
        self.ram.read_at(lba, buf)
    }
    fn write_at(&self, lba: Lba, buf: &[u8]) -> Result<(), BackendError> {
        self.ram.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), BackendError> {
        self.ram.flush()
    }
    fn unmap(&self, lba: Lba, blocks: BlockCount) -> Result<(), BackendError> {
        self.ram.unmap(lba, blocks)
    }
    fn async_io(&self) -> Option<&dyn AsyncIo> {
        Some(self)
    }
}

impl AsyncIo for Held {
    fn read_into(&self, lba: Lba, dst: OwnedSpan, done: IoDone) {
        let ram = self.ram.clone();
        self.hold(
            Kind::Read,
            move || {
                let mut buf = vec![0u8; dst.len];
                ram.read_at(lba, &mut buf)?;
                dst.block
                    .write(dst.offset, &buf)
                    .map_err(|_| failed(Op::Read))
            },
            done,
        );
    }
    fn write_from(&self, lba: Lba, src: OwnedSpan, done: IoDone) {
        let ram = self.ram.clone();
        self.hold(
            Kind::Write,
            move || {
                let mut buf = vec![0u8; src.len];
                src.block
                    .read(src.offset, &mut buf)
                    .map_err(|_| failed(Op::Write))?;
                ram.write_at(lba, &buf)
            },
            done,
        );
    }
    fn flush(&self, done: IoDone) {
        self.hold(Kind::Flush, || Ok(()), done);
    }
}

/// An LU on a held store (write cache on), its store's state, a nexus for `who`.
fn rig() -> (Arc<LogicalUnit>, Arc<HeldState>) {
    let state = Arc::new(HeldState::default());
    let store = Held {
        ram: Arc::new(RamBackend::new(BLOCKS, BlockSize::B512).expect("ram")),
        state: state.clone(),
    };
    let lu = LogicalUnit::new(Box::new(store), LuConfig::new(identity("held"))).into_shared();
    (lu, state)
}

/// One command as a worker gets it: its data in the slot's registered memory (`data_out`
/// there when given, else room for `din_len` bytes of data-in).
struct Cmd {
    job: Job,
    mem: Arc<MemBlock>,
    abort: AbortFlag,
}

fn cmd(
    lu: &Arc<LogicalUnit>,
    who: PortId,
    token: u64,
    cdb: &[u8],
    data_out: Option<&[u8]>,
    din_len: usize,
    reply: &Reply,
) -> Cmd {
    let len = data_out.map_or(din_len, <[u8]>::len).max(512);
    let mem = MemBlock::new(len);
    if let Some(d) = data_out {
        mem.write(0, d).expect("data-out");
    }
    let abort = AbortFlag::default();
    let job = Job {
        token,
        lu: lu.clone(),
        nexus: Arc::new(NexusInfo {
            luns: vec![scsi::Lun::ZERO],
            ..nexus_data_of(who, 0)
        }),
        cdb: cdb.into(),
        data_out: Vec::new(),
        staging: Some(Staging {
            mem: mem.clone(),
            offset: 0,
            len,
            data_out_len: data_out.map(<[u8]>::len),
        }),
        data_in: Vec::new(),
        reply: reply.clone(),
        abort: abort.clone(),
    };
    Cmd { job, mem, abort }
}

fn replies() -> (Reply, Receiver<Done>) {
    let (tx, rx) = channel();
    (Reply::new(tx, None), rx)
}

fn status(d: &Done) -> (Status, Option<SenseCode>) {
    let out = d.result.as_ref().expect("no transport error");
    (out.status, out.sense.as_ref().map(scsi::Sense::code))
}

fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn no_reply(rx: &Receiver<Done>) {
    assert!(
        rx.try_recv().is_err(),
        "answered before the store completed"
    );
}

#[test]
fn a_worker_starts_writes_without_waiting_for_the_store() {
    let (lu, store) = rig();
    let (reply, rx) = replies();
    for i in 0..8u32 {
        let c = cmd(
            &lu,
            INITIATOR_A,
            u64::from(i),
            &write10(i * 8, 8, false),
            Some(&data(4096, i as u8)),
            0,
            &reply,
        );
        c.job.run();
    }
    // The worker (this thread) came back from every job: eight writes at the store at once.
    assert_eq!(store.pending(), 8, "every write started, none waited for");
    no_reply(&rx);
    let c = lu.counters();
    assert_eq!((c.async_commands, c.async_peak), (8, 8));
    store.complete_all();
    for _ in 0..8 {
        let d = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
        assert_eq!(status(&d), (Status::Good, None));
        assert_eq!(d.result.as_ref().expect("ok").data_out_len, 4096);
    }
    // Read back through the same path: the data-in lands in the slot's memory.
    let r = cmd(&lu, INITIATOR_A, 9, &read10(8 * 3, 8), None, 4096, &reply);
    let mem = r.mem.clone();
    r.job.run();
    assert_eq!(store.complete_one(true), Kind::Read);
    let d = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    let out = d.result.as_ref().expect("ok");
    assert!(out.data_in_staged && out.data_in_len == 4096, "{out:?}");
    let mut back = vec![0u8; 4096];
    mem.read(0, &mut back).expect("read");
    assert_eq!(back, data(4096, 3));
    assert_eq!(lu.counters().bytes_read, 4096);
}

#[test]
fn compare_and_write_waits_for_the_writes_in_flight() {
    let (lu, store) = rig();
    let (reply, rx) = replies();
    let new = data(512, 0x44);
    cmd(
        &lu,
        INITIATOR_A,
        1,
        &write10(16, 1, false),
        Some(&new),
        0,
        &reply,
    )
    .job
    .run();
    assert_eq!(store.pending(), 1);
    // COMPARE AND WRITE of block 16 expecting the new bytes, on another worker.
    let (cw_tx, cw_rx) = channel();
    let lu2 = lu.clone();
    let mut dout = new.clone();
    dout.extend_from_slice(&data(512, 0x55));
    std::thread::spawn(move || {
        let nd = nexus_data_of(INITIATOR_A, 0);
        let mut din = Vec::new();
        let out = lu2.execute(&nd.nexus(), &compare_and_write(16, 1), &dout, &mut din);
        let _ = cw_tx.send(out.map(|o| (o.status, o.sense.map(|s| s.code()))));
    });
    assert!(
        cw_rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "COMPARE AND WRITE ran while a write to its block was in flight"
    );
    store.complete_one(true);
    let d = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("write answered");
    assert_eq!(status(&d), (Status::Good, None));
    let cw = cw_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("COMPARE AND WRITE ran");
    assert_eq!(
        cw.expect("ok"),
        (Status::Good, None),
        "it saw the write whole"
    );
}

#[test]
fn a_fua_write_is_flushed_before_its_good() {
    let (lu, store) = rig();
    let (reply, rx) = replies();
    cmd(
        &lu,
        INITIATOR_A,
        1,
        &write10(0, 1, true),
        Some(&data(512, 1)),
        0,
        &reply,
    )
    .job
    .run();
    assert_eq!(store.complete_one(true), Kind::Write);
    no_reply(&rx);
    assert_eq!(
        store.log(),
        vec![Kind::Write, Kind::Flush],
        "the flush follows the write"
    );
    assert_eq!(store.complete_one(true), Kind::Flush);
    let d = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    assert_eq!(status(&d), (Status::Good, None));

    // Without FUA, the write cache on: no flush.
    cmd(
        &lu,
        INITIATOR_A,
        2,
        &write10(0, 1, false),
        Some(&data(512, 2)),
        0,
        &reply,
    )
    .job
    .run();
    store.complete_all();
    rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    assert_eq!(store.log().len(), 3, "{:?}", store.log());
}

#[test]
fn a_failed_flush_is_latched_and_refuses_the_next() {
    let (lu, store) = rig();
    let (reply, rx) = replies();
    let sync = [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    cmd(&lu, INITIATOR_A, 1, &sync, None, 0, &reply).job.run();
    assert_eq!(store.complete_one(false), Kind::Flush);
    let d = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    assert_eq!(
        status(&d),
        (Status::CheckCondition, Some(SenseCode::WRITE_ERROR))
    );
    assert_eq!(lu.counters().flush_errors, 1);
    // Latched: the next flush and the next FUA write are refused without reaching the store.
    cmd(&lu, INITIATOR_A, 2, &sync, None, 0, &reply).job.run();
    cmd(
        &lu,
        INITIATOR_A,
        3,
        &write10(0, 1, true),
        Some(&data(512, 3)),
        0,
        &reply,
    )
    .job
    .run();
    for _ in 0..2 {
        let d = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
        assert_eq!(
            status(&d),
            (Status::CheckCondition, Some(SenseCode::WRITE_ERROR))
        );
    }
    assert_eq!(store.log(), vec![Kind::Flush], "nothing reached the store");
}

#[test]
fn an_abort_waits_until_the_store_is_done() {
    let (lu, store) = rig();
    let (reply, rx) = replies();
    let c = cmd(
        &lu,
        INITIATOR_A,
        1,
        &write10(0, 8, false),
        Some(&data(4096, 1)),
        0,
        &reply,
    );
    let abort = c.abort.clone();
    c.job.run();
    let drain = Drain::new(None);
    assert!(
        abort.abort_and_wait(&drain),
        "the job runs while its write is in flight"
    );
    assert!(!drain.is_done(), "the abort's answer waits for the store");
    store.complete_all();
    assert!(
        drain.is_done(),
        "the store is done: the abort may be answered"
    );
    rx.recv_timeout(Duration::from_secs(5)).expect("answered");
}

#[test]
fn a_reservation_conflict_is_answered_before_the_store_is_touched() {
    let (lu, store) = rig();
    let (reply, rx) = replies();
    let nd = nexus_data_of(INITIATOR_B, 0);
    for (sa, ty, key, sa_key) in [(REGISTER, 0, 0, 0xb), (RESERVE, WRITE_EXCLUSIVE, 0xb, 0)] {
        let (cdb, params) = pr_out(sa, ty, key, sa_key, 0);
        let out = lu
            .execute(&nd.nexus(), &cdb, &params, &mut Vec::new())
            .expect("ok");
        assert_eq!(out.status, Status::Good);
    }
    cmd(
        &lu,
        INITIATOR_A,
        1,
        &write10(0, 1, false),
        Some(&data(512, 1)),
        0,
        &reply,
    )
    .job
    .run();
    let d = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    assert_eq!(status(&d).0, Status::ReservationConflict);
    // A read is allowed under Write Exclusive.
    cmd(&lu, INITIATOR_A, 2, &read10(0, 1), None, 512, &reply)
        .job
        .run();
    assert_eq!(
        store.log(),
        vec![Kind::Read],
        "the write never reached the store"
    );
    store.complete_all();
    let d = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    assert_eq!(status(&d), (Status::Good, None));
}

#[test]
fn a_completion_the_store_lost_is_still_answered() {
    let (lu, store) = rig();
    let (reply, rx) = replies();
    cmd(&lu, INITIATOR_A, 1, &read10(0, 1), None, 512, &reply)
        .job
        .run();
    store.lose_one();
    let d = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    assert_eq!(
        status(&d),
        (
            Status::CheckCondition,
            Some(SenseCode::INTERNAL_TARGET_FAILURE)
        )
    );
    // The gate is empty again: an exclusive command does not wait for ever.
    let out = lu
        .execute(
            &nexus_data_of(INITIATOR_A, 0).nexus(),
            &compare_and_write(0, 1),
            &[0u8; 1024],
            &mut Vec::new(),
        )
        .expect("ok");
    assert_eq!(out.status, Status::Good);
}

#[test]
fn immediate_data_goes_the_asynchronous_way_too() {
    let (lu, store) = rig();
    let (reply, rx) = replies();
    // The data-out came in the SRP_CMD itself: in `data_out`, none in the slot's memory.
    let d = data(4096, 0x3c);
    let mut c = cmd(
        &lu,
        INITIATOR_A,
        1,
        &write10(40, 8, false),
        None,
        4096,
        &reply,
    );
    c.job.data_out = d.clone();
    c.job.run();
    assert_eq!(
        store.pending(),
        1,
        "started on the store, not run on the worker"
    );
    store.complete_all();
    let done = rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    assert_eq!(status(&done), (Status::Good, None));
    assert_eq!(done.data_out, d, "the buffer comes back for reuse");
    let r = cmd(&lu, INITIATOR_A, 2, &read10(40, 8), None, 4096, &reply);
    let mem = r.mem.clone();
    r.job.run();
    store.complete_all();
    rx.recv_timeout(Duration::from_secs(5)).expect("answered");
    let mut back = vec![0u8; 4096];
    mem.read(0, &mut back).expect("read");
    assert_eq!(back, d, "the immediate data landed");
}
