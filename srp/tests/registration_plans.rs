//! Mapping plans of the registration strategies, checked on the simulated HCA: what `map`
//! returns for typical buffers, and that what it returns really describes the buffer (the
//! target reads it back through the descriptors).

mod registration_common;

use hca::mr::MrKey;
use hca::verbs::{SendOp, WcOpcode, WcStatus};
use registration_common::*;
use srp::initiator::registration::{
    FrmrConfig, MappingKind, RegError, Registration, Segment, Strategy,
};
use srp::initiator::{DataDescriptors, DataDir};
use srp::wire::desc::DirectBuf;

fn per_io(w: &mut World, window: usize, mrs_per_cmd: usize) -> Registration {
    let config = FrmrConfig {
        window,
        mrs_per_cmd,
        max_pages: 8,
        ..FrmrConfig::default()
    };
    let frmr = frmr_pool(w.f.hca(w.host.hca), w.host.pd, config);
    let mut reg = Registration::new(Strategy::PerIo(frmr));
    reg.set_immediate_limit(&negotiated(512));
    reg
}

fn segs(w: &World, list: &[(u64, u32)]) -> Vec<Segment> {
    list.iter()
        .map(|&(o, l)| Segment::new(&w.data, o, l))
        .collect()
}

/// Posts the REG_MRs on the main link, then the target RDMA-READs every descriptor; returns
/// the bytes it got, in descriptor order.
fn register_and_fetch(
    w: &mut World,
    wrs: impl IntoIterator<Item = hca::verbs::SendWr>,
    descs: &[DirectBuf],
) -> Vec<u8> {
    let link = w.link;
    w.host_post(link.host, wrs);
    w.settle();
    let errs: Vec<_> = w.drain_host();
    assert!(
        errs.is_empty(),
        "REG_MRs are unsignaled and succeed: {errs:?}"
    );
    let mut out = Vec::new();
    for d in descs {
        let wc = w.rdma(link, false, d.va(), d.rkey(), d.len(), 0);
        assert_eq!(wc.status, WcStatus::Success, "{d:?}");
        out.extend(read(&w.tgt.local, 0, d.len() as usize));
    }
    out
}

fn bytes_of(w: &World, list: &[(u64, u32)]) -> Vec<u8> {
    list.iter()
        .flat_map(|&(o, l)| read(&w.data, o, l as usize))
        .collect()
}

#[test]
fn one_contiguous_buffer_is_one_reg_mr_a_direct_descriptor_and_remote_invalidate() {
    let mut w = World::new(1);
    pattern(&w.data, 0, HOST_MEM, 3);
    let mut reg = per_io(&mut w, 4, 2);
    let list = [(2 * PAGE + 300, 3 * PAGE as u32)];
    let m = reg.map(DataDir::Write, &segs(&w, &list)).expect("map");
    assert_eq!(m.kind, MappingKind::Frmr);
    assert!(m.remote_invalidate);
    assert!(m.imm_data.is_empty());
    assert_eq!(m.pre_wrs.len(), 1);
    let SendOp::RegMr { key, pages, .. } = &m.pre_wrs[0].op else {
        panic!("not a REG_MR: {:?}", m.pre_wrs[0]);
    };
    assert_eq!(pages.pages.len(), 4, "300 bytes in, 3 pages long: 4 pages");
    assert_eq!(pages.first_byte_offset, 300);
    let DataDescriptors::Direct(d) = m.data else {
        panic!("not direct: {:?}", m.data);
    };
    assert_eq!((d.rkey().0, d.len()), (*key, 3 * PAGE as u32));
    assert_eq!(m.handle.keys(), [MrKey(*key)]);
    let got = register_and_fetch(&mut w, m.pre_wrs, &[d]);
    assert!(
        got == bytes_of(&w, &list),
        "the region holds the buffer's bytes"
    );
}

