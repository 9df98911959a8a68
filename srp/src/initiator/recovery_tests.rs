//! T_LOGOUT and disconnects, reconnect with backoff, held I/O, fast_io_fail and dev_loss.

use super::test_target::*;
use super::*;
use crate::wire::login::{BufFormats, LoginRejReason};
use crate::wire::logout::TLogoutReason;
use core::time::Duration;
use ib_verbs::time::Time;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn with_timers(r: Option<u64>, f: Option<u64>, d: Option<u64>) -> InitiatorConfig {
    let mut cfg = config(LoginForm::IbCm);
    cfg.timers = TransportTimers::new(r.map(secs), f.map(secs), d.map(secs)).expect("valid");
    cfg
}

#[test]
fn t_logout_blocks_then_reconnects_with_backoff_and_resends_held_io() {
    // fast_io_fail and dev_loss off: only the reconnect schedule is under test.
    let mut h = Harness::logged_in(with_timers(Some(10), None, None), 4);
    let a = h.submit(read_cmd(0));
    let b = h.submit(write_cmd(512));
    let old_tags = [h.sent_cmd(1).tag, h.sent_cmd(0).tag];
    h.recv(&t_logout(TLogoutReason::InactiveChannel));
    assert_eq!(
        h.events,
        vec![
            Event::ChannelLost(LossCause::TargetLogout(TLogoutReason::InactiveChannel)),
            Event::StateChanged {
                from: PortState::Running,
                to: PortState::Blocked
            },
            Event::ReconnectScheduled {
                at: Time(10 * SEC),
                failed_reconnects: 0
            },
        ]
    );
    assert_eq!(
        (h.disconnects, h.ch.queued(), h.ch.outstanding()),
        (1, 2, 0)
    );
    // A command submitted while blocked is held too.
    let c = h.submit(read_cmd(1));
    assert_eq!(h.ch.queued(), 3);
    // Fifteen attempts fail; record when each one starts.
    let mut gaps = vec![];
    let mut last = h.now;
    for n in 1..=15u32 {
        let before = h.connects.len();
        h.run_until_connect();
        assert_eq!(h.connects.len(), before + 1, "attempt {n} was made");
        let at = h.connects[before].0;
        gaps.push((at.0 - last.0) / SEC);
        last = at;
        let rej = login_rej(
            h.login_tag(),
            LoginRejReason::InsufficientResources,
            BufFormats::DIRECT,
        );
        h.ch.handle_login_rej(h.now, &rej);
        h.pump();
        assert_eq!(h.ch.failed_reconnects(), n);
    }
    // The first attempt after reconnect_delay, then the delay after failure n is
    // 10 s × min(100, max(1, n − 10)).
    assert_eq!(
        gaps,
        vec![10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 20, 30, 40]
    );
    assert_eq!(h.ch.poll_timeout(), Some(last + secs(50)));
    assert_eq!(h.ch.state(), PortState::Blocked);
    assert!(
        h.done.is_empty(),
        "no error reaches the disk user while blocked"
    );
    // Attempt 16 succeeds: the held commands go out again, oldest first, under new tags.
    h.advance(secs(50));
    h.ch.handle_login_rsp(h.now, &login_rsp(h.login_tag(), 4, true));
    h.pump();
    assert_eq!(h.ch.state(), PortState::Running);
    assert_eq!(h.ch.failed_reconnects(), 0);
    assert!(h.events.contains(&Event::HeldIoResent { count: 3 }));
    let resent: Vec<_> = (0..3)
        .rev()
        .map(|k| (h.sent_cmd(k).tag, h.sent_cmd(k).lun))
        .collect();
    assert_eq!(
        resent.iter().map(|r| r.1).collect::<Vec<_>>(),
        vec![lun(0), lun(0), lun(1)]
    );
    assert!(
        resent.iter().all(|(t, _)| !old_tags.contains(t)),
        "fresh generations"
    );
    for (t, _) in &resent {
        h.recv(&rsp(*t, 1));
    }
    let ids: Vec<CmdId> = h.done.iter().map(|d| d.id).collect();
    assert_eq!(ids, vec![a, b, c]);
    assert!(h.done.iter().all(|d| matches!(d.outcome, Outcome::Done(_))));
}

