//! Unit attention conditions through `LogicalUnit::execute`: established per I_T nexus by
//! persistent reservation changes, MODE SELECT and LOGICAL UNIT RESET; reported once on the
//! next command as CHECK CONDITION / UNIT ATTENTION (the command not executed), by REQUEST
//! SENSE as its data; INQUIRY and REPORT LUNS neither report nor clear them.

mod common;

use common::pr::{CLEAR, PREEMPT, REGISTER, RELEASE, RESERVE};
use common::*;
use scsi::{Sense, SenseCode, Status};
use srp::wire::PortId;
use srp_target::{BlockSize, CmdOutput, LogicalUnit};
use wirekit::WireRepr;

const B: PortId = PortId([0xb0; 16]);
const C: PortId = PortId([0xc0; 16]);
const KA: u64 = 0xa1;
const KB: u64 = 0xb2;
const KC: u64 = 0xc3;

const TUR: [u8; 6] = [0; 6];
const INQUIRY: [u8; 6] = [0x12, 0, 0, 0, 36, 0];
const REPORT_LUNS: [u8; 12] = [0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];

struct Node(NexusData);

impl Node {
    fn new(initiator: PortId, ioc: u16) -> Node {
        Node(nexus_data_of(initiator, ioc))
    }

    fn run(&self, lu: &LogicalUnit, cdb: &[u8], dout: &[u8]) -> (CmdOutput, Vec<u8>) {
        let mut din = Vec::new();
        let out = lu
            .execute(&self.0.nexus(), cdb, dout, &mut din)
            .expect("no transport error");
        (out, din)
    }

    fn good(&self, lu: &LogicalUnit, cdb: &[u8], dout: &[u8]) -> Vec<u8> {
        let (out, din) = self.run(lu, cdb, dout);
        assert_eq!(out.status, Status::Good, "sense {:?}", out.sense);
        din
    }

    /// The next command (`cdb`) is stopped by unit attention `code`.
    fn attention_on(&self, lu: &LogicalUnit, cdb: &[u8], dout: &[u8], code: SenseCode) {
        let (out, din) = self.run(lu, cdb, dout);
        assert_eq!(out.status, Status::CheckCondition, "{cdb:02x?}");
        assert_eq!(out.sense.map(|s| s.code()), Some(code), "{cdb:02x?}");
        assert!(din.is_empty());
    }

    fn attention(&self, lu: &LogicalUnit, code: SenseCode) {
        self.attention_on(lu, &TUR, &[], code);
    }

    fn pending(&self, lu: &LogicalUnit) -> Vec<SenseCode> {
        lu.pending_unit_attentions(&self.0.nexus())
    }

    fn pr(&self, lu: &LogicalUnit, sa: u8, ty: u8, key: u64, sa_key: u64) {
        let cdb = [0x5f, sa, ty, 0, 0, 0, 0, 0, 24, 0];
        let mut list = [0u8; 24];
        list[..8].copy_from_slice(&key.to_be_bytes());
        list[8..16].copy_from_slice(&sa_key.to_be_bytes());
        self.good(lu, &cdb, &list);
    }
}

/// A RAM LU whose WCE MODE SELECT may change (`write_cache_changeable`).
fn lu() -> LogicalUnit {
    let b = srp_target::RamBackend::new(64, BlockSize::B512).expect("ram");
    let cfg = srp_target::LuConfig {
        wce_changeable: true,
        ..srp_target::LuConfig::new(identity("ua"))
    };
    LogicalUnit::new(Box::new(b), cfg)
}

/// REQUEST SENSE(6) with DESC `desc`, 252 bytes.
fn request_sense(desc: bool) -> [u8; 6] {
    [0x03, u8::from(desc), 0, 0, 252, 0]
}

/// MODE SELECT(6) of the caching page with WCE `on`.
fn mode_select_wce(on: bool) -> ([u8; 6], Vec<u8>) {
    let mut page = vec![0u8; 20];
    (page[0], page[1]) = (0x08, 0x12);
    page[2] = if on { 0x04 } else { 0 };
    ([0x15, 0x10, 0, 0, 24, 0], [vec![0; 4], page].concat())
}

