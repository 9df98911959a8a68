//! The channel interface: the seam between the access layer and a verbs provider (IBAL's
//! `ci_interface_t`), in the `ib-verbs` vocabulary. The software HCA (crate `hca`'s `SoftCa`), the
//! rdma-core provider and the simulator's devices implement it; nothing above the access
//! layer names a provider's types.
//!
//! One value is one channel adapter (CA). A consumer opens it with an event handler
//! ([`ChannelInterface::open_ca`]), uses it, and closes it; verbs on a CA that is not open
//! fail with [`VerbsError::Closed`].
//!
//! Resource verbs return a [`Completion`] at once and never complete inside the call.
//! A provider runs them in the order they were called: a verb that uses the result of an
//! earlier one is started from that one's completion routine (or after waiting, at
//! passive level). Data-path verbs are direct calls; they never block, so they are
//! allowed at dispatch level.
#[allow(unused_imports)]
use crate::prelude::*;

use super::{Completion, VerbsError};
use alloc::sync::Arc;
use ib_verbs::PathMtu;
use ib_verbs::ids::{Gid, Guid, Rkey};
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKeys, PdId};
use ib_verbs::qp::state::{QpAttrMask, QpState};
use ib_verbs::qp::{QpAttr, QpInit};
use ib_verbs::wr::{ArmMode, RecvWr, SendWr, Wc};
use ib_verbs::{CqId, Event, QpId, RcConnect, SrqId};

/// An asynchronous event handler (IBAL's `pfn_async_event_cb`): called at dispatch level,
/// one event at a time, in the order the provider produced them; it must not block.
pub type EventHandler = Arc<dyn Fn(Event) + Send + Sync>;

/// What a memory region covers: `len` bytes of `block` from `offset`, seen by the HCA at
/// I/O address `iova`, with rights `access`.
#[derive(Clone, Debug)]
pub struct MrSpec {
    /// The memory.
    pub block: Arc<MemBlock>,
    /// First byte of the region in `block`.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// The region's I/O virtual address.
    pub iova: u64,
    /// Local and remote rights.
    pub access: Access,
}

/// One port of a channel adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// Port number, 1-based.
    pub port: u8,
    /// The port's GID.
    pub gid: Gid,
    /// Whether the port is active.
    pub active: bool,
    /// The active MTU its link allows (as rxe derives it from the netdev), if known: what
    /// an active side offers in its REQ, and a passive side's bound on the REQ's offer.
    pub link_mtu: Option<PathMtu>,
}

/// A channel adapter's attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaAttr {
    /// The node GUID.
    pub node_guid: Guid,
    /// Its ports, port 1 first.
    pub ports: Vec<PortAttr>,
    /// What the device can do that not every provider can.
    pub caps: CaCaps,
}

/// Capabilities that differ between providers: how a consumer can fence remote access to
/// its memory per I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaCaps {
    /// Fast registration work requests (`SendOp::RegMr`, `alloc_fast_reg_mr`): the kernel
    /// and the software HCA have them; user space over rdma-core does not.
    pub fast_reg: bool,
    /// Type-2 memory windows bound and invalidated on the send queue
    /// ([`ChannelInterface::alloc_mw`], `SendOp::BindMw`).
    pub mem_windows: bool,
}

/// What a provider has done: how its consumer used the CA.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaStats {
    /// Resource verbs started (each completed asynchronously).
    pub resource_verbs: u64,
    /// Of those, started at dispatch level (a DPC, a completion routine, a port driver's
    /// StartIo): proof that the consumer's dispatch-level paths use the asynchronous form.
    pub resource_verbs_at_dispatch: u64,
    /// CQ notifications delivered to the event handler.
    pub cq_notifications: u64,
    /// Completion routines or event handlers that panicked (a verifier trip among them).
    pub routine_panics: u64,
    /// Runs of memory-window binds the provider posted behind a fence of its own, for a
    /// device that would otherwise replay them (rdma-core over rxe).
    pub fenced_binds: u64,
    /// Completions of the provider's own requests (such a fence's), never delivered.
    pub own_completions: u64,
}

/// The verbs of one channel adapter. See the module doc for the completion model.
pub trait ChannelInterface: Send + Sync {
    /// Opens the CA for a consumer whose asynchronous events (CQ notifications, QP errors,
    /// port changes) go to `on_event`; completes with the CA's attributes. A CA is opened
    /// once.
    fn open_ca(&self, on_event: EventHandler) -> Completion<CaAttr>;

    /// Closes the CA: new verbs fail at once, verbs already started complete, then the
    /// event handler is dropped and this completes. Final.
    fn close_ca(&self) -> Completion<()>;

    /// The CA's current attributes (port states change).
    fn query_ca(&self) -> Completion<CaAttr>;

