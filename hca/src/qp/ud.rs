//! Unreliable datagram QPs, QP1 (the GSI) among them: one packet per message, no ACKs, a
//! Q_Key check on receive, and a 40-byte GRH area ahead of the payload in every receive
//! buffer (for IPv4 the header sits in its last 20 bytes, as rxe does).

use super::wqe::Sgl;
use super::{Qp, QpError, QpState};
use crate::engine::Ctx;
use crate::ids::{Gid, QKey, Qpn};
use crate::mr::Access;
use crate::verbs::{SendFlags, SendOp, SendWr, Wc, WcOpcode, WcStatus};
use crate::wire::{Bth, Deth, ImmDt, Opcode, Packet};
use std::net::IpAddr;

/// Bytes reserved ahead of every UD receive for the GRH.
pub(crate) const GRH_LEN: usize = ib_verbs::qp::UD_GRH_LEN;

/// The 40-byte GRH area for a datagram from `src` to `dst` whose UDP payload (BTH to ICRC)
/// is `udp_len` bytes: the headers it arrived in, as rxe copies them from the skb. IPv4
/// lengths and checksum are those of the real datagram, because consumers check them
/// (Linux `ib_get_rdma_header_version` believes an IPv4 GRH only if its checksum is right).
fn grh(src: IpAddr, dst: IpAddr, udp_len: usize) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (20 + 8 + udp_len).min(usize::from(u16::MAX)) as u16;
            let h = &mut g[20..];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[6] = 0x40; // DF
            h[8] = 64;
            h[9] = 17;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let check = ipv4_checksum(h);
            h[10..12].copy_from_slice(&check.to_be_bytes());
        }
        _ => {
            let s = Gid::from_ip(src).0;
            let d = Gid::from_ip(dst).0;
            g[0] = 0x60;
            let plen = (8 + udp_len).min(usize::from(u16::MAX)) as u16;
            g[4..6].copy_from_slice(&plen.to_be_bytes());
            g[6] = 17;
            g[7] = 64;
            g[8..24].copy_from_slice(&s);
            g[24..40].copy_from_slice(&d);
        }
    }
    g
}

/// The RFC 791 header checksum of `h` (whose checksum field is zero).
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Qp {
    /// Sends one datagram.
    pub(super) fn ud_post_send(&mut self, wr: SendWr, ctx: &mut Ctx<'_>) -> Result<(), QpError> {
        let Some(dest) = wr.ud else {
            return Err(QpError::BadRequest {
                qpn: self.qpn,
                why: "UD send without a destination",
            });
        };
        let imm = match wr.op {
            SendOp::Send => None,
            SendOp::SendWithImm(imm) => Some(imm),
            _ => {
                return Err(QpError::BadRequest {
                    qpn: self.qpn,
                    why: "UD QPs only SEND",
                });
            }
        };
        let signaled = self.init.sq_sig_all || wr.flags.contains(SendFlags::SIGNALED);
        let fail = |status| Wc::new(wr.wr_id, status, WcOpcode::Send, self.qpn);
        let sgl = match Sgl::resolve(ctx.mrs, self.init.pd, &wr.sg_list, Access::empty()) {
            Ok(s) => s,
            Err(_) => {
                ctx.complete(self.init.send_cq, fail(WcStatus::LocProtErr));
                return Ok(());
            }
        };
        if sgl.len() > self.mtu as u64 {
            ctx.complete(self.init.send_cq, fail(WcStatus::LocLenErr));
            return Ok(());
        }
        let psn = self.req.next_psn;
        self.req.next_psn = psn.wrapping_add(1);
        let opcode = if imm.is_some() {
            Opcode::UdSendOnlyWithImmediate
        } else {
            Opcode::UdSendOnly
        };
        let mut bth = Bth::new(opcode, dest.qpn, psn);
        // QP1 sends on the partition the WR names (a MAD answers on the partition it came
        // on); other UD QPs on their own.
        bth.pkey = if self.qpn == Qpn::GSI {
            let table = ctx.pkey_tables.get(usize::from(self.port).wrapping_sub(1));
            match table.and_then(|t| t.get(usize::from(dest.pkey_index))) {
                Some(&k) => k,
                None => {
                    ctx.complete(self.init.send_cq, fail(WcStatus::LocQpOpErr));
                    return Ok(());
                }
            }
        } else {
            self.pkey
        };
        bth.solicited = wr.flags.contains(SendFlags::SOLICITED);
        let mut pkt = Packet::new(bth);
        // IBTA 10.2.5: a Q_Key with the high bit set means "use the QP's own".
        let qkey = if dest.qkey.0 & 0x8000_0000 != 0 && dest.qkey != QKey::GSI {
            self.qkey
        } else {
            dest.qkey
        };
        pkt.deth = Some(Deth {
            qkey,
            src_qp: self.qpn,
        });
        pkt.imm = imm.map(|imm| ImmDt { imm });
        let len = sgl.len() as usize;
        ctx.transmit(self.port, dest.gid, &pkt, len, |buf| {
            let ok = sgl.read(0, buf).is_ok();
            debug_assert!(ok, "resolved SGL covers the datagram");
            if !ok {
                buf.fill(0); // never another packet's bytes
            }
        });
        if signaled {
            ctx.complete(
                self.init.send_cq,
                Wc::new(wr.wr_id, WcStatus::Success, WcOpcode::Send, self.qpn),
            );
        }
        Ok(())
    }

    /// A datagram for this QP arrived from `src`.
    pub(crate) fn ud_receive(
        &mut self,
        pkt: &Packet<'_>,
        src: IpAddr,
        dst: IpAddr,
        pkey_index: u16,
        ctx: &mut Ctx<'_>,
    ) {
        if !matches!(
            self.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            return;
        }
        let Some(deth) = pkt.deth else { return };
        // QP1's Q_Key is 0x80010000 whatever modify_qp set (rxe check_keys does the same).
        let qkey = if self.qpn == Qpn::GSI {
            QKey::GSI
        } else {
            self.qkey
        };
        if deth.qkey != qkey {
            ctx.stats.at(self.port).qkey_mismatch += 1;
            return;
        }
        let Some(wr) = self.take_recv(ctx) else {
            ctx.stats.at(self.port).no_recv_posted += 1;
            return;
        };
        let mut wc = Wc::new(wr.wr_id, WcStatus::Success, WcOpcode::Recv, self.qpn);
        let total = GRH_LEN + pkt.payload.len();
        match Sgl::resolve(ctx.mrs, self.init.pd, &wr.sg_list, Access::LOCAL_WRITE) {
            Err(_) => wc.status = WcStatus::LocProtErr,
            Ok(sgl) if (total as u64) > sgl.len() => wc.status = WcStatus::LocLenErr,
            Ok(sgl) => {
                let header = grh(src, dst, pkt.buffer_len());
                let ok =
                    sgl.write(0, &header).is_ok() && sgl.write(GRH_LEN as u64, pkt.payload).is_ok();
                if !ok {
                    wc.status = WcStatus::LocProtErr;
                }
            }
        }
        wc.byte_len = total as u32;
        wc.imm = pkt.imm.map(|i| i.imm);
        wc.src_qp = Some(deth.src_qp);
        wc.src_gid = Some(Gid::from_ip(src));
        wc.solicited = pkt.bth.solicited;
        wc.pkey_index = Some(pkey_index);
        ctx.complete(self.init.recv_cq, wc);
    }
}
