//! What a QP handler may touch while it runs: the device's memory regions, completion and
//! shared receive queues, and the output queues. Borrowed from the engine for one call.

use super::{CqId, Event, Slab, SrqId, StatsTable, Transmit};
use crate::ids::Gid;
use crate::mr::MrTable;
use crate::time::Time;
use crate::verbs::{Cq, RecvWr, Srq, Wc};
use crate::wire::{IcrcContext, Packet, ROCE_V2_UDP_PORT};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

/// The borrowed device context.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Time,
    pub(crate) mrs: &'a mut MrTable,
    pub(crate) cqs: &'a mut Slab<Cq>,
    pub(crate) srqs: &'a mut Slab<Srq>,
    pub(crate) out: &'a mut VecDeque<Transmit>,
    /// Datagram buffers sent and handed back ([`super::Engine::recycle`]): a packet is
    /// built in one of these when there is one, so the steady state allocates none.
    pub(crate) spare: &'a mut Vec<Vec<u8>>,
    pub(crate) events: &'a mut VecDeque<Event>,
    pub(crate) port_ips: &'a [IpAddr],
    /// Each port's P_Key table.
    pub(crate) pkey_tables: &'a [Vec<crate::ids::PKey>],
    pub(crate) stats: &'a mut StatsTable,
    pub(crate) acks: &'a mut AckBatch,
}

/// ACK coalescing over one receive batch ([`super::Engine::handle_datagrams`]): while
/// `batching`, an RC responder holds its ACK back and lists its QP in `due`; the batch's end
/// sends one ACK per listed QP, the newest.
#[derive(Debug, Default)]
pub(crate) struct AckBatch {
    pub(crate) batching: bool,
    pub(crate) due: Vec<crate::ids::Qpn>,
}

impl Ctx<'_> {
    /// Posts a completion; an overrun or a fired notification becomes an event.
    pub(crate) fn complete(&mut self, cq: CqId, wc: Wc) {
        let Some(q) = self.cqs.get_mut(cq.0) else {
            self.stats.device().lost_completions += 1;
            return;
        };
        if q.push(wc).is_err() {
            self.events.push_back(Event::CqOverrun(cq));
            return;
        }
        if q.take_notification() {
            self.events.push_back(Event::CqNotify(cq));
        }
    }

    /// Queues an asynchronous event.
    pub(crate) fn event(&mut self, e: Event) {
        self.events.push_back(e);
    }

    /// Takes a receive from a shared receive queue.
    pub(crate) fn srq_pop(&mut self, srq: SrqId) -> Option<RecvWr> {
        let (wr, crossed) = self.srqs.get_mut(srq.0)?.pop()?;
        if crossed {
            self.events.push_back(Event::SrqLimit(srq));
        }
        Some(wr)
    }

    /// Builds a packet from port `port` to `dst` with `payload_len` bytes written by `fill`,
    /// and queues it.
    pub(crate) fn transmit(
        &mut self,
        port: u8,
        dst: Gid,
        pkt: &Packet<'_>,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) {
        let Some(&src) = self.port_ips.get(usize::from(port).wrapping_sub(1)) else {
            self.stats.at(port).tx_errors += 1;
            return;
        };
        let dst_ip = dst.to_ip();
        let ctx = IcrcContext::new(src, dst_ip, ROCE_V2_UDP_PORT);
        let mut bytes = self.spare.pop().unwrap_or_default();
        // No clearing: `emit_with` writes every byte of the packet (headers, `fill`'s
        // payload — each `fill` zeroes what it cannot read — pad, ICRC), so a recycled
        // buffer is only grown, never zeroed first.
        bytes.resize(pkt.buffer_len_with(payload_len), 0);
        match pkt.emit_with(&mut bytes, payload_len, fill, &ctx) {
            Ok(n) => {
                bytes.truncate(n);
                self.stats.at(port).tx_packets += 1;
                self.out.push_back(Transmit {
                    port,
                    dst: SocketAddr::new(dst_ip, ROCE_V2_UDP_PORT),
                    bytes,
                });
            }
            Err(_) => self.stats.at(port).tx_errors += 1,
        }
    }
}
