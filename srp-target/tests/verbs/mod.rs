//! A test initiator built directly on `hca` verbs, and a target whose [`ChannelIo`]s the
//! test drives itself (two soft devices on loopback; the QPs are connected with
//! `connect_rc`, the attributes a CM exchange would carry). Each target channel may carry
//! its own I_T nexus, so several initiators can share one logical unit. Used by
//! channel_io.rs, channel_credits.rs and channel_invalidate.rs.
#![allow(dead_code, unreachable_pub)]

use crate::common::{IMM_OFFSET, cmd_bytes, rc_qp, srp_cmd};
use access_layer::verbs::SyncCa;
use hca::ca::SoftCa;
use hca::driver::{Hca, HcaConfig};
use hca::engine::{CqId, QpId, RcConnect};
use hca::ids::{Gid, Guid, Psn, Qpn, Rkey};
use hca::mem::MemBlock;
use hca::mr::{Access, MrKeys, PdId};
use hca::verbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcOpcode, WcStatus};
use hca::wire::PathMtu;
use scsi::Lun;
use srp::wire::cmd::Cmd;
use srp::wire::desc::{DataDesc, DirectBuf};
use srp::wire::login::{BufFormats, LoginReqFlags};
use srp_target::LogicalUnit;
use srp_target::io::{ChannelIo, ChannelIoConfig, Executor, IoState, NexusInfo};
use srp_target::login::{ChannelId, Negotiated};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const IOVA: u64 = 0x1000_0000;
pub const MEM: usize = 8 << 20;
pub const IT_IU_LEN: u32 = 1024;
pub const TI_IU_LEN: u32 = 256;
pub const DEADLINE: Duration = Duration::from_secs(15);

pub const EP_SPAN: u64 = 1 << 20;
pub const EP_RECV: u64 = 0;
pub const EP_SEND: u64 = 16 << 10;
pub const EP_TABLE: u64 = 20 << 10;
pub const EP_DATA: u64 = 64 << 10;

pub fn ip(net: u8, host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, net, host))
}

pub fn open(addr: IpAddr) -> Hca {
    let IpAddr::V4(v4) = addr else {
        panic!("IPv4 only")
    };
    let guid = Guid(0x5352_5400_0000_0000 | u64::from(u32::from(v4)));
    Hca::open(HcaConfig::new(guid, vec![addr])).unwrap_or_else(|e| panic!("open {addr}: {e}"))
}

pub fn rc(access: Access, peer: IpAddr, qpn: Qpn, sq: u32, rq: u32) -> RcConnect {
    RcConnect {
        access,
        dest_gid: Gid::from_ip(peer),
        dest_qpn: qpn,
        path_mtu: PathMtu::Mtu1024,
        sq_psn: Psn::from_wire(sq),
        rq_psn: Psn::from_wire(rq),
        timeout: 10,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: 8,
        max_dest_rd_atomic: 8,
        pkey_index: 0,
        flow_label: 0,
        hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
        traffic_class: 0,
    }
}

/// One initiator channel: a QP and CQ, and a 1 MiB window of the initiator's memory.
pub struct Ep {
    pub qp: QpId,
    pub qpn: Qpn,
    pub cq: CqId,
    pub base: u64,
    pub recvs: usize,
}

/// The initiator's device.
pub struct Initiator {
    pub hca: Hca,
    pub ip: IpAddr,
    pd: PdId,
    pub mem: Arc<MemBlock>,
    mr: MrKeys,
}

impl Initiator {
    pub fn open(addr: IpAddr) -> Initiator {
        let hca = open(addr);
        let mem = MemBlock::new(MEM);
        let (pd, mr) = hca.with(|e, _| {
            let pd = e.alloc_pd();
            let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
            let mr = e
                .reg_mr(pd, mem.clone(), 0, MEM as u64, IOVA, access)
                .expect("reg_mr");
            (pd, mr)
        });
        Initiator {
            hca,
            ip: addr,
            pd,
            mem,
            mr,
        }
    }

    pub fn rkey(&self) -> Rkey {
        self.mr.rkey.expect("remote access")
    }

