//! SPC commands through `LogicalUnit::execute`: INQUIRY and VPD, identity across IOCs,
//! READ CAPACITY, MODE SENSE/SELECT, REPORT LUNS/RSOC/RTPG, unsupported opcodes, unknown LUN.

mod common;

use common::*;
use scsi::{Lun, SenseCode, Status};
use srp_target::exec::execute_unknown_lun;
use srp_target::{BlockSize, LogicalUnit, LuConfig, RamBackend};

fn inquiry(page: Option<u8>, alloc: u16) -> [u8; 6] {
    let a = alloc.to_be_bytes();
    match page {
        None => [0x12, 0, 0, a[0], a[1], 0],
        Some(p) => [0x12, 1, p, a[0], a[1], 0],
    }
}

#[test]
fn standard_inquiry() {
    let lu = ram_lu(16, BlockSize::B512);
    let d = good(&lu, &inquiry(None, 255), &[]);
    assert_eq!(d.len(), 96);
    assert_eq!(d[0], 0x00, "direct access, connected");
    assert_eq!(d[2], 0x06, "SPC-4");
    assert_eq!(d[3] & 0x0f, 2, "response data format 2");
    assert_eq!(d[4], 91);
    assert_eq!(d[5] & 0x30, 0x10, "TPGS implicit ALUA");
    assert_eq!(&d[8..16], b"SRPSTACK");
    assert_eq!(&d[16..32], b"SRP LUN         ");
    assert_eq!(&d[32..36], b"0001");
    // Version descriptors (SPC-4 table 143): SAM-5, SPC-4, SBC-3, SRP r16a; then zeros.
    let v: Vec<u16> = d[58..74]
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(v, [0x00a0, 0x0460, 0x0600, 0x04c0, 0x0955, 0, 0, 0]);
    assert!(d[74..].iter().all(|&b| b == 0));
    // Cut to the allocation length.
    assert_eq!(good(&lu, &inquiry(None, 5), &[]), d[..5].to_vec());
    // EVPD=0 with a page code: INVALID FIELD IN CDB byte 2.
    let s = check(
        &lu,
        &[0x12, 0, 0x80, 0, 255, 0],
        &[],
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((2, Some(7), true)));
}

#[test]
fn vpd_pages() {
    let lu = ram_lu(16, BlockSize::B4096);
    let d = good(&lu, &inquiry(Some(0x00), 255), &[]);
    assert_eq!(
        d,
        vec![0, 0, 0, 7, 0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2]
    );
    let d = good(&lu, &inquiry(Some(0x80), 255), &[]);
    assert_eq!(&d[4..], lu.identity().serial().as_bytes());
    assert_eq!(usize::from(d[3]), d.len() - 4);
    let b0 = good(&lu, &inquiry(Some(0xb0), 255), &[]);
    assert_eq!((b0[1], b0.len()), (0xb0, 64));
    assert_eq!(b0[4] & 1, 1, "WSNZ");
    assert_eq!(b0[5], 255, "max compare and write");
    assert_eq!(
        u32::from_be_bytes(b0[8..12].try_into().expect("4")),
        2048,
        "8 MiB / 4 KiB"
    );
    assert_eq!(
        u32::from_be_bytes(b0[24..28].try_into().expect("4")),
        256,
        "unmap descriptors"
    );
    let b1 = good(&lu, &inquiry(Some(0xb1), 255), &[]);
    assert_eq!(&b1[4..6], &[0, 1], "non-rotating");
    let b2 = good(&lu, &inquiry(Some(0xb2), 255), &[]);
    assert_eq!(
        b2,
        vec![0, 0xb2, 0, 4, 0, 0x80 | 0x40 | 0x20 | 0x04, 0x02, 0]
    );
    let s = check(
        &lu,
        &inquiry(Some(0x86), 255),
        &[],
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((2, Some(7), true)));
}

