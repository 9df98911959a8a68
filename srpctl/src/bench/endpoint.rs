//! One side of the HCA benchmark: a device (the software HCA on a loopback address, by
//! default) with registered memory and one RC QP, driven through the access layer's verbs.

use access_layer::verbs::{
    ChannelInterface, DeviceSpec, Doorbell, Fabric, MrSpec, PortInterface, SyncCa,
};
use anyhow::{Context, Result, anyhow};
use ib_verbs::PathMtu;
use ib_verbs::ids::{Gid, Guid, Psn, Qpn, Rkey};
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKeys};
use ib_verbs::qp::QpInit;
use ib_verbs::qp::state::QpType;
use ib_verbs::wr::{ArmMode, RecvWr, SendFlags, SendOp, SendWr, Sge, Wc};
use ib_verbs::{CqId, PortCounters, QpId, RcConnect};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// I/O address of the registered memory.
pub(crate) const IOVA: u64 = 0x1000_0000;

/// A device with one RC endpoint.
pub(crate) struct Endpoint {
    ca: Arc<dyn ChannelInterface>,
    port: Arc<dyn PortInterface>,
    /// Rung by the CA's events (CQ notifications).
    bell: Arc<Doorbell>,
    /// The registered memory (kept alive with the region).
    mem: Arc<MemBlock>,
    pub(crate) mr: MrKeys,
    pub(crate) cq: CqId,
    pub(crate) qp: QpId,
    pub(crate) qpn: Qpn,
}

impl Endpoint {
    /// Opens the software HCA on `ip:4791` with `mem_bytes` of registered memory (`gso`:
    /// its UDP GSO/GRO).
    pub(crate) fn open(ip: IpAddr, guid: u64, mem_bytes: usize, gso: bool) -> Result<Endpoint> {
        let spec = DeviceSpec {
            gso,
            ..DeviceSpec::soft(SocketAddr::new(ip, 4791), Guid(guid))
        };
        let device = providers::System
            .open(&spec)
            .with_context(|| format!("open HCA on {ip}"))?;
        let (ca, port) = (device.ca, device.port);
        let bell = Arc::new(Doorbell::new());
        let b = bell.clone();
        let sync = SyncCa::new(ca.clone());
        sync.open_ca(Arc::new(move |_| b.ring()))?;
        let mem = MemBlock::new(mem_bytes);
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let pd = sync.alloc_pd()?;
        let mr = sync.reg_mr(
            pd,
            MrSpec {
                block: mem.clone(),
                offset: 0,
                len: mem_bytes as u64,
                iova: IOVA,
                access,
            },
        )?;
        let cq = sync.create_cq(1 << 16)?;
        let init = QpInit {
            qp_type: QpType::Rc,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            max_send_wr: 1024,
            max_recv_wr: 1024,
            max_sge: 4,
            sq_sig_all: false,
        };
        let qp = sync.create_qp(init)?;
        let QpId::Qp(qpn) = qp else {
            return Err(anyhow!("an RC QP without a number"));
        };
        Ok(Endpoint {
            ca,
            port,
            bell,
            mem,
            mr,
            cq,
            qp,
            qpn,
        })
    }

    /// The device's port counters now (packets, retransmits, and the software HCA's
    /// system calls).
    pub(crate) fn counters(&self) -> PortCounters {
        self.port.counters()
    }

    /// The first byte at `offset` of the registered memory.
    pub(crate) fn byte_at(&self, offset: u64) -> Result<u8> {
        let mut b = [0u8];
        self.mem
            .read(offset as usize, &mut b)
            .map_err(|e| anyhow!("read registered memory: {e:?}"))?;
        Ok(b[0])
    }

    /// Fills `len` bytes at `offset` of the registered memory with `value`.
    pub(crate) fn fill(&self, offset: u64, len: usize, value: u8) -> Result<()> {
        self.mem
            .fill(offset as usize, len, value)
            .map_err(|e| anyhow!("write registered memory: {e:?}"))
    }

    /// Reads `len` bytes of `file` at `file_offset` into the registered memory at `offset`
    /// (one `pread` straight into it, as the target's backend reads a READ's data).
    pub(crate) fn read_file(
        &self,
        offset: u64,
        len: usize,
        file: &std::fs::File,
        file_offset: u64,
    ) -> Result<()> {
        self.mem
            .read_file(offset as usize, len, file, file_offset)
            .map_err(|e| anyhow!("read the backend file into registered memory: {e}"))
    }

    /// The remote key of the memory.
    pub(crate) fn rkey(&self) -> Rkey {
        self.mr.rkey.unwrap_or_default()
    }

    /// Brings the QP to RTS towards `peer_ip`/`peer_qpn`.
    pub(crate) fn connect(
        &self,
        peer_ip: IpAddr,
        peer_qpn: Qpn,
        mtu: PathMtu,
        sq: u32,
        rq: u32,
    ) -> Result<()> {
        let peer = RcConnect {
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            dest_gid: Gid::from_ip(peer_ip),
            dest_qpn: peer_qpn,
            path_mtu: mtu,
            sq_psn: Psn::from_wire(sq),
            rq_psn: Psn::from_wire(rq),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            pkey_index: 0,
            flow_label: 0,
            hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
            traffic_class: 0,
        };
        Ok(SyncCa::new(self.ca.clone()).connect_rc(self.qp, peer)?)
    }

    /// A scatter/gather entry over our memory.
    pub(crate) fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: IOVA + offset,
            len,
            lkey: self.mr.lkey,
        }
    }

    /// Posts a signaled send work request.
    pub(crate) fn post(&self, wr_id: u64, op: SendOp, sge: Sge) -> Result<()> {
        let wr = SendWr {
            wr_id,
            op,
            sg_list: [sge].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        };
        Ok(self.ca.post_send(self.qp, wr)?)
    }

    /// Posts signaled send work requests as one chain (one doorbell), as a target posts a
    /// READ's data WRITE and its response SEND.
    pub(crate) fn post_chain(&self, wrs: Vec<(u64, SendOp, Sge)>) -> Result<()> {
        let mut wrs: Vec<SendWr> = wrs
            .into_iter()
            .map(|(wr_id, op, sge)| SendWr {
                wr_id,
                op,
                sg_list: [sge].into(),
                flags: SendFlags::SIGNALED,
                ud: None,
            })
            .collect();
        Ok(self.ca.post_send_list(self.qp, &mut wrs)?)
    }

    /// Posts a receive.
    pub(crate) fn post_recv(&self, wr_id: u64, sge: Sge) -> Result<()> {
        let wr = RecvWr {
            wr_id,
            sg_list: [sge].into(),
        };
        Ok(self.ca.post_recv(self.qp, wr)?)
    }

    /// Takes what completed.
    pub(crate) fn poll(&self, out: &mut Vec<Wc>) -> Result<usize> {
        Ok(self.ca.poll_cq(self.cq, 256, out)?)
    }

    /// Takes what completed, sleeping on the CQ's notification when nothing has (as a
    /// consumer that does not spin would: arm, poll again, then wait).
    pub(crate) fn poll_wait(
        &self,
        out: &mut Vec<Wc>,
        timeout: std::time::Duration,
    ) -> Result<usize> {
        let n = self.poll(out)?;
        if n > 0 {
            return Ok(n);
        }
        self.ca.req_notify_cq(self.cq, ArmMode::NextCompletion)?;
        let n = self.poll(out)?;
        if n > 0 {
            return Ok(n);
        }
        self.bell.wait(timeout);
        self.poll(out)
    }
}
