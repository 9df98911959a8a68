//! Issue #16, Deliver 3–5, through the running daemon with the access-layer initiator: the
//! SBC-4 commands hosts send beyond READ and WRITE — WRITE AND VERIFY, VERIFY(12),
//! ORWRITE, PRE-FETCH, GET LBA STATUS (from the backing file's holes), WRITE ATOMIC, READ
//! DEFECT DATA, START STOP UNIT (a stop flushes, the unit stays ready) and PREVENT ALLOW
//! MEDIUM REMOVAL as a fixed disk — each with
//! its data checked and every error answer exact; the physical block size in READ
//! CAPACITY(16) and the Block Limits page; the timeouts REPORT SUPPORTED OPERATION CODES
//! gives. Loopback 127.0.138.x only.

mod common;
mod host;

use common::{TempDir, be32, cdb16, field_pointer, inquiry, pattern, read10, unmap_list, write10};
use host::node::{Form, Node};
use scsi::{SenseCode, Status};
use srp_target::config::TargetConfig;
use srp_target::daemon::Daemon;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::MetadataExt;

/// LUN 0: a 4 MiB file of 512-byte blocks on 4 KiB physical blocks; 1: RAM, 4096-byte
/// blocks; 2: read-only RAM.
const FILE: u32 = 0;
const RAM: u32 = 1;
const RO: u32 = 2;
const FILE_BLOCKS: u64 = 8192;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 138, host))
}

struct Rig {
    a: Node,
    dir: TempDir,
    _daemon: Daemon,
}

fn rig(t: u8) -> Rig {
    let dir = TempDir::new("daemon-sbc4");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d8a000\"\nstate_dir = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"file\"\nfile = \"{}\"\nsize = \"4MiB\"\nphysical_block_size = 4096\n\n\
         [[lun]]\nname = \"ram4k\"\nram = true\nsize = \"1MiB\"\nblock_size = 4096\n\n\
         [[lun]]\nname = \"ro\"\nram = true\nsize = \"64KiB\"\nread_only = true\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d8a001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"file\", 1 = \"ram4k\", 2 = \"ro\" }}\nallow = [\"any\"]\n",
        dir.path().join("state").display(),
        ip(t),
        dir.path().join("file.img").display(),
    );
    let config = TargetConfig::from_str(&text, "sbc4.toml")
        .expect("config valid")
        .config;
    let options = common::daemon_options();
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");
    let a = Node::open(ip(t + 1), ip(t), 0xa801, &config.iocs[0], Form::IbCm, false);
    Rig {
        a,
        dir,
        _daemon: daemon,
    }
}

/// A 10-, 12- or 16-byte LBA/length CDB of `op` with byte-1 `flags`.
fn cdb(op: u8, flags: u8, lba: u64, blocks: u32) -> Vec<u8> {
    match op >> 5 {
        1 => {
            let (l, n) = ((lba as u32).to_be_bytes(), (blocks as u16).to_be_bytes());
            vec![op, flags, l[0], l[1], l[2], l[3], 0, n[0], n[1], 0]
        }
        5 => {
            let mut c = vec![op, flags];
            c.extend((lba as u32).to_be_bytes());
            c.extend(blocks.to_be_bytes());
            c.extend([0, 0]);
            c
        }
        _ => cdb16(op, flags, lba, blocks).to_vec(),
    }
}

/// The field pointer of an INVALID FIELD IN CDB answer to `cdb`.
fn invalid_field(a: &mut Node, lun: u32, cdb: &[u8], dout: &[u8]) -> (u16, Option<u8>) {
    let s = a.check(lun, cdb, dout, 0, SenseCode::INVALID_FIELD_IN_CDB);
    let (byte, bit, in_cdb) = field_pointer(&s).expect("field pointer");
    assert!(in_cdb);
    (byte, bit)
}

#[test]
fn sbc4_commands_through_the_daemon() {
    let mut r = rig(1);
    write_and_verify(&mut r.a);
    verify12_and_orwrite(&mut r.a);
    prefetch(&mut r.a);
    get_lba_status(&mut r.a);
    unmap_lba_count(&mut r.a);
    write_atomic(&mut r.a);
    defects_and_removal(&mut r.a);
    start_stop(&mut r.a);
    let fs_block = std::fs::metadata(r.dir.path().join("file.img"))
        .expect("the file LUN's file")
        .blksize();
    geometry(&mut r.a, fs_block);
    timeouts(&mut r.a);
    transfer_limits(&mut r.a);
    one_command_timeouts(&mut r.a);
}

