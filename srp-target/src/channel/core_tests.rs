//! The target channel against the IUs a real initiator (and a hostile one) sends.

use super::*;
use ib_verbs::Rkey;
use srp::wire::SolicitFlags;
use srp::wire::cred::CredRsp;
use srp::wire::desc::{DataDesc, DirectBuf, Indirect};
use srp::wire::login::BufFormats;
use srp::wire::logout::{ILogout, TLogoutReason};

const WINDOW: u32 = 4;

fn negotiated(formats: BufFormats) -> Negotiated {
    Negotiated {
        it_iu_len: 512,
        ti_iu_len: 64,
        formats,
        imm_data_offset: Some(68),
        window: WINDOW,
    }
}

fn live(formats: BufFormats) -> TargetChannel {
    let mut ch = TargetChannel::new(
        ChannelId(1),
        negotiated(formats),
        LoginReqFlags::LOSOLNT,
        1 << 20,
        16,
    );
    assert!(ch.on_rtu().is_empty());
    ch
}

fn both() -> BufFormats {
    BufFormats::DIRECT | BufFormats::INDIRECT
}

fn read10(tag: u64, data_in: DataDesc<'_>) -> Vec<u8> {
    let mut cdb = [0u8; 16];
    cdb[..10].copy_from_slice(&[0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]);
    let cmd = Cmd {
        flags: SolicitFlags::empty(),
        tag: Tag(tag),
        lun: Lun([0; 8]),
        task_attr: TaskAttr::Simple,
        cdb,
        add_cdb: &[],
        data_out: DataDesc::None,
        data_in,
        imm_data: &[],
        remote_invalidate: false,
    };
    let mut buf = vec![0u8; cmd.buffer_len_with(68)];
    cmd.emit_with(&mut buf, 68).expect("fits");
    buf
}

fn direct(len: u32) -> DataDesc<'static> {
    DataDesc::Direct(DirectBuf::new(0x7f00_0000, Rkey(0x1234), len))
}

fn tmf(tag: u64, function: TaskMgmtFunction, task_tag: u64) -> Vec<u8> {
    let t = TskMgmt {
        flags: SolicitFlags::empty(),
        tag: Tag(tag),
        lun: Lun([0; 8]),
        function,
        task_tag: Tag(task_tag),
    };
    let mut buf = vec![0u8; t.buffer_len()];
    t.emit(&mut buf).expect("fits");
    buf
}

fn rsp_of(buf: &[u8]) -> Rsp<'_> {
    Rsp::parse(buf).expect("our own response parses")
}

