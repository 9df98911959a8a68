//! The glue between MADs and one port's QP1 on a [`hca::engine::Engine`].
//!
//! [`GsiPort::open`] creates the port's GSI QP (UD, Q_Key 0x80010000) with its own CQ and a
//! registered [`MemBlock`] holding `recv_bufs` receive buffers (40-byte GRH + 256-byte MAD)
//! and `send_bufs` send buffers, brings it to RTS and posts every receive.
//! [`GsiPort::send`] copies a [`MadOut`] into a free send buffer and posts a UD SEND to the
//! peer's QP and Q_Key. [`GsiPort::recv`] polls the CQ: send completions free their buffer;
//! a receive becomes `(MadAddress, MadBuf)` (GRH stripped, source from the completion's
//! `src_gid` / `src_qp`) and its buffer is posted again.
//!
//! Every function takes `&mut Engine` and the time, so the same code runs in the simulator
//! (`fabric.hca(i)`, `fabric.now()`) and under the UDP driver (`hca.with(|e, now| ..)`).

use super::GsiError;
use crate::mad::{MAD_LEN, MadAddress, MadBuf, MadOut};
use hca::engine::{CqId, Engine, QpId};
use hca::ids::{QKey, Qpn};
use hca::mem::MemBlock;
use hca::mr::{Access, MrKeys};
use hca::qp::state::{QpAttrMask, QpState, QpType};
use hca::qp::{QpAttr, QpInit, UD_GRH_LEN};
use hca::time::Time;
use hca::verbs::{RecvWr, SendFlags, SendOp, SendWr, Sge, UdDest, Wc, WcOpcode, WcStatus};
use std::collections::VecDeque;
use std::sync::Arc;

/// Bytes a receive needs: the GRH area and a MAD.
const RECV_LEN: usize = UD_GRH_LEN + MAD_LEN;
/// Each buffer starts on this boundary in the block.
const SLOT: usize = 512;
/// I/O address of the block.
const IOVA: u64 = 0x6751_0000_0000;
/// Send completions carry this bit in their `wr_id`; receives do not.
const SEND_TAG: u64 = 1 << 63;
/// Completions taken from the CQ per call.
const POLL_BATCH: usize = 64;

/// Buffer counts of a port's GSI QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GsiPortConfig {
    /// Receive buffers kept posted.
    pub recv_bufs: usize,
    /// Send buffers (MADs in flight on the send queue at once).
    pub send_bufs: usize,
}

impl Default for GsiPortConfig {
    fn default() -> Self {
        GsiPortConfig {
            recv_bufs: 64,
            send_bufs: 64,
        }
    }
}

/// Counters of the glue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GsiPortStats {
    /// MADs posted for sending.
    pub sent: u64,
    /// MADs received.
    pub received: u64,
    /// Send completions with an error status.
    pub send_errors: u64,
    /// Receives dropped: error status, too short, or no source address.
    pub recv_dropped: u64,
}

/// One port's QP1 and its buffers.
#[derive(Debug)]
pub struct GsiPort {
    port: u8,
    qp: QpId,
    cq: CqId,
    mem: Arc<MemBlock>,
    mr: MrKeys,
    config: GsiPortConfig,
    free_send: Vec<usize>,
    received: VecDeque<(MadAddress, MadBuf)>,
    wcs: Vec<Wc>,
    stats: GsiPortStats,
}

