//! SEND WITH INVALIDATE (this stack's SRP_CMD byte 2 bit 0, `Cmd::remote_invalidate`), at
//! the [`ChannelIo`] level on loopback 127.0.108.x: the initiator fast-registers one region
//! per command; when it asks, the target's SRP_RSP invalidates that region (the receive
//! completion names the R_Key) after the data-in WRITEs; a later transfer under the old key
//! fails at the initiator's HCA and leaves its memory alone. Without the request, or when the
//! descriptors carry two keys, the response is a plain SEND and the region stays valid.

mod common;
mod verbs;

use common::{cmd_bytes, nexus_data, pattern, ram_lu, read10, srp_cmd, write10};
use hca::mr::{Access, MrKeys};
use hca::verbs::{FastRegPages, SendFlags, SendOp, SendWr, Wc, WcStatus};
use scsi::{Lun, Status};
use srp::wire::cmd::Cmd;
use srp::wire::desc::{DataDesc, DirectBuf, Indirect};
use srp::wire::rsp::Rsp;
use srp_target::BlockSize;
use srp_target::io::{ChannelIo, Inline};
use std::sync::Arc;
use std::time::{Duration, Instant};
use verbs::{DEADLINE, EP_DATA, Ep, Initiator, Target, await_closed, await_recv, connect, ip};
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
        sg_list: [].into(),
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

/// An SRP_CMD to LUN 0 that asks for SEND WITH INVALIDATE or not.
fn cmd(tag: u64, cdb: &[u8], out: DataDesc<'_>, din: DataDesc<'_>, invalidate: bool) -> Vec<u8> {
    cmd_bytes(&Cmd {
        remote_invalidate: invalidate,
        ..srp_cmd(tag, Lun::ZERO, cdb, out, din)
    })
}

/// Sends a READ(10) of `blocks` at LBA 0 into `into` (asking for invalidation or not) and
/// waits for the answer: its receive completion and the SRP_RSP's bytes.
fn read(
    i: &Initiator,
    ep: &Ep,
    io: &mut ChannelIo,
    tag: u64,
    blocks: u16,
    into: DataDesc<'_>,
    invalidate: bool,
) -> (Wc, Vec<u8>) {
    let iu = cmd(tag, &read10(0, blocks), DataDesc::None, into, invalidate);
    i.send(ep, &[iu]);
    await_recv(i, ep, &mut [io])
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
    let (wc, rsp) = await_recv(&i, &ep, &mut [&mut io]);
    assert_eq!(Rsp::parse(&rsp).expect("RSP").status, Status::Good);
    assert_eq!(
        wc.invalidated, keys.rkey,
        "the SRP_RSP came as SEND WITH INVALIDATE"
    );

    // A READ into a fresh registration: data-in WRITEs land, then the SEND invalidates.
    let keys = register(&i, &ep, &t, &mut [&mut io]);
    i.write(&ep, FR_OFF, &[0u8; 8192]);
    let into = DataDesc::Direct(fr_buf(keys, 0, 8192));
    let (wc, rsp) = read(&i, &ep, &mut io, 2, 16, into, true);
    assert_eq!(Rsp::parse(&rsp).expect("RSP").status, Status::Good);
    assert_eq!(wc.invalidated, keys.rkey);
    assert_eq!(
        i.read(&ep, FR_OFF, 8192),
        data,
        "data-in arrived before the invalidation"
    );

    // Not asked: a plain SEND, and the region stays usable.
    let keys = register(&i, &ep, &t, &mut [&mut io]);
    let into = DataDesc::Direct(fr_buf(keys, 0, 4096));
    let (wc, _) = read(&i, &ep, &mut io, 3, 8, into, false);
    assert_eq!(wc.invalidated, None);
    // Asked, but the segments carry two keys (the region and the plain MR): plain SEND.
    let segs = [fr_buf(keys, 0, 4096), i.buf(&ep, EP_DATA, 4096)];
    let table = Indirect {
        table: i.buf(&ep, EP_DATA + 65536, 32),
        total_len: 8192,
        inline: &segs,
    };
    let (wc, rsp) = read(&i, &ep, &mut io, 4, 16, DataDesc::Indirect(table), true);
    assert_eq!(Rsp::parse(&rsp).expect("RSP").status, Status::Good);
    assert_eq!(wc.invalidated, None, "no single key to invalidate");
    // Now with the one key: invalidated.
    let into = DataDesc::Direct(fr_buf(keys, 0, 4096));
    let (wc, _) = read(&i, &ep, &mut io, 5, 8, into, true);
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
    await_closed(&mut io);
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
