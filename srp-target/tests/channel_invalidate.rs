//! SEND WITH INVALIDATE (this stack's SRP_CMD byte 2 bit 0, `Cmd::remote_invalidate`), at
//! the [`ChannelIo`] level on loopback 127.0.108.x: the initiator fast-registers one region
//! per command; when it asks, the target's SRP_RSP invalidates that region (the receive
//! completion names the R_Key) after the data-in WRITEs; a later transfer under the old key
//! fails at the initiator's HCA and leaves its memory alone. Without the request, or when the
//! descriptors carry two keys, the response is a plain SEND and the region stays valid.

mod common;
mod verbs;

use common::{nexus_data, pattern, ram_lu, read10, write10};
use hca::mr::{Access, MrKeys};
use hca::verbs::{FastRegPages, SendFlags, SendOp, SendWr, Wc, WcOpcode, WcStatus};
use scsi::Status;
use srp::wire::cmd::{Cmd, TaskAttr};
use srp::wire::desc::{DataDesc, DirectBuf, Indirect};
use srp::wire::rsp::Rsp;
use srp::wire::{SolicitFlags, Tag};
use srp_target::BlockSize;
use srp_target::io::{ChannelIo, Inline, IoState};
use std::sync::Arc;
use std::time::{Duration, Instant};
use verbs::{DEADLINE, EP_DATA, Ep, IMM_OFFSET, Initiator, Target, connect, ip};
use wirekit::WireRepr;

const PAGE: u64 = 4096;
/// Where the fast-registered region appears to the target.
const FR_IOVA: u64 = 0x7700_0000;
/// Offset of the region's pages in the initiator's window (past the plain data area).
const FR_OFF: u64 = EP_DATA + (256 << 10);

/// Allocates a fast-registration region of four pages and registers it over the window's
/// pages at `FR_OFF`; returns the keys it was registered with.
fn register(i: &Initiator, ep: &Ep, t: &Target, ios: &mut [&mut ChannelIo]) -> MrKeys {
    let pd = i.pd();
    let keys = i
        .hca
        .with(|e, _| e.alloc_fast_reg_mr(pd, 4))
        .expect("alloc_fast_reg_mr");
    let pages = FastRegPages {
        pages: (0..4)
            .map(|p| (i.mem.clone(), ep.base + FR_OFF + p * PAGE))
            .collect(),
        page_size: PAGE,
        first_byte_offset: 0,
        iova: FR_IOVA,
        length: 4 * PAGE,
    };
    let wr = SendWr {
        wr_id: 77,
        op: SendOp::RegMr {
            key: keys.lkey.0,
            access: Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            pages,
        },
        sg_list: vec![],
        flags: SendFlags::SIGNALED,
        ud: None,
    };
    i.hca
        .with(|e, now| e.post_send_list(now, ep.qp, vec![wr]))
        .expect("post REG_MR");
    let wc = next_wc(i, ep, ios);
    assert_eq!((wc.wr_id, wc.status), (77, WcStatus::Success), "{wc:?}");
    let _ = t;
    keys
}

