//! Fast registration (FRWR) on the simulated fabric: REG_MR maps scattered pages under a new
//! key, the peer reaches them with RDMA, and invalidation (LOCAL_INV by the owner, or the
//! peer's SEND_WITH_INV) revokes the key so a later access fails with a remote access error.
//! Re-registration must use a new key variant (`ib_inc_rkey`); the old variant stays dead.

mod common;

use common::*;
use hca::ids::Rkey;
use hca::mr::{Access, MrKey};
use hca::qp::state::QpState;
use hca::sim::{Fabric, FaultConfig};
use hca::verbs::{FastRegPages, SendFlags, SendOp, SendWr, WcOpcode, WcStatus};

const PAGE: u64 = 4096;
/// Where B's fast-registered regions appear to A.
const FR_IOVA: u64 = 0x7000_0064;
/// Bytes of each registration: three pages minus the first-byte offset and 50 spare bytes.
const FR_LEN: u64 = 3 * PAGE - 100 - 50;

/// A three-page mapping of B's memory at `base`, pages deliberately out of address order,
/// the region starting 100 bytes into the first page.
fn page_list(b: &Node, base: u64) -> FastRegPages {
    let offsets = [base + 2 * PAGE, base, base + 5 * PAGE];
    FastRegPages {
        pages: offsets.iter().map(|&o| (b.mem.clone(), o)).collect(),
        page_size: PAGE,
        first_byte_offset: 100,
        iova: FR_IOVA,
        length: FR_LEN,
    }
}

/// The region's bytes `[off, off + len)` as they sit in the pages.
fn region_bytes(pages: &FastRegPages, off: u64, len: u64) -> Vec<u8> {
    (off..off + len)
        .map(|x| {
            let at = pages.first_byte_offset + x;
            let (block, start) = &pages.pages[(at / PAGE) as usize];
            read(block, start + at % PAGE, 1)[0]
        })
        .collect()
}

fn reg_wr(wr_id: u64, key: MrKey, pages: FastRegPages) -> SendWr {
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    send_wr(
        wr_id,
        SendOp::RegMr {
            key: key.0,
            access,
            pages,
        },
        vec![],
    )
}

/// A pair and a fresh fast-registration region on B; returns the key it was allocated with.
fn setup(seed: u64) -> (Fabric, Node, Node, MrKey) {
    let (mut f, a, b) = pair(seed, FaultConfig::default(), PairOpts::default());
    let keys = f
        .hca(b.hca)
        .alloc_fast_reg_mr(b.pd, 8)
        .expect("alloc_fast_reg_mr");
    let key0 = MrKey::from(keys.rkey.expect("FRMR keys are reported remote"));
    assert_eq!(MrKey::from(keys.lkey), key0);
    (f, a, b, key0)
}

/// B registers `pages` under `key`; the REG_MR completes successfully.
fn register(f: &mut Fabric, b: &Node, wr_id: u64, key: MrKey, pages: FastRegPages) {
    post_send(f, b, reg_wr(wr_id, key, pages));
    settle(f);
    let wcs = drain(f, b);
    assert_eq!(
        statuses(&wcs),
        [(wr_id, WcStatus::Success)],
        "REG_MR: {wcs:?}"
    );
    assert_eq!(wcs[0].opcode, WcOpcode::RegMr);
}

/// A WRITEs `len` bytes (pattern `tag`) at region offset `off` under `key`, then reads them
/// back; both succeed and the bytes are where the page list says.
fn write_and_read_back(f: &mut Fabric, a: &Node, key: MrKey, pages: &FastRegPages, tag: u64) {
    let (off, len) = (1000u64, 6000u32); // crosses from the first page into the third
    fill(&a.mem, 0, len as usize, tag);
    let rkey = Rkey(key.0);
    post_send(f, a, write_wr(tag, FR_IOVA + off, rkey, a.sge(0, len)));
    post_send(
        f,
        a,
        read_wr(tag + 1, FR_IOVA + off, rkey, a.sge(1 << 20, len)),
    );
    settle(f);
    let wcs = drain(f, a);
    assert_eq!(
        statuses(&wcs),
        [(tag, WcStatus::Success), (tag + 1, WcStatus::Success)],
        "{wcs:?}"
    );
    let sent = read(&a.mem, 0, len as usize);
    assert!(
        region_bytes(pages, off, u64::from(len)) == sent,
        "WRITE landed through the page list"
    );
    assert!(
        read(&a.mem, 1 << 20, len as usize) == sent,
        "READ came back through it"
    );
}

/// A WRITE under `key` now fails with a remote access error and takes both QPs to ERR.
fn access_fails(f: &mut Fabric, a: &Node, b: &Node, key: MrKey, wr_id: u64) {
    post_send(f, a, write_wr(wr_id, FR_IOVA, Rkey(key.0), a.sge(0, 64)));
    settle(f);
    let wcs = drain(f, a);
    assert_eq!(
        statuses(&wcs),
        [(wr_id, WcStatus::RemAccessErr)],
        "key {key}: {wcs:?}"
    );
    assert_eq!(f.hca(a.hca).qp_state(a.qp), Some(QpState::Err));
    assert_eq!(f.hca(b.hca).qp_state(b.qp), Some(QpState::Err));
}