#[test]
fn fast_io_fail_fails_held_io_and_reconnects_go_on() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    let a = h.submit(read_cmd(0));
    h.ch.handle_disconnect(h.now);
    h.pump();
    assert_eq!(h.ch.state(), PortState::Blocked);
    // The first attempt at 10 s fails at the CM.
    h.advance(secs(10));
    assert_eq!(h.connects.len(), 2);
    h.ch.handle_disconnect(h.now); // CM failure of the attempt
    h.pump();
    h.advance(secs(5));
    assert_eq!(h.ch.state(), PortState::FailFast);
    assert_eq!(
        h.done,
        vec![Completion {
            id: a,
            outcome: Outcome::TransportFailFast
        }]
    );
    // New I/O fails fast too, at once.
    let b =
        h.ch.submit(h.now, read_cmd(0))
            .expect("accepted and completed");
    h.pump();
    assert_eq!(
        h.done[1],
        Completion {
            id: b,
            outcome: Outcome::TransportFailFast
        }
    );
    // The next attempt (10 s after the failure at 10 s) succeeds: RUNNING again.
    h.advance(secs(5));
    assert_eq!(h.connects.len(), 3);
    assert_eq!(h.connects[2].0, Time(20 * SEC));
    h.ch.handle_login_rsp(h.now, &login_rsp(h.login_tag(), 4, true));
    h.pump();
    assert_eq!(h.ch.state(), PortState::Running);
    assert_eq!(
        h.ch.poll_timeout(),
        None,
        "fast_io_fail and dev_loss cancelled"
    );
}

#[test]
fn dev_loss_loses_the_port_and_fails_everything() {
    // fast_io_fail off, so I/O is still held when dev_loss (600 s, the limit) expires.
    let mut h = Harness::logged_in(with_timers(Some(10), None, Some(600)), 4);
    let a = h.submit(read_cmd(0));
    h.ch.handle_disconnect(h.now);
    h.pump();
    // Every attempt times out at the login timeout (20 s) without an answer.
    h.advance(secs(599));
    assert_eq!(h.ch.state(), PortState::Blocked);
    assert!(h.done.is_empty());
    let attempts = h.connects.len() - 1;
    // 10 s delay + 20 s login timeout per attempt until failure 11, then the delay grows:
    // attempts start at 10, 40, …, 310, 340, 380, 430, 490, 560 s.
    assert_eq!(attempts, 16, "never stuck: attempts go on until dev_loss");
    assert_eq!(h.connects[attempts].0, Time(560 * SEC));
    h.advance(secs(1));
    assert_eq!(h.ch.state(), PortState::Lost);
    assert_eq!(
        h.done,
        vec![Completion {
            id: a,
            outcome: Outcome::NoConnect
        }]
    );
    assert!(h.events.contains(&Event::StateChanged {
        from: PortState::Blocked,
        to: PortState::Lost
    }));
    assert_eq!(h.ch.poll_timeout(), None, "no more reconnects");
    let b = h.ch.submit(h.now, read_cmd(0)).expect("completed at once");
    h.pump();
    assert_eq!(
        h.done[1],
        Completion {
            id: b,
            outcome: Outcome::NoConnect
        }
    );
    h.ch.connect(h.now);
    h.pump();
    assert_eq!(h.connects.len(), attempts + 1, "a lost port stays lost");
}