fn write_and_verify(a: &mut Node) {
    for (op, lun, bs) in [(0x2e, FILE, 512), (0xae, RAM, 4096), (0x8e, FILE, 512)] {
        for bytchk in [0x02, 0x00] {
            let d = pattern(4 * bs, op ^ bytchk);
            a.good(lun, &cdb(op, bytchk, 16, 4), &d, 0);
            assert_eq!(
                a.good(lun, &read10(16, 4), &[], d.len() as u32),
                d,
                "{op:#x}"
            );
        }
        // BYTCHK 10b and 11b are reserved for WRITE AND VERIFY.
        for bytchk in [0x04, 0x06] {
            let d = pattern(bs, 1);
            assert_eq!(
                invalid_field(a, lun, &cdb(op, bytchk, 0, 1), &d),
                (1, Some(2))
            );
        }
        let last = if lun == FILE { FILE_BLOCKS } else { 256 };
        a.check(
            lun,
            &cdb(op, 0x02, last - 1, 2),
            &pattern(2 * bs, 2),
            0,
            SenseCode::LBA_OUT_OF_RANGE,
        );
    }
    a.check(
        RO,
        &cdb(0x2e, 0x02, 0, 1),
        &pattern(512, 3),
        0,
        SenseCode::WRITE_PROTECTED,
    );
    // Longer than the transfer limit (256 KiB = 512 blocks): INVALID FIELD at the length.
    let s = a.check(
        FILE,
        &cdb(0x8e, 0, 0, 513),
        &[],
        0,
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((10, Some(7), true)));
}

fn verify12_and_orwrite(a: &mut Node) {
    let d = pattern(2 * 512, 0x33);
    a.good(FILE, &write10(40, 2, false), &d, 0);
    // VERIFY(12): BYTCHK=0 reads the range, BYTCHK=1 compares.
    a.good(FILE, &cdb(0xaf, 0x00, 40, 2), &[], 0);
    a.good(FILE, &cdb(0xaf, 0x02, 40, 2), &d, 0);
    let mut bad = d.clone();
    bad[700] ^= 1;
    let s = a.check(
        FILE,
        &cdb(0xaf, 0x02, 40, 2),
        &bad,
        0,
        SenseCode::MISCOMPARE_DURING_VERIFY,
    );
    assert_eq!(s.information(), Some(700));
    a.check(
        FILE,
        &cdb(0xaf, 0, FILE_BLOCKS, 1),
        &[],
        0,
        SenseCode::LBA_OUT_OF_RANGE,
    );
    // BYTCHK=10b is reserved: INVALID FIELD IN CDB at byte 1 bit 2. BYTCHK=11b compares
    // one block of data-out with each block of the range (SBC-4): GOOD when every block
    // equals it, else MISCOMPARE at the first differing byte of the range.
    assert_eq!(
        invalid_field(a, FILE, &cdb(0xaf, 0x04, 40, 2), &[]),
        (1, Some(2))
    );
    let same = pattern(512, 0x44);
    let other = pattern(512, 0x45);
    for (lba, block) in [(44, &same), (45, &same), (46, &other)] {
        a.good(FILE, &write10(lba, 1, false), block, 0);
    }
    a.good(FILE, &cdb(0xaf, 0x06, 44, 2), &same, 0);
    let s = a.check(
        FILE,
        &cdb(0xaf, 0x06, 45, 2),
        &same,
        0,
        SenseCode::MISCOMPARE_DURING_VERIFY,
    );
    let first = 512
        + other
            .iter()
            .zip(&same)
            .position(|(x, y)| x != y)
            .expect("differs");
    assert_eq!(s.information(), Some(first as u64));
    // ORWRITE: the blocks become old | new.
    let low = vec![0x0fu8; 1024];
    let high: Vec<u8> = (0..1024)
        .map(|i| if i % 2 == 0 { 0xf0 } else { 0x30 })
        .collect();
    a.good(FILE, &write10(50, 2, false), &low, 0);
    a.good(FILE, &cdb16(0x8b, 0x08, 50, 2), &high, 0);
    let want: Vec<u8> = low.iter().zip(&high).map(|(x, y)| x | y).collect();
    assert_eq!(a.good(FILE, &read10(50, 2), &[], 1024), want);
    a.check(
        RO,
        &cdb16(0x8b, 0, 0, 1),
        &[0; 512],
        0,
        SenseCode::WRITE_PROTECTED,
    );
    a.check(
        FILE,
        &cdb16(0x8b, 0, FILE_BLOCKS, 1),
        &[0; 512],
        0,
        SenseCode::LBA_OUT_OF_RANGE,
    );
}