#[test]
fn ius_before_rtu_are_parked_then_replayed_in_order() {
    let mut ch = TargetChannel::new(
        ChannelId(9),
        negotiated(both()),
        LoginReqFlags::empty(),
        1 << 20,
        16,
    );
    assert_eq!(ch.state(), ChannelState::Connecting);
    assert_eq!(ch.on_recv(&read10(1, direct(4096))), Ok(Request::None));
    assert_eq!(ch.on_recv(&read10(2, direct(4096))), Ok(Request::None));
    let parked = ch.on_rtu();
    assert_eq!(ch.state(), ChannelState::Live);
    let tags: Vec<Tag> = parked
        .iter()
        .map(|iu| match ch.on_recv(iu) {
            Ok(Request::Command { tag, .. }) => tag,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(tags, vec![Tag(1), Tag(2)]);
}

#[test]
fn read_command_planned_and_answered_with_one_credit() {
    let mut ch = live(both());
    let Ok(Request::Command { tag, cdb, plan, .. }) = ch.on_recv(&read10(5, direct(4096))) else {
        panic!("a command")
    };
    assert_eq!(tag, Tag(5));
    assert_eq!(cdb[0], 0x28);
    assert_eq!(plan.data_in.as_ref().map(|b| b.len()), Some(4096));
    assert_eq!(ch.outstanding(), 1);
    let mut buf = [0u8; 64];
    let n = ch
        .respond(
            tag,
            Status::Good,
            &[],
            Residual::None,
            Residual::None,
            &mut buf,
        )
        .expect("live tag");
    let rsp = rsp_of(&buf[..n]);
    assert_eq!(rsp.tag, Tag(5));
    assert_eq!(rsp.req_lim_delta, 1);
    assert_eq!(ch.outstanding(), 0);
    // A second response for the same tag is not sent.
    assert_eq!(
        ch.respond(
            tag,
            Status::Good,
            &[],
            Residual::None,
            Residual::None,
            &mut buf
        ),
        None
    );
}

#[test]
fn sense_is_cut_to_the_negotiated_response_size() {
    let mut ch = live(both());
    ch.on_recv(&read10(1, direct(512))).expect("command");
    let sense = [0x70u8; 96];
    let mut buf = [0u8; 200];
    let n = ch
        .respond(
            Tag(1),
            Status::CheckCondition,
            &sense,
            Residual::None,
            Residual::Underflow(512),
            &mut buf,
        )
        .expect("live");
    assert_eq!(n, 64);
    let rsp = rsp_of(&buf[..n]);
    assert_eq!(rsp.sense.len(), 28);
    assert_eq!(rsp.data_in_residual, Residual::Underflow(512));
}

#[test]
fn credit_overrun_logs_the_channel_out() {
    let mut ch = live(both());
    for t in 0..u64::from(WINDOW) {
        ch.on_recv(&read10(t, direct(512)))
            .expect("within the window");
    }
    let f = ch.on_recv(&read10(99, direct(512))).expect_err("overrun");
    assert!(matches!(f, Fault::CreditOverrun(_)));
    assert_eq!(f.reason(), TLogoutReason::NoReason);
    let mut buf = [0u8; 16];
    let n = ch.logout(f.reason(), &mut buf).expect("fits");
    let t = TLogout::parse(&buf[..n]).expect("parses");
    assert!(t.solicited, "LOSOLNT was requested at login");
    assert_eq!(ch.state(), ChannelState::Draining);
    assert!(matches!(
        ch.on_recv(&read10(100, direct(512))),
        Err(Fault::NotLive("draining"))
    ));
}

#[test]
fn duplicate_live_tag_is_a_fault() {
    let mut ch = live(both());
    ch.on_recv(&read10(7, direct(512))).expect("first");
    assert!(matches!(
        ch.on_recv(&read10(7, direct(512))),
        Err(Fault::DuplicateTag(_))
    ));
}

#[test]
fn oversized_truncated_and_wrong_direction_ius() {
    let mut ch = live(both());
    let f = ch.on_recv(&[0x02; 513]).expect_err("too long");
    assert_eq!(f, Fault::IuTooLong { len: 513, max: 512 });
    assert_eq!(f.reason(), TLogoutReason::InvalidIuLength);
    let f = ch
        .on_recv(&read10(1, direct(512))[..40])
        .expect_err("short");
    assert_eq!(f.reason(), TLogoutReason::InvalidIuLength);
    let f = ch
        .on_recv(&[0xc1; 36])
        .expect_err("an SRP_RSP from the initiator");
    assert_eq!(f, Fault::WrongIuType(0xc1));
    assert_eq!(f.reason(), TLogoutReason::InvalidIuType);
    assert_eq!(
        ch.on_recv(&[0x55; 20]).map_err(|f| f.reason()),
        Err(TLogoutReason::InvalidIuType)
    );
    assert!(ch.on_recv(&[]).is_err());
}

#[test]
fn unnegotiated_format_names_the_direction() {
    let mut ch = live(BufFormats::DIRECT);
    let list = [DirectBuf::new(0x1000, Rkey(1), 512)];
    let ind = DataDesc::Indirect(Indirect {
        table: DirectBuf::new(0x100, Rkey(1), 16),
        total_len: 512,
        inline: &list,
    });
    let f = ch
        .on_recv(&read10(1, ind))
        .expect_err("indirect not negotiated");
    assert_eq!(f.reason(), TLogoutReason::UnsupportedDataInFormat);
}

#[test]
fn immediate_data_without_an_offset_is_a_format_not_negotiated() {
    let mut ch = TargetChannel::new(
        ChannelId(1),
        Negotiated {
            imm_data_offset: None,
            ..negotiated(both())
        },
        LoginReqFlags::empty(),
        1 << 20,
        16,
    );
    assert!(ch.on_rtu().is_empty());
    let mut iu = read10(1, DataDesc::None);
    iu[5] = u8::from(srp::wire::desc::DescFormat::Immediate) << 4; // BUF FMT: data-out
    iu.extend([0; 8 + 256]); // an immediate descriptor and its data
    let f = ch.on_recv(&iu).expect_err("immediate data not negotiated");
    assert_eq!(f.reason(), TLogoutReason::UnsupportedDataOutFormat, "{f}");
    // Cut short, the same IU is an invalid IU length first.
    let mut ch = live(both());
    let f = ch.on_recv(&iu[..20]).expect_err("truncated");
    assert_eq!(f.reason(), TLogoutReason::InvalidIuLength);
}

#[test]
fn oversized_transfer_is_a_bad_command_not_a_fault() {
    let mut ch = live(both());
    let r = ch
        .on_recv(&read10(3, direct((1 << 20) + 512)))
        .expect("channel survives");
    assert!(matches!(
        r,
        Request::BadCommand {
            tag: Tag(3),
            error: ChannelError::DataTooLong { .. },
            ..
        }
    ));
    let mut buf = [0u8; 64];
    assert!(
        ch.respond(
            Tag(3),
            Status::CheckCondition,
            &[0x70; 18],
            Residual::None,
            Residual::None,
            &mut buf
        )
        .is_some()
    );
}

#[test]
fn aborted_commands_get_no_response_and_their_credit_rides_on_the_next() {
    let mut ch = live(both());
    for t in 1..=3 {
        ch.on_recv(&read10(t, direct(512))).expect("command");
    }
    ch.on_recv(&tmf(0x8000_0001, TaskMgmtFunction::AbortTask, 2))
        .expect("tmf");
    let aborted = ch.abort_matching(|t, _| t == Tag(2));
    assert_eq!(aborted, vec![Tag(2)]);
    let mut buf = [0u8; 64];
    let n = ch
        .respond_tmf(Tag(0x8000_0001), TmfResponse::Complete, &mut buf)
        .expect("tmf live");
    let rsp = rsp_of(&buf[..n]);
    assert_eq!(rsp.tmf_response(), Some(TmfResponse::Complete));
    assert_eq!(
        rsp.req_lim_delta, 2,
        "its own credit plus the aborted command's"
    );
    assert_eq!(
        ch.respond(
            Tag(2),
            Status::Good,
            &[],
            Residual::None,
            Residual::None,
            &mut buf
        ),
        None
    );
    // Task management requests are not aborted by a LUN-wide abort.
    ch.on_recv(&tmf(0x8000_0002, TaskMgmtFunction::LogicalUnitReset, 0))
        .expect("tmf");
    let reset = ch.abort_matching(|_, p| p.lun == Lun([0; 8]));
    assert_eq!(reset, vec![Tag(1), Tag(3)]);
    assert!(ch.pending(Tag(0x8000_0002)).is_some_and(|p| p.tmf));
}

#[test]
fn owed_credits_go_back_by_cred_req_and_spurious_responses_fault() {
    let mut ch = live(both());
    let mut cred_rsp = [0u8; 16];
    CredRsp { tag: Tag(0) }.emit(&mut cred_rsp).expect("fits");
    assert_eq!(
        ch.on_recv(&cred_rsp),
        Err(Fault::SpuriousResponse("SRP_CRED_RSP"))
    );
    let mut ch = live(both());
    ch.on_recv(&read10(1, direct(512))).expect("command");
    let mut buf = [0u8; 16];
    assert_eq!(ch.cred_req(&mut buf), None, "nothing owed yet");
    ch.abort_matching(|_, _| true);
    let n = ch.cred_req(&mut buf).expect("one credit owed");
    assert_eq!(buf[0], 0x81);
    assert_eq!(&buf[4..8], &[0, 0, 0, 1]);
    assert_eq!(n, 16);
    assert_eq!(ch.target_requests(), 1);
    // Another credit owed while the first CRED_REQ is unanswered: it waits.
    ch.on_recv(&read10(2, direct(512))).expect("command");
    ch.abort_matching(|_, _| true);
    assert_eq!(ch.cred_req(&mut buf), None, "one target request at a time");
    assert_eq!(ch.on_recv(&cred_rsp), Ok(Request::None));
    assert_eq!(ch.target_requests(), 0);
    assert_eq!(ch.cred_req(&mut [0u8; 15]), None, "too short a buffer");
    ch.cred_req(&mut buf).expect("the second credit now");
    assert_eq!(&buf[4..8], &[0, 0, 0, 1]);
    assert_eq!(ch.on_recv(&cred_rsp), Ok(Request::None));
    assert_eq!(
        ch.on_recv(&cred_rsp),
        Err(Fault::SpuriousResponse("SRP_CRED_RSP"))
    );
}

#[test]
fn initiator_logout_drains_then_closes() {
    let mut ch = live(both());
    ch.on_recv(&read10(1, direct(512))).expect("command");
    let mut lo = [0u8; 16];
    ILogout { tag: Tag(0) }.emit(&mut lo).expect("fits");
    assert_eq!(ch.on_recv(&lo), Ok(Request::Logout));
    assert_eq!(ch.state(), ChannelState::Draining);
    assert!(!ch.close(), "a command is still outstanding");
    let mut buf = [0u8; 64];
    ch.respond(
        Tag(1),
        Status::Good,
        &[],
        Residual::None,
        Residual::None,
        &mut buf,
    )
    .expect("still answerable");
    assert_eq!(ch.state(), ChannelState::Closed);
    assert!(ch.close());
}
