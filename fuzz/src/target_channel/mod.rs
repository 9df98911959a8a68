//! `target_channel`: srp-target's [`TargetChannel`] driven as the daemon drives it, by a
//! script read from the input: IUs received (raw bytes, or well-formed SRP_CMD, SRP_TSK_MGMT,
//! SRP_CRED_RSP, SRP_AER_RSP, SRP_I_LOGOUT, sometimes damaged), the RTU, command and task
//! management responses, aborts, credit and probe requests, target logouts and closes.
//!
//! After every step the core is compared with a shadow ([`model::Model`]): the state, the
//! tags in progress (each handed out once, never while live), the credit count (conserved,
//! never beyond the window), one target request at a time, no response for a tag not in
//! progress, each response's REQUEST LIMIT DELTA, sense cut to the negotiated IU length; a
//! faulted channel sends its T_LOGOUT and then accepts nothing and asks nothing. At the end
//! every request is answered and the channel must close with every credit back.

mod ius;
mod model;

use crate::input::Input;
use model::Model;
use scsi::Status;
use srp::channel::{Buffer, ChannelError};
use srp::wire::cred::CredReq;
use srp::wire::login::{BufFormats, LoginReqFlags};
use srp::wire::logout::{TLogout, TLogoutReason};
use srp::wire::rsp::{Residual, Rsp, TmfResponse};
use srp::wire::{IuType, Tag};
use srp_target::channel::core::Pending;
use srp_target::channel::{ChannelState, Fault, Request, TargetChannel};
use srp_target::login::{ChannelId, Negotiated};
use wirekit::WireRepr;

/// Steps per input: enough to fill and drain any window several times.
const MAX_STEPS: usize = 512;
/// The largest transfer the channel accepts per command.
const MAX_TRANSFER: u64 = 1 << 16;

/// One input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mut h = Harness::new(&mut input);
    let mut steps = 0;
    while !input.is_empty() && steps < MAX_STEPS {
        h.step(&mut input);
        h.model.check(&h.ch);
        steps += 1;
    }
    h.finish();
}

struct Harness {
    ch: TargetChannel,
    model: Model,
    neg: Negotiated,
    losolnt: bool,
}

impl Harness {
    /// A channel with parameters from the input's first bytes, live or awaiting its RTU.
    fn new(input: &mut Input<'_>) -> Harness {
        let cfg = input.u8();
        let formats = [
            BufFormats::DIRECT | BufFormats::INDIRECT,
            BufFormats::DIRECT,
            BufFormats::INDIRECT,
            BufFormats::empty(),
        ][usize::from(cfg >> 4) & 3];
        let neg = Negotiated {
            it_iu_len: input.pick(&[64, 128, 256, 512, 4096]),
            ti_iu_len: input.pick(&[64, 68, 100, 260]),
            formats,
            imm_data_offset: (cfg & 8 != 0).then(|| input.pick(&[68, 64, 80])),
            window: 1 + u32::from(cfg & 7),
        };
        let losolnt = cfg & 0x40 != 0;
        let flags = if losolnt {
            LoginReqFlags::LOSOLNT
        } else {
            LoginReqFlags::empty()
        };
        let table_entries = input.pick(&[1, 4, 16]);
        let ch = TargetChannel::new(ChannelId(7), neg, flags, MAX_TRANSFER, table_entries);
        let mut h = Harness {
            ch,
            model: Model::new(neg.window),
            neg,
            losolnt,
        };
        if cfg & 0x80 != 0 {
            h.rtu();
        }
        h.model.check(&h.ch);
        h
    }

    fn step(&mut self, input: &mut Input<'_>) {
        let live = self.model.announced();
        match input.below(16) {
            0 | 1 => {
                let len = usize::from(input.u16()) % (self.neg.it_iu_len as usize + 8);
                let iu = input.bytes(len).to_vec();
                self.recv(&iu);
            }
            2..=4 => {
                let off = match input.below(8) {
                    0 => input.pick(&[64, 68, 80]),
                    _ => self.neg.imm_data_offset.unwrap_or(68),
                };
                if let Some(iu) = ius::cmd(input, &live, off) {
                    let iu = ius::damage(input, iu);
                    self.recv(&iu);
                }
            }
            5 => {
                let iu = ius::tmf(input, &live);
                let iu = ius::damage(input, iu);
                self.recv(&iu);
            }
            6 => {
                let iu = ius::small(input);
                let iu = ius::damage(input, iu);
                self.recv(&iu);
            }
            7..=9 => self.respond(input, &live),
            10 => self.respond_tmf(input, &live),
            11 => self.abort(input, &live),
            12 => self.cred_req(input, false),
            13 => self.cred_req(input, true),
            14 => self.rtu(),
            _ => match input.below(4) {
                0 => self.close(),
                1 => {
                    let reason = TLogoutReason::from(input.u32() % 10);
                    self.logout(reason);
                }
                _ => self.rtu(),
            },
        }
    }