    /// The protection domain of the initiator's QPs and regions.
    pub fn pd(&self) -> PdId {
        self.pd
    }

    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: IOVA + offset,
            len,
            lkey: self.mr.lkey,
        }
    }

    /// A QP in RESET with `recvs` receive buffers to post once connected.
    pub fn ep(&self, index: u64, recvs: usize) -> Ep {
        let (qp, qpn, cq) = rc_qp(&self.hca, self.pd, 1024, 256);
        Ep {
            qp,
            qpn,
            cq,
            base: index * EP_SPAN,
            recvs,
        }
    }

    pub fn connect(&self, ep: &Ep, target_ip: IpAddr, target_qpn: Qpn) {
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let peer = rc(access, target_ip, target_qpn, 0x200, 0x100);
        self.hca
            .with(|e, now| e.connect_rc(now, ep.qp, &peer))
            .expect("connect initiator QP");
        for i in 0..ep.recvs {
            self.post_recv(ep, i);
        }
    }

    pub fn post_recv(&self, ep: &Ep, i: usize) {
        let wr = RecvWr {
            wr_id: i as u64,
            sg_list: [self.sge(ep.base + EP_RECV + i as u64 * 256, 256)].into(),
        };
        self.hca
            .with(|e, now| e.post_recv(now, ep.qp, wr))
            .expect("post_recv");
    }

    /// Posts `ius` as SENDs in one chain (each from its own slot of the send area).
    pub fn send(&self, ep: &Ep, ius: &[Vec<u8>]) {
        let wrs: Vec<SendWr> = ius
            .iter()
            .enumerate()
            .map(|(k, iu)| {
                let off = ep.base + EP_SEND + k as u64 * u64::from(IT_IU_LEN);
                self.mem.write(off as usize, iu).expect("IU fits");
                SendWr {
                    wr_id: 1000 + k as u64,
                    op: SendOp::Send,
                    sg_list: [self.sge(off, iu.len() as u32)].into(),
                    flags: SendFlags::SIGNALED,
                    ud: None,
                }
            })
            .collect();
        self.hca
            .with(|e, now| e.post_send_list(now, ep.qp, wrs))
            .expect("post_send");
    }

    pub fn poll(&self, ep: &Ep) -> Vec<Wc> {
        let mut out = Vec::new();
        self.hca
            .with(|e, _| e.poll_cq(ep.cq, 64, &mut out))
            .expect("poll");
        out
    }

    pub fn poll_one(&self, ep: &Ep) -> Option<Wc> {
        let mut out = Vec::new();
        self.hca
            .with(|e, _| e.poll_cq(ep.cq, 1, &mut out))
            .expect("poll");
        out.pop()
    }

    pub fn write(&self, ep: &Ep, off: u64, data: &[u8]) {
        self.mem
            .write((ep.base + off) as usize, data)
            .expect("fits");
    }

    pub fn read(&self, ep: &Ep, off: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.mem
            .read((ep.base + off) as usize, &mut v)
            .expect("fits");
        v
    }

    /// A descriptor for `len` bytes at `off` of `ep`'s window.
    pub fn buf(&self, ep: &Ep, off: u64, len: u32) -> DirectBuf {
        DirectBuf::new(IOVA + ep.base + off, self.rkey(), len)
    }
}

/// A target device, opened as a channel adapter (the channels' verbs go through it); its
/// channels share `lu` as LUN 0.
pub struct Target {
    pub ca: Arc<SoftCa>,
    pub ip: IpAddr,
    pd: PdId,
    pub lu: Arc<LogicalUnit>,
    /// Send-queue entries of the channels it makes (the daemon's by default).
    pub send_queue_depth: usize,
}

impl Target {
    pub fn open(addr: IpAddr, lu: LogicalUnit) -> Target {
        let ca = Arc::new(SoftCa::new(open(addr)).expect("soft CA"));
        let sync = SyncCa::new(ca.clone());
        // The test polls its channels; no event needs a handler.
        sync.open_ca(Arc::new(|_| {})).expect("open_ca");
        let pd = sync.alloc_pd().expect("alloc_pd");
        Target {
            ca,
            ip: addr,
            pd,
            lu: Arc::new(lu),
            send_queue_depth: srp_target::io::verbs::MAX_SEND_WR,
        }
    }