fn prefetch(a: &mut Node) {
    // GOOD (the page cache promises nothing, so never CONDITION MET), with IMMED or
    // without, a GROUP NUMBER accepted (libiscsi's Prefetch tests send one).
    let mut grouped = cdb(0x34, 0x00, 0, 8);
    grouped[6] = 3;
    let mut grouped16 = cdb16(0x90, 0x02, 0, 8);
    grouped16[14] = 0x1f;
    for c in [
        cdb(0x34, 0x00, 0, 64),
        cdb(0x34, 0x02, 100, 8),
        grouped,
        grouped16.to_vec(),
        // PREFETCH LENGTH 0: through the last block.
        cdb16(0x90, 0x00, 10, 0).to_vec(),
        cdb16(0x90, 0x02, 0, 16).to_vec(),
    ] {
        let r = a.direct(FILE, &c, &[], 0);
        assert_eq!((r.status, r.code()), (Status::Good, None), "{c:02x?}");
    }
    a.good(RAM, &cdb(0x34, 0, 0, 256), &[], 0);
    let mut reserved = cdb(0x34, 0x00, 0, 8);
    reserved[6] = 0x20;
    assert_eq!(invalid_field(a, FILE, &reserved, &[]), (6, Some(5)));
    for c in [
        cdb(0x34, 0, FILE_BLOCKS - 1, 2),
        cdb16(0x90, 0, FILE_BLOCKS, 0).to_vec(),
    ] {
        a.check(FILE, &c, &[], 0, SenseCode::LBA_OUT_OF_RANGE);
    }
}

/// GET LBA STATUS from `lba`: (LBA, blocks, provisioning status) per descriptor.
fn lba_status(a: &mut Node, lun: u32, lba: u64, alloc: u32) -> Vec<(u64, u32, u8)> {
    lba_status_of(a, lun, lba, alloc, 0)
}

/// GET LBA STATUS from `lba` with REPORT TYPE `report_type` (byte 14).
fn lba_status_of(
    a: &mut Node,
    lun: u32,
    lba: u64,
    alloc: u32,
    report_type: u8,
) -> Vec<(u64, u32, u8)> {
    let mut c = [0u8; 16];
    c[0] = 0x9e;
    c[1] = 0x12;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&alloc.to_be_bytes());
    c[14] = report_type;
    let d = a.good(lun, &c, &[], alloc);
    let len = be32(&d) as usize;
    assert_eq!((len - 4) % 16, 0, "PARAMETER DATA LENGTH {len}");
    assert_eq!(d[7] & 0x01, 0x01, "RTP: REPORT TYPE processed");
    d[8..]
        .chunks(16)
        .map(|x| {
            (
                u64::from_be_bytes(x[..8].try_into().expect("8")),
                be32(&x[8..]),
                x[12] & 0x0f,
            )
        })
        .collect()
}

