//! Memory-window binds fenced against rxe's replay of local operations.
//!
//! Linux's rxe (6.1, `drivers/infiniband/sw/rxe/rxe_req.c`) replays local operations on a
//! retry: `req_retry` rewinds the requester to the oldest request not yet completed, and
//! `rxe_requester` runs every request from there again — `req_next_wqe` does not skip the
//! ones already done. A BIND_MW that ran behind a SEND still waiting for its ACK (an ACK
//! timeout, a NAK, an RNR NAK) runs a second time; its window is bound by then, so
//! `rxe_check_bind_mw` refuses it (o10-36.2.2: a type-2 window must be free), the bind
//! completes `IB_WC_MW_BIND_ERR` and the QP goes to error. A host over rdma-core lost its
//! channel this way under load (the interop smoke, 2026-11-29); `tests/device.rs` forces
//! it with RNR NAKs.
//!
//! rxe runs a LOCAL_INV only when every request before it has completed (`rxe_wqe_is_
//! fenced`, "Local invalidate fence ... Make mandatory for the rxe driver"), and its
//! completer retires done local operations at the head of the queue before it handles a
//! timeout or a NAK of a later request. So a run of binds is posted behind a sentinel: a
//! LOCAL_INV of a window of the provider's own (one per QP, over a few bytes of a region of
//! its own, no right granted), then that window's rebind under its next key, then the
//! binds. Each of those runs only when nothing before it awaits an ACK, and is retired
//! before anything after it can be retried: nothing is replayed. The sentinel is first
//! bound by the first request ever posted on the QP, at the head of an empty queue.
//!
//! A run of binds that opens a post on an idle queue — every request posted before retired,
//! its completion polled, nothing unsignaled after it — needs no fence: nothing before it
//! can be retried. Only rxe needs any of this (a NIC executes a bind once); the cost is
//! that a command with windows posted while earlier SENDs await their ACK waits for them,
//! and two more requests on the queue, which is created twice as deep (plus one).
//! Invisible on the wire. The sentinel's requests are unsignaled; a completion of one (a
//! flush, or a failure) is counted and never reaches the consumer.

use crate::ffi::verbs::{Mr, Mw, Pd};
use ib_verbs::mem::MemBlock;
use std::ops::Range;
use std::sync::Arc;

/// rxe's vendor id (`RXE_VENDOR_ID`, `drivers/infiniband/sw/rxe/rxe_param.h`).
pub(crate) const RXE_VENDOR_ID: u32 = 0x00ff_ffff;

/// Work request ids of sentinel requests: this tag in the top 16 bits, the QP number below.
pub(crate) const SENTINEL_TAG: u64 = 0xfe5e;

/// The work request id of QP `qpn`'s sentinel requests.
pub(crate) fn sentinel_wr_id(qpn: u32) -> u64 {
    (SENTINEL_TAG << 48) | u64::from(qpn)
}

/// Whether `wr_id` is a sentinel request's.
pub(crate) fn is_sentinel(wr_id: u64) -> bool {
    wr_id >> 48 == SENTINEL_TAG
}

/// Where the sentinel window is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FenceState {
    /// Never bound: the next post is the QP's first and binds it at the head of the queue.
    Unbound,
    /// Bound under its window's current key.
    Bound,
    /// A post stopped between the sentinel's LOCAL_INV and its rebind: the window is free
    /// but not at the head of the queue, so it cannot fence again; binds go unfenced.
    Broken,
}

/// What goes before a segment's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guard {
    None,
    /// The sentinel's first bind (the QP's first request).
    FirstBind,
    /// LOCAL_INV of the sentinel, then its rebind.
    InvalidateRebind,
}

impl Guard {
    /// Sentinel requests the guard posts.
    pub(crate) fn len(self) -> usize {
        match self {
            Guard::None => 0,
            Guard::FirstBind => 1,
            Guard::InvalidateRebind => 2,
        }
    }

    /// The fence's state after `posted` of the guard's requests went in, from `before`.
    pub(crate) fn after(self, before: FenceState, posted: usize) -> FenceState {
        match (self, posted) {
            (Guard::None, _) | (_, 0) => before,
            (Guard::FirstBind, _) => FenceState::Bound,
            (Guard::InvalidateRebind, 1) => FenceState::Broken,
            (Guard::InvalidateRebind, _) => FenceState::Bound,
        }
    }
}

/// One `ibv_post_send` of a consumer's list: a guard, then the consumer's requests `wrs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) guard: Guard,
    pub(crate) wrs: Range<usize>,
}

/// How a consumer's list of `n` requests (request `i` a bind when `is_bind(i)`) is posted
/// from `state`: a segment starts at every run of binds that does not open the list on an
/// empty queue, and the first post on the QP binds the sentinel first. `idle`: every
/// request posted before has been retired (its completion polled, nothing unsignaled
/// after it), so a run of binds that opens the list needs no fence.
pub(crate) fn plan(
    state: FenceState,
    idle: bool,
    n: usize,
    is_bind: impl Fn(usize) -> bool,
    out: &mut Vec<Segment>,
) {
    out.clear();
    if n == 0 {
        return;
    }
    let mut guard = match state {
        FenceState::Unbound => Guard::FirstBind,
        FenceState::Bound | FenceState::Broken => Guard::None,
    };
    let fences = state != FenceState::Broken;
    let mut start = 0;
    for i in 0..n {
        let opens_run = is_bind(i) && (i == 0 || !is_bind(i - 1));
        // A run that opens the list needs its own fence unless the queue before it is
        // empty: the QP's first post (the sentinel's first bind goes first) or an idle one.
        let needs = fences && opens_run && !(i == 0 && (guard == Guard::FirstBind || idle));
        if needs {
            if i > start {
                out.push(Segment {
                    guard,
                    wrs: start..i,
                });
            }
            guard = Guard::InvalidateRebind;
            start = i;
        }
    }
    out.push(Segment {
        guard,
        wrs: start..n,
    });
}

