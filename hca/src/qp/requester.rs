//! RC requester and completer: turns send queue entries into packets, and ACKs, NAKs and
//! read responses into completions (IBTA Vol 1 §9.7; the rules rxe follows in `rxe_req.c`
//! and `rxe_comp.c`).
//!
//! PSN bookkeeping: `next_psn` is the PSN of the next packet to send, `comp_psn` the oldest
//! PSN not yet acknowledged. Every packet of a SEND or WRITE uses one PSN; a READ request
//! uses as many as its responses. Recovery is go-back-N from `comp_psn`: on a retransmit
//! timeout, a PSN-sequence NAK, a gap in read responses, or the end of an RNR wait.
//! Completions leave the send queue in order.

use super::wqe::{SendWqe, Sgl, WqeKind};
use super::{Qp, QpError};
use crate::engine::{CqId, Ctx};
use crate::ids::{Psn, Qpn};
use crate::mr::{Access, ErrorClass, FastRegWr, MrKey};
use crate::time::Time;
use crate::verbs::{SendFlags, SendOp, SendWr, Wc, WcStatus};
use crate::wire::{Bth, Ieth, ImmDt, NakCode, Opcode, Packet, Position, Reth, Syndrome};
use std::collections::VecDeque;

/// Most PSNs in flight before the requester waits for ACKs (rxe `RXE_MAX_UNACKED_PSNS`).
const MAX_UNACKED_PSNS: i32 = 128;
/// Largest READ request, in response packets (half the window: two in flight).
const MAX_READ_CHUNK: u32 = 64;
/// Smallest READ request worth sending when the window is nearly full.
const MIN_READ_CHUNK: u32 = 16;
/// Ask for an ACK at least every this many packets (rxe `RXE_MAX_PKT_PER_ACK`).
const MAX_PKT_PER_ACK: u32 = 64;
/// An RNR or retry count of 7 means "retry forever" for RNR only (IBTA; rxe also never
/// decrements a transport retry count of 7 — we do, as IBTA says).
const INFINITE_RNR: u8 = 7;

/// Send-side state of an RC QP.
#[derive(Debug, Default)]
pub(crate) struct Requester {
    pub(crate) sq: VecDeque<SendWqe>,
    /// Index in `sq` of the entry being (re)transmitted.
    cursor: usize,
    /// Packet (or, for READ, first response) of `sq[cursor]` to send next.
    cursor_pkt: u32,
    pub(crate) next_psn: Psn,
    pub(crate) comp_psn: Psn,
    noack: u32,
    pub(crate) rd_avail: u8,
    retry_left: u8,
    rnr_left: u8,
    retrans_at: Option<Time>,
    rnr_at: Option<Time>,
    /// SQD entered with EN_SQD_ASYNC_NOTIFY: announce when the send queue has drained.
    pub(crate) sqd_notify: bool,
    /// A go-back-N for a gap in read responses is under way: further gaps are the rest of
    /// the same burst, not new losses (rxe's `started_retry`). Cleared by progress.
    gap_retry: bool,
    /// After a go-back-N: packets before this PSN are sent again (counted as such).
    resend_before: Option<Psn>,
}

impl Requester {
    /// Entering RTS: full retry budgets.
    pub(crate) fn start(&mut self, retry_cnt: u8, rnr_retry: u8) {
        self.retry_left = retry_cnt;
        self.rnr_left = rnr_retry;
    }

