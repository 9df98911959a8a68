//! Issue #16, Windows Server 2003 clusters through the StorPort miniport: a node breaks the
//! SCSI-2 reservation of a hung-but-connected owner with a bus reset (MSCS's
//! IOCTL_STORAGE_BREAK_RESERVATION → the port's bus reset → HwResetBus), which the SRP
//! miniport turns into a LOGICAL UNIT RESET of each LUN it knows; the target releases the
//! reservation on it. Two ports (two cluster nodes, two initiator port IDs) log in to a
//! real srp-target daemon (one RAM LUN) on loopback 127.0.157.x. Every wait is bounded; the
//! ports drop before the daemon, both even when an assertion fails.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

mod common;
#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use common::{DEADLINE, lu, read10, tur, wait, wait_until, write10};
use srp::initiator::PortState;
use srp_adapter::{Adapter, Backing, OneLunTarget, daemon_options, timers};
use srp_initiator_storport::port::{
    DataDirection, Port, PortConfig, SrbFunction, SrbRequest, SrbStatus,
};
use srp_initiator_storport::srp::{ResetCounts, SrpMiniport};
use srp_target::daemon::Daemon;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

const HOST_GUID: u64 = 0x0002_c903_00be_f701;
const RESERVATION_CONFLICT: u8 = 0x18;
const CHECK_CONDITION: u8 = 0x02;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 157, last))
}

/// A daemon serving one RAM LUN (the quorum disk) at 127.0.157.`t`.
fn daemon(t: u8) -> (Daemon, srp_target::config::IocConfig) {
    let config = OneLunTarget {
        name: "storport-cluster",
        address: ip(t),
        node_guid: 0x0002_c903_00a1_c700 + u64::from(t),
        ioc_guid: 0x0002_c903_00a1_c800 + u64::from(t),
        rdma_cm_port: None,
        lun: "quorum",
        backing: Backing::Ram,
        size: "4MiB",
    }
    .config();
    let ioc = config.iocs[0].clone();
    (
        Daemon::start(config, daemon_options()).expect("daemon starts"),
        ioc,
    )
}

/// A cluster node: a port with the SRP miniport at 127.0.157.`h`, logged in.
fn node(ioc: &srp_target::config::IocConfig, t: u8, h: u8) -> Port<SrpMiniport> {
    node_with_luns(ioc, t, h, 1)
}

/// [`node`] with `luns` LUNs (MaximumNumberOfLogicalUnits).
fn node_with_luns(
    ioc: &srp_target::config::IocConfig,
    t: u8,
    h: u8,
    luns: u8,
) -> Port<SrpMiniport> {
    let mut hw = Adapter {
        local: ip(h),
        target: ip(t),
        guid: HOST_GUID + u64::from(h),
        target_port_id: ioc.target_port_id(),
        service_id: ioc.service_id,
        queue_depth: 32,
        timers: timers(1, 3, 6),
        cmd_timeout: Duration::from_secs(8),
    }
    .config();
    hw.max_luns = luns;
    let port = Port::<SrpMiniport>::start(hw, PortConfig::default()).expect("adapter starts");
    wait_until("the login", || {
        port.miniport().channel_state() == Some(PortState::Running)
    });
    port
}

