//! The adapter's queue-pair verbs, all non-blocking (callable at dispatch level), through
//! the access layer's `ChannelInterface`: creating the RC QP for a login and sending the
//! connection request once it exists, connecting it when the reply comes (RTR/RTS,
//! receives, RTU),
//! posting an IU with the REG_MRs of its command chained in front, and destroying the QP.
//! The QP's creation and connection are asynchronous verbs; the DPC continues the login
//! from their completions ([`Adapter::verbs_done`]).
#[allow(unused_imports)]
use crate::prelude::*;

use super::LoginVia;
use super::adapter::{Adapter, CTRL_IOVA, Inner, RECV_SLOTS, RECV_WR, SEND_WR, SLOT};
use super::pending::VerbDone;
use access_layer::cm::{ConnId, ConnectRequest};
use access_layer::mad::ServiceId;
use access_layer::mad::cm::RdmaPortSpace;
use ib_verbs::mr::Access;
use ib_verbs::qp::QpInit;
use ib_verbs::time::Time;
use ib_verbs::wr::{RecvWr, SendFlags, SendOp, SendWr, Sge, WcStatus};
use ib_verbs::{Gid, QpId, RcConnect};
use srp::initiator::CmdId;

impl Adapter {
    fn sge(&self, slot_offset: u64, len: u32) -> Sge {
        Sge {
            addr: CTRL_IOVA + slot_offset,
            len,
            lkey: self.ctrl_mr.lkey,
        }
    }

    /// `Action::Connect`: a fresh QP, created asynchronously; its completion sends the CM
    /// REQ carrying `private_data` ([`Adapter::send_req`]).
    pub(crate) fn start_connect(&self, s: &mut Inner, private_data: Vec<u8>) {
        self.teardown(s);
        s.link.creating = Some(private_data);
        let attempt = s.link.attempt;
        let init = QpInit::rc(self.pd, s.post.cq, self.sq_depth, RECV_SLOTS);
        self.ca.create_qp(init).on_complete(
            self.pending
                .routine(move |result| VerbDone::QpCreated { attempt, result }),
        );
    }

    /// Takes up the asynchronous verbs that completed since the last round.
    pub(crate) fn verbs_done(&self, s: &mut Inner) -> usize {
        let done = self.pending.take();
        let n = done.len();
        for d in done {
            match d {
                VerbDone::QpCreated { attempt, result } => {
                    let current = attempt == s.link.attempt && s.link.creating.is_some();
                    match result {
                        Ok(qp) if current => {
                            let private_data = s.link.creating.take().unwrap_or_default();
                            self.send_req(s, qp, private_data);
                        }
                        // A login given up meanwhile: its QP goes at once.
                        Ok(qp) => self.destroy_qp(qp),
                        Err(e) if current => {
                            tracing::warn!(%e, "the login's QP could not be created");
                            s.link.creating = None;
                            self.connect_failed(s);
                        }
                        Err(_) => {}
                    }
                }
                VerbDone::Connected { attempt, result } => {
                    let Some(rep) = s.link.rep.take().filter(|_| attempt == s.link.attempt) else {
                        // Stale: the QP was torn down meanwhile.
                        continue;
                    };
                    let now = self.now();
                    match result {
                        Ok(()) if self.connected(s) => {
                            s.ch.channel.handle_login_rsp(now, &rep);
                        }
                        Ok(()) => s.ch.channel.handle_disconnect(now),
                        Err(e) => {
                            tracing::warn!(%e, "the login's QP could not be connected");
                            s.ch.channel.handle_disconnect(now);
                        }
                    }
                }
                VerbDone::Replaced { slot, result } => {
                    let keys = result.map_err(|e| e.to_string()).and_then(|k| {
                        self.reg()
                            .replace_discarded(slot, k)
                            .map_err(|e| e.to_string())
                    });
                    if let Err(e) = keys {
                        tracing::warn!(%e, slot, "a registration pool slot could not be replaced");
                    }
                }
                VerbDone::Released { what, result } => {
                    if let Err(e) = result {
                        tracing::warn!(%e, "{what} could not be released");
                    }
                }
            }
        }
        n
    }