#[test]
fn reported_once_not_executed_and_exempt_commands() {
    let lu = lu();
    let (a, b) = (Node::new(INITIATOR_A, 0), Node::new(B, 1));
    a.good(&lu, &TUR, &[]);
    b.good(&lu, &TUR, &[]);
    lu.logical_unit_reset(&a.0.nexus());
    // INQUIRY and REPORT LUNS: neither reported nor cleared.
    b.good(&lu, &INQUIRY, &[]);
    b.good(&lu, &REPORT_LUNS, &[]);
    assert_eq!(
        b.pending(&lu),
        vec![SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED]
    );
    // A WRITE is stopped by it and does not reach the medium; then it is gone.
    b.attention_on(
        &lu,
        &write10(3, 1, false),
        &[0x5a; 512],
        SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED,
    );
    assert_eq!(b.good(&lu, &read10(3, 1), &[]), vec![0u8; 512]);
    assert!(b.pending(&lu).is_empty());
    // REQUEST SENSE reports it as data (GOOD) and clears it; fixed and descriptor format.
    let din = a.good(&lu, &request_sense(false), &[]);
    let s = Sense::parse(&din).expect("fixed sense");
    assert_eq!(s.code(), SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
    assert_eq!(din[0] & 0x7f, 0x70);
    let din = a.good(&lu, &request_sense(false), &[]);
    assert_eq!(
        Sense::parse(&din).expect("sense").code(),
        SenseCode::NO_SENSE
    );
    lu.logical_unit_reset(&b.0.nexus());
    let din = a.good(&lu, &request_sense(true), &[]);
    assert_eq!(din[0] & 0x7f, 0x72, "descriptor format");
    assert_eq!(
        Sense::parse(&din).expect("descriptor sense").code(),
        SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED
    );
    // A REQUEST SENSE that does not parse (reserved bits) is refused and clears nothing.
    b.good(&lu, &INQUIRY, &[]);
    let (out, _) = b.run(&lu, &[0x03, 0xfe, 0, 0, 252, 0], &[]);
    assert_eq!(out.status, Status::CheckCondition);
    assert_eq!(
        b.pending(&lu),
        vec![SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED]
    );
}

#[test]
fn lun_reset_reaches_every_nexus_that_used_the_lu() {
    let lu = lu();
    let (a, b, c) = (Node::new(INITIATOR_A, 0), Node::new(B, 0), Node::new(C, 1));
    b.good(&lu, &TUR, &[]);
    c.good(&lu, &REPORT_LUNS, &[]);
    // The resetting nexus is told too, whether or not it used the LU before.
    lu.logical_unit_reset(&a.0.nexus());
    for n in [&a, &b, &c] {
        n.attention(&lu, SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
        n.good(&lu, &TUR, &[]);
    }
    // A nexus that never used the LU has nothing pending.
    assert!(Node::new(C, 0).pending(&lu).is_empty());
}

#[test]
fn mode_select_tells_the_other_nexuses_when_a_parameter_changes() {
    let lu = lu();
    let (a, b, c) = (Node::new(INITIATOR_A, 0), Node::new(B, 1), Node::new(C, 0));
    b.good(&lu, &TUR, &[]);
    // WCE is already on: nothing changes, nobody is told.
    let (cdb, list) = mode_select_wce(true);
    a.good(&lu, &cdb, &list);
    assert!(b.pending(&lu).is_empty());
    // WCE off: the others are told, the sender is not; C had not used the LU.
    let (cdb, list) = mode_select_wce(false);
    a.good(&lu, &cdb, &list);
    assert!(!lu.write_cache());
    assert!(a.pending(&lu).is_empty());
    assert!(c.pending(&lu).is_empty());
    b.attention(&lu, SenseCode::MODE_PARAMETERS_CHANGED);
    b.good(&lu, &TUR, &[]);
    // Several conditions are reported oldest first, each once.
    let (cdb, list) = mode_select_wce(true);
    a.good(&lu, &cdb, &list);
    lu.logical_unit_reset(&a.0.nexus());
    a.attention(&lu, SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
    let (cdb, list) = mode_select_wce(false);
    a.good(&lu, &cdb, &list);
    b.attention(&lu, SenseCode::MODE_PARAMETERS_CHANGED);
    b.attention(&lu, SenseCode::BUS_DEVICE_RESET_FUNCTION_OCCURRED);
    b.good(&lu, &TUR, &[]);
}

#[test]
fn reservation_changes_per_spc4() {
    let lu = lu();
    let (a, b, c) = (Node::new(INITIATOR_A, 0), Node::new(B, 1), Node::new(C, 0));
    a.pr(&lu, REGISTER, 0, 0, KA);
    b.pr(&lu, REGISTER, 0, 0, KB);
    c.pr(&lu, REGISTER, 0, 0, KC);

    // RELEASE of Write Exclusive: nobody is told.
    a.pr(&lu, RESERVE, 1, KA, 0);
    a.pr(&lu, RELEASE, 1, KA, 0);
    assert!(b.pending(&lu).is_empty() && c.pending(&lu).is_empty());
    // RELEASE of Write Exclusive – Registrants Only: every other registrant is told.
    a.pr(&lu, RESERVE, 5, KA, 0);
    a.pr(&lu, RELEASE, 5, KA, 0);
    assert!(a.pending(&lu).is_empty());
    b.attention(&lu, SenseCode::RESERVATIONS_RELEASED);
    c.attention(&lu, SenseCode::RESERVATIONS_RELEASED);

    // B preempts A (the holder) and changes the type: A's registration is preempted, C
    // hears the reservation was released. The unit attention comes before the reservation
    // conflict A's WRITE now meets.
    a.pr(&lu, RESERVE, 1, KA, 0);
    b.pr(&lu, PREEMPT, 3, KB, KA);
    a.attention_on(
        &lu,
        &write10(0, 1, false),
        &[0; 512],
        SenseCode::REGISTRATIONS_PREEMPTED,
    );
    let (out, _) = a.run(&lu, &write10(0, 1, false), &[0; 512]);
    assert_eq!(out.status, Status::ReservationConflict);
    c.attention(&lu, SenseCode::RESERVATIONS_RELEASED);
    assert!(b.pending(&lu).is_empty(), "not the sender");

    // CLEAR: every other registrant hears its reservation was preempted.
    a.pr(&lu, REGISTER, 0, 0, KA);
    b.pr(&lu, CLEAR, 0, KB, 0);
    a.attention(&lu, SenseCode::RESERVATIONS_PREEMPTED);
    c.attention(&lu, SenseCode::RESERVATIONS_PREEMPTED);
    assert!(b.pending(&lu).is_empty());

    // A refused service action establishes nothing.
    a.pr(&lu, REGISTER, 0, 0, KA);
    let cdb = [0x5f, PREEMPT, 1, 0, 0, 0, 0, 0, 24, 0];
    let mut list = [0u8; 24];
    list[..8].copy_from_slice(&KB.to_be_bytes());
    list[8..16].copy_from_slice(&KA.to_be_bytes());
    let (out, _) = b.run(&lu, &cdb, &list);
    assert_eq!(
        out.status,
        Status::ReservationConflict,
        "B is not registered"
    );
    assert!(a.pending(&lu).is_empty());
}