/// The next completion on `ep`, polling the target channels meanwhile.
fn next_wc(i: &Initiator, ep: &Ep, ios: &mut [&mut ChannelIo]) -> Wc {
    let end = Instant::now() + DEADLINE;
    loop {
        assert!(Instant::now() < end, "no completion within {DEADLINE:?}");
        for io in ios.iter_mut() {
            io.poll();
        }
        if let Some(wc) = i.poll_one(ep) {
            return wc;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The next receive completion and its IU (send completions must have succeeded).
fn next_rsp(i: &Initiator, ep: &Ep, ios: &mut [&mut ChannelIo]) -> (Wc, Vec<u8>) {
    loop {
        let wc = next_wc(i, ep, ios);
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        if wc.opcode == WcOpcode::Recv {
            let slot = wc.wr_id as usize;
            let iu = i.read(ep, slot as u64 * 256, wc.byte_len as usize);
            i.post_recv(ep, slot);
            return (wc, iu);
        }
    }
}

fn cmd(tag: u64, cdb: &[u8], out: DataDesc<'_>, din: DataDesc<'_>, invalidate: bool) -> Vec<u8> {
    let mut c = [0u8; 16];
    c[..cdb.len()].copy_from_slice(cdb);
    let cmd = Cmd {
        flags: SolicitFlags::empty(),
        tag: Tag(tag),
        lun: scsi::Lun::ZERO,
        task_attr: TaskAttr::Simple,
        cdb: c,
        add_cdb: &[],
        data_out: out,
        data_in: din,
        imm_data: &[],
        remote_invalidate: invalidate,
    };
    let mut buf = vec![0u8; cmd.buffer_len_with(IMM_OFFSET)];
    cmd.emit_with(&mut buf, IMM_OFFSET).expect("fits");
    buf
}

fn fr_buf(keys: MrKeys, off: u64, len: u32) -> DirectBuf {
    DirectBuf::new(FR_IOVA + off, keys.rkey.expect("remote"), len)
}

#[test]
fn the_response_invalidates_the_region_the_initiator_asked_for() {
    let t = Target::open(ip(108, 1), ram_lu(2048, BlockSize::B512));
    let i = Initiator::open(ip(108, 2));
    let ep = i.ep(0, 8);
    let mut io = t.channel(1, 8, nexus_data(0), Arc::new(Inline));
    connect(&t, &mut io, &i, &ep);

    // A WRITE from a region registered for it, asking for remote invalidation.
    let keys = register(&i, &ep, &t, &mut [&mut io]);
    let data = pattern(8192, 3);
    i.write(&ep, FR_OFF, &data);
    let iu = cmd(
        1,
        &write10(0, 16, false),
        DataDesc::Direct(fr_buf(keys, 0, 8192)),
        DataDesc::None,
        true,
    );
    i.send(&ep, &[iu]);
    let (wc, rsp) = next_rsp(&i, &ep, &mut [&mut io]);
    assert_eq!(Rsp::parse(&rsp).expect("RSP").status, Status::Good);
    assert_eq!(
        wc.invalidated, keys.rkey,
        "the SRP_RSP came as SEND WITH INVALIDATE"
    );

    // A READ into a fresh registration: data-in WRITEs land, then the SEND invalidates.
    let keys = register(&i, &ep, &t, &mut [&mut io]);
    i.write(&ep, FR_OFF, &[0u8; 8192]);
    let iu = cmd(
        2,
        &read10(0, 16),
        DataDesc::None,
        DataDesc::Direct(fr_buf(keys, 0, 8192)),
        true,
    );
    i.send(&ep, &[iu]);
    let (wc, rsp) = next_rsp(&i, &ep, &mut [&mut io]);
    assert_eq!(Rsp::parse(&rsp).expect("RSP").status, Status::Good);
    assert_eq!(wc.invalidated, keys.rkey);
    assert_eq!(
        i.read(&ep, FR_OFF, 8192),
        data,
        "data-in arrived before the invalidation"
    );

    // Not asked: a plain SEND, and the region stays usable.
    let keys = register(&i, &ep, &t, &mut [&mut io]);
    let iu = cmd(
        3,
        &read10(0, 8),
        DataDesc::None,
        DataDesc::Direct(fr_buf(keys, 0, 4096)),
        false,
    );
    i.send(&ep, &[iu]);
    let (wc, _) = next_rsp(&i, &ep, &mut [&mut io]);
    assert_eq!(wc.invalidated, None);
    // Asked, but the segments carry two keys (the region and the plain MR): plain SEND.
    let segs = [fr_buf(keys, 0, 4096), i.buf(&ep, EP_DATA, 4096)];
    let table = Indirect {
        table: i.buf(&ep, EP_DATA + 65536, 32),
        total_len: 8192,
        inline: &segs,
    };
    let iu = cmd(
        4,
        &read10(0, 16),
        DataDesc::None,
        DataDesc::Indirect(table),
        true,
    );
    i.send(&ep, &[iu]);
    let (wc, rsp) = next_rsp(&i, &ep, &mut [&mut io]);
    assert_eq!(Rsp::parse(&rsp).expect("RSP").status, Status::Good);
    assert_eq!(wc.invalidated, None, "no single key to invalidate");
    // Now with the one key: invalidated.
    let iu = cmd(
        5,
        &read10(0, 8),
        DataDesc::None,
        DataDesc::Direct(fr_buf(keys, 0, 4096)),
        true,
    );
    i.send(&ep, &[iu]);
    let (wc, _) = next_rsp(&i, &ep, &mut [&mut io]);
    assert_eq!(wc.invalidated, keys.rkey);

    // The stale key is dead at the initiator's HCA: a READ into it fails there, the target
    // channel closes (its WRITE is NAKed), and the region's memory is unchanged.
    i.write(&ep, FR_OFF, &[0x5a; 4096]);
    let iu = cmd(
        6,
        &read10(0, 8),
        DataDesc::None,
        DataDesc::Direct(fr_buf(keys, 0, 4096)),
        false,
    );
    i.send(&ep, &[iu]);
    let end = Instant::now() + DEADLINE;
    while io.state() != IoState::Closed {
        assert!(
            Instant::now() < end,
            "the target channel did not close: {io:?}"
        );
        io.poll();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(
        io.close_reason().is_some_and(|r| r.contains("failed")),
        "{:?}",
        io.close_reason()
    );
    assert_eq!(
        i.read(&ep, FR_OFF, 4096),
        vec![0x5a; 4096],
        "nothing written under a stale key"
    );
}
