//! A LOCAL_INV flushed by a QP error leaves its region valid: the registration must not free
//! it, and posts it again on the next connection (`take_retries`), after which the key is
//! dead and the region free.

mod registration_common;

use hca::verbs::{SendOp, WcOpcode, WcStatus};
use registration_common::*;
use srp::initiator::registration::{FrmrConfig, Registration, Segment, Strategy};
use srp::initiator::{DataDescriptors, DataDir};

#[test]
fn a_flushed_local_invalidate_is_retried_on_the_new_connection() {
    let mut w = World::new(11);
    let config = FrmrConfig {
        window: 1,
        mrs_per_cmd: 1,
        max_pages: 4,
        ..FrmrConfig::default()
    };
    let frmr = frmr_pool(w.f.hca(w.host.hca), w.host.pd, config);
    let mut reg = Registration::new(Strategy::PerIo(frmr));
    let seg = [Segment::new(&w.data, 2 * PAGE, 2 * PAGE as u32)];
    let m = reg.map(DataDir::Read, &seg).expect("map");
    let DataDescriptors::Direct(d) = m.data else {
        panic!("direct")
    };
    let link = w.link;
    w.host_post(link.host, m.pre_wrs);
    w.settle();
    assert!(w.drain_host().is_empty(), "REG_MR succeeded (unsignaled)");

    // The connection dies (a bad access on it), then the command ends without a response.
    let bad = w.rdma(link, true, d.va() - 1, d.rkey(), 1, 0);
    assert_eq!(bad.status, WcStatus::RemAccessErr);
    let inv = reg.unmap(m.handle, None).expect("unmap");
    assert_eq!(inv.len(), 1);
    w.host_post(link.host, inv);
    w.settle();
    let wcs = w.drain_host();
    assert_eq!(wcs.len(), 1, "{wcs:?}");
    assert_eq!(wcs[0].status, WcStatus::WrFlushErr);
    assert_eq!(reg.handle_send_done(wcs[0].wr_id, wcs[0].status), Ok(true));
    assert_eq!(reg.counts().needs_invalidate, 1);
    assert!(reg.map(DataDir::Read, &seg).is_err(), "not free: busy");

    // Still valid: on a new connection the target could still write into it.
    let probe = w.new_link();
    let wc = w.rdma(probe, true, d.va(), d.rkey(), 16, 0);
    assert_eq!(
        wc.status,
        WcStatus::Success,
        "the region outlived the flush"
    );

    // The reconnect: post the retries first.
    let fresh = w.new_link();
    w.link = fresh;
    let retries = reg.take_retries();
    assert_eq!(retries.len(), 1);
    assert!(matches!(retries[0].op, SendOp::LocalInv(k) if k == d.rkey().0));
    w.host_post(fresh.host, retries);
    w.settle();
    let wcs = w.drain_host();
    assert_eq!(wcs.len(), 1, "{wcs:?}");
    assert_eq!(
        (wcs[0].opcode, wcs[0].status),
        (WcOpcode::LocalInv, WcStatus::Success)
    );
    assert_eq!(reg.handle_send_done(wcs[0].wr_id, wcs[0].status), Ok(true));
    assert_eq!(reg.counts().free, 1);
    w.attack_fails("after the retried LOCAL_INV", true, d.va(), d.rkey(), 16);
}
