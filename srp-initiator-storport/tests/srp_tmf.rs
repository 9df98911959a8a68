//! Caller-initiated task management through the SRP miniport: ABORT_COMMAND of an
//! outstanding SRB (it completes `SRB_STATUS_ABORTED`, the abort `SUCCESS`), ABORT_COMMAND of
//! an SRB already completed (`SRB_STATUS_ABORT_FAILED`), RESET_LOGICAL_UNIT with I/O
//! outstanding (the LU's SRBs complete `SRB_STATUS_BUS_RESET`, the reset `SUCCESS`), I/O
//! afterwards, and RESET_DEVICE as a LOGICAL UNIT RESET of each known LUN. The srp-target daemon cannot be slowed from its config, so the commands are
//! kept in flight by the scripted target of `common/hostile_target.rs` (`Fault::Silent`: the
//! first SRP_CMDs get no answer; every SRP_TSK_MGMT is answered FUNCTION COMPLETE).
//! Loopback 127.0.135.x; every wait is bounded.

mod common;
#[path = "common/hostile_target.rs"]
mod hostile_target;
#[path = "common/srp_adapter.rs"]
mod srp_adapter;

use access_layer::mad::ServiceId;
use common::{lu, read10, tur, wait, wait_until};
use hca::Guid;
use hostile_target::{Fault, HostileTarget, Stats};
use srp::initiator::PortState;
use srp::wire::{IoClass, PortId};
use srp_adapter::{Adapter, timers};
use srp_initiator_storport::port::{Port, PortConfig, SrbFunction, SrbId, SrbRequest, SrbStatus};
use srp_initiator_storport::srp::SrpMiniport;
use std::net::{IpAddr, Ipv4Addr};
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
    let service_id = ServiceId(TARGET_GUID);
    // The first four SRP_CMDs stay unanswered.
    let target = HostileTarget::start(
        ip(1),
        Guid(TARGET_GUID + 0x100),
        service_id,
        Fault::Silent,
        4,
    );
    let hw = Adapter {
        local: ip(2),
        target: ip(1),
        guid: HOST_GUID,
        target_port_id: PortId::new(0, Guid(TARGET_GUID), IoClass::SrpR16a),
        service_id,
        queue_depth: 16,
        timers: timers(1, 3, 30),
        // Long enough that no timeout escalation interferes.
        cmd_timeout: Duration::from_secs(30),
    }
    .config();
    let port = Port::<SrpMiniport>::start(hw, PortConfig::default()).expect("adapter starts");
    let stats = target.stats.clone();
    wait_until("the login", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });

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
