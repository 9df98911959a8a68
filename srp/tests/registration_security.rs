//! Issue #6 acceptance: with per-I/O fast registration a hostile target reaches the bytes of
//! the command it is serving and nothing else. It tries RDMA READ and WRITE outside the
//! command's regions, past their length, against the wrong rights, with the keys of earlier
//! commands after remote and after local invalidation, and with made-up keys; every attempt
//! is refused by the initiator's HCA (remote access error), and the initiator's data memory
//! ends byte-for-byte as the legitimate transfers left it. The contrast: under the opt-in
//! all-memory strategy the same out-of-range WRITE lands, which is why it is opt-in.

mod registration_common;

use hca::ids::Rkey;
use hca::mr::MrKey;
use hca::verbs::{SendFlags, SendOp, SendWr, Wc, WcOpcode, WcStatus};
use registration_common::*;
use scsi::Lun;
use srp::initiator::registration::{
    FrmrConfig, Mapping, MappingKind, Registration, Segment, Strategy,
};
use srp::initiator::{Command, DataDescriptors, DataDir};
use srp::wire::Tag;
use srp::wire::cmd::{Cmd, TaskAttr};
use srp::wire::desc::{DataDesc, DirectBuf};

const CMD_SEND_ID: u64 = 900;
const CMD_RECV_ID: u64 = 901;
const RSP_RECV_ID: u64 = 902;

fn frmr_registration(w: &mut World) -> Registration {
    let config = FrmrConfig {
        window: 1,
        mrs_per_cmd: 2,
        max_pages: 8,
        ..FrmrConfig::default()
    };
    let e = w.f.hca(w.host.hca);
    let frmr = frmr_pool(e, w.host.pd, config);
    let mut reg = Registration::new(Strategy::PerIo(frmr));
    reg.set_immediate_limit(&negotiated(512));
    reg
}

/// The host sends an SRP_CMD for `mapping` on the main link (REG_MRs first, same chain);
/// returns the descriptors the target parsed out of it and its remote-invalidate bit.
fn send_cmd(
    w: &mut World,
    dir: DataDir,
    len: u32,
    mapping: &mut Mapping,
) -> (Vec<DirectBuf>, bool) {
    let mut cmd = Command {
        lun: Lun([0; 8]),
        cdb: vec![0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0].into(),
        task_attr: TaskAttr::Simple,
        dir,
        data_len: len,
        data: DataDescriptors::None,
        imm_data: Vec::new(),
        remote_invalidate: false,
        timeout: None,
    };
    mapping.apply(&mut cmd);
    let neg = negotiated(512);
    let iu = cmd.encode(Tag(7), &neg).expect("encode SRP_CMD");
    w.host.local.write(0, &iu).expect("IU");
    w.tgt_recv(w.link.tgt, CMD_RECV_ID, 1 << 19, 8260);
    let mut wrs = mapping.pre_wrs.clone();
    wrs.push(SendWr {
        wr_id: CMD_SEND_ID,
        op: SendOp::Send,
        sg_list: [w.host.sge(0, iu.len() as u32)].into(),
        flags: SendFlags::SIGNALED,
        ud: None,
    });
    let link = w.link;
    w.host_post(link.host, wrs);
    w.settle();
    let host_wcs = w.drain_host();
    let ok: Vec<_> = host_wcs.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(ok, [(CMD_SEND_ID, WcStatus::Success)], "REG_MRs + SEND");
    let recv = w.drain_tgt();
    assert_eq!(recv.len(), 1, "{recv:?}");
    assert_eq!(recv[0].status, WcStatus::Success);
    let got = read(&w.tgt.local, 1 << 19, recv[0].byte_len as usize);
    let parsed = Cmd::parse_with(&got, neg.imm_data_offset).expect("target parses SRP_CMD");
    let desc = if dir == DataDir::Read {
        parsed.data_in
    } else {
        parsed.data_out
    };
    let descs = match desc {
        DataDesc::Direct(d) => vec![d],
        DataDesc::Indirect(ind) => {
            assert!(!ind.is_partial(), "the list travels complete");
            ind.inline.to_vec()
        }
        other => panic!("unexpected descriptor {other:?}"),
    };
    (descs, parsed.remote_invalidate)
}

/// The target answers on the main link, with SEND WITH INVALIDATE of `inv` if given; returns
/// the host's receive completion.
fn respond(w: &mut World, inv: Option<Rkey>) -> Wc {
    w.host_recv(w.link.host, RSP_RECV_ID, 1 << 18, 256);
    w.tgt.local.fill(1 << 17, 36, 0xc1).expect("rsp bytes");
    let op = inv.map_or(SendOp::Send, SendOp::SendWithInv);
    let wr = SendWr {
        wr_id: 77,
        op,
        sg_list: [w.tgt.sge(1 << 17, 36)].into(),
        flags: SendFlags::SIGNALED,
        ud: None,
    };
    let link = w.link;
    w.tgt_post(link.tgt, wr);
    w.settle();
    let t = w.drain_tgt();
    assert_eq!(
        t.iter().map(|c| c.status).collect::<Vec<_>>(),
        [WcStatus::Success]
    );
    let h = w.drain_host();
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!((h[0].wr_id, h[0].status), (RSP_RECV_ID, WcStatus::Success));
    h[0]
}

