//! Login, commands, credits, tags, target requests and escalation against a scripted target.

use super::test_target::*;
use super::*;
use crate::wire::desc::{DataDesc, DirectBuf};
use crate::wire::login::{
    BufFormats, LoginRej, LoginRejReason, LoginReq, LoginReqFlags, MultiChannelAction,
    MultiChannelResult,
};
use crate::wire::rsp::{Residual, Rsp, TmfResponse};
use crate::wire::tsk_mgmt::TaskMgmtFunction;
use crate::wire::{Tag, WireError};
use core::time::Duration;
use ib_verbs::Rkey;
use ib_verbs::time::Time;
use scsi::status::Status;
use wirekit::WireRepr;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn ib_cm_login_request_and_response() {
    let mut h = Harness::new(config(LoginForm::IbCm));
    h.ch.connect(h.now);
    h.pump();
    let (_, form, pd) = &h.connects[0];
    assert_eq!(*form, LoginForm::IbCm);
    assert_eq!(pd.len(), 64);
    let req = LoginReq::parse(pd).expect("LOGIN_REQ");
    let (i, t) = ports();
    assert_eq!(req.tag, Tag(1));
    assert_eq!(req.req_it_iu_len, 8260);
    assert_eq!(req.req_buf_fmt, BufFormats::DIRECT | BufFormats::INDIRECT);
    assert_eq!(req.multi_channel, MultiChannelAction::Single);
    assert_eq!(req.flags, LoginReqFlags::IMMED_REQUESTED);
    assert_eq!(req.imm_data_offset, 68);
    assert_eq!((req.initiator_port_id, req.target_port_id), (i, t));

    h.ch.handle_login_rsp(h.now, &login_rsp(Tag(1), 16, true));
    h.pump();
    let neg = Negotiated {
        window: 16,
        max_it_iu_len: 8260,
        max_ti_iu_len: 8260,
        buf_fmts: BufFormats::DIRECT | BufFormats::INDIRECT,
        imm_data: true,
        imm_data_offset: 68,
        max_imm_len: 8192,
        multi_channel: MultiChannelResult::NoChannel,
    };
    assert_eq!(
        h.events,
        vec![
            Event::LoggedIn(neg),
            Event::StateChanged {
                from: PortState::New,
                to: PortState::Running
            }
        ]
    );
    assert_eq!(h.ch.req_lim(), Some(16));
    assert_eq!(h.ch.poll_timeout(), None, "login timer stopped");
}

#[test]
fn rdma_cm_login_for_a_second_channel_without_immediate_data() {
    let mut cfg = config(LoginForm::RdmaCm);
    cfg.login.first_channel = false;
    cfg.login.want_imm_data = false;
    let mut h = Harness::new(cfg);
    h.ch.connect(h.now);
    h.pump();
    let (_, form, pd) = &h.connects[0];
    assert_eq!((*form, pd.len()), (LoginForm::RdmaCm, 56));
    assert_eq!(pd[11], 0x00, "IU type byte of the RDMA-CM layout");
    let req = LoginReq::parse_rdma_cm(pd).expect("RDMA-CM LOGIN_REQ");
    assert_eq!(req.multi_channel, MultiChannelAction::Multi);
    assert_eq!(req.flags, LoginReqFlags::empty());
    assert_eq!(req.imm_data_offset, 0);
    // The target offers immediate data; we did not ask, so it is not used.
    h.ch.handle_login_rsp(h.now, &login_rsp(Tag(1), 8, true));
    h.pump();
    let neg = h.ch.negotiated().expect("logged in");
    assert_eq!((neg.imm_data, neg.max_imm_len), (false, 0));
}

