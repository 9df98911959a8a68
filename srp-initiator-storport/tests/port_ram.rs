//! The emulated StorPort with the RAM-disk miniport: SCSI against memory, BuildIo
//! concurrency and StartIo serialization, the per-LU depth, Busy/Ready, Pause/Resume,
//! DeviceBusy, bus resets (requested and on timeout), aborts, LU removal, stop/restart,
//! and the double-completion trap.

mod common;

use common::*;
use srp_initiator_storport::port::{
    DataDirection, PortError, PortEvent, ResetCause, SrbFunction, SrbRequest, SrbStatus, Violation,
};
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

fn ram(luns: u8) -> RamConfig {
    RamConfig {
        luns,
        blocks: 256,
        ..RamConfig::default()
    }
}

fn held(luns: u8) -> RamConfig {
    RamConfig {
        hold: true,
        ..ram(luns)
    }
}

#[test]
fn scsi_commands_complete_against_memory_inline_and_from_the_dpc() {
    let (port, probe) = start(RamConfig {
        async_every: 2,
        ..ram(2)
    });
    let inq = SrbRequest::scsi(
        lu(0),
        &[0x12, 0, 0, 0, 36, 0],
        DataDirection::In,
        vec![0; 36],
    );
    let r = wait(&port.submit(inq).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS);
    assert_eq!(&r.data.to_vec()[8..16], b"RUSTRAM ");
    let cap = SrbRequest::scsi(
        lu(1),
        &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        DataDirection::In,
        vec![0; 8],
    );
    let r = wait(&port.submit(cap).expect("accepted"));
    assert_eq!(r.data.to_vec(), [0, 0, 0, 255, 0, 0, 2, 0]);
    assert_eq!(
        wait(&port.submit(tur(lu(0))).expect("accepted")).status,
        SrbStatus::SUCCESS
    );
    // 16 KiB + 512: five SG elements, none contiguous with the next.
    let data: Vec<u8> = (0..33 * 512).map(|i| (i * 7 % 251) as u8).collect();
    let w = wait(
        &port
            .submit(write10(lu(1), 10, data.clone()))
            .expect("accepted"),
    );
    assert_eq!(w.status, SrbStatus::SUCCESS);
    for _ in 0..4 {
        let r = wait(&port.submit(read10(lu(1), 10, 33)).expect("accepted"));
        assert_eq!(r.status, SrbStatus::SUCCESS);
        assert!(r.data == data, "read back what was written");
    }
    let other = wait(&port.submit(read10(lu(0), 10, 33)).expect("accepted"));
    assert!(
        other.data.to_vec().iter().all(|&b| b == 0),
        "LUs are separate"
    );
    // SCSI failures: CHECK CONDITION with autosense.
    let bad = SrbRequest::scsi(
        lu(0),
        &[0xee, 0, 0, 0, 0, 0],
        DataDirection::None,
        Vec::new(),
    );
    let r = wait(&port.submit(bad).expect("accepted"));
    assert_eq!(r.status, SrbStatus::ERROR.with_autosense());
    assert_eq!((r.scsi_status, r.sense[2], r.sense[12]), (2, 0x05, 0x20));
    let r = wait(&port.submit(read10(lu(0), 255, 2)).expect("accepted"));
    assert_eq!(
        (r.status.code(), r.sense[12]),
        (SrbStatus::ERROR, 0x21),
        "LBA out of range"
    );
    // Refused by the port from the configuration.
    assert_eq!(
        wait(&port.submit(tur(lu(2))).expect("accepted")).status,
        SrbStatus::INVALID_LUN
    );
    let far = common::tur(srp_initiator_storport::port::LuAddress::new(0, 1, 0));
    assert_eq!(
        wait(&port.submit(far).expect("accepted")).status,
        SrbStatus::INVALID_TARGET_ID
    );
    assert_eq!(
        port.submit(SrbRequest::scsi(
            lu(0),
            &[],
            DataDirection::None,
            Vec::new()
        ))
        .err(),
        Some(PortError::BadRequest(
            "an EXECUTE_SCSI CDB has 1 to 16 bytes"
        ))
    );
    assert!(
        probe.dpc_completions.load(SeqCst) > 0,
        "some completed from the DPC"
    );
    assert_eq!(
        probe.not_at_dispatch.load(SeqCst),
        0,
        "every routine at dispatch"
    );
    assert!(port.violations().is_empty(), "{:?}", port.violations());
}