fn reserve6() -> SrbRequest {
    SrbRequest::scsi(
        lu(0),
        &[0x16, 0, 0, 0, 0, 0],
        DataDirection::None,
        Vec::new(),
    )
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

/// Whether `r` is CHECK CONDITION, UNIT ATTENTION with ASC `asc`.
fn unit_attention(r: &common::Done, asc: u8) -> bool {
    r.scsi_status == CHECK_CONDITION
        && r.sense.get(2).map(|k| k & 0x0f) == Some(6)
        && r.sense.get(12) == Some(&asc)
}

/// Runs `make()` until it is not a unit attention (at most three of those, each must be
/// one): the last result and the unit attentions' ASCs seen before it.
fn past_attentions(
    port: &Port<SrpMiniport>,
    make: impl Fn() -> SrbRequest,
) -> (common::Done, Vec<u8>) {
    let mut seen = Vec::new();
    for _ in 0..4 {
        let r = wait(&port.submit(make()).expect("accepted"));
        if r.scsi_status == CHECK_CONDITION && r.sense.get(2).map(|k| k & 0x0f) == Some(6) {
            seen.push(r.sense.get(12).copied().unwrap_or(0));
            continue;
        }
        return (r, seen);
    }
    panic!("more than three unit attentions in a row: {seen:02x?}");
}

fn assert_clean(port: &Port<SrpMiniport>) {
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert!(!port.is_bugchecked());
}

/// A daemon at 127.0.157.`t` and two nodes at `t + 1` and `t + 2`, both past their first
/// unit attentions (power on, 29h), node A owning the quorum disk by RESERVE(6). The ports
/// come after the daemon: dropped in reverse, they go first.
fn reserved_pair(t: u8) -> (Daemon, Port<SrpMiniport>, Port<SrpMiniport>) {
    let (daemon, ioc) = daemon(t);
    let a = node(&ioc, t, t + 1);
    let b = node(&ioc, t, t + 2);
    for n in [&a, &b] {
        let (r, _) = past_attentions(n, || tur(lu(0)));
        assert_eq!(r.status, SrbStatus::SUCCESS, "TEST UNIT READY: {r:?}");
    }
    let r = wait(&a.submit(reserve6()).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS, "A's RESERVE(6): {r:?}");
    (daemon, a, b)
}

#[test]
fn a_bus_reset_breaks_a_hung_owners_scsi2_reservation() {
    // A owns the quorum disk; B is shut out.
    let (_daemon, a, b) = reserved_pair(1);
    let w = wait(
        &b.submit(write10(lu(0), 8, pattern(4096, 1)))
            .expect("accepted"),
    );
    assert_eq!(w.status, SrbStatus::ERROR, "B's WRITE: {w:?}");
    assert_eq!(w.scsi_status, RESERVATION_CONFLICT, "B's WRITE: {w:?}");
    let r = wait(&b.submit(reserve6()).expect("accepted"));
    assert_eq!(r.scsi_status, RESERVATION_CONFLICT, "B's RESERVE(6): {r:?}");

    // A hangs (it stays logged in and silent). B's cluster service breaks the reservation:
    // the port resets B's bus with I/O of B's on its way.
    let inflight: Vec<_> = (0..24u32)
        .map(|i| {
            let req = if i % 2 == 0 {
                read10(lu(0), i * 64, 64)
            } else {
                SrbRequest::scsi(
                    lu(0),
                    &[0x12, 0, 0, 0, 96, 0],
                    DataDirection::In,
                    vec![0; 96],
                )
            };
            b.submit(req).expect("accepted")
        })
        .collect();
    assert_eq!(b.reset_bus(0), Ok(true), "HwResetBus");
    // Every request B had at the reset completes: BUS_RESET if the miniport held it,
    // answered by the target (before the reset, or after it was released) otherwise.
    let mut reset = 0;
    for c in &inflight {
        let r = c
            .wait_timeout(DEADLINE)
            .expect("a request in flight at the reset completes");
        match r.status {
            SrbStatus::BUS_RESET => reset += 1,
            SrbStatus::SUCCESS => {}
            s => assert!(
                s == SrbStatus::ERROR || s == SrbStatus::ERROR.with_autosense(),
                "{r:?}"
            ),
        }
    }
    eprintln!("{reset} of {} requests completed BUS_RESET", inflight.len());

    // B takes the disk and writes (its requests waited while the adapter was paused for
    // the LUN reset).
    let (r, _) = past_attentions(&b, reserve6);
    assert_eq!(r.status, SrbStatus::SUCCESS, "B's RESERVE(6): {r:?}");
    // One LOGICAL UNIT RESET answered. An INQUIRY the target was answering when the
    // miniport invalidated its buffer's region fails the channel (the fence doing its
    // job): then the channel was reset once and the LUN reset sent on the new login.
    let counts = b.miniport().resets();
    let logins = b.miniport().status().logins;
    eprintln!("{counts:?}, {logins} logins");
    assert_eq!(
        (counts.sequences, counts.lun_resets, counts.refused),
        (1, 1, 0),
        "{counts:?}"
    );
    assert!(counts.escalated <= 1, "{counts:?}");
    assert_eq!(
        logins,
        1 + counts.escalated,
        "a channel reset only as the escalation"
    );
    let data = pattern(8192, 7);
    let (w, _) = past_attentions(&b, || write10(lu(0), 16, data.clone()));
    assert_eq!(w.status, SrbStatus::SUCCESS, "B's WRITE: {w:?}");
    let r = wait(&b.submit(read10(lu(0), 16, 16)).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS);
    assert!(r.data == data, "B reads back what it wrote");

    // A wakes: it sees the reset (unit attention 29h, in whatever order the target gives)
    // and then that it is the one shut out.
    let mut statuses = Vec::new();
    let mut saw_reset = false;
    for _ in 0..3 {
        let r = wait(
            &a.submit(write10(lu(0), 8, pattern(4096, 2)))
                .expect("accepted"),
        );
        saw_reset |= unit_attention(&r, 0x29);
        statuses.push(r.scsi_status);
        if r.scsi_status == RESERVATION_CONFLICT && saw_reset {
            break;
        }
    }
    assert!(
        saw_reset,
        "A saw the reset's unit attention: {statuses:02x?}"
    );
    assert_eq!(
        statuses.last(),
        Some(&RESERVATION_CONFLICT),
        "A's WRITE conflicts: {statuses:02x?}"
    );
    let r = wait(&a.submit(reserve6()).expect("accepted"));
    assert_eq!(r.scsi_status, RESERVATION_CONFLICT, "A's RESERVE(6): {r:?}");
    let w = wait(
        &b.submit(write10(lu(0), 8, pattern(4096, 3)))
            .expect("accepted"),
    );
    assert_eq!(
        w.status,
        SrbStatus::SUCCESS,
        "B still holds the disk: {w:?}"
    );

    // The owner's channel was never reset: the reset was a task management function.
    assert_eq!(a.miniport().status().logins, 1);
    assert_clean(&a);
    assert_clean(&b);
}

#[test]
fn a_device_reset_is_a_lun_reset_and_gives_the_disk_back() {
    let (_daemon, a, b) = reserved_pair(11);
    let r = wait(&b.submit(tur(lu(0))).expect("accepted"));
    assert_eq!(r.scsi_status, RESERVATION_CONFLICT, "B's TUR: {r:?}");
    // RESET_DEVICE (a target reset; SRP has none): LOGICAL UNIT RESET of LUN 0, the SRB
    // completing once it is answered.
    let reset = SrbRequest::management(SrbFunction::ResetDevice, lu(0));
    let r = wait(&b.submit(reset).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS, "RESET_DEVICE: {r:?}");
    assert_eq!(
        b.miniport().resets(),
        ResetCounts {
            sequences: 1,
            lun_resets: 1,
            refused: 0,
            escalated: 0
        }
    );
    let (r, seen) = past_attentions(&b, reserve6);
    assert_eq!(r.status, SrbStatus::SUCCESS, "B's RESERVE(6): {r:?}");
    assert!(seen.iter().all(|asc| *asc == 0x29), "{seen:02x?}");
    let (r, seen) = past_attentions(&a, || tur(lu(0)));
    assert_eq!(seen, vec![0x29], "A sees the reset once");
    assert_eq!(r.scsi_status, RESERVATION_CONFLICT, "A's TUR: {r:?}");
    assert_eq!(b.miniport().status().logins, 1, "no channel reset");
    assert_clean(&a);
    assert_clean(&b);
}

#[test]
fn a_bus_reset_resets_only_the_luns_that_exist() {
    let (_daemon, ioc) = daemon(21);
    let b = node_with_luns(&ioc, 21, 22, 2);
    let (r, _) = past_attentions(&b, || tur(lu(0)));
    assert_eq!(r.status, SrbStatus::SUCCESS, "LUN 0: {r:?}");
    // The class driver's scan finds no LU behind LUN 1: INQUIRY answers peripheral
    // qualifier 011b, other commands LOGICAL UNIT NOT SUPPORTED.
    let inq = SrbRequest::scsi(
        lu(1),
        &[0x12, 0, 0, 0, 36, 0],
        DataDirection::In,
        vec![0; 36],
    );
    let r = wait(&b.submit(inq).expect("accepted"));
    assert_eq!(r.status, SrbStatus::SUCCESS, "INQUIRY of LUN 1: {r:?}");
    assert_eq!(r.data[0] >> 5, 3, "no LU at LUN 1");
    let r = wait(&b.submit(tur(lu(1))).expect("accepted"));
    assert_ne!(
        r.status,
        SrbStatus::SUCCESS,
        "TEST UNIT READY of LUN 1: {r:?}"
    );
    assert_eq!(b.reset_bus(0), Ok(true));
    let (r, seen) = past_attentions(&b, || tur(lu(0)));
    assert_eq!(r.status, SrbStatus::SUCCESS, "LUN 0 after the reset: {r:?}");
    assert_eq!(seen, vec![0x29], "LUN 0 was reset");
    assert_eq!(
        b.miniport().resets(),
        ResetCounts {
            sequences: 1,
            lun_resets: 1,
            refused: 0,
            escalated: 0
        },
        "only LUN 0 reset, nothing refused"
    );
    assert_clean(&b);
}
