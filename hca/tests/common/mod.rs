//! Two HCAs on a simulated fabric with a connected RC QP pair, and helpers to drive them.
#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod udp;

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
    /// The QP's partition: an index in its port's P_Key table.
    pub pkey_index: u16,
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
            pkey_index: 0,
        }
    }
}

pub fn node(fabric: &mut Fabric, last_octet: u8, opts: PairOpts) -> Node {
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, last_octet));
    let hca = fabric.add(Engine::new(
        Guid(0x5352_5000_0000_0000 | u64::from(last_octet)),
        &[ip],
    ));
    let (pd, mem, mr, cq, qp, qpn) = rc_endpoint(fabric.hca(hca), opts);
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
    let now = fabric.now();
    connect_qp(
        fabric.hca(a.hca),
        now,
        a.qp,
        b.ip,
        b.qpn,
        a_psn,
        b_psn,
        opts,
    );
}

/// Brings QP `qp` of `e` to RTS, connected to QP `peer_qpn` at `peer_ip`.
#[allow(clippy::too_many_arguments)]
pub fn connect_qp(
    e: &mut Engine,
    now: hca::time::Time,
    qp: QpId,
    peer_ip: IpAddr,
    peer_qpn: Qpn,
    sq_psn: Psn,
    rq_psn: Psn,
    opts: PairOpts,
) {
    let peer = hca::engine::RcConnect {
        access: opts.access,
        dest_gid: hca::ids::Gid::from_ip(peer_ip),
        dest_qpn: peer_qpn,
        path_mtu: opts.mtu,
        sq_psn,
        rq_psn,
        timeout: opts.timeout,
        retry_cnt: opts.retry_cnt,
        rnr_retry: opts.rnr_retry,
        min_rnr_timer: opts.min_rnr_timer,
        max_rd_atomic: 8,
        max_dest_rd_atomic: 8,
        pkey_index: opts.pkey_index,
        flow_label: 0,
        hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
        traffic_class: 0,
    };
    e.connect_rc(now, qp, &peer).expect("connect RC QP");
}

/// A protection domain, registered memory, a CQ and an RC QP on `e` (not yet connected).
pub fn rc_endpoint(
    e: &mut Engine,
    opts: PairOpts,
) -> (PdId, Arc<MemBlock>, MrKeys, CqId, QpId, Qpn) {
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
    (pd, mem, mr, cq, qp, qpn)
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
        sg_list: sg.into(),
        flags: SendFlags::SIGNALED,
        ud: None,
    }
}

pub fn recv_wr(wr_id: u64, sg: Vec<Sge>) -> RecvWr {
    RecvWr {
        wr_id,
        sg_list: sg.into(),
    }
}

pub fn post_send(f: &mut Fabric, n: &Node, wr: SendWr) {
    let now = f.now();
    f.hca(n.hca).post_send(now, n.qp, wr).expect("post_send");
}

pub fn post_recv(f: &mut Fabric, n: &Node, wr: RecvWr) {
    let now = f.now();
    f.hca(n.hca).post_recv(now, n.qp, wr).expect("post_recv");
}

/// Another RC QP on `n`'s HCA, sharing its PD, CQ and memory region; receives come from
/// `srq` when given. Returned as a `Node` view to pass to [`connect`].
pub fn extra_qp(f: &mut Fabric, n: &Node, srq: Option<hca::engine::SrqId>) -> Node {
    let init = QpInit {
        qp_type: QpType::Rc,
        pd: n.pd,
        send_cq: n.cq,
        recv_cq: n.cq,
        srq,
        max_send_wr: 4096,
        max_recv_wr: 4096,
        max_sge: 16,
        sq_sig_all: false,
    };
    let e = f.hca(n.hca);
    let qp = e.create_qp(init).expect("create_qp");
    let qpn = e.qp_num(qp).expect("qpn");
    Node {
        qp,
        qpn,
        mem: n.mem.clone(),
        ..*n
    }
}

/// Runs the fabric until nothing is left to do (no datagram in flight, no timer armed), or
/// one second of virtual time.
pub fn settle(f: &mut Fabric) {
    f.run_until(std::time::Duration::from_secs(1), |_| false);
}

/// Everything on a node's CQ, oldest first.
pub fn drain(f: &mut Fabric, n: &Node) -> Vec<Wc> {
    let mut out = Vec::new();
    poll(f, n, &mut out);
    out
}

/// Every pending asynchronous event of HCA `hca`.
pub fn events(f: &mut Fabric, hca: usize) -> Vec<hca::engine::Event> {
    std::iter::from_fn(|| f.hca(hca).poll_event()).collect()
}

/// `(wr_id, status)` of each completion, for compact assertions.
pub fn statuses(wcs: &[Wc]) -> Vec<(u64, hca::verbs::WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

/// A signaled RDMA WRITE of `sge` to the peer's `remote_addr` under `rkey`.
pub fn write_wr(wr_id: u64, remote_addr: u64, rkey: Rkey, sge: Sge) -> SendWr {
    send_wr(wr_id, SendOp::Write { remote_addr, rkey }, vec![sge])
}

/// A signaled RDMA READ from the peer's `remote_addr` under `rkey` into `sge`.
pub fn read_wr(wr_id: u64, remote_addr: u64, rkey: Rkey, sge: Sge) -> SendWr {
    send_wr(wr_id, SendOp::Read { remote_addr, rkey }, vec![sge])
}

/// A node on `f` whose QP is port 1's GSI (QP1), brought to RTS with Q_Key `qkey`
/// (normally [`hca::ids::QKey::GSI`]); its memory region allows local writes only.
pub fn gsi_node(f: &mut Fabric, last_octet: u8, qkey: hca::ids::QKey) -> Node {
    use hca::qp::state::QpState;
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, last_octet));
    let hca = f.add(Engine::new(
        Guid(0x5352_5000_0000_0000 | u64::from(last_octet)),
        &[ip],
    ));
    let now = f.now();
    let e = f.hca(hca);
    let pd = e.alloc_pd();
    let mem = MemBlock::new(1 << 20);
    let mr = e
        .reg_mr(pd, mem.clone(), 0, 1 << 20, IOVA, Access::LOCAL_WRITE)
        .expect("reg_mr");
    let cq = e.create_cq(1024);
    let init = QpInit {
        qp_type: QpType::Ud,
        pd,
        send_cq: cq,
        recv_cq: cq,
        srq: None,
        max_send_wr: 64,
        max_recv_wr: 64,
        max_sge: 4,
        sq_sig_all: false,
    };
    let qp = e.create_gsi_qp(1, init).expect("create_gsi_qp");
    let mut attr = QpAttr {
        state: QpState::Init,
        qkey,
        ..QpAttr::default()
    };
    e.modify_qp(
        now,
        qp,
        &attr,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
    )
    .expect("INIT");
    attr.state = QpState::Rtr;
    e.modify_qp(now, qp, &attr, QpAttrMask::STATE).expect("RTR");
    attr.state = QpState::Rts;
    e.modify_qp(now, qp, &attr, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
        .expect("RTS");
    Node {
        hca,
        pd,
        cq,
        qp,
        qpn: Qpn::GSI,
        ip,
        mem,
        mr,
    }
}
