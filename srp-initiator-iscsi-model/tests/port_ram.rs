//! The iSCSI-model port with a correct RAM driver: data round trips under concurrent
//! submitters (start_request at dispatch level, completions from the driver's passive
//! workers, tags unique per LU, at most `tags_per_lu` in the driver), requests refused at
//! once, submitters' own tags, the queue's pause and resume, and power transitions.

mod common;

use common::*;
use srp_initiator_iscsi_model::port::{
    Lifecycle, PortError, PortEvent, PowerState, QueueTag, SrbStatus,
};
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// A block pattern no other (thread, op) writes.
fn pattern(thread: usize, op: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8) ^ (thread as u8).wrapping_mul(37) ^ (op as u8).wrapping_mul(11))
        .collect()
}

#[test]
fn concurrent_submitters_read_back_what_they_wrote() {
    let cfg = RamConfig {
        luns: 4,
        blocks: 4096,
        tags_per_lu: 4,
        workers: 3,
        ..RamConfig::default()
    };
    let (port, ram) = start(cfg);
    let port = Arc::new(port);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let port = port.clone();
            std::thread::spawn(move || {
                let lun = (t % 4) as u8;
                // Each thread its own 256-block region of its LU.
                let base = (t / 4) as u32 * 256;
                for op in 0..60 {
                    let blocks = 1 + (op % 8) as u16;
                    let lba = base + (op as u32 * 3) % 200;
                    let data = pattern(t, op, usize::from(blocks) * BLOCK);
                    let w = run(&port, write10(&port, lun, lba, &data));
                    assert_eq!(w.status, SrbStatus::SUCCESS, "write {t}/{op}");
                    let r = run(&port, read10(&port, lun, lba, blocks));
                    assert_eq!(r.status, SrbStatus::SUCCESS, "read {t}/{op}");
                    assert_eq!(r.data.to_vec(), data, "data of {t}/{op}");
                    if op % 10 == 0 {
                        assert_eq!(run(&port, tur(lun)).status, SrbStatus::SUCCESS);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("submitter");
    }
    assert_eq!(port.outstanding(), 0);
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert_eq!(ram.tag_collisions.load(SeqCst), 0, "one request per tag");
    assert_eq!(
        ram.worker_at_dispatch.load(SeqCst),
        0,
        "workers run at passive"
    );
    let entries = ram.entries.lock().expect("lock").clone();
    let starts: Vec<_> = entries.iter().filter(|e| e.0 == "start_request").collect();
    assert_eq!(starts.len(), 8 * (60 * 2 + 6));
    assert!(
        starts.iter().all(|e| e.1),
        "start_request runs at dispatch level"
    );
    assert!(!entries[0].1, "initialize runs at passive level");
    for (lu, max) in ram.max_held_per_lu.lock().expect("lock").iter() {
        assert!(*max <= 4, "LU {lu}: {max} held, over tags_per_lu");
    }
    port.unload().expect("unload");
    assert_eq!(port.state(), Lifecycle::Unloaded);
}

#[test]
fn requests_the_device_cannot_take_complete_at_once() {
    let (port, _ram) = start(RamConfig::default());
    let mut bad_lun = tur(0);
    bad_lun.address.lun = 5;
    assert_eq!(run(&port, bad_lun).status, SrbStatus::INVALID_LUN);
    let mut bad_target = tur(0);
    bad_target.address.target_id = 1;
    assert_eq!(run(&port, bad_target).status, SrbStatus::INVALID_TARGET_ID);
    let too_big = read10(&port, 0, 0, 2049);
    assert_eq!(
        run(&port, too_big).status,
        SrbStatus::INVALID_REQUEST,
        "over 1 MiB"
    );
    // The driver's own answers: CHECK CONDITION with autosense.
    let unknown = srp_initiator_iscsi_model::port::SrbRequest::scsi(
        lu(0),
        &[0xc0, 0, 0, 0, 0, 0],
        srp_initiator_iscsi_model::port::DataDirection::None,
        Vec::new(),
    );
    let r = run(&port, unknown);
    assert_eq!(r.status.code(), SrbStatus::ERROR);
    assert!(r.status.autosense_valid());
    assert_eq!(
        (r.sense[2] & 0x0f, r.sense[12]),
        (0x05, 0x20),
        "INVALID COMMAND OPCODE"
    );
    let r = run(&port, read10(&port, 1, 2047, 2));
    assert_eq!(
        (r.scsi_status, r.sense[12]),
        (0x02, 0x21),
        "LBA out of range"
    );
    assert!(matches!(
        port.submit(srp_initiator_iscsi_model::port::SrbRequest::scsi(
            lu(0),
            &[],
            srp_initiator_iscsi_model::port::DataDirection::None,
            Vec::new()
        )),
        Err(PortError::BadRequest(_))
    ));
    assert!(port.violations().is_empty());
}

#[test]
fn a_submitters_tag_in_use_is_refused() {
    let (port, ram) = start(RamConfig {
        hold: true,
        ..RamConfig::default()
    });
    let first = port.submit_tagged(tur(0), QueueTag(5)).expect("tag 5 free");
    assert!(ram.wait_held(1));
    assert_eq!(
        port.submit_tagged(tur(0), QueueTag(5)).err(),
        Some(PortError::TagInUse {
            lu: lu(0),
            tag: QueueTag(5)
        }),
        "tag 5 is in the driver"
    );
    let other_lu = port
        .submit_tagged(tur(1), QueueTag(5))
        .expect("LU 1's tags are its own");
    // The port's own tags go around the submitter's.
    let assigned: Vec<_> = (0..6)
        .map(|_| port.submit(tur(0)).expect("submit"))
        .collect();
    assert!(ram.wait_held(8), "8 = tags_per_lu on LU 0, 1 on LU 1");
    assert_eq!(
        ram.held_tags(lu(0)),
        [0, 1, 2, 3, 4, 5, 6].into_iter().collect(),
        "tag 5 the submitter's, the rest the lowest free"
    );
    ram.release();
    for c in std::iter::once(first).chain([other_lu]).chain(assigned) {
        let r = c.wait_timeout(BOUND).expect("done");
        assert_eq!(r.status, SrbStatus::SUCCESS);
    }
    let again = port
        .submit_tagged(tur(0), QueueTag(5))
        .expect("tag 5 free again");
    assert_eq!(
        again.wait_timeout(BOUND).expect("done").status,
        SrbStatus::SUCCESS
    );
    assert_eq!(ram.tag_collisions.load(SeqCst), 0);
    assert!(port.violations().is_empty());
}

#[test]
fn a_paused_queue_holds_requests_until_resumed() {
    let (port, ram) = start(RamConfig::default());
    port.pause().expect("pause");
    let waiting: Vec<_> = (0..3)
        .map(|_| port.submit(tur(0)).expect("accepted"))
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(port.lu_stats(lu(0)).waiting, 3);
    assert!(
        !ram.entry_names().contains(&"start_request"),
        "nothing started"
    );
    assert!(waiting.iter().all(|c| !c.is_complete()));
    assert!(matches!(
        port.pause(),
        Err(PortError::IllegalTransition {
            from: Lifecycle::Paused,
            ..
        })
    ));
    port.resume().expect("resume");
    for c in waiting {
        assert_eq!(
            c.wait_timeout(BOUND).expect("done").status,
            SrbStatus::SUCCESS
        );
    }
    let events = port.take_events();
    assert!(events.contains(&PortEvent::QueuePaused(true)));
    assert!(events.contains(&PortEvent::QueuePaused(false)));
}

#[test]
fn power_down_drains_and_power_up_replays_the_queue() {
    let (port, ram) = start(RamConfig {
        hold: true,
        ..RamConfig::default()
    });
    let held = port.submit(tur(0)).expect("accepted");
    assert!(ram.wait_held(1));
    // The driver does not finish it: the drain gives up, the queue runs again.
    assert_eq!(
        port.set_power(PowerState::D3, Duration::from_millis(50)),
        Err(PortError::DrainTimeout { outstanding: 1 })
    );
    assert_eq!(port.state(), Lifecycle::Running);
    ram.release();
    assert_eq!(
        held.wait_timeout(BOUND).expect("done").status,
        SrbStatus::SUCCESS
    );
    port.set_power(PowerState::D3, BOUND).expect("D3");
    assert_eq!(port.state(), Lifecycle::PoweredDown);
    let queued: Vec<_> = (0..4)
        .map(|_| port.submit(tur(1)).expect("accepted"))
        .collect();
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(port.lu_stats(lu(1)).waiting, 4, "held while in D3");
    let starts_before = ram
        .entry_names()
        .iter()
        .filter(|e| **e == "start_request")
        .count();
    assert_eq!(starts_before, 1);
    port.set_power(PowerState::D0, BOUND).expect("D0");
    for c in queued {
        assert_eq!(
            c.wait_timeout(BOUND).expect("done").status,
            SrbStatus::SUCCESS
        );
    }
    let names = ram.entry_names();
    let d3 = names
        .iter()
        .position(|e| *e == "power(D3)")
        .expect("D3 seen");
    let d0 = names
        .iter()
        .position(|e| *e == "power(D0)")
        .expect("D0 seen");
    assert!(
        names[d3..d0].iter().all(|e| e.starts_with("power")),
        "no request started while powered down: {names:?}"
    );
    assert!(port.violations().is_empty());
}
