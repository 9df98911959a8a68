//! A scripted target for the initiator tests: drives an [`InitiatorChannel`] by hand,
//! records what it asks the driver to do, and builds real IUs with `srp::wire`.

use super::*;
use crate::wire::aer::AerReq;
use crate::wire::cmd::{Cmd, TaskAttr};
use crate::wire::cred::CredReq;
use crate::wire::desc::DirectBuf;
use crate::wire::login::{
    BufFormats, LoginRej, LoginRejReason, LoginRsp, LoginRspFlags, MultiChannelResult,
};
use crate::wire::logout::{TLogout, TLogoutReason};
use crate::wire::rsp::{Residual, Rsp, TmfResponse};
use crate::wire::tsk_mgmt::TskMgmt;
use crate::wire::{IoClass, PortId, Tag};
use core::time::Duration;
use ib_verbs::Guid;
use ib_verbs::time::Time;
use scsi::Lun;
use scsi::status::Status;
use wirekit::WireRepr;

pub(super) const SEC: u64 = 1_000_000_000;

pub(super) fn emit<'a, T: WireRepr<'a>>(iu: &T) -> Vec<u8> {
    let mut b = vec![0; iu.buffer_len()];
    let n = iu.emit(&mut b).expect("test IU encodes");
    b.truncate(n);
    b
}

pub(super) fn ports() -> (PortId, PortId) {
    (
        PortId::new(0x11, Guid(0x0002_c903_0001_0a2b), IoClass::SrpR16a),
        PortId::new(0x22, Guid(0x0002_c903_0001_0a2c), IoClass::SrpR16a),
    )
}

pub(super) fn config(form: LoginForm) -> InitiatorConfig {
    let (i, t) = ports();
    InitiatorConfig::new(LoginParams::new(form, i, t))
}

pub(super) fn login_rsp(tag: Tag, window: u32, imm: bool) -> Vec<u8> {
    emit(&LoginRsp {
        req_lim_delta: window,
        tag,
        max_it_iu_len: 8260,
        max_ti_iu_len: 8260,
        buf_fmt: BufFormats::DIRECT | BufFormats::INDIRECT,
        multi_channel: MultiChannelResult::NoChannel,
        flags: if imm {
            LoginRspFlags::IMMED_SUPP
        } else {
            LoginRspFlags::empty()
        },
    })
}

pub(super) fn login_rej(tag: Tag, reason: LoginRejReason, fmts: BufFormats) -> Vec<u8> {
    emit(&LoginRej {
        reason,
        tag,
        buf_fmt: fmts,
    })
}

pub(super) fn rsp(tag: Tag, delta: u32) -> Vec<u8> {
    emit(&Rsp {
        solicited: false,
        req_lim_delta: delta,
        tag,
        status: Status::Good,
        data_out_residual: Residual::None,
        data_in_residual: Residual::None,
        resp_data: &[],
        sense: &[],
    })
}

pub(super) fn tmf_rsp(tag: Tag, delta: u32, code: TmfResponse) -> Vec<u8> {
    let data = code.response_data();
    emit(&Rsp {
        solicited: false,
        req_lim_delta: delta,
        tag,
        status: Status::Good,
        data_out_residual: Residual::None,
        data_in_residual: Residual::None,
        resp_data: &data,
        sense: &[],
    })
}

pub(super) fn cred_req(tag: Tag, delta: u32) -> Vec<u8> {
    emit(&CredReq {
        solicited: false,
        req_lim_delta: delta,
        tag,
    })
}

pub(super) fn aer_req(tag: Tag, delta: u32, lun: Lun, sense: &[u8]) -> Vec<u8> {
    emit(&AerReq {
        solicited: false,
        req_lim_delta: delta,
        tag,
        lun,
        sense,
    })
}

pub(super) fn t_logout(reason: TLogoutReason) -> Vec<u8> {
    emit(&TLogout {
        solicited: false,
        reason,
        tag: Tag(0),
    })
}

pub(super) fn lun(n: u32) -> Lun {
    Lun::from_number(n).expect("small LUN")
}

/// READ(10) of 8 blocks into a registered 4 KiB buffer.
pub(super) fn read_cmd(l: u32) -> Command {
    Command {
        lun: lun(l),
        cdb: vec![0x28, 0, 0, 0, 0, 0x10, 0, 0, 8, 0].into(),
        task_attr: TaskAttr::Simple,
        dir: DataDir::Read,
        data_len: 4096,
        data: DataDescriptors::Direct(DirectBuf::new_const(0x1000_0000, 0x1234, 4096)),
        imm_data: vec![],
        remote_invalidate: true,
        timeout: None,
    }
}

/// WRITE(10) of `len` bytes, offered as immediate data too.
pub(super) fn write_cmd(len: u32) -> Command {
    Command {
        lun: lun(0),
        cdb: vec![0x2a, 0, 0, 0, 0, 0x20, 0, 0, (len / 512) as u8, 0].into(),
        task_attr: TaskAttr::Simple,
        dir: DataDir::Write,
        data_len: len,
        data: DataDescriptors::Direct(DirectBuf::new_const(0x2000_0000, 0x5678, len)),
        imm_data: vec![0x5a; len as usize],
        remote_invalidate: false,
        timeout: None,
    }
}

