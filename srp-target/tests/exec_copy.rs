//! Issue #16: a write racing a copy never yields a mixed result. A writer rewrites a 2 MiB
//! source range whole (one WRITE, so the source is one generation at every instant) while
//! EXTENDED COPY copies it (in 1 MiB steps) elsewhere in the LU, and while tokens of it are
//! made and used: every copy that succeeds holds one generation throughout, and a token
//! used after its source was written fails (TOKEN REVOKED) rather than mixing.

mod common;

use common::{generations, nexus_data, ram_lu};
use scsi::{SenseCode, Status};
use srp_target::BlockSize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

const SRC_BLOCKS: u32 = 4096;
const DST: u64 = 4096;

fn write16(lba: u64, blocks: u32) -> [u8; 16] {
    common::cdb16(0x8a, 0, lba, blocks)
}

/// A 2 MiB source of generation `g`: every 4-byte word is `g`.
fn generation(g: u32) -> Vec<u8> {
    g.to_be_bytes().repeat(SRC_BLOCKS as usize * 512 / 4)
}

fn xcopy_self(naa: &[u8; 16]) -> ([u8; 16], Vec<u8>) {
    let mut list = vec![0u8; 16];
    list[1] = 0x18; // LIST ID USAGE 11b
    list[3] = 32;
    list[11] = 28;
    list.extend(common::cscd(naa, 0));
    let mut s = vec![0u8; 28];
    s[0] = 0x02;
    s[3] = 0x18;
    s[10..12].copy_from_slice(&(SRC_BLOCKS as u16).to_be_bytes());
    s[20..28].copy_from_slice(&DST.to_be_bytes());
    list.extend(s);
    let mut c = [0u8; 16];
    c[0] = 0x83;
    c[13] = list.len() as u8;
    (c, list)
}

fn run(lu: &srp_target::LogicalUnit, cdb: &[u8], dout: &[u8]) -> (srp_target::CmdOutput, Vec<u8>) {
    let nd = nexus_data(0);
    let mut din = Vec::new();
    let out = lu
        .execute(&nd.nexus(), cdb, dout, &mut din)
        .expect("no transport error");
    (out, din)
}

/// Starts the writer: generation after generation over the source until `stop`.
fn writer(
    lu: &Arc<srp_target::LogicalUnit>,
    stop: &Arc<AtomicBool>,
    written: &Arc<AtomicU32>,
) -> std::thread::JoinHandle<()> {
    let (lu, stop, written) = (lu.clone(), stop.clone(), written.clone());
    std::thread::spawn(move || {
        let mut g = 1;
        while !stop.load(Ordering::Relaxed) {
            let (out, _) = run(&lu, &write16(0, SRC_BLOCKS), &generation(g));
            assert_eq!(out.status, Status::Good);
            written.store(g, Ordering::Release);
            g += 1;
        }
    })
}

#[test]
fn extended_copy_racing_a_writer_copies_one_generation() {
    let lu = ram_lu(8192, BlockSize::B512).into_shared();
    let naa = *lu.identity().naa();
    let (stop, written) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU32::new(0)),
    );
    run(&lu, &write16(0, SRC_BLOCKS), &generation(0));
    let w = writer(&lu, &stop, &written);
    let (c, l) = xcopy_self(&naa);
    let mut seen = Vec::new();
    for _ in 0..40 {
        let (out, _) = run(&lu, &c, &l);
        assert_eq!(out.status, Status::Good, "{out:?}");
        let (out, dst) = run(&lu, &common::cdb16(0x88, 0, DST, SRC_BLOCKS), &[]);
        assert_eq!(out.status, Status::Good);
        let gens = generations(&dst);
        assert_eq!(gens.len(), 1, "a copy mixing generations {gens:?}");
        seen.push(gens[0]);
    }
    stop.store(true, Ordering::Relaxed);
    w.join().expect("writer");
    seen.dedup();
    eprintln!(
        "{} copies, {} distinct generations copied, {} written",
        40,
        seen.len(),
        written.load(Ordering::Acquire)
    );
    assert!(
        written.load(Ordering::Acquire) > 5,
        "the writer ran during the copies"
    );
    assert_eq!(lu.watched_ranges(), 0, "no watch left behind");
}

