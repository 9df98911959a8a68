//! PERSISTENT RESERVE IN/OUT through `LogicalUnit::execute`: two initiators by two target
//! ports on one LU. The conflict matrix per type, the Windows failover cluster sequence,
//! PR IN bytes, PRGENERATION, bad input, ALL_TG_PT, PREEMPT AND ABORT, racing RESERVEs.

mod common;

use common::pr::{CLEAR, PREEMPT, PREEMPT_AND_ABORT, REGISTER, REGISTER_IGNORE, RELEASE, RESERVE};
use common::*;
use scsi::{SenseCode, Status};
use srp::wire::PortId;
use srp_target::lu::RelativePortId;
use srp_target::{BlockSize, CmdOutput, ItNexus, LogicalUnit};
use std::sync::Barrier;

const B: PortId = PortId([0xb0; 16]);
const C: PortId = PortId([0xc0; 16]);

const READ_KEYS: u8 = 0x00;
const READ_RESERVATION: u8 = 0x01;
const REPORT_CAPABILITIES: u8 = 0x02;
const READ_FULL_STATUS: u8 = 0x03;

const ALL_TG_PT: u8 = 0x04;

/// An initiator on a target port (IOC 0 = relative port 1, IOC 1 = port 2).
struct Node(NexusData);

impl Node {
    fn new(initiator: PortId, ioc: u16) -> Node {
        Node(common::nexus_data_of(initiator, ioc))
    }

    fn it(&self) -> ItNexus {
        self.0.nexus().it_nexus()
    }

    fn run(&self, lu: &LogicalUnit, cdb: &[u8], dout: &[u8]) -> (CmdOutput, Vec<u8>) {
        let mut din = Vec::new();
        let out = lu
            .execute(&self.0.nexus(), cdb, dout, &mut din)
            .expect("no transport error");
        assert_eq!(out.data_in_len, din.len());
        (out, din)
    }

    fn status(&self, lu: &LogicalUnit, cdb: &[u8], dout: &[u8]) -> Status {
        let (out, din) = self.run(lu, cdb, dout);
        if out.status == Status::ReservationConflict {
            // SAM-5: RESERVATION CONFLICT carries no sense and no data.
            assert_eq!(out.sense, None);
            assert!(din.is_empty());
        }
        out.status
    }

    fn good(&self, lu: &LogicalUnit, cdb: &[u8], dout: &[u8]) -> Vec<u8> {
        let (out, din) = self.run(lu, cdb, dout);
        assert_eq!(out.status, Status::Good, "sense {:?}", out.sense);
        din
    }

    fn conflict(&self, lu: &LogicalUnit, cdb: &[u8], dout: &[u8]) {
        assert_eq!(self.status(lu, cdb, dout), Status::ReservationConflict);
    }

    fn check(&self, lu: &LogicalUnit, cdb: &[u8], dout: &[u8], code: SenseCode) -> scsi::Sense {
        let (out, _) = self.run(lu, cdb, dout);
        assert_eq!(out.status, Status::CheckCondition);
        let s = out.sense.expect("sense");
        assert_eq!(s.code(), code, "{s:?}");
        s
    }

    /// PERSISTENT RESERVE OUT `sa` with TYPE `ty`, GOOD expected.
    fn out(&self, lu: &LogicalUnit, sa: u8, ty: u8, key: u64, sa_key: u64, flags: u8) {
        let (cdb, list) = pr_out(sa, ty, key, sa_key, flags);
        self.good(lu, &cdb, &list);
    }

    /// PERSISTENT RESERVE OUT, RESERVATION CONFLICT expected.
    fn out_conflict(&self, lu: &LogicalUnit, sa: u8, ty: u8, key: u64, sa_key: u64) {
        let (cdb, list) = pr_out(sa, ty, key, sa_key, 0);
        self.conflict(lu, &cdb, &list);
    }

    fn pr_in(&self, lu: &LogicalUnit, sa: u8) -> Vec<u8> {
        self.good(lu, &pr_in(sa, 4096), &[])
    }