#[test]
fn local_invalidate_revokes_the_rkey() {
    let (mut f, a, b, key0) = setup(41);
    let key1 = key0.next_variant();
    let pages = page_list(&b, 1 << 20);
    register(&mut f, &b, 100, key1, pages.clone());
    write_and_read_back(&mut f, &a, key1, &pages, 1);

    // B sends, then invalidates: the LOCAL_INV runs at once (it is fenced only behind READs)
    // but its completion waits its turn behind the SEND's.
    post_recv(&mut f, &a, recv_wr(50, vec![a.sge(2 << 20, 64)]));
    post_send(&mut f, &b, send_wr(102, SendOp::Send, vec![b.sge(0, 64)]));
    post_send(&mut f, &b, send_wr(101, SendOp::LocalInv(key1.0), vec![]));
    settle(&mut f);
    let wcs = drain(&mut f, &b);
    assert_eq!(
        statuses(&wcs),
        [(102, WcStatus::Success), (101, WcStatus::Success)],
        "{wcs:?}"
    );
    assert_eq!(wcs[1].opcode, WcOpcode::LocalInv);
    assert_eq!(statuses(&drain(&mut f, &a)), [(50, WcStatus::Success)]);

    access_fails(&mut f, &a, &b, key1, 7);
}

#[test]
fn send_with_invalidate_from_the_peer_revokes_the_rkey() {
    let (mut f, a, b, key0) = setup(42);
    let key1 = key0.next_variant();
    let pages = page_list(&b, 1 << 20);
    register(&mut f, &b, 100, key1, pages.clone());
    write_and_read_back(&mut f, &a, key1, &pages, 1);

    post_recv(&mut f, &b, recv_wr(60, vec![b.sge(4 << 20, 256)]));
    fill(&a.mem, 0, 64, 9);
    post_send(
        &mut f,
        &a,
        send_wr(5, SendOp::SendWithInv(Rkey(key1.0)), vec![a.sge(0, 64)]),
    );
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a)), [(5, WcStatus::Success)]);
    let recv = drain(&mut f, &b);
    assert_eq!(statuses(&recv), [(60, WcStatus::Success)], "{recv:?}");
    assert_eq!(recv[0].invalidated, Some(Rkey(key1.0)));
    assert_eq!(recv[0].byte_len, 64);
    assert_eq!(read(&b.mem, 4 << 20, 64), read(&a.mem, 0, 64));

    access_fails(&mut f, &a, &b, key1, 7);
}

#[test]
fn reregistration_with_the_next_variant_works_and_the_old_variant_fails() {
    let (mut f, a, b, key0) = setup(43);
    let key1 = key0.next_variant();
    let first = page_list(&b, 1 << 20);
    register(&mut f, &b, 100, key1, first.clone());
    write_and_read_back(&mut f, &a, key1, &first, 1);
    post_send(&mut f, &b, send_wr(101, SendOp::LocalInv(key1.0), vec![]));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(101, WcStatus::Success)]);

    // Same region, new variant, other pages: the new key reaches the new pages.
    let key2 = key1.next_variant();
    assert_ne!(key2, key1);
    assert_eq!(key2.index(), key1.index());
    let second = page_list(&b, 2 << 20);
    register(&mut f, &b, 102, key2, second.clone());
    write_and_read_back(&mut f, &a, key2, &second, 3);

    access_fails(&mut f, &a, &b, key1, 7);
}

#[test]
fn an_rkey_before_registration_fails() {
    let (mut f, a, b, key0) = setup(44);
    access_fails(&mut f, &a, &b, key0, 7);
}

#[test]
fn reg_mr_of_a_region_still_valid_fails_with_local_qp_operation_error() {
    // rxe_reg_fast_mr requires the region to be free: it must be invalidated first.
    let (mut f, _a, b, key0) = setup(45);
    let key1 = key0.next_variant();
    register(&mut f, &b, 100, key1, page_list(&b, 1 << 20));
    post_send(
        &mut f,
        &b,
        reg_wr(101, key1.next_variant(), page_list(&b, 2 << 20)),
    );
    post_send(&mut f, &b, send_wr(102, SendOp::Send, vec![b.sge(0, 8)]));
    settle(&mut f);
    let wcs = drain(&mut f, &b);
    assert_eq!(
        statuses(&wcs),
        [(101, WcStatus::LocQpOpErr), (102, WcStatus::WrFlushErr)],
        "{wcs:?}"
    );
    assert_eq!(f.hca(b.hca).qp_state(b.qp), Some(QpState::Err));
}

#[test]
fn reg_mr_changing_the_key_index_fails_with_local_qp_operation_error() {
    let (mut f, _a, b, key0) = setup(46);
    let other_index = MrKey(key0.0 + 0x100);
    let mut wr = reg_wr(100, other_index, page_list(&b, 1 << 20));
    wr.flags = SendFlags::empty(); // errors complete even when unsignaled
    post_send(&mut f, &b, wr);
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(100, WcStatus::LocQpOpErr)]);
}

