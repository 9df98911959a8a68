//! The channel interface on real software CAs (UDP loopback, 127.0.71.x): a chain of
//! resource verbs done purely asynchronously (completion routines, and `.await`), and an RC
//! SEND/RECV between two CAs whose CQ notifications reach the event handler at dispatch
//! level, where the handler polls and re-arms through the trait.

use access_layer::verbs::{
    ChannelInterface, Completion, EventHandler, MrSpec, SyncCa, VerbsError, in_dispatch,
};
use hca::ca::SoftCa;
use hca::driver::{Hca, HcaConfig};
use ib_verbs::PathMtu;
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKeys, PdId};
use ib_verbs::qp::QpInit;
use ib_verbs::qp::state::QpState;
use ib_verbs::wr::{ArmMode, RecvWr, SendFlags, SendOp, SendWr, Sge, Wc, WcOpcode, WcStatus};
use ib_verbs::{CqId, Event, QpId, RcConnect};
use ib_verbs::{Gid, Guid, Psn, Qpn};
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::pin;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(10);
const IOVA: u64 = 0x1000_0000;
const MEM: usize = 1 << 16;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 71, host))
}

/// A software CA on 127.0.71.`host`:4791, not yet opened.
fn soft_ca(host: u8) -> Arc<SoftCa> {
    let hca = Hca::open(HcaConfig::new(
        Guid(0x7100 | u64::from(host)),
        vec![ip(host)],
    ))
    .unwrap_or_else(|e| panic!("open HCA on {}: {e}", ip(host)));
    Arc::new(SoftCa::new(hca).expect("start the dispatcher"))
}

fn rc_init(pd: PdId, cq: CqId) -> QpInit {
    QpInit::rc(pd, cq, 64, 64)
}

fn mr_spec(mem: &Arc<MemBlock>) -> MrSpec {
    MrSpec {
        block: mem.clone(),
        offset: 0,
        len: MEM as u64,
        iova: IOVA,
        access: Access::LOCAL_WRITE,
    }
}

fn peer(gid_host: u8, qpn: Qpn, sq_psn: u32, rq_psn: u32) -> RcConnect {
    RcConnect {
        access: Access::LOCAL_WRITE,
        dest_gid: Gid::from_ip(ip(gid_host)),
        dest_qpn: qpn,
        path_mtu: PathMtu::Mtu1024,
        sq_psn: Psn::from_wire(sq_psn),
        rq_psn: Psn::from_wire(rq_psn),
        timeout: 12,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: 8,
        max_dest_rd_atomic: 8,
        pkey_index: 0,
        flow_label: 0,
        hop_limit: ib_verbs::RcConnect::HOP_LIMIT,
        traffic_class: 0,
    }
}

/// Continues with `next` when `c` succeeds; reports the failed step otherwise.
fn then<T: Send + 'static, R: Send + 'static>(
    c: Completion<T>,
    step: &'static str,
    report: Sender<Result<R, String>>,
    next: impl FnOnce(T, Sender<Result<R, String>>) + Send + 'static,
) {
    c.on_complete(move |r| match r {
        Ok(v) if in_dispatch() => next(v, report),
        Ok(_) => {
            let _ = report.send(Err(format!("{step}: routine not at dispatch")));
        }
        Err(e) => {
            let _ = report.send(Err(format!("{step}: {e}")));
        }
    });
}

#[test]
fn resource_chain_completes_purely_asynchronously() {
    let ca = soft_ca(4);
    let (tx, rx) = mpsc::channel();
    let mem = MemBlock::new(MEM);
    let c = ca.clone();
    then(ca.open_ca(Arc::new(|_| {})), "open", tx, move |_, tx| {
        then(c.alloc_pd(), "alloc_pd", tx, move |pd, tx| {
            then(c.reg_mr(pd, mr_spec(&mem)), "reg_mr", tx, move |mr, tx| {
                then(c.create_cq(64), "create_cq", tx, move |cq, tx| {
                    then(
                        c.create_qp(rc_init(pd, cq)),
                        "create_qp",
                        tx,
                        move |qp, tx| {
                            let far = peer(5, Qpn::from_wire(0x11), 1, 2);
                            then(c.connect_rc(qp, far), "connect", tx, move |(), tx| {
                                then(c.query_qp(qp), "query_qp", tx, move |state, tx| {
                                    let _ = tx.send(Ok((mr, state)));
                                });
                            });
                        },
                    );
                });
            });
        });
    });
    let (mr, state): (MrKeys, QpState) = rx
        .recv_timeout(DEADLINE)
        .expect("the chain reports")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(state, QpState::Rts);
    assert_eq!(mr.rkey, None, "local access only");
    assert_eq!(ca.routine_panics(), 0);
}

/// A minimal executor: polls on this thread, parks between wake-ups, up to a deadline.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    let end = Instant::now() + DEADLINE;
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        assert!(Instant::now() < end, "future did not complete in time");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

#[test]
fn resource_chain_by_await() {
    let ca = soft_ca(6);
    let mem = MemBlock::new(MEM);
    let state = block_on(async {
        ca.open_ca(Arc::new(|_| {})).await?;
        let pd = ca.alloc_pd().await?;
        ca.reg_mr(pd, mr_spec(&mem)).await?;
        let cq = ca.create_cq(64).await?;
        let qp = ca.create_qp(rc_init(pd, cq)).await?;
        ca.connect_rc(qp, peer(7, Qpn::from_wire(0x11), 1, 2))
            .await?;
        ca.query_qp(qp).await
    });
    assert_eq!(state, Ok::<_, VerbsError>(QpState::Rts));
}

