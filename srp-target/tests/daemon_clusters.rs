//! Issue #16, Deliver 1: the sequences Windows failover clusters run against a shared disk,
//! through the running daemon with two access-layer initiators (two cluster nodes).
//!
//! - Windows Server 2003 (MSCS, SCSI-2): the owner holds the quorum disk by RESERVE(6) and
//!   renews it; the other node sees RESERVATION CONFLICT on TEST UNIT READY and I/O, yet
//!   INQUIRY and REPORT LUNS work; its RELEASE changes nothing; the challenger breaks a dead
//!   owner's hold by LOGICAL UNIT RESET and takes the disk; the old owner then sees the
//!   reset's unit attention, then conflicts. The owner's I_T nexus lost (its host gone)
//!   ends the reservation too. RESERVE(10)/RELEASE(10) behave alike.
//! - The SCSI-2 reservation meets persistent reservations (SPC-4 5.13.3, CRH=1).
//! - Windows Server 2008+ (SCSI-3 PR): both nodes register, the owner reserves Write
//!   Exclusive – Registrants Only, the challenger preempts the owner's key; a LOGICAL UNIT
//!   RESET and the loss of a node's I_T nexus leave registrations and the reservation.
//!
//! - A node's START STOP UNIT stop (at its shutdown) leaves the disk ready for its peer.
//! - RESERVE(10)/RELEASE(10) refuse third-party fields and parameter lists; the SBC-4
//!   commands of issue #16 meet another nexus's persistent reservation as SBC-4's table says.
//!
//! Loopback 127.0.139.x only.

mod common;
mod host;

use common::{TempDir, be32, cdb16, field_pointer, pattern, read10, write10};
use host::node::{Form, Node, await_event, await_logout, login_of};
use scsi::{SenseCode, Status};
use srp::wire::rsp::TmfResponse;
use srp::wire::tsk_mgmt::TaskMgmtFunction;
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use srp_target::login::ChannelId;
use std::net::{IpAddr, Ipv4Addr};

const DISK: u32 = 0;
const TUR: [u8; 6] = [0; 6];
const RESERVE6: [u8; 6] = [0x16, 0, 0, 0, 0, 0];
const RELEASE6: [u8; 6] = [0x17, 0, 0, 0, 0, 0];
const RESERVE10: [u8; 10] = [0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const RELEASE10: [u8; 10] = [0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0];

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 139, host))
}

struct Rig {
    daemon: Daemon,
    config: TargetConfig,
    _dir: TempDir,
}

fn rig(t: u8) -> Rig {
    let dir = TempDir::new("daemon-clusters");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d8b000\"\nstate_dir = \"{}\"\nidle_probe = \"300ms\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"quorum\"\nfile = \"{}\"\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d8b001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"quorum\" }}\nallow = [\"any\"]\n",
        dir.path().join("state").display(),
        ip(t),
        dir.path().join("quorum.img").display(),
    );
    let config = TargetConfig::from_str(&text, "clusters.toml")
        .expect("config valid")
        .config;
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 8;
    options.limits.max_transfer = 64 << 10;
    options.shutdown_step = std::time::Duration::from_millis(300);
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");
    Rig {
        daemon,
        config,
        _dir: dir,
    }
}

impl Rig {
    fn node(&self, t: u8, addr: u8, guid: u64) -> Node {
        Node::open(
            ip(addr),
            ip(t),
            guid,
            &self.config.iocs[0],
            Form::IbCm,
            false,
        )
    }
}

fn status(n: &mut Node, cdb: &[u8]) -> Status {
    n.direct(DISK, cdb, &[], 0).status
}

fn conflict(n: &mut Node, cdb: &[u8], dout: &[u8], din: u32) {
    let r = n.direct(DISK, cdb, dout, din);
    assert_eq!(
        (r.status, r.code()),
        (Status::ReservationConflict, None),
        "{cdb:02x?}: {r:?}"
    );
}

fn pr_out(n: &mut Node, sa: u8, ty: u8, key: u64, sa_key: u64) -> Status {
    let (cdb, params) = common::pr_out(sa, ty, key, sa_key, 0);
    n.direct(DISK, &cdb, &params, 0).status
}

fn lu_reset(n: &mut Node) {
    let r = n.tmf(DISK, TaskMgmtFunction::LogicalUnitReset, 0);
    assert_eq!(r.tmf, Some(TmfResponse::Complete), "{r:?}");
}