    /// The next command (TEST UNIT READY) reports unit attention `code`, which clears it.
    fn attention(&self, lu: &LogicalUnit, code: SenseCode) {
        self.check(lu, &[0; 6], &[], code);
    }

    fn may_read(&self, lu: &LogicalUnit) -> bool {
        self.status(lu, &read10(0, 1), &[]) == Status::Good
    }

    fn may_write(&self, lu: &LogicalUnit) -> bool {
        self.status(lu, &write10(0, 1, false), &[0x5a; 512]) == Status::Good
    }
}

fn pr_in(sa: u8, alloc: u16) -> [u8; 10] {
    let a = alloc.to_be_bytes();
    [0x5e, sa, 0, 0, 0, 0, 0, a[0], a[1], 0]
}

fn generation(lu: &LogicalUnit, n: &Node) -> u32 {
    be32(&n.pr_in(lu, READ_KEYS))
}

fn keys(lu: &LogicalUnit, n: &Node) -> Vec<u64> {
    let d = n.pr_in(lu, READ_KEYS);
    assert_eq!(be32(&d[4..]) as usize, d.len() - 8);
    d[8..]
        .chunks(8)
        .map(|c| u64::from_be_bytes(c.try_into().expect("8")))
        .collect()
}

/// (key, type) of READ RESERVATION, or None.
fn reservation(lu: &LogicalUnit, n: &Node) -> Option<(u64, u8)> {
    let d = n.pr_in(lu, READ_RESERVATION);
    match be32(&d[4..]) {
        0 => None,
        16 => Some((u64::from_be_bytes(d[8..16].try_into().expect("8")), d[21])),
        l => panic!("additional length {l}"),
    }
}

fn lu() -> LogicalUnit {
    ram_lu(64, BlockSize::B512)
}

const KA: u64 = 0xaaaa_0000_0000_0001;
const KB: u64 = 0xbbbb_0000_0000_0002;

/// May (read, write).
type May = (bool, bool);

