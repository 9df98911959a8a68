//! RC responder: executes inbound SENDs, RDMA WRITEs and RDMA READs in PSN order, answers
//! with ACKs, NAKs and read responses, and replays what a retrying requester asks for again
//! (IBTA Vol 1 §9.7.5; the rules rxe follows in `rxe_resp.c`).
//!
//! In-order packets are executed. A packet ahead of the expected PSN gets one
//! PSN-sequence-error NAK (latched until the expected packet arrives). A duplicate SEND or
//! WRITE is re-acknowledged; a duplicate READ is answered again from the responder
//! resources (IRD) that remember recent reads. Protection and length errors NAK the
//! requester and take this QP to ERR (IBTA class C/J errors).

use super::Qp;
use super::wqe::Sgl;
use crate::engine::Ctx;
use crate::ids::{Psn, Rkey};
use crate::mr::{Access, MrSpan};
use crate::verbs::{Wc, WcOpcode, WcStatus};
use crate::wire::{Aeth, Bth, Kind, NakCode, Opcode, Packet, Position, Syndrome};
use std::collections::VecDeque;

/// A receive being filled by a multi-packet SEND.
#[derive(Debug)]
struct RecvProgress {
    wr_id: u64,
    sgl: Sgl,
    offset: u64,
}

/// A multi-packet RDMA WRITE in progress.
#[derive(Debug)]
struct WriteProgress {
    span: MrSpan,
    offset: u64,
}

/// A served RDMA READ, kept for replay to a retrying requester.
#[derive(Debug)]
struct ReadResource {
    first: Psn,
    npsn: u32,
    rkey: Rkey,
    span: MrSpan,
}

/// Receive-side state of an RC QP.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    pub(crate) epsn: Psn,
    msn: u32,
    nak_latched: bool,
    recv: Option<RecvProgress>,
    write: Option<WriteProgress>,
    reads: VecDeque<ReadResource>,
    /// An ACK asked for during a receive batch, not sent yet: (PSN, MSN) of the newest.
    ack_pending: Option<(Psn, u32)>,
}

impl Responder {
    /// The receive a multi-packet SEND was filling, for flushing.
    pub(crate) fn take_partial_recv(&mut self) -> Option<crate::verbs::RecvWr> {
        self.recv.take().map(|r| crate::verbs::RecvWr {
            wr_id: r.wr_id,
            sg_list: Default::default(),
        })
    }
}

/// Why a request is refused; the NAK code to answer with.
enum Refuse {
    /// No receive posted: RNR NAK, nothing consumed.
    Rnr,
    /// NAK and take the QP to ERR.
    Fatal(NakCode),
}

impl Qp {
    /// Sends an ACK or NAK for `psn`, after the coalesced ACK it must not overtake.
    fn send_aeth(&mut self, psn: Psn, syndrome: Syndrome, ctx: &mut Ctx<'_>) {
        self.flush_ack(ctx);
        let msn = self.resp.msn;
        self.transmit_aeth(psn, syndrome, msn, ctx);
    }

    /// Sends the ACK held back during a receive batch, if any (the engine calls this at the
    /// batch's end; anything else the responder sends goes after it).
    pub(crate) fn flush_ack(&mut self, ctx: &mut Ctx<'_>) {
        if let Some((psn, msn)) = self.resp.ack_pending.take() {
            self.transmit_aeth(psn, Syndrome::ACK_UNLIMITED, msn, ctx);
        }
    }

    /// Forgets an ACK held back (the QP left the states that send one).
    pub(crate) fn drop_pending_ack(&mut self) {
        self.resp.ack_pending = None;
    }

    fn transmit_aeth(&mut self, psn: Psn, syndrome: Syndrome, msn: u32, ctx: &mut Ctx<'_>) {
        let mut bth = Bth::new(Opcode::RcAcknowledge, self.dest_qpn, psn);
        bth.pkey = self.pkey;
        let mut pkt = Packet::new(bth);
        pkt.aeth = Some(Aeth {
            syndrome,
            msn: msn & 0x00ff_ffff,
        });
        let stats = ctx.stats.at(self.port);
        match syndrome {
            Syndrome::Nak(NakCode::PsnSequenceError) => stats.psn_naks_sent += 1,
            Syndrome::Nak(_) => stats.fatal_naks_sent += 1,
            Syndrome::RnrNak { .. } => stats.rnr_naks_sent += 1,
            _ => {}
        }
        ctx.transmit(self.port, self.dest_gid, &pkt, 0, |_| {});
    }

    fn responder_fail(&mut self, psn: Psn, code: NakCode, ctx: &mut Ctx<'_>) {
        self.send_aeth(psn, Syndrome::Nak(code), ctx);
        self.enter_error(ctx);
    }

