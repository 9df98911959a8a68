//! One logged-in channel of the test host ([`Node`]) with SRP_CMDs in every descriptor form
//! (direct, indirect with the table inline or partial, immediate data) and SRP_TSK_MGMT;
//! each SRP_RSP is read back as a [`Reply`]: status, sense, residuals, credits, data-in.
//! Used by the daemon_scsi, daemon_tmf and daemon_hostile tests.
#![allow(dead_code, unreachable_pub)]

use super::{DEADLINE, Ep, Host, IMM_OFFSET, IOVA, ib_form, login_req, lun_of, rdma_cm_form};
use crate::common::{cmd_bytes, srp_cmd, tmf_iu};
use access_layer::mad::ServiceId;
use access_layer::mad::cm::RdmaPortSpace;
use hca::Guid;
use hca::verbs::{SendFlags, SendOp, SendWr, WcStatus};
use scsi::{Sense, SenseCode, Status};
use srp::wire::cmd::Cmd;
use srp::wire::cred::{CredReq, CredRsp};
use srp::wire::desc::{DataDesc, DirectBuf, Indirect};
use srp::wire::login::{LoginReq, LoginReqFlags, LoginRsp, MultiChannelAction};
use srp::wire::logout::{TLogout, TLogoutReason};
use srp::wire::rsp::{Residual, Rsp, TmfResponse};
use srp::wire::tsk_mgmt::TaskMgmtFunction;
use srp::wire::{IoClass, IuType, PortId, Tag};
use srp_target::config::IocConfig;
use srp_target::daemon::{Daemon, DaemonEvent};
use srp_target::login::ChannelId;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use wirekit::WireRepr;
use zerocopy::IntoBytes;

/// Offsets in an endpoint's 1 MiB window (the host's receives sit at 0, its sends at 16 KiB).
pub const TABLE: u64 = 40 << 10;
pub const OUT: u64 = 64 << 10;
pub const IN: u64 = 512 << 10;
/// Largest transfer per direction the window holds.
pub const AREA: u32 = 384 << 10;
/// Where [`Node::send_all`] puts its IUs, one slot each.
pub const CHAIN: u64 = 896 << 10;
pub const CHAIN_SLOT: u64 = 2 << 10;
/// Initiator-to-target IU length asked for with immediate data: Linux ib_srp's 68 + 8 KiB.
pub const IMM_IT_IU_LEN: u32 = 8260;
/// What the data-in area holds before a command: bytes the target did not write keep it.
pub const FILL: u8 = 0xee;
/// Space between scattered segments, so a misplaced byte lands where it shows.
const GAP: u64 = 4096;

/// The login form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The 64-byte login to the IOC's service ID.
    IbCm,
    /// The RDMA-CM form to this TCP port.
    RdmaCm(u16),
}

