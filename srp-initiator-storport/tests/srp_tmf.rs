//! Caller-initiated task management through the SRP miniport: ABORT_COMMAND of an
//! outstanding SRB (it completes `SRB_STATUS_ABORTED`, the abort `SUCCESS`), ABORT_COMMAND of
//! an SRB already completed (`SRB_STATUS_ABORT_FAILED`), RESET_LOGICAL_UNIT with I/O
//! outstanding (the LU's SRBs complete `SRB_STATUS_BUS_RESET`, the reset `SUCCESS`), I/O
//! afterwards, and RESET_DEVICE as a LOGICAL UNIT RESET of each known LUN. The srp-target daemon cannot be slowed from its config, so the commands are
//! kept in flight by the scripted target of `common/hostile_target.rs` (`Fault::Silent`: the
//! first SRP_CMDs get no answer; every SRP_TSK_MGMT is answered FUNCTION COMPLETE).
//! Also: a LUN reset the target refuses (counted, RESET_DEVICE ERROR) and one it never
//! answers (a channel reset, then the LUN reset again on the new login). Loopback
//! 127.0.135.x; every wait is bounded.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

mod common;
#[path = "../../srp-initiator/tests/common/hostile_target.rs"]
mod hostile_target;
#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use access_layer::mad::ServiceId;
use common::{lu, read10, tur, wait, wait_until};
use hca::Guid;
use hostile_target::{Fault, HostileTarget, Stats};
use srp::initiator::PortState;
use srp::wire::{IoClass, PortId};
use srp_adapter::{Adapter, timers};
use srp_initiator_storport::port::{Port, PortConfig, SrbFunction, SrbId, SrbRequest, SrbStatus};
use srp_initiator_storport::srp::{RegistrationMode, ResetCounts, SrpAdapterConfig, SrpMiniport};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

const HOST_GUID: u64 = 0x0002_c903_00be_e801;
const TARGET_GUID: u64 = 0x0002_c903_00a1_d601;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 135, last))
}

fn management(function: SrbFunction, lun: u8, target: Option<SrbId>) -> SrbRequest {
    let mut r = SrbRequest::management(function, lu(lun));
    r.abort_target = target;
    r
}

#[test]
fn abort_command_and_reset_logical_unit_end_outstanding_srbs() {
    // The first four SRP_CMDs stay unanswered.
    let (target, port) = setup(1, 2, 4);
    let stats = target.stats.clone();

    // An abort of an SRB the adapter does not hold: ABORT_FAILED at once. Its id tells
    // the next ones (the port numbers SRBs in order).
    let probe = management(SrbFunction::AbortCommand, 0, Some(SrbId(u64::MAX)));
    let r = wait(&port.submit(probe).expect("accepted"));
    assert_eq!(r.status, SrbStatus::ABORT_FAILED);
    let base = r.id.0;

    // ABORT_COMMAND of an outstanding READ.
    let victim = port.submit(read10(lu(0), 0, 8)).expect("accepted");
    let victim_id = SrbId(base + 1);
    wait_until("the READ at the target", || {
        Stats::get(&stats.commands) >= 1
    });
    let abort = management(SrbFunction::AbortCommand, 0, Some(victim_id));
    let a = wait(&port.submit(abort).expect("accepted"));
    let v = wait(&victim);
    assert_eq!(v.id, victim_id);
    assert_eq!(v.status, SrbStatus::ABORTED, "the aborted SRB: {v:?}");
    assert_eq!(a.status, SrbStatus::SUCCESS, "the abort: {a:?}");
    assert_eq!(Stats::get(&stats.tmfs), 1, "one ABORT TASK");
    // Aborting it again: it has completed.
    let again = management(SrbFunction::AbortCommand, 0, Some(victim_id));
    let r = wait(&port.submit(again).expect("accepted"));
    assert_eq!(r.status, SrbStatus::ABORT_FAILED);

    // RESET_LOGICAL_UNIT with three SRBs outstanding on LU 0.
    let held: Vec<_> = (0..3)
        .map(|i| port.submit(read10(lu(0), 8 * i, 8)).expect("accepted"))
        .collect();
    wait_until("the READs at the target", || {
        Stats::get(&stats.commands) >= 4
    });
    let reset = management(SrbFunction::ResetLogicalUnit, 0, None);
    let r = wait(&port.submit(reset).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS, "the reset: {r:?}");
    for c in &held {
        let h = wait(c);
        assert_eq!(h.status, SrbStatus::BUS_RESET, "{h:?}");
    }
    assert_eq!(Stats::get(&stats.tmfs), 2, "one LOGICAL UNIT RESET");

    // I/O works afterwards, on the same channel.
    let logins = Stats::get(&stats.logins);
    for _ in 0..4 {
        let r = wait(&port.submit(tur(lu(0))).expect("accepted"));
        assert_eq!(r.status, SrbStatus::SUCCESS);
        let r = wait(&port.submit(read10(lu(0), 0, 8)).expect("accepted"));
        assert_eq!(r.status, SrbStatus::SUCCESS);
    }
    assert_eq!(Stats::get(&stats.logins), logins, "no channel reset");
    assert_eq!(port.miniport().channel_state(), Some(PortState::Running));

    // RESET_DEVICE: SRP has no TARGET RESET; the miniport resets each LUN it knows (LUN 0
    // answered the READs), the SRB completing with the last answer. No new login.
    let r = wait(
        &port
            .submit(management(SrbFunction::ResetDevice, 0, None))
            .expect("accepted"),
    );
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    assert_eq!(Stats::get(&stats.tmfs), 3, "one more LOGICAL UNIT RESET");
    let resets = port.miniport().resets();
    assert_eq!((resets.lun_resets, resets.escalated), (1, 0), "{resets:?}");
    let r = wait(&port.submit(read10(lu(0), 0, 8)).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS);
    assert_eq!(Stats::get(&stats.logins), logins, "no channel reset");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    drop(target);
}