#[test]
fn send_with_invalidate_of_a_wrong_rkey_fails_both_sides() {
    let (mut f, a, b, key0) = setup(47);
    let key1 = key0.next_variant();
    register(&mut f, &b, 100, key1, page_list(&b, 1 << 20));
    post_recv(&mut f, &b, recv_wr(60, vec![b.sge(4 << 20, 256)]));
    let wrong = Rkey(key1.next_variant().0);
    post_send(
        &mut f,
        &a,
        send_wr(5, SendOp::SendWithInv(wrong), vec![a.sge(0, 64)]),
    );
    settle(&mut f);
    let recv = drain(&mut f, &b);
    assert_eq!(statuses(&recv), [(60, WcStatus::RemInvReqErr)], "{recv:?}");
    assert_eq!(recv[0].invalidated, None);
    assert_eq!(statuses(&drain(&mut f, &a)), [(5, WcStatus::RemInvReqErr)]);
    // The region is untouched by the failed invalidation... but the QPs are in ERR now, so
    // check through a new connection.
    let (a2, b2) = (extra_qp(&mut f, &a, None), extra_qp(&mut f, &b, None));
    let now_psn = hca::ids::Psn::from_wire(1);
    connect(&mut f, &a2, &b2, now_psn, now_psn, PairOpts::default());
    connect(&mut f, &b2, &a2, now_psn, now_psn, PairOpts::default());
    post_send(
        &mut f,
        &a2,
        write_wr(8, FR_IOVA, Rkey(key1.0), a.sge(0, 64)),
    );
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &a2)), [(8, WcStatus::Success)]);
}

#[test]
fn the_owner_loses_the_lkey_with_the_invalidation_too() {
    let (mut f, a, b, key0) = setup(48);
    let key1 = key0.next_variant();
    let pages = page_list(&b, 1 << 20);
    register(&mut f, &b, 100, key1, pages.clone());
    fill(&b.mem, (1 << 20) + 2 * PAGE + 100, 64, 4); // the region's first bytes
    let sge = hca::verbs::Sge {
        addr: FR_IOVA,
        len: 64,
        lkey: hca::ids::Lkey(key1.0),
    };
    post_recv(&mut f, &a, recv_wr(50, vec![a.sge(0, 64)]));
    post_send(&mut f, &b, send_wr(1, SendOp::Send, vec![sge]));
    settle(&mut f);
    assert_eq!(statuses(&drain(&mut f, &b)), [(1, WcStatus::Success)]);
    assert_eq!(statuses(&drain(&mut f, &a)), [(50, WcStatus::Success)]);
    assert_eq!(read(&a.mem, 0, 64), region_bytes(&pages, 0, 64));

    post_send(&mut f, &b, send_wr(2, SendOp::LocalInv(key1.0), vec![]));
    post_send(&mut f, &b, send_wr(3, SendOp::Send, vec![sge]));
    settle(&mut f);
    assert_eq!(
        statuses(&drain(&mut f, &b)),
        [(2, WcStatus::Success), (3, WcStatus::LocProtErr)]
    );
}

#[test]
fn remote_invalidation_survives_loss_duplication_and_reordering() {
    // Retransmitted or duplicated SEND_WITH_INV packets must neither complete the receive
    // twice nor fail on the already-free region.
    for seed in 0..40 {
        let (mut f, a, b, key0) = setup(1000 + seed);
        let key1 = key0.next_variant();
        let pages = page_list(&b, 1 << 20);
        register(&mut f, &b, 100, key1, pages.clone());
        f.faults = FaultConfig {
            drop_rate: 0.1,
            dup_rate: 0.05,
            reorder_rate: 0.1,
            ..FaultConfig::default()
        };
        fill(&a.mem, 0, 6000, seed);
        post_send(
            &mut f,
            &a,
            write_wr(1, FR_IOVA + 1000, Rkey(key1.0), a.sge(0, 6000)),
        );
        post_recv(&mut f, &b, recv_wr(60, vec![b.sge(4 << 20, 256)]));
        let inv = SendOp::SendWithInv(Rkey(key1.0));
        post_send(&mut f, &a, send_wr(2, inv, vec![a.sge(0, 64)]));
        settle(&mut f);
        assert_eq!(
            statuses(&drain(&mut f, &a)),
            [(1, WcStatus::Success), (2, WcStatus::Success)],
            "seed {seed}"
        );
        let recv = drain(&mut f, &b);
        assert_eq!(statuses(&recv), [(60, WcStatus::Success)], "seed {seed}");
        assert_eq!(recv[0].invalidated, Some(Rkey(key1.0)), "seed {seed}");
        assert!(
            region_bytes(&pages, 1000, 6000) == read(&a.mem, 0, 6000),
            "seed {seed}: data"
        );
        f.faults = FaultConfig::default();
        access_fails(&mut f, &a, &b, key1, 7);
    }
}
