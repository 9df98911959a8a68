//! The four wire tests for the login IUs. Vectors follow Linux `include/scsi/srp.h` offsets
//! with the values ib_srp sends by default (8260-byte IUs, immediate data at offset 68).

use super::*;
use crate::wire::IoClass;
use ib_verbs::Guid;
use wirekit::wire_repr::check;

const PORT_GUID: Guid = Guid(0x0002_c903_0001_0a2b);
const IOC_GUID: Guid = Guid(0x0002_c903_0001_0a2c);

/// SRP_LOGIN_REQ as Linux ib_srp sends it over IB CM (offsets: `struct srp_login_req`).
const LOGIN_REQ: [u8; 64] = [
    0x00, // 0: IU type SRP_LOGIN_REQ
    0, 0, 0, 0, 0, 0, 0, // 1..7: reserved
    0, 0, 0, 0, 0, 0, 0, 0, // 8..15: tag 0
    0x00, 0x00, 0x20, 0x44, // 16..19: req_it_iu_len 8260
    0, 0, 0, 0, // 20..23: reserved
    0x00, 0x06, // 24..25: req_buf_fmt DIRECT | INDIRECT
    0x80, // 26: req_flags: IMMED REQUESTED, multi-channel action SINGLE
    0,    // 27: reserved
    0x00, 0x44, // 28..29: imm_data_offset 68
    0, 0, // 30..31: reserved
    0, 0, 0, 0, 0, 0, 0, 0, // 32..39: initiator port id: initiator_ext 0
    0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2b, // 40..47: ... local port GUID
    0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2c, // 48..55: target port id: id_ext
    0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2c, // 56..63: ... IOC GUID
];

fn login_req() -> LoginReq {
    LoginReq {
        tag: Tag(0),
        req_it_iu_len: 8260,
        req_buf_fmt: BufFormats::DIRECT | BufFormats::INDIRECT,
        multi_channel: MultiChannelAction::Single,
        flags: LoginReqFlags::IMMED_REQUESTED,
        imm_data_offset: 68,
        initiator_port_id: PortId::new(0, PORT_GUID, IoClass::SrpR16a),
        target_port_id: PortId::new(IOC_GUID.0, IOC_GUID, IoClass::SrpR16a),
    }
}

#[test]
fn login_req_decodes_known_bytes() {
    check::decodes(&LOGIN_REQ, &login_req());
}

#[test]
fn login_req_emits_known_bytes() {
    check::emits(&login_req(), &LOGIN_REQ);
}

#[test]
fn login_req_round_trips() {
    check::round_trips(&login_req(), &mut Vec::new());
    let odd = LoginReq {
        multi_channel: MultiChannelAction::Unknown(3),
        flags: LoginReqFlags::from_bits_retain(0x7c),
        req_buf_fmt: BufFormats::from_bits_retain(0xffff),
        ..login_req()
    };
    check::round_trips(&odd, &mut Vec::new());
}

#[test]
fn login_req_truncated_errors() {
    check::truncation_errors::<LoginReq>(&LOGIN_REQ);
}

#[test]
fn login_req_accepts_cm_private_data_padding() {
    // IB CM REQ private data is 92 bytes; the login request is its first 64.
    let mut pd = [0u8; 92];
    pd[..64].copy_from_slice(&LOGIN_REQ);
    assert_eq!(LoginReq::parse(&pd), Ok(login_req()));
}

/// The same login in the RDMA-CM form (`struct srp_login_req_rdma`), MULTI channel action.
const LOGIN_REQ_RDMA: [u8; 56] = [
    0, 0, 0, 0, 0, 0, 0, 0, // 0..7: tag 0
    0x00, 0x06, // 8..9: req_buf_fmt DIRECT | INDIRECT
    0x81, // 10: req_flags: IMMED REQUESTED, multi-channel action MULTI
    0x00, // 11: IU type SRP_LOGIN_REQ
    0x00, 0x00, 0x20, 0x44, // 12..15: req_it_iu_len 8260
    0, 0, 0, 0, 0, 0, 0, 0, // 16..23: initiator port id: initiator_ext 0
    0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2b, // 24..31: ... local port GUID
    0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2c, // 32..39: target port id: id_ext
    0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2c, // 40..47: ... IOC GUID
    0x00, 0x44, // 48..49: imm_data_offset 68
    0, 0, 0, 0, 0, 0, // 50..55: reserved
];

fn login_req_rdma() -> LoginReqRdmaCm {
    LoginReqRdmaCm(LoginReq {
        multi_channel: MultiChannelAction::Multi,
        ..login_req()
    })
}

#[test]
fn login_req_rdma_decodes_known_bytes() {
    check::decodes(&LOGIN_REQ_RDMA, &login_req_rdma());
    assert_eq!(
        LoginReq::parse_rdma_cm(&LOGIN_REQ_RDMA),
        Ok(login_req_rdma().0)
    );
}

