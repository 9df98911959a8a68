//! [`ChannelVerbs`]: every verb of one target channel, in one place — the channel's
//! registered region, its CQ and RC QP created on the port's channel adapter, the QP
//! connected, receives and send chains posted, completions polled, the CQ armed, and the
//! teardown: the QP drained before anything it may touch is released.
//!
//! Provider-neutral: the calls are the access layer's [`ChannelInterface`], so the same
//! code runs on the software HCA, on an RDMA device through rdma-core and on the
//! simulator's net. Nothing is registered per command (one region per channel, local
//! keys only): what user space over rdma-core can do, and what ib_srpt and SPDK do.
//!
//! The drain, as SCST's srpt and SPDK do it: a connected QP is moved to ERR, then a
//! zero-length signaled RDMA WRITE — the marker — is posted; an ERR QP flushes its work
//! requests in order, so when the marker's completion is polled no work request of the QP
//! remains in the device (a receive would not do: rxe 6.1 never completes a receive posted
//! after ERR), and only then are the QP, the CQ and the region released (Linux
//! ib_srp destroyed a QP with completions pending: fix 7dad6b2e440d). A drain that does
//! not finish within [`DRAIN_LIMIT`] is given up, logged and counted; the release still
//! goes in order (QP, CQ, region), so a device never writes into memory that is gone.

use super::command::WrKind;
use super::memory::{IOVA, Layout};
use access_layer::verbs::{ChannelInterface, MrSpec, SyncCa, VerbsError};
use ib_verbs::ids::{Lkey, Qpn};
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKeys, PdId};
use ib_verbs::qp::state::QpState;
use ib_verbs::qp::{QpAttr, QpInit};
use ib_verbs::wr::{ArmMode, RecvWr, SendFlags, SendOp, SendWr, SgList, Wc, WcStatus};
use ib_verbs::{CqId, QpAttrMask, QpId, RcConnect};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Send work requests a channel's QP holds at once in the daemon (its chains beyond that
/// wait: [`super::send_queue`]).
pub const MAX_SEND_WR: usize = 4096;

/// How long a drain may take before the channel's resources are released without it.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// Drains given up at [`DRAIN_LIMIT`], over the process (a device that never flushes).
static DRAINS_GIVEN_UP: AtomicU64 = AtomicU64::new(0);

/// Drains given up so far (the marker's completion never came within [`DRAIN_LIMIT`]).
pub fn drains_given_up() -> u64 {
    DRAINS_GIVEN_UP.load(Ordering::Relaxed)
}

/// Where a channel's teardown is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Teardown {
    /// Serving (or never connected).
    Serving,
    /// QP to ERR and the marker posted at `since`; waiting for the marker's completion.
    Draining {
        /// When the drain started.
        since: Instant,
    },
    /// The release verbs are queued (they run in order on the provider).
    Released,
}

/// One channel's verbs. See the module doc.
pub struct ChannelVerbs {
    ca: Arc<dyn ChannelInterface>,
    mem: Arc<MemBlock>,
    mr: Option<MrKeys>,
    cq: CqId,
    qp: QpId,
    connected: bool,
    teardown: Teardown,
    /// Set once the provider has run the release verbs.
    released: Arc<AtomicBool>,
    id: u64,
}

impl std::fmt::Debug for ChannelVerbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelVerbs")
            .field("qp", &self.qp)
            .field("teardown", &self.teardown)
            .finish_non_exhaustive()
    }
}

impl ChannelVerbs {
    /// Registers a block laid out as `layout` in `pd` and creates the channel's CQ and RC
    /// QP (in RESET), waiting for each (passive level: the serving loop, as ib_srpt creates
    /// its QP in its CM handler). Whatever was created is released again on error. `id`
    /// names the channel in log lines.
    pub fn create(
        ca: Arc<dyn ChannelInterface>,
        pd: PdId,
        layout: &Layout,
        sq_depth: usize,
        id: u64,
    ) -> Result<ChannelVerbs, VerbsError> {
        let total = layout.total().unwrap_or(0);
        let mem = MemBlock::new(usize::try_from(total).unwrap_or(0));
        let sync = SyncCa::new(ca.clone());
        let spec = MrSpec {
            block: mem.clone(),
            offset: 0,
            len: total,
            iova: IOVA,
            access: Access::LOCAL_WRITE,
        };
        let mr = sync.reg_mr(pd, spec)?;
        let cq = match sync.create_cq(sq_depth + 1 + layout.recvs) {
            Ok(cq) => cq,
            Err(err) => {
                let _ = sync.dereg_mr(mr);
                return Err(err);
            }
        };
        // One more send entry than the chains use: the drain's marker always fits.
        let init = QpInit::rc(pd, cq, sq_depth + 1, layout.recvs);
        let qp = match sync.create_qp(init) {
            Ok(qp) => qp,
            Err(err) => {
                let _ = sync.destroy_cq(cq);
                let _ = sync.dereg_mr(mr);
                return Err(err);
            }
        };
        Ok(ChannelVerbs {
            ca,
            mem,
            mr: Some(mr),
            cq,
            qp,
            connected: false,
            teardown: Teardown::Serving,
            released: Arc::new(AtomicBool::new(false)),
            id,
        })
    }

    /// The QP's number, for the CM's reply.
    pub fn qpn(&self) -> Option<Qpn> {
        match self.qp {
            QpId::Qp(n) => Some(n),
            QpId::Gsi(_) => None,
        }
    }

    /// The channel's registered block.
    pub fn mem(&self) -> &Arc<MemBlock> {
        &self.mem
    }