fn populate(lu: &srp_target::LogicalUnit, id: u8) -> Vec<u8> {
    let p = common::populate_token_list(0, &[(0, SRC_BLOCKS)]);
    let c = common::copy_out_cdb(0x10, id.into(), p.len());
    let (out, _) = run(lu, &c, &p);
    assert_eq!(out.status, Status::Good, "{out:?}");
    let mut rrti = [0u8; 16];
    rrti[0] = 0x84;
    rrti[1] = 0x07;
    rrti[5] = id;
    rrti[12] = 4;
    let (out, info) = run(lu, &rrti, &[]);
    assert_eq!(out.status, Status::Good);
    let m = usize::from(info[13]);
    info[32 + m + 6..32 + m + 6 + 512].to_vec()
}

fn use_token(lu: &srp_target::LogicalUnit, token: &[u8]) -> srp_target::CmdOutput {
    let p = common::write_using_token_list(true, 0, token, &[(DST, SRC_BLOCKS)]);
    let c = common::copy_out_cdb(0x11, 0, p.len());
    run(lu, &c, &p).0
}

#[test]
fn tokens_racing_a_writer_are_revoked_or_copy_one_generation() {
    let lu = ram_lu(8192, BlockSize::B512).into_shared();
    // Quiet: a token used before any write copies what it was made of.
    run(&lu, &write16(0, SRC_BLOCKS), &generation(7));
    let t = populate(&lu, 1);
    assert_eq!(use_token(&lu, &t).status, Status::Good);
    let (_, dst) = run(&lu, &common::cdb16(0x88, 0, DST, SRC_BLOCKS), &[]);
    assert_eq!(generations(&dst), [7]);
    // One write between: revoked.
    let t = populate(&lu, 2);
    run(&lu, &write16(100, 1), &[9; 512]);
    let out = use_token(&lu, &t);
    assert_eq!(out.sense.map(|s| s.code()), Some(SenseCode::TOKEN_REVOKED));
    // Racing (the source one generation again first): either outcome, never a mix.
    run(&lu, &write16(0, SRC_BLOCKS), &generation(0));
    let (stop, written) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU32::new(0)),
    );
    let w = writer(&lu, &stop, &written);
    let (mut good, mut revoked) = (0, 0);
    for i in 0..40u8 {
        let t = populate(&lu, 10 + i);
        let out = use_token(&lu, &t);
        match out.status {
            Status::Good => {
                good += 1;
                let (_, dst) = run(&lu, &common::cdb16(0x88, 0, DST, SRC_BLOCKS), &[]);
                let gens = generations(&dst);
                assert_eq!(gens.len(), 1, "a token copy mixing generations {gens:?}");
            }
            _ => {
                assert_eq!(out.sense.map(|s| s.code()), Some(SenseCode::TOKEN_REVOKED));
                revoked += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    w.join().expect("writer");
    eprintln!("racing tokens: {good} copied, {revoked} revoked");
    assert_eq!(good + revoked, 40);
    assert_eq!(
        lu.copy_manager().tokens(),
        0,
        "DEL_TKN and revocation leave no token"
    );
}

#[test]
fn an_aborted_copy_stops_between_steps() {
    let lu = ram_lu(8192, BlockSize::B512).into_shared();
    run(&lu, &write16(0, SRC_BLOCKS), &generation(3));
    let (c, l) = xcopy_self(lu.identity().naa());
    // The task is aborted (as task management marks it) while the copy runs: it stops at
    // the next step, answers ABORTED COMMAND, and the destination is not written.
    let nd = nexus_data(0);
    let abort = AtomicBool::new(true);
    let nexus = srp_target::Nexus {
        abort: Some(&abort),
        ..nd.nexus()
    };
    let mut din = Vec::new();
    let out = lu
        .execute(&nexus, &c, &l, &mut din)
        .expect("no transport error");
    assert_eq!(
        out.sense.map(|s| s.code()),
        Some(SenseCode::ABORTED_COMMAND)
    );
    let (_, dst) = run(&lu, &common::cdb16(0x88, 0, DST, SRC_BLOCKS), &[]);
    assert!(dst.iter().all(|&b| b == 0), "nothing copied");
    assert_eq!(lu.watched_ranges(), 0);
    // Not aborted: it copies.
    let (out, _) = run(&lu, &c, &l);
    assert_eq!(out.status, Status::Good);
}

#[test]
fn a_copy_across_lus_racing_a_writer_copies_one_generation() {
    let (src, dst) = common::copy_lus(["copy-src", "copy-dst"], 8192);
    run(&src, &write16(0, SRC_BLOCKS), &generation(0));
    let (stop, written) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU32::new(0)),
    );
    let w = writer(&src, &stop, &written);
    // Two CSCDs: the source LU, then the destination LU (sent to the destination).
    let (c, mut l) = xcopy_self(src.identity().naa());
    let mut second = l[16..48].to_vec();
    second[8..24].copy_from_slice(dst.identity().naa());
    l.splice(48..48, second);
    l[3] = 64;
    l[48 + 32 + 7] = 1; // the segment's destination: CSCD 1
    l[48 + 32 + 20..48 + 32 + 28].copy_from_slice(&0u64.to_be_bytes());
    let mut c = c;
    c[13] = l.len() as u8;
    // Bounded: a copy that deadlocks (its retry taking an order it holds) fails the test.
    let (done_tx, done) = std::sync::mpsc::channel();
    let copier = {
        let dst = dst.clone();
        std::thread::spawn(move || {
            for _ in 0..30 {
                let (out, _) = run(&dst, &c, &l);
                assert_eq!(out.status, Status::Good, "{out:?}");
                let (_, copy) = run(&dst, &common::cdb16(0x88, 0, 0, SRC_BLOCKS), &[]);
                let gens = generations(&copy);
                assert_eq!(gens.len(), 1, "a cross-LU copy mixing generations {gens:?}");
            }
            let _ = done_tx.send(());
        })
    };
    let finished = done.recv_timeout(std::time::Duration::from_secs(60));
    stop.store(true, Ordering::Relaxed);
    assert!(
        finished.is_ok(),
        "the copies did not finish within 60 s (deadlock?)"
    );
    copier.join().expect("copier");
    w.join().expect("writer");
    assert!(
        written.load(Ordering::Acquire) > 5,
        "the writer ran during the copies"
    );
}

