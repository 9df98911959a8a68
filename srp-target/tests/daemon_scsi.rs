//! Issue #5 acceptance, the SCSI set through the running daemon: a test initiator on the
//! access layer logs in over the IB CM form and, in a second test, the RDMA-CM form, and
//! runs every command the target implements with data checks (RAM and file LUNs, 512- and
//! 4096-byte blocks, a read-only LUN, a LUN exported by two IOCs), every SCSI error answer,
//! residuals both ways, and data in direct, indirect (inline and fetched table) and
//! immediate form. Loopback 127.0.115.x only.

mod common;
mod host;

use common::{
    TempDir, be32, cdb16, compare_and_write, designators, field_pointer, inquiry, pattern, read10,
    unmap_list, write10,
};
use host::node::{FILL, Form, In, Node, Out, cc};
use scsi::{Lun, SenseCode, Status};
use srp::wire::login::LoginRspFlags;
use srp::wire::rsp::Residual;
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::FileExt;

/// LUN numbers of ioc-a: RAM 512-byte blocks, file 4096, read-only RAM, file 512.
const RAM: u32 = 0;
const F4K: u32 = 1;
const RO: u32 = 2;
const F512: u32 = 3;
/// ioc-b exports the 4096-byte file LUN as LUN 5.
const B_F4K: u32 = 5;
const RDMA_CM_PORT: u16 = 5571;
const MAX_TRANSFER: u64 = 256 << 10;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 115, host))
}

struct Rig {
    a: Node,
    b: Node,
    dir: TempDir,
    _daemon: Daemon,
}

/// A daemon at 127.0.115.`t`; node A (.`t`+1) logged in to ioc-a and node B (.`t`+2) to
/// ioc-b, both in `form` and asking for immediate data.
fn rig(t: u8, form: Form) -> Rig {
    let dir = TempDir::new("daemon-scsi");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300d5c500\"\nrdma_cm_port = {RDMA_CM_PORT}\n\
         state_dir = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"ram512\"\nram = true\nsize = \"1MiB\"\n\n\
         [[lun]]\nname = \"file4k\"\nfile = \"{}\"\nsize = \"1MiB\"\nblock_size = 4096\n\n\
         [[lun]]\nname = \"ro\"\nram = true\nsize = \"64KiB\"\nread_only = true\n\n\
         [[lun]]\nname = \"file512\"\nfile = \"{}\"\nsize = \"512KiB\"\n\
         write_cache_changeable = true\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d5c501\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"ram512\", 1 = \"file4k\", 2 = \"ro\", 3 = \"file512\" }}\n\
         allow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300d5c502\"\nports = [\"p0\"]\n\
         exports = {{ 5 = \"file4k\" }}\nallow = [\"any\"]\n",
        dir.path().join("state").display(),
        ip(t),
        dir.path().join("file4k.img").display(),
        dir.path().join("file512.img").display(),
    );
    let config = TargetConfig::from_str(&text, "scsi.toml")
        .expect("config valid")
        .config;
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 16;
    options.limits.max_transfer = MAX_TRANSFER;
    options.limits.max_table_entries = 64;
    options.shutdown_step = std::time::Duration::from_millis(300);
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");
    let a = Node::open(ip(t + 1), ip(t), 0xa001, &config.iocs[0], form, true);
    let b = Node::open(ip(t + 2), ip(t), 0xb001, &config.iocs[1], form, true);
    for n in [&a, &b] {
        assert_eq!(n.rsp.req_lim_delta, 16, "credits granted");
        assert!(
            n.rsp.flags.contains(LoginRspFlags::IMMED_SUPP),
            "{:?}",
            n.rsp
        );
    }
    Rig {
        a,
        b,
        dir,
        _daemon: daemon,
    }
}

fn full_set(form: Form, t: u8) {
    let mut r = rig(t, form);
    inquiry_and_identity(&mut r);
    capacity_modes_and_reports(&mut r);
    for (lun, bs, blocks) in [(RAM, 512, 2048), (F4K, 4096, 256), (F512, 512, 1024)] {
        block_io(&mut r, lun, bs, blocks);
        provisioning_and_compare(&mut r.a, lun, bs);
    }
    error_answers(&mut r.a);
    residuals(&mut r.a);
    descriptor_forms(&mut r.a);
    reservations(&mut r.a);
}