#[test]
fn reject_reasons_are_classified() {
    let (i, t) = ports();
    let p = LoginParams::new(LoginForm::IbCm, i, t);
    let rej = |reason, fmts| LoginRej {
        reason,
        tag: Tag(1),
        buf_fmt: fmts,
    };
    let all = BufFormats::DIRECT | BufFormats::INDIRECT;
    let cases = [
        (LoginRejReason::Unspecified, all, RejectAdvice::RetryLater),
        (
            LoginRejReason::InsufficientResources,
            all,
            RejectAdvice::RetryLater,
        ),
        (LoginRejReason::ItIuLenTooLarge, all, RejectAdvice::GiveUp),
        (
            LoginRejReason::UnableToAssociate,
            all,
            RejectAdvice::RetryLater,
        ),
        (
            LoginRejReason::UnsupportedBufFormat,
            BufFormats::DIRECT,
            RejectAdvice::RetryWithFormats(BufFormats::DIRECT),
        ),
        (
            LoginRejReason::UnsupportedBufFormat,
            all,
            RejectAdvice::GiveUp,
        ),
        (
            LoginRejReason::UnsupportedBufFormat,
            BufFormats::empty(),
            RejectAdvice::GiveUp,
        ),
        (LoginRejReason::NoMultiChannel, all, RejectAdvice::GiveUp),
        (
            LoginRejReason::ChannelLimitReached,
            all,
            RejectAdvice::RetryLater,
        ),
        (
            LoginRejReason::Unknown(0x0001_0007),
            all,
            RejectAdvice::GiveUp,
        ),
    ];
    for (reason, fmts, want) in cases {
        assert_eq!(
            RejectAdvice::for_reject(&p, &rej(reason, fmts)),
            want,
            "{reason:?}"
        );
    }
}

#[test]
fn format_reject_narrows_the_next_login() {
    let mut h = Harness::new(config(LoginForm::IbCm));
    h.ch.connect(h.now);
    h.pump();
    h.ch.handle_login_rej(
        h.now,
        &login_rej(
            Tag(1),
            LoginRejReason::UnsupportedBufFormat,
            BufFormats::DIRECT,
        ),
    );
    h.pump();
    assert_eq!(
        h.events,
        vec![Event::LoginFailed {
            error: InitiatorError::LoginRejected {
                reason: LoginRejReason::UnsupportedBufFormat,
                retryable: true
            },
            advice: Some(RejectAdvice::RetryWithFormats(BufFormats::DIRECT)),
        }]
    );
    assert_eq!(h.ch.state(), PortState::New);
    assert_eq!(
        h.ch.poll_timeout(),
        None,
        "a first login is not retried by itself"
    );
    h.ch.connect(h.now);
    h.pump();
    let req = LoginReq::parse(&h.connects[1].2).expect("LOGIN_REQ");
    assert_eq!((req.tag, req.req_buf_fmt), (Tag(2), BufFormats::DIRECT));
}

#[test]
fn unusable_login_responses_are_refused() {
    for (bytes, want) in [
        (
            login_rsp(Tag(1), 1, true),
            InitiatorError::BadLoginResponse("request limit below 2 leaves no credit for commands"),
        ),
        (
            login_rsp(Tag(9), 8, true),
            InitiatorError::BadLoginResponse("tag does not echo the login request"),
        ),
    ] {
        let mut h = Harness::new(config(LoginForm::IbCm));
        h.ch.connect(h.now);
        h.pump();
        h.ch.handle_login_rsp(h.now, &bytes);
        h.pump();
        assert_eq!(
            h.events,
            vec![Event::LoginFailed {
                error: want,
                advice: None
            }]
        );
        assert_eq!((h.disconnects, h.ch.state()), (1, PortState::New));
    }
}

#[test]
fn submit_before_login_is_refused_with_the_command() {
    let mut h = Harness::new(config(LoginForm::IbCm));
    let r = h.ch.submit(h.now, read_cmd(0)).expect_err("not logged in");
    assert_eq!(r.reason, InitiatorError::WrongState(PortState::New));
    assert_eq!(*r.command, read_cmd(0));
}