    /// The login's QP exists: the connection request goes out (for the RDMA-CM form the
    /// connection manager adds the cma header ib_srpt's RDMA-CM reads).
    fn send_req(&self, s: &mut Inner, qp: QpId, private_data: Vec<u8>) {
        let QpId::Qp(qpn) = qp else {
            return self.connect_failed(s);
        };
        s.link.qp = Some((qp, qpn));
        let service_id = match self.cfg.login_via {
            LoginVia::IbCm => self.cfg.service_id,
            LoginVia::RdmaCm { port } => ServiceId::rdma_ip(RdmaPortSpace::Tcp, port),
        };
        let req = ConnectRequest {
            qpn,
            to: Gid::from_ip(self.cfg.target),
            service_id,
            // The adapter's one partition (its P_Key table has only `cfg.partition`).
            pkey_index: 0,
            responder_resources: 4,
            initiator_depth: 4,
            // The port's active MTU (its link's, as rxe derives it): the path both ends use.
            mtu: self.mtu,
            response_timeout: 18,
            max_retries: 3,
            retry_count: 7,
            rnr_retry_count: 7,
            private_data,
        };
        match s.link.cm.connect(&req) {
            Ok(conn) => s.link.conn = Some(conn),
            Err(e) => {
                tracing::warn!(%e, "the login's connection request could not be sent");
                self.connect_failed(s);
            }
        }
    }

    fn connect_failed(&self, s: &mut Inner) {
        let now = self.now();
        s.ch.channel.handle_disconnect(now);
    }

    /// The reply arrived (its private data the SRP_LOGIN_RSP): the QP goes to RTS
    /// asynchronously, with the connection manager's attributes (the target's QP, the PSNs
    /// both ways) and our policy; its completion posts the receives, establishes the
    /// connection (RTU) and hands the login response to the core ([`Adapter::verbs_done`]).
    /// False if there is no QP to connect.
    pub(crate) fn accept_rep(&self, s: &mut Inner, conn: ConnId, rep: Vec<u8>) -> bool {
        let Some((qp, _)) = s.link.qp else {
            return false;
        };
        let base = match s.link.cm.qp_attrs(conn) {
            Ok(rc) => rc,
            Err(e) => {
                tracing::warn!(%e, "no QP attributes for the login's connection");
                return false;
            }
        };
        let peer = RcConnect {
            // The QP admits remote access; each region narrows it to one direction.
            access: Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            // 4.096 µs × 2^14 ≈ 67 ms per try, 8 tries ≈ 0.5 s before the QP errors: what
            // the CM offers (local_ack_timeout 14). 2^10 (4 ms) lost channels under QD32 on
            // a loaded 2-vCPU machine (the target's ACKs came late), and 0.5 s still
            // detects a dead link well inside the failover budget.
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: base.max_rd_atomic.clamp(1, 4),
            max_dest_rd_atomic: 4,
            ..base
        };
        s.link.rep = Some(rep);
        let attempt = s.link.attempt;
        self.ca.connect_rc(qp, peer).on_complete(
            self.pending
                .routine(move |result| VerbDone::Connected { attempt, result }),
        );
        true
    }

    /// The QP is in RTS: receives posted, RTU sent. False if the QP could not follow.
    fn connected(&self, s: &mut Inner) -> bool {
        for i in 0..RECV_SLOTS {
            if !self.post_recv(s, i) {
                return false;
            }
        }
        if let Some(conn) = s.link.conn {
            let _ = s.link.cm.establish(conn);
        }
        true
    }

    /// Posts receive buffer `i`.
    pub(crate) fn post_recv(&self, s: &Inner, i: usize) -> bool {
        let Some((qp, _)) = s.link.qp else {
            return false;
        };
        let wr = RecvWr {
            wr_id: RECV_WR | i as u64,
            sg_list: [self.sge(Self::recv_offset(i), SLOT as u32)].into(),
        };
        self.ca.post_recv(qp, wr).is_ok()
    }

