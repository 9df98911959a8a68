//! The dispatch-context verifier on a real software CA (UDP loopback, 127.0.70.x): a
//! blocking call made from a completion routine is trapped, the asynchronous path from the
//! same routine works, and the blocking wrapper works from an ordinary thread.

use access_layer::verbs::{
    ChannelInterface, EventHandler, MrSpec, SyncCa, VerbsError, in_dispatch,
};
use hca::ca::SoftCa;
use hca::driver::{Hca, HcaConfig};
use ib_verbs::Guid;
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, PdId};
use ib_verbs::qp::QpInit;
use ib_verbs::qp::state::QpState;
use ib_verbs::{CqId, QpId};
use std::any::Any;
use std::net::{IpAddr, Ipv4Addr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(10);

/// A software CA on 127.0.70.`host`:4791, not yet opened.
fn soft_ca(host: u8) -> Arc<SoftCa> {
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 70, host));
    let hca = Hca::open(HcaConfig::new(Guid(0x7000 | u64::from(host)), vec![ip]))
        .unwrap_or_else(|e| panic!("open HCA on {ip}: {e}"));
    Arc::new(SoftCa::new(hca).expect("start the dispatcher"))
}

fn ignore_events() -> EventHandler {
    Arc::new(|_| {})
}

fn rc_init(pd: PdId, cq: CqId) -> QpInit {
    QpInit::rc(pd, cq, 16, 16)
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// What the completion routines saw; asserted on the test thread (a failed assertion
/// inside a routine would only be counted by the dispatcher).
#[derive(Debug)]
struct Seen {
    pd_routine_at_dispatch: bool,
    /// How the blocking `wait` ended: the panic message (debug) or the error (release).
    blocking_wait: Result<String, String>,
    /// How a blocking `SyncCa` verb ended, the same way.
    blocking_sync_verb: Result<String, String>,
    cq_routine_at_dispatch: bool,
    qp: Result<QpId, VerbsError>,
}

/// Runs `f`, which must not return normally at dispatch level: `Ok(message)` if it
/// panicked, `Ok(error text)` if it returned `BlockingAtDispatch`, `Err` otherwise.
fn trapped<T: std::fmt::Debug>(
    f: impl FnOnce() -> Result<T, VerbsError>,
) -> Result<String, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Err(payload) if cfg!(debug_assertions) => Ok(panic_text(payload.as_ref())),
        Ok(Err(e @ VerbsError::BlockingAtDispatch { .. })) if !cfg!(debug_assertions) => {
            Ok(e.to_string())
        }
        Err(payload) => Err(format!(
            "unexpected panic: {}",
            panic_text(payload.as_ref())
        )),
        Ok(r) => Err(format!("not trapped: {r:?}")),
    }
}

#[test]
fn blocking_call_in_a_completion_routine_is_trapped_and_the_async_path_works() {
    let ca = soft_ca(2);
    ca.open_ca(ignore_events()).wait().expect("open");
    let (tx, rx) = mpsc::channel();
    let ca2 = ca.clone();
    ca.alloc_pd().on_complete(move |pd| {
        let pd_routine_at_dispatch = in_dispatch();
        let pd = match pd {
            Ok(pd) => pd,
            Err(e) => panic!("alloc_pd: {e}"),
        };
        // Another verb, and a blocking wait on it: trapped, and the completion survives.
        let cq = ca2.create_cq(64);
        let blocking_wait = trapped(|| cq.wait());
        let blocking_sync_verb = trapped(|| SyncCa::new(ca2.clone()).alloc_pd());
        // The asynchronous path from the same context: a routine on that completion,
        // which starts the next verb.
        let ca3 = ca2.clone();
        cq.on_complete(move |cq| {
            let cq_routine_at_dispatch = in_dispatch();
            let report = move |qp| {
                let _ = tx.send(Seen {
                    pd_routine_at_dispatch,
                    blocking_wait,
                    blocking_sync_verb,
                    cq_routine_at_dispatch,
                    qp,
                });
            };
            match cq {
                Ok(cq) => ca3.create_qp(rc_init(pd, cq)).on_complete(report),
                Err(e) => report(Err(e)),
            }
        });
    });
    let seen = rx
        .recv_timeout(DEADLINE)
        .expect("the asynchronous chain completes");
    assert!(
        seen.pd_routine_at_dispatch,
        "routines run at dispatch level"
    );
    assert_eq!(
        seen.blocking_wait.as_deref(),
        Ok("blocking call `Completion::wait` at dispatch level")
    );
    assert_eq!(
        seen.blocking_sync_verb.as_deref(),
        Ok("blocking call `SyncCa::alloc_pd` at dispatch level")
    );
    assert!(seen.cq_routine_at_dispatch);
    let qp = seen.qp.expect("create_qp from a completion routine");
    assert!(matches!(qp, QpId::Qp(_)), "{qp:?}");
    assert_eq!(ca.query_qp(qp).wait(), Ok(QpState::Reset));
    assert_eq!(
        ca.routine_panics(),
        0,
        "every trap was caught in the routine"
    );
    assert!(
        !in_dispatch(),
        "the test thread never was at dispatch level"
    );
}