#[test]
fn read_command_and_response_with_residual_sense_and_invalidation() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 8);
    let id = h.submit(read_cmd(3));
    let cmd = h.sent_cmd(0);
    assert_eq!(cmd.tag, Tag(0x0000_0001_0000_0000));
    assert_eq!(cmd.lun, lun(3));
    assert_eq!(&cmd.cdb[..10], &[0x28, 0, 0, 0, 0, 0x10, 0, 0, 8, 0]);
    assert_eq!(
        cmd.data_in,
        DataDesc::Direct(DirectBuf::new_const(0x1000_0000, 0x1234, 4096))
    );
    assert_eq!(cmd.data_out, DataDesc::None);
    assert!(cmd.remote_invalidate);
    assert_eq!(h.ch.req_lim(), Some(7));
    let sense = [
        0x70, 0, 0x01, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x18, 0, 0, 0, 0, 0,
    ];
    let bytes = emit(&Rsp {
        solicited: false,
        req_lim_delta: 1,
        tag: cmd.tag,
        status: Status::CheckCondition,
        data_out_residual: Residual::None,
        data_in_residual: Residual::Underflow(512),
        resp_data: &[],
        sense: &sense,
    });
    h.ch.handle_recv(h.now, &bytes, Some(Rkey(0x1234)));
    h.pump();
    assert_eq!(
        h.done,
        vec![Completion {
            id,
            outcome: Outcome::Done(Response {
                status: Status::CheckCondition,
                sense: sense.to_vec(),
                data_in_residual: Residual::Underflow(512),
                data_out_residual: Residual::None,
                invalidated: Some(Rkey(0x1234)),
            }),
        }]
    );
    assert_eq!((h.ch.req_lim(), h.ch.outstanding()), (Some(8), 0));
    assert_eq!(h.ch.poll_timeout(), None, "command deadline cleared");
}

#[test]
fn small_writes_go_as_immediate_data_large_ones_by_descriptor() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 8);
    h.submit(write_cmd(512));
    let cmd = h.sent_cmd(0);
    assert_eq!(cmd.data_out, DataDesc::Immediate);
    assert_eq!(cmd.imm_data, &[0x5a; 512][..]);
    assert_eq!(h.sent[0].len(), 68 + 512);
    h.submit(write_cmd(16384));
    let cmd = h.sent_cmd(0);
    assert_eq!(
        cmd.data_out,
        DataDesc::Direct(DirectBuf::new_const(0x2000_0000, 0x5678, 16384))
    );
    assert!(cmd.imm_data.is_empty());
}

#[test]
fn credits_keep_one_for_task_management_and_commands_wait() {
    let mut cfg = config(LoginForm::IbCm);
    cfg.max_queued = 2;
    let mut h = Harness::logged_in(cfg, 4);
    let ids: Vec<CmdId> = (0..5).map(|_| h.submit(read_cmd(0))).collect();
    assert_eq!(h.sent.len(), 3, "window 4 less the TMF reserve");
    assert_eq!(
        (h.ch.req_lim(), h.ch.outstanding(), h.ch.queued()),
        (Some(1), 3, 2)
    );
    let busy = h.ch.submit(h.now, read_cmd(1)).expect_err("queue full");
    assert_eq!(busy.reason, InitiatorError::Busy { queued: 2 });
    assert_eq!(busy.command.lun, lun(1));
    // One response returns one credit: the oldest waiting command goes.
    let first = h.sent_cmd(2).tag;
    h.recv(&rsp(first, 1));
    assert_eq!(h.done.len(), 1);
    assert_eq!(h.done[0].id, ids[0]);
    assert_eq!(
        (h.sent.len(), h.ch.queued(), h.ch.req_lim()),
        (4, 1, Some(1))
    );
    // SRP_CRED_REQ grants two: answered with CRED_RSP, the last waiting command goes.
    h.recv(&cred_req(Tag(0x77), 2));
    assert_eq!(h.sent.len(), 6);
    let cred_rsp = crate::wire::cred::CredRsp::parse(&h.sent[4]).expect("CRED_RSP first");
    assert_eq!(cred_rsp.tag, Tag(0x77));
    assert_eq!(h.sent_cmd(0).lun, lun(0));
    assert_eq!((h.ch.queued(), h.ch.req_lim()), (0, Some(2)));
    assert_eq!(h.events, vec![Event::CreditRequest { delta: 2 }]);
}

