//! The adapter's queue-pair verbs, all non-blocking (callable at dispatch level): creating
//! the RC QP for a login, the CM REQ, accepting the REP (RTR/RTS, receives, RTU), posting an
//! IU with the REG_MRs of its command chained in front, and tearing the QP down.

use super::LoginVia;
use super::adapter::{Adapter, CTRL_IOVA, Inner, RECV_SLOTS, RECV_WR, SEND_WR, SLOT};
use access_layer::cm::{ConnectParams, QpPsns};
use access_layer::mad::cm::{CmRep, CmaHeader, RdmaPortSpace};
use access_layer::mad::{MadAddress, Mtu, ServiceId};
use hca::engine::RcConnect;
use hca::mr::Access;
use hca::qp::QpInit;
use hca::time::Time;
use hca::verbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, WcStatus};
use hca::{Gid, Psn};
use srp::initiator::CmdId;

/// The PSN our REQ offers: our receive PSN (as Linux reads it; `QpPsns`).
const PSN: u32 = 0x100;

impl Adapter {
    fn sge(&self, slot_offset: u64, len: u32) -> Sge {
        Sge {
            addr: CTRL_IOVA + slot_offset,
            len,
            lkey: self.ctrl_mr.lkey,
        }
    }

    /// `Action::Connect`: a fresh QP and a CM REQ carrying `private_data`.
    pub(crate) fn start_connect(&self, s: &mut Inner, private_data: Vec<u8>) {
        self.teardown(s);
        let cq = s.cq;
        let pd = self.pd;
        let made = self.hca.with(|e, now| {
            let qp = e.create_qp(QpInit::rc(pd, cq, 2048, RECV_SLOTS)).ok()?;
            Some((qp, e.qp_num(qp)?, now))
        });
        let Some((qp, qpn, now)) = made else {
            return self.connect_failed(s);
        };
        s.qp = Some((qp, qpn));
        let (service_id, private_data) = match self.cfg.login_via {
            LoginVia::IbCm => (self.cfg.service_id, private_data),
            LoginVia::RdmaCm { port } => {
                // The cma header ib_srpt's RDMA-CM reads: our address and a source port
                // (ours is the QPN's low bits: any value is valid), the target's address.
                let cma = CmaHeader {
                    src_port: 0x8000 | (qpn.get() as u16 & 0x7fff),
                    src: self.cfg.local,
                    dst: self.cfg.target,
                };
                match cma.req_private_data(&private_data) {
                    Ok(pd) => (ServiceId::rdma_ip(RdmaPortSpace::Tcp, port), pd.0.to_vec()),
                    Err(_) => return self.connect_failed(s),
                }
            }
        };
        let params = ConnectParams {
            to: MadAddress::gsi(1, Gid::from_ip(self.cfg.target)),
            service_id,
            qpn,
            receive_psn: Psn::from_wire(PSN),
            responder_resources: 4,
            initiator_depth: 4,
            // The port's active MTU (its link's, as rxe derives it): the path both ends use.
            mtu: Mtu::from(u8::from(self.hca.active_mtu(1))),
            response_timeout: 18,
            max_retries: 3,
            retry_count: 7,
            rnr_retry_count: 7,
            private_data,
        };
        match s.cm.connect(now, &params) {
            Ok(conn) => s.conn = Some(conn),
            Err(_) => self.connect_failed(s),
        }
    }

    fn connect_failed(&self, s: &mut Inner) {
        let now = self.hca.with(|_, now| now);
        s.channel.handle_disconnect(now);
    }

    /// The REP arrived: QP to RTS, receives posted, RTU. False if the QP could not follow.
    pub(crate) fn accept_rep(&self, s: &mut Inner, rep: &CmRep) -> bool {
        let Some((qp, _)) = s.qp else { return false };
        let psns = QpPsns::active(Psn::from_wire(PSN), rep);
        let peer = RcConnect {
            // The QP admits remote access; each region narrows it to one direction.
            access: Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            dest_gid: Gid::from_ip(self.cfg.target),
            dest_qpn: rep.local_qpn,
            // What our REQ offered (the passive side follows the REQ).
            path_mtu: self.hca.active_mtu(1),
            sq_psn: psns.sq_psn,
            rq_psn: psns.rq_psn,
            // 4.096 µs × 2^14 ≈ 67 ms per try, 8 tries ≈ 0.5 s before the QP errors: what
            // the CM offers (local_ack_timeout 14). 2^10 (4 ms) lost channels under QD32 on
            // a loaded 2-vCPU machine (the target's ACKs came late), and 0.5 s still
            // detects a dead link well inside the failover budget.
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
        };
        if self
            .hca
            .with(|e, now| e.connect_rc(now, qp, &peer))
            .is_err()
        {
            return false;
        }
        for i in 0..RECV_SLOTS {
            if !self.post_recv(s, i) {
                return false;
            }
        }
        if let Some(conn) = s.conn {
            let _ = s.cm.confirm(conn);
        }
        true
    }