    /// A channel of `window` credits for the I_T nexus `nexus`.
    pub fn channel(
        &self,
        id: u64,
        window: u32,
        nexus: NexusInfo,
        executor: Arc<dyn Executor>,
    ) -> ChannelIo {
        let config = ChannelIoConfig {
            id: ChannelId(id),
            negotiated: Negotiated {
                it_iu_len: IT_IU_LEN,
                ti_iu_len: TI_IU_LEN,
                formats: BufFormats::DIRECT | BufFormats::INDIRECT,
                imm_data_offset: Some(IMM_OFFSET),
                window,
            },
            login_flags: LoginReqFlags::empty(),
            max_transfer: 256 << 10,
            max_table_entries: 16,
            send_queue_depth: self.send_queue_depth,
            luns: vec![(Lun::ZERO, self.lu.clone())],
            nexus: Arc::new(nexus),
        };
        ChannelIo::new(self.ca.clone(), self.pd, config, executor, None).expect("channel")
    }
}

/// Connects a target channel to an initiator endpoint.
pub fn connect(t: &Target, io: &mut ChannelIo, i: &Initiator, ep: &Ep) {
    let tq = io.qpn().expect("RC QP");
    i.connect(ep, t.ip, tq);
    io.connect(&rc(Access::LOCAL_WRITE, i.ip, ep.qpn, 0x100, 0x200))
        .expect("connect target QP");
}

/// Polls the target channels and `ep` until `ep` has received an IU; returns its bytes.
/// Settles aborts among `ios` after each poll, so pass every channel a PREEMPT AND ABORT
/// or task-set function should reach.
pub fn await_iu(i: &Initiator, ep: &Ep, ios: &mut [&mut ChannelIo]) -> Vec<u8> {
    await_recv(i, ep, ios).1
}

/// As [`await_iu`], with the receive completion (which names an invalidated R_Key).
pub fn await_recv(i: &Initiator, ep: &Ep, ios: &mut [&mut ChannelIo]) -> (Wc, Vec<u8>) {
    let end = Instant::now() + DEADLINE;
    while Instant::now() < end {
        for io in ios.iter_mut() {
            io.poll();
        }
        // As the daemon loop (every channel the test drives is in `ios`).
        srp_target::io::settle_aborts(ios);
        if let Some(got) = take_recv(i, ep) {
            return got;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("no IU from the target within {DEADLINE:?}");
}

/// The next IU `ep` has received, if any (send completions are checked and skipped).
pub fn take_iu(i: &Initiator, ep: &Ep) -> Option<Vec<u8>> {
    take_recv(i, ep).map(|(_, iu)| iu)
}

/// As [`take_iu`], with the receive completion.
pub fn take_recv(i: &Initiator, ep: &Ep) -> Option<(Wc, Vec<u8>)> {
    // One completion at a time, so returning at a receive drops nothing polled after it.
    while let Some(wc) = i.poll_one(ep) {
        if wc.opcode == WcOpcode::Recv {
            assert_eq!(wc.status, WcStatus::Success, "initiator receive: {wc:?}");
            let slot = wc.wr_id as usize;
            let iu = i.read(ep, EP_RECV + slot as u64 * 256, wc.byte_len as usize);
            i.post_recv(ep, slot);
            return Some((wc, iu));
        }
        assert_eq!(wc.status, WcStatus::Success, "initiator send: {wc:?}");
    }
    None
}

/// Polls `io` until it is closed.
pub fn await_closed(io: &mut ChannelIo) {
    let end = Instant::now() + DEADLINE;
    while io.state() != IoState::Closed {
        assert!(Instant::now() < end, "channel not closed: {io:?}");
        io.poll();
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// An SRP_CMD to LUN 0 with `imm` as immediate data (if any).
pub fn cmd_iu(
    tag: u64,
    cdb: &[u8],
    data_out: DataDesc<'_>,
    data_in: DataDesc<'_>,
    imm: &[u8],
) -> Vec<u8> {
    cmd_bytes(&Cmd {
        imm_data: imm,
        ..srp_cmd(tag, Lun::ZERO, cdb, data_out, data_in)
    })
}
