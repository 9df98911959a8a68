//! Work completions as rdma-core hands them over, turned into the access layer's: pinned
//! without a device. Linux 6.1's rxe copies the kernel's completion flags into the user
//! CQE, so a remote invalidation arrives as bit 2 (the kernel's `IB_WC_WITH_INVALIDATE`,
//! user space's `IBV_WC_IP_CSUM_OK`), not as `IBV_WC_WITH_INV` (`drivers/infiniband/sw/
//! rxe/rxe_resp.c`, `do_complete`; seen in the guest: `wc_flags = 0x5`). A host that missed
//! it would invalidate the window again — a kernel panic on rxe.

use crate::ca::wc_of;
use crate::ffi::types::*;
use ib_verbs::Rkey;
use ib_verbs::wr::{WcOpcode, WcStatus};
use std::sync::atomic::{AtomicU32, Ordering};

fn wc(opcode: u32, flags: u32, imm_or_inv: u32) -> ibv_wc {
    ibv_wc {
        wr_id: 9,
        status: 0,
        opcode,
        vendor_err: 0,
        byte_len: 36,
        imm_or_inv,
        qp_num: 0x11,
        src_qp: 0,
        wc_flags: flags,
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

#[test]
fn rxe_reports_a_remote_invalidation_with_the_checksum_bit() {
    let strange = AtomicU32::new(0);
    // GRH | the kernel's WITH_INVALIDATE, as rxe 6.1 reports it.
    let w = wc_of(&wc(IBV_WC_RECV, 0x1 | 0x4, 0x0800_019e), &strange);
    assert_eq!(w.opcode, WcOpcode::Recv);
    assert_eq!(w.invalidated, Some(Rkey(0x0800_019e)));
    // The flag user space defines, as other providers report it.
    let w = wc_of(&wc(IBV_WC_RECV, IBV_WC_WITH_INV, 0x42), &strange);
    assert_eq!(w.invalidated, Some(Rkey(0x42)));
    // A plain receive invalidated nothing; the field is not read as a key.
    let w = wc_of(&wc(IBV_WC_RECV, 0x1, 0x42), &strange);
    assert_eq!(w.invalidated, None);
    // Immediate data is in network order.
    let w = wc_of(
        &wc(IBV_WC_RECV, IBV_WC_WITH_IMM, 0x0102_0304u32.to_be()),
        &strange,
    );
    assert_eq!((w.imm, w.invalidated), (Some(0x0102_0304), None));
    assert_eq!(strange.load(Ordering::Relaxed), 0);
}

#[test]
fn a_failed_completion_reports_no_invalidation_and_an_unknown_opcode_is_counted() {
    let strange = AtomicU32::new(0);
    let mut e = wc(IBV_WC_RECV, 0x4, 0x77);
    e.status = 5;
    let w = wc_of(&e, &strange);
    assert_eq!((w.status, w.invalidated), (WcStatus::WrFlushErr, None));
    let w = wc_of(&wc(0x4242, 0, 0), &strange);
    assert_eq!(w.status, WcStatus::Success);
    assert_eq!(
        strange.load(Ordering::Relaxed),
        1,
        "a success with an opcode we do not know"
    );
}