    /// A request packet (SEND, WRITE, READ request, atomic) for this QP arrived.
    pub(crate) fn rc_handle_request(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) {
        use super::QpState::{Rtr, Rts, Sqd};
        if !matches!(self.state, Rtr | Rts | Sqd) {
            return;
        }
        let psn = pkt.bth.psn;
        let d = psn.diff(self.resp.epsn);
        if d > 0 {
            if !self.resp.nak_latched {
                self.resp.nak_latched = true;
                let epsn = self.resp.epsn;
                self.send_aeth(epsn, Syndrome::Nak(NakCode::PsnSequenceError), ctx);
            } else {
                // The rest of a burst after a loss: the NAK already asked for a resend.
                ctx.stats.at(self.port).out_of_sequence += 1;
            }
            return;
        }
        if d < 0 {
            self.rc_duplicate(pkt, ctx);
            return;
        }
        self.resp.nak_latched = false;
        let Some(info) = pkt.bth.opcode.info() else {
            return;
        };
        if info.check_payload_len(pkt.payload.len(), self.mtu).is_err() {
            self.responder_fail(psn, NakCode::InvalidRequest, ctx);
            return;
        }
        let result = match info.kind {
            Kind::Send => self.rc_recv_send(pkt, info.position, ctx),
            Kind::RdmaWrite => self.rc_recv_write(pkt, info.position, ctx),
            Kind::ReadRequest => self.rc_recv_read(pkt, ctx),
            _ => Err(Refuse::Fatal(NakCode::InvalidRequest)),
        };
        match result {
            Ok(()) => {}
            Err(Refuse::Rnr) => {
                // Nothing consumed; later packets in flight must not draw sequence NAKs.
                self.resp.nak_latched = true;
                let timer = self.min_rnr_timer;
                self.send_aeth(psn, Syndrome::RnrNak { timer }, ctx);
            }
            Err(Refuse::Fatal(code)) => self.responder_fail(psn, code, ctx),
        }
    }

    /// Acknowledges a request that asks for it. Within a receive batch the ACK is held
    /// back, and a later one of the same batch replaces it: an ACK is cumulative (IBTA
    /// 9.7.5.1.2, coalesced acknowledgements), and the batch's end sends the newest, so
    /// the requester's retransmit timer waits one batch at most.
    fn ack_if_asked(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) {
        if !pkt.bth.ack_req {
            return;
        }
        if !ctx.acks.batching {
            self.send_aeth(pkt.bth.psn, Syndrome::ACK_UNLIMITED, ctx);
            return;
        }
        match self.resp.ack_pending.replace((pkt.bth.psn, self.resp.msn)) {
            Some(_) => ctx.stats.at(self.port).acks_coalesced += 1,
            None => ctx.acks.due.push(self.qpn),
        }
    }

    fn complete_recv(&mut self, wc: Wc, ctx: &mut Ctx<'_>) {
        ctx.complete(self.init.recv_cq, wc);
    }