// ---- Issue #16 review: ODX token lifecycle and RECEIVE ROD TOKEN INFORMATION ----

/// A RAM disk whose reads wait while its gate is shut (a copy holding its permit, or its
/// list identifier, for as long as a test needs), and whose writes fail from block
/// `fail_from` on.
#[derive(Debug)]
struct Gated {
    ram: common::ByteRam,
    gate: std::sync::Mutex<(bool, usize)>,
    turn: std::sync::Condvar,
    fail_from: u64,
}

impl Gated {
    fn new(shut: bool, fail_from: u64) -> Arc<Gated> {
        Arc::new(Gated {
            ram: common::ByteRam::new(16384, BlockSize::B512),
            gate: std::sync::Mutex::new((!shut, 0)),
            turn: std::sync::Condvar::new(),
            fail_from,
        })
    }

    /// Waits until `n` reads wait at the gate.
    fn wait_for_readers(&self, n: usize) {
        let g = self.gate.lock().expect("gate");
        let (g, t) = self
            .turn
            .wait_timeout_while(g, std::time::Duration::from_secs(20), |g| g.1 < n)
            .expect("gate");
        assert!(!t.timed_out(), "{} of {n} reads reached the gate", g.1);
    }

    fn open(&self) {
        self.gate.lock().expect("gate").0 = true;
        self.turn.notify_all();
    }
}

/// The backend handed to a LU (the test keeps the `Arc` to work the gate).
#[derive(Debug)]
struct GatedBackend(Arc<Gated>);

impl srp_target::Backend for GatedBackend {
    fn block_size(&self) -> BlockSize {
        self.0.ram.block_size()
    }
    fn blocks(&self) -> u64 {
        self.0.ram.blocks()
    }
    fn read_at(&self, lba: scsi::Lba, buf: &mut [u8]) -> Result<(), srp_target::BackendError> {
        let mut g = self.0.gate.lock().expect("gate");
        g.1 += 1;
        self.0.turn.notify_all();
        while !g.0 {
            g = self.0.turn.wait(g).expect("gate");
        }
        g.1 -= 1;
        drop(g);
        self.0.ram.read_at(lba, buf)
    }
    fn write_at(&self, lba: scsi::Lba, buf: &[u8]) -> Result<(), srp_target::BackendError> {
        if lba.0 + (buf.len() / 512) as u64 > self.0.fail_from {
            return Err(srp_target::BackendError::Io {
                op: srp_target::backend::Op::Write,
                path: "gated".into(),
                source: std::io::Error::other("injected write failure"),
            });
        }
        self.0.ram.write_at(lba, buf)
    }
    fn flush(&self) -> Result<(), srp_target::BackendError> {
        Ok(())
    }
    fn unmap(
        &self,
        lba: scsi::Lba,
        blocks: scsi::BlockCount,
    ) -> Result<(), srp_target::BackendError> {
        self.0.ram.unmap(lba, blocks)
    }
}

