//! One side of the HCA benchmark: a soft HCA on a loopback address with registered memory
//! and one RC QP, driven through the verbs.

use anyhow::{Context, Result, anyhow};
use hca::driver::{Hca, HcaConfig};
use hca::engine::{CqId, QpId, RcConnect};
use hca::ids::{Gid, Guid, Psn, Qpn, Rkey};
use hca::mem::MemBlock;
use hca::mr::{Access, MrKeys};
use hca::qp::QpInit;
use hca::qp::state::QpType;
use hca::verbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, Wc};
use hca::wire::PathMtu;
use std::net::IpAddr;
use std::sync::Arc;

/// I/O address of the registered memory.
pub(crate) const IOVA: u64 = 0x1000_0000;

/// An HCA with one RC endpoint.
pub(crate) struct Endpoint {
    pub(crate) hca: Hca,
    /// The registered memory (kept alive with the region).
    _mem: Arc<MemBlock>,
    pub(crate) mr: MrKeys,
    pub(crate) cq: CqId,
    pub(crate) qp: QpId,
    pub(crate) qpn: Qpn,
}

impl Endpoint {
    /// Opens an HCA on `ip:4791` with `mem_bytes` of registered memory.
    pub(crate) fn open(ip: IpAddr, guid: u64, mem_bytes: usize, gso: bool) -> Result<Endpoint> {
        let mut config = HcaConfig::new(Guid(guid), vec![ip]);
        config.gso = gso;
        let hca = Hca::open(config).with_context(|| format!("open HCA on {ip}"))?;
        let mem = MemBlock::new(mem_bytes);
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let (mr, cq, qp) = hca.with(|e, _| -> Result<_> {
            let pd = e.alloc_pd();
            let mr = e.reg_mr(pd, mem.clone(), 0, mem_bytes as u64, IOVA, access)?;
            let cq = e.create_cq(1 << 16);
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
            Ok((mr, cq, e.create_qp(init)?))
        })?;
        let qpn = hca
            .with(|e, _| e.qp_num(qp))
            .ok_or_else(|| anyhow!("QP vanished"))?;
        Ok(Endpoint {
            hca,
            _mem: mem,
            mr,
            cq,
            qp,
            qpn,
        })
    }

    /// The first byte at `offset` of the registered memory.
    pub(crate) fn byte_at(&self, offset: u64) -> Result<u8> {
        let mut b = [0u8];
        self._mem
            .read(offset as usize, &mut b)
            .map_err(|e| anyhow!("read registered memory: {e:?}"))?;
        Ok(b[0])
    }

    /// Fills `len` bytes at `offset` of the registered memory with `value`.
    pub(crate) fn fill(&self, offset: u64, len: usize, value: u8) -> Result<()> {
        self._mem
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
        self._mem
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
        };
        Ok(self.hca.with(|e, now| e.connect_rc(now, self.qp, &peer))?)
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
        Ok(self.hca.with(|e, now| e.post_send(now, self.qp, wr))?)
    }

    /// Posts signaled send work requests as one chain (one doorbell), as a target posts a
    /// READ's data WRITE and its response SEND.
    pub(crate) fn post_chain(&self, wrs: Vec<(u64, SendOp, Sge)>) -> Result<()> {
        let wrs: Vec<SendWr> = wrs
            .into_iter()
            .map(|(wr_id, op, sge)| SendWr {
                wr_id,
                op,
                sg_list: [sge].into(),
                flags: SendFlags::SIGNALED,
                ud: None,
            })
            .collect();
        self.hca
            .with(|e, now| e.post_send_list(now, self.qp, wrs))
            .map_err(|(i, e)| anyhow!("post_send_list: request {i}: {e}"))
    }

    /// Posts a receive.
    pub(crate) fn post_recv(&self, wr_id: u64, sge: Sge) -> Result<()> {
        Ok(self.hca.with(|e, now| {
            e.post_recv(
                now,
                self.qp,
                RecvWr {
                    wr_id,
                    sg_list: [sge].into(),
                },
            )
        })?)
    }

    /// Takes what completed.
    pub(crate) fn poll(&self, out: &mut Vec<Wc>) -> Result<usize> {
        Ok(self.hca.with(|e, _| e.poll_cq(self.cq, 256, out))?)
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
        self.hca
            .with(|e, _| e.req_notify_cq(self.cq, hca::verbs::ArmMode::NextCompletion))?;
        let n = self.poll(out)?;
        if n > 0 {
            return Ok(n);
        }
        let _ = self.hca.wait_event(timeout);
        self.poll(out)
    }
}