/// The outside-the-region attempts against one descriptor of a region granting only
/// `allowed` (true: remote write, false: remote read): before, after, past the length, and
/// the other operation inside.
fn attack_region(w: &mut World, d: DirectBuf, allowed_write: bool, what: &str) {
    let (va, k, len) = (d.va(), d.rkey(), d.len());
    for write in [true, false] {
        w.attack_fails(&format!("{what}: 1 byte before"), write, va - 1, k, 1);
        w.attack_fails(&format!("{what}: 64 bytes before"), write, va - 64, k, 64);
        w.attack_fails(
            &format!("{what}: straddling the start"),
            write,
            va - 8,
            k,
            16,
        );
        w.attack_fails(
            &format!("{what}: 1 byte after"),
            write,
            va + u64::from(len),
            k,
            1,
        );
        w.attack_fails(
            &format!("{what}: a page after"),
            write,
            va + u64::from(len) + 4096,
            k,
            64,
        );
        w.attack_fails(&format!("{what}: past the length"), write, va, k, len + 1);
        w.attack_fails(
            &format!("{what}: last byte + 1"),
            write,
            va + u64::from(len) - 1,
            k,
            2,
        );
    }
    // The region grants one direction only.
    w.attack_fails(
        &format!("{what}: wrong direction"),
        !allowed_write,
        va,
        k,
        16,
    );
}

/// Every byte of each segment, in order.
fn segment_bytes(w: &World, segs: &[(u64, u32)]) -> Vec<u8> {
    segs.iter()
        .flat_map(|&(o, l)| read(&w.data, o, l as usize))
        .collect()
}

