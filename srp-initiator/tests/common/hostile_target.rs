//! A deliberately hostile SRP target for the miniport's tests: a soft HCA with a GSI port
//! and a CM endpoint listening on one service ID, accepting every login (a real
//! SRP_LOGIN_RSP with 16 credits, no immediate data) with srp-target's login helpers, and
//! answering SRP_CMDs from a thread. The first `times` SRP_CMDs (counted over all
//! channels) get the scripted [`Fault`]; later ones a proper answer: for READ(10) the
//! blocks of [`block_data`] RDMA-written to the command's descriptors, then a GOOD SRP_RSP;
//! anything else GOOD without data. A new CM REQ replaces the previous channel.
#![allow(dead_code, unreachable_pub)]

use access_layer::cm::{AcceptParams, CmConfig, CmEndpoint, CmEvent, QpPsns};
use access_layer::gsi::port::{GsiPort, GsiPortConfig};
use access_layer::mad::cm::CmReq;
use access_layer::mad::{MgmtClass, ServiceId};
use access_layer::verbs::SyncCa;
use hca::ca::SoftCa;
use hca::driver::{Hca, HcaConfig};
use hca::engine::{CqId, QpId, RcConnect};
use hca::mem::MemBlock;
use hca::mr::{Access, MrKeys, PdId};
use hca::qp::QpInit;
use hca::verbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcStatus};
use hca::wire::PathMtu;
use hca::{Gid, Guid, Psn, Rkey};
use srp::wire::cmd::Cmd;
use srp::wire::desc::{DataDesc, DirectBuf};
use srp_target::login::cm::{CmAnswer, parse_cm_login};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The misbehaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The SRP_RSP cut to 20 of its 36 bytes.
    TruncatedRsp,
    /// A well-formed SRP_RSP whose tag the initiator never used.
    UnknownTag,
    /// The READ's data RDMA-written with a corrupted R_Key (and no SRP_RSP).
    BadRkey,
    /// The READ's data RDMA-written 512 bytes past the end of the descriptor (no SRP_RSP).
    PastEnd,
    /// No answer at all: the command stays in flight (until a TMF ends it).
    Silent,
}

/// What the target saw and did.
#[derive(Debug, Default)]
pub struct Stats {
    /// CM REQs accepted (logins).
    pub logins: AtomicU32,
    /// SRP_CMDs received.
    pub commands: AtomicU32,
    /// Commands answered with the fault.
    pub faults: AtomicU32,
    /// Our RDMA WRITEs the initiator's HCA refused (remote access error).
    pub refused: AtomicU32,
    /// Commands answered properly.
    pub good: AtomicU32,
    /// SRP_TSK_MGMTs received (answered FUNCTION COMPLETE unless the knobs below say).
    pub tmfs: AtomicU32,
    /// Knob: the SRP response code every SRP_TSK_MGMT is answered with (0: FUNCTION
    /// COMPLETE, 5: FAILED, ...).
    pub tmf_answer: AtomicU8,
    /// Knob: how many of the next SRP_TSK_MGMTs get no answer at all.
    pub tmf_silent: AtomicU32,
    /// The data descriptors (data-in or data-out) of the commands left unanswered
    /// ([`Fault::Silent`]), in the order they came.
    pub held: Mutex<Vec<DirectBuf>>,
    /// Knob: a late access under the held descriptors' keys, on the current channel: the
    /// target sets it back to [`Late::None`] once posted.
    pub late: AtomicU8,
    /// Late accesses that completed (the initiator's HCA let them in).
    pub late_landed: AtomicU32,
    /// Late accesses the initiator's HCA refused (remote access error).
    pub late_refused: AtomicU32,
    /// Late accesses that ended otherwise (the channel flushed them).
    pub late_other: AtomicU32,
}

/// The late access [`Stats::late`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Late {
    None = 0,
    /// An RDMA WRITE of [`POISON`] to each held descriptor (a READ's data-in).
    Write = 1,
    /// An RDMA READ of each held descriptor (a WRITE's data-out).
    Read = 2,
}

impl Stats {
    /// Reads a counter.
    pub fn get(c: &AtomicU32) -> u32 {
        c.load(Ordering::SeqCst)
    }

