//! The device's life with a correct RAM driver: timeouts into a bus reset that flushes
//! with BUS_RESET (and the driver drops what it held, completing none of it), a reset on
//! request, orderly removal (the driver finishes what it holds, the port fails its queue),
//! surprise removal (the driver fails what it holds), devices the driver reports gone,
//! and unload (stop, then unload; nothing is called afterwards).

mod common;

use common::*;
use srp_initiator_iscsi_model::port::{
    Lifecycle, PortError, PortEvent, REMOVAL_STATUS, ResetCause, SrbStatus,
};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

#[test]
fn a_timed_out_request_resets_the_bus_and_the_flush_completes_it() {
    let (port, ram) = start(RamConfig {
        hold: true,
        ..RamConfig::default()
    });
    let late: Vec<_> = (0..3)
        .map(|i| {
            let req = tur(i % 2).with_timeout(Duration::from_millis(40));
            port.submit(req).expect("accepted")
        })
        .collect();
    assert!(ram.wait_held(3));
    let ids = ram.held_ids();
    for c in &late {
        let r = c.wait_timeout(BOUND).expect("the reset flushed it");
        assert_eq!(r.status, SrbStatus::BUS_RESET);
    }
    // The driver's workers drop what the reset took: no late completion.
    ram.release();
    assert_eq!(
        run(&port, tur(0)).status,
        SrbStatus::SUCCESS,
        "the port goes on"
    );
    assert_eq!(
        ram.dropped_stale.load(SeqCst),
        0,
        "the reset emptied the queue"
    );
    let events = port.take_events();
    let timed_out = events
        .iter()
        .filter(|e| matches!(e, PortEvent::RequestTimedOut { .. }))
        .count();
    assert_eq!(timed_out, 3);
    let flushed: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            PortEvent::BusReset {
                path_id: 0,
                cause: ResetCause::Timeout,
                success: true,
                flushed,
            } => Some(flushed.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(flushed, ids, "every timed-out request flushed once");
    let resets = ram.entries.lock().expect("lock").clone();
    assert!(
        resets.iter().filter(|e| e.0 == "reset").all(|e| e.1),
        "reset runs at dispatch level"
    );
    assert!(port.violations().is_empty(), "{:?}", port.violations());
}

#[test]
fn a_reset_on_request_flushes_what_the_driver_holds_and_the_worker_drops_it() {
    let (port, ram) = start(RamConfig {
        hold: true,
        workers: 1,
        ..RamConfig::default()
    });
    let c = port.submit(tur(1)).expect("accepted");
    assert!(ram.wait_held(1));
    assert_eq!(port.reset_bus(0), Ok(true));
    assert_eq!(
        c.wait_timeout(BOUND).expect("done").status,
        SrbStatus::BUS_RESET
    );
    ram.release();
    let after = port.submit(tur(1)).expect("accepted");
    assert_eq!(
        after.wait_timeout(BOUND).expect("done").status,
        SrbStatus::SUCCESS
    );
    assert_eq!(port.outstanding(), 0);
    assert!(port.violations().is_empty());
}

#[test]
fn orderly_removal_lets_the_driver_finish_and_fails_the_ports_queue() {
    let (port, ram) = start(RamConfig {
        hold: true,
        tags_per_lu: 2,
        ..RamConfig::default()
    });
    let held: Vec<_> = (0..2)
        .map(|_| port.submit(tur(0)).expect("accepted"))
        .collect();
    let queued = port.submit(tur(0)).expect("accepted");
    assert!(ram.wait_held(2));
    port.remove().expect("remove");
    assert_eq!(
        queued.wait_timeout(BOUND).expect("failed").status,
        REMOVAL_STATUS
    );
    for c in held {
        let r = c.wait_timeout(BOUND).expect("finished by the driver");
        assert_eq!(r.status, SrbStatus::SUCCESS);
    }
    assert_eq!(port.state(), Lifecycle::Removed);
    assert_eq!(
        port.submit(tur(0)).err(),
        Some(PortError::NotAccepting(Lifecycle::Removed))
    );
    assert!(port.take_events().contains(&PortEvent::Removed {
        surprise: false,
        failed_queued: 1
    }));
    let entries = ram.entries.lock().expect("lock").clone();
    let remove = entries
        .iter()
        .find(|e| e.0 == "remove")
        .expect("remove ran");
    assert!(!remove.1, "remove runs at passive level");
    port.unload().expect("unload");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
}

#[test]
fn surprise_removal_fails_everything_held() {
    let (port, ram) = start(RamConfig {
        hold: true,
        tags_per_lu: 2,
        ..RamConfig::default()
    });
    let held: Vec<_> = (0..2)
        .map(|_| port.submit(tur(1)).expect("accepted"))
        .collect();
    let queued = port.submit(tur(1)).expect("accepted");
    assert!(ram.wait_held(2));
    port.surprise_remove().expect("surprise removal");
    for c in held.iter().chain([&queued]) {
        let r = c.wait_timeout(BOUND).expect("failed, not hung");
        assert_eq!(r.status, SrbStatus::NO_DEVICE);
    }
    assert!(ram.entry_names().contains(&"remove(surprise)"));
    assert!(port.take_events().contains(&PortEvent::Removed {
        surprise: true,
        failed_queued: 1
    }));
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert_eq!(
        port.remove().err(),
        Some(PortError::IllegalTransition {
            from: Lifecycle::Removed,
            event: srp_initiator_iscsi_model::port::LifeEvent::Remove
        }),
        "removed once"
    );
}

#[test]
fn a_device_the_driver_reports_gone_fails_at_once_until_it_is_back() {
    let (port, ram) = start(RamConfig::default());
    ram.port().notify_device_removal(lu(1));
    assert_eq!(run(&port, tur(1)).status, SrbStatus::NO_DEVICE);
    assert_eq!(
        run(&port, tur(0)).status,
        SrbStatus::SUCCESS,
        "LU 0 is there"
    );
    assert!(port.lu_stats(lu(1)).gone);
    ram.port().notify_device_arrival(lu(1));
    assert_eq!(run(&port, tur(1)).status, SrbStatus::SUCCESS);
    let events = port.take_events();
    assert!(events.contains(&PortEvent::DeviceRemoved(lu(1))));
    assert!(events.contains(&PortEvent::DeviceArrived(lu(1))));
}

#[test]
fn unload_stops_then_unloads_and_nothing_is_called_afterwards() {
    let (port, ram) = start(RamConfig::default());
    assert_eq!(run(&port, tur(0)).status, SrbStatus::SUCCESS);
    port.unload().expect("unload");
    assert_eq!(port.state(), Lifecycle::Unloaded);
    let names = ram.entry_names();
    assert_eq!(
        &names[names.len() - 2..],
        ["remove", "unload"],
        "stop, then unload"
    );
    let events = port.take_events();
    let tail: Vec<_> = events.iter().rev().take(2).rev().cloned().collect();
    assert_eq!(
        tail,
        vec![
            PortEvent::Removed {
                surprise: false,
                failed_queued: 0
            },
            PortEvent::Unloaded
        ]
    );
    assert_eq!(
        port.submit(tur(0)).err(),
        Some(PortError::NotAccepting(Lifecycle::Unloaded))
    );
    assert_eq!(
        port.reset_bus(0).err(),
        Some(PortError::NotAccepting(Lifecycle::Unloaded))
    );
    assert!(port.unload().is_err(), "unloaded once");
    assert!(port.pause().is_err());
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        ram.entry_names().len(),
        names.len(),
        "no entry after unload"
    );
    assert!(port.violations().is_empty());
}