#[test]
fn build_io_runs_concurrently_and_start_io_never_overlaps() {
    let (port, probe) = start(RamConfig {
        rendezvous_build_io: true,
        async_every: 3,
        ..ram(2)
    });
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let port = &port;
            s.spawn(move || {
                for i in 0..50u32 {
                    let c = port.submit(read10(lu(t % 2), i, 1)).expect("accepted");
                    assert_eq!(wait(&c).status, SrbStatus::SUCCESS);
                }
            });
        }
    });
    assert!(
        probe.build_max.load(SeqCst) >= 2,
        "HwBuildIo calls overlapped"
    );
    assert_eq!(
        probe.start_overlaps.load(SeqCst),
        0,
        "HwStartIo never overlapped"
    );
    assert_eq!(probe.starts(), 400);
    assert!(port.violations().is_empty());
}

#[test]
fn lu_queue_depth_of_255_holds_the_excess_in_the_port() {
    let (port, probe) = start(held(2));
    let mut all: Vec<_> = (0..300)
        .map(|i| port.submit(read10(lu(0), i % 200, 1)).expect("accepted"))
        .collect();
    all.extend((0..3).map(|i| port.submit(read10(lu(1), i, 1)).expect("accepted")));
    wait_until("258 started", || probe.starts() == 258);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(probe.starts(), 258, "no more than 255 on LU 0");
    let s0 = port.lu_stats(lu(0));
    assert_eq!((s0.waiting, s0.outstanding, s0.depth), (45, 255, 255));
    assert_eq!(
        port.lu_stats(lu(1)).outstanding,
        3,
        "LU 1 is not held by LU 0's depth"
    );
    probe.hold.store(false, SeqCst);
    probe.release_held(usize::MAX);
    for c in &all {
        assert_eq!(wait(c).status, SrbStatus::SUCCESS);
    }
    assert_eq!(probe.starts(), 303);
    assert_eq!(port.outstanding(), 0);
}

#[test]
fn busy_holds_until_enough_completions_and_ready_releases() {
    let (port, probe) = start(held(1));
    let first: Vec<_> = (0..3)
        .map(|i| port.submit(read10(lu(0), i, 1)).expect("accepted"))
        .collect();
    wait_until("3 started", || probe.starts() == 3);
    probe.services().busy(2);
    let more: Vec<_> = (0..2)
        .map(|i| port.submit(read10(lu(0), i, 1)).expect("accepted"))
        .collect();
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(probe.starts(), 3, "busy holds new requests");
    probe.release_held(1);
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(probe.starts(), 3, "one of the two completions");
    probe.release_held(1);
    wait_until("released after two", || probe.starts() == 5);
    probe.services().busy(100);
    let last = port.submit(tur(lu(0))).expect("accepted");
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(probe.starts(), 5);
    probe.services().ready();
    wait_until("ready releases", || probe.starts() == 6);
    probe.hold.store(false, SeqCst);
    probe.release_held(usize::MAX);
    for c in first.iter().chain(&more).chain([&last]) {
        assert_eq!(wait(c).status, SrbStatus::SUCCESS);
    }
}

#[test]
fn pause_holds_until_resume_or_its_timeout() {
    let (port, probe) = start(ram(1));
    probe.services().pause(30);
    let c: Vec<_> = (0..2)
        .map(|_| port.submit(tur(lu(0))).expect("accepted"))
        .collect();
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(probe.starts(), 0);
    assert!(!c[0].is_complete());
    probe.services().resume();
    for c in &c {
        assert_eq!(wait(c).status, SrbStatus::SUCCESS);
    }
    let t0 = Instant::now();
    probe.services().pause(1);
    let c = port.submit(tur(lu(0))).expect("accepted");
    assert_eq!(wait(&c).status, SrbStatus::SUCCESS);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "held for the pause: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(3),
        "released by the timeout: {waited:?}"
    );
}

#[test]
fn device_busy_holds_one_lu_only() {
    let (port, probe) = start(held(2));
    let a = port.submit(read10(lu(0), 0, 1)).expect("accepted");
    wait_until("first started", || probe.starts() == 1);
    probe.services().device_busy(lu(0), 1);
    let lu0: Vec<_> = (0..2)
        .map(|i| port.submit(read10(lu(0), i, 1)).expect("accepted"))
        .collect();
    let lu1: Vec<_> = (0..2)
        .map(|i| port.submit(read10(lu(1), i, 1)).expect("accepted"))
        .collect();
    wait_until("LU 1 flows", || probe.starts() == 3);
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(probe.starts(), 3);
    assert_eq!(port.lu_stats(lu(0)).waiting, 2, "LU 0 held");
    probe.release_held(1); // LU 0's first request
    assert_eq!(wait(&a).status, SrbStatus::SUCCESS);
    wait_until("LU 0 released", || probe.starts() == 5);
    probe.hold.store(false, SeqCst);
    probe.release_held(usize::MAX);
    for c in lu0.iter().chain(&lu1) {
        assert_eq!(wait(c).status, SrbStatus::SUCCESS);
    }
}