/// The unit attention a LOGICAL UNIT RESET leaves, taken by a TEST UNIT READY.
fn take_reset_attention(n: &mut Node) {
    n.check(
        DISK,
        &TUR,
        &[],
        0,
        SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED,
    );
}

#[test]
fn windows_2003_scsi2_quorum_arbitration() {
    let r = rig(1);
    let mut a = r.node(1, 2, 0xb201);
    let mut b = r.node(1, 3, 0xb202);
    // A owns the disk and renews its reservation.
    for _ in 0..3 {
        a.good(DISK, &RESERVE6, &[], 0);
    }
    let d = pattern(4096, 0x21);
    a.good(DISK, &write10(0, 8, true), &d, 0);
    // B is shut out of everything but identification.
    conflict(&mut b, &TUR, &[], 0);
    conflict(&mut b, &RESERVE6, &[], 0);
    conflict(&mut b, &RESERVE10, &[], 0);
    conflict(&mut b, &read10(0, 8), &[], 4096);
    conflict(&mut b, &write10(0, 8, false), &d, 0);
    conflict(&mut b, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[], 8);
    b.good(DISK, &common::inquiry(None, 96), &[], 96);
    b.good(DISK, &[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0], &[], 64);
    // B's RELEASE is GOOD and changes nothing; PR commands conflict under SCSI-2.
    b.good(DISK, &RELEASE6, &[], 0);
    conflict(&mut b, &TUR, &[], 0);
    let (register, params) = common::pr_out(0, 0, 0, 0xb, 0);
    conflict(&mut b, &register, &params, 0);
    assert_eq!(a.good(DISK, &read10(0, 8), &[], 4096), d, "the owner reads");
    // A dies (silently); B challenges: a LOGICAL UNIT RESET breaks the reservation.
    lu_reset(&mut b);
    take_reset_attention(&mut b);
    b.good(DISK, &RESERVE6, &[], 0);
    b.good(DISK, &TUR, &[], 0);
    // A comes back: the reset's unit attention first, then it is the one shut out.
    take_reset_attention(&mut a);
    conflict(&mut a, &TUR, &[], 0);
    conflict(&mut a, &RESERVE6, &[], 0);
    // RESERVE(10) and RELEASE(10): the same reservation.
    b.good(DISK, &RESERVE10, &[], 0);
    b.good(DISK, &RELEASE10, &[], 0);
    a.good(DISK, &RESERVE10, &[], 0);
    conflict(&mut b, &TUR, &[], 0);
    a.good(DISK, &RELEASE6, &[], 0);
    b.good(DISK, &TUR, &[], 0);
    r.daemon.shutdown();
}

#[test]
fn a_lost_i_t_nexus_ends_its_scsi2_reservation() {
    let r = rig(11);
    let mut seen = Vec::new();
    let mut a = r.node(11, 12, 0xb211);
    let mut b = r.node(11, 13, 0xb212);
    let a_ch = login_channel(&r.daemon, &mut seen, &a);
    a.good(DISK, &RESERVE6, &[], 0);
    conflict(&mut b, &RESERVE6, &[], 0);
    // A's host vanishes; the idle probe finds it and the channel, its nexus's only one,
    // closes: the reservation ends with it.
    drop(a);
    let why = await_logout(&r.daemon, &mut seen, a_ch);
    assert!(why.contains("idle probe"), "{why}");
    b.good(DISK, &RESERVE6, &[], 0);
    b.good(DISK, &TUR, &[], 0);
    r.daemon.shutdown();
}

/// The channel `n` logged in on, from the daemon's events.
fn login_channel(d: &Daemon, seen: &mut Vec<DaemonEvent>, n: &Node) -> ChannelId {
    if let Some(ch) = login_of(seen, n.me) {
        return ch;
    }
    await_event(d, seen, |e| match e {
        DaemonEvent::Login {
            channel, initiator, ..
        } if *initiator == n.me => Some(*channel),
        _ => None,
    })
}