/// The channel plus everything it asked for, with sends completed at once.
pub(super) struct Harness {
    pub(super) ch: InitiatorChannel,
    pub(super) now: Time,
    pub(super) sent: Vec<Vec<u8>>,
    pub(super) connects: Vec<(Time, LoginForm, Vec<u8>)>,
    pub(super) disconnects: usize,
    pub(super) done: Vec<Completion>,
    /// Caller TMFs ended, in order.
    pub(super) tmfs: Vec<TmfCompletion>,
    pub(super) events: Vec<Event>,
    /// Commands the core asked to register again, in order.
    pub(super) remaps: Vec<CmdId>,
    /// How the harness answers a remap at once; `None` leaves it unanswered.
    pub(super) remap_with: Option<Remapped>,
}

impl Harness {
    pub(super) fn new(cfg: InitiatorConfig) -> Harness {
        Harness {
            ch: InitiatorChannel::new(cfg),
            now: Time(0),
            sent: vec![],
            connects: vec![],
            disconnects: 0,
            done: vec![],
            tmfs: vec![],
            events: vec![],
            remaps: vec![],
            remap_with: Some(Remapped::Unchanged),
        }
    }

    /// A harness logged in with `window` credits and immediate data.
    pub(super) fn logged_in(cfg: InitiatorConfig, window: u32) -> Harness {
        let mut h = Harness::new(cfg);
        h.ch.connect(h.now);
        h.pump();
        h.ch.handle_login_rsp(h.now, &login_rsp(h.login_tag(), window, true));
        h.pump();
        assert_eq!(h.ch.state(), PortState::Running);
        h.events.clear();
        h
    }

    /// Tag of the latest LOGIN_REQ.
    pub(super) fn login_tag(&self) -> Tag {
        let (_, form, pd) = self.connects.last().expect("a login was sent");
        let req = match form {
            LoginForm::IbCm => crate::wire::login::LoginReq::parse(pd),
            LoginForm::RdmaCm => crate::wire::login::LoginReq::parse_rdma_cm(pd),
        };
        req.expect("login request parses").tag
    }

    /// Runs the driver loop: performs actions, completing every send at once.
    pub(super) fn pump(&mut self) {
        loop {
            while let Some(e) = self.ch.poll_event() {
                self.events.push(e);
            }
            let Some(a) = self.ch.poll_action() else {
                break;
            };
            match a {
                Action::Connect { form, private_data } => {
                    self.connects.push((self.now, form, private_data))
                }
                Action::Remap(id) => {
                    self.remaps.push(id);
                    if let Some(answer) = self.remap_with.clone() {
                        assert!(self.ch.handle_remapped(self.now, id, answer), "held");
                    }
                }
                Action::Send { iu, cmd } => {
                    if iu.first() == Some(&0x02) {
                        assert!(cmd.is_some(), "an SRP_CMD names its command");
                    } else {
                        assert_eq!(cmd, None, "only an SRP_CMD names a command");
                    }
                    self.sent.push(iu);
                    self.ch
                        .handle_send_done(self.now)
                        .expect("one completion per send");
                }
                Action::Disconnect => self.disconnects += 1,
                Action::Complete(c) => self.done.push(c),
                Action::TmfDone(c) => self.tmfs.push(c),
            }
        }
    }

    /// Feeds a received IU.
    pub(super) fn recv(&mut self, iu: &[u8]) {
        self.ch.handle_recv(self.now, iu, None);
        self.pump();
    }

    /// Submits, expecting acceptance.
    pub(super) fn submit(&mut self, c: Command) -> CmdId {
        let id = self.ch.submit(self.now, c).expect("accepted");
        self.pump();
        id
    }

    /// Advances virtual time by `d`, firing every timeout on the way at its own time.
    pub(super) fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        while let Some(t) = self.ch.poll_timeout().filter(|t| *t <= end) {
            self.now = self.now.max(t);
            self.ch.handle_timeout(self.now);
            self.pump();
        }
        self.now = end;
    }

    /// Fires timeouts one by one until the channel asks to connect.
    pub(super) fn run_until_connect(&mut self) {
        let n = self.connects.len();
        while self.connects.len() == n {
            let t = self.ch.poll_timeout().expect("a timer is armed");
            self.now = self.now.max(t);
            self.ch.handle_timeout(self.now);
            self.pump();
        }
    }

    /// The SRP_CMD sent `back` sends ago (0 = latest).
    pub(super) fn sent_cmd(&self, back: usize) -> Cmd<'_> {
        let iu = &self.sent[self.sent.len() - 1 - back];
        Cmd::parse_with(iu, 68).expect("an SRP_CMD")
    }

    /// The SRP_TSK_MGMT sent last.
    pub(super) fn sent_tmf(&self) -> TskMgmt {
        TskMgmt::parse(self.sent.last().expect("sent")).expect("an SRP_TSK_MGMT")
    }
}