#[test]
fn device_identification_is_per_lun_and_per_port() {
    // The same LUN name exported by two IOCs (two LogicalUnit values, e.g. after a restart).
    let mk = || {
        let b = RamBackend::new(8, BlockSize::B512).expect("ram");
        LogicalUnit::new(Box::new(b), LuConfig::new(identity("vol-7")))
    };
    let (a, b) = (mk(), mk());
    let mut din = Vec::new();
    let page = |lu: &LogicalUnit, ioc: u16, din: &mut Vec<u8>| {
        let nd = common::nexus_data(ioc);
        let out = lu
            .execute(&nd.nexus(), &inquiry(Some(0x83), 255), &[], din)
            .expect("ok");
        assert_eq!(out.status, Status::Good);
        designators(din)
    };
    let da = page(&a, 0, &mut din);
    let db = page(&b, 1, &mut din);
    assert_eq!(da.len(), 4);
    // NAA 6 (binary, LU association, type 3), 16 bytes: same through both IOCs.
    assert_eq!((da[0].0, da[0].1, da[0].2.len()), (0x01, 0x03, 16));
    assert_eq!(da[0].2[0] >> 4, 6);
    assert_eq!(da[0].2.as_slice(), a.identity().naa());
    assert_eq!(da[0], db[0]);
    // T10 vendor ID (ASCII): "SRPSTACK" + serial, same through both IOCs.
    assert_eq!((da[1].0, da[1].1), (0x02, 0x01));
    assert!(da[1].2.starts_with(b"SRPSTACK"));
    assert_eq!(da[1], db[1]);
    // Relative target port (type 4) and target port group (type 5): per IOC.
    assert_eq!((da[2].1, da[2].2.clone()), (0x14, vec![0, 0, 0, 1]));
    assert_eq!((db[2].1, db[2].2.clone()), (0x14, vec![0, 0, 0, 2]));
    assert_eq!((da[3].1, da[3].2.clone()), (0x15, vec![0, 0, 0, 1]));
    assert_eq!((db[3].1, db[3].2.clone()), (0x15, vec![0, 0, 0, 2]));
    // A different name: a different NAA and serial.
    let c = ram_lu(8, BlockSize::B512);
    assert_ne!(c.identity().naa(), a.identity().naa());
    assert_ne!(c.identity().serial(), a.identity().serial());
}

