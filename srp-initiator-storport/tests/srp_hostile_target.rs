//! A hostile target under the SRP miniport (issue #6: "a target that answers with a bad
//! rkey/descriptor or a malformed RSP gets the channel reset, not a crash"). The target
//! (srp-initiator/tests/common/hostile_target.rs) is a soft HCA at 127.0.132.(2k+1) built from hca verbs,
//! access-layer GSI/CM and srp-target's login helpers; the miniport's adapter sits at
//! 127.0.132.(2k+2), with short transport timers (reconnect_delay 1 s, fast_io_fail 3 s).
//! - A truncated SRP_RSP, or one with a tag the initiator never used, for the first
//!   SRP_CMD: the channel resets (a second CM REQ reaches the target), the READ is
//!   re-sent on the new channel and completes SUCCESS with the target's data.
//! - The READ's RDMA WRITE with a wrong R_Key, or 512 bytes past the end of the
//!   descriptor: the initiator's HCA refuses it (the target's WRITE completes with a
//!   remote access error), the channel is lost and re-established, the held READ is
//!   registered again and re-sent, and completes with the right data — none of the
//!   refused write's bytes reach the SRB's buffer.
//! - A target that answers every SRP_CMD with a malformed SRP_RSP: the READ fails with
//!   `SRB_STATUS_SELECTION_TIMEOUT` at fast_io_fail, measured from the first loss, even
//!   though every re-login succeeds; the port stays usable and its resources come back.
//!
//! After each case: no verifier violation, no bugcheck, every page of system memory and the FRMR pool
//! back to idle. Every wait is bounded; the port drops before the target, also on panic.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

mod common;
#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use srp_adapter::{Adapter, timers};
#[path = "../../srp-initiator/tests/common/hostile_target.rs"]
mod hostile_target;

use access_layer::mad::ServiceId;
use common::{lu, read10, tur, wait_until};
use hca::Guid;
use hostile_target::{Fault, HostileTarget, Stats, block_data};
use srp::initiator::PortState;
use srp::wire::{IoClass, PortId};
use srp_initiator_storport::port::{Port, PortConfig, SrbStatus};
use srp_initiator_storport::srp::SrpMiniport;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const HOST_GUID: u64 = 0x0002_c903_00be_e701;
const TARGET_GUID: u64 = 0x0002_c903_00a1_d501;
/// Longest any single SRB may take here (a few losses and re-logins).
const SRB_DEADLINE: Duration = Duration::from_secs(20);
const MEMORY_PAGES: usize = srp_initiator_storport::port::memory::DEFAULT_PAGES;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 132, last))
}

/// The hostile target at 127.0.132.(2k+1) and the port logged in to it from
/// 127.0.132.(2k+2); `times` SRP_CMDs get `fault`.
fn setup(k: u8, fault: Fault, times: u32) -> (HostileTarget, Port<SrpMiniport>) {
    let (t, h) = (2 * k + 1, 2 * k + 2);
    let service_id = ServiceId(TARGET_GUID + u64::from(k));
    let target = HostileTarget::start(
        ip(t),
        Guid(TARGET_GUID + 0x100 + u64::from(k)),
        service_id,
        fault,
        times,
    );
    let hw = Adapter {
        local: ip(h),
        target: ip(t),
        guid: HOST_GUID + u64::from(h),
        target_port_id: PortId::new(0, Guid(TARGET_GUID + u64::from(k)), IoClass::SrpR16a),
        service_id,
        queue_depth: 16,
        timers: timers(1, 3, 30),
        cmd_timeout: Duration::from_secs(15),
    }
    .config();
    let port = Port::<SrpMiniport>::start(hw, PortConfig::default()).expect("adapter starts");
    (target, port)
}

fn logged_in(port: &Port<SrpMiniport>, stats: &Stats) {
    wait_until("the first login", || {
        Stats::get(&stats.logins) >= 1
            && port.miniport().channel_state() == Some(PortState::Running)
    });
}

/// No violation, no bugcheck, every arena page and FRMR back.
fn assert_clean(port: &Port<SrpMiniport>) {
    wait_until("arena and pool back", || {
        port.miniport().resources().is_some_and(|(pages, c)| {
            pages == MEMORY_PAGES && c.mapped == 0 && c.discarded == 0 && c.invalidating == 0
        })
    });
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert!(!port.is_bugchecked());
}

