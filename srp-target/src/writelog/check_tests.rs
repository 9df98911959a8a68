//! The checker on hand-built logs: each crash model rule finds the promise it guards broken.

use super::*;
use crate::writelog::record::{Event, Header, Record};
use wirekit::WireRepr;

const BS: usize = 512;

/// A log of `events`, record `i` completing at time `10 * (i + 1)`.
fn log(events: &[Event<'_>]) -> WriteLog {
    let header = Header {
        block_size: BS as u32,
        size_bytes: 16 * BS as u64,
    };
    let mut bytes = vec![0u8; header.buffer_len()];
    header.emit(&mut bytes).expect("header");
    for (i, &event) in events.iter().enumerate() {
        let r = Record {
            seq: i as u64,
            time_ns: 10 * (i as u64 + 1),
            event,
        };
        let at = bytes.len();
        bytes.resize(at + r.buffer_len(), 0);
        r.emit(&mut bytes[at..]).expect("record");
    }
    WriteLog::parse(&bytes).expect("parse")
}

fn blocks(fill: u8, n: usize) -> Vec<u8> {
    vec![fill; n * BS]
}

fn ack(block: u64, data: &[u8], durable_ns: u64) -> Ack {
    Ack {
        offset: block * BS as u64,
        data: data.to_vec(),
        durable_ns,
    }
}

const SOME: CrashPoints = CrashPoints {
    seed: 7,
    random: 200,
};

#[test]
fn a_write_acknowledged_after_its_flush_survives_every_crash() {
    let a = blocks(1, 2);
    let b = blocks(2, 1);
    let l = log(&[
        Event::Write {
            offset: 0,
            data: &a,
        },
        Event::Sync { covers: 1 },
        Event::Write {
            offset: 0,
            data: &b,
        }, // newer, never flushed: allowed to vanish
        Event::Write {
            offset: 4 * BS as u64,
            data: &b,
        },
    ]);
    let r = check(&l, &[ack(0, &a, 25)], SOME).expect("check");
    assert!(r.clean(), "{:?}", r.violations);
    assert_eq!(r.flush_points, 3); // before and after the flush, and the end
    assert!(r.block_checks > 0);
}

#[test]
fn an_acknowledgement_without_a_flush_is_lost_at_the_end() {
    let a = blocks(1, 1);
    let l = log(&[Event::Write {
        offset: 0,
        data: &a,
    }]);
    let r = check(&l, &[ack(0, &a, 15)], SOME).expect("check");
    assert!(!r.clean());
    assert!(r.violations.contains(&Violation::Lost {
        ack: 0,
        block: 0,
        after_records: 1,
        needed: 0,
        found: None,
        worst_case: true,
    }));
}

#[test]
fn an_acknowledgement_before_its_flush_completed_is_caught() {
    let a = blocks(1, 1);
    let c = blocks(3, 1);
    let l = log(&[
        Event::Write {
            offset: 0,
            data: &a,
        },
        Event::Write {
            offset: 8 * BS as u64,
            data: &c,
        },
        Event::Sync { covers: 2 }, // completes at 30
    ]);
    // Acknowledged at 35, after the flush: a crash before 30 may precede it harmlessly.
    let r = check(&l, &[ack(0, &a, 35)], SOME).expect("check");
    assert!(r.clean(), "{:?}", r.violations);
    // Acknowledged at 25, before the flush completed: a crash at 29 loses it.
    let r = check(&l, &[ack(0, &a, 25)], SOME).expect("check");
    assert!(r.violations.contains(&Violation::Lost {
        ack: 0,
        block: 0,
        after_records: 2,
        needed: 0,
        found: None,
        worst_case: true,
    }));
}

#[test]
fn a_flush_that_began_before_the_write_does_not_cover_it() {
    let a = blocks(1, 1);
    let l = log(&[
        Event::Write {
            offset: 0,
            data: &a,
        },
        // Began when 0 records existed: the write completed during it.
        Event::Sync { covers: 0 },
    ]);
    let r = check(&l, &[ack(0, &a, 25)], SOME).expect("check");
    assert!(!r.clean());
}

#[test]
fn data_never_written_before_its_acknowledgement_is_reported() {
    let a = blocks(1, 1);
    let l = log(&[
        Event::Sync { covers: 0 },
        Event::Write {
            offset: 0,
            data: &a,
        },
        Event::Sync { covers: 2 },
    ]);
    // Acknowledged at 15, but the write completed at 20.
    let r = check(&l, &[ack(0, &a, 15)], SOME).expect("check");
    assert!(
        r.violations
            .contains(&Violation::NeverWritten { ack: 0, block: 0 })
    );
}

#[test]
fn random_survivors_tear_an_unflushed_multi_block_write() {
    // Block 0 and 1 durable as `old`; `new` overwrites both and is acknowledged as
    // durable with no flush after it: random crash points keep one block and not the
    // other, or neither.
    let old = blocks(1, 2);
    let new = blocks(2, 2);
    let tail = blocks(3, 1);
    let l = log(&[
        Event::Write {
            offset: 0,
            data: &old,
        },
        Event::Sync { covers: 1 },
        Event::Write {
            offset: 0,
            data: &new,
        },
        Event::Write {
            offset: 8 * BS as u64,
            data: &tail,
        },
    ]);
    let no_flush_points = CrashPoints {
        seed: 3,
        random: 400,
    };
    let r = check(&l, &[ack(0, &new, 35)], no_flush_points).expect("check");
    let random_losses = r
        .violations
        .iter()
        .filter(|v| {
            matches!(
                v,
                Violation::Lost {
                    worst_case: false,
                    ..
                }
            )
        })
        .count();
    assert!(random_losses > 0, "{:?}", r.violations);
    // The same seed finds the same violations.
    assert_eq!(
        check(&l, &[ack(0, &new, 35)], no_flush_points).expect("check"),
        r
    );
}

#[test]
fn a_discard_counts_as_zeros() {
    let a = blocks(1, 1);
    let zeros = blocks(0, 1);
    let l = log(&[
        Event::Write {
            offset: 0,
            data: &a,
        },
        Event::Discard {
            offset: 0,
            len: BS as u64,
        },
        Event::Sync { covers: 2 },
    ]);
    let r = check(&l, &[ack(0, &zeros, 35)], SOME).expect("check");
    assert!(r.clean(), "{:?}", r.violations);
}

#[test]
fn acknowledgements_outside_the_medium_are_refused() {
    let l = log(&[]);
    assert!(matches!(
        check(&l, &[ack(16, &blocks(1, 1), 1)], SOME),
        Err(WriteLogError::BadAck { index: 0, .. })
    ));
    let half = Ack {
        offset: 0,
        data: vec![1; 100],
        durable_ns: 1,
    };
    assert!(matches!(
        check(&l, &[half], SOME),
        Err(WriteLogError::BadAck { index: 0, .. })
    ));
}