    /// Asks the target for a `late` access under every held descriptor's key and waits
    /// (20 s at most) for their completions: (landed, refused at the HCA).
    pub fn late_access(&self, late: Late) -> (u32, u32) {
        let held = self.held.lock().expect("held").len() as u32;
        assert!(held >= 1, "the target holds a descriptor");
        let total = || {
            Self::get(&self.late_landed)
                + Self::get(&self.late_refused)
                + Self::get(&self.late_other)
        };
        let (landed, refused, all) = (
            Self::get(&self.late_landed),
            Self::get(&self.late_refused),
            total(),
        );
        self.late.store(late as u8, Ordering::SeqCst);
        let end = std::time::Instant::now() + Duration::from_secs(20);
        while total() < all + held {
            assert!(
                std::time::Instant::now() < end,
                "the late access's completions: not within 20 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        (
            Self::get(&self.late_landed) - landed,
            Self::get(&self.late_refused) - refused,
        )
    }
}

/// The byte the target holds at byte `i` of block `lba`.
pub fn block_byte(lba: u64, i: usize) -> u8 {
    let x = lba.wrapping_mul(512).wrapping_add(i as u64);
    (x.wrapping_mul(0x9e37_79b9) >> 7) as u8 ^ (lba as u8)
}

/// `blocks` blocks from `lba`.
pub fn block_data(lba: u64, blocks: usize) -> Vec<u8> {
    (0..blocks * 512)
        .map(|i| block_byte(lba + (i / 512) as u64, i % 512))
        .collect()
}

/// What a refused write carries (must never show up in the initiator's buffers).
pub const POISON: u8 = 0xee;

/// The target; stops and joins its thread when dropped.
pub struct HostileTarget {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Its counters.
    pub stats: Arc<Stats>,
}

impl HostileTarget {
    /// Starts the target at `ip` (default UDP port) listening on `service_id`; the first
    /// `times` SRP_CMDs get `fault` (`u32::MAX`: all of them).
    pub fn start(ip: IpAddr, guid: Guid, service_id: ServiceId, fault: Fault, times: u32) -> Self {
        let hca = Arc::new(Hca::open(HcaConfig::new(guid, vec![ip])).expect("target HCA opens"));
        // QP1 through a CA over the same device; the RC channel on the engine itself.
        let ca = Arc::new(SoftCa::shared(hca.clone()).expect("CA"));
        SyncCa::new(ca.clone())
            .open_ca(Arc::new(|_| {}))
            .expect("open CA");
        let gsi = GsiPort::open(ca.clone(), 1, GsiPortConfig::default()).expect("GSI port");
        let pd = hca.with(|e, _| e.alloc_pd());
        let mut cm = CmEndpoint::new(CmConfig {
            local_ca_guid: guid,
            local_gid: Gid::from_ip(ip),
            port: 1,
            time_wait: Duration::from_millis(100),
            agent_id: guid.0 as u32,
            first_comm_id: access_layer::cm::random_comm_id(),
        });
        cm.listen(service_id).expect("listen");
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Stats::default());
        let mut t = Target {
            hca,
            _ca: ca,
            gsi,
            pd,
            cm,
            chan: None,
            fault,
            times,
            stats: stats.clone(),
            next_send: 0,
        };
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                t.round();
                std::thread::sleep(Duration::from_micros(200));
            }
            t.close();
        });
        HostileTarget {
            stop,
            thread: Some(thread),
            stats,
        }
    }
}

impl Drop for HostileTarget {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const IOVA: u64 = 0x7000_0000;
const RECVS: usize = 32;
const RECV_LEN: usize = 9 << 10;
const SENDS: usize = 32;
const SEND_LEN: usize = 256;
const DATA_OFF: usize = RECVS * RECV_LEN + SENDS * SEND_LEN;
const DATA_LEN: usize = 512 << 10;
const RECV_BIT: u64 = 1 << 32;
/// wr_id of a late access.
const LATE_ID: u64 = 0x2000;

struct Chan {
    qp: QpId,
    cq: CqId,
    mr: MrKeys,
    mem: Arc<MemBlock>,
    imm_data_offset: u16,
}

struct Target {
    hca: Arc<Hca>,
    _ca: Arc<SoftCa>,
    gsi: GsiPort,
    pd: PdId,
    cm: CmEndpoint,
    chan: Option<Chan>,
    fault: Fault,
    times: u32,
    stats: Arc<Stats>,
    next_send: usize,
}

impl Target {
    fn round(&mut self) {
        let Target { hca, gsi, cm, .. } = self;
        let now = hca.now();
        while let Ok(Some((from, mad))) = gsi.recv() {
            if matches!(mad.header().map(|h| h.mgmt_class), Ok(MgmtClass::Cm)) {
                cm.handle_mad(now, from, &mad.0);
            }
        }
        if cm.poll_timeout().is_some_and(|t| t <= now) {
            cm.handle_timeout(now);
        }
        while let Some(out) = cm.poll_transmit() {
            let _ = gsi.send(&out);
        }
        while let Some(ev) = self.cm.poll_event() {
            if let CmEvent::ReqReceived { conn, req, .. } = ev {
                self.accept(conn, &req);
            }
        }
        self.poll_channel();
        self.late_access();
    }

