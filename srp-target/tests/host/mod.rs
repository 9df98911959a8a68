//! A test SRP initiator built on the access layer (GSI port, CM endpoint) and hca verbs:
//! logs in over either form, sends SRP_CMDs with direct descriptors, reads the target's IUs.
//! Shared by the daemon tests here and srpctl's durability test (which includes this file
//! and `../common/mod.rs` by path).
#![allow(dead_code, unreachable_pub)]

pub mod node;
pub mod shared_lun;

use crate::common::{cmd_bytes, pattern, rc_qp, read10, srp_cmd, write10};
use access_layer::cm::{CmConfig, CmEndpoint, CmEvent, ConnId, ConnectParams, QpPsns};
use access_layer::gsi::port::{GsiPort, GsiPortConfig};
use access_layer::mad::cm::CmaHeader;
use access_layer::mad::dm::{DM_CLASS_VERSION, DM_DATA_LEN, DmAttr};
use access_layer::mad::{
    AnyMad, DmAttribute, MadBody, MadBuf, MadHeader, MadOut, Method, MgmtClass, RmppHeader, Tid,
    parse_any,
};
use access_layer::mad::{MadAddress, Mtu, ServiceId};
use access_layer::verbs::SyncCa;
use hca::ca::SoftCa;
use hca::driver::{Hca, HcaConfig};
use hca::engine::{CqId, QpId, RcConnect};
use hca::mem::MemBlock;
use hca::mr::{Access, MrKeys};
use hca::verbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcOpcode, WcStatus};
use hca::wire::PathMtu;
use hca::{Gid, Guid, Psn, Qpn};
use scsi::{Lun, Status};
use srp::wire::desc::{DataDesc, DirectBuf};
use srp::wire::login::{
    BufFormats, LoginRej, LoginReq, LoginReqFlags, LoginRsp, MultiChannelAction,
};
use srp::wire::rsp::Rsp;
use srp::wire::{PortId, Tag};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirekit::WireRepr;

pub const DEADLINE: Duration = Duration::from_secs(10);
pub const IOVA: u64 = 0x2000_0000;
pub const MEM: usize = 4 << 20;
pub const EP_SPAN: u64 = 1 << 20;
pub const RECV_LEN: u32 = 512;
pub const RECVS: usize = 8;
pub const EP_SEND: u64 = 16 << 10;
pub const EP_DATA: u64 = 64 << 10;
pub use crate::common::IMM_OFFSET;
/// The host's port GUID: the low half of its initiator port IDs.
pub const HOST_GUID: u64 = 0x0002_c903_00be_ef01;

/// One initiator channel: a QP and CQ, and a 1 MiB window of the host's memory.
pub struct Ep {
    pub qp: QpId,
    pub qpn: Qpn,
    pub cq: CqId,
    pub base: u64,
}

/// The test initiator: a soft HCA with a GSI port (on a CA over the same device) and a CM
/// endpoint.
pub struct Host {
    pub hca: Arc<Hca>,
    _ca: Arc<SoftCa>,
    gsi: GsiPort,
    pub cm: CmEndpoint,
    pub events: Vec<CmEvent>,
    /// Responses of every class but CM (DM and any other), oldest first.
    pub dm_answers: Vec<access_layer::mad::MadBuf>,
    pd: hca::mr::PdId,
    pub mem: Arc<MemBlock>,
    mr: MrKeys,
    local: IpAddr,
    target: IpAddr,
    /// The ACK timeout code of the host's RC QPs (10: 4 ms per try, 8 tries: a target
    /// that stops answering is noticed fast). Set before logging in.
    pub rc_timeout: u8,
}

impl Host {
    /// A host at `local` (node GUID [`HOST_GUID`]) that logs in to the target at `target`.
    pub fn open(local: IpAddr, target: IpAddr) -> Host {
        Host::open_as(local, target, HOST_GUID)
    }