/// Where data-out comes from.
#[derive(Clone, Copy, Debug)]
pub enum Out<'a> {
    None,
    /// One direct descriptor.
    Direct(&'a [u8]),
    /// Scattered in segments of these lengths; `inline` of them in the IU, the table in
    /// host memory (fewer inline than segments: the target fetches the table).
    Indirect(&'a [u8], &'a [u32], usize),
    /// In the SRP_CMD itself.
    Imm(&'a [u8]),
}

/// Where data-in goes.
#[derive(Clone, Copy, Debug)]
pub enum In<'a> {
    None,
    Direct(u32),
    /// Segment lengths and how many are inline, as [`Out::Indirect`].
    Indirect(&'a [u32], usize),
}

/// An SRP_RSP as the test reads it.
#[derive(Clone, Debug)]
pub struct Reply {
    pub tag: Tag,
    pub status: Status,
    pub sense: Option<Sense>,
    pub dout: Residual,
    pub din: Residual,
    pub credits: u32,
    pub tmf: Option<TmfResponse>,
    /// The whole data-in buffer (every segment, in order), written or not.
    pub data: Vec<u8>,
}

impl Reply {
    /// The data-in bytes the target moved (the buffer less a DIUNDER residual).
    pub fn moved(&self) -> &[u8] {
        match self.din {
            Residual::Underflow(n) => &self.data[..self.data.len() - n as usize],
            _ => &self.data,
        }
    }

    pub fn code(&self) -> Option<SenseCode> {
        self.sense.as_ref().map(Sense::code)
    }

    /// Status and sense code.
    pub fn outcome(&self) -> (Status, Option<SenseCode>) {
        (self.status, self.code())
    }
}

/// The outcome of a CHECK CONDITION with `code`.
pub fn cc(code: SenseCode) -> (Status, Option<SenseCode>) {
    (Status::CheckCondition, Some(code))
}

/// What the target sent: an SRP_RSP or an SRP_T_LOGOUT.
#[derive(Clone, Debug)]
pub enum Answer {
    Rsp(Reply),
    Logout(TLogoutReason),
}

/// A host with one channel logged in.
pub struct Node {
    pub host: Host,
    pub ep: Ep,
    pub rsp: LoginRsp,
    pub me: PortId,
    pub local: IpAddr,
    pub target: IpAddr,
    /// Credits granted by SRP_CRED_REQs so far.
    pub cred_reqs: u32,
    tag: u64,
}

/// The login request of `me` to `ioc`; with `imm`, immediate data at offset 68 is asked for.
pub fn request(me: PortId, ioc: &IocConfig, imm: bool) -> LoginReq {
    let mut req = login_req(me, ioc.target_port_id(), MultiChannelAction::Multi);
    if imm {
        req.req_it_iu_len = IMM_IT_IU_LEN;
        req.flags = LoginReqFlags::IMMED_REQUESTED;
        req.imm_data_offset = IMM_OFFSET;
    }
    req
}

/// Logs `req` in on `ep` of `host` in `form`.
pub fn log_in(
    host: &mut Host,
    ep: &Ep,
    local: IpAddr,
    target: IpAddr,
    ioc: &IocConfig,
    form: Form,
    req: &LoginReq,
) -> Result<LoginRsp, u32> {
    let (service, private) = match form {
        Form::IbCm => (ioc.service_id, ib_form(req)),
        Form::RdmaCm(port) => (
            ServiceId::rdma_ip(RdmaPortSpace::Tcp, port),
            rdma_cm_form(req, local, target),
        ),
    };
    host.login(ep, service, private).map(|(_, rsp)| rsp)
}

impl Node {
    /// A host at `local` with node GUID `guid`, logged in to `ioc` at `target` in `form`.
    pub fn open(
        local: IpAddr,
        target: IpAddr,
        guid: u64,
        ioc: &IocConfig,
        form: Form,
        imm: bool,
    ) -> Node {
        Node::try_open(local, target, guid, ioc, form, imm)
            .unwrap_or_else(|code| panic!("login of {guid:#x} rejected: {code:#x}"))
    }

    /// [`Node::open`], or the LOGIN_REJ reason code if the login is refused.
    pub fn try_open(
        local: IpAddr,
        target: IpAddr,
        guid: u64,
        ioc: &IocConfig,
        form: Form,
        imm: bool,
    ) -> Result<Node, u32> {
        Node::try_open_with(Host::open_as(local, target, guid), ioc, form, imm)
    }

    /// [`Node::try_open`] on a host already opened (its `rc_timeout` set, say).
    pub fn try_open_with(
        mut host: Host,
        ioc: &IocConfig,
        form: Form,
        imm: bool,
    ) -> Result<Node, u32> {
        let (local, target, guid) = (host.local(), host.target(), host.guid());
        let ep = host.ep(0);
        let me = PortId::new(0, Guid(guid), IoClass::SrpR16a);
        let req = request(me, ioc, imm);
        let rsp = log_in(&mut host, &ep, local, target, ioc, form, &req)?;
        Ok(Node {
            host,
            ep,
            rsp,
            me,
            local,
            target,
            cred_reqs: 0,
            tag: 0,
        })
    }

    /// Logs in again (`req`, in `form`) on a fresh endpoint `index` of the same host; the
    /// old endpoint's QP and CQ are destroyed. The LOGIN_REJ reason if refused.
    pub fn relogin(
        &mut self,
        index: u64,
        ioc: &IocConfig,
        form: Form,
        req: &LoginReq,
    ) -> Result<(), u32> {
        let ep = self.host.ep(index);
        let (local, target) = (self.local, self.target);
        let rsp = log_in(&mut self.host, &ep, local, target, ioc, form, req);
        let old = std::mem::replace(&mut self.ep, ep);
        self.destroy(&old);
        self.rsp = rsp?;
        Ok(())
    }

    /// Destroys `ep`'s QP (flushing it) and CQ: the initiator's end of a channel vanishes.
    pub fn destroy(&self, ep: &Ep) {
        self.host.hca.with(|e, now| {
            let _ = e.destroy_qp(now, ep.qp);
            let _ = e.destroy_cq(ep.cq);
        });
    }

    /// The next IU from the target or failed completion on this channel, whichever comes
    /// first within `wait`; `None` if neither.
    pub fn next_event(&mut self, wait: Duration) -> Option<Result<Vec<u8>, WcStatus>> {
        let r = self.host.next_event(&self.ep, wait)?;
        Some(r.map_err(|wc| wc.status))
    }

    pub fn next_tag(&mut self) -> u64 {
        self.tag += 1;
        self.tag
    }

    /// `len` bytes at `off` of this channel's window.
    pub fn read(&self, off: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.host
            .mem
            .read((self.ep.base + off) as usize, &mut v)
            .expect("fits");
        v
    }

    pub fn write(&self, off: u64, data: &[u8]) {
        self.host
            .mem
            .write((self.ep.base + off) as usize, data)
            .expect("fits");
    }

    /// Where `d` (one of this channel's descriptors) starts in its window.
    fn offset(&self, d: &DirectBuf) -> u64 {
        d.va() - IOVA - self.ep.base
    }

    /// Places `lens` segments from `base` with gaps; their descriptors.
    fn segments(&self, base: u64, lens: &[u32]) -> Vec<DirectBuf> {
        let mut at = base;
        lens.iter()
            .map(|&l| {
                let d = self.host.buf(&self.ep, at, l);
                at += u64::from(l) + GAP;
                d
            })
            .collect()
    }

    /// An indirect descriptor for `segs`, its table written at `at`, `inline` of them inline.
    fn indirect<'s>(&self, segs: &'s [DirectBuf], at: u64, inline: usize) -> Indirect<'s> {
        self.write(at, segs.as_bytes());
        Indirect {
            table: self.host.buf(&self.ep, at, (segs.len() * 16) as u32),
            total_len: segs.iter().map(|s| s.len()).sum(),
            inline: &segs[..inline],
        }
    }

    /// Builds the SRP_CMD for `cdb` to `lun` with `tag`, placing data-out and preparing the
    /// data-in buffer; returns the IU and the data-in segments.
    pub fn cmd(
        &self,
        tag: u64,
        lun: u32,
        cdb: &[u8],
        out: Out<'_>,
        into: In<'_>,
    ) -> (Vec<u8>, Vec<DirectBuf>) {
        self.cmd_at(OUT, tag, lun, cdb, out, into)
    }

    /// As [`Node::cmd`], data-out placed from `base` (commands in flight together need
    /// their own places).
    pub fn cmd_at(
        &self,
        base: u64,
        tag: u64,
        lun: u32,
        cdb: &[u8],
        out: Out<'_>,
        into: In<'_>,
    ) -> (Vec<u8>, Vec<DirectBuf>) {
        let out_segs = match out {
            Out::Direct(d) => {
                self.write(base, d);
                self.segments(base, &[d.len() as u32])
            }
            Out::Indirect(d, lens, _) => {
                let segs = self.segments(base, lens);
                let mut at = 0usize;
                for s in &segs {
                    let n = s.len() as usize;
                    self.write(self.offset(s), &d[at..at + n]);
                    at += n;
                }
                assert_eq!(at, d.len(), "segments cover the data");
                segs
            }
            Out::None | Out::Imm(_) => Vec::new(),
        };
        let in_segs = match into {
            In::None => Vec::new(),
            In::Direct(len) => self.segments(IN, &[len]),
            In::Indirect(lens, _) => self.segments(IN, lens),
        };
        let span: u64 = in_segs.iter().map(|s| u64::from(s.len()) + GAP).sum();
        self.write(IN, &vec![FILL; span as usize]);
        // One table area: data-out's table first, data-in's after it.
        let in_table = TABLE + out_segs.len() as u64 * 16;
        let (data_out, imm) = match out {
            Out::None => (DataDesc::None, &[][..]),
            Out::Direct(_) => (DataDesc::Direct(out_segs[0]), &[][..]),
            Out::Indirect(_, _, inline) => (
                DataDesc::Indirect(self.indirect(&out_segs, TABLE, inline)),
                &[][..],
            ),
            Out::Imm(d) => (DataDesc::Immediate, d),
        };
        let data_in = match into {
            In::None => DataDesc::None,
            In::Direct(_) => DataDesc::Direct(in_segs[0]),
            In::Indirect(_, inline) => {
                DataDesc::Indirect(self.indirect(&in_segs, in_table, inline))
            }
        };
        let cmd = Cmd {
            imm_data: imm,
            ..srp_cmd(tag, lun_of(lun), cdb, data_out, data_in)
        };
        let buf = cmd_bytes(&cmd);
        (buf, in_segs)
    }

    /// Posts `ius` as SENDs in one chain, each from its own slot.
    pub fn send_all(&self, ius: &[Vec<u8>]) {
        assert!(ius.len() as u64 * CHAIN_SLOT <= (1 << 20) - CHAIN);
        let wrs: Vec<SendWr> = ius
            .iter()
            .enumerate()
            .map(|(k, iu)| {
                assert!(iu.len() as u64 <= CHAIN_SLOT);
                let off = CHAIN + k as u64 * CHAIN_SLOT;
                self.write(off, iu);
                SendWr {
                    wr_id: 2000 + k as u64,
                    op: SendOp::Send,
                    sg_list: [self.host.sge(self.ep.base + off, iu.len() as u32)].into(),
                    flags: SendFlags::SIGNALED,
                    ud: None,
                }
            })
            .collect();
        self.host
            .hca
            .with(|e, now| e.post_send_list(now, self.ep.qp, wrs))
            .expect("post_send");
    }

    /// Sends `cdb` and waits for its SRP_RSP.
    pub fn run(&mut self, lun: u32, cdb: &[u8], out: Out<'_>, into: In<'_>) -> Reply {
        let tag = self.next_tag();
        let (iu, segs) = self.cmd(tag, lun, cdb, out, into);
        self.host.send(&self.ep, &iu);
        let r = self.reply(&segs);
        assert_eq!(r.tag, Tag(tag), "{r:?}");
        r
    }

    /// GOOD with direct descriptors; the data-in moved.
    pub fn good(&mut self, lun: u32, cdb: &[u8], dout: &[u8], din_len: u32) -> Vec<u8> {
        let r = self.direct(lun, cdb, dout, din_len);
        assert_eq!(
            (r.status, r.code(), r.dout),
            (Status::Good, None, Residual::None),
            "{cdb:02x?}: {r:?}"
        );
        r.moved().to_vec()
    }

    /// CHECK CONDITION with `code` and no data-in; the sense.
    pub fn check(
        &mut self,
        lun: u32,
        cdb: &[u8],
        dout: &[u8],
        din_len: u32,
        code: SenseCode,
    ) -> Sense {
        let r = self.direct(lun, cdb, dout, din_len);
        assert_eq!(
            (r.status, r.code()),
            (Status::CheckCondition, Some(code)),
            "{cdb:02x?}: {r:?}"
        );
        assert!(r.data.iter().all(|&b| b == FILL), "no data-in with CHECK");
        if din_len > 0 {
            assert_eq!(r.din, Residual::Underflow(din_len), "nothing moved: {r:?}");
        }
        r.sense.expect("sense")
    }

    pub fn direct(&mut self, lun: u32, cdb: &[u8], dout: &[u8], din_len: u32) -> Reply {
        let out = if dout.is_empty() {
            Out::None
        } else {
            Out::Direct(dout)
        };
        let into = if din_len == 0 {
            In::None
        } else {
            In::Direct(din_len)
        };
        self.run(lun, cdb, out, into)
    }

    /// The next IU from the target, as a reply read against `segs`, or a T_LOGOUT. An
    /// SRP_CRED_REQ on the way is answered with SRP_CRED_RSP and counted in
    /// [`Node::cred_reqs`].
    pub fn answer(&mut self, segs: &[DirectBuf]) -> Answer {
        let mut cred_reqs = 0;
        let iu = loop {
            let iu = self.host.await_iu(&self.ep);
            cred_reqs += 1;
            assert!(cred_reqs <= 64, "SRP_CRED_REQs without end");
            if iu.first() != Some(&u8::from(IuType::CredReq)) {
                break iu;
            }
            let c = CredReq::parse(&iu).expect("SRP_CRED_REQ parses");
            self.cred_reqs += c.req_lim_delta;
            let rsp = CredRsp { tag: c.tag };
            let mut buf = vec![0u8; rsp.buffer_len()];
            rsp.emit(&mut buf).expect("fits");
            self.host.send(&self.ep, &buf);
        };
        if iu.first() == Some(&u8::from(IuType::TLogout)) {
            let l = TLogout::parse(&iu).expect("T_LOGOUT parses");
            return Answer::Logout(l.reason);
        }
        let r = Rsp::parse(&iu).expect("SRP_RSP parses");
        let data = segs
            .iter()
            .flat_map(|s| self.read(self.offset(s), s.len() as usize))
            .collect();
        Answer::Rsp(Reply {
            tag: r.tag,
            status: r.status,
            sense: (!r.sense.is_empty()).then(|| Sense::parse(r.sense).expect("sense parses")),
            dout: r.data_out_residual,
            din: r.data_in_residual,
            credits: r.req_lim_delta,
            tmf: r.tmf_response(),
            data,
        })
    }

    /// The next SRP_RSP (a T_LOGOUT fails the test).
    pub fn reply(&mut self, segs: &[DirectBuf]) -> Reply {
        match self.answer(segs) {
            Answer::Rsp(r) => r,
            Answer::Logout(reason) => panic!("T_LOGOUT ({reason:?}) instead of SRP_RSP"),
        }
    }

    pub fn tmf_iu(&self, tag: u64, lun: u32, function: TaskMgmtFunction, task: u64) -> Vec<u8> {
        tmf_iu(tag, lun_of(lun), function, task)
    }

    /// Sends a task management request and waits for its response.
    pub fn tmf(&mut self, lun: u32, function: TaskMgmtFunction, task: u64) -> Reply {
        let tag = self.next_tag();
        let iu = self.tmf_iu(tag, lun, function, task);
        self.host.send(&self.ep, &iu);
        let r = self.reply(&[]);
        assert_eq!(r.tag, Tag(tag), "{r:?}");
        r
    }

    /// WRITE(10) of 8 blocks of 512 at `lba` of `lun`, READ(10) back, compare.
    pub fn write_read(&mut self, lun: u32, lba: u32, seed: u8) {
        let data = crate::common::pattern(4096, seed);
        self.good(lun, &crate::common::write10(lba, 8, false), &data, 0);
        let back = self.good(lun, &crate::common::read10(lba, 8), &[], 4096);
        assert_eq!(back, data, "data read back from LUN {lun}");
    }
}

