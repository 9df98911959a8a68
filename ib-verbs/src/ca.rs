//! Device objects as a consumer names them — completion queues, shared receive queues,
//! queue pairs — the asynchronous events a device reports, and the live-object count a
//! leak check compares.

use crate::ids::Qpn;

/// A completion queue handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CqId(pub u32);

/// A shared receive queue handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrqId(pub u32);

/// A queue pair handle: the QP number, or a port's GSI (every port has its own QP1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QpId {
    /// An ordinary QP.
    Qp(Qpn),
    /// QP1 of a port (1-based).
    Gsi(u8),
}

/// Asynchronous events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// An armed completion queue got a qualifying completion.
    CqNotify(CqId),
    /// A completion queue overflowed; completions were lost.
    CqOverrun(CqId),
    /// A QP went to the error state.
    QpError(Qpn),
    /// A QP in SQD (entered with EN_SQD_ASYNC_NOTIFY) has nothing outstanding.
    SqDrained(Qpn),
    /// A shared receive queue fell below its limit.
    SrqLimit(SrqId),
    /// A port became active.
    PortActive(u8),
    /// A port went down.
    PortDown(u8),
    /// A connection manager of the device has events to poll (a provider whose CM runs
    /// outside the access layer: rdma-core's). The consumer calls its connection
    /// manager's `poll`.
    CmReady,
    /// The device failed or was removed (hot-unplug, a fatal error): every QP is in
    /// error and no verb will succeed again. The access layer's PnP removes the CA.
    DeviceFatal,
}

/// Live objects of a device: what a leak check compares before and after.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// Queue pairs (GSI included).
    pub qps: usize,
    /// Completion queues.
    pub cqs: usize,
    /// Shared receive queues.
    pub srqs: usize,
    /// Registered memory regions (fast-registration ones included).
    pub mrs: usize,
}