#[test]
fn blocking_wrapper_works_from_an_ordinary_thread() {
    let ca = soft_ca(3);
    let sync = SyncCa::new(ca.clone() as Arc<dyn ChannelInterface>);
    // Verbs before open are refused.
    assert_eq!(sync.alloc_pd(), Err(VerbsError::Closed));
    assert_eq!(
        sync.ci().poll_cq(CqId(0), 1, &mut Vec::new()),
        Err(VerbsError::Closed)
    );
    let attr = sync.open_ca(ignore_events()).expect("open");
    assert_eq!(attr.node_guid, Guid(0x7003));
    assert_eq!(attr.ports.len(), 1);
    assert_eq!(attr.ports[0].port, 1);
    assert_eq!(
        attr.ports[0].gid.to_ip(),
        IpAddr::V4(Ipv4Addr::new(127, 0, 70, 3))
    );
    assert_eq!(
        sync.open_ca(ignore_events()),
        Err(VerbsError::Closed),
        "opened once"
    );
    let pd = sync.alloc_pd().expect("alloc_pd");
    let mem = MemBlock::new(1 << 16);
    let spec = MrSpec {
        block: mem,
        offset: 0,
        len: 1 << 16,
        iova: 0x1000_0000,
        access: Access::LOCAL_WRITE,
    };
    let mr = sync.reg_mr(pd, spec).expect("reg_mr");
    let frmr = sync.alloc_fast_reg_mr(pd, 16).expect("alloc_fast_reg_mr");
    let cq = sync.create_cq(64).expect("create_cq");
    let srq = sync.create_srq(16).expect("create_srq");
    sync.modify_srq_limit(srq, 4).expect("modify_srq_limit");
    let qp = sync.create_qp(rc_init(pd, cq)).expect("create_qp");
    assert_eq!(sync.query_qp(qp), Ok(QpState::Reset));
    assert!(
        matches!(sync.destroy_cq(cq), Err(VerbsError::Provider(_))),
        "a CQ in use stays"
    );
    sync.destroy_qp(qp).expect("destroy_qp");
    assert!(matches!(sync.query_qp(qp), Err(VerbsError::Provider(_))));
    sync.destroy_cq(cq).expect("destroy_cq");
    assert_eq!(
        sync.destroy_srq(srq),
        Err(VerbsError::Unsupported {
            verb: "destroy_srq"
        })
    );
    sync.dereg_mr(frmr).expect("dereg fast-reg MR");
    sync.dereg_mr(mr).expect("dereg_mr");
    sync.dealloc_pd(pd).expect("dealloc_pd");
    sync.close_ca().expect("close");
    assert_eq!(sync.alloc_pd(), Err(VerbsError::Closed));
    assert_eq!(sync.close_ca(), Err(VerbsError::Closed), "closed for good");
    assert_eq!(ca.routine_panics(), 0);
}

#[test]
fn close_lets_verbs_already_started_complete() {
    let ca = soft_ca(4);
    ca.open_ca(ignore_events()).wait().expect("open");
    let started: Vec<_> = (0..32).map(|_| ca.alloc_pd()).collect();
    let closed = ca.close_ca();
    let refused = ca.create_cq(8);
    assert_eq!(refused.try_take(), Some(Err(VerbsError::Closed)));
    assert_eq!(closed.wait_timeout(DEADLINE), Ok(()));
    for (i, pd) in started.iter().enumerate() {
        assert!(pd.try_take().is_some_and(|r| r.is_ok()), "verb {i}");
    }
}
