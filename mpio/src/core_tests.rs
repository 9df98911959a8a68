//! [`MpCore`] driven directly, as the whole-stack simulator drives it: a `u32` device
//! handle (the path's key), explicit instants, outcomes made by hand and judged by
//! [`SrpDsm`].
#[allow(unused_imports)]
use crate::prelude::*;

use crate::core::{Acquire, Completion, IoKind, Issued, MpCore, PathSpec, Transport};
use crate::{DiskIdentity, DsmIdentifier, MpConfig, Outcome, PathLabel, PathState, Policy};
use crate::{SrpDsm, TransportKind};
use alloc::sync::Arc;
use srp_host::DeviceError;
use std::time::{Duration, Instant};

const SECOND: Duration = Duration::from_secs(1);

/// Failover only, path 1 preferred: the policy's pick is always the first usable path.
fn core(keys: &[u32]) -> MpCore<u32> {
    let config = MpConfig {
        policy: Policy::FailoverOnly,
        no_path_retry: Duration::from_secs(5),
        ..MpConfig::default()
    };
    let identity = DiskIdentity {
        identity: "naa.600a0b80001234560000000000000001".into(),
        block_size: 512,
        blocks: 1024,
        ..DiskIdentity::default()
    };
    let mut c = MpCore::new(identity.clone(), Arc::new(SrpDsm::default()), config);
    for &key in keys {
        c.add_path(PathSpec {
            key,
            lun: 0,
            device: key,
            id: DsmIdentifier {
                identity: identity.identity.clone(),
                alua: false,
                relative_port: Some(key as u16),
                port_group: None,
            },
            preferred: key == keys[0],
            weight: 1,
            label: PathLabel::default(),
        });
    }
    c
}

fn state(c: &MpCore<u32>, key: u32) -> PathState {
    let s = c.snapshot();
    s.paths.iter().find(|p| p.key == key).expect("path").state
}

/// Acquires a path for a one-block read at `now`: the command as its driver keeps it.
fn send(c: &mut MpCore<u32>, now: Instant, tries: u32) -> Issued {
    match c.acquire(1) {
        Acquire::Path { key, device } => {
            assert_eq!(device, key, "the path's own handle");
            Issued {
                key,
                kind: IoKind::Read,
                blocks: 1,
                bytes: 512,
                started: now,
                tries,
            }
        }
        other => panic!("no path: {other:?}"),
    }
}

fn path_failed() -> Outcome {
    Outcome::Transport {
        kind: TransportKind::PathFailed,
        detail: "SELECTION_TIMEOUT".into(),
    }
}

fn good() -> Outcome {
    Outcome::Good(vec![0; 512])
}

#[test]
fn a_transport_error_fails_the_command_over_to_the_second_path() {
    let t0 = Instant::now();
    let mut c = core(&[1, 2]);
    let first = send(&mut c, t0, 0);
    assert_eq!(first.key, 1);
    assert_eq!(
        c.complete(&first, &path_failed(), t0 + SECOND),
        Completion::Failover { tries: 0 }
    );
    assert_eq!(state(&c, 1), PathState::Failed);

    let second = send(&mut c, t0 + SECOND, 0);
    assert_eq!(second.key, 2, "the command moves to the other path");
    assert_eq!(
        c.complete(&second, &good(), t0 + SECOND * 2),
        Completion::Done
    );

    let s = c.snapshot();
    assert_eq!((s.reads, s.errors, s.failovers), (1, 0, 1));
    let (p1, p2) = (&s.paths[0], &s.paths[1]);
    assert_eq!((p1.in_flight, p1.errors, p1.failures), (0, 1, 1));
    assert_eq!((p2.in_flight, p2.reads, p2.bytes), (0, 1, 512));
}

#[test]
fn with_every_path_down_a_command_waits_until_no_path_retry() {
    let t0 = Instant::now();
    let mut c = core(&[1, 2]);
    assert!(c.set_admin(1, false, t0));
    assert!(c.set_admin(2, false, t0));
    assert!(!c.set_admin(3, false, t0), "no such path");
    assert_eq!(c.acquire(1), Acquire::NoPath);

    let retry = c.config().no_path_retry;
    assert_eq!(c.no_path_wait(t0, t0), Ok(retry));
    c.wait_begin();
    assert_eq!(c.snapshot().queued, 1);
    c.wait_end();
    assert_eq!(c.acquire(1), Acquire::NoPath);
    assert_eq!(c.no_path_wait(t0, t0 + SECOND * 2), Ok(retry - SECOND * 2));
    assert_eq!(
        c.no_path_wait(t0, t0 + retry),
        Err(DeviceError::Io(
            "no usable path to naa.600a0b80001234560000000000000001 for 5s".into()
        ))
    );
    let s = c.snapshot();
    assert_eq!((s.queued, s.errors), (0, 1));

    // A disk whose last path was removed fails at once.
    assert_eq!(c.remove_path(1), 1);
    assert_eq!(c.remove_path(2), 0);
    assert_eq!(c.acquire(1), Acquire::Gone);
    assert_eq!(c.snapshot().errors, 2);
}

