//! [`SyncCa`]: the blocking wrapper over any [`ChannelInterface`], for threads that may
//! block (daemon start-up, management commands, tests). Each resource verb starts the
//! asynchronous verb and waits for its completion, up to a timeout.
//!
//! Every call asks the [`verifier`] first, before the verb starts: at dispatch level it
//! trips (a panic in debug builds; [`VerbsError::BlockingAtDispatch`] in release, with
//! nothing started, so nothing leaks).

use super::ci::{CaAttr, ChannelInterface, EventHandler, MrSpec};
use super::{Completion, VerbsError, verifier};
use alloc::sync::Arc;
use core::time::Duration;
use ib_verbs::mr::{MrKeys, PdId};
use ib_verbs::qp::state::{QpAttrMask, QpState};
use ib_verbs::qp::{QpAttr, QpInit};
use ib_verbs::{CqId, QpId, RcConnect, Rkey, SrqId};

/// Blocking verbs over a channel interface `C` (see the module doc). The data path needs
/// no wrapper: it is [`SyncCa::ci`]'s direct calls.
pub struct SyncCa<C: ?Sized = dyn ChannelInterface> {
    ci: Arc<C>,
    timeout: Duration,
}

impl<C: ?Sized> core::fmt::Debug for SyncCa<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SyncCa")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<C: ?Sized> Clone for SyncCa<C> {
    fn clone(&self) -> Self {
        SyncCa {
            ci: self.ci.clone(),
            timeout: self.timeout,
        }
    }
}

