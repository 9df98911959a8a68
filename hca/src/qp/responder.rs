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
}

impl Responder {
    /// The receive a multi-packet SEND was filling, for flushing.
    pub(crate) fn take_partial_recv(&mut self) -> Option<crate::verbs::RecvWr> {
        self.recv.take().map(|r| crate::verbs::RecvWr {
            wr_id: r.wr_id,
            sg_list: Vec::new(),
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
    fn send_aeth(&mut self, psn: Psn, syndrome: Syndrome, ctx: &mut Ctx<'_>) {
        let mut bth = Bth::new(Opcode::RcAcknowledge, self.dest_qpn, psn);
        bth.pkey = self.pkey;
        let mut pkt = Packet::new(bth);
        pkt.aeth = Some(Aeth {
            syndrome,
            msn: self.resp.msn & 0x00ff_ffff,
        });
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

    fn ack_if_asked(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) {
        if pkt.bth.ack_req {
            self.send_aeth(pkt.bth.psn, Syndrome::ACK_UNLIMITED, ctx);
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
        if starts {
            let reth = pkt.reth.ok_or(Refuse::Fatal(NakCode::InvalidRequest))?;
            if !self.access.contains(Access::REMOTE_WRITE) {
                return Err(Refuse::Fatal(NakCode::RemoteAccessError));
            }
            let span = ctx
                .mrs
                .check(
                    self.init.pd,
                    reth.rkey,
                    true,
                    reth.va,
                    reth.dma_len.into(),
                    Access::REMOTE_WRITE,
                )
                .map_err(|_| Refuse::Fatal(NakCode::RemoteAccessError))?;
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
        if ends {
            let Some(w) = self.resp.write.take() else {
                return Ok(());
            };
            if w.offset != w.span.len() {
                return Err(Refuse::Fatal(NakCode::InvalidRequest));
            }
            self.resp.msn = self.resp.msn.wrapping_add(1);
            if let (Some(wr), Some(imm)) = (imm_recv, pkt.imm) {
                let mut wc = Wc::new(
                    wr.wr_id,
                    WcStatus::Success,
                    WcOpcode::RecvRdmaWithImm,
                    self.qpn,
                );
                wc.byte_len = w.offset as u32;
                wc.imm = Some(imm.imm);
                wc.solicited = pkt.bth.solicited;
                self.complete_recv(wc, ctx);
            }
        }
        self.ack_if_asked(pkt, ctx);
        Ok(())
    }

    fn rc_recv_read(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) -> Result<(), Refuse> {
        let reth = pkt.reth.ok_or(Refuse::Fatal(NakCode::InvalidRequest))?;
        if !self.access.contains(Access::REMOTE_READ) {
            return Err(Refuse::Fatal(NakCode::RemoteAccessError));
        }
        let span = ctx
            .mrs
            .check(
                self.init.pd,
                reth.rkey,
                true,
                reth.va,
                reth.dma_len.into(),
                Access::REMOTE_READ,
            )
            .map_err(|_| Refuse::Fatal(NakCode::RemoteAccessError))?;
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
        let at = self.resp.reads.len() - 1;
        self.send_read_responses(at, 0, ctx);
        Ok(())
    }

    /// Sends responses `from..` of the read resource at `at`.
    fn send_read_responses(&mut self, at: usize, from: u32, ctx: &mut Ctx<'_>) {
        let mtu = self.mtu as u64;
        let Some(res) = self.resp.reads.get(at) else {
            return;
        };
        let (first, n, span) = (res.first, res.npsn, res.span.clone());
        for k in from..n {
            let opcode = match (k, n) {
                (_, 1) => Opcode::RcRdmaReadResponseOnly,
                (0, _) => Opcode::RcRdmaReadResponseFirst,
                (k, n) if k + 1 == n => Opcode::RcRdmaReadResponseLast,
                _ => Opcode::RcRdmaReadResponseMiddle,
            };
            let mut bth = Bth::new(opcode, self.dest_qpn, first.wrapping_add(k));
            bth.pkey = self.pkey;
            let mut pkt = Packet::new(bth);
            if opcode != Opcode::RcRdmaReadResponseMiddle {
                pkt.aeth = Some(Aeth {
                    syndrome: Syndrome::ACK_UNLIMITED,
                    msn: self.resp.msn & 0x00ff_ffff,
                });
            }
            let offset = u64::from(k) * mtu;
            let len = (span.len() - offset.min(span.len())).min(mtu) as usize;
            ctx.transmit(self.port, self.dest_gid, &pkt, len, |buf| {
                let ok = span.read(offset, buf).is_ok();
                debug_assert!(ok, "read span covers the response");
            });
        }
    }

    /// A request with a PSN already executed: re-ACK, or replay a READ.
    fn rc_duplicate(&mut self, pkt: &Packet<'_>, ctx: &mut Ctx<'_>) {
        let psn = pkt.bth.psn;
        match pkt.bth.opcode.info().map(|i| i.kind) {
            Some(Kind::Send | Kind::RdmaWrite) => {
                // C9-105: acknowledge with the PSN of the last request executed.
                let last = self.resp.epsn.wrapping_add(0x00ff_ffff);
                self.send_aeth(last, Syndrome::ACK_UNLIMITED, ctx);
            }
            Some(Kind::ReadRequest) => {
                let Some(reth) = pkt.reth else { return };
                let hit = self.resp.reads.iter().position(|r| {
                    let d = psn.diff(r.first);
                    d >= 0 && (d as u32) < r.npsn && r.rkey == reth.rkey
                });
                if let Some(at) = hit {
                    let from = psn.diff(self.resp.reads[at].first) as u32;
                    self.send_read_responses(at, from, ctx);
                }
            }
            _ => {}
        }
    }
}
