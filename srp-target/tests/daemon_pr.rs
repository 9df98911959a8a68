//! Issue #5 acceptance over the wire: two initiators, each logged in to a different IOC of
//! the running daemon, share one LUN. Its identity (VPD 83h NAA) is the same through both
//! IOCs, and persistent reservations conflict per SPC-4: a Write Exclusive holder writes,
//! the other initiator's writes get RESERVATION CONFLICT while its reads succeed, and a
//! PREEMPT moves the reservation and removes the loser's registration. Loopback
//! 127.0.105.x only.

mod common;
mod host;

use common::pr::{PREEMPT, REGISTER, RESERVE, WRITE_EXCLUSIVE};
use common::{TempDir, read10, write10};
use host::shared_lun::{Channel, start};
use scsi::Status;
use std::net::{IpAddr, Ipv4Addr};

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 105, 1));
const HOST_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 105, 2));
const HOST_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 105, 3));
/// The target's node GUID (its IOCs' are the next two).
const TARGET_GUID: u64 = 0x0002_c903_00c0_c000;
const GUID_A: u64 = 0x0002_c903_00aa_0001;
const GUID_B: u64 = 0x0002_c903_00bb_0001;

impl Channel {
    fn write(&mut self) -> Status {
        self.run(&write10(16, 1, false), &[0x5a; 512], 0).0
    }

    fn read(&mut self) -> Status {
        self.run(&read10(16, 1), &[], 512).0
    }

    /// The NAA designator of VPD page 83h (the LUN's own first designator).
    fn naa(&mut self) -> Vec<u8> {
        let (st, page) = self.run(&[0x12, 1, 0x83, 0, 255, 0], &[], 255);
        assert_eq!(st, Status::Good);
        assert_eq!(page[4 + 1] & 0x0f, 3, "designator type NAA");
        page[8..24].to_vec()
    }
}

#[test]
fn two_initiators_two_iocs_one_lun_identity_and_reservations() {
    let dir = TempDir::new("daemon-pr");
    let (daemon, config) = start(&dir, TARGET, TARGET_GUID);
    let mut a = Channel::log_in(HOST_A, TARGET, GUID_A, &config.iocs[0], 0);
    let mut b = Channel::log_in(HOST_B, TARGET, GUID_B, &config.iocs[1], 3);

    // One LUN, one identity, whichever IOC and LUN number it is reached through.
    let naa = a.naa();
    assert_eq!(naa[0] >> 4, 6, "NAA 6");
    assert_eq!(naa, b.naa());

    // A registers and takes Write Exclusive; B registers too.
    assert_eq!(a.pr(REGISTER, 0, 0, 0xaaaa), Status::Good);
    assert_eq!(b.pr(REGISTER, 0, 0, 0xbbbb), Status::Good);
    assert_eq!(a.pr(RESERVE, WRITE_EXCLUSIVE, 0xaaaa, 0), Status::Good);
    assert_eq!(a.write(), Status::Good, "the holder writes");
    assert_eq!(
        b.write(),
        Status::ReservationConflict,
        "others may not write"
    );
    assert_eq!(b.read(), Status::Good, "Write Exclusive lets others read");
    // RESERVE with a key that is not B's own registration conflicts.
    assert_eq!(
        b.pr(RESERVE, WRITE_EXCLUSIVE, 0xaaaa, 0),
        Status::ReservationConflict
    );

    // B preempts A: B holds the reservation, A's registration is gone.
    assert_eq!(b.pr(PREEMPT, WRITE_EXCLUSIVE, 0xbbbb, 0xaaaa), Status::Good);
    assert_eq!(b.write(), Status::Good, "the new holder writes");
    // A's next command reports the unit attention REGISTRATIONS PREEMPTED (6/2A/05, checked
    // in daemon_preempt) and clears it.
    assert_eq!(a.write(), Status::CheckCondition);
    assert_eq!(a.write(), Status::ReservationConflict);
    assert_eq!(
        a.pr(RESERVE, WRITE_EXCLUSIVE, 0xaaaa, 0),
        Status::ReservationConflict,
        "A's key was removed"
    );

    // READ KEYS (PERSISTENT RESERVE IN, service action 0) through A's IOC lists B's key only.
    let (st, keys) = a.run(&[0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0], &[], 64);
    assert_eq!(st, Status::Good);
    let len = u32::from_be_bytes([keys[4], keys[5], keys[6], keys[7]]);
    assert_eq!(len, 8, "one registration left");
    assert_eq!(&keys[8..16], &0xbbbbu64.to_be_bytes());

    drop(daemon.shutdown());
}