#[test]
fn aer_is_acknowledged_and_its_credits_kept() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    let sense = [
        0x70, 0, 0x06, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x2a, 0x09, 0, 0, 0, 0,
    ];
    h.recv(&aer_req(Tag(0x99), 3, lun(2), &sense));
    assert_eq!(
        h.events,
        vec![Event::AsyncEvent {
            lun: lun(2),
            sense: sense.to_vec()
        }]
    );
    let ack = crate::wire::aer::AerRsp::parse(&h.sent[0]).expect("AER_RSP");
    assert_eq!(ack.tag, Tag(0x99));
    assert_eq!(h.ch.req_lim(), Some(7));
    assert_eq!(h.ch.state(), PortState::Running);
}

#[test]
fn stale_tag_in_a_response_resets_the_channel() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    h.submit(read_cmd(0));
    let old = h.sent_cmd(0).tag;
    h.recv(&rsp(old, 1));
    h.submit(read_cmd(0));
    let new = h.sent_cmd(0).tag;
    assert_eq!(
        (old, new),
        (Tag(0x0000_0001_0000_0000), Tag(0x0000_0002_0000_0000))
    );
    // The target answers the finished command again: the slot's generation moved on.
    h.recv(&rsp(old, 1));
    assert_eq!(
        h.events,
        vec![
            Event::ChannelLost(LossCause::Protocol(InitiatorError::UnknownTag(old))),
            Event::StateChanged {
                from: PortState::Running,
                to: PortState::Blocked
            },
            Event::ReconnectScheduled {
                at: Time(10 * SEC),
                failed_reconnects: 0
            },
        ]
    );
    assert_eq!(h.disconnects, 1);
    assert_eq!(h.done.len(), 1, "the live command is held, not failed");
    assert_eq!((h.ch.queued(), h.ch.outstanding()), (1, 0));
}

#[test]
fn malformed_response_resets_the_channel() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    h.submit(read_cmd(0));
    let tag = h.sent_cmd(0).tag;
    let bytes = rsp(tag, 1);
    h.recv(&bytes[..20]);
    assert_eq!(
        h.events[0],
        Event::ChannelLost(LossCause::Protocol(InitiatorError::MalformedIu(
            WireError::Truncated {
                iu: "SRP_RSP",
                need: 36,
                have: 20
            }
        )))
    );
    assert_eq!(h.ch.state(), PortState::Blocked);
    // An IU no initiator receives is a protocol error too.
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    h.recv(&login_rsp(Tag(1), 4, false));
    assert_eq!(
        h.events[0],
        Event::ChannelLost(LossCause::Protocol(InitiatorError::UnexpectedIu(
            crate::wire::IuType::LoginRsp
        )))
    );
}