#[test]
fn reconnect_off_waits_for_a_manual_connect() {
    let mut h = Harness::logged_in(with_timers(None, Some(15), Some(600)), 4);
    h.ch.handle_disconnect(h.now);
    h.pump();
    assert_eq!(
        h.ch.poll_timeout(),
        Some(Time(15 * SEC)),
        "only fast_io_fail is armed first"
    );
    h.ch.connect(h.now);
    h.pump();
    assert_eq!(h.connects.len(), 2);
    h.ch.handle_login_rsp(h.now, &login_rsp(h.login_tag(), 4, true));
    h.pump();
    assert_eq!(h.ch.state(), PortState::Running);
}

#[test]
fn held_commands_with_descriptors_are_registered_again_before_their_resend() {
    use crate::wire::desc::{DataDesc, DirectBuf};
    let mut h = Harness::logged_in(with_timers(Some(1), Some(8), Some(15)), 8);
    h.remap_with = None;
    let a = h.submit(read_cmd(0));
    let b = h.submit(read_cmd(1));
    let c = h.submit(read_cmd(2));
    let mut tur = read_cmd(3);
    tur.dir = DataDir::None;
    tur.data = DataDescriptors::None;
    tur.data_len = 0;
    let d = h.submit(tur);
    let sent_before = h.sent.len();
    h.recv(&t_logout(TLogoutReason::InactiveChannel));
    h.run_until_connect();
    h.ch.handle_login_rsp(h.now, &login_rsp(h.login_tag(), 8, true));
    h.pump();
    // The command without data goes at once; the others wait for their new registration.
    assert_eq!(h.remaps, vec![a, b, c]);
    assert_eq!(h.sent.len(), sent_before + 1);
    assert_eq!(h.sent_cmd(0).lun, lun(3));
    assert!(h.events.contains(&Event::HeldIoResent { count: 4 }));
    assert_eq!(h.ch.queued(), 3);
    // New keys: the SRP_CMD carries them.
    let fresh = DirectBuf::new_const(0x3000_0000, 0x9901, 4096);
    let answer = Remapped::New {
        data: DataDescriptors::Direct(fresh),
        imm_data: vec![],
        remote_invalidate: true,
    };
    assert!(h.ch.handle_remapped(h.now, b, answer));
    h.pump();
    assert_eq!(h.sent.len(), sent_before + 2);
    let cmd = h.sent_cmd(0);
    assert_eq!(cmd.lun, lun(1));
    assert!(matches!(cmd.data_in, DataDesc::Direct(d) if d == fresh));
    // A failed registration ends the command as a retryable reset.
    assert!(h.ch.handle_remapped(h.now, a, Remapped::Failed));
    h.pump();
    assert!(h.done.contains(&Completion {
        id: a,
        outcome: Outcome::Reset
    }));
    // Unanswered at fast_io_fail: failed like any held command; a late answer is refused.
    h.recv(&t_logout(TLogoutReason::InactiveChannel));
    h.advance(secs(9));
    assert!(h.done.contains(&Completion {
        id: c,
        outcome: Outcome::TransportFailFast
    }));
    assert!(!h.ch.handle_remapped(h.now, c, Remapped::Unchanged));
    assert_eq!(h.ch.queued(), 0);
    let _ = d;
}

#[test]
fn a_target_that_never_answers_resent_io_properly_cannot_restart_fast_io_fail() {
    let mut h = Harness::logged_in(with_timers(Some(1), Some(5), Some(60)), 4);
    let a = h.submit(read_cmd(0));
    let lost_at = h.now;
    // Every re-login succeeds, and every re-sent READ gets a truncated SRP_RSP.
    let mut logins = 0;
    while h.done.is_empty() {
        assert_eq!(h.ch.state(), PortState::Running);
        h.recv(&[0xc1, 0, 0, 0]);
        assert_eq!(h.ch.state(), PortState::Blocked);
        h.run_until_connect();
        h.ch.handle_login_rsp(h.now, &login_rsp(h.login_tag(), 4, true));
        h.pump();
        logins += 1;
        assert!(logins < 10, "the held READ never fails");
    }
    assert_eq!(
        h.done,
        vec![Completion {
            id: a,
            outcome: Outcome::TransportFailFast
        }]
    );
    assert!(logins >= 3, "re-sent on {logins} channels");
    assert!(
        h.now.0 - lost_at.0 <= 5 * SEC,
        "fast_io_fail from the first loss"
    );
}