    /// A host at `local` with node GUID `guid` (a second host needs its own).
    pub fn open_as(local: IpAddr, target: IpAddr, guid: u64) -> Host {
        let guid = Guid(guid);
        let hca = Arc::new(Hca::open(HcaConfig::new(guid, vec![local])).expect("open host HCA"));
        let ca = Arc::new(SoftCa::shared(hca.clone()).expect("CA"));
        SyncCa::new(ca.clone())
            .open_ca(Arc::new(|_| {}))
            .expect("open CA");
        let gsi = GsiPort::open(ca.clone(), 1, GsiPortConfig::default()).expect("GSI");
        let (pd, mem, mr) = hca.with(|e, _| {
            let pd = e.alloc_pd();
            let mem = MemBlock::new(MEM);
            let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
            let mr = e
                .reg_mr(pd, mem.clone(), 0, MEM as u64, IOVA, access)
                .expect("reg_mr");
            (pd, mem, mr)
        });
        let cm = CmEndpoint::new(CmConfig {
            local_ca_guid: guid,
            local_gid: Gid::from_ip(local),
            port: 1,
            time_wait: Duration::from_millis(20),
            agent_id: 0x5eed,
            first_comm_id: access_layer::cm::random_comm_id(),
        });
        Host {
            hca,
            _ca: ca,
            gsi,
            cm,
            events: Vec::new(),
            dm_answers: Vec::new(),
            pd,
            mem,
            mr,
            local,
            target,
            rc_timeout: 10,
        }
    }

    /// Its address.
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// The target's address.
    pub fn target(&self) -> IpAddr {
        self.target
    }

    /// Its node GUID.
    pub fn guid(&self) -> u64 {
        self.hca.with(|e, _| e.node_guid().0)
    }

    pub fn pump(&mut self) {
        let Host {
            hca,
            gsi,
            cm,
            events,
            dm_answers,
            ..
        } = self;
        let now = hca.now();
        while let Ok(Some((from, mad))) = gsi.recv() {
            if mad.header().is_ok_and(|h| h.mgmt_class == MgmtClass::Cm) {
                cm.handle_mad(now, from, &mad.0);
            } else {
                dm_answers.push(mad);
            }
        }
        if cm.poll_timeout().is_some_and(|t| t <= now) {
            cm.handle_timeout(now);
        }
        while let Some(out) = cm.poll_transmit() {
            gsi.send(&out).expect("send MAD");
        }
        while let Some(ev) = cm.poll_event() {
            events.push(ev);
        }
    }

    /// Sends a DM Get of `attr` with `attr_mod` to the target's GSI and returns the answer
    /// (parse it with `access_layer::mad::parse_any`).
    pub fn dm_get(&mut self, attr: DmAttr, attr_mod: u32, tid: u64) -> MadBuf {
        const ZERO: [u8; DM_DATA_LEN] = [0; DM_DATA_LEN];
        let mad = AnyMad {
            header: MadHeader::request(
                MgmtClass::DeviceMgmt,
                DM_CLASS_VERSION,
                Method::Get,
                Tid(tid),
                attr.into(),
                attr_mod,
            ),
            body: MadBody::Dm {
                rmpp: RmppHeader::INACTIVE,
                attr: DmAttribute::Raw(&ZERO),
            },
        }
        .to_buf()
        .expect("DM request");
        self.get_raw(mad, tid)
    }