#[test]
fn scsi2_meets_persistent_reservations_with_crh() {
    let r = rig(21);
    let mut a = r.node(21, 22, 0xb221);
    let mut b = r.node(21, 23, 0xb222);
    // REPORT CAPABILITIES says so: CRH (byte 2 bit 4) and ATP_C set, SIP_C clear.
    let caps = a.good(DISK, &[0x5e, 2, 0, 0, 0, 0, 0, 0, 8, 0], &[], 8);
    assert_eq!(caps[2] & 0x1c, 0x14, "CRH, ATP_C, no SIP_C: {caps:02x?}");
    // B registers: from then on, RESERVE/RELEASE from anyone without a persistent hold
    // conflict (SPC-2 5.5.1).
    assert_eq!(pr_out(&mut b, 0, 0, 0, 0xbb), Status::Good);
    conflict(&mut a, &RESERVE6, &[], 0);
    conflict(&mut b, &RESERVE6, &[], 0);
    conflict(&mut a, &RELEASE10, &[], 0);
    // B reserves Write Exclusive – Registrants Only: B's RESERVE/RELEASE are GOOD and
    // change nothing; A (not registered) conflicts.
    assert_eq!(pr_out(&mut b, 1, 5, 0xbb, 0), Status::Good);
    b.good(DISK, &RESERVE6, &[], 0);
    b.good(DISK, &RELEASE6, &[], 0);
    conflict(&mut a, &RESERVE6, &[], 0);
    let read_resv = [0x5e, 1, 0, 0, 0, 0, 0, 0, 64, 0];
    let d = a.good(DISK, &read_resv, &[], 64);
    assert_eq!(
        (be32(&d[4..]), d[21] & 0x0f),
        (16, 5),
        "the PR is unchanged"
    );
    // A registers too: a registrant under a registrants-only type: GOOD, no change.
    assert_eq!(pr_out(&mut a, 0, 0, 0, 0xaa), Status::Good);
    a.good(DISK, &RESERVE6, &[], 0);
    assert_eq!(status(&mut a, &TUR), Status::Good);
    // Clear everything: SCSI-2 works again.
    assert_eq!(pr_out(&mut b, 3, 0, 0xbb, 0), Status::Good);
    take_preempt_attention(&mut a);
    a.good(DISK, &RESERVE6, &[], 0);
    conflict(&mut b, &TUR, &[], 0);
    a.good(DISK, &RELEASE6, &[], 0);
    r.daemon.shutdown();
}

#[test]
fn persistent_reserve_conflicts_for_the_scsi2_holder_too() {
    // SPC-2 5.5.1: while a RESERVE holds the LU, "all PERSISTENT RESERVE IN and all
    // PERSISTENT RESERVE OUT commands shall conflict regardless of initiator or service
    // action" — the holder's included (LIO: target_scsi3_emulate_pr_in/out answer
    // RESERVATION CONFLICT under DRF_SPC2_RESERVATIONS). A cluster node that moves from
    // SCSI-2 to persistent reservations releases first.
    let r = rig(41);
    let mut a = r.node(41, 42, 0xb241);
    let mut b = r.node(41, 43, 0xb242);
    let read_keys = [0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0];
    a.good(DISK, &RESERVE6, &[], 0);
    let (register, params) = common::pr_out(0, 0, 0, 0xa4, 0);
    for n in [&mut a, &mut b] {
        conflict(n, &register, &params, 0);
        conflict(n, &read_keys, &[], 64);
        conflict(n, &[0x5e, 2, 0, 0, 0, 0, 0, 0, 8, 0], &[], 8);
    }
    // Nothing was registered meanwhile; the holder's own I/O still works.
    a.good(DISK, &TUR, &[], 0);
    a.good(DISK, &RELEASE6, &[], 0);
    let keys = b.good(DISK, &read_keys, &[], 64);
    assert_eq!(
        be32(&keys[4..]),
        0,
        "no key registered under the SCSI-2 hold"
    );
    // Released: the REGISTER works, and the key is there.
    assert_eq!(pr_out(&mut a, 0, 0, 0, 0xa4), Status::Good);
    let keys = a.good(DISK, &read_keys, &[], 64);
    assert_eq!(
        (be32(&keys[4..]), &keys[8..16]),
        (8, &0xa4u64.to_be_bytes()[..])
    );
    // RESERVE(10) alike: now registrations exist, so CRH applies and A (registered, no
    // persistent hold) conflicts; it unregisters and RESERVE(10) holds again, then PR
    // commands conflict once more.
    conflict(&mut a, &RESERVE10, &[], 0);
    assert_eq!(pr_out(&mut a, 0, 0, 0xa4, 0), Status::Good);
    a.good(DISK, &RESERVE10, &[], 0);
    conflict(&mut a, &read_keys, &[], 64);
    a.good(DISK, &RELEASE10, &[], 0);
    a.good(DISK, &read_keys, &[], 64);
    r.daemon.shutdown();
}