    /// The region's keys, while registered.
    pub fn mr_keys(&self) -> Option<MrKeys> {
        self.mr
    }

    /// The region's local key (0 once released).
    pub fn lkey(&self) -> Lkey {
        self.mr.map_or(Lkey(0), |m| m.lkey)
    }

    /// Connects the QP to the initiator's, waiting (passive level).
    pub fn connect(&mut self, peer: &RcConnect) -> Result<(), VerbsError> {
        SyncCa::new(self.ca.clone()).connect_rc(self.qp, *peer)?;
        self.connected = true;
        Ok(())
    }

    /// Arms the CQ: its next completion fires a CQ notification to the CA's event handler.
    pub fn arm(&self) {
        if self.teardown != Teardown::Released {
            let _ = self.ca.req_notify_cq(self.cq, ArmMode::NextCompletion);
        }
    }

    /// Moves up to `max` completions into `wcs`.
    pub fn poll(&self, max: usize, wcs: &mut Vec<Wc>) {
        if self.teardown != Teardown::Released {
            let _ = self.ca.poll_cq(self.cq, max, wcs);
        }
    }

    /// Posts a receive.
    pub fn post_recv(&self, wr: RecvWr) -> Result<(), VerbsError> {
        self.ca.post_recv(self.qp, wr)
    }

    /// Posts the chain `wrs` (emptied either way).
    pub fn post(&self, wrs: &mut Vec<SendWr>) -> Result<(), VerbsError> {
        self.ca.post_send_list(self.qp, wrs)
    }

    /// Whether the release verbs have run.
    pub fn released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// Whether the QP is being drained (the channel keeps polling its CQ for the marker).
    pub fn draining(&self) -> bool {
        matches!(self.teardown, Teardown::Draining { .. })
    }

    /// Starts the teardown: a QP that was connected is drained first (see the module
    /// doc); one that never was has nothing in the device and is released at once.
    pub fn start_teardown(&mut self) {
        if self.teardown != Teardown::Serving {
            return;
        }
        if !self.connected {
            return self.release();
        }
        let err = QpAttr {
            state: QpState::Err,
            ..QpAttr::default()
        };
        // Weak: a completion routine queued in the provider that held the CA would keep it
        // (and its device) alive if the provider never ran it (a daemon stopped mid-drain).
        let (ca, qp, id) = (Arc::downgrade(&self.ca), self.qp, self.id);
        // The marker goes only once the QP is in ERR: posted before, it would be sent.
        self.ca
            .modify_qp(self.qp, err, QpAttrMask::STATE)
            .on_complete(move |r| {
                let marker = SendWr {
                    wr_id: WrKind::Drain.encode(),
                    op: SendOp::Write {
                        remote_addr: 0,
                        rkey: ib_verbs::Rkey(0),
                    },
                    sg_list: SgList::default(),
                    flags: SendFlags::SIGNALED,
                    ud: None,
                };
                let Some(ca) = ca.upgrade() else {
                    return;
                };
                let posted = r.and_then(|()| ca.post_send(qp, marker));
                if let Err(e) = posted {
                    // The drain limit releases the channel anyway.
                    tracing::warn!(channel = id, %e, "the QP could not be drained");
                }
            });
        self.teardown = Teardown::Draining {
            since: Instant::now(),
        };
    }

    /// Draining: `wc` was polled from the CQ. Releases once it is the marker; gives up
    /// past [`DRAIN_LIMIT`] (`now`). Whether the channel is released.
    pub fn drained(&mut self, wc: Option<&Wc>, now: Instant) -> bool {
        let Teardown::Draining { since } = self.teardown else {
            return self.teardown == Teardown::Released;
        };
        let marker = wc.is_some_and(|wc| WrKind::decode(wc.wr_id) == Some(WrKind::Drain));
        if marker {
            if let Some(wc) = wc.filter(|wc| wc.status != WcStatus::WrFlushErr) {
                // An ERR QP flushes; anything else is worth a line, not a wait.
                tracing::debug!(channel = self.id, status = ?wc.status, "drain marker");
            }
        } else if now.saturating_duration_since(since) >= DRAIN_LIMIT {
            DRAINS_GIVEN_UP.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                channel = self.id,
                limit = ?DRAIN_LIMIT,
                "the QP's drain did not finish: its resources are released without it"
            );
        } else {
            return false;
        }
        self.release();
        true
    }

    /// Releases the QP (flushing what it still holds), the CQ and the region, by
    /// asynchronous verbs the provider runs in this order; [`ChannelVerbs::released`]
    /// says when they have run.
    pub fn release(&mut self) {
        if self.teardown == Teardown::Released {
            return;
        }
        self.teardown = Teardown::Released;
        let id = self.id;
        let logged = move |what: &'static str| {
            move |r: Result<(), VerbsError>| {
                if let Err(e) = r {
                    tracing::warn!(channel = id, %e, "{what} could not be released");
                }
            }
        };
        self.ca.destroy_qp(self.qp).on_complete(logged("the QP"));
        // Its flushed completions go with it.
        let last = self.ca.destroy_cq(self.cq);
        let last = match self.mr.take() {
            Some(mr) => {
                last.on_complete(logged("the CQ"));
                self.ca.dereg_mr(mr)
            }
            None => last,
        };
        let released = self.released.clone();
        last.on_complete(move |r| {
            logged("the channel's memory")(r);
            released.store(true, Ordering::Release);
        });
    }
}

impl Drop for ChannelVerbs {
    fn drop(&mut self) {
        // Dropped mid-drain (the daemon stopping): the provider's destroy flushes the QP,
        // and the region outlives it (the release runs in order).
        self.release();
    }
}