    fn close(&mut self) {
        if let Some(c) = self.chan.take() {
            self.hca.with(|e, now| {
                let _ = e.destroy_qp(now, c.qp);
                let _ = e.destroy_cq(c.cq);
                let _ = e.dereg_mr(c.mr);
            });
        }
    }

    fn accept(&mut self, conn: access_layer::cm::ConnId, req: &CmReq) {
        self.close();
        // The IB CM form: the 64-byte login is the REQ's private data.
        let login = parse_cm_login(req.service_id, None, &req.private_data.0).expect("a login");
        let n = self.stats.logins.fetch_add(1, Ordering::SeqCst) + 1;
        let total = DATA_OFF + DATA_LEN;
        let mem = MemBlock::new(total);
        let pd = self.pd;
        let psn = Psn::from_wire(0x4000 + n * 0x101);
        let peer = rc_connect(req, psn);
        let (qp, cq, mr, qpn) = self.hca.with(|e, now| {
            let mr = e
                .reg_mr(pd, mem.clone(), 0, total as u64, IOVA, Access::LOCAL_WRITE)
                .expect("target MR");
            let cq = e.create_cq(RECVS + 4 * SENDS);
            let qp = e
                .create_qp(QpInit::rc(pd, cq, 4 * SENDS, RECVS))
                .expect("target QP");
            e.connect_rc(now, qp, &peer).expect("target QP connects");
            for i in 0..RECVS {
                let wr = RecvWr {
                    wr_id: RECV_BIT | i as u64,
                    sg_list: [sge(mr, i * RECV_LEN, RECV_LEN)].into(),
                };
                e.post_recv(now, qp, wr).expect("recv posted");
            }
            (qp, cq, mr, e.qp_num(qp).expect("qpn"))
        });
        let rsp = login_rsp(
            login.req.tag.0,
            login.req.req_it_iu_len.min(RECV_LEN as u32),
        );
        let a = CmAnswer::Accept { private_data: rsp }
            .accept_params(qpn)
            .expect("accept params");
        let params = AcceptParams {
            qpn,
            receive_psn: psn,
            responder_resources: a.responder_resources,
            initiator_depth: a.initiator_depth,
            rnr_retry_count: a.rnr_retry_count,
            private_data: a.private_data,
        };
        let now = self.hca.now();
        self.cm.accept(now, conn, &params).expect("CM accept");
        self.chan = Some(Chan {
            qp,
            cq,
            mr,
            mem,
            imm_data_offset: login.req.imm_data_offset,
        });
    }

