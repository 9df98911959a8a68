//! One test per rule of the model: a RAM driver broken in exactly that way ([`Fault`]),
//! the port bugchecked with the right violation, and no submitter hung — every one gets a
//! result (the port's INTERNAL_ERROR, or the status it completed with before the break)
//! within a bounded wait, and later submissions are refused.

mod common;

use common::*;
use srp_initiator_iscsi_model::port::{
    EntryPoint, FlushCause, Lifecycle, Port, PortConfig, PortError, PortEvent, QueueTag, SrbStatus,
    Violation,
};
use std::sync::Arc;
use std::time::Duration;

/// The port is stopped for good: bugchecked, violations as given, new requests refused.
fn assert_bugchecked(port: &Port<RamDriver>, first: &Violation) {
    assert!(port.is_bugchecked());
    assert_eq!(port.state(), Lifecycle::BugChecked);
    assert_eq!(
        port.violations().first(),
        Some(first),
        "{:?}",
        port.violations()
    );
    assert!(
        port.take_events()
            .contains(&PortEvent::BugCheck(first.clone()))
    );
    assert!(matches!(port.submit(tur(0)), Err(PortError::BugChecked)));
}

#[test]
fn a_blocking_call_in_start_request_is_trapped() {
    let (port, _ram) = start(RamConfig {
        fault: Fault::BlockInStart,
        ..RamConfig::default()
    });
    let port = Arc::new(port);
    // Four submitters at once: the first start_request blocks, nobody hangs.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let port = port.clone();
            std::thread::spawn(move || match port.submit(tur(0)) {
                Ok(c) => Some(c.wait_timeout(BOUND).expect("no submitter hangs").status),
                Err(e) => {
                    assert_eq!(e, PortError::BugChecked);
                    None
                }
            })
        })
        .collect();
    let statuses: Vec<_> = threads.into_iter().map(|t| t.join().expect("t")).collect();
    assert!(
        statuses
            .iter()
            .flatten()
            .all(|s| *s == SrbStatus::INTERNAL_ERROR),
        "{statuses:?}"
    );
    assert!(
        statuses.iter().any(Option::is_some),
        "at least one was accepted"
    );
    let expected = if cfg!(debug_assertions) {
        "KeWaitForSingleObject"
    } else {
        "a call the dispatch verifier refused"
    };
    assert_bugchecked(
        &port,
        &Violation::BlockingAtDispatch {
            entry: EntryPoint::StartRequest,
            call: expected.into(),
        },
    );
}

#[test]
fn an_entry_stuck_at_dispatch_level_trips_the_watchdog() {
    let config = PortConfig {
        dispatch_watchdog: Duration::from_millis(100),
        ..PortConfig::default()
    };
    let (port, ram) = start_with(
        RamConfig {
            hold: true,
            fault: Fault::SleepInReset(Duration::from_millis(600)),
            ..RamConfig::default()
        },
        config,
    );
    let c = port
        .submit(tur(0).with_timeout(Duration::from_millis(30)))
        .expect("accepted");
    assert!(ram.wait_held(1));
    // It times out, the reset sleeps at dispatch level, the watchdog bugchecks.
    let r = c.wait_timeout(BOUND).expect("the submitter does not hang");
    assert_eq!(r.status, SrbStatus::INTERNAL_ERROR);
    assert_bugchecked(
        &port,
        &Violation::DispatchWatchdog {
            entry: EntryPoint::Reset,
            limit_ms: 100,
        },
    );
}

#[test]
fn a_completion_for_an_unknown_tag_is_trapped() {
    let (port, _ram) = start(RamConfig {
        fault: Fault::CompleteTagTwice,
        ..RamConfig::default()
    });
    let first = port.submit_tagged(tur(1), QueueTag(9)).expect("accepted");
    let r = first.wait_timeout(BOUND).expect("completed");
    assert_eq!(
        r.status,
        SrbStatus::SUCCESS,
        "the first completion by tag counts"
    );
    let deadline = std::time::Instant::now() + BOUND;
    while !port.is_bugchecked() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_bugchecked(
        &port,
        &Violation::UnknownTag {
            lu: lu(1),
            tag: QueueTag(9),
            id: None,
        },
    );
}

