//! A simulated fabric with an initiator ("host", 127.0.125.1) and a target (127.0.126.1),
//! and helpers for the registration tests: the host's data memory is a separate block with
//! no region over it except what the strategy under test registers; the target has plain
//! local memory. Throwaway QP pairs let a hostile target try accesses that kill a connection
//! without disturbing the main one.
#![allow(dead_code, unreachable_pub, missing_docs)]

use hca::engine::{CqId, Engine, QpId, RcConnect};
use hca::ids::{Gid, Guid, Psn, Qpn, Rkey};
use hca::mem::MemBlock;
use hca::mr::{Access, MrKeys, PdId};
use hca::qp::QpInit;
use hca::qp::state::{QpState, QpType};
use hca::sim::{Fabric, FaultConfig};
use hca::verbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcStatus};
use hca::wire::PathMtu;
use srp::initiator::Negotiated;
use srp::wire::login::{BufFormats, MultiChannelResult};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

pub const PAGE: u64 = 4096;
/// The host's data memory: 64 pages.
pub const HOST_MEM: usize = 64 * PAGE as usize;
/// I/O address of each side's local buffers region.
pub const LOCAL_IOVA: u64 = 0x1000_0000;
pub const LOCAL_MEM: usize = 1 << 20;

pub struct Side {
    pub hca: usize,
    pub pd: PdId,
    pub cq: CqId,
    pub ip: IpAddr,
    /// Local buffers (IUs, RDMA landing zones), local access only.
    pub local: Arc<MemBlock>,
    pub local_mr: MrKeys,
}

impl Side {
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: LOCAL_IOVA + offset,
            len,
            lkey: self.local_mr.lkey,
        }
    }
}

/// A connected pair of QPs: `host` on the initiator, `tgt` on the target.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    pub host: QpId,
    pub tgt: QpId,
}

pub struct World {
    pub f: Fabric,
    pub host: Side,
    pub tgt: Side,
    /// The host's data memory (what the I/O buffers are made of).
    pub data: Arc<MemBlock>,
    /// The main connection.
    pub link: Link,
}

fn side(f: &mut Fabric, ip: [u8; 4]) -> Side {
    let ip = IpAddr::V4(Ipv4Addr::from(ip));
    let hca = f.add(Engine::new(
        Guid(0x5352_5000_0000_0000 | u64::from(ip_low(ip))),
        &[ip],
    ));
    let e = f.hca(hca);
    let pd = e.alloc_pd();
    let local = MemBlock::new(LOCAL_MEM);
    let local_mr = e
        .reg_mr(
            pd,
            local.clone(),
            0,
            LOCAL_MEM as u64,
            LOCAL_IOVA,
            Access::LOCAL_WRITE,
        )
        .expect("reg_mr");
    let cq = e.create_cq(1 << 14);
    Side {
        hca,
        pd,
        cq,
        ip,
        local,
        local_mr,
    }
}

fn ip_low(ip: IpAddr) -> u16 {
    match ip {
        IpAddr::V4(v) => u16::from_be_bytes([v.octets()[2], v.octets()[3]]),
        IpAddr::V6(_) => 0,
    }
}

fn qp(f: &mut Fabric, s: &Side) -> (QpId, Qpn) {
    let init = QpInit {
        qp_type: QpType::Rc,
        pd: s.pd,
        send_cq: s.cq,
        recv_cq: s.cq,
        srq: None,
        max_send_wr: 1024,
        max_recv_wr: 1024,
        max_sge: 16,
        sq_sig_all: false,
    };
    let e = f.hca(s.hca);
    let id = e.create_qp(init).expect("create_qp");
    (id, e.qp_num(id).expect("qpn"))
}