    fn poll_channel(&mut self) {
        let Some(c) = &self.chan else { return };
        let (qp, cq) = (c.qp, c.cq);
        let mut wcs: Vec<Wc> = Vec::new();
        let _ = self.hca.with(|e, _| e.poll_cq(cq, 64, &mut wcs));
        for wc in wcs {
            if wc.wr_id == LATE_ID {
                let counter = match wc.status {
                    WcStatus::Success => &self.stats.late_landed,
                    WcStatus::RemAccessErr => &self.stats.late_refused,
                    _ => &self.stats.late_other,
                };
                counter.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            if wc.wr_id & RECV_BIT == 0 {
                if wc.status == WcStatus::RemAccessErr {
                    self.stats.refused.fetch_add(1, Ordering::SeqCst);
                }
                continue;
            }
            if wc.status != WcStatus::Success {
                continue;
            }
            let i = (wc.wr_id & 0xffff) as usize;
            let Some(c) = &self.chan else { return };
            let mut iu = vec![0u8; wc.byte_len as usize];
            let _ = c.mem.read(i * RECV_LEN, &mut iu);
            if iu.first() == Some(&0x02) {
                self.command(&iu);
            } else if iu.first() == Some(&0x01) && iu.len() >= 16 {
                // SRP_TSK_MGMT: FUNCTION COMPLETE (an SRP_RSP without response data), or
                // what the knobs say.
                self.stats.tmfs.fetch_add(1, Ordering::SeqCst);
                let tag = u64::from_be_bytes(iu[8..16].try_into().unwrap_or([0; 8]));
                let silent = self
                    .stats
                    .tmf_silent
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                let code = self.stats.tmf_answer.load(Ordering::SeqCst);
                if !silent {
                    let mut rsp = rsp_bytes(tag);
                    if code != 0 {
                        // RSPVALID, four bytes of response data, the code in the last.
                        rsp[18] = 0x01;
                        rsp[32..36].copy_from_slice(&4u32.to_be_bytes());
                        rsp.extend_from_slice(&[0, 0, 0, code]);
                    }
                    self.respond(rsp, Vec::new());
                }
            }
            let Some(c) = &self.chan else { return };
            let wr = RecvWr {
                wr_id: wc.wr_id,
                sg_list: [sge(c.mr, i * RECV_LEN, RECV_LEN)].into(),
            };
            let _ = self.hca.with(|e, now| e.post_recv(now, qp, wr));
        }
    }

    /// Posts the late access the knob asks for, once.
    fn late_access(&mut self) {
        let late = self.stats.late.swap(Late::None as u8, Ordering::SeqCst);
        if late == Late::None as u8 {
            return;
        }
        let Some(c) = &self.chan else { return };
        let held = self.stats.held.lock().expect("held").clone();
        let _ = c.mem.write(DATA_OFF, &vec![POISON; DATA_LEN]);
        let wrs = held
            .iter()
            .map(|d| {
                let mut wr = write_wr(c.mr, 0, d.va(), d.rkey(), d.len() as usize);
                wr.wr_id = LATE_ID;
                if late == Late::Read as u8 {
                    wr.op = SendOp::Read {
                        remote_addr: d.va(),
                        rkey: d.rkey(),
                    };
                }
                wr
            })
            .collect();
        self.post(wrs);
    }

    fn command(&mut self, iu: &[u8]) {
        let Some(c) = &self.chan else { return };
        let Ok(cmd) = Cmd::parse_with(iu, c.imm_data_offset) else {
            return;
        };
        let seen = self.stats.commands.fetch_add(1, Ordering::SeqCst);
        let hostile = seen < self.times;
        let tag = cmd.tag.0;
        let descs: Vec<DirectBuf> = match cmd.data_in {
            DataDesc::Direct(d) => vec![d],
            DataDesc::Indirect(i) => i.inline.to_vec(),
            _ => Vec::new(),
        };
        let mut wrs = Vec::new();
        if cmd.cdb[0] == 0x28 {
            let lba = u32::from_be_bytes([cmd.cdb[2], cmd.cdb[3], cmd.cdb[4], cmd.cdb[5]]);
            let blocks = u16::from_be_bytes([cmd.cdb[7], cmd.cdb[8]]);
            let data = block_data(u64::from(lba), usize::from(blocks));
            match (hostile, self.fault) {
                (true, Fault::BadRkey | Fault::PastEnd) => {
                    let d = descs.first().expect("a data-in descriptor");
                    let (rkey, extra) = match self.fault {
                        Fault::BadRkey => (Rkey(d.rkey().0 ^ 0x00ab_cd00), 0),
                        _ => (d.rkey(), 512),
                    };
                    let len = d.len() as usize + extra;
                    let _ = c.mem.write(DATA_OFF, &vec![POISON; len]);
                    wrs.push(write_wr(c.mr, 0, d.va(), rkey, len));
                    self.stats.faults.fetch_add(1, Ordering::SeqCst);
                    return self.post(wrs);
                }
                _ => {
                    let _ = c.mem.write(DATA_OFF, &data);
                    let mut at = 0usize;
                    for d in &descs {
                        let len = (d.len() as usize).min(data.len() - at);
                        wrs.push(write_wr(c.mr, at, d.va(), d.rkey(), len));
                        at += len;
                    }
                }
            }
        }
        if hostile && self.fault == Fault::Silent {
            let mut held = self.stats.held.lock().expect("held");
            held.extend(descs);
            if let DataDesc::Direct(d) = cmd.data_out {
                held.push(d);
            } else if let DataDesc::Indirect(i) = cmd.data_out {
                held.extend(i.inline.iter().copied());
            }
            drop(held);
            self.stats.faults.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let mut rsp = rsp_bytes(tag);
        match (hostile, self.fault) {
            (true, Fault::TruncatedRsp) => rsp.truncate(20),
            (true, Fault::UnknownTag) => {
                rsp[8..16].copy_from_slice(&(tag ^ (1 << 40)).to_be_bytes())
            }
            _ => {}
        }
        if hostile {
            self.stats.faults.fetch_add(1, Ordering::SeqCst);
        } else {
            self.stats.good.fetch_add(1, Ordering::SeqCst);
        }
        self.respond(rsp, wrs);
    }

    /// Sends `rsp` behind `wrs`.
    fn respond(&mut self, rsp: Vec<u8>, mut wrs: Vec<SendWr>) {
        let Some(c) = &self.chan else { return };
        let slot = self.next_send % SENDS;
        self.next_send += 1;
        let off = RECVS * RECV_LEN + slot * SEND_LEN;
        let _ = c.mem.write(off, &rsp);
        wrs.push(SendWr {
            wr_id: slot as u64,
            op: SendOp::Send,
            sg_list: [sge(c.mr, off, rsp.len())].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        });
        self.post(wrs);
    }

    fn post(&self, wrs: Vec<SendWr>) {
        let Some(c) = &self.chan else { return };
        let qp = c.qp;
        self.hca.with(|e, now| {
            for wr in wrs {
                let _ = e.post_send(now, qp, wr);
            }
        });
    }
}

fn sge(mr: MrKeys, off: usize, len: usize) -> Sge {
    Sge {
        addr: IOVA + off as u64,
        len: len as u32,
        lkey: mr.lkey,
    }
}

/// A signaled RDMA WRITE of `len` bytes from `at` in the data area.
fn write_wr(mr: MrKeys, at: usize, va: u64, rkey: Rkey, len: usize) -> SendWr {
    SendWr {
        wr_id: 0x1000,
        op: SendOp::Write {
            remote_addr: va,
            rkey,
        },
        sg_list: [sge(mr, DATA_OFF + at, len)].into(),
        flags: SendFlags::SIGNALED,
        ud: None,
    }
}

/// SRP_LOGIN_RSP (52 bytes): 16 credits, direct and indirect formats, no immediate data.
fn login_rsp(tag: u64, max_it_iu_len: u32) -> Vec<u8> {
    let mut b = vec![0u8; 52];
    b[0] = 0xc0;
    b[4..8].copy_from_slice(&16u32.to_be_bytes());
    b[8..16].copy_from_slice(&tag.to_be_bytes());
    b[16..20].copy_from_slice(&max_it_iu_len.to_be_bytes());
    b[20..24].copy_from_slice(&(SEND_LEN as u32).to_be_bytes());
    b[24..26].copy_from_slice(&0x0006u16.to_be_bytes());
    b
}

/// SRP_RSP (36 bytes): GOOD, one credit back, no residual, sense or response data.
fn rsp_bytes(tag: u64) -> Vec<u8> {
    let mut b = vec![0u8; 36];
    b[0] = 0xc1;
    b[4..8].copy_from_slice(&1u32.to_be_bytes());
    b[8..16].copy_from_slice(&tag.to_be_bytes());
    b
}

/// Our QP's attributes from the REQ (as the daemon's login does).
fn rc_connect(req: &CmReq, psn: Psn) -> RcConnect {
    let mtu = match u8::from(req.path_mtu) {
        1 => PathMtu::Mtu256,
        2 => PathMtu::Mtu512,
        4 => PathMtu::Mtu2048,
        5 => PathMtu::Mtu4096,
        _ => PathMtu::Mtu1024,
    };
    RcConnect {
        access: Access::LOCAL_WRITE,
        dest_gid: req.primary_path.local_gid,
        dest_qpn: req.local_qpn,
        path_mtu: mtu,
        sq_psn: QpPsns::passive(req, psn).sq_psn,
        rq_psn: psn,
        timeout: req.primary_path.local_ack_timeout,
        retry_cnt: req.retry_count,
        rnr_retry: req.rnr_retry_count,
        min_rnr_timer: 1,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        pkey_index: 0,
        flow_label: 0,
        hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
        traffic_class: 0,
    }
}