#[test]
fn timeout_escalates_abort_then_lun_reset_then_channel_reset() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    let stuck = h.submit(read_cmd(5));
    let tag = h.sent_cmd(0).tag;
    let bystander = h.submit(Command {
        timeout: Some(secs(120)),
        ..read_cmd(6)
    });
    h.advance(secs(29));
    assert_eq!(h.sent.len(), 2);
    h.advance(secs(1));
    let abort = h.sent_tmf();
    assert_eq!(
        (abort.function, abort.lun, abort.task_tag),
        (TaskMgmtFunction::AbortTask, lun(5), tag)
    );
    assert_eq!(
        h.events,
        vec![Event::Escalated {
            id: stuck,
            step: EscalationStep::AbortTask
        }]
    );
    h.advance(secs(5));
    let reset = h.sent_tmf();
    assert_eq!(
        (reset.function, reset.lun, reset.task_tag),
        (TaskMgmtFunction::LogicalUnitReset, lun(5), Tag(0))
    );
    h.advance(secs(5));
    assert_eq!(
        h.events,
        vec![
            Event::Escalated {
                id: stuck,
                step: EscalationStep::AbortTask
            },
            Event::Escalated {
                id: stuck,
                step: EscalationStep::LunReset
            },
            Event::Escalated {
                id: stuck,
                step: EscalationStep::ChannelReset
            },
            Event::ChannelLost(LossCause::Escalation),
            Event::StateChanged {
                from: PortState::Running,
                to: PortState::Blocked
            },
            Event::ReconnectScheduled {
                at: Time(40 * SEC),
                failed_reconnects: 0
            },
        ]
    );
    assert_eq!(
        h.done,
        vec![Completion {
            id: stuck,
            outcome: Outcome::TimedOut
        }]
    );
    assert_eq!(h.ch.queued(), 1, "the bystander on another LUN is held");
    // The reconnect runs at once (host reset), and the bystander is re-sent after it.
    assert_eq!(h.connects.len(), 2);
    assert_eq!(h.connects[1].0, Time(40 * SEC));
    h.ch.handle_login_rsp(h.now, &login_rsp(h.login_tag(), 4, true));
    h.pump();
    assert_eq!(h.sent_cmd(0).lun, lun(6));
    h.recv(&rsp(h.sent_cmd(0).tag, 1));
    assert_eq!(h.done[1].id, bystander);
    assert!(matches!(h.done[1].outcome, Outcome::Done(_)));
}

#[test]
fn successful_abort_ends_the_command_and_its_late_response_is_tolerated() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    let id = h.submit(read_cmd(0));
    let tag = h.sent_cmd(0).tag;
    h.advance(secs(30));
    let abort = h.sent_tmf();
    h.recv(&tmf_rsp(abort.tag, 1, TmfResponse::Complete));
    assert_eq!(
        h.done,
        vec![Completion {
            id,
            outcome: Outcome::Aborted
        }]
    );
    h.recv(&rsp(tag, 1));
    assert_eq!(h.events.last(), Some(&Event::LateResponse(tag)));
    assert_eq!(
        (h.ch.state(), h.ch.req_lim()),
        (PortState::Running, Some(4))
    );
    // A second late response for the same tag is no longer tolerated.
    h.recv(&rsp(tag, 1));
    assert_eq!(h.ch.state(), PortState::Blocked);
}

#[test]
fn failed_abort_then_successful_lun_reset_resets_every_command_on_the_lun() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 8);
    let a = h.submit(read_cmd(1));
    h.advance(secs(10));
    let b = h.submit(read_cmd(1));
    let c = h.submit(read_cmd(2));
    h.advance(secs(20));
    let abort = h.sent_tmf();
    h.recv(&tmf_rsp(abort.tag, 1, TmfResponse::Failed));
    let reset = h.sent_tmf();
    assert_eq!(reset.function, TaskMgmtFunction::LogicalUnitReset);
    h.recv(&tmf_rsp(reset.tag, 1, TmfResponse::Complete));
    assert_eq!(
        h.done,
        vec![
            Completion {
                id: a,
                outcome: Outcome::Reset
            },
            Completion {
                id: b,
                outcome: Outcome::Reset
            },
        ]
    );
    assert_eq!(h.ch.outstanding(), 1, "{c:?} on LUN 2 still runs");
    assert_eq!(h.ch.state(), PortState::Running);
}

