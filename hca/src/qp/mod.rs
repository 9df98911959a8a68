//! Queue pairs: attributes, the state machine, posting, and the RC and UD protocol engines.
//!
//! A [`Qp`] is driven by the device engine (`crate::engine`), which hands each call a
//! `Ctx` borrowing the device's memory regions, completion queues, shared receive queues
//! and output queues. Files: [`state`] (the modify table), `requester` (RC send side: packets
//! from the send queue, ACK/NAK/read-response handling, retransmission), `responder` (RC
//! receive side: sends, writes, read replies, duplicate and sequence handling), `ud` (UD and
//! the GSI), `wqe` (send queue entries).

mod requester;
mod responder;
mod ud;
mod wqe;

use crate::engine::Ctx;
use crate::ids::{Gid, PKey, QKey, Qpn};
use crate::mr::Access;
use crate::time::ack_timeout;
use crate::verbs::{RecvWr, SendWr, Wc, WcOpcode, WcStatus};
use core::time::Duration;
pub use ib_verbs::qp::state;
pub use ib_verbs::qp::{QpAttr, QpInit};
use requester::Requester;
use responder::Responder;
use state::{ModifyError, QpAttrMask, QpState, QpType, transition};
use std::collections::VecDeque;

pub use crate::engine::{CqId, SrqId};

/// Bytes reserved ahead of every UD receive for the GRH (IPv4 header in the last 20).
pub const UD_GRH_LEN: usize = ud::GRH_LEN;

/// Why a verb on a QP was refused (synchronously: nothing was queued).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QpError {
    /// The modify is not legal.
    #[error(transparent)]
    Modify(#[from] ModifyError),
    /// Posting is not allowed in this state.
    #[error("cannot post {what} to QP {qpn} in state {state}")]
    WrongState {
        /// The QP.
        qpn: Qpn,
        /// Send or receive.
        what: &'static str,
        /// Its state.
        state: QpState,
    },
    /// The queue is full.
    #[error("{what} queue of QP {qpn} is full ({depth} requests)")]
    QueueFull {
        /// The QP.
        qpn: Qpn,
        /// Send or receive.
        what: &'static str,
        /// Its depth.
        depth: usize,
    },
    /// Too many scatter/gather entries.
    #[error("work request has {got} SGEs, QP {qpn} allows {max}")]
    TooManySge {
        /// The QP.
        qpn: Qpn,
        /// Given.
        got: usize,
        /// Allowed.
        max: usize,
    },
    /// The work request does not fit the QP type (e.g. RDMA on UD, UD without destination).
    #[error("QP {qpn}: {why}")]
    BadRequest {
        /// The QP.
        qpn: Qpn,
        /// What is wrong.
        why: &'static str,
    },
    /// The attribute value is out of range.
    #[error("QP {qpn}: attribute {attr} = {value} is invalid")]
    BadAttribute {
        /// The QP.
        qpn: Qpn,
        /// Which.
        attr: &'static str,
        /// Its value.
        value: u64,
    },
    /// Posting receives to a QP that uses an SRQ.
    #[error("QP {0} receives from a shared receive queue; post there")]
    UsesSrq(Qpn),
}

/// A queue pair.
#[derive(Debug)]
pub struct Qp {
    pub(crate) qpn: Qpn,
    pub(crate) init: QpInit,
    pub(crate) state: QpState,
    pub(crate) port: u8,
    pub(crate) pkey: PKey,
    /// Where `pkey` sits in the port's table (reported in UD receive completions).
    pub(crate) pkey_index: u16,
    pub(crate) qkey: QKey,
    pub(crate) access: Access,
    pub(crate) dest_gid: Gid,
    pub(crate) dest_qpn: Qpn,
    pub(crate) mtu: usize,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) rq: VecDeque<RecvWr>,
    pub(crate) req: Requester,
    pub(crate) resp: Responder,
}

impl Qp {
    /// A new QP in RESET.
    pub(crate) fn new(qpn: Qpn, init: QpInit) -> Self {
        Qp {
            qpn,
            init,
            state: QpState::Reset,
            port: 1,
            pkey: PKey::DEFAULT,
            pkey_index: 0,
            qkey: QKey(0),
            access: Access::empty(),
            dest_gid: Gid::default(),
            dest_qpn: Qpn::default(),
            mtu: 1024,
            timeout: ack_timeout(14),
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 4,
            max_dest_rd_atomic: 4,
            rq: VecDeque::new(),
            req: Requester::default(),
            resp: Responder::default(),
        }
    }

    /// The QP number.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }

    /// The state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Applies a `modify_qp`.
    pub(crate) fn modify(
        &mut self,
        attr: &QpAttr,
        mask: QpAttrMask,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), QpError> {
        if mask.contains(QpAttrMask::CUR_STATE) && attr.cur_state != self.state {
            return Err(ModifyError::WrongCurrentState {
                claimed: attr.cur_state,
                actual: self.state,
            }
            .into());
        }
        transition(
            self.init.qp_type,
            self.state,
            attr.state,
            mask | QpAttrMask::STATE,
        )?;
        self.apply(attr, mask)?;
        if mask.contains(QpAttrMask::PKEY_INDEX) {
            // The port is this modify's, if it sets one, else the QP's.
            let port = if mask.contains(QpAttrMask::PORT) {
                attr.port
            } else {
                self.port
            };
            let table = ctx.pkey_tables.get(usize::from(port).wrapping_sub(1));
            let Some(&pkey) = table.and_then(|t| t.get(usize::from(attr.pkey_index))) else {
                return Err(QpError::BadAttribute {
                    qpn: self.qpn,
                    attr: "pkey_index",
                    value: attr.pkey_index.into(),
                });
            };
            self.pkey = pkey;
            self.pkey_index = attr.pkey_index;
        }
        let from = self.state;
        self.state = attr.state;
        match attr.state {
            QpState::Reset => {
                self.rq.clear();
                self.req = Requester::default();
                self.resp = Responder::default();
            }
            QpState::Err if from != QpState::Err => self.enter_error(ctx),
            QpState::Rts if from == QpState::Rtr => self.req.start(self.retry_cnt, self.rnr_retry),
            QpState::Rts => self.pump(ctx),
            QpState::Sqd if from != QpState::Sqd => {
                self.req.sqd_notify = mask.contains(QpAttrMask::EN_SQD_ASYNC_NOTIFY);
                self.pump(ctx);
            }
            _ => {}
        }
        Ok(())
    }

    fn apply(&mut self, a: &QpAttr, mask: QpAttrMask) -> Result<(), QpError> {
        let bad = |attr, value: u64| QpError::BadAttribute {
            qpn: self.qpn,
            attr,
            value,
        };
        if mask.contains(QpAttrMask::PATH_MTU) {
            self.mtu = a
                .path_mtu
                .bytes()
                .ok_or(bad("path_mtu", u8::from(a.path_mtu).into()))?;
        }
        if mask.contains(QpAttrMask::RETRY_CNT) && a.retry_cnt > 7 {
            return Err(bad("retry_cnt", a.retry_cnt.into()));
        }
        if mask.contains(QpAttrMask::RNR_RETRY) && a.rnr_retry > 7 {
            return Err(bad("rnr_retry", a.rnr_retry.into()));
        }
        if mask.contains(QpAttrMask::MIN_RNR_TIMER) && a.min_rnr_timer > 31 {
            return Err(bad("min_rnr_timer", a.min_rnr_timer.into()));
        }
        if mask.contains(QpAttrMask::PORT) {
            self.port = a.port;
        }
        if mask.contains(QpAttrMask::QKEY) {
            self.qkey = a.qkey;
        }
        if mask.contains(QpAttrMask::ACCESS_FLAGS) {
            self.access = a.access;
        }
        if mask.contains(QpAttrMask::AV) {
            self.dest_gid = a.dest_gid;
        }
        if mask.contains(QpAttrMask::DEST_QPN) {
            self.dest_qpn = a.dest_qpn;
        }
        if mask.contains(QpAttrMask::RQ_PSN) {
            self.resp.epsn = a.rq_psn;
        }
        if mask.contains(QpAttrMask::SQ_PSN) {
            self.req.next_psn = a.sq_psn;
            self.req.comp_psn = a.sq_psn;
        }
        if mask.contains(QpAttrMask::TIMEOUT) {
            self.timeout = ack_timeout(a.timeout);
        }
        if mask.contains(QpAttrMask::RETRY_CNT) {
            self.retry_cnt = a.retry_cnt;
        }
        if mask.contains(QpAttrMask::RNR_RETRY) {
            self.rnr_retry = a.rnr_retry;
        }
        if mask.contains(QpAttrMask::MIN_RNR_TIMER) {
            self.min_rnr_timer = a.min_rnr_timer;
        }
        if mask.contains(QpAttrMask::MAX_QP_RD_ATOMIC) {
            self.max_rd_atomic = a.max_rd_atomic.max(1);
            self.req.rd_avail = self.max_rd_atomic;
        }
        if mask.contains(QpAttrMask::MAX_DEST_RD_ATOMIC) {
            self.max_dest_rd_atomic = a.max_dest_rd_atomic.max(1);
        }
        Ok(())
    }