#[test]
fn five_scattered_pages_aligned_inside_are_one_region() {
    let mut w = World::new(2);
    pattern(&w.data, 0, HOST_MEM, 4);
    let mut reg = per_io(&mut w, 4, 2);
    let list = [
        (9 * PAGE + 1000, (PAGE - 1000) as u32),
        (2 * PAGE, PAGE as u32),
        (30 * PAGE, 2 * PAGE as u32),
        (4 * PAGE, 17),
    ];
    let m = reg.map(DataDir::Write, &segs(&w, &list)).expect("map");
    assert_eq!(
        m.pre_wrs.len(),
        1,
        "only the first starts and the last ends mid-page"
    );
    let DataDescriptors::Direct(d) = m.data else {
        panic!("not direct: {:?}", m.data);
    };
    let got = register_and_fetch(&mut w, m.pre_wrs, &[d]);
    assert!(got == bytes_of(&w, &list));
}

#[test]
fn five_scattered_pages_with_a_gap_inside_a_page_are_two_regions_indirect() {
    let mut w = World::new(3);
    pattern(&w.data, 0, HOST_MEM, 5);
    let mut reg = per_io(&mut w, 4, 4);
    let list = [
        (10 * PAGE + 100, (PAGE - 100) as u32),
        (3 * PAGE, PAGE as u32),
        (7 * PAGE, 1000), // ends mid-page: the rest cannot share its region
        (12 * PAGE, PAGE as u32),
        (20 * PAGE, 300),
    ];
    let m = reg.map(DataDir::Read, &segs(&w, &list)).expect("map");
    assert_eq!(m.pre_wrs.len(), 2, "the page rules allow no fewer");
    assert!(
        !m.remote_invalidate,
        "two keys: the target cannot invalidate both"
    );
    let DataDescriptors::Indirect {
        table,
        total_len,
        inline,
    } = m.data.clone()
    else {
        panic!("not indirect: {:?}", m.data);
    };
    assert_eq!(inline.len(), 2);
    assert_eq!(table.len(), 32, "complete list, inline");
    assert_eq!(total_len, list.iter().map(|l| l.1).sum::<u32>());
    assert_ne!(inline[0].rkey(), inline[1].rkey());
    // Without the target's invalidation both regions wait for a LOCAL_INV each.
    let unmapped = reg.unmap(m.handle, None).expect("unmap");
    assert_eq!(unmapped.len(), 2);
    assert!(
        unmapped
            .iter()
            .all(|wr| matches!(wr.op, SendOp::LocalInv(_)))
    );
    assert_eq!(reg.counts().invalidating, 2);
}

#[test]
fn scattered_data_out_is_read_back_in_order_through_an_indirect_list() {
    let mut w = World::new(4);
    pattern(&w.data, 0, HOST_MEM, 6);
    let mut reg = per_io(&mut w, 2, 4);
    let list = [
        (10 * PAGE + 100, (PAGE - 100) as u32),
        (3 * PAGE, 1000),
        (7 * PAGE + 16, 2000),
        (12 * PAGE, PAGE as u32),
        (20 * PAGE, 300),
    ];
    let m = reg.map(DataDir::Write, &segs(&w, &list)).expect("map");
    let DataDescriptors::Indirect { inline, .. } = m.data.clone() else {
        panic!("not indirect: {:?}", m.data);
    };
    assert_eq!(inline.len(), 3);
    let got = register_and_fetch(&mut w, m.pre_wrs, &inline);
    assert!(got == bytes_of(&w, &list));
}

#[test]
fn a_small_write_is_immediate_data_and_registers_nothing() {
    let mut w = World::new(5);
    pattern(&w.data, 0, HOST_MEM, 7);
    let mut reg = per_io(&mut w, 1, 1);
    let list = [(PAGE + 7, 200), (9 * PAGE, 312)];
    let m = reg.map(DataDir::Write, &segs(&w, &list)).expect("map");
    assert_eq!(m.kind, MappingKind::Immediate);
    assert!(m.pre_wrs.is_empty() && m.handle.keys().is_empty());
    assert_eq!(m.data, DataDescriptors::None);
    assert_eq!(m.imm_data, bytes_of(&w, &list));
    assert_eq!(reg.counts().free, 1);
    // One byte more than the limit, or a read of the same size, registers.
    let over = reg
        .map(DataDir::Write, &segs(&w, &[(PAGE, 513)]))
        .expect("map");
    assert_eq!(over.kind, MappingKind::Frmr);
    let inv = reg.unmap(over.handle, None).expect("unmap");
    assert_eq!(inv.len(), 1);
    // No data: nothing at all.
    let none = reg.map(DataDir::None, &[]).expect("map");
    assert_eq!(none.kind, MappingKind::NoData);
}