/// The port logged in to a fresh hostile target at 127.0.135.`t` from 127.0.135.`h`, whose
/// first `silent` SRP_CMDs get no answer. The per-I/O FRMR registration; the command
/// timeout long enough that no timeout escalation interferes.
fn setup(t: u8, h: u8, silent: u32) -> (HostileTarget, Port<SrpMiniport>) {
    setup_with(t, h, silent, RegistrationMode::PerIo)
}

/// [`setup`] with `registration`.
fn setup_with(
    t: u8,
    h: u8,
    silent: u32,
    registration: RegistrationMode,
) -> (HostileTarget, Port<SrpMiniport>) {
    let service_id = ServiceId(TARGET_GUID + u64::from(t));
    let target = HostileTarget::start(
        ip(t),
        Guid(TARGET_GUID + 0x100 + u64::from(t)),
        service_id,
        Fault::Silent,
        silent,
    );
    let hw = Adapter {
        local: ip(h),
        target: ip(t),
        guid: HOST_GUID + u64::from(h),
        target_port_id: PortId::new(0, Guid(TARGET_GUID + u64::from(t)), IoClass::SrpR16a),
        service_id,
        queue_depth: 16,
        timers: timers(1, 3, 30),
        cmd_timeout: Duration::from_secs(30),
    }
    .config();
    let hw = SrpAdapterConfig { registration, ..hw };
    let port = Port::<SrpMiniport>::start(hw, PortConfig::default()).expect("adapter starts");
    wait_until("the login", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });
    (target, port)
}

#[test]
fn a_refused_lun_reset_is_counted_and_the_device_reset_reports_it() {
    let (target, port) = setup(3, 4, 0);
    let stats = target.stats.clone();
    // LUN 0 answers: the adapter knows it.
    let r = wait(&port.submit(read10(lu(0), 0, 8)).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS);
    // The target answers every TMF FAILED (SRP r16a response code 5).
    stats
        .tmf_answer
        .store(5, std::sync::atomic::Ordering::SeqCst);
    let r = wait(
        &port
            .submit(management(SrbFunction::ResetDevice, 0, None))
            .expect("accepted"),
    );
    assert_eq!(r.status, SrbStatus::ERROR, "RESET_DEVICE: {r:?}");
    assert_eq!(
        port.miniport().resets(),
        ResetCounts {
            sequences: 1,
            lun_resets: 0,
            refused: 1,
            escalated: 0
        }
    );
    // A bus reset: the refusal is counted, the bus reset still ends and resumes the port.
    assert_eq!(port.reset_bus(0), Ok(true));
    let r = wait(&port.submit(read10(lu(0), 8, 8)).expect("accepted"));
    assert_eq!(
        r.status,
        SrbStatus::SUCCESS,
        "I/O after the bus reset: {r:?}"
    );
    assert_eq!(port.miniport().resets().refused, 2);
    assert_eq!(Stats::get(&stats.logins), 1, "no channel reset");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    drop(target);
}