    /// Posts a receive.
    pub(crate) fn post_recv(&mut self, wr: RecvWr, ctx: &mut Ctx<'_>) -> Result<(), QpError> {
        if self.init.srq.is_some() {
            return Err(QpError::UsesSrq(self.qpn));
        }
        self.check_sge(wr.sg_list.len())?;
        match self.state {
            QpState::Reset => {
                return Err(QpError::WrongState {
                    qpn: self.qpn,
                    what: "a receive",
                    state: self.state,
                });
            }
            QpState::Err => {
                let wc = Wc::new(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn);
                ctx.complete(self.init.recv_cq, wc);
                return Ok(());
            }
            _ => {}
        }
        if self.rq.len() >= self.init.max_recv_wr {
            return Err(QpError::QueueFull {
                qpn: self.qpn,
                what: "receive",
                depth: self.init.max_recv_wr,
            });
        }
        self.rq.push_back(wr);
        Ok(())
    }

    /// Posts a send work request.
    pub(crate) fn post_send(&mut self, wr: SendWr, ctx: &mut Ctx<'_>) -> Result<(), QpError> {
        self.queue_send(wr, ctx)?;
        self.pump(ctx);
        Ok(())
    }

    /// Queues a send work request without starting the send queue: a chain of requests is
    /// queued first and started once (`Engine::post_send_list`).
    pub(crate) fn queue_send(&mut self, wr: SendWr, ctx: &mut Ctx<'_>) -> Result<(), QpError> {
        self.check_sge(wr.sg_list.len())?;
        if matches!(wr.op, crate::verbs::SendOp::BindMw { .. }) {
            // Fenced per I/O by fast registration instead (CaCaps::mem_windows is false).
            return Err(QpError::BadRequest {
                qpn: self.qpn,
                why: "memory windows are not implemented by the software HCA (it fast-registers)",
            });
        }
        match self.state {
            QpState::Rts | QpState::Sqd => {}
            QpState::Err | QpState::Sqe => {
                let wc = Wc::new(
                    wr.wr_id,
                    WcStatus::WrFlushErr,
                    wqe::wc_opcode(&wr.op),
                    self.qpn,
                );
                ctx.complete(self.init.send_cq, wc);
                return Ok(());
            }
            state => {
                return Err(QpError::WrongState {
                    qpn: self.qpn,
                    what: "a send",
                    state,
                });
            }
        }
        if self.req.sq.len() >= self.init.max_send_wr {
            return Err(QpError::QueueFull {
                qpn: self.qpn,
                what: "send",
                depth: self.init.max_send_wr,
            });
        }
        match self.init.qp_type {
            QpType::Ud => self.ud_post_send(wr, ctx),
            QpType::Rc => self.rc_accept(wr),
        }
    }

    fn check_sge(&self, n: usize) -> Result<(), QpError> {
        if n > self.init.max_sge {
            return Err(QpError::TooManySge {
                qpn: self.qpn,
                got: n,
                max: self.init.max_sge,
            });
        }
        Ok(())
    }

    /// Sends what the send queue allows (RC). In SQD only what was already started goes on
    /// (retransmissions, the rest of a message); nothing new starts.
    pub(crate) fn pump(&mut self, ctx: &mut Ctx<'_>) {
        if self.init.qp_type == QpType::Rc && matches!(self.state, QpState::Rts | QpState::Sqd) {
            self.rc_pump(ctx);
        }
    }

    /// Takes the QP to ERR: flushes both queues and tells the consumer.
    pub(crate) fn enter_error(&mut self, ctx: &mut Ctx<'_>) {
        self.state = QpState::Err;
        self.req.flush(self.qpn, self.init.send_cq, ctx);
        if let Some(r) = self.resp.take_partial_recv() {
            let wc = Wc::new(r.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn);
            ctx.complete(self.init.recv_cq, wc);
        }
        for wr in self.rq.drain(..) {
            let wc = Wc::new(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn);
            ctx.complete(self.init.recv_cq, wc);
        }
        ctx.event(crate::engine::Event::QpError(self.qpn));
    }

    /// Takes the next receive request, from the SRQ or the QP's own queue.
    pub(crate) fn take_recv(&mut self, ctx: &mut Ctx<'_>) -> Option<RecvWr> {
        match self.init.srq {
            Some(srq) => ctx.srq_pop(srq),
            None => self.rq.pop_front(),
        }
    }

    /// The earliest timer this QP has armed.
    pub(crate) fn next_timeout(&self) -> Option<crate::time::Time> {
        self.req.next_timeout()
    }
}
