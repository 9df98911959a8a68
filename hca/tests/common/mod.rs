//! Two HCAs on a simulated fabric with a connected RC QP pair, and helpers to drive them.
#![allow(dead_code, unreachable_pub, missing_docs)]

use hca::engine::{CqId, Engine, QpId};
use hca::ids::{Guid, Psn, Qpn, Rkey};
use hca::mem::MemBlock;
use hca::mr::{Access, MrKeys, PdId};
use hca::qp::state::{QpAttrMask, QpType};
use hca::qp::{QpAttr, QpInit};
use hca::sim::{Fabric, FaultConfig, Rng};
use hca::verbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc};
use hca::wire::PathMtu;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// Bytes of registered memory per node.
pub const MEM: usize = 16 << 20;
/// I/O address of each node's memory.
pub const IOVA: u64 = 0x1000_0000;

/// One side of the pair.
pub struct Node {
    pub hca: usize,
    pub pd: PdId,
    pub cq: CqId,
    pub qp: QpId,
    pub qpn: Qpn,
    pub ip: IpAddr,
    pub mem: Arc<MemBlock>,
    pub mr: MrKeys,
}

impl Node {
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: IOVA + offset,
            len,
            lkey: self.mr.lkey,
        }
    }

    pub fn rkey(&self) -> Rkey {
        self.mr.rkey.expect("remote access")
    }
}

/// Options of the pair.
#[derive(Clone, Copy)]
pub struct PairOpts {
    pub mtu: PathMtu,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub access: Access,
}

impl Default for PairOpts {
    fn default() -> Self {
        PairOpts {
            mtu: PathMtu::Mtu1024,
            timeout: 8, // 1 ms
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        }
    }
}

fn node(fabric: &mut Fabric, last_octet: u8, opts: PairOpts) -> Node {
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, last_octet));
    let hca = fabric.add(Engine::new(
        Guid(0x5352_5000_0000_0000 | u64::from(last_octet)),
        &[ip],
    ));
    let e = fabric.hca(hca);
    let pd = e.alloc_pd();
    let mem = MemBlock::new(MEM);
    let mr = e
        .reg_mr(pd, mem.clone(), 0, MEM as u64, IOVA, opts.access)
        .expect("reg_mr");
    let cq = e.create_cq(1 << 16);
    let init = QpInit {
        qp_type: QpType::Rc,
        pd,
        send_cq: cq,
        recv_cq: cq,
        srq: None,
        max_send_wr: 4096,
        max_recv_wr: 4096,
        max_sge: 16,
        sq_sig_all: false,
    };
    let qp = e.create_qp(init).expect("create_qp");
    let qpn = e.qp_num(qp).expect("qpn");
    Node {
        hca,
        pd,
        cq,
        qp,
        qpn,
        ip,
        mem,
        mr,
    }
}

/// Brings `a` to RTS connected to `b`.
pub fn connect(fabric: &mut Fabric, a: &Node, b: &Node, a_psn: Psn, b_psn: Psn, opts: PairOpts) {
    use hca::qp::state::QpState;
    let now = fabric.now();
    let e = fabric.hca(a.hca);
    let mut attr = QpAttr {
        state: QpState::Init,
        access: opts.access,
        ..QpAttr::default()
    };
    e.modify_qp(
        now,
        a.qp,
        &attr,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .expect("INIT");
    attr.state = QpState::Rtr;
    attr.dest_gid = hca::ids::Gid::from_ip(b.ip);
    attr.dest_qpn = b.qpn;
    attr.path_mtu = opts.mtu;
    attr.rq_psn = b_psn;
    attr.min_rnr_timer = opts.min_rnr_timer;
    attr.max_dest_rd_atomic = 8;
    e.modify_qp(
        now,
        a.qp,
        &attr,
        QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER,
    )
    .expect("RTR");
    attr.state = QpState::Rts;
    attr.sq_psn = a_psn;
    attr.timeout = opts.timeout;
    attr.retry_cnt = opts.retry_cnt;
    attr.rnr_retry = opts.rnr_retry;
    attr.max_rd_atomic = 8;
    e.modify_qp(
        now,
        a.qp,
        &attr,
        QpAttrMask::STATE
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::SQ_PSN
            | QpAttrMask::MAX_QP_RD_ATOMIC,
    )
    .expect("RTS");
}

/// A fabric with two connected nodes (PSNs chosen by the seed, near the 24-bit wrap for
/// some seeds so wrap-around is exercised).
pub fn pair(seed: u64, faults: FaultConfig, opts: PairOpts) -> (Fabric, Node, Node) {
    let mut fabric = Fabric::new(seed, faults);
    let a = node(&mut fabric, 2, opts);
    let b = node(&mut fabric, 3, opts);
    let mut rng = Rng::new(seed ^ 0x5eed);
    let near_wrap = seed % 4 == 0;
    let mut psn = || {
        if near_wrap {
            Psn::from_wire(0x00ff_ff00 + rng.range(0, 0x80) as u32)
        } else {
            Psn::from_wire(rng.next_u64() as u32)
        }
    };
    let (pa, pb) = (psn(), psn());
    connect(&mut fabric, &a, &b, pa, pb, opts);
    connect(&mut fabric, &b, &a, pb, pa, opts);
    (fabric, a, b)
}

/// Fills `len` bytes at `offset` of `mem` with a pattern derived from `tag`.
pub fn fill(mem: &MemBlock, offset: u64, len: usize, tag: u64) {
    let mut rng = Rng::new(tag);
    let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    mem.write(offset as usize, &data).expect("fill");
}

/// Reads `len` bytes at `offset`.
pub fn read(mem: &MemBlock, offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    mem.read(offset as usize, &mut v).expect("read");
    v
}

/// Polls everything from a node's CQ.
pub fn poll(fabric: &mut Fabric, n: &Node, out: &mut Vec<Wc>) {
    fabric
        .hca(n.hca)
        .poll_cq(n.cq, usize::MAX, out)
        .expect("poll");
}

pub fn send_wr(wr_id: u64, op: SendOp, sg: Vec<Sge>) -> SendWr {
    SendWr {
        wr_id,
        op,
        sg_list: sg,
        flags: SendFlags::SIGNALED,
        ud: None,
    }
}

pub fn recv_wr(wr_id: u64, sg: Vec<Sge>) -> RecvWr {
    RecvWr { wr_id, sg_list: sg }
}

pub fn post_send(f: &mut Fabric, n: &Node, wr: SendWr) {
    let now = f.now();
    f.hca(n.hca).post_send(now, n.qp, wr).expect("post_send");
}

pub fn post_recv(f: &mut Fabric, n: &Node, wr: RecvWr) {
    let now = f.now();
    f.hca(n.hca).post_recv(now, n.qp, wr).expect("post_recv");
}