#[test]
fn abort_may_take_the_last_credit_and_an_unsendable_lun_reset_escalates_at_once() {
    // Window 2: one command, one credit kept for task management.
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 2);
    let id = h.submit(read_cmd(4));
    let waiting = h.submit(read_cmd(4));
    assert_eq!(
        (h.ch.req_lim(), h.ch.outstanding(), h.ch.queued()),
        (Some(1), 1, 1)
    );
    h.advance(secs(30));
    assert_eq!(h.sent_tmf().function, TaskMgmtFunction::AbortTask);
    assert_eq!(h.ch.req_lim(), Some(0), "the TMF took the reserve");
    // The abort hangs and holds the last credit: LOGICAL UNIT RESET cannot be sent, which
    // counts as failed (ib_srp: srp_send_tsk_mgmt fails), so the channel is reset at once.
    h.advance(secs(5));
    assert_eq!(h.sent.len(), 2, "no LUN RESET went out");
    assert_eq!(
        h.events,
        vec![
            Event::Escalated {
                id,
                step: EscalationStep::AbortTask
            },
            Event::Escalated {
                id,
                step: EscalationStep::LunReset
            },
            Event::Escalated {
                id,
                step: EscalationStep::ChannelReset
            },
            Event::ChannelLost(LossCause::Escalation),
            Event::StateChanged {
                from: PortState::Running,
                to: PortState::Blocked
            },
            Event::ReconnectScheduled {
                at: Time(35 * SEC),
                failed_reconnects: 0
            },
        ]
    );
    assert_eq!(
        h.done,
        vec![Completion {
            id,
            outcome: Outcome::TimedOut
        }]
    );
    assert_eq!(h.ch.queued(), 1, "{waiting:?} still held");
}

#[test]
fn caller_abort_task_ends_only_its_command_and_reports_complete() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    let a = h.submit(read_cmd(0));
    let a_tag = h.sent_cmd(0).tag;
    let b = h.submit(read_cmd(0));
    let tmf = h.ch.abort_task(h.now, a);
    h.pump();
    let sent = h.sent_tmf();
    assert_eq!(sent.function, TaskMgmtFunction::AbortTask);
    assert_eq!(sent.task_tag, a_tag);
    assert!(h.tmfs.is_empty(), "no answer yet");
    h.recv(&tmf_rsp(sent.tag, 1, TmfResponse::Complete));
    assert_eq!(
        h.done,
        vec![Completion {
            id: a,
            outcome: Outcome::Aborted
        }]
    );
    assert_eq!(
        h.tmfs,
        vec![TmfCompletion {
            id: tmf,
            result: TmfResult::Complete
        }]
    );
    // The aborted command's late response is tolerated; the other one is untouched.
    h.recv(&rsp(a_tag, 1));
    assert_eq!(h.events.last(), Some(&Event::LateResponse(a_tag)));
    assert_eq!(h.ch.outstanding(), 1, "{b:?} still runs");
    // Its deadline went with it: only b escalates at 30 s.
    h.advance(secs(30));
    assert_eq!(h.sent_tmf().task_tag, h.sent_cmd(2).tag);
}

#[test]
fn caller_abort_refused_leaves_the_command_and_an_unknown_one_is_not_found() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 4);
    let a = h.submit(read_cmd(0));
    let tmf = h.ch.abort_task(h.now, a);
    h.pump();
    h.recv(&tmf_rsp(h.sent_tmf().tag, 1, TmfResponse::Failed));
    assert_eq!(h.tmfs[0].id, tmf);
    assert_eq!(h.tmfs[0].result, TmfResult::Rejected);
    assert!(h.done.is_empty());
    h.recv(&rsp(h.sent_cmd(1).tag, 1));
    assert_eq!(h.done.len(), 1);
    let gone = h.ch.abort_task(h.now, a);
    h.pump();
    assert_eq!(
        h.tmfs[1],
        TmfCompletion {
            id: gone,
            result: TmfResult::NotFound
        }
    );
    assert_eq!(h.ch.state(), PortState::Running);
}