impl GsiPort {
    /// Creates and starts port `port`'s GSI QP (the port must not have one yet).
    pub fn open(
        e: &mut Engine,
        now: Time,
        port: u8,
        config: GsiPortConfig,
    ) -> Result<GsiPort, GsiError> {
        let bufs = config.recv_bufs + config.send_bufs;
        let len = bufs * SLOT;
        let pd = e.alloc_pd();
        let mem = MemBlock::new(len);
        let mr = e.reg_mr(pd, mem.clone(), 0, len as u64, IOVA, Access::LOCAL_WRITE)?;
        let cq = e.create_cq(bufs);
        let init = QpInit {
            qp_type: QpType::Ud,
            pd,
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            max_send_wr: config.send_bufs,
            max_recv_wr: config.recv_bufs,
            max_sge: 1,
            sq_sig_all: true,
        };
        let qp = e.create_gsi_qp(port, init)?;
        let mut attr = QpAttr {
            state: QpState::Init,
            qkey: QKey::GSI,
            port,
            ..QpAttr::default()
        };
        let mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
        e.modify_qp(now, qp, &attr, mask | QpAttrMask::QKEY)?;
        attr.state = QpState::Rtr;
        e.modify_qp(now, qp, &attr, QpAttrMask::STATE)?;
        attr.state = QpState::Rts;
        e.modify_qp(now, qp, &attr, QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
        let gsi = GsiPort {
            port,
            qp,
            cq,
            mem,
            mr,
            config,
            free_send: (0..config.send_bufs).rev().collect(),
            received: VecDeque::new(),
            wcs: Vec::with_capacity(POLL_BATCH),
            stats: GsiPortStats::default(),
        };
        for i in 0..config.recv_bufs {
            gsi.post_recv(e, now, i)?;
        }
        Ok(gsi)
    }

    /// The port (1-based).
    pub fn port(&self) -> u8 {
        self.port
    }

    /// Counters.
    pub fn stats(&self) -> GsiPortStats {
        self.stats
    }

    /// Sends `out` as a UD SEND to `out.to` (QP and Q_Key as it names them: QP1 and
    /// 0x80010000 for a GSI peer). Fails if `out` names another port or every send buffer is
    /// in flight even after reaping completions.
    pub fn send(&mut self, e: &mut Engine, now: Time, out: &MadOut) -> Result<(), GsiError> {
        if out.to.port != self.port {
            return Err(GsiError::WrongPort {
                want: out.to.port,
                have: self.port,
            });
        }
        if self.free_send.is_empty() {
            self.reap(e, now)?;
        }
        let slot = self.free_send.pop().ok_or(GsiError::SendBuffersBusy {
            capacity: self.config.send_bufs,
        })?;
        let offset = (self.config.recv_bufs + slot) * SLOT;
        if let Err(err) = self.mem.write(offset, out.mad.as_bytes()) {
            self.free_send.push(slot);
            return Err(err.into());
        }
        let wr = SendWr {
            wr_id: SEND_TAG | slot as u64,
            op: SendOp::Send,
            sg_list: [self.sge(offset, MAD_LEN)].into(),
            flags: SendFlags::SIGNALED,
            ud: Some(UdDest {
                gid: out.to.gid,
                qpn: out.to.qpn,
                qkey: out.to.qkey,
                pkey_index: out.to.pkey_index,
            }),
        };
        if let Err(err) = e.post_send(now, self.qp, wr) {
            self.free_send.push(slot);
            return Err(err.into());
        }
        self.stats.sent += 1;
        Ok(())
    }

    /// Arms the port's CQ: the next completion (a MAD received or sent) fires a
    /// [`hca::engine::Event::CqNotify`] to the device's event handler.
    pub fn arm(&self, e: &mut Engine) -> Result<(), GsiError> {
        e.req_notify_cq(self.cq, hca::verbs::ArmMode::NextCompletion)?;
        Ok(())
    }

    /// The next received MAD and its source, polling the CQ when nothing is queued.
    pub fn recv(
        &mut self,
        e: &mut Engine,
        now: Time,
    ) -> Result<Option<(MadAddress, MadBuf)>, GsiError> {
        // A batch may hold only send completions: keep polling while batches come back
        // full, at most as many batches as the CQ can hold.
        let batches = (self.config.recv_bufs + self.config.send_bufs) / POLL_BATCH + 1;
        for _ in 0..batches {
            if !self.received.is_empty() || self.reap(e, now)? < POLL_BATCH {
                break;
            }
        }
        Ok(self.received.pop_front())
    }

    /// Takes up to one batch of completions: frees send buffers, queues received MADs and
    /// reposts their buffers. At most `recv_bufs` MADs can be queued, since a buffer is
    /// reposted only after its MAD is copied out. Returns the completions taken.
    fn reap(&mut self, e: &mut Engine, now: Time) -> Result<usize, GsiError> {
        self.wcs.clear();
        let polled = e.poll_cq(self.cq, POLL_BATCH, &mut self.wcs)?;
        let wcs = core::mem::take(&mut self.wcs);
        let mut result = Ok(polled);
        for wc in &wcs {
            if wc.wr_id & SEND_TAG != 0 {
                if wc.status != WcStatus::Success {
                    self.stats.send_errors += 1;
                }
                self.free_send.push((wc.wr_id & !SEND_TAG) as usize);
                continue;
            }
            let slot = wc.wr_id as usize;
            match self.take_mad(wc, slot) {
                Some(m) => {
                    self.stats.received += 1;
                    self.received.push_back(m);
                }
                None => self.stats.recv_dropped += 1,
            }
            // A flushed receive (QP in error) cannot be posted again: report, go on.
            if wc.status == WcStatus::Success {
                if let Err(err) = self.post_recv(e, now, slot) {
                    result = Err(err);
                }
            }
        }
        self.wcs = wcs;
        result
    }

    fn take_mad(&self, wc: &Wc, slot: usize) -> Option<(MadAddress, MadBuf)> {
        if wc.status != WcStatus::Success
            || wc.opcode != WcOpcode::Recv
            || (wc.byte_len as usize) < RECV_LEN
        {
            return None;
        }
        let mut mad = MadBuf::zeroed();
        self.mem.read(slot * SLOT + UD_GRH_LEN, &mut mad.0).ok()?;
        let from = MadAddress {
            port: self.port,
            gid: wc.src_gid?,
            qpn: wc.src_qp.unwrap_or(Qpn::GSI),
            qkey: QKey::GSI,
            pkey_index: wc.pkey_index.unwrap_or(0),
        };
        Some((from, mad))
    }

    fn post_recv(&self, e: &mut Engine, now: Time, slot: usize) -> Result<(), GsiError> {
        let wr = RecvWr {
            wr_id: slot as u64,
            sg_list: [self.sge(slot * SLOT, RECV_LEN)].into(),
        };
        e.post_recv(now, self.qp, wr)?;
        Ok(())
    }

    fn sge(&self, offset: usize, len: usize) -> Sge {
        Sge {
            addr: IOVA + offset as u64,
            len: len as u32,
            lkey: self.mr.lkey,
        }
    }
}