#[test]
fn a_completion_after_a_reset_flushed_the_request_is_trapped() {
    let (port, ram) = start(RamConfig {
        hold: true,
        fault: Fault::CompleteAfterReset,
        ..RamConfig::default()
    });
    let a = port.submit(tur(0)).expect("accepted");
    let b = port.submit(tur(1)).expect("accepted");
    assert!(ram.wait_held(2));
    let ids = ram.held_ids();
    assert_eq!(port.reset_bus(0), Ok(true));
    for c in [&a, &b] {
        let r = c.wait_timeout(BOUND).expect("flushed");
        assert_eq!(r.status, SrbStatus::BUS_RESET, "the reset flushed it");
    }
    // The broken driver's workers go on and complete what the reset flushed.
    ram.release();
    let deadline = std::time::Instant::now() + BOUND;
    while !port.is_bugchecked() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let v = port.violations();
    let Some(Violation::CompletionAfterFlush { id, cause }) = v.first() else {
        panic!("expected a completion after flush: {v:?}");
    };
    assert!(ids.contains(id));
    assert_eq!(*cause, FlushCause::Reset);
    assert_bugchecked(&port, &v[0]);
}

#[test]
fn a_request_completed_twice_is_trapped() {
    let (port, _ram) = start(RamConfig {
        fault: Fault::DoubleCompleteWrites,
        ..RamConfig::default()
    });
    assert_eq!(
        run(&port, tur(0)).status,
        SrbStatus::SUCCESS,
        "a TUR is fine"
    );
    let c = port
        .submit(write10(&port, 0, 0, &[7; BLOCK]))
        .expect("accepted");
    let r = c.wait_timeout(BOUND).expect("completed");
    assert_eq!(r.status, SrbStatus::SUCCESS, "the first completion counts");
    let deadline = std::time::Instant::now() + BOUND;
    while !port.is_bugchecked() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_bugchecked(&port, &Violation::DoubleCompletion { id: r.id });
}

#[test]
fn io_left_in_the_driver_at_removal_is_trapped() {
    let (port, ram) = start(RamConfig {
        hold: true,
        tags_per_lu: 2,
        fault: Fault::LeaveAtRemoval,
        ..RamConfig::default()
    });
    let held: Vec<_> = (0..2)
        .map(|_| port.submit(tur(0)).expect("accepted"))
        .collect();
    let queued = port.submit(tur(0)).expect("accepted");
    assert!(ram.wait_held(2));
    assert_eq!(port.lu_stats(lu(0)).waiting, 1);
    let ids = ram.held_ids();
    let expected = Violation::IoLeftAtRemoval {
        surprise: false,
        ids: ids.clone(),
    };
    assert_eq!(port.remove(), Err(PortError::BugCheck(expected.clone())));
    let r = queued.wait_timeout(BOUND).expect("the port failed its own");
    assert_eq!(r.status, SrbStatus::NO_DEVICE);
    for c in held {
        let r = c
            .wait_timeout(BOUND)
            .expect("the port failed the leftovers");
        assert_eq!(r.status, SrbStatus::NO_DEVICE);
    }
    assert_bugchecked(&port, &expected);
    assert_eq!(ram.entry_names().last(), Some(&"remove"));
}

#[test]
fn a_driver_calling_the_port_after_unload_is_trapped() {
    let (port, ram) = start(RamConfig::default());
    assert_eq!(run(&port, tur(0)).status, SrbStatus::SUCCESS);
    port.unload().expect("unload");
    assert!(port.violations().is_empty());
    // A thread the driver forgot reports a device after DriverUnload.
    ram.port().notify_device_arrival(lu(0));
    assert_eq!(
        port.violations(),
        vec![Violation::CallAfterUnload {
            call: "notify_device_arrival"
        }]
    );
    assert_eq!(
        port.state(),
        Lifecycle::Unloaded,
        "an unloaded port stays unloaded"
    );
}
