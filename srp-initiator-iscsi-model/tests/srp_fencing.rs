//! Fencing at the HCA under the iSCSI model (issue #29, Deliver 2): once the driver has
//! given an I/O up, the target can no longer reach its buffer. The scripted target of the
//! StorPort tests (`common/hostile_target.rs`) keeps one SRP_CMD unanswered and remembers
//! its data descriptor; while the request is outstanding an RDMA access under that rkey
//! lands (the key was live: the test could fail); once the driver has given it up — ABORT
//! COMMAND, RESET LOGICAL UNIT, the command timeout, a bus reset (the channel torn down
//! and logged in again) — the same access, on the target's current channel, fails at the
//! initiator's HCA with a remote access error. Per-I/O FRMR registration (the default;
//! the trust-the-target mode is exempt by design). Loopback 127.0.162.x; every wait is
//! bounded; the port drops before the target.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

#[path = "../../srp-initiator/tests/common/hostile_target.rs"]
mod hostile_target;
#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use access_layer::mad::ServiceId;
use hca::Guid;
use hostile_target::{Fault, HostileTarget, Late, Stats};
use srp::initiator::PortState;
use srp::wire::{IoClass, PortId};
use srp_adapter::{Adapter, timers};
use srp_initiator_iscsi_model::port::{
    DataDirection, LuAddress, Port, PortConfig, SrbFunction, SrbId, SrbRequest, SrbResult,
    SrbStatus,
};
use srp_initiator_iscsi_model::srp::SrpDriver;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const HOST_GUID: u64 = 0x0002_c903_00be_f201;
const TARGET_GUID: u64 = 0x0002_c903_00a1_f201;
const BOUND: Duration = Duration::from_secs(20);

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 162, last))
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + BOUND;
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within {BOUND:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn lu() -> LuAddress {
    LuAddress::new(0, 0, 0)
}

/// The driver at 127.0.162.(2k+2) logged in to a hostile target at 127.0.162.(2k+1)
/// whose first SRP_CMD gets no answer.
fn setup(k: u8, cmd_timeout: Duration) -> (HostileTarget, Port<SrpDriver>) {
    let (t, h) = (2 * k + 1, 2 * k + 2);
    let service_id = ServiceId(TARGET_GUID + u64::from(k));
    let target = HostileTarget::start(
        ip(t),
        Guid(TARGET_GUID + 0x100 + u64::from(k)),
        service_id,
        Fault::Silent,
        1,
    );
    let cfg = Adapter {
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
    let port = Port::start(SrpDriver::new(cfg), PortConfig::default()).expect("initializes");
    wait_until("the login", || {
        port.driver().status().state == Some(PortState::Running)
    });
    (target, port)
}

fn cdb10(op: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let mut cdb = [0u8; 10];
    cdb[0] = op;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

fn read(port: &Port<SrpDriver>) -> SrbRequest {
    let buf = port.read_buffer(8 * 512).expect("memory");
    SrbRequest::scsi(lu(), &cdb10(0x28, 0, 8), DataDirection::In, buf)
}

fn write(port: &Port<SrpDriver>) -> SrbRequest {
    let buf = port.buffer_from(&[0x5a; 16 * 512]).expect("memory");
    SrbRequest::scsi(lu(), &cdb10(0x2a, 0, 16), DataDirection::Out, buf)
}

fn run(port: &Port<SrpDriver>, req: SrbRequest) -> SrbResult {
    port.submit(req)
        .expect("accepted")
        .wait_timeout(BOUND)
        .expect("completed in time")
}

fn management(function: SrbFunction, target: Option<SrbId>) -> SrbRequest {
    let mut r = SrbRequest::management(function, lu());
    r.abort_target = target;
    r
}

/// The held request (`make`), a late `kind` access landing while it is outstanding, given
/// up by `give_up` (returns its final status), the same access refused at the HCA.
fn fenced_after(
    k: u8,
    cmd_timeout: Duration,
    make: fn(&Port<SrpDriver>) -> SrbRequest,
    kind: Late,
    give_up: impl FnOnce(&HostileTarget, &Port<SrpDriver>, SrbId) -> SrbStatus,
    want: SrbStatus,
) {
    let (target, port) = setup(k, cmd_timeout);
    let stats = target.stats.clone();
    // An abort of a request the driver does not hold: ABORT_FAILED; its id tells the
    // next one's (the port numbers requests in order).
    let r = run(
        &port,
        management(SrbFunction::AbortCommand, Some(SrbId(u64::MAX))),
    );
    assert_eq!(r.status, SrbStatus::ABORT_FAILED);
    let id = SrbId(r.id.0 + 1);
    let held = port.submit(make(&port)).expect("accepted");
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
    let status = give_up(&target, &port, id);
    let r = held.wait_timeout(BOUND).expect("given up in time");
    assert_eq!(
        (r.id, r.status),
        (id, want),
        "the request given up: {status:?}"
    );
    assert_eq!(
        stats.late_access(kind),
        (0, 1),
        "{kind:?} under the key of an I/O given up ({want:?}) must fail at the HCA"
    );
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    drop(target);
}

const LONG: Duration = Duration::from_secs(30);

#[test]
fn a_read_aborted_is_fenced() {
    fenced_after(
        0,
        LONG,
        read,
        Late::Write,
        |_, port, id| {
            let a = run(port, management(SrbFunction::AbortCommand, Some(id)));
            assert_eq!(a.status, SrbStatus::SUCCESS, "the abort: {a:?}");
            a.status
        },
        SrbStatus::ABORTED,
    );
}

#[test]
fn a_write_given_up_by_a_lun_reset_is_fenced() {
    fenced_after(
        1,
        LONG,
        write,
        Late::Read,
        |_, port, _| {
            let r = run(port, management(SrbFunction::ResetLogicalUnit, None));
            assert_eq!(r.status, SrbStatus::SUCCESS, "the reset: {r:?}");
            r.status
        },
        SrbStatus::BUS_RESET,
    );
}

#[test]
fn a_read_that_timed_out_is_fenced() {
    fenced_after(
        2,
        Duration::from_secs(2),
        read,
        Late::Write,
        |_, _, _| SrbStatus::TIMEOUT,
        SrbStatus::TIMEOUT,
    );
}

#[test]
fn a_read_handed_back_by_a_bus_reset_is_fenced_on_the_new_channel() {
    fenced_after(
        3,
        LONG,
        read,
        Late::Write,
        |target, port, _| {
            assert!(port.reset_bus(0).expect("a reset at passive level"));
            wait_until("the new login", || Stats::get(&target.stats.logins) >= 2);
            wait_until("the channel running", || {
                port.driver().status().state == Some(PortState::Running)
            });
            SrbStatus::BUS_RESET
        },
        SrbStatus::BUS_RESET,
    );
}