    /// The CM RTU: the channel goes live and the parked IUs are handled, in order.
    fn rtu(&mut self) {
        let parked = self.ch.on_rtu();
        if self.model.state == ChannelState::Connecting {
            self.model.state = ChannelState::Live;
        }
        assert_eq!(parked, self.model.parked, "the IUs parked before the RTU");
        self.model.parked.clear();
        for iu in parked {
            self.recv(&iu);
        }
    }

    fn recv(&mut self, iu: &[u8]) {
        let too_long = iu.len() > self.neg.it_iu_len as usize;
        let r = self.ch.on_recv(iu);
        match self.model.state {
            ChannelState::Connecting => match r {
                Ok(Request::None) if !too_long => self.model.parked.push(iu.to_vec()),
                // The daemon ignores faults before the channel is live (no QP to send on).
                Err(Fault::IuTooLong { .. }) if too_long => {}
                other => panic!("before the RTU: {other:?}"),
            },
            ChannelState::Draining | ChannelState::Closed => {
                assert!(
                    matches!(r, Err(Fault::NotLive(_))),
                    "a closing channel accepted an IU: {r:?}"
                );
            }
            ChannelState::Live if too_long => {
                assert!(matches!(r, Err(Fault::IuTooLong { .. })), "{r:?}");
                self.fault(r.err());
            }
            ChannelState::Live => self.live_result(iu, r),
        }
    }

    fn live_result(&mut self, iu: &[u8], r: Result<Request, Fault>) {
        let code = iu.first().map(|&c| IuType::from(c));
        match r {
            Ok(Request::Command {
                tag,
                lun,
                cdb,
                plan,
                imm_data,
                ..
            }) => {
                assert_eq!(code, Some(IuType::Cmd));
                assert!(cdb.len() >= 16);
                for b in [&plan.data_out, &plan.data_in].into_iter().flatten() {
                    assert!(b.len() <= MAX_TRANSFER, "a plan beyond the transfer limit");
                    check_buffer(b, &imm_data, &self.neg);
                }
                if !matches!(plan.data_out, Some(Buffer::Immediate(_))) {
                    assert!(imm_data.is_empty());
                }
                self.model.admit(tag, Pending { lun, tmf: false });
            }
            Ok(Request::BadCommand { tag, lun, error }) => {
                assert_eq!(code, Some(IuType::Cmd));
                assert!(
                    matches!(
                        error,
                        ChannelError::DataTooLong { .. } | ChannelError::TableTooLong { .. }
                    ),
                    "{error:?}"
                );
                self.model.admit(tag, Pending { lun, tmf: false });
            }
            Ok(Request::TaskMgmt { tag, lun, .. }) => {
                assert_eq!(code, Some(IuType::TskMgmt));
                self.model.admit(tag, Pending { lun, tmf: true });
            }
            Ok(Request::Logout) => {
                assert_eq!(code, Some(IuType::ILogout));
                self.model.close();
            }
            Ok(Request::None) => {
                assert!(matches!(code, Some(IuType::CredRsp | IuType::AerRsp)));
                assert!(
                    self.model.target_requests > 0,
                    "a response to nothing accepted"
                );
                self.model.target_requests -= 1;
            }
            Err(f) => {
                self.account_fault(iu, &f);
                self.fault(Some(f));
            }
        }
    }

