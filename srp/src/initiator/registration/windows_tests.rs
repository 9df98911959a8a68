//! The memory-window strategy through [`Registration`]: one window per page run with the
//! direction's right only, bound before the SEND; exactly one invalidation per binding
//! (the target's, or our LOCAL_INV, never both); a flushed LOCAL_INV posted again, any
//! other failure discarded rather than invalidated twice.

use super::{
    Discarded, FrmrWr, MappingKind, RegError, RegionKind, Registration, Segment, Strategy,
    WindowConfig, WindowStrategy,
};
use crate::initiator::{DataDescriptors, DataDir};
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrIndex, MrKey};
use ib_verbs::wr::{SendOp, WcStatus};
use ib_verbs::{Lkey, Rkey};
use std::sync::Arc;

const TAG: u16 = 0xf5e7;
const IOVA: u64 = 0x2000_0000_0000;
const REGION: Lkey = Lkey(0x77_00);

fn windows(block: &Arc<MemBlock>, window: usize, per_cmd: usize) -> Registration {
    let config = WindowConfig {
        window,
        windows_per_cmd: per_cmd,
        wr_id_tag: TAG,
    };
    let mut next = 0x100;
    let s = WindowStrategy::allocate(config, block, REGION, IOVA, || {
        next += 1;
        Ok::<_, &str>(MrKey::new(MrIndex(next), 0))
    })
    .expect("pool");
    Registration::new(Strategy::PerIoWindows(s))
}

/// Two scattered pages (descending, as the port hands a buffer out).
fn scattered(block: &Arc<MemBlock>) -> Vec<Segment> {
    vec![
        Segment::new(block, 5 * 4096, 4096),
        Segment::new(block, 2 * 4096, 4096),
    ]
}

fn binds(m: &super::Mapping) -> Vec<(Rkey, Lkey, u64, u64, Access)> {
    m.pre_wrs
        .iter()
        .map(|w| match w.op {
            SendOp::BindMw {
                rkey,
                region,
                addr,
                len,
                access,
            } => (rkey, region, addr, len, access),
            ref op => panic!("not a bind: {op:?}"),
        })
        .collect()
}

#[test]
fn a_read_binds_one_write_only_window_per_page_run() {
    let block = MemBlock::new(16 * 4096);
    let mut reg = windows(&block, 2, 4);
    let m = reg.map(DataDir::Read, &scattered(&block)).expect("map");
    assert_eq!(m.kind, MappingKind::Windows);
    let b = binds(&m);
    assert_eq!(b.len(), 2);
    for (i, (rkey, region, addr, len, access)) in b.iter().enumerate() {
        assert_eq!(*region, REGION);
        assert_eq!(
            *access,
            Access::REMOTE_WRITE,
            "a read's windows only take writes"
        );
        assert_eq!(*len, 4096);
        assert_eq!(*addr, IOVA + [5, 2][i] * 4096);
        assert_eq!(m.handle.keys()[i], MrKey::from(*rkey));
        assert_eq!(MrKey::from(*rkey).variant(), 1, "a fresh key variant");
    }
    assert!(
        !m.remote_invalidate,
        "two windows: each invalidated locally"
    );
    match &m.data {
        DataDescriptors::Indirect { inline, .. } => {
            assert_eq!(inline.len(), 2);
            assert_eq!(inline[0].rkey(), b[0].0);
            assert_eq!(inline[1].va(), IOVA + 2 * 4096);
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn a_write_binds_read_only_windows_and_contiguous_pages_share_one() {
    let block = MemBlock::new(16 * 4096);
    let mut reg = windows(&block, 2, 4);
    let run = [
        Segment::new(&block, 3 * 4096, 4096),
        Segment::new(&block, 4 * 4096, 4096),
    ];
    let m = reg.map(DataDir::Write, &run).expect("map");
    let b = binds(&m);
    assert_eq!(b.len(), 1, "one run, one window");
    assert_eq!((b[0].3, b[0].4), (8192, Access::REMOTE_READ));
    assert!(
        m.remote_invalidate,
        "one window: the target may invalidate it"
    );
    assert!(matches!(m.data, DataDescriptors::Direct(_)));
}

#[test]
fn the_region_itself_grants_the_target_nothing() {
    assert!(!WindowStrategy::REGION_ACCESS.is_remote());
    assert!(WindowStrategy::REGION_ACCESS.contains(Access::MW_BIND | Access::LOCAL_WRITE));
}

#[test]
fn a_window_the_target_invalidated_is_never_invalidated_again() {
    let block = MemBlock::new(16 * 4096);
    let mut reg = windows(&block, 1, 1);
    let seg = [Segment::new(&block, 0, 512)];
    let m = reg.map(DataDir::Read, &seg).expect("map");
    let key = m.handle.keys()[0];
    let inv = reg.unmap(m.handle, Some(Rkey(key.0))).expect("unmap");
    assert!(
        inv.is_empty(),
        "a LOCAL_INV of a window the target freed: a second invalidation ({inv:?})"
    );
    // Free again at once, under a new key.
    let again = reg.map(DataDir::Read, &seg).expect("free at once");
    assert_eq!(again.handle.keys()[0], key.next_variant());
}

#[test]
fn a_window_not_invalidated_by_the_target_gets_one_local_inv() {
    let block = MemBlock::new(16 * 4096);
    let mut reg = windows(&block, 1, 1);
    let seg = [Segment::new(&block, 0, 512)];
    let m = reg.map(DataDir::Read, &seg).expect("map");
    let key = m.handle.keys()[0];
    // The target named another key (stale, or not ours): ours still needs invalidating.
    let inv = reg
        .unmap(m.handle, Some(Rkey(key.next_variant().0)))
        .expect("unmap");
    assert_eq!(inv.len(), 1);
    assert!(matches!(inv[0].op, SendOp::LocalInv(k) if k == key.0));
    assert!(matches!(
        reg.map(DataDir::Read, &seg),
        Err(RegError::Busy { .. })
    ));
    assert_eq!(
        reg.handle_send_done(inv[0].wr_id, WcStatus::Success),
        Ok(true)
    );
    reg.map(DataDir::Read, &seg)
        .expect("free after the LOCAL_INV");
}

#[test]
fn a_flushed_local_inv_is_posted_again_and_a_failed_one_is_discarded() {
    let block = MemBlock::new(16 * 4096);
    let mut reg = windows(&block, 2, 1);
    let seg = [Segment::new(&block, 0, 512)];
    let a = reg.map(DataDir::Read, &seg).expect("map");
    let b = reg.map(DataDir::Read, &seg).expect("map");
    let (ka, kb) = (a.handle.keys()[0], b.handle.keys()[0]);
    let inv_a = reg.unmap(a.handle, None).expect("unmap");
    let inv_b = reg.unmap(b.handle, None).expect("unmap");
    // Flushed by a QP error: it never ran, so it is posted once more.
    assert_eq!(
        reg.handle_send_done(inv_a[0].wr_id, WcStatus::WrFlushErr),
        Ok(true)
    );
    let retries = reg.take_retries();
    assert_eq!(retries.len(), 1);
    assert!(matches!(retries[0].op, SendOp::LocalInv(k) if k == ka.0));
    // Failed otherwise: the window's state is unknown; it is replaced, not invalidated
    // again.
    assert_eq!(
        reg.handle_send_done(inv_b[0].wr_id, WcStatus::LocProtErr),
        Ok(true)
    );
    assert!(reg.take_retries().is_empty());
    let d: Vec<Discarded> = reg.take_discarded();
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].key, d[0].kind), (kb, RegionKind::Window));
    reg.replace_discarded(d[0].slot, MrKey::new(MrIndex(0x999), 0))
        .expect("replaced");
    reg.map(DataDir::Read, &seg).expect("the fresh window");
}