impl<C: ChannelInterface + ?Sized> SyncCa<C> {
    /// How long a verb may take before [`VerbsError::TimedOut`], unless set otherwise.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// Blocking verbs over `ci`.
    pub fn new(ci: Arc<C>) -> Self {
        SyncCa {
            ci,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// The same, giving up on a verb after `timeout` (the verb itself goes on; its result
    /// is dropped).
    pub fn with_timeout(self, timeout: Duration) -> Self {
        SyncCa { timeout, ..self }
    }

    /// The channel interface, for the data path and the asynchronous verbs.
    pub fn ci(&self) -> &Arc<C> {
        &self.ci
    }

    /// Checks the context, starts the verb, waits.
    fn run<T: Send + 'static>(
        &self,
        call: &'static str,
        verb: impl FnOnce(&C) -> Completion<T>,
    ) -> Result<T, VerbsError> {
        verifier::may_block(call)?;
        let c = verb(&self.ci);
        self.ci.run_queued();
        c.wait_timeout(self.timeout)
    }

    /// [`ChannelInterface::open_ca`], waiting.
    pub fn open_ca(&self, on_event: EventHandler) -> Result<CaAttr, VerbsError> {
        self.run("SyncCa::open_ca", |ci| ci.open_ca(on_event))
    }

    /// [`ChannelInterface::close_ca`], waiting.
    pub fn close_ca(&self) -> Result<(), VerbsError> {
        self.run("SyncCa::close_ca", |ci| ci.close_ca())
    }

    /// [`ChannelInterface::query_ca`], waiting.
    pub fn query_ca(&self) -> Result<CaAttr, VerbsError> {
        self.run("SyncCa::query_ca", |ci| ci.query_ca())
    }

    /// [`ChannelInterface::alloc_pd`], waiting.
    pub fn alloc_pd(&self) -> Result<PdId, VerbsError> {
        self.run("SyncCa::alloc_pd", |ci| ci.alloc_pd())
    }

    /// [`ChannelInterface::dealloc_pd`], waiting.
    pub fn dealloc_pd(&self, pd: PdId) -> Result<(), VerbsError> {
        self.run("SyncCa::dealloc_pd", |ci| ci.dealloc_pd(pd))
    }

    /// [`ChannelInterface::reg_mr`], waiting.
    pub fn reg_mr(&self, pd: PdId, spec: MrSpec) -> Result<MrKeys, VerbsError> {
        self.run("SyncCa::reg_mr", |ci| ci.reg_mr(pd, spec))
    }

    /// [`ChannelInterface::alloc_fast_reg_mr`], waiting.
    pub fn alloc_fast_reg_mr(&self, pd: PdId, max_pages: usize) -> Result<MrKeys, VerbsError> {
        self.run("SyncCa::alloc_fast_reg_mr", |ci| {
            ci.alloc_fast_reg_mr(pd, max_pages)
        })
    }

    /// [`ChannelInterface::alloc_mw`], waiting.
    pub fn alloc_mw(&self, pd: PdId) -> Result<Rkey, VerbsError> {
        self.run("SyncCa::alloc_mw", |ci| ci.alloc_mw(pd))
    }

    /// [`ChannelInterface::dealloc_mw`], waiting.
    pub fn dealloc_mw(&self, rkey: Rkey) -> Result<(), VerbsError> {
        self.run("SyncCa::dealloc_mw", |ci| ci.dealloc_mw(rkey))
    }

    /// [`ChannelInterface::dereg_mr`], waiting.
    pub fn dereg_mr(&self, keys: MrKeys) -> Result<(), VerbsError> {
        self.run("SyncCa::dereg_mr", |ci| ci.dereg_mr(keys))
    }

    /// [`ChannelInterface::create_cq`], waiting.
    pub fn create_cq(&self, capacity: usize) -> Result<CqId, VerbsError> {
        self.run("SyncCa::create_cq", |ci| ci.create_cq(capacity))
    }

    /// [`ChannelInterface::destroy_cq`], waiting.
    pub fn destroy_cq(&self, cq: CqId) -> Result<(), VerbsError> {
        self.run("SyncCa::destroy_cq", |ci| ci.destroy_cq(cq))
    }

    /// [`ChannelInterface::create_srq`], waiting.
    pub fn create_srq(&self, max_wr: usize) -> Result<SrqId, VerbsError> {
        self.run("SyncCa::create_srq", |ci| ci.create_srq(max_wr))
    }

    /// [`ChannelInterface::modify_srq_limit`], waiting.
    pub fn modify_srq_limit(&self, srq: SrqId, limit: usize) -> Result<(), VerbsError> {
        self.run("SyncCa::modify_srq_limit", |ci| {
            ci.modify_srq_limit(srq, limit)
        })
    }

    /// [`ChannelInterface::destroy_srq`], waiting.
    pub fn destroy_srq(&self, srq: SrqId) -> Result<(), VerbsError> {
        self.run("SyncCa::destroy_srq", |ci| ci.destroy_srq(srq))
    }

    /// [`ChannelInterface::create_qp`], waiting.
    pub fn create_qp(&self, init: QpInit) -> Result<QpId, VerbsError> {
        self.run("SyncCa::create_qp", |ci| ci.create_qp(init))
    }

    /// [`ChannelInterface::create_gsi_qp`], waiting.
    pub fn create_gsi_qp(&self, port: u8, init: QpInit) -> Result<QpId, VerbsError> {
        self.run("SyncCa::create_gsi_qp", |ci| ci.create_gsi_qp(port, init))
    }

    /// [`ChannelInterface::modify_qp`], waiting.
    pub fn modify_qp(&self, qp: QpId, attr: QpAttr, mask: QpAttrMask) -> Result<(), VerbsError> {
        self.run("SyncCa::modify_qp", |ci| ci.modify_qp(qp, attr, mask))
    }

    /// [`ChannelInterface::connect_rc`], waiting.
    pub fn connect_rc(&self, qp: QpId, peer: RcConnect) -> Result<(), VerbsError> {
        self.run("SyncCa::connect_rc", |ci| ci.connect_rc(qp, peer))
    }

    /// [`ChannelInterface::query_qp`], waiting.
    pub fn query_qp(&self, qp: QpId) -> Result<QpState, VerbsError> {
        self.run("SyncCa::query_qp", |ci| ci.query_qp(qp))
    }

    /// [`ChannelInterface::destroy_qp`], waiting.
    pub fn destroy_qp(&self, qp: QpId) -> Result<(), VerbsError> {
        self.run("SyncCa::destroy_qp", |ci| ci.destroy_qp(qp))
    }
}