#[test]
fn login_req_rdma_emits_known_bytes() {
    check::emits(&login_req_rdma(), &LOGIN_REQ_RDMA);
    let mut buf = [0xa5u8; 56];
    assert_eq!(login_req_rdma().0.emit_rdma_cm(&mut buf), Ok(56));
    assert_eq!(buf, LOGIN_REQ_RDMA);
}

#[test]
fn login_req_rdma_round_trips() {
    check::round_trips(&login_req_rdma(), &mut Vec::new());
}

#[test]
fn login_req_rdma_truncated_errors() {
    check::truncation_errors::<LoginReqRdmaCm>(&LOGIN_REQ_RDMA);
}

#[test]
fn login_req_rdma_from_pre_srp2_kernels_has_no_immediate_offset() {
    // Older kernels' struct ended at byte 48; the rest of the private data is zero.
    let mut old = LOGIN_REQ_RDMA;
    old[48..].fill(0);
    let req = LoginReq::parse_rdma_cm(&old).expect("old form");
    assert_eq!(req.imm_data_offset, 0);
}

/// SRP_LOGIN_RSP as ib_srpt answers (offsets: `struct srp_login_rsp`, packed, 52 bytes).
const LOGIN_RSP: [u8; 52] = [
    0xc0, // 0: IU type SRP_LOGIN_RSP
    0, 0, 0, // 1..3: reserved
    0x00, 0x00, 0x00, 0x80, // 4..7: req_lim_delta 128
    0, 0, 0, 0, 0, 0, 0, 0x05, // 8..15: tag 5
    0x00, 0x00, 0x20, 0x54, // 16..19: max_it_iu_len 8276
    0x00, 0x00, 0x20, 0x44, // 20..23: max_ti_iu_len 8260
    0x00, 0x06, // 24..25: buf_fmt DIRECT | INDIRECT
    0x81, // 26: rsp_flags: IMMED SUPP, multi-channel result TERMINATED
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, // 27..51: reserved
];

fn login_rsp() -> LoginRsp {
    LoginRsp {
        req_lim_delta: 128,
        tag: Tag(5),
        max_it_iu_len: 8276,
        max_ti_iu_len: 8260,
        buf_fmt: BufFormats::DIRECT | BufFormats::INDIRECT,
        multi_channel: MultiChannelResult::Terminated,
        flags: LoginRspFlags::IMMED_SUPP,
    }
}

#[test]
fn login_rsp_decodes_known_bytes() {
    check::decodes(&LOGIN_RSP, &login_rsp());
}

#[test]
fn login_rsp_emits_known_bytes() {
    check::emits(&login_rsp(), &LOGIN_RSP);
}

#[test]
fn login_rsp_round_trips() {
    check::round_trips(&login_rsp(), &mut Vec::new());
}

#[test]
fn login_rsp_truncated_errors() {
    check::truncation_errors::<LoginRsp>(&LOGIN_RSP);
}

/// SRP_LOGIN_REJ, IU too large (offsets: `struct srp_login_rej`).
const LOGIN_REJ: [u8; 32] = [
    0xc2, // 0: IU type SRP_LOGIN_REJ
    0, 0, 0, // 1..3: reserved
    0x00, 0x01, 0x00, 0x02, // 4..7: reason: requested IU length too large
    0, 0, 0, 0, 0, 0, 0, 0x09, // 8..15: tag 9
    0, 0, 0, 0, 0, 0, 0, 0, // 16..23: reserved
    0x00, 0x02, // 24..25: buf_fmt DIRECT
    0, 0, 0, 0, 0, 0, // 26..31: reserved
];

fn login_rej() -> LoginRej {
    LoginRej {
        reason: LoginRejReason::ItIuLenTooLarge,
        tag: Tag(9),
        buf_fmt: BufFormats::DIRECT,
    }
}

#[test]
fn login_rej_decodes_known_bytes() {
    check::decodes(&LOGIN_REJ, &login_rej());
}

#[test]
fn login_rej_emits_known_bytes() {
    check::emits(&login_rej(), &LOGIN_REJ);
}

#[test]
fn login_rej_round_trips() {
    check::round_trips(&login_rej(), &mut Vec::new());
}

#[test]
fn login_rej_truncated_errors() {
    check::truncation_errors::<LoginRej>(&LOGIN_REJ);
}

#[test]
fn login_rej_reasons_match_srp_h() {
    let table = [
        (LoginRejReason::Unspecified, 0x0001_0000),
        (LoginRejReason::InsufficientResources, 0x0001_0001),
        (LoginRejReason::ItIuLenTooLarge, 0x0001_0002),
        (LoginRejReason::UnableToAssociate, 0x0001_0003),
        (LoginRejReason::UnsupportedBufFormat, 0x0001_0004),
        (LoginRejReason::NoMultiChannel, 0x0001_0005),
        (LoginRejReason::ChannelLimitReached, 0x0001_0006),
    ];
    for (reason, code) in table {
        assert_eq!(u32::from(reason), code);
        assert!(reason.is_srp_defined());
    }
    assert!(LoginRejReason::from(0x0001_000f).is_srp_defined());
    assert!(!LoginRejReason::from(0x0002_0000).is_srp_defined());
}