#[test]
fn a_node_stopping_the_disk_leaves_it_ready_for_its_peer() {
    // A node shutting down sends START STOP UNIT with START=0 (Windows classpnp, Linux sd's
    // manage_start_stop): on the shared disk it flushes and answers GOOD; the other node
    // keeps its I/O (LIO refuses START=0 for the same reason).
    let r = rig(51);
    let mut a = r.node(51, 52, 0xb251);
    let mut b = r.node(51, 53, 0xb252);
    let d = pattern(4096, 0x51);
    a.good(DISK, &write10(0, 8, false), &d, 0);
    a.good(DISK, &[0x1b, 0, 0, 0, 0x00, 0], &[], 0);
    b.good(DISK, &TUR, &[], 0);
    assert_eq!(b.good(DISK, &read10(0, 8), &[], 4096), d);
    b.good(DISK, &write10(8, 8, true), &d, 0);
    a.good(DISK, &TUR, &[], 0);
    r.daemon.shutdown();
}

#[test]
fn reserve10_and_release10_refuse_third_party_and_parameter_lists() {
    // SPC-2 RESERVE(10)/RELEASE(10): 3RDPTY (byte 1 bit 4), LONGID (byte 1 bit 1), a
    // THIRD-PARTY DEVICE ID (byte 3) and a PARAMETER LIST LENGTH (bytes 7-8) are not
    // supported (third-party reservations are obsolete): INVALID FIELD IN CDB at the field,
    // and nothing is reserved.
    let r = rig(61);
    let mut a = r.node(61, 62, 0xb261);
    let mut b = r.node(61, 63, 0xb262);
    let with = |op: u8, at: usize, v: u8| {
        let mut c = [op, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        c[at] = v;
        c
    };
    for op in [0x56, 0x57] {
        for (at, v, pointer) in [
            (1, 0x10, (1, Some(4))),
            (1, 0x02, (1, Some(1))),
            (3, 0x05, (3, Some(2))),
            (8, 0x18, (8, Some(4))),
            (7, 0x01, (7, Some(0))),
        ] {
            let s = a.check(
                DISK,
                &with(op, at, v),
                &[],
                0,
                SenseCode::INVALID_FIELD_IN_CDB,
            );
            let (byte, bit, in_cdb) = field_pointer(&s).expect("field pointer");
            assert!(in_cdb);
            assert_eq!((byte, bit), pointer, "{op:#x} byte {at} = {v:#x}");
        }
    }
    b.good(DISK, &TUR, &[], 0);
    b.good(DISK, &RESERVE10, &[], 0);
    b.good(DISK, &RELEASE10, &[], 0);
    r.daemon.shutdown();
}

#[test]
fn sbc4_commands_meet_another_nexus_persistent_reservation() {
    // SBC-4's table of commands in the presence of persistent reservations (our
    // exec/pr/conflict.rs): PRE-FETCH, GET LBA STATUS and VERIFY read the medium —
    // allowed under Write Exclusive, RESERVATION CONFLICT under Exclusive Access; WRITE
    // ATOMIC writes it — RESERVATION CONFLICT under both. The holder is served.
    let r = rig(71);
    let mut a = r.node(71, 72, 0xb271);
    let mut b = r.node(71, 73, 0xb272);
    let d = pattern(4096, 0x71);
    a.good(DISK, &write10(0, 8, false), &d, 0);
    let prefetch = [0x34, 0, 0, 0, 0, 0, 0, 0, 8, 0];
    let mut lba_status = cdb16(0x9e, 0x12, 0, 0);
    lba_status[13] = 64;
    let verify0 = [0x2f, 0, 0, 0, 0, 0, 0, 0, 8, 0];
    let verify1 = [0x2f, 0x02, 0, 0, 0, 0, 0, 0, 8, 0];
    // One block: the file LU's atomic limit is its physical block (512 bytes here).
    let mut atomic = cdb16(0x9c, 0, 0, 0);
    atomic[13] = 1;
    assert_eq!(pr_out(&mut b, 0, 0, 0, 0xb7), Status::Good);
    // Exclusive Access (type 3) held by B.
    assert_eq!(pr_out(&mut b, 1, 3, 0xb7, 0), Status::Good);
    conflict(&mut a, &prefetch, &[], 0);
    conflict(&mut a, &lba_status, &[], 64);
    conflict(&mut a, &verify0, &[], 0);
    conflict(&mut a, &verify1, &d, 0);
    conflict(&mut a, &atomic, &d[..512], 0);
    b.good(DISK, &prefetch, &[], 0);
    b.good(DISK, &lba_status, &[], 64);
    b.good(DISK, &verify1, &d, 0);
    b.good(DISK, &atomic, &d[..512], 0);
    // Write Exclusive (type 1): the reads are allowed, WRITE ATOMIC still conflicts.
    assert_eq!(pr_out(&mut b, 2, 3, 0xb7, 0), Status::Good);
    assert_eq!(pr_out(&mut b, 1, 1, 0xb7, 0), Status::Good);
    a.good(DISK, &prefetch, &[], 0);
    a.good(DISK, &lba_status, &[], 64);
    a.good(DISK, &verify0, &[], 0);
    a.good(DISK, &verify1, &d, 0);
    conflict(&mut a, &atomic, &d[..512], 0);
    r.daemon.shutdown();
}

/// The unit attention CLEAR leaves for the other registrants.
fn take_preempt_attention(n: &mut Node) {
    n.check(DISK, &TUR, &[], 0, SenseCode::RESERVATIONS_PREEMPTED);
}

#[test]
fn windows_2008_persistent_reservation_arbitration() {
    let r = rig(31);
    let mut a = r.node(31, 32, 0xb231);
    let mut b = r.node(31, 33, 0xb232);
    let read_keys = [0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0];
    let read_resv = [0x5e, 1, 0, 0, 0, 0, 0, 0, 64, 0];
    // Both nodes register (REGISTER AND IGNORE EXISTING KEY, as the cluster service does);
    // A reserves Write Exclusive – Registrants Only.
    assert_eq!(pr_out(&mut a, 6, 0, 0, 0xa1), Status::Good);
    assert_eq!(pr_out(&mut b, 6, 0, 0, 0xb1), Status::Good);
    assert_eq!(pr_out(&mut a, 1, 5, 0xa1, 0), Status::Good);
    let d = pattern(4096, 0x42);
    a.good(DISK, &write10(8, 8, true), &d, 0);
    b.good(DISK, &write10(16, 8, true), &d, 0);
    // A LOGICAL UNIT RESET leaves registrations and the reservation (SPC-4 5.13.1).
    lu_reset(&mut b);
    take_reset_attention(&mut b);
    take_reset_attention(&mut a);
    let res = a.good(DISK, &read_resv, &[], 64);
    assert_eq!(
        (&res[8..16], res[21] & 0x0f),
        (&0xa1u64.to_be_bytes()[..], 5)
    );
    // B challenges: it preempts A's key and holds the disk.
    assert_eq!(pr_out(&mut b, 4, 5, 0xb1, 0xa1), Status::Good);
    a.check(DISK, &TUR, &[], 0, SenseCode::REGISTRATIONS_PREEMPTED);
    conflict(&mut a, &write10(8, 8, false), &d, 0);
    assert_eq!(
        a.good(DISK, &read10(8, 8), &[], 4096),
        d,
        "reads are allowed (WE-RO)"
    );
    let keys = b.good(DISK, &read_keys, &[], 64);
    assert_eq!(
        (be32(&keys[4..]), &keys[8..16]),
        (8, &0xb1u64.to_be_bytes()[..])
    );
    // A re-registers and reads the holder; then B's nexus is lost: the persistent state
    // stays (that is what it is for).
    assert_eq!(pr_out(&mut a, 6, 0, 0, 0xa2), Status::Good);
    let mut seen = Vec::new();
    let b_ch = login_channel(&r.daemon, &mut seen, &b);
    drop(b);
    await_logout(&r.daemon, &mut seen, b_ch);
    let res = a.good(DISK, &read_resv, &[], 64);
    assert_eq!(
        (&res[8..16], res[21] & 0x0f),
        (&0xb1u64.to_be_bytes()[..], 5)
    );
    assert_eq!(be32(&a.good(DISK, &read_keys, &[], 64)[4..]), 16);
    // A (a registrant under WE-RO) writes.
    a.good(DISK, &write10(8, 8, false), &d, 0);
    r.daemon.shutdown();
}