#[test]
fn a_retryable_answer_is_retried_and_keeps_the_path() {
    let t0 = Instant::now();
    let mut c = core(&[1, 2]);
    let dsm = SrpDsm::default();
    let mut tries = 0;
    for n in 1..=dsm.retries {
        let io = send(&mut c, t0, tries);
        assert_eq!(io.key, 1);
        match c.complete(&io, &Outcome::Busy, t0 + SECOND) {
            Completion::Retry { pause, tries: t } => {
                assert_eq!((pause, t), (dsm.retry_interval, n));
                tries = t;
            }
            other => panic!("BUSY: {other:?}"),
        }
        assert_eq!(state(&c, 1), PathState::Active, "the path stays in service");
    }
    // Past the retries the device's answer is surfaced.
    let io = send(&mut c, t0, tries);
    assert_eq!(
        c.complete(&io, &Outcome::Busy, t0 + SECOND),
        Completion::Failed(DeviceError::Io("BUSY".into()))
    );
    let s = c.snapshot();
    assert_eq!((s.reads, s.errors, s.failovers), (0, 1, 0));
    assert_eq!(s.paths[0].in_flight, 0);
}

#[test]
fn a_failed_path_with_its_transport_up_is_verified_back_into_service() {
    let t0 = Instant::now();
    let mut c = core(&[1, 2]);
    // The first pass verifies every path once.
    let plan = c.tick_plan(t0, |_| Transport::Up);
    assert!(plan.fail_fast.is_empty());
    assert_eq!(
        plan.verify.iter().map(|j| j.key).collect::<Vec<_>>(),
        [1, 2]
    );
    for job in &plan.verify {
        assert_eq!(c.verify_cdb(), vec![0; 6], "TEST UNIT READY");
        assert!(!c.needs_rtpg(job, &good()), "the LU reports no ALUA");
        assert_eq!(
            c.verify_done(job, &good(), None, t0),
            Some(PathState::Active)
        );
    }

    let io = send(&mut c, t0, 0);
    c.complete(&io, &path_failed(), t0 + SECOND);
    assert_eq!(state(&c, 1), PathState::Failed);

    // Only the failed path is due (the other's period has not passed).
    let plan = c.tick_plan(t0 + SECOND * 2, |_| Transport::Up);
    assert_eq!(plan.verify.len(), 1);
    let job = &plan.verify[0];
    assert_eq!((job.key, job.device), (1, 1));
    assert!(
        c.tick_plan(t0 + SECOND * 3, |_| Transport::Up)
            .verify
            .is_empty(),
        "not verified again while its verify runs"
    );
    assert_eq!(
        c.verify_done(job, &good(), None, t0 + SECOND * 3),
        Some(PathState::Active)
    );
    assert_eq!(send(&mut c, t0, 0).key, 1, "failback to the preferred path");

    // A verify that could not start is planned again at the next pass.
    c.set_admin(2, false, t0);
    c.set_admin(2, true, t0);
    let plan = c.tick_plan(t0 + SECOND * 4, |_| Transport::Up);
    assert_eq!(plan.verify.iter().map(|j| j.key).collect::<Vec<_>>(), [2]);
    c.verify_abandoned(2);
    let plan = c.tick_plan(t0 + SECOND * 5, |_| Transport::Up);
    assert_eq!(plan.verify.iter().map(|j| j.key).collect::<Vec<_>>(), [2]);
    c.remove_path(2);
    assert_eq!(c.verify_done(&plan.verify[0], &good(), None, t0), None);
}

#[test]
fn a_down_path_holding_io_is_failed_fast_while_another_is_usable() {
    let t0 = Instant::now();
    let mut c = core(&[1, 2]);
    let held = send(&mut c, t0, 0);
    assert_eq!(held.key, 1);
    let down = |d: &u32| {
        if *d == 1 {
            Transport::Down
        } else {
            Transport::Up
        }
    };
    let plan = c.tick_plan(t0 + SECOND, down);
    assert_eq!(plan.fail_fast, [1]);
    assert_eq!(state(&c, 1), PathState::Failed);
    assert!(
        plan.verify.iter().all(|j| j.key != 1),
        "a down path is not verified"
    );

    // With no other usable path the held I/O stays where it is.
    c.set_admin(2, false, t0);
    assert!(c.tick_plan(t0 + SECOND * 2, down).fail_fast.is_empty());
    // The failed-fast command fails over; nothing is left in flight.
    assert_eq!(
        c.complete(&held, &path_failed(), t0 + SECOND * 2),
        Completion::Failover { tries: 0 }
    );
    assert!(c.snapshot().paths.iter().all(|p| p.in_flight == 0));
}