/// A copy manager and its LUs, each with its gate.
type GatedRig = (
    Arc<srp_target::exec::copy::CopyManager>,
    Vec<(Arc<srp_target::LogicalUnit>, Arc<Gated>)>,
);

/// LUs `names` of one copy manager, exported as LUNs 0, 1, … through IOC 0's port; each
/// with a [`Gated`] backend (its reads wait while `shut`, its writes fail from block
/// `fail_from` on).
fn gated_lus(names: &[(&str, bool, u64)]) -> GatedRig {
    let cm = srp_target::exec::copy::CopyManager::new();
    let port = nexus_data(0).port.relative_port;
    let mut out = Vec::new();
    for (i, &(name, shut, fail_from)) in names.iter().enumerate() {
        let gate = Gated::new(shut, fail_from);
        let config = srp_target::LuConfig {
            copy_manager: Some(cm.clone()),
            ..srp_target::LuConfig::new(common::identity(name))
        };
        let lu = srp_target::LogicalUnit::new(Box::new(GatedBackend(gate.clone())), config)
            .into_shared();
        cm.export(port, scsi::Lun::from_number(i as u32).expect("lun"), &lu);
        out.push((lu, gate));
    }
    (cm, out)
}

fn populate_list(lu: &srp_target::LogicalUnit, id: u32, timeout: u32, blocks: u32) -> Vec<u8> {
    let p = common::populate_token_list(timeout, &[(0, blocks)]);
    let c = common::copy_out_cdb(0x10, id, p.len());
    let (out, _) = run(lu, &c, &p);
    assert_eq!(out.status, Status::Good, "{out:?}");
    let info = rrti(lu, id).expect("a result");
    let m = usize::from(info[13]);
    info[32 + m + 6..32 + m + 6 + 512].to_vec()
}

/// RECEIVE ROD TOKEN INFORMATION for list `id`: the data, or the sense code.
fn rrti(lu: &srp_target::LogicalUnit, id: u32) -> Result<Vec<u8>, SenseCode> {
    let mut c = [0u8; 16];
    c[0] = 0x84;
    c[1] = 0x07;
    c[2..6].copy_from_slice(&id.to_be_bytes());
    c[10..14].copy_from_slice(&4096u32.to_be_bytes());
    let (out, info) = run(lu, &c, &[]);
    match out.status {
        Status::Good => Ok(info),
        _ => Err(out.sense.expect("sense").code()),
    }
}

/// WRITE USING TOKEN of `token` to `blocks` blocks at `lba`, list `id`, DEL_TKN `del`.
fn wut(
    lu: &srp_target::LogicalUnit,
    id: u32,
    del: bool,
    token: &[u8],
    lba: u64,
    blocks: u32,
) -> srp_target::CmdOutput {
    let p = common::write_using_token_list(del, 0, token, &[(lba, blocks)]);
    let c = common::copy_out_cdb(0x11, id, p.len());
    run(lu, &c, &p).0
}

fn sense_of(out: &srp_target::CmdOutput) -> Option<SenseCode> {
    out.sense.as_ref().map(|s| s.code())
}

/// An EXTENDED COPY within `lu` (its CSCD by NAA): `blocks` blocks from 0 to `dst`.
fn xcopy_within(lu: &srp_target::LogicalUnit, blocks: u16, dst: u64) -> ([u8; 16], Vec<u8>) {
    let (mut c, mut l) = xcopy_self(lu.identity().naa());
    l[48 + 10..48 + 12].copy_from_slice(&blocks.to_be_bytes());
    l[48 + 20..48 + 28].copy_from_slice(&dst.to_be_bytes());
    c[13] = l.len() as u8;
    (c, l)
}