/// The channel id of `initiator`'s newest login among `events`.
pub fn login_of(events: &[DaemonEvent], initiator: PortId) -> Option<ChannelId> {
    events.iter().rev().find_map(|e| match e {
        DaemonEvent::Login {
            channel,
            initiator: i,
            ..
        } if *i == initiator => Some(*channel),
        _ => None,
    })
}

/// Reads daemon events until `pick` finds one (its answer), within [`DEADLINE`]; everything
/// read is appended to `seen`. Panics with what it saw otherwise.
pub fn await_event<T>(
    daemon: &Daemon,
    seen: &mut Vec<DaemonEvent>,
    mut pick: impl FnMut(&DaemonEvent) -> Option<T>,
) -> T {
    let end = Instant::now() + DEADLINE;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match daemon
            .events()
            .recv_timeout(left.min(Duration::from_millis(50)))
        {
            Ok(ev) => {
                let hit = pick(&ev);
                seen.push(ev);
                if let Some(t) = hit {
                    return t;
                }
            }
            Err(_) if Instant::now() >= end => {
                panic!("no such daemon event within {DEADLINE:?}; saw {seen:?}")
            }
            Err(_) => {}
        }
    }
}

/// Waits for the Logout event of `channel`; its reason.
pub fn await_logout(daemon: &Daemon, seen: &mut Vec<DaemonEvent>, channel: ChannelId) -> String {
    await_event(daemon, seen, |e| match e {
        DaemonEvent::Logout { channel: c, reason } if *c == channel => Some(reason.clone()),
        _ => None,
    })
}