#[test]
fn a_re_login_with_nothing_held_gives_the_next_loss_a_full_fast_io_fail() {
    let mut h = Harness::logged_in(with_timers(Some(1), Some(5), Some(60)), 4);
    h.ch.handle_disconnect(h.now);
    h.pump();
    h.run_until_connect();
    h.ch.handle_login_rsp(h.now, &login_rsp(h.login_tag(), 4, true));
    h.pump();
    assert_eq!(h.ch.state(), PortState::Running);
    h.advance(secs(30));
    let a = h.submit(read_cmd(0));
    h.ch.handle_disconnect(h.now);
    h.pump();
    h.advance(Duration::from_millis(4900));
    assert!(h.done.is_empty(), "{:?}", h.done);
    h.advance(Duration::from_millis(200));
    assert_eq!(
        h.done,
        vec![Completion {
            id: a,
            outcome: Outcome::TransportFailFast
        }]
    );
}

#[test]
fn logout_sends_i_logout_waits_for_the_target_and_never_reconnects() {
    let mut h = Harness::logged_in(with_timers(Some(1), Some(5), Some(60)), 4);
    let a = h.submit(read_cmd(0));
    h.ch.logout(h.now, secs(1));
    h.pump();
    assert_eq!(h.sent.last().map(|iu| iu[0]), Some(0x03), "SRP_I_LOGOUT");
    assert_eq!(
        h.done,
        vec![Completion {
            id: a,
            outcome: Outcome::NoConnect
        }]
    );
    assert_eq!(h.ch.state(), PortState::Lost);
    assert!(h.ch.is_logging_out());
    assert_eq!(h.disconnects, 0, "waits for the target to close");
    // The target's DREQ ends the wait.
    h.ch.handle_disconnect(h.now);
    h.pump();
    assert_eq!(h.disconnects, 1);
    assert!(!h.ch.is_logging_out());
    assert_eq!(h.ch.poll_timeout(), None, "no timer left");
    h.advance(secs(120));
    assert_eq!(h.connects.len(), 1, "no reconnect");
    h.ch.connect(h.now);
    h.pump();
    assert_eq!(h.connects.len(), 1, "a logged-out channel stays down");
    let late = h.ch.submit(h.now, read_cmd(0)).expect("completes at once");
    h.pump();
    assert_eq!(
        h.done.last().map(|c| (c.id, c.outcome.clone())),
        Some((late, Outcome::NoConnect))
    );
}

#[test]
fn logout_disconnects_itself_after_the_linger_and_at_once_without_a_channel() {
    let mut h = Harness::logged_in(with_timers(Some(1), None, None), 4);
    h.ch.logout(h.now, secs(2));
    h.pump();
    h.advance(Duration::from_millis(1999));
    assert_eq!(h.disconnects, 0);
    h.advance(Duration::from_millis(1));
    assert_eq!(h.disconnects, 1, "the linger ended");
    // A second logout changes nothing.
    h.ch.logout(h.now, secs(2));
    h.pump();
    assert_eq!(h.disconnects, 1);

    // Logging in: no I_LOGOUT, the CM connection goes at once.
    let mut h = Harness::new(with_timers(Some(1), None, None));
    h.ch.connect(h.now);
    h.pump();
    h.ch.logout(h.now, secs(2));
    h.pump();
    assert!(h.sent.is_empty());
    assert_eq!(h.disconnects, 1);
    assert_eq!(h.ch.state(), PortState::Lost);
    // The REP arriving late is ignored.
    h.ch.handle_login_rsp(h.now, &login_rsp(crate::wire::Tag(1), 4, true));
    h.pump();
    assert_eq!(h.ch.state(), PortState::Lost);
}
