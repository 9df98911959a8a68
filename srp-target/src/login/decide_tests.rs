//! Every branch of the login decision, with the wire reason codes a Linux initiator sees.

use super::*;
use ib_verbs::Guid;
use srp::wire::{IoClass, Tag};
use wirekit::WireRepr;

const IOC_GUID: u64 = 0x0002_c903_00a1_b2c3;

fn target() -> PortId {
    PortId::new(IOC_GUID, Guid(IOC_GUID), IoClass::SrpR16a)
}

fn initiator() -> PortId {
    PortId::new(0x1, Guid(0x0002_c903_0000_0001), IoClass::SrpR16a)
}

fn policy() -> LoginPolicy {
    LoginPolicy {
        target_port_id: target(),
        enabled: true,
        max_it_iu_len: 8260,
        max_ti_iu_len: 1024,
        window: 128,
        formats: BufFormats::DIRECT | BufFormats::INDIRECT,
        immediate: true,
        max_channels_per_nexus: 4,
    }
}

/// What Linux ib_srp sends with default parameters and immediate data.
fn linux_req() -> LoginReq {
    LoginReq {
        tag: Tag(0),
        req_it_iu_len: 8260,
        req_buf_fmt: BufFormats::DIRECT | BufFormats::INDIRECT,
        multi_channel: MultiChannelAction::Single,
        flags: LoginReqFlags::IMMED_REQUESTED,
        imm_data_offset: 68,
        initiator_port_id: initiator(),
        target_port_id: target(),
    }
}

fn refusal(d: LoginDecision) -> (LoginRejReason, LoginRefusal) {
    match d {
        LoginDecision::Reject { rej, refusal } => (rej.reason, refusal),
        LoginDecision::Accept { .. } => panic!("expected a reject"),
    }
}

#[test]
fn linux_default_login_accepted_with_immediate_data() {
    let LoginDecision::Accept {
        rsp,
        negotiated,
        terminate,
    } = decide(&linux_req(), &policy(), true, &[])
    else {
        panic!("accepted")
    };
    assert_eq!(rsp.req_lim_delta, 128);
    assert_eq!(rsp.max_it_iu_len, 8260);
    assert_eq!(rsp.max_ti_iu_len, 1024);
    assert_eq!(rsp.multi_channel, MultiChannelResult::NoChannel);
    assert!(rsp.flags.contains(LoginRspFlags::IMMED_SUPP));
    assert_eq!(negotiated.imm_data_offset, Some(68));
    assert!(terminate.is_empty());
    // The response goes on the wire with the flags in byte 26.
    let mut buf = [0xa5u8; 52];
    rsp.emit(&mut buf).expect("fits");
    assert_eq!(buf[0], 0xc0);
    assert_eq!(buf[26], 0x80);
}

#[test]
fn immediate_data_only_when_requested_offered_and_sane() {
    let accept_imm = |req: LoginReq, pol: LoginPolicy| match decide(&req, &pol, true, &[]) {
        LoginDecision::Accept { negotiated, .. } => negotiated.imm_data_offset,
        LoginDecision::Reject { .. } => panic!("accepted"),
    };
    let mut no_ask = linux_req();
    no_ask.flags = LoginReqFlags::empty();
    assert_eq!(accept_imm(no_ask, policy()), None);
    let mut low = linux_req();
    low.imm_data_offset = 40;
    assert_eq!(accept_imm(low, policy()), None);
    let mut past_end = linux_req();
    past_end.req_it_iu_len = 64;
    past_end.imm_data_offset = 68;
    assert_eq!(accept_imm(past_end, policy()), None);
    let mut off = policy();
    off.immediate = false;
    assert_eq!(accept_imm(linux_req(), off), None);
}

#[test]
fn single_terminates_the_nexus_and_multi_adds() {
    let live = [ChannelId(3), ChannelId(7)];
    let LoginDecision::Accept { rsp, terminate, .. } = decide(&linux_req(), &policy(), true, &live)
    else {
        panic!("accepted")
    };
    assert_eq!(rsp.multi_channel, MultiChannelResult::Terminated);
    assert_eq!(terminate, live.to_vec());

    let mut multi = linux_req();
    multi.multi_channel = MultiChannelAction::Multi;
    let LoginDecision::Accept { rsp, terminate, .. } = decide(&multi, &policy(), true, &live)
    else {
        panic!("accepted")
    };
    assert_eq!(rsp.multi_channel, MultiChannelResult::Maintained);
    assert!(terminate.is_empty());

    let full = [ChannelId(1), ChannelId(2), ChannelId(3), ChannelId(4)];
    let (reason, why) = refusal(decide(&multi, &policy(), true, &full));
    assert_eq!(reason, LoginRejReason::ChannelLimitReached);
    assert_eq!(
        why.to_string(),
        "the I_T nexus already has 4 channels (the limit)"
    );
    // SINGLE at the limit replaces them all.
    assert!(matches!(
        decide(&linux_req(), &policy(), true, &full),
        LoginDecision::Accept { .. }
    ));
}