fn get_lba_status(a: &mut Node) {
    // The file LUN is sparse apart from what earlier steps wrote (LBAs below 128). Map two
    // runs of one 4 KiB filesystem block each far from them, then unmap the second.
    a.good(FILE, &write10(4096, 8, false), &pattern(4096, 7), 0);
    a.good(FILE, &write10(6144, 8, false), &pattern(4096, 8), 0);
    let s = lba_status(a, FILE, 2048, 4096);
    assert_eq!(
        s,
        [
            (2048, 2048, 1),
            (4096, 8, 0),
            (4104, 2040, 1),
            (6144, 8, 0),
            (6152, (FILE_BLOCKS - 6152) as u32, 1),
        ],
        "{s:?}"
    );
    // REPORT TYPE (SBC-4, byte 14 bits 1:0): 01b the runs not mapped (nonzero
    // PROVISIONING STATUS; nothing is anchored, so the deallocated ones), 10b the mapped
    // ones, 11b the deallocated ones; the first run reported may start past the LBA asked.
    let rest = (FILE_BLOCKS - 6152) as u32;
    let unmapped = [(2048, 2048, 1), (4104, 2040, 1), (6152, rest, 1)];
    assert_eq!(lba_status_of(a, FILE, 2048, 4096, 0x01), unmapped);
    assert_eq!(lba_status_of(a, FILE, 2048, 4096, 0x03), unmapped);
    assert_eq!(
        lba_status_of(a, FILE, 2048, 4096, 0x02),
        [(4096, 8, 0), (6144, 8, 0)]
    );
    assert_eq!(lba_status_of(a, FILE, 2048, 24, 0x02), [(4096, 8, 0)]);
    assert_eq!(lba_status_of(a, FILE, 4100, 4096, 0x03)[0], (4104, 2040, 1));
    assert_eq!(lba_status_of(a, FILE, 6150, 4096, 0x02), [(6150, 2, 0)]);
    // Nothing mapped from 6152 on: no descriptor, the header alone.
    assert_eq!(lba_status_of(a, FILE, 6152, 4096, 0x02), []);
    // Byte 14's other bits are reserved.
    let mut reserved = [0u8; 16];
    reserved[..2].copy_from_slice(&[0x9e, 0x12]);
    reserved[13] = 64;
    reserved[14] = 0x04;
    assert_eq!(invalid_field(a, FILE, &reserved, &[]), (14, Some(2)));
    // An allocation length with room for one descriptor: one, from the starting LBA.
    assert_eq!(lba_status(a, FILE, 4096, 24), [(4096, 8, 0)]);
    // From the middle of a run.
    assert_eq!(lba_status(a, FILE, 4100, 24), [(4100, 4, 0)]);
    let unmap = [0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0];
    a.good(FILE, &unmap, &unmap_list(&[(6144, 8)]), 0);
    assert_eq!(
        lba_status(a, FILE, 4104, 4096),
        [(4104, (FILE_BLOCKS - 4104) as u32, 1)]
    );
    // A RAM LUN keeps no holes: one mapped run.
    assert_eq!(lba_status(a, RAM, 3, 64), [(3, 253, 0)]);
    let mut past = [0u8; 16];
    past[0] = 0x9e;
    past[1] = 0x12;
    past[2..10].copy_from_slice(&FILE_BLOCKS.to_be_bytes());
    past[13] = 64;
    a.check(FILE, &past, &[], 64, SenseCode::LBA_OUT_OF_RANGE);
}

fn unmap_lba_count(a: &mut Node) {
    // MAXIMUM UNMAP LBA COUNT (2^20) bounds the whole command: 128 descriptors of the whole
    // 8192-block LU make it; a 129th of one block crosses it and is pointed at (its NUMBER
    // OF LOGICAL BLOCKS, list byte 8 + 16 * 128 + 8); nothing is unmapped.
    let bl = a.good(FILE, &inquiry(Some(0xb0), 64), &[], 64);
    assert_eq!(be32(&bl[20..]), 1 << 20, "MAXIMUM UNMAP LBA COUNT");
    let d = pattern(4096, 0x4c);
    a.good(FILE, &write10(4096, 8, false), &d, 0);
    let mut extents = vec![(0u64, FILE_BLOCKS as u32); 128];
    extents.push((4096, 1));
    let list = unmap_list(&extents);
    let len = (list.len() as u16).to_be_bytes();
    let c = [0x42, 0, 0, 0, 0, 0, 0, len[0], len[1], 0];
    let s = a.check(
        FILE,
        &c,
        &list,
        0,
        SenseCode::INVALID_FIELD_IN_PARAMETER_LIST,
    );
    assert_eq!(field_pointer(&s), Some((8 + 16 * 128 + 8, Some(7), false)));
    assert_eq!(a.good(FILE, &read10(4096, 8), &[], 4096), d);
}