    /// What a fault on a live channel says of the credit and tag it may have counted.
    fn account_fault(&mut self, iu: &[u8], f: &Fault) {
        match f {
            Fault::CreditOverrun(_) => assert_eq!(self.model.credits, 0, "overrun with credits"),
            Fault::DuplicateTag(ChannelError::DuplicateTag(t)) => {
                assert!(self.model.live.contains_key(t), "{t:?} is not in progress");
                // The credit was spent before the tag was refused.
                assert!(self.model.credits > 0);
                self.model.credits -= 1;
                self.model.spent_on_faults += 1;
            }
            Fault::Descriptor(_) if self.ch.outstanding() > self.model.live.len() => {
                // Counted, then refused for a format not negotiated: the tag stays in
                // progress, unannounced, until the channel is torn down.
                let off = self.neg.imm_data_offset.unwrap_or(0);
                let cmd = srp::wire::cmd::Cmd::parse_with(iu, off).expect("it was counted");
                assert!(self.model.credits > 0);
                self.model.credits -= 1;
                assert!(
                    self.model
                        .live
                        .insert(
                            cmd.tag,
                            Pending {
                                lun: cmd.lun,
                                tmf: false
                            }
                        )
                        .is_none()
                );
            }
            Fault::SpuriousResponse(_) => assert_eq!(self.model.target_requests, 0),
            Fault::WrongIuType(c) => assert!(!matches!(
                IuType::from(*c),
                IuType::Cmd | IuType::TskMgmt | IuType::ILogout | IuType::CredRsp | IuType::AerRsp
            )),
            Fault::Malformed(_) | Fault::Descriptor(_) => {}
            other => panic!("unexpected fault on a live channel: {other:?}"),
        }
    }

    /// As the daemon answers a fault: T_LOGOUT with its reason, and the channel closes.
    fn fault(&mut self, f: Option<Fault>) {
        let f = f.expect("a fault");
        assert!(!f.to_string().is_empty());
        self.logout(f.reason());
        self.model.faulted = true;
    }

    fn logout(&mut self, reason: TLogoutReason) {
        let mut buf = vec![0u8; self.neg.ti_iu_len as usize];
        let n = self.ch.logout(reason, &mut buf).expect("T_LOGOUT fits");
        let t = TLogout::parse(&buf[..n]).expect("our T_LOGOUT parses");
        assert_eq!((t.reason, t.solicited), (reason, self.losolnt));
        self.model.close();
    }

    fn close(&mut self) {
        let closed = self.ch.close();
        self.model.close();
        self.model.parked.clear();
        self.model.drained();
        assert_eq!(closed, self.model.state == ChannelState::Closed);
    }

    fn respond(&mut self, input: &mut Input<'_>, live: &[Tag]) {
        let tag = ius::tag(input, live);
        let status = input.pick(&[
            Status::Good,
            Status::CheckCondition,
            Status::ReservationConflict,
            Status::Busy,
            Status::TaskSetFull,
        ]);
        let sense_len = usize::from(sense_len(input));
        let sense = input.bytes(sense_len).to_vec();
        let (dout, din) = (residual(input), residual(input));
        let mut buf = vec![0u8; self.neg.ti_iu_len as usize];
        let r = self.ch.respond(tag, status, &sense, dout, din, &mut buf);
        let Some(n) = self.answered(tag, r) else {
            return;
        };
        let rsp = Rsp::parse(&buf[..n]).expect("our SRP_RSP parses");
        let room = (self.neg.ti_iu_len as usize).saturating_sub(36);
        assert_eq!(rsp.tag, tag);
        assert_eq!(rsp.status, status);
        assert_eq!((rsp.data_out_residual, rsp.data_in_residual), (dout, din));
        assert_eq!(
            rsp.sense,
            &sense[..sense.len().min(room)],
            "sense cut to fit"
        );
        self.model.answered(tag, rsp.req_lim_delta);
    }

    fn respond_tmf(&mut self, input: &mut Input<'_>, live: &[Tag]) {
        let tag = ius::tag(input, live);
        let code = TmfResponse::from(input.pick(&[0, 2, 4, 5, 9]));
        let mut buf = vec![0u8; self.neg.ti_iu_len as usize];
        let r = self.ch.respond_tmf(tag, code, &mut buf);
        let Some(n) = self.answered(tag, r) else {
            return;
        };
        let rsp = Rsp::parse(&buf[..n]).expect("our SRP_RSP parses");
        assert_eq!((rsp.tag, rsp.tmf_response()), (tag, Some(code)));
        self.model.answered(tag, rsp.req_lim_delta);
    }

    /// A response is built exactly for a tag in progress, and fits the negotiated length.
    fn answered(&self, tag: Tag, r: Option<usize>) -> Option<usize> {
        if !self.model.live.contains_key(&tag) {
            assert_eq!(r, None, "a response for {tag:?}, which is not in progress");
            return None;
        }
        let n = r.expect("a tag in progress is answered");
        assert!(n <= self.neg.ti_iu_len as usize, "SRP_RSP beyond ti_iu_len");
        Some(n)
    }

