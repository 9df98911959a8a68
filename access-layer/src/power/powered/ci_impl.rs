//! The verbs of [`PoweredCa`]: each one straight to the provider in D0, queued otherwise.
#[allow(unused_imports)]
use crate::prelude::*;

use super::{Events, Item, PoweredCa, Replay, Shared, lock, send_opcode};
use crate::power::PowerSwitch;
use crate::verbs::{CaAttr, ChannelInterface, Completion, EventHandler, MrSpec, VerbsError};
use alloc::sync::Arc;
use core::sync::atomic::Ordering;
use ib_verbs::mr::{MrKeys, PdId};
use ib_verbs::qp::state::{QpAttrMask, QpState};
use ib_verbs::qp::{QpAttr, QpInit};
use ib_verbs::wr::{ArmMode, RecvWr, SendWr, Wc, WcOpcode};
use ib_verbs::{CqId, QpId, RcConnect, SrqId};

impl<C: ChannelInterface + PowerSwitch + 'static> ChannelInterface for PoweredCa<C> {
    fn open_ca(&self, on_event: EventHandler) -> Completion<CaAttr> {
        let events = Arc::new(Events {
            user: on_event,
            serial: std::sync::Mutex::new(()),
        });
        *lock(&self.shared.events) = Some(events.clone());
        self.verb(move |s| s.inner.open_ca(Arc::new(move |e| events.deliver(e))))
    }

    /// In D0, the provider's close. While down, every queued request fails first (resource
    /// verbs with [`VerbsError::Closed`], posts as `WrFlushErr` completions), then the
    /// provider closes.
    fn close_ca(&self) -> Completion<()> {
        let s = &self.shared;
        let failed: Vec<Item<C>> = {
            let _gate = s.gate();
            let mut q = lock(&s.queue);
            if s.closed.swap(true, Ordering::AcqRel) {
                return Completion::ready(Err(VerbsError::Closed));
            }
            q.drain(..).collect()
        };
        for item in failed {
            item(Replay::Fail(s, VerbsError::Closed));
        }
        s.inner.close_ca()
    }

    fn query_ca(&self) -> Completion<CaAttr> {
        self.verb(|s| s.inner.query_ca())
    }

    fn alloc_pd(&self) -> Completion<PdId> {
        self.verb(|s| s.inner.alloc_pd())
    }

    fn dealloc_pd(&self, pd: PdId) -> Completion<()> {
        self.verb(move |s| s.inner.dealloc_pd(pd))
    }

    fn reg_mr(&self, pd: PdId, spec: MrSpec) -> Completion<MrKeys> {
        self.verb(move |s| s.inner.reg_mr(pd, spec))
    }

    fn alloc_fast_reg_mr(&self, pd: PdId, max_pages: usize) -> Completion<MrKeys> {
        self.verb(move |s| s.inner.alloc_fast_reg_mr(pd, max_pages))
    }

    fn dereg_mr(&self, keys: MrKeys) -> Completion<()> {
        self.verb(move |s| s.inner.dereg_mr(keys))
    }

    fn create_cq(&self, capacity: usize) -> Completion<CqId> {
        self.verb(move |s| s.inner.create_cq(capacity))
    }

    fn destroy_cq(&self, cq: CqId) -> Completion<()> {
        self.verb(move |s| {
            let c = s.inner.destroy_cq(cq);
            let s = s.clone();
            let (done, out) = Completion::pair();
            c.on_complete(move |r| {
                if r.is_ok() {
                    lock(&s.synthetic).remove(&cq);
                }
                done.complete(r);
            });
            out
        })
    }

    fn create_srq(&self, max_wr: usize) -> Completion<SrqId> {
        self.verb(move |s| s.inner.create_srq(max_wr))
    }

    fn modify_srq_limit(&self, srq: SrqId, limit: usize) -> Completion<()> {
        self.verb(move |s| s.inner.modify_srq_limit(srq, limit))
    }

    fn destroy_srq(&self, srq: SrqId) -> Completion<()> {
        self.verb(move |s| s.inner.destroy_srq(srq))
    }

    fn create_qp(&self, init: QpInit) -> Completion<QpId> {
        self.verb(move |s| s.track(s.inner.create_qp(init), &init))
    }

    fn create_gsi_qp(&self, port: u8, init: QpInit) -> Completion<QpId> {
        self.verb(move |s| s.track(s.inner.create_gsi_qp(port, init), &init))
    }

    fn modify_qp(&self, qp: QpId, attr: QpAttr, mask: QpAttrMask) -> Completion<()> {
        self.verb(move |s| s.inner.modify_qp(qp, attr, mask))
    }

    fn connect_rc(&self, qp: QpId, peer: RcConnect) -> Completion<()> {
        self.verb(move |s| s.inner.connect_rc(qp, peer))
    }

    fn query_qp(&self, qp: QpId) -> Completion<QpState> {
        self.verb(move |s| s.inner.query_qp(qp))
    }

    fn destroy_qp(&self, qp: QpId) -> Completion<()> {
        // The QP stays tracked until it is gone: its flushed requests still need its CQs.
        self.verb(move |s| {
            let c = s.inner.destroy_qp(qp);
            let s = s.clone();
            let (done, out) = Completion::pair();
            c.on_complete(move |r| {
                if r.is_ok() {
                    lock(&s.qps).remove(&qp);
                }
                done.complete(r);
            });
            out
        })
    }

    fn post_send(&self, qp: QpId, wr: SendWr) -> Result<(), VerbsError> {
        self.post(
            wr,
            |inner, wr| inner.post_send(qp, wr),
            |wr| {
                Box::new(move |r| {
                    let wc = [(wr.wr_id, send_opcode(&wr.op))];
                    match r {
                        Replay::Run(s) => {
                            if s.inner.post_send(qp, wr).is_err() {
                                s.flush_here(qp, true, &wc);
                            }
                        }
                        Replay::Fail(s, _) => s.flush_here(qp, true, &wc),
                    }
                })
            },
        )
    }

    fn post_send_list(&self, qp: QpId, wrs: &mut Vec<SendWr>) -> Result<(), VerbsError> {
        // Held for a replay while powered down: the list is moved, not borrowed.
        self.post(
            core::mem::take(wrs),
            |inner, mut wrs| inner.post_send_list(qp, &mut wrs),
            |wrs| {
                Box::new(move |r| {
                    let wcs: Vec<(u64, WcOpcode)> =
                        wrs.iter().map(|w| (w.wr_id, send_opcode(&w.op))).collect();
                    match r {
                        Replay::Run(s) => match s.inner.post_send_list(qp, &mut { wrs }) {
                            Ok(()) => {}
                            // Those before `index` are posted; the rest never will be.
                            Err(VerbsError::PostList { index, .. }) => {
                                s.flush_here(qp, true, wcs.get(index..).unwrap_or_default());
                            }
                            Err(_) => s.flush_here(qp, true, &wcs),
                        },
                        Replay::Fail(s, _) => s.flush_here(qp, true, &wcs),
                    }
                })
            },
        )
    }

    fn post_recv(&self, qp: QpId, wr: RecvWr) -> Result<(), VerbsError> {
        self.post(
            wr,
            |inner, wr| inner.post_recv(qp, wr),
            |wr| {
                Box::new(move |r| {
                    let wc = [(wr.wr_id, WcOpcode::Recv)];
                    match r {
                        Replay::Run(s) => {
                            if s.inner.post_recv(qp, wr).is_err() {
                                s.flush_here(qp, false, &wc);
                            }
                        }
                        Replay::Fail(s, _) => s.flush_here(qp, false, &wc),
                    }
                })
            },
        )
    }

    /// A receive posted to an SRQ while down that the provider refuses on replay has no CQ
    /// to be reported on (the SRQ serves many QPs): it is counted in
    /// [`crate::power::PowerStats::unreported`].
    fn post_srq_recv(&self, srq: SrqId, wr: RecvWr) -> Result<(), VerbsError> {
        self.post(
            wr,
            |inner, wr| inner.post_srq_recv(srq, wr),
            |wr| {
                Box::new(move |r| {
                    let failed = match r {
                        Replay::Run(s) => s.inner.post_srq_recv(srq, wr).is_err().then_some(s),
                        Replay::Fail(s, _) => Some(s),
                    };
                    if let Some(s) = failed {
                        s.counters.unreported.fetch_add(1, Ordering::Relaxed);
                    }
                })
            },
        )
    }

    /// The provider's completions first, then those made here for failed replays.
    fn poll_cq(&self, cq: CqId, max: usize, out: &mut Vec<Wc>) -> Result<usize, VerbsError> {
        let s: &Arc<Shared<C>> = &self.shared;
        let mut n = s.inner.poll_cq(cq, max, out)?;
        if n < max {
            let mut syn = lock(&s.synthetic);
            if let Some(q) = syn.get_mut(&cq) {
                while n < max {
                    let Some(wc) = q.pop_front() else { break };
                    out.push(wc);
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    fn req_notify_cq(&self, cq: CqId, mode: ArmMode) -> Result<(), VerbsError> {
        self.shared.inner.req_notify_cq(cq, mode)
    }
}