#[test]
fn caller_abort_of_a_command_not_sent_yet_needs_no_tmf() {
    // Window 2: one command goes, the next waits for a credit.
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 2);
    let _a = h.submit(read_cmd(0));
    let b = h.submit(read_cmd(0));
    let sent = h.sent.len();
    let tmf = h.ch.abort_task(h.now, b);
    h.pump();
    assert_eq!(h.sent.len(), sent, "nothing sent");
    assert_eq!(
        h.done,
        vec![Completion {
            id: b,
            outcome: Outcome::Aborted
        }]
    );
    assert_eq!(h.tmfs[0].id, tmf);
    assert_eq!(h.tmfs[0].result, TmfResult::Complete);
    assert_eq!(h.ch.queued(), 0);
}

#[test]
fn caller_lun_reset_resets_the_luns_sent_commands_and_times_out_cleanly() {
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 8);
    let a = h.submit(read_cmd(1));
    let b = h.submit(read_cmd(1));
    let c = h.submit(read_cmd(2));
    let tmf = h.ch.reset_lun(h.now, lun(1));
    h.pump();
    let sent = h.sent_tmf();
    assert_eq!(sent.function, TaskMgmtFunction::LogicalUnitReset);
    assert_eq!(sent.lun, lun(1));
    h.recv(&tmf_rsp(sent.tag, 1, TmfResponse::Complete));
    let ended: Vec<_> = h.done.iter().map(|d| (d.id, d.outcome.clone())).collect();
    assert_eq!(ended, vec![(a, Outcome::Reset), (b, Outcome::Reset)]);
    assert_eq!(
        h.tmfs,
        vec![TmfCompletion {
            id: tmf,
            result: TmfResult::Complete
        }]
    );
    assert_eq!(h.ch.outstanding(), 1, "{c:?} on LUN 2 still runs");
    // A reset nobody answers times out after tmf_timeout; the commands stay.
    let again = h.ch.reset_lun(h.now, lun(2));
    h.pump();
    h.advance(secs(5));
    assert_eq!(
        h.tmfs[1],
        TmfCompletion {
            id: again,
            result: TmfResult::TimedOut
        }
    );
    assert_eq!(h.ch.outstanding(), 1);
    assert_eq!(h.ch.state(), PortState::Running);
}

#[test]
fn caller_tmf_without_a_channel_is_not_sent() {
    let mut h = Harness::new(config(LoginForm::IbCm));
    let tmf = h.ch.reset_lun(h.now, lun(0));
    h.pump();
    assert_eq!(
        h.tmfs,
        vec![TmfCompletion {
            id: tmf,
            result: TmfResult::NotSent
        }]
    );
}

#[test]
fn withdraw_takes_back_only_a_command_not_sent_yet() {
    // Window 2: one command goes, the next waits for a credit.
    let mut h = Harness::logged_in(config(LoginForm::IbCm), 2);
    let a = h.submit(read_cmd(0));
    let b = h.submit(read_cmd(0));
    let sent = h.sent.len();
    assert!(!h.ch.withdraw(a), "the target has the first one");
    assert!(h.ch.withdraw(b), "the second one never went");
    assert!(!h.ch.withdraw(b), "and is gone");
    h.pump();
    assert_eq!(h.sent.len(), sent, "nothing sent: no TMF");
    assert_eq!(
        h.done,
        vec![Completion {
            id: b,
            outcome: Outcome::Reset
        }]
    );
    assert!(h.tmfs.is_empty());
    assert_eq!((h.ch.outstanding(), h.ch.queued()), (1, 0));
    // The credit the first one's answer returns sends nothing withdrawn.
    h.recv(&rsp(h.sent_cmd(0).tag, 1));
    assert_eq!(h.sent.len(), sent);
    assert_eq!(h.done.len(), 2);
    assert_eq!(h.done[1].id, a);
}