fn write_atomic_cdb(lba: u64, boundary: u16, blocks: u16) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 0x9c;
    c[1] = 0x08;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..12].copy_from_slice(&boundary.to_be_bytes());
    c[12..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

fn write_atomic(a: &mut Node) {
    // A file: its intent log makes a write of up to the transfer limit (256 KiB: 512 of
    // the 512-byte blocks) atomic through a power loss too (tests/atomic_crash.rs), in
    // whole 4 KiB physical blocks (8 blocks), aligned to one.
    let d = pattern(8 * 512, 0x5a);
    a.good(FILE, &write_atomic_cdb(256, 0, 8), &d, 0);
    assert_eq!(a.good(FILE, &read10(256, 8), &[], d.len() as u32), d);
    let big = pattern(512 * 512, 6);
    a.good(FILE, &write_atomic_cdb(1024, 0, 512), &big, 0);
    assert_eq!(a.good(FILE, &read10(1024, 512), &[], big.len() as u32), big);
    let one = pattern(4096, 1);
    // (data-out, CDB, field pointer)
    type Case<'a> = (&'a [u8], [u8; 16], (u16, Option<u8>));
    let cases: [Case<'_>; 4] = [
        (&one, write_atomic_cdb(3, 0, 8), (2, Some(7))),
        (&one[..2048], write_atomic_cdb(8, 0, 4), (12, Some(7))),
        (&one, write_atomic_cdb(8, 8, 8), (10, Some(7))),
        (&[], write_atomic_cdb(0, 0, 520), (12, Some(7))),
    ];
    for (dout, c, at) in cases {
        assert_eq!(invalid_field(a, FILE, &c, dout), at, "{c:02x?}");
    }
    // Refused whole: the blocks a refused write names keep their data.
    assert_eq!(a.good(FILE, &read10(256, 8), &[], d.len() as u32), d);
    a.check(
        FILE,
        &write_atomic_cdb(FILE_BLOCKS, 0, 8),
        &one,
        0,
        SenseCode::LBA_OUT_OF_RANGE,
    );
    a.check(
        RO,
        &write_atomic_cdb(0, 0, 1),
        &[0; 512],
        0,
        SenseCode::WRITE_PROTECTED,
    );
    // RAM (lost whole with the process, nothing to tear), 4096-byte blocks with no larger
    // physical block: any alignment, up to the transfer limit (256 KiB: 64 blocks).
    a.good(RAM, &write_atomic_cdb(3, 0, 1), &pattern(4096, 3), 0);
    let big = pattern(64 * 4096, 4);
    a.good(RAM, &write_atomic_cdb(1, 0, 64), &big, 0);
    assert_eq!(a.good(RAM, &read10(1, 64), &[], big.len() as u32), big);
    assert_eq!(
        invalid_field(a, RAM, &write_atomic_cdb(0, 0, 65), &[]),
        (12, Some(7))
    );
}