#[test]
fn pool_exhaustion_is_busy_until_the_local_invalidations_complete() {
    let mut w = World::new(6);
    let mut reg = per_io(&mut w, 2, 1);
    let one = segs(&w, &[(PAGE, 4096)]);
    let a = reg.map(DataDir::Read, &one).expect("first");
    let b = reg.map(DataDir::Read, &one).expect("second");
    assert_eq!(
        reg.map(DataDir::Read, &one).map(|m| m.kind),
        Err(RegError::Busy { needed: 1, free: 0 })
    );
    let link = w.link;
    let mut wrs = a.pre_wrs;
    wrs.extend(b.pre_wrs);
    w.host_post(link.host, wrs);
    // The target ignored the remote-invalidate request: both need a LOCAL_INV.
    let mut inv = reg.unmap(a.handle, None).expect("unmap a");
    inv.extend(reg.unmap(b.handle, None).expect("unmap b"));
    assert!(matches!(
        reg.map(DataDir::Read, &one),
        Err(RegError::Busy { .. })
    ));
    w.host_post(link.host, inv);
    w.settle();
    let wcs = w.drain_host();
    assert_eq!(wcs.len(), 2, "{wcs:?}");
    for wc in wcs {
        assert_eq!(
            (wc.opcode, wc.status),
            (WcOpcode::LocalInv, WcStatus::Success)
        );
        assert_eq!(reg.handle_send_done(wc.wr_id, wc.status), Ok(true));
    }
    assert_eq!(reg.handle_send_done(12345, WcStatus::Success), Ok(false));
    let again = reg.map(DataDir::Read, &one).expect("free again");
    assert_eq!(again.kind, MappingKind::Frmr);
}

#[test]
fn keys_roll_on_every_registration_and_the_hca_accepts_each() {
    let mut w = World::new(7);
    pattern(&w.data, 0, HOST_MEM, 8);
    let mut reg = per_io(&mut w, 1, 1);
    let list = [(3 * PAGE, 512 + 64)];
    let mut seen: Vec<MrKey> = Vec::new();
    for round in 0..5 {
        let m = reg.map(DataDir::Write, &segs(&w, &list)).expect("map");
        let key = m.handle.keys()[0];
        assert!(!seen.contains(&key), "round {round}: {key} reused");
        if let Some(prev) = seen.last() {
            assert_eq!(key, prev.next_variant(), "round {round}");
        }
        seen.push(key);
        let DataDescriptors::Direct(d) = m.data else {
            panic!("direct")
        };
        let got = register_and_fetch(&mut w, m.pre_wrs, &[d]);
        assert!(got == bytes_of(&w, &list), "round {round}");
        // The target invalidated it (as our target does with SEND WITH INV).
        let link = w.link;
        w.host_recv(link.host, 1, 0, 64);
        let wr = hca::verbs::SendWr {
            wr_id: 2,
            op: SendOp::SendWithInv(d.rkey()),
            sg_list: [w.tgt.sge(0, 16)].into(),
            flags: hca::verbs::SendFlags::SIGNALED,
            ud: None,
        };
        w.tgt_post(link.tgt, wr);
        w.settle();
        let rsp = w.drain_host();
        assert_eq!(rsp[0].invalidated, Some(d.rkey()), "round {round}");
        assert!(
            reg.unmap(m.handle, rsp[0].invalidated)
                .expect("unmap")
                .is_empty()
        );
        let _ = w.drain_tgt();
    }
}

#[test]
fn a_buffer_needing_more_regions_than_a_command_may_use_is_refused_untouched() {
    let mut w = World::new(8);
    let mut reg = per_io(&mut w, 2, 2);
    let list = [(PAGE, 100), (3 * PAGE, 100), (5 * PAGE, 100)];
    let sg = segs(&w, &list);
    assert_eq!(
        reg.map(DataDir::Read, &sg).map(|m| m.kind),
        Err(RegError::TooFragmented { regions: 3, max: 2 })
    );
    assert_eq!(reg.counts().free, 4, "nothing taken");
    let bad = [Segment::new(&w.data, HOST_MEM as u64 - 10, 20)];
    assert!(matches!(
        reg.map(DataDir::Read, &bad),
        Err(RegError::SegmentOutOfBlock { index: 0, .. })
    ));
}