    fn abort(&mut self, input: &mut Input<'_>, live: &[Tag]) {
        let how = input.below(3);
        let tag = ius::tag(input, live);
        let lun = ius::lun(input);
        let pred = |t: Tag, p: &Pending| match how {
            0 => t == tag,
            1 => p.lun == lun,
            _ => true,
        };
        let dropped = self.ch.abort_matching(pred);
        let expected: Vec<Tag> = self
            .model
            .live
            .iter()
            .filter(|(t, p)| !p.tmf && pred(**t, p))
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(dropped, expected, "the requests dropped, in tag order");
        for t in &dropped {
            self.model.live.remove(t);
            self.model.announced.remove(t);
        }
        self.model.owed += u32::try_from(dropped.len()).unwrap_or(u32::MAX);
        self.model.drained();
    }

    /// SRP_CRED_REQ returning owed credits, or (`probe`) one that may grant none.
    fn cred_req(&mut self, input: &mut Input<'_>, probe: bool) {
        let len = if input.below(8) == 0 {
            input.below(16)
        } else {
            16
        };
        let mut buf = vec![0u8; len];
        let r = if probe {
            self.ch.probe_req(&mut buf)
        } else {
            self.ch.cred_req(&mut buf)
        };
        let m = &mut self.model;
        let may = m.state == ChannelState::Live && m.target_requests == 0 && len >= 16;
        assert_eq!(r.is_some(), may && (probe || m.owed > 0), "{probe} {r:?}");
        if let Some(n) = r {
            let req = CredReq::parse(&buf[..n]).expect("our SRP_CRED_REQ parses");
            assert_eq!(req.req_lim_delta, m.owed);
            m.credits += m.owed;
            m.owed = 0;
            m.target_requests += 1;
        }
    }

    /// The driver answers everything still in progress and closes; every credit is back.
    fn finish(mut self) {
        let mut buf = vec![0u8; self.neg.ti_iu_len as usize];
        for tag in self.model.live.keys().copied().collect::<Vec<_>>() {
            let n = self
                .ch
                .respond(
                    tag,
                    Status::Good,
                    &[],
                    Residual::None,
                    Residual::None,
                    &mut buf,
                )
                .expect("in progress");
            let rsp = Rsp::parse(&buf[..n]).expect("parses");
            self.model.answered(tag, rsp.req_lim_delta);
            self.model.check(&self.ch);
        }
        self.close();
        self.model.check(&self.ch);
        assert_eq!(self.ch.state(), ChannelState::Closed);
        assert_eq!(
            self.model.credits + self.model.owed + self.model.spent_on_faults,
            self.model.window
        );
    }
}

/// A sense length: none, a typical one, or long.
fn sense_len(input: &mut Input<'_>) -> u8 {
    input.pick(&[0, 18, 32, 96, 252])
}

fn residual(input: &mut Input<'_>) -> Residual {
    match input.below(3) {
        0 => Residual::None,
        1 => Residual::Underflow(input.u32()),
        _ => Residual::Overflow(input.u32()),
    }
}

/// A planned buffer is one the login allows: its format negotiated, immediate data the
/// IU's, a whole inline list summing to its total.
fn check_buffer(b: &Buffer, imm_data: &[u8], neg: &Negotiated) {
    match b {
        Buffer::Immediate(n) => {
            assert!(
                neg.imm_data_offset.is_some(),
                "immediate data not negotiated"
            );
            assert_eq!(*n as usize, imm_data.len());
        }
        Buffer::Segments(s) => {
            assert!(
                neg.formats
                    .intersects(BufFormats::DIRECT | BufFormats::INDIRECT)
            );
            assert!(s.iter().count() <= 255);
        }
        Buffer::FetchTable { table, inline, .. } => {
            assert!(neg.formats.contains(BufFormats::INDIRECT));
            assert!(inline.len() < table.len() as usize / 16, "a partial list");
            // The table as the initiator's memory holds it: the inline prefix, then more.
            let mut fetched: Vec<u8> = Vec::new();
            for d in inline {
                fetched.extend_from_slice(zerocopy::IntoBytes::as_bytes(d));
            }
            fetched.resize(table.len() as usize, 0);
            if let Ok(Buffer::Segments(s)) = b.clone().complete_table(&fetched) {
                assert_eq!(s.iter().count() * 16, table.len() as usize);
            }
        }
    }
}
