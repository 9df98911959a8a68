//! The glue between MADs and one port's QP1, through the channel interface of any provider
//! that gives the access layer QP1 (`ChannelInterface::create_gsi_qp`: the software HCA and
//! the simulator's devices; under rdma-core the kernel owns QP1).
//!
//! [`GsiPort::open`] creates the port's GSI QP (UD, Q_Key 0x80010000) with its own CQ and a
//! registered [`MemBlock`] holding `recv_bufs` receive buffers (40-byte GRH + 256-byte MAD)
//! and `send_bufs` send buffers, brings it to RTS and posts every receive.
//! [`GsiPort::send`] copies a [`MadOut`] into a free send buffer and posts a UD SEND to the
//! peer's QP and Q_Key. [`GsiPort::recv`] polls the CQ: send completions free their buffer;
//! a receive becomes `(MadAddress, MadBuf)` (GRH stripped, source from the completion's
//! `src_gid` / `src_qp`) and its buffer is posted again.
//!
//! Opening takes the resource verbs' blocking form ([`SyncCa`]: a passive-level caller);
//! sending, receiving and arming are the data path's direct calls, allowed at dispatch
//! level.
#[allow(unused_imports)]
use crate::prelude::*;

use super::GsiError;
use crate::mad::{MAD_LEN, MadAddress, MadBuf, MadOut};
use crate::verbs::{ChannelInterface, MrSpec, SyncCa};
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use ib_verbs::ids::{QKey, Qpn};
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKeys};
use ib_verbs::qp::state::{QpAttrMask, QpState, QpType};
use ib_verbs::qp::{QpAttr, QpInit, UD_GRH_LEN};
use ib_verbs::wr::{
    ArmMode, RecvWr, SendFlags, SendOp, SendWr, Sge, UdDest, Wc, WcOpcode, WcStatus,
};
use ib_verbs::{CqId, QpId};

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
pub struct GsiPort {
    ca: Arc<dyn ChannelInterface>,
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

impl core::fmt::Debug for GsiPort {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GsiPort")
            .field("port", &self.port)
            .field("qp", &self.qp)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl GsiPort {
    /// Creates and starts port `port`'s GSI QP on `ca` (opened; the port must not have a
    /// GSI QP yet). Blocks for the resource verbs: passive level only.
    pub fn open(
        ca: Arc<dyn ChannelInterface>,
        port: u8,
        config: GsiPortConfig,
    ) -> Result<GsiPort, GsiError> {
        let sync = SyncCa::new(ca.clone());
        let bufs = config.recv_bufs + config.send_bufs;
        let len = bufs * SLOT;
        let pd = sync.alloc_pd()?;
        let mem = MemBlock::new(len);
        let mr = sync.reg_mr(
            pd,
            MrSpec {
                block: mem.clone(),
                offset: 0,
                len: len as u64,
                iova: IOVA,
                access: Access::LOCAL_WRITE,
            },
        )?;
        let cq = sync.create_cq(bufs)?;
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
        let qp = sync.create_gsi_qp(port, init)?;
        let mut attr = QpAttr {
            state: QpState::Init,
            qkey: QKey::GSI,
            port,
            ..QpAttr::default()
        };
        let mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
        sync.modify_qp(qp, attr, mask | QpAttrMask::QKEY)?;
        attr.state = QpState::Rtr;
        sync.modify_qp(qp, attr, QpAttrMask::STATE)?;
        attr.state = QpState::Rts;
        sync.modify_qp(qp, attr, QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
        let gsi = GsiPort {
            ca,
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
            gsi.post_recv(i)?;
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
    pub fn send(&mut self, out: &MadOut) -> Result<(), GsiError> {
        if out.to.port != self.port {
            return Err(GsiError::WrongPort {
                want: out.to.port,
                have: self.port,
            });
        }
        if self.free_send.is_empty() {
            self.reap()?;
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
        if let Err(err) = self.ca.post_send(self.qp, wr) {
            self.free_send.push(slot);
            return Err(err.into());
        }
        self.stats.sent += 1;
        Ok(())
    }

    /// Arms the port's CQ: the next completion (a MAD received or sent) fires an
    /// [`ib_verbs::Event::CqNotify`] to the CA's event handler.
    pub fn arm(&self) -> Result<(), GsiError> {
        self.ca.req_notify_cq(self.cq, ArmMode::NextCompletion)?;
        Ok(())
    }

    /// The next received MAD and its source, polling the CQ when nothing is queued.
    pub fn recv(&mut self) -> Result<Option<(MadAddress, MadBuf)>, GsiError> {
        // A batch may hold only send completions: keep polling while batches come back
        // full, at most as many batches as the CQ can hold.
        let batches = (self.config.recv_bufs + self.config.send_bufs) / POLL_BATCH + 1;
        for _ in 0..batches {
            if !self.received.is_empty() || self.reap()? < POLL_BATCH {
                break;
            }
        }
        Ok(self.received.pop_front())
    }

    /// Takes up to one batch of completions: frees send buffers, queues received MADs and
    /// reposts their buffers. At most `recv_bufs` MADs can be queued, since a buffer is
    /// reposted only after its MAD is copied out. Returns the completions taken.
    fn reap(&mut self) -> Result<usize, GsiError> {
        self.wcs.clear();
        let polled = self.ca.poll_cq(self.cq, POLL_BATCH, &mut self.wcs)?;
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
                if let Err(err) = self.post_recv(slot) {
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

    fn post_recv(&self, slot: usize) -> Result<(), GsiError> {
        let wr = RecvWr {
            wr_id: slot as u64,
            sg_list: [self.sge(slot * SLOT, RECV_LEN)].into(),
        };
        self.ca.post_recv(self.qp, wr)?;
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