#[test]
fn reset_bus_completes_every_request_with_bus_reset() {
    let (port, probe) = start(held(2));
    let c: Vec<_> = (0..6)
        .map(|i| port.submit(read10(lu(i % 2), 0, 1)).expect("accepted"))
        .collect();
    wait_until("6 started", || probe.starts() == 6);
    assert_eq!(port.reset_bus(0), Ok(true));
    for c in &c {
        assert_eq!(wait(c).status, SrbStatus::BUS_RESET);
    }
    assert_eq!(port.outstanding(), 0);
    assert_eq!(probe.resets.load(SeqCst), 1);
    assert!(port.take_events().contains(&PortEvent::BusReset {
        path: 0,
        cause: ResetCause::Requested,
        success: true
    }));
    probe.hold.store(false, SeqCst);
    assert_eq!(
        wait(&port.submit(tur(lu(1))).expect("accepted")).status,
        SrbStatus::SUCCESS
    );
    assert!(port.violations().is_empty());
}

#[test]
fn a_reset_that_leaves_requests_outstanding_is_a_violation() {
    let (port, probe) = start(RamConfig {
        forget_on_reset: true,
        ..held(1)
    });
    let c: Vec<_> = (0..2)
        .map(|i| port.submit(read10(lu(0), i, 1)).expect("accepted"))
        .collect();
    wait_until("2 started", || probe.starts() == 2);
    let _ = port.reset_bus(0);
    for c in &c {
        assert_eq!(
            wait(c).status,
            SrbStatus::BUS_RESET,
            "the port completes them"
        );
    }
    let v = port.violations();
    assert!(
        matches!(&v[..], [Violation::OutstandingAfterReset { path: 0, ids }] if ids.len() == 2),
        "{v:?}"
    );
    assert!(port.is_bugchecked());
    assert_eq!(port.submit(tur(lu(0))).err(), Some(PortError::BugChecked));
}

#[test]
fn double_completion_is_trapped() {
    let (port, _probe) = start(RamConfig {
        double_complete_tur: true,
        ..ram(1)
    });
    let r = wait(&port.submit(tur(lu(0))).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS, "the first completion counts");
    assert_eq!(
        port.violations(),
        vec![Violation::DoubleCompletion { id: r.id }]
    );
    assert!(port.is_bugchecked());
}

#[test]
fn a_timed_out_request_makes_the_port_reset_the_bus() {
    let (port, probe) = start(held(1));
    let slow = port
        .submit(read10(lu(0), 0, 1).with_timeout(Duration::from_millis(200)))
        .expect("accepted");
    let other = port.submit(read10(lu(0), 1, 1)).expect("accepted");
    let t0 = Instant::now();
    let r = wait(&slow);
    assert_eq!(r.status, SrbStatus::BUS_RESET);
    assert!(t0.elapsed() >= Duration::from_millis(150));
    assert_eq!(
        wait(&other).status,
        SrbStatus::BUS_RESET,
        "the whole bus is reset"
    );
    assert_eq!(probe.resets.load(SeqCst), 1);
    let ev = port.take_events();
    assert!(
        ev.contains(&PortEvent::RequestTimedOut {
            id: r.id,
            lu: lu(0)
        }),
        "{ev:?}"
    );
    assert!(ev.iter().any(|e| matches!(
        e,
        PortEvent::BusReset {
            cause: ResetCause::Timeout,
            ..
        }
    )));
    probe.hold.store(false, SeqCst);
    assert_eq!(
        wait(&port.submit(tur(lu(0))).expect("accepted")).status,
        SrbStatus::SUCCESS
    );
    assert!(port.violations().is_empty());
}

#[test]
fn abort_command_aborts_a_request_the_miniport_holds() {
    let (port, probe) = start(held(1));
    let victim = port.submit(read10(lu(0), 0, 1)).expect("accepted");
    wait_until("started", || probe.held_count() == 1);
    let mut abort = SrbRequest::management(SrbFunction::AbortCommand, lu(0));
    abort.abort_target = probe.held_ids().first().copied();
    let a = port.submit(abort).expect("accepted");
    assert_eq!(wait(&a).status, SrbStatus::SUCCESS);
    assert_eq!(wait(&victim).status, SrbStatus::ABORTED);
}