/// One side of the SEND/RECV pair, set up through the blocking wrapper.
struct End {
    ca: Arc<SoftCa>,
    mem: Arc<MemBlock>,
    mr: MrKeys,
    cq: CqId,
    qp: QpId,
}

impl End {
    fn open(host: u8, on_event: impl FnOnce(Weak<SoftCa>) -> EventHandler) -> End {
        let ca = soft_ca(host);
        let sync = SyncCa::new(ca.clone()).with_timeout(DEADLINE);
        sync.open_ca(on_event(Arc::downgrade(&ca))).expect("open");
        let mem = MemBlock::new(MEM);
        let pd = sync.alloc_pd().expect("alloc_pd");
        let mr = sync.reg_mr(pd, mr_spec(&mem)).expect("reg_mr");
        let cq = sync.create_cq(256).expect("create_cq");
        let qp = sync.create_qp(rc_init(pd, cq)).expect("create_qp");
        End {
            ca,
            mem,
            mr,
            cq,
            qp,
        }
    }

    fn qpn(&self) -> Qpn {
        match self.qp {
            QpId::Qp(n) => n,
            QpId::Gsi(_) => Qpn::GSI,
        }
    }

    fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: IOVA + offset,
            len,
            lkey: self.mr.lkey,
        }
    }
}

/// What the receiver's event handler saw for one CQ notification.
#[derive(Debug)]
struct Notified {
    at_dispatch: bool,
    wcs: Vec<Wc>,
}

/// The receiver's handler: on a CQ notification, poll everything, re-arm, poll again (the
/// race-free order), all through the trait at dispatch level.
fn poll_and_rearm(
    tx: Sender<Result<Notified, VerbsError>>,
) -> impl FnOnce(Weak<SoftCa>) -> EventHandler {
    move |ca| {
        Arc::new(move |event| {
            let (Event::CqNotify(cq), Some(ca)) = (event, ca.upgrade()) else {
                return;
            };
            let mut wcs = Vec::new();
            let r = ca
                .poll_cq(cq, usize::MAX, &mut wcs)
                .and_then(|_| ca.req_notify_cq(cq, ArmMode::NextCompletion))
                .and_then(|()| ca.poll_cq(cq, usize::MAX, &mut wcs));
            let at_dispatch = in_dispatch();
            let _ = tx.send(r.map(|_| Notified { at_dispatch, wcs }));
        })
    }
}

#[test]
fn rc_send_recv_through_the_trait_with_notification_at_dispatch() {
    const MSGS: u64 = 3;
    const LEN: u32 = 1000;
    let (tx, rx) = mpsc::channel();
    let a = End::open(2, |_| Arc::new(|_| {}));
    let b = End::open(3, poll_and_rearm(tx));
    let sync_a = SyncCa::new(a.ca.clone()).with_timeout(DEADLINE);
    let sync_b = SyncCa::new(b.ca.clone()).with_timeout(DEADLINE);
    sync_a
        .connect_rc(a.qp, peer(3, b.qpn(), 0x100, 0x200))
        .expect("connect a");
    sync_b
        .connect_rc(b.qp, peer(2, a.qpn(), 0x200, 0x100))
        .expect("connect b");

    b.ca.req_notify_cq(b.cq, ArmMode::NextCompletion)
        .expect("arm");
    for i in 0..MSGS {
        let off = i * u64::from(LEN);
        b.ca.post_recv(
            b.qp,
            RecvWr {
                wr_id: 100 + i,
                sg_list: [b.sge(off, LEN)].into(),
            },
        )
        .expect("post_recv");
        a.mem
            .fill(off as usize, LEN as usize, 0x40 + i as u8)
            .expect("fill");
    }
    let mut sends: Vec<_> = (0..MSGS)
        .map(|i| SendWr {
            wr_id: i,
            op: SendOp::Send,
            sg_list: [a.sge(i * u64::from(LEN), LEN)].into(),
            flags: SendFlags::SIGNALED,
            ud: None,
        })
        .collect();
    a.ca.post_send_list(a.qp, &mut sends)
        .expect("post_send_list");

    // Receives arrive through the notification handler.
    let end = Instant::now() + DEADLINE;
    let mut received = Vec::new();
    while (received.len() as u64) < MSGS {
        let left = end.saturating_duration_since(Instant::now());
        let n = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("only {} receives notified", received.len()))
            .expect("poll and re-arm at dispatch");
        assert!(n.at_dispatch, "event handlers run at dispatch level");
        received.extend(n.wcs);
    }
    for (i, wc) in (0..MSGS).zip(&received) {
        assert_eq!(wc.wr_id, 100 + i);
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.opcode, WcOpcode::Recv);
        assert_eq!(wc.byte_len, LEN);
        let mut got = vec![0u8; LEN as usize];
        b.mem
            .read((i * u64::from(LEN)) as usize, &mut got)
            .expect("read");
        assert!(got.iter().all(|&x| x == 0x40 + i as u8), "message {i}");
    }

    // Send completions, polled through the trait (bounded polling, no notification).
    let mut sent = Vec::new();
    while (sent.len() as u64) < MSGS && Instant::now() < end {
        if a.ca.poll_cq(a.cq, usize::MAX, &mut sent).expect("poll") == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let ids: Vec<u64> = sent.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..MSGS).collect::<Vec<_>>());
    assert!(sent.iter().all(|w| w.status == WcStatus::Success));

    sync_b.close_ca().expect("close b");
    assert_eq!(
        b.ca.post_recv(
            b.qp,
            RecvWr {
                wr_id: 0,
                sg_list: Default::default()
            }
        ),
        Err(VerbsError::Closed)
    );
    assert_eq!(a.ca.routine_panics() + b.ca.routine_panics(), 0);
}