/// A QP's sentinel: its window, the region the window lies in, and its state.
#[derive(Debug)]
pub(crate) struct Fence {
    pub(crate) state: FenceState,
    pub(crate) mw: Arc<Mw>,
    pub(crate) mr: Arc<Mr>,
    pub(crate) iova: u64,
    pd: Arc<Pd>,
    _block: Arc<MemBlock>,
}

/// Bytes of the sentinel's region; the window opens one of them, with no right.
const REGION: usize = 64;

impl Fence {
    /// A sentinel in `pd`: a small region of its own (local write and window binding) and
    /// a type-2 window.
    pub(crate) fn new(pd: &Arc<Pd>, access: u32) -> std::io::Result<Fence> {
        let block = MemBlock::new(REGION);
        // The region's I/O address is its address: same offset within the page.
        let iova = block.dma_base().as_ptr() as u64;
        let mr = Mr::reg(pd, &block, 0, REGION as u64, iova, access)?;
        let mw = Mw::alloc(pd)?;
        Ok(Fence {
            state: FenceState::Unbound,
            mw: Arc::new(mw),
            mr: Arc::new(mr),
            iova,
            pd: pd.clone(),
            _block: block,
        })
    }

    /// A fresh window for a QP that went back to RESET (the old one's state is unknown:
    /// its requests may have been flushed).
    pub(crate) fn renew(&mut self) -> std::io::Result<()> {
        self.mw = Arc::new(Mw::alloc(&self.pd)?);
        self.state = FenceState::Unbound;
        Ok(())
    }

    /// The key the sentinel's next bind gives its window.
    pub(crate) fn next_key(&self) -> u32 {
        let k = self.mw.rkey();
        (k & !0xff) | (k.wrapping_add(1) & 0xff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(state: FenceState, binds: &[bool]) -> Vec<(Guard, Range<usize>)> {
        segs_idle(state, false, binds)
    }

    fn segs_idle(state: FenceState, idle: bool, binds: &[bool]) -> Vec<(Guard, Range<usize>)> {
        let mut out = Vec::new();
        plan(state, idle, binds.len(), |i| binds[i], &mut out);
        out.into_iter().map(|s| (s.guard, s.wrs)).collect()
    }

    const B: bool = true;
    const S: bool = false;

    #[test]
    fn the_first_post_binds_the_sentinel_at_the_head() {
        assert_eq!(segs(FenceState::Unbound, &[S]), [(Guard::FirstBind, 0..1)]);
        assert_eq!(
            segs(FenceState::Unbound, &[B, B, S]),
            [(Guard::FirstBind, 0..3)],
            "binds that open the QP's first post follow the sentinel on an empty queue"
        );
        assert_eq!(
            segs(FenceState::Unbound, &[S, B, S]),
            [(Guard::FirstBind, 0..1), (Guard::InvalidateRebind, 1..3)]
        );
    }

    #[test]
    fn every_run_of_binds_is_fenced() {
        // The initiator's shape: a command's windows, then its SEND.
        assert_eq!(
            segs(FenceState::Bound, &[B, B, S]),
            [(Guard::InvalidateRebind, 0..3)]
        );
        assert_eq!(segs(FenceState::Bound, &[S, S]), [(Guard::None, 0..2)]);
        assert_eq!(
            segs(FenceState::Bound, &[S, B, S, B, B, S]),
            [
                (Guard::None, 0..1),
                (Guard::InvalidateRebind, 1..3),
                (Guard::InvalidateRebind, 3..6)
            ]
        );
        assert_eq!(segs(FenceState::Bound, &[]), []);
    }

    #[test]
    fn binds_that_open_a_post_on_an_idle_queue_need_no_fence() {
        assert_eq!(
            segs_idle(FenceState::Bound, true, &[B, B, S]),
            [(Guard::None, 0..3)]
        );
        // A later run still follows the list's own SEND.
        assert_eq!(
            segs_idle(FenceState::Bound, true, &[B, S, B, S]),
            [(Guard::None, 0..2), (Guard::InvalidateRebind, 2..4)]
        );
    }

    #[test]
    fn a_broken_fence_posts_as_the_consumer_asked() {
        assert_eq!(segs(FenceState::Broken, &[S, B, S]), [(Guard::None, 0..3)]);
    }

    #[test]
    fn the_state_follows_what_was_posted() {
        use FenceState::*;
        assert_eq!(Guard::FirstBind.after(Unbound, 0), Unbound);
        assert_eq!(Guard::FirstBind.after(Unbound, 1), Bound);
        assert_eq!(Guard::InvalidateRebind.after(Bound, 0), Bound);
        assert_eq!(Guard::InvalidateRebind.after(Bound, 1), Broken);
        assert_eq!(Guard::InvalidateRebind.after(Bound, 2), Bound);
        assert_eq!(Guard::None.after(Broken, 5), Broken);
    }

    #[test]
    fn sentinel_ids_are_apart_from_the_consumers() {
        assert!(is_sentinel(sentinel_wr_id(0x15)));
        // The initiators' ids: small slots, and registration ids with a zero top byte.
        for id in [
            0u64,
            0x1_0000_000e,
            0x00f5_e703_0803_2ce0,
            u64::from(u32::MAX),
        ] {
            assert!(!is_sentinel(id), "{id:#x}");
        }
    }
}