#[test]
fn an_unanswered_lun_reset_resets_the_channel_and_is_sent_again_on_the_new_login() {
    let (target, port) = setup(5, 6, 1);
    // The first LOGICAL UNIT RESET gets no answer (the core's TMF timeout is 5 s).
    let counts = bus_reset_with_a_read_held(&target, &port, |stats| {
        stats.tmf_silent.store(1, SeqCst);
    });
    assert_eq!(
        counts,
        ResetCounts {
            sequences: 1,
            lun_resets: 1,
            refused: 0,
            escalated: 1
        }
    );
    assert_eq!(Stats::get(&target.stats.logins), 2, "one channel reset");
    assert_eq!(
        Stats::get(&target.stats.tmfs),
        2,
        "the LUN reset sent again"
    );
    drop(port);
    drop(target);
}

/// A bus reset with a READ in flight (`setup`'s first command stays unanswered), the
/// target's task management set by `configure` first: the READ comes back BUS_RESET, a
/// READ after the reset (it waits while the adapter is paused) succeeds, no port rule
/// broken. The adapter's reset counts.
fn bus_reset_with_a_read_held(
    target: &HostileTarget,
    port: &Port<SrpMiniport>,
    configure: impl FnOnce(&Stats),
) -> ResetCounts {
    let stats = &target.stats;
    let held = port.submit(read10(lu(0), 0, 8)).expect("accepted");
    wait_until("the READ at the target", || {
        Stats::get(&stats.commands) >= 1
    });
    configure(stats);
    assert_eq!(port.reset_bus(0), Ok(true));
    let h = wait(&held);
    assert_eq!(h.status, SrbStatus::BUS_RESET, "the READ in flight: {h:?}");
    let after = port.submit(read10(lu(0), 8, 8)).expect("accepted");
    let r = after
        .wait_timeout(Duration::from_secs(20))
        .expect("completes after the reset");
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    port.miniport().resets()
}

/// Under TrustTarget registration a READ in flight has no region of its own to invalidate:
/// the target could still write into pages the port owns again. The bus reset tears the
/// channel down first (the only way to stop it), then resets the LUN on the new login.
#[test]
fn a_bus_reset_under_trust_target_resets_the_channel_before_the_luns() {
    let (target, port) = setup_with(7, 8, 1, RegistrationMode::TrustTarget);
    let counts = bus_reset_with_a_read_held(&target, &port, |_| {});
    assert_eq!(
        counts,
        ResetCounts {
            sequences: 1,
            lun_resets: 1,
            refused: 0,
            escalated: 1
        }
    );
    assert_eq!(
        Stats::get(&target.stats.logins),
        2,
        "the channel reset first"
    );
    assert_eq!(
        Stats::get(&target.stats.tmfs),
        1,
        "the LUN reset, on the new login"
    );
    drop(port);
    drop(target);
}

/// A bus reset hands a READ in flight back to the port; the target refuses the LUN's
/// reset, so the READ could still run there after the class driver's retry: the channel
/// is reset (ending the I_T nexus, and with it the task). The refusal is still counted.
#[test]
fn a_refused_lun_reset_with_commands_handed_back_resets_the_channel() {
    let (target, port) = setup(9, 10, 1);
    // The target answers every TMF FAILED (SRP r16a response code 5).
    let counts = bus_reset_with_a_read_held(&target, &port, |stats| {
        stats.tmf_answer.store(5, SeqCst);
    });
    assert_eq!(
        counts,
        ResetCounts {
            sequences: 1,
            lun_resets: 0,
            refused: 1,
            escalated: 1
        }
    );
    assert_eq!(Stats::get(&target.stats.logins), 2, "the channel reset");
    drop(port);
    drop(target);
}