#[test]
fn a_removed_lu_gets_no_more_io_and_the_miniport_is_not_told() {
    let (port, probe) = start(ram(2));
    probe.services().pause(30);
    let queued: Vec<_> = (0..2)
        .map(|_| port.submit(tur(lu(1))).expect("accepted"))
        .collect();
    port.remove_lu(lu(1));
    for c in &queued {
        assert_eq!(wait(c).status, SrbStatus::NO_DEVICE);
    }
    probe.services().resume();
    assert_eq!(
        wait(&port.submit(tur(lu(1))).expect("accepted")).status,
        SrbStatus::NO_DEVICE
    );
    assert_eq!(
        wait(&port.submit(tur(lu(0))).expect("accepted")).status,
        SrbStatus::SUCCESS
    );
    assert_eq!(
        probe.starts(),
        1,
        "only LU 0's request reached the miniport"
    );
    probe.services().bus_change_detected(0);
    assert!(
        port.take_events()
            .contains(&PortEvent::BusChangeDetected { path_id: 0 })
    );
    port.add_lu(lu(1));
    assert_eq!(
        wait(&port.submit(tur(lu(1))).expect("accepted")).status,
        SrbStatus::SUCCESS
    );
}

#[test]
fn stop_then_restart_reruns_find_adapter_at_dispatch_without_rezeroing() {
    let (port, probe) = start(ram(1));
    assert_eq!(
        probe.find_adapter_at_dispatch.load(SeqCst),
        0,
        "first at passive"
    );
    port.stop_adapter(Duration::from_secs(1)).expect("accepted");
    assert_eq!(probe.stops.load(SeqCst), 1);
    let c = port.submit(tur(lu(0))).expect("accepted");
    std::thread::sleep(Duration::from_millis(30));
    assert!(!c.is_complete(), "a stopped adapter gets nothing");
    port.restart_adapter().expect("accepted");
    assert_eq!(probe.find_adapter_calls.load(SeqCst), 2);
    assert_eq!(
        probe.find_adapter_at_dispatch.load(SeqCst),
        1,
        "no RestartAdapter: FindAdapter at dispatch"
    );
    assert_eq!(wait(&c).status, SrbStatus::SUCCESS);
    assert!(port.violations().is_empty());
}

#[test]
fn busy_status_makes_the_port_reissue_through_build_io() {
    let (port, probe) = start(ram(1));
    probe.busy_answers.store(3, SeqCst);
    let data = vec![0x5a; 1024];
    let w = wait(
        &port
            .submit(write10(lu(0), 4, data.clone()))
            .expect("accepted"),
    );
    assert_eq!(
        w.status,
        SrbStatus::SUCCESS,
        "re-issued until the miniport took it"
    );
    assert_eq!(probe.starts(), 4);
    assert_eq!(
        probe.build_calls.load(SeqCst),
        4,
        "each re-issue goes through HwBuildIo"
    );
    let r = wait(&port.submit(read10(lu(0), 4, 2)).expect("accepted"));
    assert_eq!(r.data, data, "the write's buffer survived the re-issues");
    assert!(port.violations().is_empty());
}

#[test]
fn complete_requests_completes_what_the_miniport_holds_on_one_lu() {
    let (port, probe) = start(held(2));
    let lu0: Vec<_> = (0..3)
        .map(|i| port.submit(read10(lu(0), i, 1)).expect("accepted"))
        .collect();
    let lu1 = port.submit(read10(lu(1), 0, 1)).expect("accepted");
    wait_until("4 started", || probe.starts() == 4);
    probe
        .services()
        .complete_requests(0, Some(0), Some(0), SrbStatus::BUS_RESET);
    for c in &lu0 {
        assert_eq!(wait(c).status, SrbStatus::BUS_RESET);
    }
    assert!(!lu1.is_complete(), "LU 1 untouched");
    assert_eq!(port.lu_stats(lu(1)).outstanding, 1);
    probe.hold.store(false, SeqCst);
    let ids = probe.held_ids();
    probe.forget_held();
    assert_eq!(
        ids.len(),
        4,
        "the miniport still listed them until it forgot"
    );
    probe
        .services()
        .complete_requests(0, None, None, SrbStatus::ABORTED);
    assert_eq!(wait(&lu1).status, SrbStatus::ABORTED);
    assert_eq!(port.outstanding(), 0);
    assert!(port.violations().is_empty());
}
