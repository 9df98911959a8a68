//! Both login forms out of CM REQ private data, and decisions back into CM answers.

use super::*;
use crate::login::decide::{LoginPolicy, decide};
use access_layer::mad::cm::RdmaPortSpace;
use access_layer::mad::cm::req::REQ_PRIVATE_DATA_LEN;
use ib_verbs::Guid;
use srp::wire::login::{LoginReqFlags, MultiChannelAction};
use srp::wire::{IoClass, PortId};
use std::net::{IpAddr, Ipv4Addr};

fn target() -> PortId {
    PortId::new(0x11, Guid(0x0002_c903_0000_0011), IoClass::SrpR16a)
}

fn req() -> LoginReq {
    LoginReq {
        tag: Tag(0x42),
        req_it_iu_len: 8260,
        req_buf_fmt: BufFormats::DIRECT | BufFormats::INDIRECT,
        multi_channel: MultiChannelAction::Multi,
        flags: LoginReqFlags::IMMED_REQUESTED,
        imm_data_offset: 68,
        initiator_port_id: PortId::new(1, Guid(0x0002_c903_0000_0001), IoClass::SrpR16a),
        target_port_id: target(),
    }
}

fn policy() -> LoginPolicy {
    LoginPolicy {
        target_port_id: target(),
        enabled: true,
        max_it_iu_len: 8260,
        max_ti_iu_len: 512,
        window: 128,
        formats: BufFormats::DIRECT | BufFormats::INDIRECT,
        immediate: true,
        max_channels_per_nexus: 8,
    }
}

fn qpn(v: u32) -> Qpn {
    Qpn::new(v).expect("24 bits")
}

#[test]
fn native_ib_cm_form() {
    let mut pd = [0u8; REQ_PRIVATE_DATA_LEN];
    req().emit(&mut pd).expect("64 bytes fit");
    let got = parse_cm_login(ServiceId(0x0002_c903_0000_0011), None, &pd).expect("parses");
    assert_eq!(got.form, LoginForm::IbCm);
    assert_eq!(got.req, req());
}

#[test]
fn rdma_cm_form_after_the_cma_header() {
    let mut login = [0u8; 56];
    req().emit_rdma_cm(&mut login).expect("56 bytes fit");
    let hdr = CmaHeader {
        src_port: 40_000,
        src: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)),
        dst: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 8)),
    };
    let sid = ServiceId::rdma_ip(RdmaPortSpace::Tcp, 5555);
    let got = parse_cm_login(sid, Some((hdr.src, hdr.dst, hdr.src_port)), &login).expect("parses");
    assert_eq!(got.form, LoginForm::RdmaCm(hdr));
    assert_eq!(got.req, req());
}

#[test]
fn malformed_private_data_names_the_layer() {
    let sid = ServiceId::rdma_ip(RdmaPortSpace::Tcp, 5555);
    let e = parse_cm_login(sid, None, &[0xff; 56]).expect_err("bad cma header");
    assert!(matches!(e, CmLoginError::Cma(_)), "{e}");
    let e =
        parse_cm_login(ServiceId(7), None, &[0xc1; REQ_PRIVATE_DATA_LEN]).expect_err("not a login");
    assert!(matches!(e, CmLoginError::Login(_)), "{e}");
    assert!(e.to_string().starts_with("SRP_LOGIN_REQ: "), "{e}");
    let CmAnswer::Reject {
        reason,
        private_data,
    } = CmAnswer::malformed(BufFormats::DIRECT)
    else {
        panic!("a reject")
    };
    assert_eq!(reason, CmRejReason::ConsumerDefined);
    assert_eq!(private_data.len(), 32);
    assert_eq!(&private_data[..8], &[0xc2, 0, 0, 0, 0x00, 0x01, 0x00, 0x00]);
}

#[test]
fn decisions_become_rep_or_rej_private_data() {
    let accept = CmAnswer::from_decision(&decide(&req(), &policy(), true, &[]));
    let CmAnswer::Accept { private_data } = &accept else {
        panic!("accepted")
    };
    assert_eq!(private_data.len(), 52);
    assert_eq!(private_data[0], 0xc0);
    assert_eq!(&private_data[8..16], &0x42u64.to_be_bytes(), "tag echoed");
    let p = accept.accept_params(qpn(0x11)).expect("accept");
    assert_eq!(
        (p.responder_resources, p.initiator_depth, p.rnr_retry_count),
        (4, 4, 7)
    );
    assert_eq!(&p.private_data, private_data);

    let reject = CmAnswer::from_decision(&decide(&req(), &policy(), false, &[]));
    assert!(reject.accept_params(qpn(1)).is_none());
    let CmAnswer::Reject {
        reason,
        private_data,
    } = reject
    else {
        panic!("rejected")
    };
    assert_eq!(reason, CmRejReason::ConsumerDefined);
    assert_eq!(&private_data[4..8], &[0x00, 0x01, 0x00, 0x03]);
}