#[test]
fn a_hostile_target_reaches_only_the_current_io() {
    let mut w = World::new(6);
    let mut reg = frmr_registration(&mut w);
    pattern(&w.data, 0, HOST_MEM, 0x5a);
    let mut expected = read(&w.data, 0, HOST_MEM);

    // I/O 1: a data-in (READ) buffer, one region; the target answers with SEND WITH INV.
    let seg1 = (5 * PAGE + 256, 2 * PAGE as u32);
    let mut m1 = reg
        .map(DataDir::Read, &[Segment::new(&w.data, seg1.0, seg1.1)])
        .expect("map I/O 1");
    assert_eq!(m1.kind, MappingKind::Frmr);
    let (d1, inv_bit) = send_cmd(&mut w, DataDir::Read, seg1.1, &mut m1);
    assert!(inv_bit, "one region: remote invalidation asked for");
    let [d1] = d1[..] else {
        panic!("direct: {d1:?}")
    };
    // The legitimate transfer: the data-in bytes.
    pattern(&w.tgt.local, 0, seg1.1 as usize, 0x11);
    let legit = read(&w.tgt.local, 0, seg1.1 as usize);
    let link = w.link;
    let wc = w.rdma(link, true, d1.va(), d1.rkey(), d1.len(), 0);
    assert_eq!(wc.status, WcStatus::Success, "legitimate data-in WRITE");
    expected[seg1.0 as usize..][..seg1.1 as usize].copy_from_slice(&legit);
    attack_region(&mut w, d1, true, "I/O 1");
    let rsp = respond(&mut w, Some(d1.rkey()));
    assert_eq!(rsp.invalidated, Some(d1.rkey()));
    let inv = reg.unmap(m1.handle, rsp.invalidated).expect("unmap 1");
    assert!(inv.is_empty(), "remotely invalidated: nothing to post");
    for write in [true, false] {
        w.attack_fails(
            "I/O 1 key after SEND WITH INV",
            write,
            d1.va(),
            d1.rkey(),
            16,
        );
    }

    // I/O 2: a data-out (WRITE) buffer of five scattered pages, two regions; the target
    // answers with a plain SEND, so the host invalidates locally.
    let segs2 = [
        (10 * PAGE + 100, (PAGE - 100) as u32),
        (3 * PAGE, PAGE as u32),
        (7 * PAGE, 1000),
        (12 * PAGE, PAGE as u32),
        (20 * PAGE, 300),
    ];
    let sg: Vec<Segment> = segs2
        .iter()
        .map(|&(o, l)| Segment::new(&w.data, o, l))
        .collect();
    let total: u32 = segs2.iter().map(|s| s.1).sum();
    let mut m2 = reg.map(DataDir::Write, &sg).expect("map I/O 2");
    assert_eq!(m2.pre_wrs.len(), 2);
    let keys2 = m2.handle.keys().to_vec();
    assert!(
        keys2.contains(&MrKey(d1.rkey().0).next_variant()),
        "I/O 1's region is reused under the next key: {keys2:?}"
    );
    let (d2, inv_bit) = send_cmd(&mut w, DataDir::Write, total, &mut m2);
    assert!(!inv_bit, "two regions: no remote invalidation");
    assert_eq!(d2.len(), 2);
    // The legitimate transfers: the target reads the data-out bytes.
    let mut fetched = Vec::new();
    for d in &d2 {
        let wc = w.rdma(link, false, d.va(), d.rkey(), d.len(), 0);
        assert_eq!(wc.status, WcStatus::Success, "legitimate data-out READ");
        fetched.extend(read(&w.tgt.local, 0, d.len() as usize));
    }
    assert!(
        fetched == segment_bytes(&w, &segs2),
        "the target read the buffer"
    );
    for (i, d) in d2.iter().enumerate() {
        attack_region(&mut w, *d, false, &format!("I/O 2 region {i}"));
    }
    // I/O 1's key is the previous variant of a region now registered again.
    for write in [true, false] {
        w.attack_fails("I/O 1 key during I/O 2", write, d1.va(), d1.rkey(), 16);
    }
    let rsp = respond(&mut w, None);
    assert_eq!(rsp.invalidated, None);
    let inv = reg.unmap(m2.handle, rsp.invalidated).expect("unmap 2");
    assert_eq!(inv.len(), 2, "two LOCAL_INVs");
    w.host_post(link.host, inv);
    w.settle();
    for wc in w.drain_host() {
        assert_eq!(
            (wc.opcode, wc.status),
            (WcOpcode::LocalInv, WcStatus::Success)
        );
        assert_eq!(reg.handle_send_done(wc.wr_id, wc.status), Ok(true));
    }
    assert_eq!(reg.counts().free, 2, "both regions free again");
    for d in &d2 {
        for write in [true, false] {
            w.attack_fails("I/O 2 key after LOCAL_INV", write, d.va(), d.rkey(), 16);
        }
    }

    // Made-up keys: arbitrary, zero (the indirect table's), the next variant of a real
    // region (guessing the roll), the host's local-only region.
    let guessed = Rkey(MrKey(d2[0].rkey().0).next_variant().0);
    let local_only = Rkey(w.host.local_mr.lkey.0);
    for (what, k) in [
        ("made up", Rkey(0x00ab_cd01)),
        ("zero", Rkey(0)),
        ("guessed next variant", guessed),
        ("a local-only region's key", local_only),
    ] {
        for write in [true, false] {
            w.attack_fails(what, write, d2[0].va(), k, 16);
            w.attack_fails(what, write, 0x1000_0000, k, 16);
        }
    }

    assert!(
        read(&w.data, 0, HOST_MEM) == expected,
        "host memory changed outside the legitimate transfers"
    );
}

#[test]
fn with_the_all_memory_region_the_same_out_of_range_write_succeeds() {
    let mut w = World::new(7);
    let e = w.f.hca(w.host.hca);
    let (all, warning) = all_memory(e, w.host.pd, &w.data, 0x2000_0000, 4);
    assert!(warning.0.contains("read and write all"), "{warning}");
    let mut reg = Registration::new(Strategy::TrustTarget(all));
    pattern(&w.data, 0, HOST_MEM, 0x5a);
    let before = read(&w.data, 0, HOST_MEM);
    let seg = (5 * PAGE + 256, 2 * PAGE as u32);
    let mut m = reg
        .map(DataDir::Read, &[Segment::new(&w.data, seg.0, seg.1)])
        .expect("map");
    assert_eq!(m.kind, MappingKind::AllMemory);
    assert!(m.pre_wrs.is_empty() && !m.remote_invalidate);
    let (d, _) = send_cmd(&mut w, DataDir::Read, seg.1, &mut m);
    let d = d[0];
    // The out-of-range WRITE from the FRMR test: 64 bytes before the buffer. It lands.
    let st = w.attack(true, d.va() - 64, d.rkey(), 64);
    assert_eq!(
        st,
        WcStatus::Success,
        "the all-memory region lets it through"
    );
    assert_eq!(read(&w.data, seg.0 - 64, 64), vec![0xee; 64]);
    assert_ne!(read(&w.data, 0, HOST_MEM), before);
    // And it can read anything, e.g. the first page, belonging to no command.
    assert_eq!(
        w.attack(false, 0x2000_0000, d.rkey(), 4096),
        WcStatus::Success
    );
    assert_eq!(read(&w.tgt.local, 0, 4096), before[..4096]);
    assert!(reg.unmap(m.handle, None).expect("unmap").is_empty());
}