#[test]
fn write_using_token_answered_busy_keeps_its_token_and_leaves_no_result() {
    // LUs 0..8 read through shut gates: a copy within each holds one of the copy permits.
    use srp_target::exec::copy::manager::TOTAL_CONCURRENT_COPIES as N;
    let names: Vec<String> = (0..=N).map(|i| format!("busy-{i}")).collect();
    let spec: Vec<(&str, bool, u64)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i < N, u64::MAX))
        .collect();
    let (cm, lus) = gated_lus(&spec);
    let free = &lus[N].0;
    let token = populate_list(free, 1, 0, 64);
    // A first WRITE USING TOKEN with list 7 completes: its result is kept.
    assert_eq!(wut(free, 7, false, &token, 1024, 64).status, Status::Good);
    assert!(rrti(free, 7).is_ok());
    let copies: Vec<_> = lus[..N]
        .iter()
        .map(|(lu, _)| {
            let lu = lu.clone();
            std::thread::spawn(move || {
                let (c, l) = xcopy_within(&lu, 64, 4096);
                run(&lu, &c, &l).0.status
            })
        })
        .collect();
    for (_, gate) in &lus[..N] {
        gate.wait_for_readers(1);
    }
    assert_eq!(cm.running(), N);
    // BUSY with DEL_TKN: the command did not run, so the token stays and list 7 is unused
    // (the old result is not returned as this command's).
    let out = wut(free, 7, true, &token, 2048, 64);
    assert_eq!(out.status, Status::Busy, "{out:?}");
    assert_eq!(
        rrti(free, 7).map(|_| ()),
        Err(SenseCode::INVALID_FIELD_IN_CDB),
        "no stale result"
    );
    for (_, gate) in &lus[..N] {
        gate.open();
    }
    for c in copies {
        assert_eq!(c.join().expect("copy"), Status::Good);
    }
    // The retry works and deletes the token; using it again says why it is gone.
    assert_eq!(wut(free, 7, true, &token, 2048, 64).status, Status::Good);
    let info = rrti(free, 7).expect("result");
    assert_eq!(
        (
            info[5],
            u64::from_be_bytes(info[16..24].try_into().expect("8 bytes"))
        ),
        (0x01, 64)
    );
    let again = wut(free, 8, false, &token, 2048, 64);
    assert_eq!(sense_of(&again), Some(SenseCode::TOKEN_DELETED));
    assert_eq!(free.watched_ranges(), 0, "a deleted token watches nothing");
    assert!(cm.tokens_retired() >= 1);
}

#[test]
fn a_failed_write_using_token_reports_the_blocks_it_wrote() {
    // LU 1's writes fail from block 4096 + 3000 on: a token write there of 4096 blocks
    // writes whole 1 MiB steps (2048 blocks) until then, so 2048 blocks.
    let (_cm, lus) = gated_lus(&[("src", false, u64::MAX), ("dst", false, 4096 + 3000)]);
    let (src, dst) = (&lus[0].0, &lus[1].0);
    let token = populate_list(src, 1, 0, 4096);
    let out = wut(dst, 2, true, &token, 4096, 4096);
    assert_eq!(out.status, Status::CheckCondition);
    let info = rrti(dst, 2).expect("result");
    assert_eq!(info[4], 0x11, "WRITE USING TOKEN");
    assert_eq!(info[5], 0x02, "completed with errors");
    assert_eq!(
        u64::from_be_bytes(info[16..24].try_into().expect("8 bytes")),
        2048
    );
    // DEL_TKN: deleted when the command completed, failed or not.
    assert_eq!(
        sense_of(&wut(dst, 3, false, &token, 0, 8)),
        Some(SenseCode::TOKEN_DELETED)
    );
}

