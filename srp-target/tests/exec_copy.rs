//! Issue #16: a write racing a copy never yields a mixed result. A writer rewrites a 2 MiB
//! source range whole (one WRITE, so the source is one generation at every instant) while
//! EXTENDED COPY copies it (in 1 MiB steps) elsewhere in the LU, and while tokens of it are
//! made and used: every copy that succeeds holds one generation throughout, and a token
//! used after its source was written fails (TOKEN REVOKED) rather than mixing.

mod common;

use common::{nexus_data, ram_lu};
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

/// The generations in `data`, in order of first appearance.
fn generations(data: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    for w in data.chunks(512) {
        let g = u32::from_be_bytes([w[0], w[1], w[2], w[3]]);
        if out.last() != Some(&g) {
            out.push(g);
        }
    }
    out
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

/// Two LUs of one copy manager, both exported through the port `nexus_data(0)` comes in on.
fn two_lus() -> (Arc<srp_target::LogicalUnit>, Arc<srp_target::LogicalUnit>) {
    let cm = srp_target::exec::copy::CopyManager::new();
    let lu = |name: &str| {
        let backend = srp_target::RamBackend::new(8192, BlockSize::B512).expect("ram");
        let config = srp_target::LuConfig {
            copy_manager: Some(cm.clone()),
            ..srp_target::LuConfig::new(common::identity(name))
        };
        srp_target::LogicalUnit::new(Box::new(backend), config).into_shared()
    };
    let (a, b) = (lu("copy-src"), lu("copy-dst"));
    let port = nexus_data(0).port.relative_port;
    cm.export(port, scsi::Lun::ZERO, &a);
    cm.export(port, scsi::Lun::from_number(1).expect("lun"), &b);
    (a, b)
}

#[test]
fn a_copy_across_lus_racing_a_writer_copies_one_generation() {
    let (src, dst) = two_lus();
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