    /// Sends `mad` (a request with `tid`) to the target's GSI and returns the answer.
    pub fn get_raw(&mut self, mad: MadBuf, tid: u64) -> MadBuf {
        let out = MadOut {
            to: MadAddress::gsi(1, Gid::from_ip(self.target)),
            mad,
        };
        self.gsi.send(&out).expect("send MAD request");
        let end = Instant::now() + DEADLINE;
        loop {
            assert!(Instant::now() < end, "no answer to MAD request {tid:#x}");
            self.pump();
            let found = self.dm_answers.iter().position(|m| {
                parse_any(&m.0).is_ok_and(|a| a.header.tid == Tid(tid) && a.header.response)
            });
            if let Some(k) = found {
                return self.dm_answers.remove(k);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub fn ep(&self, index: u64) -> Ep {
        let (qp, qpn, cq) = rc_qp(&self.hca, self.pd, 256, 64);
        Ep {
            qp,
            qpn,
            cq,
            base: index * EP_SPAN,
        }
    }

    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: IOVA + offset,
            len,
            lkey: self.mr.lkey,
        }
    }

    /// Logs in on `ep` with `service` and `private` data; the LOGIN_RSP, or the
    /// LOGIN_REJ's reason code.
    pub fn login(
        &mut self,
        ep: &Ep,
        service: ServiceId,
        private: Vec<u8>,
    ) -> Result<(ConnId, LoginRsp), u32> {
        let params = self.connect_params(ep, service, private);
        let now = self.hca.with(|_, now| now);
        let conn = self.cm.connect(now, &params).expect("connect");
        let end = Instant::now() + DEADLINE;
        loop {
            assert!(
                Instant::now() < end,
                "no REP or REJ for {service:?}: {:?}",
                self.cm.state(conn)
            );
            self.pump();
            let found = self.events.iter().find_map(|e| match e {
                CmEvent::RepReceived { conn: c, rep } if *c == conn => Some(Ok(*rep)),
                CmEvent::Rejected {
                    conn: c,
                    private_data,
                    ..
                } if *c == conn => Some(Err(*private_data)),
                _ => None,
            });
            match found {
                Some(Ok(rep)) => {
                    let rsp = LoginRsp::parse(&rep.private_data.0).expect("SRP_LOGIN_RSP");
                    let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
                    let peer = RcConnect {
                        access,
                        dest_gid: Gid::from_ip(self.target),
                        dest_qpn: rep.local_qpn,
                        path_mtu: PathMtu::Mtu1024,
                        sq_psn: QpPsns::active(Psn::from_wire(0x100), &rep).sq_psn,
                        rq_psn: Psn::from_wire(0x100),
                        timeout: self.rc_timeout,
                        retry_cnt: 7,
                        rnr_retry: 7,
                        min_rnr_timer: 1,
                        max_rd_atomic: 4,
                        max_dest_rd_atomic: 4,
                        pkey_index: 0,
                        flow_label: 0,
                        hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
                        traffic_class: 0,
                    };
                    self.hca
                        .with(|e, now| e.connect_rc(now, ep.qp, &peer))
                        .expect("connect host QP");
                    for i in 0..RECVS {
                        self.post_recv(ep, i);
                    }
                    self.cm.confirm(conn).expect("RTU");
                    self.pump();
                    return Ok((conn, rsp));
                }
                Some(Err(pd)) => {
                    let rej = LoginRej::parse(&pd.0).expect("SRP_LOGIN_REJ");
                    return Err(u32::from(rej.reason));
                }
                None => std::thread::sleep(Duration::from_micros(200)),
            }
        }
    }

    /// Sends the REQ of `params` and waits for the REP, but never confirms it (no RTU, no
    /// QP connected): a login left half open. Returns the connection.
    pub fn login_unconfirmed(&mut self, params: &ConnectParams) -> ConnId {
        let now = self.hca.with(|_, now| now);
        let conn = self.cm.connect(now, params).expect("connect");
        let end = Instant::now() + DEADLINE;
        while !self
            .events
            .iter()
            .any(|e| matches!(e, CmEvent::RepReceived { conn: c, .. } if *c == conn))
        {
            assert!(Instant::now() < end, "no REP: {:?}", self.cm.state(conn));
            self.pump();
            std::thread::sleep(Duration::from_micros(200));
        }
        conn
    }

    /// The CM REQ's parameters of a login on `ep` to `service` with `private` data.
    pub fn connect_params(&self, ep: &Ep, service: ServiceId, private: Vec<u8>) -> ConnectParams {
        ConnectParams {
            to: MadAddress::gsi(1, Gid::from_ip(self.target)),
            service_id: service,
            qpn: ep.qpn,
            receive_psn: Psn::from_wire(0x100),
            responder_resources: 4,
            initiator_depth: 4,
            mtu: Mtu::Mtu1024,
            response_timeout: 18,
            max_retries: 3,
            retry_count: 7,
            rnr_retry_count: 7,
            private_data: private,
        }
    }

    pub fn post_recv(&self, ep: &Ep, i: usize) {
        let wr = RecvWr {
            wr_id: i as u64,
            sg_list: [self.sge(ep.base + i as u64 * u64::from(RECV_LEN), RECV_LEN)].into(),
        };
        self.hca
            .with(|e, now| e.post_recv(now, ep.qp, wr))
            .expect("post_recv");
    }

    pub fn send(&self, ep: &Ep, iu: &[u8]) {
        let off = ep.base + EP_SEND;
        self.mem.write(off as usize, iu).expect("IU fits");
        let wr = SendWr {
            wr_id: 1000,
            op: SendOp::Send,
            sg_list: [self.sge(off, iu.len() as u32)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        self.hca
            .with(|e, now| e.post_send_list(now, ep.qp, vec![wr]))
            .expect("post_send");
    }

    /// The next IU the target sends on `ep`.
    pub fn await_iu(&mut self, ep: &Ep) -> Vec<u8> {
        match self.next_event(ep, DEADLINE) {
            Some(Ok(iu)) => iu,
            Some(Err(wc)) => panic!("host completion: {wc:?}"),
            None => panic!("no IU from the target within {DEADLINE:?}"),
        }
    }

    /// The next IU the target sends on `ep`, or the first failed completion, whichever
    /// comes first within `wait`; `None` if neither.
    pub fn next_event(&mut self, ep: &Ep, wait: Duration) -> Option<Result<Vec<u8>, Wc>> {
        let end = Instant::now() + wait;
        while Instant::now() < end {
            self.pump();
            // One completion at a time: returning at a receive must not drop the ones
            // polled after it (two IUs arriving together).
            while let Some(wc) = self.poll_one(ep) {
                if wc.status != WcStatus::Success {
                    return Some(Err(wc));
                }
                if wc.opcode == WcOpcode::Recv {
                    let slot = wc.wr_id as usize;
                    let mut iu = vec![0u8; wc.byte_len as usize];
                    let at = ep.base + slot as u64 * u64::from(RECV_LEN);
                    self.mem.read(at as usize, &mut iu).expect("fits");
                    self.post_recv(ep, slot);
                    return Some(Ok(iu));
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        None
    }

    fn poll_one(&self, ep: &Ep) -> Option<Wc> {
        let mut wcs = Vec::new();
        self.hca
            .with(|e, _| e.poll_cq(ep.cq, 1, &mut wcs))
            .expect("poll");
        wcs.pop()
    }

    pub fn buf(&self, ep: &Ep, off: u64, len: u32) -> DirectBuf {
        DirectBuf::new(IOVA + ep.base + off, self.mr.rkey.expect("rkey"), len)
    }

    /// Sends `cdb` (with `data_out` written to the host's buffer first, or `data_in_len`
    /// bytes to read) to `lun` with `tag`; returns the SRP_RSP's status and the data-in.
    pub fn command(
        &mut self,
        ep: &Ep,
        tag: u64,
        lun: u32,
        cdb: &[u8],
        data_out: &[u8],
        data_in_len: u32,
    ) -> (Status, Vec<u8>) {
        let out = if data_out.is_empty() {
            DataDesc::None
        } else {
            self.mem
                .write((ep.base + EP_DATA) as usize, data_out)
                .expect("fits");
            DataDesc::Direct(self.buf(ep, EP_DATA, data_out.len() as u32))
        };
        let into = if data_in_len == 0 {
            DataDesc::None
        } else {
            DataDesc::Direct(self.buf(ep, EP_DATA + 8192, data_in_len))
        };
        self.send(ep, &cmd_iu(tag, lun, cdb, out, into));
        let r = self.await_iu(ep);
        let r = Rsp::parse(&r).expect("SRP_RSP");
        assert_eq!(r.tag, Tag(tag), "{r:?}");
        let mut back = vec![0u8; data_in_len as usize];
        self.mem
            .read((ep.base + EP_DATA + 8192) as usize, &mut back)
            .expect("fits");
        (r.status, back)
    }

    /// WRITE(10) of `data` at LBA 8 of `lun`, READ(10) back, compare.
    pub fn write_read(&mut self, ep: &Ep, lun: u32, seed: u8) {
        let data = pattern(4096, seed);
        self.mem
            .write((ep.base + EP_DATA) as usize, &data)
            .expect("fits");
        let out = DataDesc::Direct(self.buf(ep, EP_DATA, 4096));
        self.send(
            ep,
            &cmd_iu(1, lun, &write10(8, 8, false), out, DataDesc::None),
        );
        let r = self.await_iu(ep);
        let r = Rsp::parse(&r).expect("SRP_RSP");
        assert_eq!((r.tag, r.status), (Tag(1), Status::Good), "WRITE: {r:?}");
        let into = DataDesc::Direct(self.buf(ep, EP_DATA + 8192, 4096));
        self.send(ep, &cmd_iu(2, lun, &read10(8, 8), DataDesc::None, into));
        let r = self.await_iu(ep);
        let r = Rsp::parse(&r).expect("SRP_RSP");
        assert_eq!((r.tag, r.status), (Tag(2), Status::Good), "READ: {r:?}");
        let mut back = vec![0u8; 4096];
        self.mem
            .read((ep.base + EP_DATA + 8192) as usize, &mut back)
            .expect("fits");
        assert_eq!(back, data, "data read back from LUN {lun}");
    }
}

/// An SRP_CMD to LUN `lun` (single-level) with no immediate data.
pub fn cmd_iu(
    tag: u64,
    lun: u32,
    cdb: &[u8],
    data_out: DataDesc<'_>,
    data_in: DataDesc<'_>,
) -> Vec<u8> {
    cmd_bytes(&srp_cmd(tag, lun_of(lun), cdb, data_out, data_in))
}

/// The single-level LUN `lun`.
pub fn lun_of(lun: u32) -> Lun {
    Lun::from_number(lun).expect("LUN")
}

pub fn login_req(initiator: PortId, target: PortId, action: MultiChannelAction) -> LoginReq {
    LoginReq {
        tag: Tag(0x77),
        req_it_iu_len: 1024,
        req_buf_fmt: BufFormats::DIRECT,
        multi_channel: action,
        flags: LoginReqFlags::empty(),
        imm_data_offset: 0,
        initiator_port_id: initiator,
        target_port_id: target,
    }
}

/// The 64-byte IB CM form.
pub fn ib_form(req: &LoginReq) -> Vec<u8> {
    let mut buf = vec![0u8; req.buffer_len()];
    let n = req.emit(&mut buf).expect("emit");
    buf.truncate(n);
    buf
}

/// The RDMA-CM form: the cma header, then the 56-byte login.
pub fn rdma_cm_form(req: &LoginReq, host: IpAddr, target: IpAddr) -> Vec<u8> {
    let mut user = vec![0u8; 56];
    let n = req.emit_rdma_cm(&mut user).expect("emit");
    user.truncate(n);
    let cma = CmaHeader {
        src_port: 40000,
        src: host,
        dst: target,
    };
    cma.req_private_data(&user)
        .expect("private data")
        .0
        .to_vec()
}