    fn rc_recv_send(
        &mut self,
        pkt: &Packet<'_>,
        pos: Position,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Refuse> {
        let starts = matches!(pos, Position::First | Position::Only);
        if starts == self.resp.recv.is_some() {
            return Err(Refuse::Fatal(NakCode::InvalidRequest)); // missing First or Last
        }
        if starts {
            let wr = self.take_recv(ctx).ok_or(Refuse::Rnr)?;
            match Sgl::resolve(ctx.mrs, self.init.pd, &wr.sg_list, Access::LOCAL_WRITE) {
                Ok(sgl) => {
                    self.resp.recv = Some(RecvProgress {
                        wr_id: wr.wr_id,
                        sgl,
                        offset: 0,
                    })
                }
                Err(_) => {
                    let wc = Wc::new(wr.wr_id, WcStatus::LocProtErr, WcOpcode::Recv, self.qpn);
                    self.complete_recv(wc, ctx);
                    return Err(Refuse::Fatal(NakCode::RemoteOperationalError));
                }
            }
        }
        let Some(recv) = self.resp.recv.as_mut() else {
            return Err(Refuse::Fatal(NakCode::InvalidRequest));
        };
        let len = pkt.payload.len() as u64;
        if recv.offset + len > recv.sgl.len() || recv.sgl.write(recv.offset, pkt.payload).is_err() {
            let wr_id = recv.wr_id;
            self.resp.recv = None;
            let wc = Wc::new(wr_id, WcStatus::LocLenErr, WcOpcode::Recv, self.qpn);
            self.complete_recv(wc, ctx);
            return Err(Refuse::Fatal(NakCode::InvalidRequest));
        }
        recv.offset += len;
        self.resp.epsn = self.resp.epsn.wrapping_add(1);
        if matches!(pos, Position::Last | Position::Only) {
            let Some(recv) = self.resp.recv.take() else {
                return Ok(());
            };
            self.resp.msn = self.resp.msn.wrapping_add(1);
            let mut wc = Wc::new(recv.wr_id, WcStatus::Success, WcOpcode::Recv, self.qpn);
            wc.byte_len = recv.offset as u32;
            wc.imm = pkt.imm.map(|i| i.imm);
            wc.solicited = pkt.bth.solicited;
            if let Some(ieth) = pkt.ieth {
                if ctx.mrs.invalidate(self.init.pd, ieth.rkey, true).is_err() {
                    wc.status = WcStatus::RemInvReqErr;
                    self.complete_recv(wc, ctx);
                    return Err(Refuse::Fatal(NakCode::InvalidRequest));
                }
                wc.invalidated = Some(ieth.rkey);
            }
            self.complete_recv(wc, ctx);
        }
        self.ack_if_asked(pkt, ctx);
        Ok(())
    }

    fn rc_recv_write(
        &mut self,
        pkt: &Packet<'_>,
        pos: Position,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Refuse> {
        let starts = matches!(pos, Position::First | Position::Only);
        if starts == self.resp.write.is_some() {
            return Err(Refuse::Fatal(NakCode::InvalidRequest));
        }
        let ends = matches!(pos, Position::Last | Position::Only);
        // WRITE with immediate consumes a receive: check before touching memory.
        let imm_recv = match (ends, pkt.imm) {
            (true, Some(_)) => Some(self.take_recv(ctx).ok_or(Refuse::Rnr)?),
            _ => None,
        };
        let written = self.rc_write_data(pkt, starts, ends, ctx);
        match (written, imm_recv, pkt.imm) {
            // The receive taken above must still complete, not vanish: IBTA's "local access
            // error" is exactly a protection error during an RDMA WRITE with immediate (rxe
            // completes it too, with the status of the NAK).
            (Err(Refuse::Fatal(code)), Some(wr), _) => {
                let status = match code {
                    NakCode::RemoteAccessError => WcStatus::LocAccessErr,
                    _ => WcStatus::RemInvReqErr,
                };
                let wc = Wc::new(wr.wr_id, status, WcOpcode::RecvRdmaWithImm, self.qpn);
                self.complete_recv(wc, ctx);
                return Err(Refuse::Fatal(code));
            }
            (Err(e), _, _) => return Err(e),
            (Ok(Some(len)), Some(wr), Some(imm)) => {
                let mut wc = Wc::new(
                    wr.wr_id,
                    WcStatus::Success,
                    WcOpcode::RecvRdmaWithImm,
                    self.qpn,
                );
                wc.byte_len = len as u32;
                wc.imm = Some(imm.imm);
                wc.solicited = pkt.bth.solicited;
                self.complete_recv(wc, ctx);
            }
            _ => {}
        }
        self.ack_if_asked(pkt, ctx);
        Ok(())
    }

    /// Checks and places one RDMA WRITE packet; returns the message length when it ends.
    fn rc_write_data(
        &mut self,
        pkt: &Packet<'_>,
        starts: bool,
        ends: bool,
        ctx: &mut Ctx<'_>,
    ) -> Result<Option<u64>, Refuse> {
        if starts {
            let span = self.remote_span(pkt, Access::REMOTE_WRITE, ctx)?;
            self.resp.write = Some(WriteProgress { span, offset: 0 });
        }
        let Some(w) = self.resp.write.as_mut() else {
            return Err(Refuse::Fatal(NakCode::InvalidRequest));
        };
        let len = pkt.payload.len() as u64;
        if w.offset + len > w.span.len() || w.span.write(w.offset, pkt.payload).is_err() {
            return Err(Refuse::Fatal(NakCode::InvalidRequest));
        }
        w.offset += len;
        self.resp.epsn = self.resp.epsn.wrapping_add(1);
        if !ends {
            return Ok(None);
        }
        let Some(w) = self.resp.write.take() else {
            return Ok(None);
        };
        if w.offset != w.span.len() {
            return Err(Refuse::Fatal(NakCode::InvalidRequest));
        }
        self.resp.msn = self.resp.msn.wrapping_add(1);
        Ok(Some(w.offset))
    }

    /// The memory a RETH names, if this QP grants `need` to its peer and the region does:
    /// the QP's access flags first, then the one checked path (key, PD, state, range).
    fn remote_span(
        &self,
        pkt: &Packet<'_>,
        need: Access,
        ctx: &mut Ctx<'_>,
    ) -> Result<MrSpan, Refuse> {
        let reth = pkt.reth.ok_or(Refuse::Fatal(NakCode::InvalidRequest))?;
        if !self.access.contains(need) {
            return Err(Refuse::Fatal(NakCode::RemoteAccessError));
        }
        ctx.mrs
            .check(
                self.init.pd,
                reth.rkey,
                true,
                reth.va,
                reth.dma_len.into(),
                need,
            )
            .map_err(|_| Refuse::Fatal(NakCode::RemoteAccessError))
    }

    fn rc_recv_read(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) -> Result<(), Refuse> {
        let reth = pkt.reth.ok_or(Refuse::Fatal(NakCode::InvalidRequest))?;
        let span = self.remote_span(pkt, Access::REMOTE_READ, ctx)?;
        let npsn = u64::from(reth.dma_len).div_ceil(self.mtu as u64).max(1) as u32;
        if self.resp.reads.len() >= usize::from(self.max_dest_rd_atomic) {
            self.resp.reads.pop_front();
        }
        self.resp.reads.push_back(ReadResource {
            first: pkt.bth.psn,
            npsn,
            rkey: reth.rkey,
            span,
        });
        // C9-148: the MSN counts a READ when it is accepted.
        self.resp.msn = self.resp.msn.wrapping_add(1);
        self.resp.epsn = pkt.bth.psn.wrapping_add(npsn);
        self.send_read_range(pkt.bth.psn, npsn, ctx);
        Ok(())
    }

    /// Sends the responses with PSNs `first..first + n` from the read resources that cover
    /// them (a replay may span several); First/Middle/Last are relative to this request, as
    /// rxe does when it replays.
    fn send_read_range(&mut self, first: Psn, n: u32, ctx: &mut Ctx<'_>) {
        // Read responses acknowledge too: a held-back ACK for earlier requests goes first.
        self.flush_ack(ctx);
        let mtu = self.mtu as u64;
        for i in 0..n {
            let q = first.wrapping_add(i);
            let Some(res) = self.resp.reads.iter().find(|r| {
                let d = q.diff(r.first);
                d >= 0 && (d as u32) < r.npsn
            }) else {
                break;
            };
            let offset = u64::from(q.diff(res.first) as u32) * mtu;
            let span = res.span.clone();
            let opcode = match (i, n) {
                (_, 1) => Opcode::RcRdmaReadResponseOnly,
                (0, _) => Opcode::RcRdmaReadResponseFirst,
                (i, n) if i + 1 == n => Opcode::RcRdmaReadResponseLast,
                _ => Opcode::RcRdmaReadResponseMiddle,
            };
            let mut bth = Bth::new(opcode, self.dest_qpn, q);
            bth.pkey = self.pkey;
            let mut pkt = Packet::new(bth);
            if opcode != Opcode::RcRdmaReadResponseMiddle {
                pkt.aeth = Some(Aeth {
                    syndrome: Syndrome::ACK_UNLIMITED,
                    msn: self.resp.msn & 0x00ff_ffff,
                });
            }
            let len = (span.len() - offset.min(span.len())).min(mtu) as usize;
            ctx.transmit(self.port, self.dest_gid, &pkt, len, |buf| {
                let ok = span.read(offset, buf).is_ok();
                debug_assert!(ok, "read span covers the response");
                if !ok {
                    buf.fill(0); // never another packet's bytes
                }
            });
        }
    }

    /// A request with a PSN already executed: re-ACK, or replay a READ.
    fn rc_duplicate(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) {
        ctx.stats.at(self.port).duplicate_requests += 1;
        let psn = pkt.bth.psn;
        match pkt.bth.opcode.info().map(|i| i.kind) {
            Some(Kind::Send | Kind::RdmaWrite) => {
                // C9-105: acknowledge with the PSN of the last request executed.
                let last = self.resp.epsn.wrapping_add(0x00ff_ffff);
                self.send_aeth(last, Syndrome::ACK_UNLIMITED, ctx);
            }
            Some(Kind::ReadRequest) => {
                // Replay only what we served under the same key; anything else is dropped.
                let Some(reth) = pkt.reth else { return };
                let known = self.resp.reads.iter().any(|r| {
                    let d = psn.diff(r.first);
                    d >= 0 && (d as u32) < r.npsn && r.rkey == reth.rkey
                });
                if known {
                    let n = u64::from(reth.dma_len).div_ceil(self.mtu as u64).max(1) as u32;
                    self.send_read_range(psn, n, ctx);
                }
            }
            _ => {}
        }
    }
}