fn rc(peer: IpAddr, qpn: Qpn, sq: u32, rq: u32) -> RcConnect {
    RcConnect {
        access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        dest_gid: Gid::from_ip(peer),
        dest_qpn: qpn,
        path_mtu: PathMtu::Mtu1024,
        sq_psn: Psn::from_wire(sq),
        rq_psn: Psn::from_wire(rq),
        timeout: 8,
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

fn make_link(f: &mut Fabric, host: &Side, tgt: &Side) -> Link {
    let (hq, hqpn) = qp(f, host);
    let (tq, tqpn) = qp(f, tgt);
    let now = f.now();
    let h = f.hca(host.hca);
    h.connect_rc(now, hq, &rc(tgt.ip, tqpn, 100, 5000))
        .expect("connect host");
    let t = f.hca(tgt.hca);
    t.connect_rc(now, tq, &rc(host.ip, hqpn, 5000, 100))
        .expect("connect target");
    Link { host: hq, tgt: tq }
}

impl World {
    pub fn new(seed: u64) -> World {
        let mut f = Fabric::new(seed, FaultConfig::default());
        let host = side(&mut f, [127, 0, 125, 1]);
        let tgt = side(&mut f, [127, 0, 126, 1]);
        let data = MemBlock::new(HOST_MEM);
        let link = make_link(&mut f, &host, &tgt);
        World {
            f,
            host,
            tgt,
            data,
            link,
        }
    }

    /// A new connected QP pair between the two sides.
    pub fn new_link(&mut self) -> Link {
        make_link(&mut self.f, &self.host, &self.tgt)
    }

    pub fn settle(&mut self) {
        self.f
            .run_until(std::time::Duration::from_secs(1), |_| false);
    }

    pub fn host_post(&mut self, qp: QpId, wrs: impl IntoIterator<Item = SendWr>) {
        let now = self.f.now();
        self.f
            .hca(self.host.hca)
            .post_send_list(now, qp, wrs)
            .expect("host post_send_list");
    }

    pub fn tgt_post(&mut self, qp: QpId, wr: SendWr) {
        let now = self.f.now();
        self.f
            .hca(self.tgt.hca)
            .post_send(now, qp, wr)
            .expect("target post_send");
    }

    pub fn host_recv(&mut self, qp: QpId, wr_id: u64, offset: u64, len: u32) {
        let now = self.f.now();
        let wr = RecvWr {
            wr_id,
            sg_list: [self.host.sge(offset, len)].into(),
        };
        self.f
            .hca(self.host.hca)
            .post_recv(now, qp, wr)
            .expect("host post_recv");
    }

    pub fn tgt_recv(&mut self, qp: QpId, wr_id: u64, offset: u64, len: u32) {
        let now = self.f.now();
        let wr = RecvWr {
            wr_id,
            sg_list: [self.tgt.sge(offset, len)].into(),
        };
        self.f
            .hca(self.tgt.hca)
            .post_recv(now, qp, wr)
            .expect("target post_recv");
    }

    pub fn drain_host(&mut self) -> Vec<Wc> {
        let mut out = Vec::new();
        self.f
            .hca(self.host.hca)
            .poll_cq(self.host.cq, usize::MAX, &mut out)
            .expect("poll");
        out
    }

    pub fn drain_tgt(&mut self) -> Vec<Wc> {
        let mut out = Vec::new();
        self.f
            .hca(self.tgt.hca)
            .poll_cq(self.tgt.cq, usize::MAX, &mut out)
            .expect("poll");
        out
    }

    /// The target RDMA-WRITEs (`write`) or -READs `len` bytes at `va` under `rkey` on link
    /// `l`, from / into its local memory at `local_off`; returns the target's completion.
    pub fn rdma(
        &mut self,
        l: Link,
        write: bool,
        va: u64,
        rkey: Rkey,
        len: u32,
        local_off: u64,
    ) -> Wc {
        let op = if write {
            SendOp::Write {
                remote_addr: va,
                rkey,
            }
        } else {
            SendOp::Read {
                remote_addr: va,
                rkey,
            }
        };
        let wr = SendWr {
            wr_id: 0xa77,
            op,
            sg_list: [self.tgt.sge(local_off, len)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        self.tgt_post(l.tgt, wr);
        self.settle();
        let wcs = self.drain_tgt();
        let mine: Vec<Wc> = wcs.into_iter().filter(|w| w.wr_id == 0xa77).collect();
        assert_eq!(mine.len(), 1, "one completion for the access: {mine:?}");
        mine[0]
    }

    /// A hostile access on a throwaway link: it must fail with a remote access error, and
    /// the host's side of that link must have gone to ERR (its HCA refused the access).
    pub fn attack_fails(&mut self, what: &str, write: bool, va: u64, rkey: Rkey, len: u32) {
        let l = self.new_link();
        // The target's local bytes it would write: something recognisable.
        self.tgt.local.fill(0, len as usize, 0xee).expect("fill");
        let wc = self.rdma(l, write, va, rkey, len, 0);
        assert_eq!(wc.status, WcStatus::RemAccessErr, "{what}: {wc:?}");
        let host_qp = self.f.hca(self.host.hca).qp_state(l.host);
        assert_eq!(host_qp, Some(QpState::Err), "{what}: the host refused it");
        // Flushes of that link's host side, if any, are not ours to keep.
        let _ = self.drain_host();
    }

    /// A hostile access on a throwaway link that the HCA lets through (all-memory strategy).
    pub fn attack(&mut self, write: bool, va: u64, rkey: Rkey, len: u32) -> WcStatus {
        let l = self.new_link();
        self.tgt.local.fill(0, len as usize, 0xee).expect("fill");
        self.rdma(l, write, va, rkey, len, 0).status
    }
}

/// Fills `mem[offset..offset+len]` with a pattern derived from `seed`.
pub fn pattern(mem: &MemBlock, offset: u64, len: usize, seed: u8) {
    let bytes: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    mem.write(offset as usize, &bytes).expect("pattern");
}

pub fn read(mem: &MemBlock, offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    mem.read(offset as usize, &mut v).expect("read");
    v
}

/// What a login granting immediate data up to `max_imm_len` negotiated.
pub fn negotiated(max_imm_len: u32) -> Negotiated {
    Negotiated {
        window: 16,
        max_it_iu_len: 8260,
        max_ti_iu_len: 8260,
        buf_fmts: BufFormats::DIRECT | BufFormats::INDIRECT,
        imm_data: true,
        imm_data_offset: 68,
        max_imm_len,
        multi_channel: MultiChannelResult::NoChannel,
    }
}

/// The FRMR pool `config` asks for, its regions allocated in `pd` of `e` (the caller's
/// verbs: the strategy makes none).
pub fn frmr_pool(
    e: &mut Engine,
    pd: PdId,
    config: srp::initiator::registration::FrmrConfig,
) -> srp::initiator::registration::FrmrStrategy {
    srp::initiator::registration::FrmrStrategy::allocate(config, |pages| {
        e.alloc_fast_reg_mr(pd, pages)
            .map(|k| hca::mr::MrKey::from(k.lkey))
    })
    .expect("pool")
}

/// The all-memory strategy over `block` at `iova`, registered in `pd` of `e`.
pub fn all_memory(
    e: &mut Engine,
    pd: PdId,
    block: &Arc<MemBlock>,
    iova: u64,
    max_descriptors: usize,
) -> (
    srp::initiator::registration::AllMemoryStrategy,
    srp::initiator::registration::TrustWarning,
) {
    use srp::initiator::registration::AllMemoryStrategy;
    let keys = e
        .reg_mr(
            pd,
            block.clone(),
            0,
            block.len() as u64,
            iova,
            AllMemoryStrategy::ACCESS,
        )
        .expect("register all memory");
    AllMemoryStrategy::new(block, keys, iova, max_descriptors).expect("strategy")
}