#[test]
fn token_senses_name_why_a_token_is_unusable() {
    let (cm, lus) = gated_lus(&[("why", false, u64::MAX)]);
    let lu = &lus[0].0;
    let token = populate_list(lu, 1, 0, 8);
    // An unknown ROD TYPE: UNSUPPORTED TOKEN TYPE.
    let mut odd = token.clone();
    odd[..4].copy_from_slice(&0x0002_0000u32.to_be_bytes());
    assert_eq!(
        sense_of(&wut(lu, 2, false, &odd, 100, 8)),
        Some(SenseCode::UNSUPPORTED_TOKEN_TYPE)
    );
    // A token of ours never made: TOKEN UNKNOWN.
    let mut forged = token.clone();
    forged[200] ^= 1;
    assert_eq!(
        sense_of(&wut(lu, 2, false, &forged, 100, 8)),
        Some(SenseCode::TOKEN_UNKNOWN)
    );
    // More than MAX_TOKENS newer ones: the oldest is cancelled.
    for i in 0..srp_target::exec::copy::token::MAX_TOKENS {
        let p = common::populate_token_list(0, &[(16, 8)]);
        let c = common::copy_out_cdb(0x10, 100 + i as u32, p.len());
        assert_eq!(run(lu, &c, &p).0.status, Status::Good);
    }
    assert_eq!(cm.tokens(), srp_target::exec::copy::token::MAX_TOKENS);
    assert_eq!(
        sense_of(&wut(lu, 2, false, &token, 100, 8)),
        Some(SenseCode::TOKEN_CANCELLED)
    );
    // The zero ROD (no token of ours) records its outcome too.
    let mut zero = vec![0u8; 512];
    zero[..4].copy_from_slice(&0xffff_0001u32.to_be_bytes());
    zero[6..8].copy_from_slice(&0x01f8u16.to_be_bytes());
    assert_eq!(wut(lu, 3, false, &zero, 100, 8).status, Status::Good);
    let info = rrti(lu, 3).expect("result");
    assert_eq!(
        (
            info[5],
            u64::from_be_bytes(info[16..24].try_into().expect("8 bytes"))
        ),
        (0x01, 8)
    );
}

#[test]
fn an_idle_token_is_retired_with_its_watches_by_the_next_lookup() {
    let (cm, lus) = gated_lus(&[("idle", false, u64::MAX)]);
    let lu = &lus[0].0;
    // INACTIVITY TIMEOUT 1 s (the shortest a POPULATE TOKEN can ask).
    let token = populate_list(lu, 1, 1, 8);
    assert_eq!((cm.tokens(), lu.watched_ranges()), (1, 1));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // Any lookup retires it (here one for a token never made): its watch is gone, so
    // writes to its source no longer scan it.
    let mut other = token.clone();
    other[300] ^= 1;
    assert_eq!(
        sense_of(&wut(lu, 2, false, &other, 100, 8)),
        Some(SenseCode::TOKEN_UNKNOWN)
    );
    assert_eq!((cm.tokens(), lu.watched_ranges()), (0, 0));
    assert_eq!(
        sense_of(&wut(lu, 3, false, &token, 100, 8)),
        Some(SenseCode::TOKEN_EXPIRED)
    );
}

#[test]
fn token_results_are_per_lu_and_a_running_list_is_in_progress() {
    // LU a's reads wait at its gate (POPULATE TOKEN and RRTI read nothing).
    let (_cm, lus) = gated_lus(&[
        ("a", true, u64::MAX),
        ("b", false, u64::MAX),
        ("c", false, u64::MAX),
    ]);
    let ((a, gate), b, c3) = ((&lus[0].0, &lus[0].1), &lus[1].0, &lus[2].0);
    // The same nexus uses list 5 on both LUs: each RRTI returns its own LU's token.
    let ta = populate_list(a, 5, 0, 8);
    let tb = populate_list(b, 5, 0, 16);
    assert_ne!(ta, tb);
    assert_eq!(&ta[16 + 8..16 + 24], a.identity().naa(), "creator: LU a");
    assert_eq!(&tb[16 + 8..16 + 24], b.identity().naa(), "creator: LU b");
    // A WRITE USING TOKEN from a (its reads held) to b with list 6 runs...
    let writer = {
        let (b, ta) = (b.clone(), ta.clone());
        std::thread::spawn(move || wut(&b, 6, false, &ta, 1024, 8).status)
    };
    gate.wait_for_readers(1);
    assert_eq!(rrti(b, 6).map(|i| i[5]), Ok(0x11), "in progress");
    // ...so list 6 of that nexus on b is in use; on a it is not.
    assert_eq!(
        sense_of(&wut(b, 6, false, &tb, 2048, 8)),
        Some(SenseCode::OPERATION_IN_PROGRESS)
    );
    let p = common::populate_token_list(0, &[(0, 8)]);
    let c = common::copy_out_cdb(0x10, 6, p.len());
    assert_eq!(
        sense_of(&run(b, &c, &p).0),
        Some(SenseCode::OPERATION_IN_PROGRESS)
    );
    assert_eq!(
        run(c3, &c, &p).0.status,
        Status::Good,
        "list 6 on another LU"
    );
    gate.open();
    assert_eq!(writer.join().expect("writer"), Status::Good);
    assert_eq!(rrti(b, 6).map(|i| i[5]), Ok(0x01));
}