/// One bad answer to the first READ, then good ones: the READ completes on a new channel.
fn bad_once_then_recovers(k: u8, fault: Fault, lba: u32, blocks: u16) {
    let (target, port) = setup(k, fault, 1);
    let stats = target.stats.clone();
    logged_in(&port, &stats);
    let remapped_before = port.miniport().remapped();
    let r = port.submit(read10(lu(0), lba, blocks)).expect("accepted");
    let r = r
        .wait_timeout(SRB_DEADLINE)
        .map(common::Done::from)
        .expect("the READ completes");
    assert_eq!(r.status, SrbStatus::SUCCESS, "{fault:?}: {:?}", r.status);
    assert!(
        r.data == block_data(u64::from(lba), usize::from(blocks)),
        "{fault:?}: the READ carries the target's blocks"
    );
    assert_eq!(
        Stats::get(&stats.faults),
        1,
        "{fault:?}: one hostile answer"
    );
    assert!(
        Stats::get(&stats.logins) >= 2,
        "{fault:?}: the channel was reset (a second CM REQ)"
    );
    assert!(Stats::get(&stats.good) >= 1);
    if matches!(fault, Fault::BadRkey | Fault::PastEnd) {
        assert_eq!(
            Stats::get(&stats.refused),
            1,
            "{fault:?}: the initiator's HCA refused the write"
        );
        assert!(
            port.miniport().remapped() > remapped_before,
            "{fault:?}: the held READ was registered again"
        );
    }
    wait_until("running again", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });
    // The new channel serves more I/O.
    let r = port.submit(read10(lu(0), 7, 3)).expect("accepted");
    let r = r
        .wait_timeout(SRB_DEADLINE)
        .map(common::Done::from)
        .expect("completes");
    assert_eq!(r.status, SrbStatus::SUCCESS);
    assert!(r.data == block_data(7, 3));
    assert_clean(&port);
    drop(port);
    drop(target);
}

#[test]
fn truncated_rsp_resets_the_channel_and_the_read_is_resent() {
    bad_once_then_recovers(0, Fault::TruncatedRsp, 100, 8);
}

#[test]
fn rsp_with_unknown_tag_resets_the_channel_and_the_read_is_resent() {
    bad_once_then_recovers(1, Fault::UnknownTag, 2048, 24);
}

#[test]
fn rdma_write_with_wrong_rkey_is_refused_and_the_read_is_resent() {
    bad_once_then_recovers(2, Fault::BadRkey, 300, 16);
}

#[test]
fn rdma_write_past_the_descriptor_is_refused_and_the_read_is_resent() {
    bad_once_then_recovers(3, Fault::PastEnd, 4000, 9);
}

#[test]
fn target_misbehaving_forever_fails_the_read_at_fast_io_fail() {
    let (target, port) = setup(4, Fault::TruncatedRsp, u32::MAX);
    let stats = target.stats.clone();
    logged_in(&port, &stats);
    let t = Instant::now();
    let r = port.submit(read10(lu(0), 0, 8)).expect("accepted");
    let r = r
        .wait_timeout(SRB_DEADLINE)
        .map(common::Done::from)
        .expect("the READ completes");
    let took = t.elapsed();
    assert_eq!(r.status, SrbStatus::SELECTION_TIMEOUT);
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(6),
        "failed after {took:?}, fast_io_fail is 3 s"
    );
    assert!(Stats::get(&stats.faults) >= 2, "re-sent and refused again");
    assert!(Stats::get(&stats.logins) >= 2);
    // The port stays usable: a command without data still gets an answer (a hostile one
    // again: it fails the same way, bounded), and nothing leaked.
    let t = Instant::now();
    let r = port.submit(tur(lu(0))).expect("accepted");
    let r = r
        .wait_timeout(SRB_DEADLINE)
        .map(common::Done::from)
        .expect("completes");
    assert_eq!(r.status, SrbStatus::SELECTION_TIMEOUT);
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    assert_clean(&port);
    drop(port);
    drop(target);
}