#[test]
fn read_capacity_10_and_16() {
    let lu = ram_lu(100, BlockSize::B4096);
    let d = good(&lu, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(d, vec![0, 0, 0, 99, 0, 0, 0x10, 0]);
    let mut c = [0u8; 16];
    c[0] = 0x9e;
    c[1] = 0x10;
    c[13] = 32;
    let d = good(&lu, &c, &[]);
    assert_eq!(d.len(), 32);
    assert_eq!(u64::from_be_bytes(d[..8].try_into().expect("8")), 99);
    assert_eq!(u32::from_be_bytes(d[8..12].try_into().expect("4")), 4096);
    assert_eq!(d[14] & 0xc0, 0xc0, "LBPME, LBPRZ");
    c[13] = 12;
    assert_eq!(good(&lu, &c, &[]).len(), 12);
}

#[test]
fn mode_sense_pages() {
    let lu = ram_lu(16, BlockSize::B512);
    // MODE SENSE(6), caching page, DBD.
    let d = good(&lu, &[0x1a, 0x08, 0x08, 0, 255, 0], &[]);
    assert_eq!(d.len(), 4 + 20);
    assert_eq!(d[0] as usize, d.len() - 1);
    assert_eq!(d[2] & 0x80, 0, "not write protected");
    assert_eq!(d[3], 0, "no block descriptor");
    assert_eq!(&d[4..6], &[0x08, 0x12]);
    assert_eq!(d[6] & 0x04, 0x04, "WCE on by default");
    // MODE SENSE(10), all pages, with the block descriptor.
    let d = good(&lu, &[0x5a, 0, 0x3f, 0, 0, 0, 0, 0, 255, 0], &[]);
    assert_eq!(u16::from_be_bytes([d[0], d[1]]) as usize, d.len() - 2);
    assert_eq!(u16::from_be_bytes([d[6], d[7]]), 8);
    assert_eq!(&d[8..12], &[0, 0, 0, 16], "blocks");
    assert_eq!(&d[13..16], &[0, 2, 0], "block length 512");
    assert_eq!(&d[16..18], &[0x08, 0x12]);
    assert_eq!(&d[36..38], &[0x0a, 0x0a]);
    // Changeable values: nothing, unless the configuration allows WCE.
    let d = good(&lu, &[0x1a, 0x08, 0x48, 0, 255, 0], &[]);
    assert_eq!(d[4], 0x08, "PS 0: not savable");
    assert!(d[6..].iter().all(|&b| b == 0));
    let d = good(&changeable_lu(None), &[0x1a, 0x08, 0x48, 0, 255, 0], &[]);
    assert_eq!(d[6], 0x04, "only WCE");
    assert!(d[7..].iter().all(|&b| b == 0));
    // Saved values: SAVING PARAMETERS NOT SUPPORTED.
    check(
        &lu,
        &[0x1a, 0x08, 0xc8, 0, 255, 0],
        &[],
        SenseCode::SAVING_PARAMETERS_NOT_SUPPORTED,
    );
    // Unsupported page: INVALID FIELD IN CDB at byte 2.
    let s = check(
        &lu,
        &[0x1a, 0x08, 0x1c, 0, 255, 0],
        &[],
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((2, Some(5), true)));
    // Write protect shows in the device-specific parameter.
    let ro = read_only_lu(8);
    assert_eq!(
        good(&ro, &[0x1a, 0x08, 0x08, 0, 255, 0], &[])[2] & 0x80,
        0x80
    );
}

/// A RAM LU whose WCE MODE SELECT may change (`[[lun]] write_cache_changeable`), its
/// caching page saved at `saved` if given.
fn changeable_lu(saved: Option<std::path::PathBuf>) -> srp_target::LogicalUnit {
    let b = srp_target::RamBackend::new(16, BlockSize::B512).expect("ram");
    let wce = saved
        .as_deref()
        .and_then(|p| srp_target::exec::mode::load_saved_wce(p).expect("a readable saved page"));
    let cfg = srp_target::LuConfig {
        wce_changeable: true,
        default_write_cache: Some(true),
        saved_write_cache: wce,
        write_cache: wce.unwrap_or(true),
        saved_pages: saved,
        ..srp_target::LuConfig::new(identity("changeable"))
    };
    srp_target::LogicalUnit::new(Box::new(b), cfg)
}

/// MODE SELECT(6) of the caching page with WCE `on`, SP `sp`.
fn select_wce(on: bool, sp: bool) -> ([u8; 6], Vec<u8>) {
    let mut list = vec![0u8; 4];
    list.extend([0x08, 0x12, if on { 0x04 } else { 0 }]);
    list.extend([0; 17]);
    ([0x15, 0x10 | u8::from(sp), 0, 0, list.len() as u8, 0], list)
}

#[test]
fn wce_is_the_configurations_unless_it_is_changeable() {
    let lu = ram_lu(16, BlockSize::B512);
    let (cdb, list) = select_wce(false, false);
    let s = check(&lu, &cdb, &list, SenseCode::INVALID_FIELD_IN_PARAMETER_LIST);
    assert_eq!(field_pointer(&s), Some((6, None, false)), "at WCE's byte");
    assert!(lu.write_cache(), "unchanged");
    // The page as it is passes.
    let (cdb, list) = select_wce(true, false);
    good(&lu, &cdb, &list);
}

#[test]
fn a_saved_caching_page_survives_a_restart() {
    let dir = TempDir::new("saved-mode");
    let path = dir.path().join("state").join("lun-vol.mode");
    let lu = changeable_lu(Some(path.clone()));
    let d = good(&lu, &[0x1a, 0x08, 0x08, 0, 255, 0], &[]);
    assert_eq!(d[4], 0x88, "PS 1: savable");
    // SP=0 changes the current value only.
    let (cdb, list) = select_wce(false, false);
    good(&lu, &cdb, &list);
    assert!(!lu.write_cache());
    assert!(!path.exists(), "nothing saved");
    let saved = good(&lu, &[0x1a, 0x08, 0xc8, 0, 255, 0], &[]);
    assert_eq!(
        saved[6] & 0x04,
        0x04,
        "saved values: the default until one is saved"
    );
    // SP=1 saves it (as Linux sd does when PS is set).
    let (cdb, list) = select_wce(false, true);
    good(&lu, &cdb, &list);
    let text = std::fs::read_to_string(&path).expect("saved");
    assert!(text.contains("wce = false"), "{text}");
    let saved = good(&lu, &[0x1a, 0x08, 0xc8, 0, 255, 0], &[]);
    assert_eq!(saved[6] & 0x04, 0);
    let default = good(&lu, &[0x1a, 0x08, 0x88, 0, 255, 0], &[]);
    assert_eq!(default[6] & 0x04, 0x04, "the configuration's");
    // "Restart": a new LU over the same state starts with WCE off.
    drop(lu);
    let again = changeable_lu(Some(path.clone()));
    assert!(!again.write_cache());
    // A damaged file is an error, not a guess.
    std::fs::write(&path, "wce = maybe\n").expect("damage");
    let e = srp_target::exec::mode::load_saved_wce(&path).expect_err("damaged");
    assert!(e.contains("lun-vol.mode"), "{e}");
}

#[test]
fn mode_select_changes_wce() {
    let lu = changeable_lu(None);
    assert!(lu.write_cache());
    // Header (4) + caching page with WCE=0, PF=1.
    let mut list = vec![0u8; 4];
    let mut page = vec![0u8; 20];
    page[0] = 0x08;
    page[1] = 0x12;
    list.extend(&page);
    good(&lu, &[0x15, 0x10, 0, 0, list.len() as u8, 0], &list);
    assert!(!lu.write_cache());
    let d = good(&lu, &[0x1a, 0x08, 0x08, 0, 255, 0], &[]);
    assert_eq!(d[6] & 0x04, 0);
    // Back on through MODE SELECT(10).
    let mut list10 = vec![0u8; 8];
    page[2] = 0x04;
    list10.extend(&page);
    good(
        &lu,
        &[0x55, 0x10, 0, 0, 0, 0, 0, 0, list10.len() as u8, 0],
        &list10,
    );
    assert!(lu.write_cache());
    // SP=1 without a state directory: SAVING PARAMETERS NOT SUPPORTED.
    check(
        &lu,
        &[0x15, 0x11, 0, 0, list.len() as u8, 0],
        &list,
        SenseCode::SAVING_PARAMETERS_NOT_SUPPORTED,
    );
    // A non-changeable bit (RCD, byte 2 bit 0): INVALID FIELD IN PARAMETER LIST at it.
    let mut bad = list.clone();
    bad[6] |= 0x01;
    let s = check(
        &lu,
        &[0x15, 0x10, 0, 0, bad.len() as u8, 0],
        &bad,
        SenseCode::INVALID_FIELD_IN_PARAMETER_LIST,
    );
    assert_eq!(field_pointer(&s), Some((6, None, false)));
    // A page that runs past the list: PARAMETER LIST LENGTH ERROR.
    check(
        &lu,
        &[0x15, 0x10, 0, 0, 10, 0],
        &list[..10],
        SenseCode::PARAMETER_LIST_LENGTH_ERROR,
    );
    // An unknown page.
    let mut unk = vec![0u8; 4];
    unk.extend([0x1c, 0x0a]);
    unk.extend([0; 10]);
    check(
        &lu,
        &[0x15, 0x10, 0, 0, unk.len() as u8, 0],
        &unk,
        SenseCode::INVALID_FIELD_IN_PARAMETER_LIST,
    );
    assert!(lu.write_cache(), "failed MODE SELECTs change nothing");
}

#[test]
fn write_cache_off_makes_writes_durable() {
    let dir = TempDir::new("wce");
    let path = dir.path().join("lun");
    let b = srp_target::FileBackend::create(&path, 8 * 512, BlockSize::B512).expect("file");
    let cfg = srp_target::LuConfig {
        wce_changeable: true,
        ..srp_target::LuConfig::new(identity("lun"))
    };
    let lu = srp_target::LogicalUnit::new(Box::new(b), cfg);
    let mut list = vec![0u8; 4];
    list.extend([0x08, 0x12]);
    list.extend([0; 18]);
    good(&lu, &[0x15, 0x10, 0, 0, list.len() as u8, 0], &list);
    assert!(!lu.write_cache());
    good(&lu, &write10(1, 1, false), &[0x42; 512]);
    let got = std::fs::read(dir.path().join("lun")).expect("read");
    assert_eq!(&got[512..1024], &[0x42; 512]);
}

#[test]
fn report_luns() {
    let lu = ram_lu(8, BlockSize::B512);
    let d = good(&lu, &[0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
    assert_eq!(&d[..8], &[0, 0, 0, 16, 0, 0, 0, 0]);
    assert_eq!(&d[8..16], &Lun::ZERO.0);
    assert_eq!(&d[16..24], &Lun::from_number(1).expect("1").0);
    // Well-known only: empty.
    let d = good(&lu, &[0xa0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
    assert_eq!(d, vec![0; 8]);
    // Allocation length below 16.
    let s = check(
        &lu,
        &[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 0, 0],
        &[],
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((6, Some(7), true)));
}

#[test]
fn report_supported_opcodes_lists_persistent_reservations() {
    let lu = ram_lu(8, BlockSize::B512);
    let d = good(&lu, &[0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0], &[]);
    let len = u32::from_be_bytes(d[..4].try_into().expect("4")) as usize;
    assert_eq!(len, d.len() - 4);
    let ops: Vec<u8> = d[4..].chunks(8).map(|c| c[0]).collect();
    assert!(ops.contains(&0x28) && ops.contains(&0x89) && ops.contains(&0x42));
    // PR IN: 4 service actions; PR OUT: 7 (REGISTER AND MOVE is not supported).
    assert_eq!(ops.iter().filter(|&&o| o == 0x5e).count(), 4);
    assert_eq!(ops.iter().filter(|&&o| o == 0x5f).count(), 7);
    // One command: READ(10) supported with its usage data.
    let d = good(&lu, &[0xa3, 0x0c, 0x01, 0x28, 0, 0, 0, 0, 0, 64, 0, 0], &[]);
    assert_eq!((d[1] & 0x07, d[3]), (0b011, 10));
    assert_eq!(d[4], 0x28);
    // PR IN / READ KEYS and PR OUT / RESERVE with their usage data.
    let d = good(&lu, &[0xa3, 0x0c, 0x02, 0x5e, 0, 0, 0, 0, 0, 64, 0, 0], &[]);
    assert_eq!((d[1] & 0x07, d[3]), (0b011, 10));
    assert_eq!(&d[4..14], &[0x5e, 0x00, 0, 0, 0, 0, 0, 0xff, 0xff, 0]);
    let d = good(&lu, &[0xa3, 0x0c, 0x02, 0x5f, 0, 1, 0, 0, 0, 64, 0, 0], &[]);
    assert_eq!((d[1] & 0x07, d[3]), (0b011, 10));
    assert_eq!(
        &d[4..14],
        &[0x5f, 0x01, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0]
    );
    // REGISTER AND MOVE: not supported.
    let d = good(&lu, &[0xa3, 0x0c, 0x02, 0x5f, 0, 7, 0, 0, 0, 64, 0, 0], &[]);
    assert_eq!(d[1] & 0x07, 0b001);
}

#[test]
fn report_target_port_groups() {
    let lu = ram_lu(8, BlockSize::B512);
    let d = good(&lu, &[0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
    // Two groups of one port each: 4 + 2 * (8 + 4).
    assert_eq!(d.len(), 28);
    assert_eq!(&d[..4], &[0, 0, 0, 24]);
    assert_eq!(d[4] & 0x0f, 0, "active/optimized");
    assert_eq!(&d[6..8], &[0, 1]);
    assert_eq!(d[11], 1);
    assert_eq!(&d[12..16], &[0, 0, 0, 1]);
    assert_eq!(&d[18..20], &[0, 2]);
    assert_eq!(&d[24..28], &[0, 0, 0, 2]);
    // Extended header.
    let d = good(&lu, &[0xa3, 0x2a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[]);
    assert_eq!((d.len(), d[4]), (32, 0x10));
}

#[test]
fn misc_spc_commands() {
    let lu = ram_lu(8, BlockSize::B512);
    good(&lu, &[0x00, 0, 0, 0, 0, 0], &[]);
    good(&lu, &[0x1b, 0, 0, 0, 0x01, 0], &[]);
    let d = good(&lu, &[0x03, 0, 0, 0, 18, 0], &[]);
    assert_eq!((d.len(), d[0], d[2] & 0x0f, d[12]), (18, 0x70, 0, 0));
    let d = good(&lu, &[0x03, 1, 0, 0, 252, 0], &[]);
    assert_eq!(d[0], 0x72, "descriptor format on DESC=1");
}

#[test]
fn unsupported_opcodes() {
    let lu = ram_lu(8, BlockSize::B512);
    let s = check(
        &lu,
        &[0xc0, 0, 0, 0, 0, 0],
        &[],
        SenseCode::INVALID_COMMAND_OPERATION_CODE,
    );
    assert_eq!(
        (s.code().key.into(), s.code().asc, s.code().ascq),
        (5u8, 0x20, 0x00)
    );
    // PERSISTENT RESERVE OUT / REGISTER AND MOVE is not routed: the SERVICE ACTION field.
    let s = check(
        &lu,
        &[0x5f, 0x07, 0, 0, 0, 0, 0, 0, 24, 0],
        &[0; 24],
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((1, Some(4), true)));
    // A reserved bit: INVALID FIELD IN CDB with the parser's pointer (READ(10) byte 1 bit 0).
    let mut c = read10(0, 1);
    c[1] = 0x01;
    let s = check(&lu, &c, &[], SenseCode::INVALID_FIELD_IN_CDB);
    assert_eq!(field_pointer(&s), Some((1, Some(0), true)));
}

#[test]
fn unknown_lun() {
    let nd = common::nexus_data(0);
    let mut din = Vec::new();
    let out = execute_unknown_lun(&nd.nexus(), &inquiry(None, 96), &mut din).expect("ok");
    assert_eq!((out.status, din.len(), din[0]), (Status::Good, 96, 0x7f));
    let out = execute_unknown_lun(
        &nd.nexus(),
        &[0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
        &mut din,
    )
    .expect("ok");
    assert_eq!((out.status, din.len()), (Status::Good, 24));
    let out = execute_unknown_lun(&nd.nexus(), &[0x03, 0, 0, 0, 18, 0], &mut din).expect("ok");
    assert_eq!(
        (out.status, din[2] & 0x0f, din[12]),
        (Status::Good, 5, 0x25)
    );
    let out = execute_unknown_lun(&nd.nexus(), &read10(0, 1), &mut din).expect("ok");
    assert_eq!(out.status, Status::CheckCondition);
    assert_eq!(
        out.sense.map(|s| s.code()),
        Some(SenseCode::LUN_NOT_SUPPORTED)
    );
    assert!(din.is_empty());
}