fn defects_and_removal(a: &mut Node) {
    // READ DEFECT DATA(10): both lists asked for, long block format: an empty list.
    let d = a.good(FILE, &[0x37, 0, 0x1b, 0, 0, 0, 0, 0, 64, 0], &[], 64);
    assert_eq!(d, [0, 0x1b, 0, 0]);
    let d = a.good(FILE, &[0xb7, 0x08, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0], &[], 64);
    assert_eq!(d, [0, 0x08, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        invalid_field(a, FILE, &[0x37, 0, 0x07, 0, 0, 0, 0, 0, 64, 0], &[]),
        (2, Some(2))
    );
    // READ DEFECT DATA(12): DEFECT LIST FORMAT 111b (reserved) is in byte 1.
    assert_eq!(
        invalid_field(a, FILE, &[0xb7, 0x07, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0], &[]),
        (1, Some(2))
    );
    for prevent in [1, 0, 3, 0] {
        a.good(FILE, &[0x1e, 0, 0, 0, prevent, 0], &[], 0);
    }
    assert_eq!(
        invalid_field(a, FILE, &[0x1e, 0, 0, 0, 0x04, 0], &[]),
        (4, Some(2))
    );
}

fn start_stop(a: &mut Node) {
    let tur = [0u8; 6];
    // No medium to eject, no power condition page.
    assert_eq!(
        invalid_field(a, FILE, &[0x1b, 0, 0, 0, 0x02, 0], &[]),
        (4, Some(1))
    );
    assert_eq!(
        invalid_field(a, FILE, &[0x1b, 0, 0, 0, 0x30, 0], &[]),
        (4, Some(7))
    );
    assert_eq!(
        invalid_field(a, FILE, &[0x1b, 0, 0, 0x01, 0x01, 0], &[]),
        (3, Some(3))
    );
    // STOP (with IMMED, and without): flushed, GOOD, and the unit stays ready — a host
    // shutting down must not stop a shared LU for its peers (LIO refuses START=0).
    let d = pattern(512, 0x1b);
    a.good(FILE, &write10(60, 1, false), &d, 0);
    for stop in [[0x1b, 0x01, 0, 0, 0x00, 0], [0x1b, 0, 0, 0, 0x00, 0]] {
        a.good(FILE, &stop, &[], 0);
        a.good(FILE, &tur, &[], 0);
        assert_eq!(a.good(FILE, &read10(60, 1), &[], 512), d);
    }
    // NO_FLUSH: GOOD too; START: nothing to do.
    a.good(FILE, &[0x1b, 0, 0, 0, 0x04, 0], &[], 0);
    a.good(FILE, &inquiry(None, 96), &[], 96);
    a.good(RAM, &tur, &[], 0);
    a.good(FILE, &[0x1b, 0, 0, 0, 0x01, 0], &[], 0);
    a.good(FILE, &tur, &[], 0);
}

/// A field pointer: (byte, bit).
type FieldAt = (u16, Option<u8>);

fn transfer_limits(a: &mut Node) {
    // Longer than the transfer limit (256 KiB: 512 blocks): INVALID FIELD IN CDB at the
    // length field's most significant byte, before any data-out is asked for.
    let cases: [(Vec<u8>, FieldAt); 5] = [
        (cdb(0xaf, 0, 0, 513), (6, Some(7))),
        (cdb16(0x8b, 0, 0, 513).to_vec(), (10, Some(7))),
        (cdb(0x2e, 0x02, 0, 513), (7, Some(7))),
        (cdb(0xae, 0x02, 0, 513), (6, Some(7))),
        (cdb(0x2f, 0, 0, 513), (7, Some(7))),
    ];
    for (c, at) in cases {
        assert_eq!(invalid_field(a, FILE, &c, &[]), at, "{c:02x?}");
    }
    // At the limit: served.
    a.good(FILE, &cdb(0xaf, 0, 0, 512), &[], 0);
}

/// REPORT SUPPORTED OPERATION CODES, one command (REPORTING OPTIONS 001b, or 010b with a
/// service action), RCTD=1: its CDB usage data, then a timeouts descriptor.
fn one_command(a: &mut Node, opcode: u8, sa: Option<u8>) -> Vec<u8> {
    let mut c = [0xa3, 0x0c, 0x81, opcode, 0, 0, 0, 0, 0, 64, 0, 0];
    if let Some(sa) = sa {
        c[2] = 0x82;
        c[5] = sa;
    }
    a.good(FILE, &c, &[], 64)
}

fn one_command_timeouts(a: &mut Node) {
    for (opcode, sa, cdb_len, recommended) in [
        (0x8b, None, 16, 30),
        (0x9c, None, 16, 30),
        (0xaf, None, 12, 30),
        (0x90, None, 16, 60),
        (0x9e, Some(0x12), 16, 30),
        (0x56, None, 10, 30),
        (0xb7, None, 12, 10),
    ] {
        let d = one_command(a, opcode, sa);
        let at = 4 + cdb_len;
        assert_eq!(d.len(), at + 12, "{opcode:#x}: {d:02x?}");
        // CTDP (bit 7), SUPPORT 011b; CDB SIZE; the usage data starts with the opcode.
        assert_eq!(d[1], 0x83, "{opcode:#x}");
        assert_eq!(usize::from(u16::from_be_bytes([d[2], d[3]])), cdb_len);
        assert_eq!(d[4], opcode);
        let info = srp_target::exec::supported_opcodes()
            .iter()
            .find(|e| (e.opcode, e.service_action) == (opcode, sa))
            .expect("in the table");
        assert_eq!(&d[4..at], info.usage, "{opcode:#x}");
        // Timeouts descriptor: DESCRIPTOR LENGTH 0Ah, NOMINAL 1 s, RECOMMENDED.
        assert_eq!(&d[at..at + 2], &[0, 0x0a]);
        assert_eq!(be32(&d[at + 4..]), 1, "{opcode:#x}");
        assert_eq!(be32(&d[at + 8..]), recommended, "{opcode:#x}");
    }
    // GET LBA STATUS's usage data shows REPORT TYPE (byte 14 bits 1:0).
    assert_eq!(one_command(a, 0x9e, Some(0x12))[4 + 14], 0x03);
}

/// `fs_block`: the file LUN's filesystem block (`st_blksize`), its unmap unit.
fn geometry(a: &mut Node, fs_block: u64) {
    let rc16 = cdb16(0x9e, 0x10, 0, 32);
    let d = a.good(FILE, &rc16, &[], 32);
    assert_eq!(d[13] & 0x0f, 3, "2^3 logical blocks per physical block");
    assert_eq!(
        &d[14..16],
        &[0xc0, 0x00],
        "LBPME, LBPRZ, lowest aligned LBA 0 (a file starts aligned)"
    );
    assert_eq!(a.good(RAM, &rc16, &[], 32)[13] & 0x0f, 0);
    let bl = a.good(FILE, &inquiry(Some(0xb0), 64), &[], 64);
    assert_eq!(bl[3], 0x3c);
    assert_eq!(
        u16::from_be_bytes([bl[6], bl[7]]),
        8,
        "OPTIMAL TRANSFER LENGTH GRANULARITY"
    );
    assert_eq!(
        u64::from(be32(&bl[28..])),
        (fs_block / 512).max(8),
        "OPTIMAL UNMAP GRANULARITY: the file's filesystem block, at least a physical block ({fs_block}-byte filesystem blocks)"
    );
    assert_eq!(be32(&bl[32..]), 0x8000_0000, "UGAVALID, alignment 0");
    assert_eq!(
        be32(&bl[44..]),
        be32(&bl[8..]),
        "MAXIMUM ATOMIC TRANSFER LENGTH: the transfer limit (the file LU's intent log)"
    );
    assert_eq!(
        (be32(&bl[48..]), be32(&bl[52..])),
        (8, 8),
        "atomic alignment, granularity: a physical block"
    );
    assert_eq!(
        (be32(&bl[56..]), be32(&bl[60..])),
        (0, 0),
        "no atomic boundaries"
    );
    // RAM: nothing a power loss could tear; the transfer limit, no alignment.
    let bl = a.good(RAM, &inquiry(Some(0xb0), 64), &[], 64);
    assert_eq!(
        (be32(&bl[44..]), be32(&bl[48..]), be32(&bl[52..])),
        (64, 0, 0),
        "RAM: MAXIMUM ATOMIC TRANSFER LENGTH the transfer limit, no atomic alignment"
    );
    let std = a.good(FILE, &inquiry(None, 96), &[], 96);
    let versions: Vec<u16> = std[58..74]
        .chunks(2)
        .map(|v| u16::from_be_bytes([v[0], v[1]]))
        .collect();
    assert!(
        versions.contains(&0x0600) && versions.contains(&0x04c0),
        "{versions:04x?}"
    );
}

fn timeouts(a: &mut Node) {
    // All commands with RCTD: every descriptor carries a timeouts descriptor with a
    // recommended timeout.
    let c = [0xa3, 0x0c, 0x80, 0, 0, 0, 0, 0, 0x20, 0, 0, 0];
    let d = a.good(FILE, &c, &[], 0x2000);
    let len = be32(&d) as usize;
    assert_eq!(len % 20, 0);
    assert_eq!(len / 20, srp_target::exec::supported_opcodes().len());
    for desc in d[4..4 + len].chunks(20) {
        assert_eq!(desc[5] & 0x02, 0x02, "CTDP: {desc:02x?}");
        assert_eq!(&desc[8..10], &[0, 0x0a]);
        let recommended = be32(&desc[16..]);
        assert!((10..=120).contains(&recommended), "{desc:02x?}");
    }
}