#[test]
fn conflict_matrix_per_type() {
    // For each type: may (read, write) for the holder, a registered non-holder and an
    // unregistered I_T nexus (another initiator; and the non-holder's initiator through the
    // other port, which is a different, unregistered, I_T nexus).
    #[rustfmt::skip]
    let table: [(u8, May, May, May); 6] = [
        // type  holder        registered      unregistered
        (1, (true, true), (true, false),  (true, false)),  // Write Exclusive
        (3, (true, true), (false, false), (false, false)), // Exclusive Access
        (5, (true, true), (true, true),   (true, false)),  // WE - Registrants Only
        (6, (true, true), (true, true),   (false, false)), // EA - Registrants Only
        (7, (true, true), (true, true),   (true, false)),  // WE - All Registrants
        (8, (true, true), (true, true),   (false, false)), // EA - All Registrants
    ];
    for (ty, holder, member, stranger) in table {
        let lu = lu();
        let a = Node::new(INITIATOR_A, 0);
        let b = Node::new(B, 0);
        let b_other_port = Node::new(B, 1);
        let c = Node::new(C, 1);
        a.out(&lu, REGISTER, 0, 0, KA, 0);
        b.out(&lu, REGISTER, 0, 0, KB, 0);
        // No reservation: everyone may do anything.
        assert!(c.may_read(&lu) && c.may_write(&lu), "type {ty}");
        a.out(&lu, RESERVE, ty, KA, 0, 0);
        assert_eq!((a.may_read(&lu), a.may_write(&lu)), holder, "type {ty}");
        assert_eq!((b.may_read(&lu), b.may_write(&lu)), member, "type {ty}");
        for n in [&c, &b_other_port] {
            assert_eq!((n.may_read(&lu), n.may_write(&lu)), stranger, "type {ty}");
            // Always allowed (SPC-4 Table 53, SBC-3 Table 13).
            n.good(&lu, &[0x12, 0, 0, 0, 36, 0], &[]);
            n.good(&lu, &[0x00, 0, 0, 0, 0, 0], &[]);
            n.good(&lu, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
            n.good(&lu, &[0x03, 0, 0, 0, 18, 0], &[]);
            n.good(&lu, &[0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
            n.good(&lu, &[0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
            n.good(&lu, &pr_in(READ_KEYS, 64), &[]);
            // Writes of every kind, and MODE SENSE/SELECT, conflict.
            n.conflict(&lu, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
            n.conflict(&lu, &[0x1a, 0, 0x08, 0, 255, 0], &[]);
            n.conflict(&lu, &[0x1b, 0, 0, 0, 0x00, 0], &[]);
            let mut unmap = [0u8; 10];
            unmap[0] = 0x42;
            n.conflict(&lu, &unmap, &[]);
        }
        // READ RESERVATION: the holder's key, or 0 under all-registrants types.
        let key = if ty >= 7 { 0 } else { KA };
        assert_eq!(reservation(&lu, &c), Some((key, ty)));
    }
}

#[test]
fn windows_failover_cluster_sequence() {
    let lu = lu();
    let a = Node::new(INITIATOR_A, 0);
    let b = Node::new(B, 1);
    // Node A joins and arbitrates: REGISTER AND IGNORE EXISTING KEY, RESERVE type 5.
    a.out(&lu, REGISTER_IGNORE, 0, 0, KA, 0);
    a.out(&lu, RESERVE, 5, KA, 0, 0);
    assert_eq!(reservation(&lu, &b), Some((KA, 5)));
    // Node B, not registered: writes conflict, reads pass.
    assert!(b.may_read(&lu));
    assert!(!b.may_write(&lu));
    // Node B registers: a registrant may write under Registrants Only.
    b.out(&lu, REGISTER, 0, 0, KB, 0);
    assert_eq!(keys(&lu, &a), vec![KA, KB]);
    // B cannot take the reservation while A holds it...
    b.out_conflict(&lu, RESERVE, 5, KB, 0);
    // ...so it preempts A, which hears of it on its next command.
    b.out(&lu, PREEMPT, 5, KB, KA, 0);
    a.attention(&lu, SenseCode::REGISTRATIONS_PREEMPTED);
    assert_eq!(keys(&lu, &a), vec![KB]);
    assert_eq!(reservation(&lu, &a), Some((KB, 5)));
    // A lost its registration: writes conflict, reads pass, its old key is refused.
    assert!(!a.may_write(&lu));
    assert!(a.may_read(&lu));
    a.out_conflict(&lu, RESERVE, 5, KA, 0);
    a.out_conflict(&lu, REGISTER, 0, KA, KA);
    a.out_conflict(&lu, RELEASE, 5, KA, 0);
    // A rejoins with REGISTER AND IGNORE EXISTING KEY and may write again (type 5).
    a.out(&lu, REGISTER_IGNORE, 0, 0, KA, 0);
    assert!(a.may_write(&lu));
    // A registrant that is not the holder: RELEASE is GOOD and changes nothing.
    a.out(&lu, RELEASE, 5, KA, 0, 0);
    assert_eq!(reservation(&lu, &a), Some((KB, 5)));
    // B releases; nobody holds it, and the other registrant is told (type 5).
    b.out(&lu, RELEASE, 5, KB, 0, 0);
    a.attention(&lu, SenseCode::RESERVATIONS_RELEASED);
    assert_eq!(reservation(&lu, &a), None);
    assert!(Node::new(C, 0).may_write(&lu));
    // B reserves again, then clears everything.
    b.out(&lu, RESERVE, 5, KB, 0, 0);
    b.out(&lu, CLEAR, 0, KB, 0, 0);
    a.attention(&lu, SenseCode::RESERVATIONS_PREEMPTED);
    assert_eq!(keys(&lu, &a), Vec::<u64>::new());
    assert_eq!(reservation(&lu, &a), None);
    assert!(Node::new(C, 0).may_write(&lu));
    // Cluster service stop: unregistered nodes' PR OUT other than REGISTER conflict.
    b.out_conflict(&lu, CLEAR, 0, KB, 0);
}

#[test]
fn pr_in_bytes() {
    let lu = lu();
    let a = Node::new(INITIATOR_A, 0);
    let b = Node::new(B, 1);
    let (ka, kb) = (0x0102_0304_0506_0708u64, 0x1112_1314_1516_1718u64);
    a.out(&lu, REGISTER, 0, 0, ka, 0);
    b.out(&lu, REGISTER, 0, 0, kb, 0);
    a.out(&lu, RESERVE, 1, ka, 0, 0);

    let d = a.pr_in(&lu, READ_KEYS);
    let mut want = vec![0, 0, 0, 2, 0, 0, 0, 16]; // PRGENERATION 2, ADDITIONAL LENGTH 16
    want.extend(ka.to_be_bytes());
    want.extend(kb.to_be_bytes());
    assert_eq!(d, want);
    // Cut to the ALLOCATION LENGTH; the length field still counts the whole list.
    assert_eq!(a.good(&lu, &pr_in(READ_KEYS, 10), &[]), want[..10].to_vec());

    let d = a.pr_in(&lu, READ_RESERVATION);
    let mut want = vec![0, 0, 0, 2, 0, 0, 0, 16];
    want.extend(ka.to_be_bytes());
    want.extend([0, 0, 0, 0, 0, 0x01, 0, 0]); // obsolete, reserved, LU_SCOPE|WE, obsolete
    assert_eq!(d, want);

    // CRH, ATP_C; TMV, ALLOW COMMANDS 001b; type mask WR_EX_AR EX_AC_RO WR_EX_RO EX_AC WR_EX, EX_AC_AR.
    let d = a.pr_in(&lu, REPORT_CAPABILITIES);
    assert_eq!(d, vec![0, 8, 0x14, 0x90, 0xea, 0x01, 0, 0]);

    let d = a.pr_in(&lu, READ_FULL_STATUS);
    let mut want = vec![0, 0, 0, 2, 0, 0, 0, 96];
    for (key, flags, ty, port, id) in [(ka, 0x01, 0x01, 1u8, INITIATOR_A), (kb, 0, 0, 2, B)] {
        want.extend(key.to_be_bytes());
        want.extend([0; 4]);
        want.extend([flags, ty]); // ALL_TG_PT | R_HOLDER, SCOPE | TYPE
        want.extend([0; 4]);
        want.extend([0, port]); // RELATIVE TARGET PORT IDENTIFIER
        want.extend([0, 0, 0, 24]); // ADDITIONAL DESCRIPTOR LENGTH
        want.extend([0x04, 0, 0, 0, 0, 0, 0, 0]); // FORMAT 00b, PROTOCOL ID 4h (SRP)
        want.extend(id.0);
    }
    assert_eq!(d, want);

    // No reservation: READ RESERVATION has no descriptor.
    a.out(&lu, RELEASE, 1, ka, 0, 0);
    assert_eq!(a.pr_in(&lu, READ_RESERVATION), vec![0, 0, 0, 2, 0, 0, 0, 0]);
}

#[test]
fn generation_counter() {
    let lu = lu();
    let a = Node::new(INITIATOR_A, 0);
    let b = Node::new(B, 1);
    assert_eq!(generation(&lu, &a), 0);
    a.out(&lu, REGISTER, 0, 0, KA, 0);
    assert_eq!(generation(&lu, &a), 1);
    // RESERVE and RELEASE do not move it.
    a.out(&lu, RESERVE, 3, KA, 0, 0);
    a.out(&lu, RELEASE, 3, KA, 0, 0);
    assert_eq!(generation(&lu, &a), 1);
    // Key change.
    a.out(&lu, REGISTER, 0, KA, KA + 1, 0);
    assert_eq!(generation(&lu, &a), 2);
    // Refused commands do not move it.
    a.out_conflict(&lu, REGISTER, 0, KA, KA);
    b.out_conflict(&lu, RESERVE, 1, KB, 0);
    let (cdb, mut list) = pr_out(REGISTER, 0, KA + 1, KA, 0);
    list[20] = 0x01; // APTPL
    a.check(&lu, &cdb, &list, SenseCode::INVALID_FIELD_IN_PARAMETER_LIST);
    assert_eq!(generation(&lu, &a), 2);
    b.out(&lu, REGISTER_IGNORE, 0, 0, KB, 0);
    b.out(&lu, PREEMPT, 1, KB, KA + 1, 0);
    a.attention(&lu, SenseCode::REGISTRATIONS_PREEMPTED);
    assert_eq!(generation(&lu, &a), 4);
    b.out(&lu, CLEAR, 0, KB, 0, 0);
    assert_eq!(generation(&lu, &a), 5);
    // Unregister.
    a.out(&lu, REGISTER, 0, 0, KA, 0);
    a.out(&lu, REGISTER, 0, KA, 0, 0);
    assert_eq!(generation(&lu, &a), 7);
    assert_eq!(keys(&lu, &a), Vec::<u64>::new());
}

#[test]
fn bad_inputs() {
    let lu = lu();
    let a = Node::new(INITIATOR_A, 0);
    let b = Node::new(B, 1);
    a.out(&lu, REGISTER, 0, 0, KA, 0);
    b.out(&lu, REGISTER, 0, 0, KB, 0);
    // Wrong key: RESERVATION CONFLICT for REGISTER and every other service action.
    for sa in [REGISTER, RESERVE, RELEASE, CLEAR, PREEMPT] {
        a.out_conflict(&lu, sa, 1, KA ^ 1, KB);
    }
    // A through port 2 is another I_T nexus, and an unregistered one.
    let a2 = Node::new(INITIATOR_A, 1);
    a2.out_conflict(&lu, RESERVE, 1, KA, 0);
    a2.out_conflict(&lu, REGISTER, 0, KA, KA);
    // Bad TYPE and SCOPE: INVALID FIELD IN CDB at byte 2.
    for ty in [0u8, 2, 4, 9, 0x0f] {
        let (cdb, list) = pr_out(RESERVE, ty, KA, 0, 0);
        let s = a.check(&lu, &cdb, &list, SenseCode::INVALID_FIELD_IN_CDB);
        assert_eq!(field_pointer(&s), Some((2, Some(3), true)), "type {ty}");
    }
    let (cdb, list) = pr_out(PREEMPT, 0x11, KA, KB, 0);
    let s = a.check(&lu, &cdb, &list, SenseCode::INVALID_FIELD_IN_CDB);
    assert_eq!(field_pointer(&s), Some((2, Some(7), true)));
    // PARAMETER LIST LENGTH other than 24.
    for len in [0u8, 8, 23, 25, 32] {
        let (mut cdb, list) = pr_out(REGISTER, 0, KA, KA + 1, 0);
        cdb[8] = len;
        let dout = [list.as_slice(), &[0; 8]].concat();
        let s = a.check(&lu, &cdb, &dout, SenseCode::PARAMETER_LIST_LENGTH_ERROR);
        assert_eq!(
            (s.code().key.into(), s.code().asc, s.code().ascq),
            (5u8, 0x1a, 0x00)
        );
    }
    // SPEC_I_PT, APTPL: INVALID FIELD IN PARAMETER LIST at byte 20.
    for (flag, bit) in [(0x08u8, 3u8), (0x01, 0)] {
        let (cdb, list) = pr_out(REGISTER, 0, KA, KA + 1, flag);
        let s = a.check(&lu, &cdb, &list, SenseCode::INVALID_FIELD_IN_PARAMETER_LIST);
        assert_eq!(field_pointer(&s), Some((20, Some(bit), false)));
    }
    // APTPL is ignored outside the REGISTERs.
    let (cdb, list) = pr_out(RESERVE, 1, KA, 0, 0x01);
    a.good(&lu, &cdb, &list);
    // The holder asking for another type: conflict; RELEASE with another type: 5/26/04.
    a.out_conflict(&lu, RESERVE, 3, KA, 0);
    let (cdb, list) = pr_out(RELEASE, 3, KA, 0, 0);
    a.check(
        &lu,
        &cdb,
        &list,
        SenseCode::INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
    );
    // PREEMPT with SERVICE ACTION RESERVATION KEY 0 (not all-registrants): byte 8.
    let (cdb, list) = pr_out(PREEMPT, 1, KB, 0, 0);
    let s = b.check(&lu, &cdb, &list, SenseCode::INVALID_FIELD_IN_PARAMETER_LIST);
    assert_eq!(field_pointer(&s), Some((8, None, false)));
    // PREEMPT of a key nobody holds: conflict.
    b.out_conflict(&lu, PREEMPT, 1, KB, 0x1234);
    // REGISTER AND MOVE is not supported.
    let (mut cdb, list) = pr_out(0x07, 1, KA, KB, 0);
    cdb[1] = 0x07;
    let s = a.check(&lu, &cdb, &list, SenseCode::INVALID_FIELD_IN_CDB);
    assert_eq!(field_pointer(&s), Some((1, Some(4), true)));
    // The state survived every refusal.
    assert_eq!(keys(&lu, &a), vec![KA, KB]);
    assert_eq!(reservation(&lu, &a), Some((KA, 1)));
    assert_eq!(generation(&lu, &a), 2);
    // A short data-out is the transport's underrun.
    let (cdb, list) = pr_out(REGISTER, 0, KA, KA, 0);
    let mut din = Vec::new();
    let e = lu.execute(&a.0.nexus(), &cdb, &list[..10], &mut din);
    assert!(e.is_err());
}

#[test]
fn all_tg_pt_registers_every_port() {
    let lu = lu();
    let a0 = Node::new(INITIATOR_A, 0);
    let a1 = Node::new(INITIATOR_A, 1);
    a0.out(&lu, REGISTER, 0, 0, KA, ALL_TG_PT);
    assert_eq!(keys(&lu, &a0), vec![KA, KA]);
    // Registered through port 2 as well: it may reserve there.
    a1.out(&lu, RESERVE, 3, KA, 0, 0);
    assert!(a1.may_write(&lu));
    assert!(
        !a0.may_read(&lu),
        "EA: the other port's nexus is not the holder"
    );
    let d = a0.pr_in(&lu, READ_FULL_STATUS);
    assert_eq!(be32(&d[4..]), 96);
    // Descriptor 1: port 1, ALL_TG_PT; descriptor 2: port 2, ALL_TG_PT and R_HOLDER.
    assert_eq!((d[8 + 12], d[8 + 13], d[8 + 19]), (0x02, 0, 1));
    assert_eq!((d[56 + 12], d[56 + 13], d[56 + 19]), (0x03, 3, 2));
    // A key change and unregistration go for every port.
    a1.out(&lu, REGISTER, 0, KA, KB, 0);
    assert_eq!(keys(&lu, &a0), vec![KB, KB]);
    a0.out(&lu, REGISTER, 0, KB, 0, 0);
    assert_eq!(keys(&lu, &a0), Vec::<u64>::new());
    assert_eq!(reservation(&lu, &a0), None, "the holder left");
    // Without ALL_TG_PT only the receiving port's I_T nexus is registered.
    a0.out(&lu, REGISTER, 0, 0, KA, 0);
    a1.out_conflict(&lu, RESERVE, 1, KA, 0);
    let d = a0.pr_in(&lu, READ_FULL_STATUS);
    assert_eq!((be32(&d[4..]), d[8 + 12]), (48, 0));
}

#[test]
fn holder_leaving_releases_except_under_all_registrants() {
    let lu = lu();
    let a = Node::new(INITIATOR_A, 0);
    let b = Node::new(B, 1);
    a.out(&lu, REGISTER, 0, 0, KA, 0);
    b.out(&lu, REGISTER, 0, 0, KB, 0);
    a.out(&lu, RESERVE, 5, KA, 0, 0);
    a.out(&lu, REGISTER, 0, KA, 0, 0);
    // SPC-4: the holder of a registrants-only reservation left; the others are told.
    b.attention(&lu, SenseCode::RESERVATIONS_RELEASED);
    assert_eq!(reservation(&lu, &b), None);
    b.out(&lu, RESERVE, 8, KB, 0, 0);
    a.out(&lu, REGISTER, 0, 0, KA, 0);
    // Every registrant holds an all-registrants reservation.
    a.out(&lu, RESERVE, 8, KA, 0, 0);
    b.out(&lu, REGISTER, 0, KB, 0, 0);
    assert_eq!(reservation(&lu, &a), Some((0, 8)));
    a.out(&lu, RELEASE, 8, KA, 0, 0);
    assert_eq!(reservation(&lu, &a), None);
    // PREEMPT with key 0 under all-registrants: everyone else goes, the sender holds.
    b.out(&lu, REGISTER, 0, 0, KB, 0);
    a.out(&lu, RESERVE, 7, KA, 0, 0);
    b.out(&lu, PREEMPT, 5, KB, 0, 0);
    a.attention(&lu, SenseCode::REGISTRATIONS_PREEMPTED);
    assert_eq!(keys(&lu, &a), vec![KB]);
    assert_eq!(reservation(&lu, &a), Some((KB, 5)));
}

#[test]
fn preempt_and_abort_names_the_preempted_nexuses() {
    let lu = lu();
    let a = Node::new(INITIATOR_A, 0);
    let b = Node::new(B, 1);
    a.out(&lu, REGISTER, 0, 0, KA, 0);
    b.out(&lu, REGISTER, 0, 0, KB, 0);
    a.out(&lu, RESERVE, 6, KA, 0, 0);
    let (cdb, list) = pr_out(PREEMPT_AND_ABORT, 6, KB, KA, 0);
    let (out, _) = b.run(&lu, &cdb, &list);
    assert_eq!(out.status, Status::Good);
    assert_eq!(out.abort_nexuses, vec![a.it()]);
    assert_eq!(
        lu.pending_unit_attentions(&a.0.nexus()),
        vec![SenseCode::REGISTRATIONS_PREEMPTED]
    );
    assert!(lu.pending_unit_attentions(&b.0.nexus()).is_empty());
    a.attention(&lu, SenseCode::REGISTRATIONS_PREEMPTED);
    assert_eq!(
        a.it(),
        ItNexus {
            initiator: INITIATOR_A,
            port: RelativePortId(1)
        }
    );
    assert_eq!(reservation(&lu, &a), Some((KB, 6)));
    assert!(!a.may_read(&lu));
    // Plain PREEMPT names nobody.
    a.out(&lu, REGISTER, 0, 0, KA, 0);
    let (cdb, list) = pr_out(PREEMPT, 6, KB, KA, 0);
    let (out, _) = b.run(&lu, &cdb, &list);
    assert_eq!((out.status, out.abort_nexuses.len()), (Status::Good, 0));
}

#[test]
fn racing_reserves_exactly_one_wins() {
    let lu = lu();
    let a = Node::new(INITIATOR_A, 0);
    let b = Node::new(B, 1);
    for round in 0..200u64 {
        a.out(&lu, REGISTER_IGNORE, 0, 0, KA + round, 0);
        b.out(&lu, REGISTER_IGNORE, 0, 0, KB + round, 0);
        let barrier = Barrier::new(2);
        let race = |n: &Node, key: u64| {
            let (cdb, list) = pr_out(RESERVE, 3, key, 0, 0);
            barrier.wait();
            n.status(&lu, &cdb, &list)
        };
        let (sa, sb) = std::thread::scope(|s| {
            let ta = s.spawn(|| race(&a, KA + round));
            let tb = s.spawn(|| race(&b, KB + round));
            (ta.join().expect("a"), tb.join().expect("b"))
        });
        let winner = match (sa, sb) {
            (Status::Good, Status::ReservationConflict) => KA + round,
            (Status::ReservationConflict, Status::Good) => KB + round,
            other => panic!("round {round}: {other:?}"),
        };
        assert_eq!(reservation(&lu, &a), Some((winner, 3)));
        a.out(&lu, CLEAR, 0, KA + round, 0, 0);
        b.attention(&lu, SenseCode::RESERVATIONS_PREEMPTED);
    }
}

/// A RAM LU whose reservations persist under APTPL at `file` (and start from it).
fn persisting_lu(file: &std::path::Path) -> LogicalUnit {
    let b = srp_target::RamBackend::new(64, BlockSize::B512).expect("ram");
    let cfg = srp_target::LuConfig {
        pr_file: Some(file.to_path_buf()),
        saved_pr: srp_target::exec::pr::persist::load(file).expect("readable"),
        ..srp_target::LuConfig::new(identity("persisting"))
    };
    LogicalUnit::new(Box::new(b), cfg)
}

#[test]
fn aptpl_keeps_the_state_in_the_lu_file() {
    let dir = TempDir::new("aptpl-exec");
    let file = dir.path().join("state").join("lun-x.pr");
    let lu = persisting_lu(&file);
    let (a, b) = (Node::new(INITIATOR_A, 0), Node::new(B, 1));
    // PTPL_C: supported; not activated yet; APTPL=0 writes nothing.
    assert_eq!(&a.pr_in(&lu, REPORT_CAPABILITIES)[2..4], &[0x15, 0x90]);
    a.out(&lu, REGISTER, 0, 0, KA, 0);
    assert!(!file.exists());
    // APTPL=1: activated, and every later change is in the file before GOOD.
    b.out(&lu, REGISTER, 0, 0, KB, 0x01);
    assert_eq!(&a.pr_in(&lu, REPORT_CAPABILITIES)[2..4], &[0x15, 0x91]);
    a.out(&lu, RESERVE, 5, KA, 0, 0);
    let again = persisting_lu(&file);
    assert_eq!(keys(&again, &a), vec![KA, KB]);
    assert_eq!(reservation(&again, &a), Some((KA, 5)));
    assert_eq!(generation(&again, &a), 2);
    assert!(b.may_write(&again), "a registrant writes under WERO");
    assert!(
        !Node::new(C, 0).may_write(&again),
        "enforced after the restart"
    );
    // A state that cannot be saved is not acknowledged: undone, INTERNAL TARGET FAILURE.
    let blocked = dir.path().join("not-a-dir");
    std::fs::write(&blocked, b"a file where the state directory should be").expect("write");
    let stuck = LogicalUnit::new(
        Box::new(srp_target::RamBackend::new(64, BlockSize::B512).expect("ram")),
        srp_target::LuConfig {
            pr_file: Some(blocked.join("lun-y.pr")),
            ..srp_target::LuConfig::new(identity("stuck"))
        },
    );
    let (cdb, list) = pr_out(REGISTER, 0, 0, KA, 0x01);
    a.check(&stuck, &cdb, &list, SenseCode::INTERNAL_TARGET_FAILURE);
    assert_eq!(keys(&stuck, &a), Vec::<u64>::new(), "undone");
    assert_eq!(generation(&stuck, &a), 0);
    // APTPL=0 in a REGISTER deactivates it: the file goes.
    b.out(&lu, REGISTER, 0, KB, KB, 0);
    assert_eq!(&a.pr_in(&lu, REPORT_CAPABILITIES)[2..4], &[0x15, 0x90]);
    assert!(!file.exists());
    // A damaged file stops the LU from starting on a guess.
    std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
    std::fs::write(&file, "generation = \"seven\"\n").expect("damage");
    let e = srp_target::exec::pr::persist::load(&file).expect_err("damaged");
    assert!(e.contains("lun-x.pr"), "{e}");
}