    /// The earliest armed timer.
    pub(crate) fn next_timeout(&self) -> Option<Time> {
        match (self.retrans_at, self.rnr_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn outstanding(&self) -> bool {
        self.comp_psn != self.next_psn
    }

    /// Completes every entry with a flush error (the QP went to ERR).
    pub(crate) fn flush(&mut self, qpn: Qpn, cq: CqId, ctx: &mut Ctx<'_>) {
        for wqe in self.sq.drain(..) {
            let op = super::wqe::wc_opcode(&wqe.wr.op);
            ctx.complete(cq, Wc::new(wqe.wr.wr_id, WcStatus::WrFlushErr, op, qpn));
        }
        self.cursor = 0;
        self.cursor_pkt = 0;
        self.retrans_at = None;
        self.rnr_at = None;
    }
}

fn psn_before(p: Psn) -> Psn {
    p.wrapping_add(0x00ff_ffff)
}

/// The opcode of packet `k` of `n` of a SEND or WRITE.
fn data_opcode(op: &SendOp, k: u32, n: u32) -> Opcode {
    let pos = match (k, n) {
        (_, 1) => Position::Only,
        (0, _) => Position::First,
        (k, n) if k + 1 == n => Position::Last,
        _ => Position::Middle,
    };
    match (op, pos) {
        (SendOp::Write { .. } | SendOp::WriteWithImm { .. }, Position::First) => {
            Opcode::RcRdmaWriteFirst
        }
        (SendOp::Write { .. } | SendOp::WriteWithImm { .. }, Position::Middle) => {
            Opcode::RcRdmaWriteMiddle
        }
        (SendOp::Write { .. }, Position::Last) => Opcode::RcRdmaWriteLast,
        (SendOp::Write { .. }, Position::Only) => Opcode::RcRdmaWriteOnly,
        (SendOp::WriteWithImm { .. }, Position::Last) => Opcode::RcRdmaWriteLastWithImmediate,
        (SendOp::WriteWithImm { .. }, Position::Only) => Opcode::RcRdmaWriteOnlyWithImmediate,
        (_, Position::First) => Opcode::RcSendFirst,
        (_, Position::Middle) => Opcode::RcSendMiddle,
        (SendOp::SendWithImm(_), Position::Last) => Opcode::RcSendLastWithImmediate,
        (SendOp::SendWithImm(_), Position::Only) => Opcode::RcSendOnlyWithImmediate,
        (SendOp::SendWithInv(_), Position::Last) => Opcode::RcSendLastWithInvalidate,
        (SendOp::SendWithInv(_), Position::Only) => Opcode::RcSendOnlyWithInvalidate,
        (_, Position::Last) => Opcode::RcSendLast,
        (_, Position::Only) => Opcode::RcSendOnly,
    }
}

fn nak_status(code: NakCode) -> WcStatus {
    match code {
        NakCode::InvalidRequest => WcStatus::RemInvReqErr,
        NakCode::RemoteAccessError => WcStatus::RemAccessErr,
        NakCode::RemoteOperationalError => WcStatus::RemOpErr,
        _ => WcStatus::BadRespErr,
    }
}

impl Qp {
    /// Queues an RC send work request.
    pub(super) fn rc_accept(&mut self, wr: SendWr) -> Result<(), QpError> {
        if wr.ud.is_some() {
            return Err(QpError::BadRequest {
                qpn: self.qpn,
                why: "UD destination on an RC QP",
            });
        }
        let wqe = SendWqe::new(wr, self.mtu);
        if wqe.len > u64::from(u32::MAX >> 1) {
            return Err(QpError::BadRequest {
                qpn: self.qpn,
                why: "message longer than 2^31 bytes",
            });
        }
        self.req.sq.push_back(wqe);
        Ok(())
    }

    /// Transmits what the window, fences and the initiator depth allow.
    pub(super) fn rc_pump(&mut self, ctx: &mut Ctx<'_>) {
        let sqd = self.state == super::QpState::Sqd;
        while matches!(self.state, super::QpState::Rts | super::QpState::Sqd)
            && self.req.rnr_at.is_none()
        {
            let idx = self.req.cursor;
            let Some(wqe) = self.req.sq.get(idx) else {
                break;
            };
            if sqd && !wqe.done && wqe.first_psn.is_none() {
                break; // draining: nothing new starts
            }
            if wqe.done {
                self.req.cursor += 1;
                self.req.cursor_pkt = 0;
                continue;
            }
            if self.req.next_psn.diff(self.req.comp_psn) >= MAX_UNACKED_PSNS {
                break;
            }
            let fenced =
                wqe.wr.flags.contains(SendFlags::FENCE) || matches!(wqe.wr.op, SendOp::LocalInv(_));
            let reads_pending = self
                .req
                .sq
                .iter()
                .take(idx)
                .any(|w| w.kind == WqeKind::Read && !w.done);
            if fenced && reads_pending {
                break;
            }
            let sent = match wqe.kind {
                WqeKind::Local => self.rc_local_op(idx, ctx),
                WqeKind::Read => self.rc_send_read(idx, ctx),
                WqeKind::Send | WqeKind::Write => self.rc_send_data(idx, ctx),
            };
            if !sent {
                break;
            }
        }
        self.rc_complete_front(ctx);
    }

    /// Executes REG_MR / LOCAL_INV at the cursor.
    fn rc_local_op(&mut self, idx: usize, ctx: &mut Ctx<'_>) -> bool {
        let pd = self.init.pd;
        let result = match &self.req.sq[idx].wr.op {
            SendOp::RegMr { key, access, pages } => {
                let key = MrKey(*key);
                let wr = FastRegWr {
                    key,
                    pages: pages.pages.as_slice(),
                    page_size: pages.page_size,
                    first_byte_offset: pages.first_byte_offset,
                    iova: pages.iova,
                    length: pages.length,
                    access: *access,
                };
                ctx.mrs.fast_reg(pd, key.index(), &wr)
            }
            SendOp::LocalInv(key) => ctx.mrs.invalidate(pd, *key, false),
            _ => Ok(()),
        };
        match result {
            Ok(()) => {
                self.req.sq[idx].done = true;
                self.req.cursor += 1;
                true
            }
            Err(_) => {
                self.rc_fail_at(idx, WcStatus::LocQpOpErr, ctx);
                false
            }
        }
    }

    /// Resolves the entry's local buffers; fails the entry on a protection error.
    fn rc_resolve(&mut self, idx: usize, need: Access, ctx: &mut Ctx<'_>) -> bool {
        if self.req.sq[idx].sgl.is_some() {
            return true;
        }
        match Sgl::resolve(ctx.mrs, self.init.pd, &self.req.sq[idx].wr.sg_list, need) {
            Ok(sgl) => {
                self.req.sq[idx].sgl = Some(sgl);
                true
            }
            Err(e) => {
                let status = match e.class() {
                    ErrorClass::LocalProtection => WcStatus::LocProtErr,
                    _ => WcStatus::LocQpOpErr,
                };
                self.rc_fail_at(idx, status, ctx);
                false
            }
        }
    }

    fn bth(&self, opcode: Opcode, psn: Psn) -> Bth {
        let mut bth = Bth::new(opcode, self.dest_qpn, psn);
        bth.pkey = self.pkey;
        bth
    }

    /// Counts a packet with `psn` as retransmitted if a go-back-N sent it before.
    fn count_resend(&mut self, psn: Psn, ctx: &mut Ctx<'_>) {
        if let Some(before) = self.req.resend_before {
            if psn.diff(before) < 0 {
                ctx.stats.at(self.port).retransmitted_packets += 1;
            } else {
                self.req.resend_before = None;
            }
        }
    }

    fn arm_retransmit(&mut self, now: Time) {
        if self.req.retrans_at.is_none() {
            self.req.retrans_at = self.timeout.map(|t| now + t);
        }
    }

    /// Sends the next packet of the SEND or WRITE at the cursor.
    fn rc_send_data(&mut self, idx: usize, ctx: &mut Ctx<'_>) -> bool {
        if !self.rc_resolve(idx, Access::empty(), ctx) {
            return false;
        }
        let mtu = self.mtu as u64;
        let k = self.req.cursor_pkt;
        let wqe = &mut self.req.sq[idx];
        let first = *wqe.first_psn.get_or_insert(self.req.next_psn);
        let psn = first.wrapping_add(k);
        debug_assert_eq!(psn, self.req.next_psn, "packets go out in PSN order");
        if self.req.resend_before.is_some() {
            self.count_resend(psn, ctx);
        }
        let wqe = &mut self.req.sq[idx];
        let n = wqe.npsn;
        let last = k + 1 == n;
        let offset = u64::from(k) * mtu;
        let len = (wqe.len - offset.min(wqe.len)).min(mtu) as usize;
        let opcode = data_opcode(&wqe.wr.op, k, n);
        let ack_req = last || self.req.noack >= MAX_PKT_PER_ACK;
        let mut bth = Bth::new(opcode, self.dest_qpn, psn);
        bth.pkey = self.pkey;
        bth.ack_req = ack_req;
        bth.solicited = last && wqe.wr.flags.contains(SendFlags::SOLICITED);
        let mut pkt = Packet::new(bth);
        match wqe.wr.op {
            SendOp::Write { remote_addr, rkey }
            | SendOp::WriteWithImm {
                remote_addr, rkey, ..
            } if k == 0 => {
                pkt.reth = Some(Reth {
                    va: remote_addr,
                    rkey,
                    dma_len: wqe.len as u32,
                });
            }
            _ => {}
        }
        if last {
            match wqe.wr.op {
                SendOp::SendWithImm(imm) | SendOp::WriteWithImm { imm, .. } => {
                    pkt.imm = Some(ImmDt { imm });
                }
                SendOp::SendWithInv(rkey) => pkt.ieth = Some(Ieth { rkey }),
                _ => {}
            }
        }
        let sgl = wqe.sgl.as_ref();
        ctx.transmit(self.port, self.dest_gid, &pkt, len, |buf| {
            let ok = sgl.is_some_and(|sgl| sgl.read(offset, buf).is_ok());
            debug_assert!(ok || buf.is_empty(), "resolved SGL covers the message");
            if !ok {
                buf.fill(0); // never another packet's bytes
            }
        });
        self.req.noack = if ack_req { 0 } else { self.req.noack + 1 };
        self.req.next_psn = psn.wrapping_add(1);
        if last {
            self.req.cursor += 1;
            self.req.cursor_pkt = 0;
        } else {
            self.req.cursor_pkt += 1;
        }
        self.arm_retransmit(ctx.now);
        true
    }

    /// Sends (or re-sends, from the first missing response) the READ request at the cursor.
    fn rc_send_read(&mut self, idx: usize, ctx: &mut Ctx<'_>) -> bool {
        if !self.req.sq[idx].rd_counted {
            if self.req.rd_avail == 0 {
                return false;
            }
            self.req.rd_avail -= 1;
            self.req.sq[idx].rd_counted = true;
        }
        if !self.rc_resolve(idx, Access::LOCAL_WRITE, ctx) {
            return false;
        }
        let mtu = self.mtu as u64;
        let k = self.req.cursor_pkt;
        let in_flight = self.req.next_psn.diff(self.req.comp_psn).max(0) as u32;
        let window = (MAX_UNACKED_PSNS as u32).saturating_sub(in_flight);
        let wqe = &mut self.req.sq[idx];
        let remaining = wqe.npsn - k;
        // A READ is asked for in chunks that fit the window of unacknowledged PSNs, so its
        // responses are flow-controlled like SENDs and WRITEs: a 4 MiB READ never bursts
        // thousands of responses into a receiver that cannot take them.
        let chunk = remaining.min(MAX_READ_CHUNK).min(window);
        if chunk < remaining.min(MIN_READ_CHUNK) {
            return false;
        }
        let first = *wqe.first_psn.get_or_insert(self.req.next_psn);
        let psn = first.wrapping_add(k);
        debug_assert_eq!(psn, self.req.next_psn, "requests go out in PSN order");
        if self.req.resend_before.is_some() {
            self.count_resend(psn, ctx);
        }
        let wqe = &mut self.req.sq[idx];
        let SendOp::Read { remote_addr, rkey } = wqe.wr.op else {
            return false;
        };
        let done = (u64::from(k) * mtu).min(wqe.len);
        let len = (wqe.len - done).min(u64::from(chunk) * mtu);
        let mut bth = self.bth(Opcode::RcRdmaReadRequest, psn);
        bth.ack_req = true;
        let mut pkt = Packet::new(bth);
        pkt.reth = Some(Reth {
            va: remote_addr.wrapping_add(done),
            rkey,
            dma_len: len as u32,
        });
        ctx.transmit(self.port, self.dest_gid, &pkt, 0, |_| {});
        self.req.next_psn = psn.wrapping_add(chunk);
        if k + chunk == self.req.sq[idx].npsn {
            self.req.cursor += 1;
            self.req.cursor_pkt = 0;
        } else {
            self.req.cursor_pkt = k + chunk;
        }
        self.req.noack = 0;
        self.arm_retransmit(ctx.now);
        true
    }

    /// Pops finished entries off the front, generating their completions.
    fn rc_complete_front(&mut self, ctx: &mut Ctx<'_>) {
        self.rc_pop_finished(ctx);
        // SQD: once nothing started is outstanding, the send queue has drained.
        let started = self.req.sq.iter().any(|w| w.first_psn.is_some() && !w.done);
        if self.state == super::QpState::Sqd
            && self.req.sqd_notify
            && !started
            && !self.req.outstanding()
        {
            self.req.sqd_notify = false;
            ctx.event(crate::engine::Event::SqDrained(self.qpn));
        }
    }

    fn rc_pop_finished(&mut self, ctx: &mut Ctx<'_>) {
        while self.req.sq.front().is_some_and(|w| w.done) {
            let Some(wqe) = self.req.sq.pop_front() else {
                break;
            };
            self.req.cursor = self.req.cursor.saturating_sub(1);
            if wqe.kind == WqeKind::Read {
                self.req.rd_avail = self.req.rd_avail.saturating_add(1).min(self.max_rd_atomic);
            }
            if self.init.sq_sig_all || wqe.wr.flags.contains(SendFlags::SIGNALED) {
                let op = super::wqe::wc_opcode(&wqe.wr.op);
                let mut wc = Wc::new(wqe.wr.wr_id, WcStatus::Success, op, self.qpn);
                if wqe.kind == WqeKind::Read {
                    wc.byte_len = wqe.len as u32;
                }
                ctx.complete(self.init.send_cq, wc);
            }
        }
    }

    /// Completes the entry at `idx` with `status` and takes the QP to ERR. Completions stay
    /// in send-queue order: finished entries before it complete normally, unfinished ones
    /// before it are flushed, then it fails, then the rest are flushed.
    fn rc_fail_at(&mut self, idx: usize, status: WcStatus, ctx: &mut Ctx<'_>) {
        let qpn = self.qpn;
        let len_before = self.req.sq.len();
        self.rc_complete_front(ctx);
        let at = idx.saturating_sub(len_before - self.req.sq.len());
        for wqe in self.req.sq.drain(..at.min(self.req.sq.len())) {
            let op = super::wqe::wc_opcode(&wqe.wr.op);
            ctx.complete(
                self.init.send_cq,
                Wc::new(wqe.wr.wr_id, WcStatus::WrFlushErr, op, qpn),
            );
        }
        if let Some(wqe) = self.req.sq.pop_front() {
            let op = super::wqe::wc_opcode(&wqe.wr.op);
            ctx.complete(self.init.send_cq, Wc::new(wqe.wr.wr_id, status, op, qpn));
        }
        self.enter_error(ctx);
    }

    /// Everything up to and including `p` is acknowledged.
    fn rc_ack_through(&mut self, p: Psn, ctx: &mut Ctx<'_>) {
        if p.diff(self.req.next_psn) >= 0 || psn_before(self.req.comp_psn).diff(p) > 0 {
            return; // acknowledges nothing we have outstanding
        }
        let mut new_comp = p.wrapping_add(1);
        let mut lost_responses = false;
        for wqe in self.req.sq.iter_mut() {
            if wqe.kind == WqeKind::Local {
                continue;
            }
            let (Some(first), Some(last)) = (wqe.first_psn, wqe.last_psn()) else {
                break;
            };
            if wqe.kind == WqeKind::Read && !wqe.done {
                let missing = first.wrapping_add(wqe.read_next);
                if new_comp.diff(missing) > 0 {
                    new_comp = missing;
                    lost_responses = true;
                }
                break;
            }
            if last.diff(new_comp) < 0 {
                wqe.done = true;
            } else {
                break;
            }
        }
        self.rc_progress(new_comp, ctx);
        if lost_responses {
            self.rc_signal_retry(ctx);
        }
    }

    /// `comp_psn` moves to `new_comp` if that is forward; budgets refill and timers follow.
    fn rc_progress(&mut self, new_comp: Psn, ctx: &mut Ctx<'_>) {
        if new_comp.diff(self.req.comp_psn) > 0 {
            self.req.comp_psn = new_comp;
            self.req.gap_retry = false;
            self.req.retry_left = self.retry_cnt;
            self.req.rnr_left = self.rnr_retry;
            self.req.retrans_at = None;
        }
        if self.req.outstanding() {
            self.arm_retransmit(ctx.now);
        } else {
            self.req.retrans_at = None;
        }
        self.rc_complete_front(ctx);
    }

    /// A go-back-N asked for by the peer's signals (a sequence NAK, a gap in read responses,
    /// an ACK beyond missing read responses): one per episode, until progress is made; the
    /// retransmit timer covers a retry that is lost in turn.
    fn rc_signal_retry(&mut self, ctx: &mut Ctx<'_>) {
        if !self.req.gap_retry {
            self.req.gap_retry = true;
            self.rc_retry(true, ctx);
        }
    }

    /// Go-back-N from `comp_psn`; `count` spends one transport retry.
    fn rc_retry(&mut self, count: bool, ctx: &mut Ctx<'_>) {
        if count {
            if self.req.retry_left == 0 {
                let idx = self.req.sq.iter().position(|w| !w.done).unwrap_or(0);
                self.rc_fail_at(idx, WcStatus::RetryExcErr, ctx);
                return;
            }
            self.req.retry_left -= 1;
        }
        ctx.stats.at(self.port).retries += 1;
        let high = self.req.next_psn;
        self.req.resend_before = match self.req.resend_before {
            Some(p) if p.diff(high) > 0 => Some(p),
            _ => Some(high),
        };
        let comp = self.req.comp_psn;
        self.req.next_psn = comp;
        self.req.noack = 0;
        self.req.retrans_at = None;
        let hit = self
            .req
            .sq
            .iter()
            .position(|w| w.kind != WqeKind::Local && !w.done && w.covers(comp));
        match hit {
            Some(i) => {
                self.req.cursor = i;
                let first = self.req.sq[i].first_psn.unwrap_or(comp);
                self.req.cursor_pkt = comp.diff(first).max(0) as u32;
            }
            None => {
                // Nothing sent is outstanding: resume at the first entry not yet sent.
                let i = self
                    .req
                    .sq
                    .iter()
                    .position(|w| !w.done && w.first_psn.is_none() && w.kind != WqeKind::Local);
                self.req.cursor = i.unwrap_or(self.req.sq.len()).min(self.req.cursor);
                self.req.cursor_pkt = 0;
            }
        }
    }

    /// An ACK, NAK or read response for this QP arrived.
    pub(crate) fn rc_handle_response(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) {
        if !matches!(self.state, super::QpState::Rts | super::QpState::Sqd) {
            return;
        }
        let psn = pkt.bth.psn;
        match pkt.bth.opcode {
            Opcode::RcAcknowledge => match pkt.aeth.map(|a| a.syndrome) {
                Some(Syndrome::Ack { .. }) => self.rc_ack_through(psn, ctx),
                Some(Syndrome::RnrNak { timer }) => {
                    ctx.stats.at(self.port).rnr_naks_received += 1;
                    self.rc_on_rnr(psn, timer, ctx)
                }
                Some(Syndrome::Nak(NakCode::PsnSequenceError)) => {
                    ctx.stats.at(self.port).psn_naks_received += 1;
                    self.rc_ack_through(psn_before(psn), ctx);
                    if self.req.outstanding() && self.req.comp_psn == psn {
                        self.rc_signal_retry(ctx);
                    }
                }
                Some(Syndrome::Nak(code)) => {
                    ctx.stats.at(self.port).fatal_naks_received += 1;
                    self.rc_on_fatal_nak(psn, code, ctx)
                }
                _ => {}
            },
            Opcode::RcRdmaReadResponseFirst
            | Opcode::RcRdmaReadResponseMiddle
            | Opcode::RcRdmaReadResponseLast
            | Opcode::RcRdmaReadResponseOnly => self.rc_on_read_response(pkt, ctx),
            _ => {}
        }
        self.rc_pump(ctx);
    }

    fn rc_on_rnr(&mut self, psn: Psn, timer: u8, ctx: &mut Ctx<'_>) {
        self.rc_ack_through(psn_before(psn), ctx);
        if self.state != super::QpState::Rts || self.req.comp_psn != psn {
            return;
        }
        if self.req.rnr_left == 0 {
            let idx = self.req.sq.iter().position(|w| w.covers(psn)).unwrap_or(0);
            self.rc_fail_at(idx, WcStatus::RnrRetryExcErr, ctx);
            return;
        }
        if self.req.rnr_left != INFINITE_RNR {
            self.req.rnr_left -= 1;
        }
        let wait = core::time::Duration::from_micros(crate::wire::rnr_timer_us(timer).into());
        self.req.rnr_at = Some(ctx.now + wait);
        self.req.retrans_at = None;
    }

    fn rc_on_fatal_nak(&mut self, psn: Psn, code: NakCode, ctx: &mut Ctx<'_>) {
        self.rc_ack_through(psn_before(psn), ctx);
        if self.state != super::QpState::Rts {
            return;
        }
        let idx = self.req.sq.iter().position(|w| w.covers(psn));
        let idx = idx
            .or_else(|| self.req.sq.iter().position(|w| !w.done))
            .unwrap_or(0);
        self.rc_fail_at(idx, nak_status(code), ctx);
    }

    fn rc_on_read_response(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) {
        let psn = pkt.bth.psn;
        // Responses come back in PSN order, so only the oldest unfinished READ can take one.
        let Some(idx) = self
            .req
            .sq
            .iter()
            .position(|w| w.kind == WqeKind::Read && !w.done)
        else {
            return; // a duplicate of something already complete
        };
        let wqe = &self.req.sq[idx];
        let (Some(first), n) = (wqe.first_psn, wqe.npsn) else {
            return;
        };
        let expected = first.wrapping_add(wqe.read_next);
        let d = psn.diff(expected);
        if d < 0 {
            return; // duplicate response
        }
        // Everything before this READ was processed by the responder: implicitly ACKed.
        self.rc_ack_through(psn_before(first), ctx);
        if self.state != super::QpState::Rts {
            return;
        }
        let Some(idx) = self
            .req
            .sq
            .iter()
            .position(|w| w.kind == WqeKind::Read && !w.done)
        else {
            return;
        };
        if d > 0 {
            // Responses were lost (or overtaken), ours or a later READ's arrived first: ask
            // again from the first missing one, once per gap.
            self.rc_progress(expected, ctx);
            self.rc_signal_retry(ctx);
            return;
        }
        let mtu = self.mtu as u64;
        let wqe = &self.req.sq[idx];
        let k = wqe.read_next;
        let offset = u64::from(k) * mtu;
        let want_len = (wqe.len - offset.min(wqe.len)).min(mtu) as usize;
        // Positions (First/Middle/Last) are relative to the request that asked for the
        // responses, which may be a chunk or a retry; what matters is PSN and length.
        if pkt.payload.len() != want_len {
            self.rc_fail_at(idx, WcStatus::BadRespErr, ctx);
            return;
        }
        let written = wqe.sgl.as_ref().map(|s| s.write(offset, pkt.payload));
        if !matches!(written, Some(Ok(()))) {
            self.rc_fail_at(idx, WcStatus::LocProtErr, ctx);
            return;
        }
        let wqe = &mut self.req.sq[idx];
        wqe.read_next += 1;
        if wqe.read_next == n {
            wqe.done = true;
        }
        self.rc_progress(psn.wrapping_add(1), ctx);
    }

    /// A timer of this QP may have expired.
    pub(crate) fn rc_handle_timeout(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        if self.req.rnr_at.is_some_and(|t| t <= now) {
            self.req.rnr_at = None;
            self.rc_retry(false, ctx);
        }
        if self.req.retrans_at.is_some_and(|t| t <= now) {
            self.req.retrans_at = None;
            if self.req.outstanding() {
                ctx.stats.at(self.port).retransmit_timeouts += 1;
                self.req.gap_retry = true;
                self.rc_retry(true, ctx);
            }
        }
        self.pump(ctx);
    }
}