    /// Allocates a protection domain.
    fn alloc_pd(&self) -> Completion<PdId>;

    /// Frees a protection domain.
    fn dealloc_pd(&self, pd: PdId) -> Completion<()>;

    /// Registers memory in `pd`.
    fn reg_mr(&self, pd: PdId, spec: MrSpec) -> Completion<MrKeys>;

    /// Allocates a fast-registration region of up to `max_pages` pages, mapped later by
    /// REG_MR work requests.
    fn alloc_fast_reg_mr(&self, pd: PdId, max_pages: usize) -> Completion<MrKeys>;

    /// Deregisters a region.
    fn dereg_mr(&self, keys: MrKeys) -> Completion<()>;

    /// Allocates a type-2 memory window in `pd` (bound later by `SendOp::BindMw` on a QP
    /// of the same PD); completes with its initial R_Key. Providers without windows
    /// ([`CaCaps::mem_windows`] false) refuse.
    fn alloc_mw(&self, pd: PdId) -> Completion<Rkey> {
        let _ = pd;
        Completion::ready(Err(VerbsError::Unsupported { verb: "alloc_mw" }))
    }

    /// Frees a memory window (named by any of its R_Keys).
    fn dealloc_mw(&self, rkey: Rkey) -> Completion<()> {
        let _ = rkey;
        Completion::ready(Err(VerbsError::Unsupported { verb: "dealloc_mw" }))
    }

    /// Creates a completion queue for `capacity` completions.
    fn create_cq(&self, capacity: usize) -> Completion<CqId>;

    /// Destroys a completion queue no QP uses.
    fn destroy_cq(&self, cq: CqId) -> Completion<()>;

    /// Creates a shared receive queue of `max_wr` receives.
    fn create_srq(&self, max_wr: usize) -> Completion<SrqId>;

    /// Arms the SRQ limit event: fires once when fewer than `limit` receives remain.
    fn modify_srq_limit(&self, srq: SrqId, limit: usize) -> Completion<()>;

    /// Destroys a shared receive queue.
    fn destroy_srq(&self, srq: SrqId) -> Completion<()>;

    /// Creates a QP (in RESET).
    fn create_qp(&self, init: QpInit) -> Completion<QpId>;

    /// Creates port `port`'s GSI QP (QP1).
    fn create_gsi_qp(&self, port: u8, init: QpInit) -> Completion<QpId>;

    /// Modifies a QP's state and the attributes named by `mask`.
    fn modify_qp(&self, qp: QpId, attr: QpAttr, mask: QpAttrMask) -> Completion<()>;

    /// Brings an RC QP from RESET to RTS, connected to `peer` (the CM's three modifies).
    fn connect_rc(&self, qp: QpId, peer: RcConnect) -> Completion<()>;

    /// A QP's current state.
    fn query_qp(&self, qp: QpId) -> Completion<QpState>;

    /// Destroys a QP; its outstanding work requests are flushed to its CQs first.
    fn destroy_qp(&self, qp: QpId) -> Completion<()>;

    /// Posts a send work request.
    fn post_send(&self, qp: QpId, wr: SendWr) -> Result<(), VerbsError>;

    /// Posts a chain of send work requests, emptying `wrs` (the caller keeps the list's
    /// memory for the next chain); on an error, those before the refused one
    /// ([`VerbsError::PostList`] names it) stay posted and the rest are dropped.
    fn post_send_list(&self, qp: QpId, wrs: &mut Vec<SendWr>) -> Result<(), VerbsError>;

    /// Posts a receive work request.
    fn post_recv(&self, qp: QpId, wr: RecvWr) -> Result<(), VerbsError>;

    /// Posts a receive to a shared receive queue.
    fn post_srq_recv(&self, srq: SrqId, wr: RecvWr) -> Result<(), VerbsError>;

    /// Moves up to `max` completions, oldest first, into `out`; returns how many.
    fn poll_cq(&self, cq: CqId, max: usize, out: &mut Vec<Wc>) -> Result<usize, VerbsError>;

    /// Arms the CQ's next notification ([`Event::CqNotify`] to the event handler).
    fn req_notify_cq(&self, cq: CqId, mode: ArmMode) -> Result<(), VerbsError>;

    /// What the consumer has done with this CA so far (verbs started, at dispatch level
    /// among them; notifications; routines that panicked). Providers that do not count
    /// report zeros.
    fn stats(&self) -> CaStats {
        CaStats::default()
    }

    /// Runs the verbs queued so far on the caller's thread, if the provider has no
    /// dispatcher of its own (a CA on a simulated net: a blocking caller runs the queue
    /// before it waits, as nothing else would); how many ran. Providers with a dispatcher
    /// thread do nothing here.
    fn run_queued(&self) -> usize {
        0
    }
}
