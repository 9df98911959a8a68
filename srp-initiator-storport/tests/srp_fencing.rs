//! Fencing at the HCA (issue #29, Deliver 2): once the StorPort miniport has given an I/O
//! up, the target can no longer reach its buffer. The scripted target of
//! `common/hostile_target.rs` keeps one SRP_CMD unanswered and remembers its data
//! descriptor; while the SRB is outstanding, an RDMA access under that descriptor's rkey
//! lands (the key was live: the test could fail); once the miniport has given the SRB up —
//! ABORT_COMMAND, RESET_LOGICAL_UNIT, the command timeout (ABORT TASK), or a channel reset
//! that hands the region back unvalidated (discarded: deregistered and replaced) — the
//! same access, on whatever channel the target then has, fails at the initiator's HCA with
//! a remote access error. An RDMA WRITE into a READ's data-in, an RDMA READ of a WRITE's
//! data-out. Per-I/O FRMR registration; the trust-the-target mode is exempt by design
//! (`RegistrationMode::TrustTarget`). Loopback 127.0.161.x; every wait is bounded.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

mod common;
#[path = "../../srp-initiator/tests/common/hostile_target.rs"]
mod hostile_target;
#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use access_layer::mad::ServiceId;
use access_layer::verbs::Completion;
use common::{lu, read10, wait, wait_until, write10};
use hca::Guid;
use hostile_target::{Fault, HostileTarget, Late, Stats};
use srp::initiator::PortState;
use srp::wire::{IoClass, PortId};
use srp_adapter::{Adapter, timers};
use srp_initiator_storport::port::{
    Port, PortConfig, SrbFunction, SrbId, SrbRequest, SrbResult, SrbStatus,
};
use srp_initiator_storport::srp::SrpMiniport;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

const HOST_GUID: u64 = 0x0002_c903_00be_f101;
const TARGET_GUID: u64 = 0x0002_c903_00a1_f101;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 161, last))
}

/// The port logged in from 127.0.161.(2k+2) to a hostile target at 127.0.161.(2k+1)
/// whose first SRP_CMD gets no answer.
fn setup(k: u8, cmd_timeout: Duration) -> (HostileTarget, Port<SrpMiniport>) {
    let (t, h) = (2 * k + 1, 2 * k + 2);
    let service_id = ServiceId(TARGET_GUID + u64::from(k));
    let target = HostileTarget::start(
        ip(t),
        Guid(TARGET_GUID + 0x100 + u64::from(k)),
        service_id,
        Fault::Silent,
        1,
    );
    let hw = Adapter {
        local: ip(h),
        target: ip(t),
        guid: HOST_GUID + u64::from(k),
        target_port_id: PortId::new(0, Guid(TARGET_GUID + u64::from(k)), IoClass::SrpR16a),
        service_id,
        queue_depth: 16,
        timers: timers(1, 3, 30),
        cmd_timeout,
    }
    .config();
    let port = Port::<SrpMiniport>::start(hw, PortConfig::default()).expect("adapter starts");
    wait_until("the login", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });
    (target, port)
}

/// The SRB the target holds (`request`, its first command), a late `kind` access landing
/// while it is outstanding, then given up by `give_up` (which returns the SRB's final
/// status), and the same access refused at the HCA.
fn fenced_after(
    k: u8,
    cmd_timeout: Duration,
    request: SrbRequest,
    kind: Late,
    give_up: impl FnOnce(&HostileTarget, &Port<SrpMiniport>, &Held) -> SrbStatus,
    want: SrbStatus,
) {
    let (target, port) = setup(k, cmd_timeout);
    let stats = target.stats.clone();
    // An abort of an SRB the port does not hold: ABORT_FAILED, and its id tells the next
    // one's (the port numbers SRBs in order).
    let probe = management(SrbFunction::AbortCommand, Some(SrbId(u64::MAX)));
    let r = wait(&port.submit(probe).expect("accepted"));
    assert_eq!(r.status, SrbStatus::ABORT_FAILED);
    let srb = Held {
        id: SrbId(r.id.0 + 1),
        done: port.submit(request).expect("accepted"),
    };
    // Held, not only seen: the target counts the command before it records the
    // descriptors it keeps, and counts the fault after (a wait on `commands` raced that).
    wait_until("the command held at the target", || {
        Stats::get(&stats.faults) >= 1
    });
    assert_eq!(
        stats.late_access(kind),
        (1, 0),
        "{kind:?} under the key of an outstanding I/O lands (the key is live)"
    );
    let status = give_up(&target, &port, &srb);
    assert_eq!(status, want, "the SRB given up");
    assert_eq!(
        stats.late_access(kind),
        (0, 1),
        "{kind:?} under the key of an I/O given up ({want:?}) must fail at the HCA"
    );
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    drop(target);
}

/// The SRB the target holds.
struct Held {
    id: SrbId,
    done: Completion<SrbResult>,
}

fn management(function: SrbFunction, target: Option<SrbId>) -> SrbRequest {
    let mut r = SrbRequest::management(function, lu(0));
    r.abort_target = target;
    r
}

const LONG: Duration = Duration::from_secs(30);

#[test]
fn a_read_aborted_by_the_port_is_fenced() {
    fenced_after(
        0,
        LONG,
        read10(lu(0), 0, 8),
        Late::Write,
        |_, port, srb| {
            let abort = management(SrbFunction::AbortCommand, Some(srb.id));
            let a = wait(&port.submit(abort).expect("accepted"));
            assert_eq!(a.status, SrbStatus::SUCCESS, "the abort");
            wait(&srb.done).status
        },
        SrbStatus::ABORTED,
    );
}

#[test]
fn a_write_given_up_by_a_lun_reset_is_fenced() {
    fenced_after(
        1,
        LONG,
        write10(lu(0), 0, vec![0x5a; 8 << 10]),
        Late::Read,
        |_, port, srb| {
            let reset = management(SrbFunction::ResetLogicalUnit, None);
            let r = wait(&port.submit(reset).expect("accepted"));
            assert_eq!(r.status, SrbStatus::SUCCESS, "the reset");
            wait(&srb.done).status
        },
        SrbStatus::BUS_RESET,
    );
}

#[test]
fn a_read_that_timed_out_is_fenced() {
    fenced_after(
        2,
        Duration::from_secs(2),
        read10(lu(0), 0, 8),
        Late::Write,
        |_, _, srb| {
            srb.done
                .wait_timeout(Duration::from_secs(20))
                .expect("the timeout ends it")
                .status
        },
        SrbStatus::TIMEOUT,
    );
}

#[test]
fn a_read_handed_back_by_a_channel_reset_is_fenced_on_the_new_channel() {
    fenced_after(
        3,
        LONG,
        read10(lu(0), 0, 8),
        Late::Write,
        |target, port, srb| {
            // The LUN reset gets no answer: the channel is reset (the region cannot be
            // invalidated on a dead QP: discarded), and the reset sent again on the new
            // login.
            target.stats.tmf_silent.store(1, SeqCst);
            assert_eq!(port.reset_bus(0), Ok(true));
            let status = wait(&srb.done).status;
            wait_until("the new login", || Stats::get(&target.stats.logins) >= 2);
            wait_until("the channel running", || {
                port.miniport().channel_state() == Some(PortState::Running)
            });
            status
        },
        SrbStatus::BUS_RESET,
    );
}