#[test]
fn iu_length_out_of_range_rejected_first() {
    for len in [0, 63, 8261, u32::MAX] {
        let mut req = linux_req();
        req.req_it_iu_len = len;
        req.target_port_id = initiator(); // also wrong: the length check comes first
        let (reason, why) = refusal(decide(&req, &policy(), false, &[]));
        assert_eq!(reason, LoginRejReason::ItIuLenTooLarge, "{len}");
        assert_eq!(
            why,
            LoginRefusal::ItIuLen {
                requested: len,
                min: 64,
                max: 8260
            }
        );
    }
}

#[test]
fn disabled_ioc_rejected_before_the_target_check() {
    let mut pol = policy();
    pol.enabled = false;
    let mut req = linux_req();
    req.target_port_id = initiator();
    let (reason, why) = refusal(decide(&req, &pol, true, &[]));
    assert_eq!(reason, LoginRejReason::InsufficientResources);
    assert_eq!(why, LoginRefusal::Disabled);
}

#[test]
fn wrong_target_port_id_cannot_associate() {
    let mut req = linux_req();
    req.target_port_id = initiator();
    let (reason, why) = refusal(decide(&req, &policy(), true, &[]));
    assert_eq!(reason, LoginRejReason::UnableToAssociate);
    assert!(matches!(why, LoginRefusal::WrongTarget { .. }));
}

#[test]
fn unsupported_required_format_rejected() {
    let mut pol = policy();
    pol.formats = BufFormats::DIRECT;
    let (reason, why) = refusal(decide(&linux_req(), &pol, true, &[]));
    assert_eq!(reason, LoginRejReason::UnsupportedBufFormat);
    assert_eq!(
        why.to_string(),
        "required buffer formats 0x0006 exceed the supported 0x0002"
    );
}

#[test]
fn acl_denial_goes_on_the_wire_with_our_formats() {
    let d = decide(&linux_req(), &policy(), false, &[ChannelId(1)]);
    let LoginDecision::Reject { rej, refusal } = d else {
        panic!("rejected")
    };
    assert_eq!(refusal, LoginRefusal::Denied(initiator()));
    let mut buf = [0xa5u8; 32];
    rej.emit(&mut buf).expect("fits");
    assert_eq!(buf[0], 0xc2);
    assert_eq!(&buf[4..8], &[0x00, 0x01, 0x00, 0x03]);
    assert_eq!(&buf[24..26], &[0x00, 0x06]);
}

fn facts(channels: &[ChannelId], elsewhere: bool, partition: Option<u16>) -> LoginFacts<'_> {
    LoginFacts {
        acl_admits: true,
        nexus_channels: channels,
        nexus_elsewhere: elsewhere,
        wrong_partition: partition,
    }
}

#[test]
fn another_partition_cannot_associate_and_is_named() {
    let (code, why) = refusal(decide_with(
        &linux_req(),
        &policy(),
        &facts(&[], false, Some(0xffff)),
    ));
    assert_eq!(code, LoginRejReason::UnableToAssociate);
    assert_eq!(why, LoginRefusal::WrongPartition(0xffff));
    assert!(why.to_string().contains("partition 0xffff"), "{why}");
    // Checked before the formats and the ACL: a host on the wrong partition learns that.
    let mut req = linux_req();
    req.req_buf_fmt = BufFormats::DIRECT | BufFormats::INDIRECT | BufFormats::from_bits_retain(0x8);
    let denied = LoginFacts {
        acl_admits: false,
        ..facts(&[], false, Some(0x8001))
    };
    assert_eq!(
        refusal(decide_with(&req, &policy(), &denied)).1,
        LoginRefusal::WrongPartition(0x8001)
    );
}

#[test]
fn a_nexus_bound_to_another_address_neither_joins_nor_is_replaced() {
    let live = [ChannelId(7)];
    for action in [MultiChannelAction::Single, MultiChannelAction::Multi] {
        let mut req = linux_req();
        req.multi_channel = action;
        let (code, why) = refusal(decide_with(&req, &policy(), &facts(&live, true, None)));
        assert_eq!(code, LoginRejReason::UnableToAssociate);
        assert_eq!(why, LoginRefusal::NexusElsewhere(initiator()));
    }
    // The ACL's refusal comes first: a forger the ACL denies learns nothing of the nexus.
    let denied = LoginFacts {
        acl_admits: false,
        ..facts(&live, true, None)
    };
    assert_eq!(
        refusal(decide_with(&linux_req(), &policy(), &denied)).1,
        LoginRefusal::Denied(initiator())
    );
}
