//! Transport timer validation, backoff and the port state table.

use super::*;
use core::time::Duration;

fn s(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n))
}

#[test]
fn defaults_are_ib_srp_10_15_600() {
    let t = TransportTimers::default();
    assert_eq!(t.reconnect_delay(), s(10));
    assert_eq!(t.fast_io_fail(), s(15));
    assert_eq!(t.dev_loss(), s(600));
    assert_eq!(TransportTimers::new(s(10), s(15), s(600)), Ok(t));
}

#[test]
fn validation_follows_srp_tmo_valid() {
    let err = |r, f, d| match TransportTimers::new(r, f, d) {
        Err(InitiatorError::InvalidTimers(why)) => why,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(
        err(None, None, None),
        "reconnect_delay, fast_io_fail_tmo and dev_loss_tmo are all off"
    );
    assert_eq!(
        err(s(0), s(15), s(600)),
        "reconnect_delay must not be 0 (use off)"
    );
    assert_eq!(err(s(10), s(601), None), "fast_io_fail_tmo exceeds 600 s");
    assert_eq!(
        err(s(10), None, s(601)),
        "dev_loss_tmo exceeds 600 s while fast_io_fail_tmo is off"
    );
    assert_eq!(
        err(s(10), s(30), s(30)),
        "fast_io_fail_tmo must be below dev_loss_tmo"
    );
    // Accepted edge cases.
    assert!(
        TransportTimers::new(None, s(15), s(600)).is_ok(),
        "reconnect off"
    );
    assert!(
        TransportTimers::new(s(10), None, s(600)).is_ok(),
        "600 s is the limit"
    );
    assert!(
        TransportTimers::new(s(10), s(600), s(3600)).is_ok(),
        "dev_loss may exceed 600 with fast_io_fail on"
    );
    assert!(
        TransportTimers::new(s(1), None, None).is_ok(),
        "only reconnect"
    );
}

#[test]
fn backoff_is_flat_for_ten_failures_then_grows_to_100x() {
    let d = Duration::from_secs(10);
    let got: Vec<u64> = (1..=15)
        .map(|n| reconnect_backoff(d, n).as_secs())
        .collect();
    assert_eq!(
        got,
        vec![10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 20, 30, 40, 50]
    );
    assert_eq!(reconnect_backoff(d, 110).as_secs(), 1000);
    assert_eq!(reconnect_backoff(d, 5000).as_secs(), 1000, "capped at 100x");
    assert_eq!(reconnect_backoff(d, 0).as_secs(), 10);
}

#[test]
fn port_state_table() {
    use PortEvent as E;
    use PortState as S;
    let ok = [
        (S::New, E::LoggedIn, S::Running),
        (S::New, E::TransportLost, S::New),
        (S::Running, E::TransportLost, S::Blocked),
        (S::Blocked, E::TransportLost, S::Blocked),
        (S::Blocked, E::LoggedIn, S::Running),
        (S::Blocked, E::FastIoFailExpired, S::FailFast),
        (S::Blocked, E::DevLossExpired, S::Lost),
        (S::FailFast, E::TransportLost, S::FailFast),
        (S::FailFast, E::LoggedIn, S::Running),
        (S::FailFast, E::DevLossExpired, S::Lost),
    ];
    for (from, ev, to) in ok {
        assert_eq!(from.next(ev), Ok(to), "{from:?} on {ev:?}");
    }
    for (from, ev) in [
        (S::Running, E::FastIoFailExpired),
        (S::Running, E::DevLossExpired),
        (S::Lost, E::LoggedIn),
        (S::Lost, E::TransportLost),
        (S::Running, E::LoggedIn),
    ] {
        assert_eq!(
            from.next(ev),
            Err(InitiatorError::IllegalTransition { from, event: ev })
        );
    }
}

#[test]
fn timer_table_expires_due_timers_only() {
    let mut t = TimerTable::default();
    t.set(TimerKind::FastIoFail, Time(15));
    t.set(TimerKind::DevLoss, Time(600));
    t.set(TimerKind::Reconnect, Time(10));
    assert_eq!(t.next(), Some(Time(10)));
    assert_eq!(
        t.expire(Time(15)).collect::<Vec<_>>(),
        vec![TimerKind::Reconnect, TimerKind::FastIoFail]
    );
    assert_eq!(t.next(), Some(Time(600)));
    t.stop(TimerKind::DevLoss);
    assert_eq!(t.next(), None);
}