#[test]
fn full_scsi_set_over_the_ib_cm_login_form() {
    full_set(Form::IbCm, 1);
}

#[test]
fn full_scsi_set_over_the_rdma_cm_login_form() {
    full_set(Form::RdmaCm(RDMA_CM_PORT), 11);
}

fn inquiry_and_identity(r: &mut Rig) {
    let a = &mut r.a;
    for lun in [RAM, F4K, RO, F512] {
        assert!(a.good(lun, &[0; 6], &[], 0).is_empty(), "TEST UNIT READY");
    }
    // Standard INQUIRY into a 128-byte buffer: 96 bytes moved, DIUNDER 32, the rest
    // untouched.
    let rep = a.run(RAM, &inquiry(None, 128), Out::None, In::Direct(128));
    assert_eq!(
        (rep.status, rep.din, rep.dout),
        (Status::Good, Residual::Underflow(32), Residual::None)
    );
    let d = rep.moved();
    assert_eq!((d.len(), d[0], d[2], d[4]), (96, 0x00, 0x06, 91));
    assert_eq!(&d[8..16], b"SRPSTACK");
    assert_eq!(&d[16..32], b"SRP LUN         ");
    // Version descriptors: SAM-5, SPC-4, SBC-4, SBC-3, SRP r16a.
    assert_eq!(
        d[58..74],
        [
            0x00, 0xa0, 0x04, 0x60, 0x06, 0x00, 0x04, 0xc0, 0x09, 0x55, 0, 0, 0, 0, 0, 0
        ]
    );
    assert!(rep.data[96..].iter().all(|&b| b == FILL));
    let vpd0 = a.good(F4K, &inquiry(Some(0), 255), &[], 255);
    assert_eq!(vpd0, [0, 0, 0, 7, 0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1, 0xb2]);
    // Serial and NAA: the LUN's own, the same through ioc-b (another LUN number).
    let serial = a.good(F4K, &inquiry(Some(0x80), 255), &[], 255);
    assert_eq!(
        (serial[1], usize::from(serial[3])),
        (0x80, serial.len() - 4)
    );
    assert!(serial.len() > 4 && serial[4..].iter().all(u8::is_ascii_graphic));
    assert_eq!(r.b.good(B_F4K, &inquiry(Some(0x80), 255), &[], 255), serial);
    let da = designators(&a.good(F4K, &inquiry(Some(0x83), 255), &[], 255));
    let db = designators(&r.b.good(B_F4K, &inquiry(Some(0x83), 255), &[], 255));
    assert_eq!((da[0].0, da[0].1, da[0].2.len()), (0x01, 0x03, 16), "NAA");
    assert_eq!(da[0].2[0] >> 4, 6, "NAA 6");
    assert_eq!(da[0], db[0], "one NAA through both IOCs");
    assert_eq!(da[1], db[1], "one T10 vendor ID through both IOCs");
    // Relative target port and target port group: the IOC's (1 and 2).
    assert_eq!((da[2].1, da[2].2.as_slice()), (0x14, &[0, 0, 0, 1][..]));
    assert_eq!((db[2].1, db[2].2.as_slice()), (0x14, &[0, 0, 0, 2][..]));
    assert_eq!((da[3].1, db[3].1, db[3].2[3]), (0x15, 0x15, 2));
    let other = designators(&a.good(RAM, &inquiry(Some(0x83), 255), &[], 255));
    assert_ne!(other[0], da[0], "another LUN, another NAA");
    // Block limits: the daemon's transfer limit in blocks, WSNZ, COMPARE AND WRITE 255.
    for (lun, bs) in [(RAM, 512), (F4K, 4096)] {
        let b0 = a.good(lun, &inquiry(Some(0xb0), 255), &[], 255);
        assert_eq!((b0[1], b0.len(), b0[4] & 1, b0[5]), (0xb0, 64, 1, 255));
        assert_eq!(be32(&b0[8..]), (MAX_TRANSFER / bs) as u32, "LUN {lun}");
    }
    let b1 = a.good(RAM, &inquiry(Some(0xb1), 255), &[], 255);
    assert_eq!((b1[1], &b1[4..6]), (0xb1, &[0, 1][..]), "non-rotating");
    let b2 = a.good(RAM, &inquiry(Some(0xb2), 255), &[], 255);
    assert_eq!(b2, [0, 0xb2, 0, 4, 0, 0x80 | 0x40 | 0x20 | 0x04, 0x02, 0]);
    let s = a.check(
        RAM,
        &inquiry(Some(0x86), 255),
        &[],
        255,
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert_eq!(field_pointer(&s), Some((2, Some(7), true)));
}

fn capacity_modes_and_reports(r: &mut Rig) {
    let a = &mut r.a;
    let rc10 = [0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut rc16 = [0u8; 16];
    (rc16[0], rc16[1], rc16[13]) = (0x9e, 0x10, 32);
    for (lun, last, bs) in [(RAM, 2047u32, 512u32), (F4K, 255, 4096), (RO, 127, 512)] {
        let d = a.good(lun, &rc10, &[], 8);
        assert_eq!((be32(&d), be32(&d[4..])), (last, bs), "LUN {lun}");
        let d = a.good(lun, &rc16, &[], 32);
        assert_eq!(d.len(), 32);
        assert_eq!(
            u64::from_be_bytes(d[..8].try_into().expect("8")),
            u64::from(last)
        );
        assert_eq!(be32(&d[8..]), bs);
    }
    // MODE SENSE(6) caching page: WCE on; MODE SELECT(6) turns it off, MODE SENSE(10)
    // sees that; MODE SELECT(10) turns it back on, MODE SENSE(6) sees that.
    let sense6 = [0x1a, 0x08, 0x08, 0, 255, 0];
    let sense10 = [0x5a, 0x08, 0x08, 0, 0, 0, 0, 0, 255, 0];
    let d = a.good(F512, &sense6, &[], 255);
    assert_eq!((d.len(), d[0], d[3]), (24, 23, 0));
    // PS=1: file512's caching page is savable (write_cache_changeable, a state directory).
    assert_eq!((&d[4..6], d[6] & 0x04), (&[0x88, 0x12][..], 0x04));
    let mut page = vec![0u8; 20];
    (page[0], page[1]) = (0x08, 0x12);
    let list6: Vec<u8> = [vec![0; 4], page.clone()].concat();
    a.good(F512, &[0x15, 0x10, 0, 0, 24, 0], &list6, 0);
    let d = a.good(F512, &sense10, &[], 255);
    assert_eq!(
        (d.len(), &d[8..10], d[10] & 0x04),
        (28, &[0x88, 0x12][..], 0)
    );
    page[2] = 0x04;
    let list10: Vec<u8> = [vec![0; 8], page].concat();
    a.good(F512, &[0x55, 0x10, 0, 0, 0, 0, 0, 0, 28, 0], &list10, 0);
    assert_eq!(a.good(F512, &sense6, &[], 255)[6] & 0x04, 0x04);
    assert_eq!(a.good(RO, &sense6, &[], 255)[2] & 0x80, 0x80, "WP");
    // REPORT LUNS: the IOC's own numbers.
    let rl = [0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let d = a.good(RAM, &rl, &[], 256);
    assert_eq!(be32(&d), 32);
    let luns: Vec<&[u8]> = d[8..].chunks(8).collect();
    for (k, n) in [RAM, F4K, RO, F512].into_iter().enumerate() {
        assert_eq!(luns[k], Lun::from_number(n).expect("lun").0);
    }
    let d = r.b.good(B_F4K, &rl, &[], 256);
    assert_eq!(
        (be32(&d), &d[8..16]),
        (8, &Lun::from_number(5).expect("5").0[..])
    );
    // REPORT SUPPORTED OPERATION CODES: every opcode this test uses.
    let d = a.good(
        RAM,
        &[0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0],
        &[],
        4096,
    );
    assert_eq!(be32(&d) as usize, d.len() - 4);
    let ops: Vec<u8> = d[4..].chunks(8).map(|c| c[0]).collect();
    for op in [
        0x00, 0x03, 0x08, 0x0a, 0x12, 0x15, 0x1a, 0x25, 0x28, 0x2a, 0x2f, 0x35, 0x41, 0x42, 0x55,
        0x5a, 0x5e, 0x5f, 0x88, 0x89, 0x8a, 0x8f, 0x91, 0x93, 0x9e, 0xa0, 0xa3, 0xa8, 0xaa,
    ] {
        assert!(ops.contains(&op), "RSOC lists {op:#04x}: {ops:02x?}");
    }
    // REPORT TARGET PORT GROUPS: one group per IOC, both active/optimized.
    let d = a.good(RAM, &[0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], &[], 256);
    assert_eq!((d.len(), be32(&d)), (28, 24));
    assert_eq!(
        (d[4] & 0x0f, &d[6..8], &d[12..16]),
        (0, &[0, 1][..], &[0, 0, 0, 1][..])
    );
    assert_eq!(
        (d[16] & 0x0f, &d[18..20], &d[24..28]),
        (0, &[0, 2][..], &[0, 0, 0, 2][..])
    );
    // REQUEST SENSE: nothing pending.
    let d = a.good(RAM, &[0x03, 0, 0, 0, 18, 0], &[], 18);
    assert_eq!(
        (d.len(), d[0], d[2] & 0x0f, d[12], d[13]),
        (18, 0x70, 0, 0, 0)
    );
}

/// READ/WRITE 6/10/12/16 with data read back, FUA writes (on disk for file LUNs),
/// SYNCHRONIZE CACHE 10/16, LBA OUT OF RANGE at the end.
fn block_io(r: &mut Rig, lun: u32, bs: usize, blocks: u64) {
    let a = &mut r.a;
    let seed = lun as u8 * 16;
    let d6 = pattern(2 * bs, seed);
    a.good(lun, &[0x0a, 0, 0, 2, 2, 0], &d6, 0);
    assert_eq!(a.good(lun, &[0x08, 0, 0, 2, 2, 0], &[], 2 * bs as u32), d6);
    let d10 = pattern(3 * bs, seed + 1);
    a.good(lun, &write10(10, 3, false), &d10, 0);
    assert_eq!(a.good(lun, &read10(10, 3), &[], 3 * bs as u32), d10);
    let d12 = pattern(bs, seed + 2);
    a.good(lun, &[0xaa, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0], &d12, 0);
    let r12 = [0xa8, 0, 0, 0, 0, 20, 0, 0, 0, 1, 0, 0];
    assert_eq!(a.good(lun, &r12, &[], bs as u32), d12);
    let last = blocks - 1;
    let d16 = pattern(bs, seed + 3);
    a.good(lun, &cdb16(0x8a, 0, last, 1), &d16, 0);
    assert_eq!(a.good(lun, &cdb16(0x88, 0, last, 1), &[], bs as u32), d16);
    // FUA through WRITE(10) and WRITE(16): durable in the backing file at once.
    let fua10 = pattern(bs, seed + 4);
    a.good(lun, &write10(30, 1, true), &fua10, 0);
    let fua16 = pattern(bs, seed + 5);
    a.good(lun, &cdb16(0x8a, 0x08, 31, 1), &fua16, 0);
    assert_eq!(
        a.good(lun, &read10(30, 2), &[], 2 * bs as u32),
        [fua10.clone(), fua16.clone()].concat()
    );
    let file = match lun {
        F4K => Some("file4k.img"),
        F512 => Some("file512.img"),
        _ => None,
    };
    if let Some(name) = file {
        let f = std::fs::File::open(r.dir.path().join(name)).expect("open LUN file");
        let mut got = vec![0u8; 2 * bs];
        f.read_exact_at(&mut got, 30 * bs as u64).expect("read");
        assert_eq!(got, [fua10, fua16].concat(), "FUA data on disk");
    }
    a.good(lun, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[], 0);
    a.good(lun, &cdb16(0x91, 0, 0, blocks as u32), &[], 0);
    a.check(
        lun,
        &cdb16(0x91, 0, last, 2),
        &[],
        0,
        SenseCode::LBA_OUT_OF_RANGE,
    );
    a.check(
        lun,
        &read10(last as u32, 2),
        &[],
        2 * bs as u32,
        SenseCode::LBA_OUT_OF_RANGE,
    );
    let w = pattern(bs, 1);
    a.check(
        lun,
        &cdb16(0x8a, 0, blocks, 1),
        &w,
        0,
        SenseCode::LBA_OUT_OF_RANGE,
    );
}

/// WRITE SAME (pattern; UNMAP bit), UNMAP, VERIFY (BYTCHK 0/1), COMPARE AND WRITE.
fn provisioning_and_compare(a: &mut Node, lun: u32, bs: usize) {
    let bs32 = bs as u32;
    let blk = pattern(bs, 0x40 + lun as u8);
    a.good(lun, &[0x41, 0, 0, 0, 0, 40, 0, 0, 4, 0], &blk, 0);
    assert_eq!(a.good(lun, &read10(40, 4), &[], 4 * bs32), blk.repeat(4));
    // WRITE SAME(16) with UNMAP and a zero block: reads back zeros.
    a.good(lun, &cdb16(0x93, 0x08, 41, 2), &vec![0; bs], 0);
    let expect = [blk.clone(), vec![0; 2 * bs], blk.clone()].concat();
    assert_eq!(a.good(lun, &read10(40, 4), &[], 4 * bs32), expect);
    a.good(lun, &cdb16(0x93, 0, 41, 1), &blk, 0);
    assert_eq!(a.good(lun, &read10(41, 1), &[], bs32), blk);
    // UNMAP of two extents: zeros there, the rest untouched.
    a.good(lun, &write10(48, 8, false), &vec![0xaa; 8 * bs], 0);
    let l = unmap_list(&[(49, 2), (53, 1)]);
    a.good(lun, &[0x42, 0, 0, 0, 0, 0, 0, 0, l.len() as u8, 0], &l, 0);
    let got = a.good(lun, &read10(48, 8), &[], 8 * bs32);
    for (i, b) in got.chunks(bs).enumerate() {
        let want = if matches!(i, 1 | 2 | 5) { 0 } else { 0xaa };
        assert!(b.iter().all(|&x| x == want), "LUN {lun} block {}", 48 + i);
    }
    // VERIFY: BYTCHK 0 (range only), BYTCHK 1 equal, then one byte off.
    let data = pattern(2 * bs, 0x50);
    a.good(lun, &write10(60, 2, false), &data, 0);
    a.good(lun, &[0x2f, 0, 0, 0, 0, 60, 0, 0, 2, 0], &[], 0);
    a.good(lun, &[0x2f, 0x02, 0, 0, 0, 60, 0, 0, 2, 0], &data, 0);
    a.good(lun, &cdb16(0x8f, 0x02, 60, 2), &data, 0);
    let mut bad = data.clone();
    bad[bs + 7] ^= 1;
    let s = a.check(
        lun,
        &[0x2f, 0x02, 0, 0, 0, 60, 0, 0, 2, 0],
        &bad,
        0,
        SenseCode::MISCOMPARE_DURING_VERIFY,
    );
    assert_eq!(s.information(), Some(bs as u64 + 7));
    // COMPARE AND WRITE: a match writes, a miscompare reports the offset and writes nothing.
    let (old, new) = (pattern(bs, 0x60), pattern(bs, 0x61));
    a.good(lun, &write10(70, 1, false), &old, 0);
    let dout = [old.clone(), new.clone()].concat();
    a.good(lun, &compare_and_write(70, 1), &dout, 0);
    assert_eq!(a.good(lun, &read10(70, 1), &[], bs32), new);
    let off = old
        .iter()
        .zip(&new)
        .position(|(x, y)| x != y)
        .expect("differ");
    let s = a.check(
        lun,
        &compare_and_write(70, 1),
        &dout,
        0,
        SenseCode::MISCOMPARE_DURING_VERIFY,
    );
    assert_eq!(s.information(), Some(off as u64));
    assert_eq!(a.good(lun, &read10(70, 1), &[], bs32), new, "unchanged");
}

fn error_answers(a: &mut Node) {
    let s = a.check(
        RAM,
        &[0xc0, 0, 0, 0, 0, 0],
        &[],
        0,
        SenseCode::INVALID_COMMAND_OPERATION_CODE,
    );
    assert_eq!(
        (u8::from(s.code().key), s.code().asc, s.code().ascq),
        (5, 0x20, 0)
    );
    let mut c = read10(0, 1);
    c[1] = 0x01;
    let s = a.check(RAM, &c, &[], 512, SenseCode::INVALID_FIELD_IN_CDB);
    assert_eq!(field_pointer(&s), Some((1, Some(0), true)));
    // An unknown LUN: INQUIRY says so, everything else LOGICAL UNIT NOT SUPPORTED.
    let d = a.good(9, &inquiry(None, 36), &[], 36);
    assert_eq!(d[0], 0x7f);
    a.check(9, &[0; 6], &[], 0, SenseCode::LUN_NOT_SUPPORTED);
    let rl = [0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    assert_eq!(
        be32(&a.good(9, &rl, &[], 256)),
        32,
        "REPORT LUNS works through it"
    );
    a.check(9, &read10(0, 1), &[], 512, SenseCode::LUN_NOT_SUPPORTED);
    // The read-only LUN: reads fine, every write DATA PROTECT / WRITE PROTECTED.
    let s = a.check(
        RO,
        &write10(0, 1, false),
        &[1; 512],
        0,
        SenseCode::WRITE_PROTECTED,
    );
    assert_eq!(
        (u8::from(s.code().key), s.code().asc, s.code().ascq),
        (7, 0x27, 0)
    );
    a.check(
        RO,
        &cdb16(0x93, 0x08, 0, 1),
        &[0; 512],
        0,
        SenseCode::WRITE_PROTECTED,
    );
    let l = unmap_list(&[(0, 1)]);
    a.check(
        RO,
        &[0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0],
        &l,
        0,
        SenseCode::WRITE_PROTECTED,
    );
    a.check(
        RO,
        &compare_and_write(0, 1),
        &[0; 1024],
        0,
        SenseCode::WRITE_PROTECTED,
    );
    assert_eq!(a.good(RO, &read10(0, 1), &[], 512), vec![0; 512]);
}

/// SRP_RSP residuals: buffers longer and shorter than the transfer, both directions.
fn residuals(a: &mut Node) {
    let data = pattern(1024, 0x70);
    a.good(RAM, &write10(100, 2, false), &data, 0);
    // Data-in buffer twice the transfer: GOOD, DIUNDER 512, the tail untouched.
    let r = a.run(RAM, &read10(100, 1), Out::None, In::Direct(1024));
    assert_eq!(
        (r.status, r.din, r.dout),
        (Status::Good, Residual::Underflow(512), Residual::None)
    );
    assert_eq!(r.moved(), &data[..512]);
    assert!(r.data[512..].iter().all(|&b| b == FILL));
    // Data-in buffer half the transfer: GOOD, DIOVER 512, the buffer full.
    let r = a.run(RAM, &read10(100, 2), Out::None, In::Direct(512));
    assert_eq!((r.status, r.din), (Status::Good, Residual::Overflow(512)));
    assert_eq!(r.data, &data[..512]);
    // Data-out longer than the transfer: GOOD, DOUNDER 512, the first block written.
    let new = pattern(1024, 0x71);
    let r = a.run(RAM, &write10(100, 1, false), Out::Direct(&new), In::None);
    assert_eq!(
        (r.status, r.dout, r.din),
        (Status::Good, Residual::Underflow(512), Residual::None)
    );
    let now = [&new[..512], &data[512..]].concat();
    assert_eq!(a.good(RAM, &read10(100, 2), &[], 1024), now);
    // Data-out shorter than the transfer: CHECK CONDITION (ABORTED COMMAND, INVALID FIELD
    // IN COMMAND IU, as LIO), DOOVER 512, nothing written.
    let short = Out::Direct(&data[..512]);
    let r = a.run(RAM, &write10(100, 2, false), short, In::None);
    assert_eq!(r.outcome(), cc(SenseCode::INVALID_FIELD_IN_COMMAND_IU));
    assert_eq!(r.dout, Residual::Overflow(512));
    assert_eq!(a.good(RAM, &read10(100, 2), &[], 1024), now);
}

/// Data in direct, indirect (all inline; partial, table fetched) and immediate form.
fn descriptor_forms(a: &mut Node) {
    let data = pattern(3072, 0x80);
    let lens = [512u32, 1536, 1024];
    for (lba, inline) in [(200u32, 3usize), (210, 1)] {
        let r = a.run(
            RAM,
            &write10(lba, 6, false),
            Out::Indirect(&data, &lens, inline),
            In::None,
        );
        assert_eq!((r.status, r.dout), (Status::Good, Residual::None), "{r:?}");
        assert_eq!(
            a.good(RAM, &read10(lba, 6), &[], 3072),
            data,
            "inline {inline}"
        );
        let r = a.run(
            RAM,
            &read10(lba, 6),
            Out::None,
            In::Indirect(&[1024, 100, 924, 1024], inline),
        );
        assert_eq!((r.status, r.din), (Status::Good, Residual::None), "{r:?}");
        assert_eq!(
            r.data, data,
            "data-in through {inline} inline of 4 segments"
        );
    }
    // 4096-byte blocks over uneven segments.
    let big = pattern(2 * 4096, 0x81);
    let r = a.run(
        F4K,
        &cdb16(0x8a, 0, 90, 2),
        Out::Indirect(&big, &[4096, 1000, 3096], 2),
        In::None,
    );
    assert_eq!(r.status, Status::Good);
    let r = a.run(
        F4K,
        &cdb16(0x88, 0, 90, 2),
        Out::None,
        In::Indirect(&[3000, 5192], 2),
    );
    assert_eq!((r.status, r.data), (Status::Good, big));
    // Refused descriptors, the channel staying up: more than the maximum transfer and an
    // external table longer than the limit (ILLEGAL REQUEST, INVALID FIELD IN CDB, as
    // docs/target.md says), a fetched table that contradicts its inline part (ABORTED
    // COMMAND, INVALID FIELD IN COMMAND IU: SRP r16a 5.6.3).
    let too_long = (MAX_TRANSFER / 512) as u16 * 2;
    let into = In::Direct(2 * MAX_TRANSFER as u32);
    let r = a.run(RAM, &read10(0, too_long), Out::None, into);
    assert_eq!(r.outcome(), cc(SenseCode::INVALID_FIELD_IN_CDB));
    let r = a.run(RAM, &read10(0, 65), Out::None, In::Indirect(&[512; 65], 1));
    assert_eq!(r.outcome(), cc(SenseCode::INVALID_FIELD_IN_CDB));
    let tag = a.next_tag();
    let into = In::Indirect(&[512, 512], 1);
    let (iu, segs) = a.cmd(tag, RAM, &read10(200, 2), Out::None, into);
    a.write(host::node::TABLE, &[0; 16]); // entry 0 no longer the inline descriptor
    a.host.send(&a.ep, &iu);
    let r = a.reply(&segs);
    assert_eq!(r.outcome(), cc(SenseCode::INVALID_FIELD_IN_COMMAND_IU));
    assert!(
        r.data.iter().all(|&b| b == FILL),
        "nothing from a bad table"
    );
    // Immediate data (granted at login): one block, and 8 KiB in one IU.
    for (lba, len) in [(220u32, 512usize), (230, 8192)] {
        let d = pattern(len, 0x82);
        let n = (len / 512) as u16;
        let r = a.run(RAM, &write10(lba, n, false), Out::Imm(&d), In::None);
        assert_eq!((r.status, r.dout), (Status::Good, Residual::None), "{r:?}");
        assert_eq!(a.good(RAM, &read10(lba, n), &[], len as u32), d);
    }
}

/// PERSISTENT RESERVE OUT `action` with `key`/`sa_key` and type `kind`.
fn pr_out(a: &mut Node, action: u8, kind: u8, key: u64, sa_key: u64) {
    let (cdb, params) = common::pr_out(action, kind, key, sa_key, 0);
    a.good(F4K, &cdb, &params, 0);
}

fn reservations(a: &mut Node) {
    let read_keys = [0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0];
    let read_resv = [0x5e, 1, 0, 0, 0, 0, 0, 0, 64, 0];
    pr_out(a, 0, 0, 0, 0xabcd); // REGISTER
    let d = a.good(F4K, &read_keys, &[], 64);
    assert_eq!(
        (be32(&d[4..]), &d[8..16]),
        (8, &0xabcdu64.to_be_bytes()[..])
    );
    pr_out(a, 1, 1, 0xabcd, 0); // RESERVE, Write Exclusive
    let d = a.good(F4K, &read_resv, &[], 64);
    assert_eq!(
        (be32(&d[4..]), &d[8..16], d[21] & 0x0f),
        (16, &0xabcdu64.to_be_bytes()[..], 1)
    );
    let d = pattern(4096, 0x90);
    a.good(F4K, &write10(2, 1, false), &d, 0);
    assert_eq!(
        a.good(F4K, &read10(2, 1), &[], 4096),
        d,
        "the holder writes"
    );
    pr_out(a, 2, 1, 0xabcd, 0); // RELEASE
    assert_eq!(be32(&a.good(F4K, &read_resv, &[], 64)[4..]), 0);
    pr_out(a, 0, 0, 0xabcd, 0); // unregister
    assert_eq!(be32(&a.good(F4K, &read_keys, &[], 64)[4..]), 0);
}