    /// Posts receive buffer `i`.
    pub(crate) fn post_recv(&self, s: &Inner, i: usize) -> bool {
        let Some((qp, _)) = s.qp else { return false };
        let wr = RecvWr {
            wr_id: RECV_WR | i as u64,
            sg_list: vec![self.sge(Self::recv_offset(i), SLOT as u32)],
        };
        self.hca.with(|e, now| e.post_recv(now, qp, wr)).is_ok()
    }

    /// Where receive buffer `i` is in the control memory.
    pub(crate) fn recv_offset(i: usize) -> u64 {
        (super::adapter::SEND_SLOTS + i) as u64 * SLOT
    }

    /// `Action::Send`: the IU in a send slot, after the REG_MRs of its command `cmd`.
    pub(crate) fn post_iu(&self, s: &mut Inner, iu: &[u8], cmd: Option<CmdId>) {
        let (Some((qp, _)), Some(slot)) = (s.qp, s.send_free.pop()) else {
            s.qp_failed = true;
            return;
        };
        let off = slot as u64 * SLOT;
        if iu.len() as u64 > SLOT || self.ctrl.write(off as usize, iu).is_err() {
            s.send_free.push(slot);
            s.qp_failed = true;
            return;
        }
        let mut wrs = cmd
            .and_then(|id| s.pending_reg.remove(&id))
            .unwrap_or_default();
        wrs.push(SendWr {
            wr_id: SEND_WR | slot as u64,
            op: SendOp::Send,
            sg_list: vec![self.sge(off, iu.len() as u32)],
            flags: SendFlags::SIGNALED,
            ud: None,
        });
        if self
            .hca
            .with(|e, now| e.post_send_list(now, qp, wrs))
            .is_err()
        {
            s.qp_failed = true;
        }
    }

    /// Posts work requests of the registration (LOCAL_INVs); without a QP they count as
    /// flushed, so the pool retries them on the next connection.
    pub(crate) fn post_reg(&self, s: &mut Inner, wrs: Vec<SendWr>) {
        if wrs.is_empty() {
            return;
        }
        let ids: Vec<u64> = wrs.iter().map(|w| w.wr_id).collect();
        let posted = match s.qp {
            Some((qp, _)) if !s.qp_failed => self
                .hca
                .with(|e, now| e.post_send_list(now, qp, wrs))
                .is_ok(),
            _ => false,
        };
        if posted {
            s.inflight_inv.extend(ids);
        } else {
            let mut reg = self.reg();
            for id in ids {
                let _ = reg.handle_send_done(id, WcStatus::WrFlushErr);
            }
        }
    }

    /// `Action::Disconnect` (and before a new login): DREQ, destroy the QP, forget its
    /// sends; LOCAL_INVs that were in flight are reported flushed to the pool.
    pub(crate) fn teardown(&self, s: &mut Inner) {
        if let Some(conn) = s.conn.take() {
            let now = self.hca.with(|_, now| now);
            let _ = s.cm.disconnect(now, conn);
        }
        if let Some((qp, _)) = s.qp.take() {
            let _ = self.hca.with(|e, now| e.destroy_qp(now, qp));
        }
        s.send_free = (0..super::adapter::SEND_SLOTS).rev().collect();
        s.qp_failed = false;
        let mut reg = self.reg();
        for id in s.inflight_inv.drain() {
            let _ = reg.handle_send_done(id, WcStatus::WrFlushErr);
        }
    }

    /// The hca clock.
    pub(crate) fn now(&self) -> Time {
        self.hca.with(|_, now| now)
    }
}