#[test]
fn a_command_without_a_response_gives_its_windows_up_to_be_deallocated() {
    let block = MemBlock::new(16 * 4096);
    let mut reg = windows(&block, 1, 2);
    let m = reg.map(DataDir::Write, &scattered(&block)).expect("map");
    let keys = m.handle.keys().to_vec();
    reg.discard(m.handle).expect("discard");
    let d = reg.take_discarded();
    assert_eq!(d.iter().map(|d| d.key).collect::<Vec<_>>(), keys);
    assert!(d.iter().all(|d| d.kind == RegionKind::Window));
}

#[test]
fn completions_are_routed_by_tag_and_kind() {
    let k = MrKey::new(MrIndex(0x1234), 7);
    let id = FrmrWr::Bind(k).wr_id(TAG);
    assert_eq!(FrmrWr::from_wr_id(id, TAG), Some(FrmrWr::Bind(k)));
    assert_eq!(FrmrWr::from_wr_id(id, TAG + 1), None);
    let block = MemBlock::new(4096);
    let mut reg = windows(&block, 1, 1);
    // A failed bind is ours (its command fails and is discarded), not a stranger's.
    assert_eq!(reg.handle_send_done(id, WcStatus::MwBindErr), Ok(true));
    assert_eq!(reg.handle_send_done(0x42, WcStatus::Success), Ok(false));
}

#[test]
fn misuse_is_an_error_not_a_panic() {
    let block = MemBlock::new(16 * 4096);
    let other = MemBlock::new(4096);
    let mut reg = windows(&block, 1, 1);
    assert_eq!(
        reg.map(DataDir::Read, &[Segment::new(&other, 0, 512)])
            .map(|m| m.kind),
        Err(RegError::ForeignBlock { index: 0 })
    );
    assert_eq!(
        reg.map(DataDir::Read, &scattered(&block)).map(|m| m.kind),
        Err(RegError::TooFragmented { regions: 2, max: 1 })
    );
    let bad = WindowConfig {
        window: 0,
        windows_per_cmd: 1,
        wr_id_tag: TAG,
    };
    assert!(matches!(bad.windows(), Err(RegError::BadConfig(_))));
    assert!(matches!(
        WindowStrategy::new(
            WindowConfig {
                window: 2,
                windows_per_cmd: 1,
                wr_id_tag: TAG
            },
            &block,
            REGION,
            IOVA,
            vec![MrKey::new(MrIndex(1), 0)]
        ),
        Err(RegError::BadConfig(_))
    ));
}
