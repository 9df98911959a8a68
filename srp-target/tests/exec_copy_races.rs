//! Issue #16, the copy races a review found: a list of several segments racing a writer
//! copies one generation of all its sources; copies in opposite directions
//! between two LUs, their sources written meanwhile, finish (no lock held across steps);
//! a list that writes its own source runs once, held; a copy refused by a reservation is
//! reported so by RECEIVE COPY RESULTS; LIST ID USAGE 01b is refused.

mod common;

use common::{generation, generations, nexus_data_of, pr_out, run, segment};
use scsi::{SenseCode, Status};
use srp_target::{BlockSize, LogicalUnit};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// 4 MiB of 512-byte blocks: four steps of a copy.
const SPAN: u32 = 8192;

fn write16(lba: u64, blocks: u32) -> [u8; 16] {
    common::cdb16(0x8a, 0, lba, blocks)
}

fn read16(lba: u64, blocks: u32) -> [u8; 16] {
    common::cdb16(0x88, 0, lba, blocks)
}

/// An EXTENDED COPY (LID1) of `segments` between the LUs named by `naas` (CSCD 0, 1...),
/// LIST ID USAGE `usage`, LIST IDENTIFIER `id`.
fn xcopy(naas: &[&[u8; 16]], segments: &[Vec<u8>], usage: u8, id: u8) -> ([u8; 16], Vec<u8>) {
    let mut list = vec![0u8; 16];
    list[0] = id;
    list[1] = usage << 3;
    list[2..4].copy_from_slice(&((naas.len() * 32) as u16).to_be_bytes());
    list[8..12].copy_from_slice(&((segments.len() * 28) as u32).to_be_bytes());
    for n in naas {
        list.extend(common::cscd(n, 0));
    }
    for s in segments {
        list.extend(s);
    }
    let mut c = [0u8; 16];
    c[0] = 0x83;
    c[10..14].copy_from_slice(&(list.len() as u32).to_be_bytes());
    (c, list)
}

/// A writer rewriting `blocks` blocks at `lba` of `lu` whole, generation after generation
/// (from `first`), until `stop`; how many it wrote.
fn writer(
    lu: &Arc<LogicalUnit>,
    lba: u64,
    blocks: u32,
    first: u32,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<u32> {
    let (lu, stop) = (lu.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut g = first;
        while !stop.load(Ordering::Relaxed) {
            let (out, _) = run(&lu, &write16(lba, blocks), &generation(g, blocks));
            assert_eq!(out.status, Status::Good);
            g += 1;
        }
        g - first
    })
}

#[test]
fn a_list_of_segments_racing_a_writer_copies_one_generation() {
    let lu = common::ram_lu(4 * u64::from(SPAN), BlockSize::B512).into_shared();
    let naa = *lu.identity().naa();
    run(&lu, &write16(0, SPAN), &generation(0, SPAN));
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer(&lu, 0, SPAN, 1, &stop);
    // The source in two segments (each of two steps), to the next 4 MiB.
    let half = (SPAN / 2) as u16;
    let d = u64::from(SPAN);
    let segments = [
        segment(0, 0, half, 0, d),
        segment(0, 0, half, u64::from(half), d + u64::from(half)),
    ];
    let (c, l) = xcopy(&[&naa], &segments, 0b11, 0);
    for _ in 0..30 {
        let (out, _) = run(&lu, &c, &l);
        assert_eq!(out.status, Status::Good, "{out:?}");
        let (_, dst) = run(&lu, &read16(d, SPAN), &[]);
        let gens = generations(&dst);
        assert_eq!(gens.len(), 1, "a list mixing generations {gens:?}");
    }
    stop.store(true, Ordering::Relaxed);
    assert!(
        w.join().expect("writer") > 5,
        "the writer ran during the copies"
    );
    assert_eq!((lu.watched_ranges(), lu.held_ranges()), (0, 0));
}

#[test]
fn copies_in_opposite_directions_with_their_sources_written_finish() {
    let (one, two) = common::copy_lus(["copy-one", "copy-two"], 2 * u64::from(SPAN));
    let (n1, n2) = (*one.identity().naa(), *two.identity().naa());
    let stop = Arc::new(AtomicBool::new(false));
    // Each LU's first 4 MiB is written on and on, and copied to the other's second 4 MiB.
    let writers = [
        writer(&one, 0, SPAN, 1, &stop),
        writer(&two, 0, SPAN, 1_000_000, &stop),
    ];
    let d = u64::from(SPAN);
    let copier =
        |to: &Arc<LogicalUnit>, list: ([u8; 16], Vec<u8>), done: std::sync::mpsc::Sender<()>| {
            let to = to.clone();
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let (out, _) = run(&to, &list.0, &list.1);
                    assert_eq!(out.status, Status::Good, "{out:?}");
                    let (_, copy) = run(&to, &read16(d, SPAN - 1), &[]);
                    let gens = generations(&copy);
                    assert_eq!(gens.len(), 1, "a cross-LU copy mixing generations {gens:?}");
                }
                let _ = done.send(());
            })
        };
    let (tx, done) = std::sync::mpsc::channel();
    let copiers = [
        copier(
            &two,
            xcopy(
                &[&n1, &n2],
                &[segment(0, 1, SPAN as u16 - 1, 0, d)],
                0b11,
                0,
            ),
            tx.clone(),
        ),
        copier(
            &one,
            xcopy(
                &[&n2, &n1],
                &[segment(0, 1, SPAN as u16 - 1, 0, d)],
                0b11,
                0,
            ),
            tx,
        ),
    ];
    let finished = (0..2).all(|_| done.recv_timeout(Duration::from_secs(60)).is_ok());
    stop.store(true, Ordering::Relaxed);
    assert!(
        finished,
        "the copies did not finish within 60 s (deadlock?)"
    );
    for c in copiers {
        c.join().expect("copier");
    }
    for w in writers {
        assert!(w.join().expect("writer") > 0);
    }
    assert_eq!((one.held_ranges(), two.held_ranges()), (0, 0));
}

