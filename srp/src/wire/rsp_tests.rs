//! The four wire tests for SRP_RSP: a CHECK CONDITION with sense and a data-in underflow, and a
//! task management response. Offsets: Linux `struct srp_rsp` (packed, 36 bytes).

use super::*;
use wirekit::wire_repr::check;

/// Fixed-format sense: ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE (21h/00h).
const SENSE: [u8; 18] = [
    0x70, 0, 0x05, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x21, 0x00, 0, 0, 0, 0,
];

const CHECK_CONDITION: [u8; 54] = [
    0xc1, // 0: IU type SRP_RSP
    0x00, // 1: flags
    0, 0, // 2..3: reserved
    0x00, 0x00, 0x00, 0x01, // 4..7: request limit delta 1
    0, 0, 0, 0, 0, 0, 0, 0x05, // 8..15: tag 5
    0, 0,    // 16..17: reserved
    0x22, // 18: valid: SNSVALID | DIUNDER
    0x02, // 19: status CHECK CONDITION
    0, 0, 0, 0, // 20..23: data-out residual 0
    0x00, 0x00, 0x10, 0x00, // 24..27: data-in residual 4096
    0x00, 0x00, 0x00, 0x12, // 28..31: sense data list length 18
    0x00, 0x00, 0x00, 0x00, // 32..35: response data list length 0
    // 36..53: sense data
    0x70, 0, 0x05, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x21, 0x00, 0, 0, 0, 0,
];

fn check_condition() -> Rsp<'static> {
    Rsp {
        solicited: false,
        req_lim_delta: 1,
        tag: Tag(5),
        status: Status::CheckCondition,
        data_out_residual: Residual::None,
        data_in_residual: Residual::Underflow(4096),
        resp_data: &[],
        sense: &SENSE,
    }
}

#[test]
fn rsp_sense_decodes_known_bytes() {
    check::decodes(&CHECK_CONDITION, &check_condition());
}

#[test]
fn rsp_sense_emits_known_bytes() {
    check::emits(&check_condition(), &CHECK_CONDITION);
}

#[test]
fn rsp_sense_round_trips() {
    check::round_trips(&check_condition(), &mut Vec::new());
}

#[test]
fn rsp_sense_truncated_errors() {
    check::truncation_errors::<Rsp<'_>>(&CHECK_CONDITION);
}

const TMF_DATA: [u8; 4] = [0, 0, 0, 0x04];

/// Task management response "function not supported", as ib_srpt builds it.
const TMF_RSP: [u8; 40] = [
    0xc1, // 0: IU type SRP_RSP
    0x01, // 1: flags: SOLNT
    0, 0, // 2..3: reserved
    0x00, 0x00, 0x00, 0x02, // 4..7: request limit delta 2
    0, 0, 0, 0, 0x80, 0, 0, 0x07, // 8..15: tag of the TSK_MGMT
    0, 0,    // 16..17: reserved
    0x01, // 18: valid: RSPVALID
    0x00, // 19: status GOOD
    0, 0, 0, 0, // 20..23: data-out residual
    0, 0, 0, 0, // 24..27: data-in residual
    0, 0, 0, 0, // 28..31: sense data list length 0
    0x00, 0x00, 0x00, 0x04, // 32..35: response data list length 4
    0x00, 0x00, 0x00, 0x04, // 36..39: response data: RSP_CODE 4, not supported
];

fn tmf_rsp() -> Rsp<'static> {
    Rsp {
        solicited: true,
        req_lim_delta: 2,
        tag: Tag(0x8000_0007),
        status: Status::Good,
        data_out_residual: Residual::None,
        data_in_residual: Residual::None,
        resp_data: &TMF_DATA,
        sense: &[],
    }
}

#[test]
fn rsp_tmf_decodes_known_bytes() {
    check::decodes(&TMF_RSP, &tmf_rsp());
    assert_eq!(tmf_rsp().tmf_response(), Some(TmfResponse::NotSupported));
    assert_eq!(TmfResponse::NotSupported.response_data(), TMF_DATA);
}

#[test]
fn rsp_tmf_emits_known_bytes() {
    check::emits(&tmf_rsp(), &TMF_RSP);
}

#[test]
fn rsp_tmf_round_trips() {
    check::round_trips(&tmf_rsp(), &mut Vec::new());
    let over = Rsp {
        data_out_residual: Residual::Overflow(9),
        ..tmf_rsp()
    };
    check::round_trips(&over, &mut Vec::new());
}

#[test]
fn rsp_tmf_truncated_errors() {
    check::truncation_errors::<Rsp<'_>>(&TMF_RSP);
}

#[test]
fn contradictory_residual_flags_are_rejected() {
    let mut b = TMF_RSP;
    b[18] |= 0x30; // DIOVER and DIUNDER together
    assert!(matches!(
        Rsp::parse(&b),
        Err(WireError::BadField {
            field: "data-in residual",
            ..
        })
    ));
}

#[test]
fn lengths_without_their_valid_bit_are_ignored() {
    let mut b = TMF_RSP;
    b[18] = 0; // RSPVALID clear: the 4 bytes are not response data
    let rsp = Rsp::parse(&b).expect("parse");
    assert!(rsp.resp_data.is_empty());
    assert_eq!(rsp.tmf_response(), None);
}

#[test]
fn huge_length_fields_do_not_overflow() {
    let mut b = CHECK_CONDITION;
    b[28..32].copy_from_slice(&[0xff; 4]);
    b[18] |= 0x01;
    b[32..36].copy_from_slice(&[0xff; 4]);
    assert!(matches!(Rsp::parse(&b), Err(WireError::Truncated { .. })));
}