    /// Where receive buffer `i` is in the control memory.
    pub(crate) fn recv_offset(i: usize) -> u64 {
        (super::adapter::SEND_SLOTS + i) as u64 * SLOT
    }

    /// `Action::Send`: the IU in a send slot, after the REG_MRs of its command `cmd`.
    pub(crate) fn post_iu(&self, s: &mut Inner, iu: &[u8], cmd: Option<CmdId>) {
        let (Some((qp, _)), Some(slot)) = (s.link.qp, s.post.send_free.pop()) else {
            s.link.qp_failed = true;
            return;
        };
        let off = slot as u64 * SLOT;
        if iu.len() as u64 > SLOT || self.ctrl.write(off as usize, iu).is_err() {
            s.post.send_free.push(slot);
            s.link.qp_failed = true;
            return;
        }
        let mut chain = core::mem::take(&mut s.post.chain);
        chain.clear();
        if let Some(regs) = cmd.and_then(|id| s.post.pending_reg.remove(id)) {
            chain.extend(regs);
        }
        chain.push(SendWr {
            wr_id: SEND_WR | slot as u64,
            op: SendOp::Send,
            sg_list: [self.sge(off, iu.len() as u32)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        });
        if self.ca.post_send_list(qp, &mut chain).is_err() {
            s.link.qp_failed = true;
        }
        s.post.chain = chain;
    }

    /// Posts work requests of the registration (LOCAL_INVs); without a QP they count as
    /// flushed, so the pool retries them on the next connection.
    pub(crate) fn post_reg(&self, s: &mut Inner, wrs: impl IntoIterator<Item = SendWr>) {
        let mut chain = core::mem::take(&mut s.post.chain);
        chain.clear();
        chain.extend(wrs);
        if chain.is_empty() {
            s.post.chain = chain;
            return;
        }
        let mut ids = core::mem::take(&mut s.post.chain_ids);
        ids.clear();
        ids.extend(chain.iter().map(|w| w.wr_id));
        let posted = match s.link.qp {
            Some((qp, _)) if !s.link.qp_failed => self.ca.post_send_list(qp, &mut chain).is_ok(),
            _ => false,
        };
        if posted {
            s.post.inflight_inv.extend(ids.iter().copied());
        } else {
            let mut reg = self.reg();
            for &id in &ids {
                let _ = reg.handle_send_done(id, WcStatus::WrFlushErr);
            }
        }
        chain.clear();
        s.post.chain = chain;
        s.post.chain_ids = ids;
    }

    /// `Action::Disconnect` (and before a new login): DREQ, destroy the QP (its flushed
    /// requests are completions of a QP no longer current), forget its sends; LOCAL_INVs
    /// that were in flight are reported flushed to the pool. A QP being created or
    /// connected for this attempt is released when its verb completes (stale by then).
    pub(crate) fn teardown(&self, s: &mut Inner) {
        s.link.attempt += 1;
        s.link.creating = None;
        s.link.rep = None;
        if let Some(conn) = s.link.conn.take() {
            let _ = s.link.cm.disconnect(conn);
        }
        if let Some((qp, _)) = s.link.qp.take() {
            self.destroy_qp(qp);
        }
        s.post.send_free = (0..super::adapter::SEND_SLOTS).rev().collect();
        s.link.qp_failed = false;
        let mut reg = self.reg();
        for id in core::mem::take(&mut s.post.inflight_inv) {
            let _ = reg.handle_send_done(id, WcStatus::WrFlushErr);
        }
    }

    /// Destroys `qp` asynchronously.
    fn destroy_qp(&self, qp: QpId) {
        self.ca
            .destroy_qp(qp)
            .on_complete(self.pending.routine(|result| VerbDone::Released {
                what: "the login's QP",
                result,
            }));
    }

    /// The device's clock.
    pub(crate) fn now(&self) -> Time {
        self.device.now()
    }
}