#[test]
fn a_list_writing_its_own_source_runs_once() {
    // Segment 0 copies blocks 0..8 to 8..16; segment 1 copies 8..16 (what segment 0 wrote)
    // to 16..24; segment 2 shifts 0..16 up by 4 (overlapping): run once, in order, the end
    // is known exactly.
    let lu = common::ram_lu(64, BlockSize::B512).into_shared();
    let naa = *lu.identity().naa();
    let data: Vec<u8> = (0..8u32).flat_map(|g| generation(g + 1, 1)).collect();
    run(&lu, &write16(0, 8), &data);
    let (c, l) = xcopy(
        &[&naa],
        &[
            segment(0, 0, 8, 0, 8),
            segment(0, 0, 8, 8, 16),
            segment(0, 0, 16, 0, 4),
        ],
        0b11,
        0,
    );
    let (out, _) = run(&lu, &c, &l);
    assert_eq!(out.status, Status::Good, "{out:?}");
    let (_, got) = run(&lu, &read16(0, 24), &[]);
    let firsts: Vec<u32> = got
        .chunks(512)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let g: Vec<u32> = (1..=8).collect();
    let expect: Vec<u32> = [&g[..4], &g[..], &g[..], &g[4..]].concat();
    assert_eq!(firsts, expect);
    assert_eq!((lu.watched_ranges(), lu.held_ranges()), (0, 0));
}

#[test]
fn a_copy_refused_by_a_reservation_is_reported_so() {
    // The command's LU (the source) is free; the destination LU is reserved WRITE EXCLUSIVE
    // by another initiator: the copy is refused RESERVATION CONFLICT, and RECEIVE COPY
    // RESULTS says it completed with errors, its COPY COMMAND STATUS that conflict.
    let (src, dst) = common::copy_lus(["copy-one", "copy-two"], 2 * u64::from(SPAN));
    let other = nexus_data_of(srp::wire::PortId([0xb0; 16]), 0);
    let pr = |cdb: [u8; 10], list: [u8; 24]| {
        let mut din = Vec::new();
        let out = dst
            .execute(&other.nexus(), &cdb, &list, &mut din)
            .expect("pr");
        assert_eq!(out.status, Status::Good, "{out:?}");
    };
    let (cdb, list) = pr_out(0x00, 0, 0, 0xb0b0, 0); // REGISTER
    pr(cdb, list);
    let (cdb, list) = pr_out(0x01, 0x1, 0xb0b0, 0, 0); // RESERVE, WRITE EXCLUSIVE
    pr(cdb, list);
    let naas = [src.identity().naa(), dst.identity().naa()];
    let (c, l) = xcopy(&naas, &[segment(0, 1, 8, 0, 8)], 0b00, 7);
    let (out, _) = run(&src, &c, &l);
    assert_eq!(out.status, Status::ReservationConflict, "{out:?}");
    // RECEIVE COPY STATUS (LID1): completed with errors, nothing copied.
    let rcr = |sa: u8| {
        common::good(
            &src,
            &[0x84, sa, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
            &[],
        )
    };
    let status = rcr(0x00);
    assert_eq!(status[4], 0x02, "COMPLETED WITH ERRORS: {status:?}");
    assert_eq!(&status[5..7], &[0, 0], "no segment processed");
    // RECEIVE COPY FAILURE DETAILS: COPY COMMAND STATUS is RESERVATION CONFLICT, no sense.
    let details = rcr(0x04);
    assert_eq!(details[56], 0x18, "{details:?}");
    assert_eq!(&details[58..60], &[0, 0]);
    assert_eq!(details.len(), 60);
    let (_, copied) = run(&dst, &read16(8, 8), &[]);
    assert!(copied.iter().all(|&b| b == 0), "nothing copied");
}

#[test]
fn list_id_usage_01b_is_refused() {
    let lu = common::ram_lu(64, BlockSize::B512).into_shared();
    let naa = *lu.identity().naa();
    let (c, l) = xcopy(&[&naa], &[segment(0, 0, 8, 0, 8)], 0b01, 0);
    let sense = common::check(&lu, &c, &l, SenseCode::INVALID_FIELD_IN_PARAMETER_LIST);
    assert_eq!(common::field_pointer(&sense), Some((1, Some(4), false)));
    let (_, dst) = run(&lu, &read16(8, 8), &[]);
    assert!(dst.iter().all(|&b| b == 0), "nothing copied");
}
