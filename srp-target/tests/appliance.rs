//! A configuration made real: LUNs opened (or every failure reported), IOCs laid out,
//! logins decided with ACLs, and one LUN with one identity through two IOCs.

mod common;

use common::TempDir;
use hca::Guid;
use scsi::{Lun, Status};
use srp::wire::login::{BufFormats, LoginReq, LoginReqFlags, MultiChannelAction};
use srp::wire::{IoClass, PortId, Tag};
use srp_target::appliance::{Appliance, ChannelLimits, StartError};
use srp_target::config::TargetConfig;
use srp_target::login::{LoginDecision, LoginRefusal};

fn config(dir: &TempDir, extra_lun: &str) -> TargetConfig {
    let vol = dir.path().join("vol.img");
    let text = format!(
        r#"
[target]
node_guid = "0x0002c90300000100"

[[port]]
name = "p0"
address = "127.0.0.1"

[[lun]]
name = "vol"
file = "{}"
size = "1MiB"

[[lun]]
name = "mem"
ram = true
size = "64KiB"
block_size = 4096
{extra_lun}

[[ioc]]
name = "a"
guid = "0x0002c90300000101"
ports = ["p0"]
exports = {{ 0 = "vol", 1 = "mem" }}
allow = ["any"]

[[ioc]]
name = "b"
guid = "0x0002c90300000102"
ports = ["p0"]
exports = {{ 5 = "vol" }}
allow = ["guid:0x0002c903000000aa"]
alua = "active/non-optimized"
"#,
        vol.display()
    );
    TargetConfig::from_str(&text, "test.toml")
        .map(|l| l.config)
        .map_err(|e| e.to_string())
        .expect("valid config")
}

fn initiator(guid: u64) -> PortId {
    PortId::new(0, Guid(guid), IoClass::SrpR16a)
}

fn login(target: PortId, from: PortId) -> LoginReq {
    LoginReq {
        tag: Tag(0),
        req_it_iu_len: 8260,
        req_buf_fmt: BufFormats::DIRECT | BufFormats::INDIRECT,
        multi_channel: MultiChannelAction::Single,
        flags: LoginReqFlags::IMMED_REQUESTED,
        imm_data_offset: 68,
        initiator_port_id: from,
        target_port_id: target,
    }
}

#[test]
fn builds_iocs_with_exports_and_groups() {
    let dir = TempDir::new("appliance");
    let app = Appliance::build(&config(&dir, ""), ChannelLimits::default()).expect("starts");
    assert!(dir.path().join("vol.img").exists(), "file LUN created");
    let [a, b] = app.iocs() else {
        panic!("two IOCs")
    };
    assert_eq!(
        a.luns(),
        &[
            Lun::from_number(0).expect("0"),
            Lun::from_number(1).expect("1")
        ]
    );
    assert_eq!(b.luns(), &[Lun::from_number(5).expect("5")]);
    assert!(a.lun(Lun::from_number(5).expect("5")).is_none());
    assert_eq!(app.groups().len(), 2);
    assert_eq!(
        app.ioc_for_target(b.config().target_port_id())
            .map(|(i, _)| i),
        Some(1)
    );
    assert!(app.lun_by_name("mem").is_some());
}

#[test]
fn same_lun_same_identity_through_both_iocs() {
    let dir = TempDir::new("appliance");
    let app = Appliance::build(&config(&dir, ""), ChannelLimits::default()).expect("starts");
    let [a, b] = app.iocs() else {
        panic!("two IOCs")
    };
    let who = initiator(0x0002_c903_0000_00aa);
    let vpd83 = |ioc: &srp_target::appliance::Ioc, lun: u32| {
        let lu = ioc
            .lun(Lun::from_number(lun).expect("lun"))
            .expect("exported");
        let mut data = Vec::new();
        let out = lu
            .execute(
                &app.nexus(ioc, who),
                &[0x12, 1, 0x83, 0, 255, 0],
                &[],
                &mut data,
            )
            .expect("no transport error");
        assert_eq!(out.status, Status::Good);
        data.truncate(out.data_in_len);
        data
    };
    let via_a = vpd83(a, 0);
    let via_b = vpd83(b, 5);
    // The first designator (NAA 6, 16 bytes) is the LUN's and identical; the port
    // designators that follow differ per IOC.
    assert_eq!(via_a[4..24], via_b[4..24]);
    assert_eq!(via_a[4 + 4] >> 4, 6, "NAA 6");
    assert_ne!(via_a, via_b);
    // Data written through one IOC is read through the other.
    let lu_a = a.lun(Lun::from_number(0).expect("0")).expect("vol");
    let lu_b = b.lun(Lun::from_number(5).expect("5")).expect("vol");
    let block = vec![0x5au8; 512];
    let mut sink = Vec::new();
    let w = lu_a
        .execute(
            &app.nexus(a, who),
            &[0x2a, 0, 0, 0, 0, 9, 0, 0, 1, 0],
            &block,
            &mut sink,
        )
        .expect("write");
    assert_eq!(w.status, Status::Good);
    let mut back = Vec::new();
    let r = lu_b
        .execute(
            &app.nexus(b, who),
            &[0x28, 0, 0, 0, 0, 9, 0, 0, 1, 0],
            &[],
            &mut back,
        )
        .expect("read");
    assert_eq!(r.status, Status::Good);
    assert_eq!(&back[..512], &block[..]);
}

#[test]
fn logins_follow_acl_and_enable_state() {
    let dir = TempDir::new("appliance");
    let app = Appliance::build(&config(&dir, ""), ChannelLimits::default()).expect("starts");
    let [a, b] = app.iocs() else {
        panic!("two IOCs")
    };
    let allowed = initiator(0x0002_c903_0000_00aa);
    let stranger = initiator(0x0002_c903_0000_00bb);
    let ok = |d: LoginDecision| matches!(d, LoginDecision::Accept { .. });
    assert!(ok(app.decide_login(
        a,
        &login(a.config().target_port_id(), stranger),
        &[]
    )));
    assert!(ok(app.decide_login(
        b,
        &login(b.config().target_port_id(), allowed),
        &[]
    )));
    match app.decide_login(b, &login(b.config().target_port_id(), stranger), &[]) {
        LoginDecision::Reject { refusal, .. } => {
            assert_eq!(refusal, LoginRefusal::Denied(stranger))
        }
        LoginDecision::Accept { .. } => panic!("ACL must refuse"),
    }
    a.set_enabled(false);
    match app.decide_login(a, &login(a.config().target_port_id(), allowed), &[]) {
        LoginDecision::Reject { refusal, .. } => assert_eq!(refusal, LoginRefusal::Disabled),
        LoginDecision::Accept { .. } => panic!("disabled IOC must refuse"),
    }
    a.set_enabled(true);
    assert!(a.is_enabled());
}

#[test]
fn every_unopenable_lun_is_reported_and_nothing_starts() {
    let dir = TempDir::new("appliance");
    let missing = dir.path().join("absent.img");
    let extra = format!(
        "[[lun]]\nname = \"gone\"\nfile = \"{}\"\n\n[[lun]]\nname = \"gone2\"\ndevice = \"{}\"\n",
        missing.display(),
        dir.path().join("no-such-device").display()
    );
    let err = Appliance::build(&config(&dir, &extra), ChannelLimits::default())
        .expect_err("missing backing files");
    assert_eq!(err.0.len(), 2, "{err}");
    assert!(
        err.0
            .iter()
            .all(|e| matches!(e, StartError::Backend { .. }))
    );
    let text = err.to_string();
    assert!(text.contains("lun \"gone\":"), "{text}");
    assert!(text.contains("absent.img"), "{text}");
    assert!(text.contains("lun \"gone2\":"), "{text}");
}

#[test]
fn vpd_b0_reports_what_a_channel_accepts() {
    let dir = TempDir::new("appliance");
    let limits = ChannelLimits {
        max_transfer: 1 << 20,
        ..ChannelLimits::default()
    };
    let app = Appliance::build(&config(&dir, ""), limits).expect("starts");
    let ioc = &app.iocs()[0];
    let who = initiator(0x0002_c903_0000_00aa);
    for (lun, block) in [(0, 512u32), (1, 4096)] {
        let lu = ioc
            .lun(Lun::from_number(lun).expect("lun"))
            .expect("exported");
        let mut data = Vec::new();
        let out = lu
            .execute(
                &app.nexus(ioc, who),
                &[0x12, 1, 0xb0, 0, 64, 0],
                &[],
                &mut data,
            )
            .expect("no transport error");
        assert_eq!(out.status, Status::Good);
        // MAXIMUM TRANSFER LENGTH: bytes 8..12 of the page, in blocks.
        let max = u32::from_be_bytes([data[8], data[9], data[10], data[11]]);
        assert_eq!(max, (1 << 20) / block, "LUN {lun}");
        // One block more than that is refused in the CDB, not by the channel.
        let blocks = u16::try_from(max + 1).expect("fits READ(10)").to_be_bytes();
        let out = lu
            .execute(
                &app.nexus(ioc, who),
                &[0x28, 0, 0, 0, 0, 0, 0, blocks[0], blocks[1], 0],
                &[],
                &mut data,
            )
            .expect("no transport error");
        assert_eq!(out.status, Status::CheckCondition);
    }
}

/// A loop device over a file, detached when dropped.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

/// A loop device of `sector`-byte blocks over a 4 MiB file in `dir`; `None` (with a note)
/// where loop devices cannot be made (no root, no loop driver).
fn loop_device(dir: &TempDir, sector: u32) -> Option<Loop> {
    let img = dir.path().join(format!("disk{sector}.img"));
    std::fs::File::create(&img)
        .and_then(|f| f.set_len(4 << 20))
        .expect("image");
    let out = std::process::Command::new("losetup")
        .args(["-f", "--show", "--sector-size", &sector.to_string()])
        .arg(&img)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            Some(Loop(String::from_utf8_lossy(&o.stdout).trim().to_owned()))
        }
        other => {
            eprintln!("skipped: no loop device here ({other:?})");
            None
        }
    }
}

/// An appliance with one LUN on `dev` and `extra` keys, or why it did not start.
fn build_on_device(dev: &Loop, extra: &str) -> Result<Appliance, String> {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300000200\"\n[[port]]\nname = \"p0\"\naddress = \"127.0.0.1\"\n\
         [[lun]]\nname = \"dev\"\ndevice = \"{}\"\n{extra}\n\
         [[ioc]]\nname = \"a\"\nguid = \"0x0002c90300000201\"\nports = [\"p0\"]\nexports = {{ 0 = \"dev\" }}\nallow = [\"any\"]\n",
        dev.0
    );
    let c = TargetConfig::from_str(&text, "t.toml")
        .expect("valid")
        .config;
    Appliance::build(&c, ChannelLimits::default()).map_err(|e| e.to_string())
}

/// READ CAPACITY(16) and the Block Limits page of LUN 0 of `app`.
fn rc16_and_block_limits(app: &Appliance) -> (Vec<u8>, Vec<u8>) {
    let ioc = &app.iocs()[0];
    let lu = ioc.lun(Lun::ZERO).expect("exported");
    let who = initiator(0x0002_c903_0000_00bb);
    let run = |cdb: &[u8]| {
        let mut data = Vec::new();
        let out = lu
            .execute(&app.nexus(ioc, who), cdb, &[], &mut data)
            .expect("no transport error");
        assert_eq!(out.status, Status::Good, "{cdb:02x?}");
        data
    };
    (
        run(&[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]),
        run(&[0x12, 1, 0xb0, 0, 64, 0]),
    )
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A block device's geometry is the LUN's, checked at start: a device of 4096-byte
/// logical blocks refuses a LUN of 512-byte ones (a one-block write would be a
/// read-modify-write of the device's block), naming the device and both sizes; a
/// configured physical block no smaller than the device's is kept; the device's discard
/// unit is OPTIMAL UNMAP GRANULARITY; WRITE ATOMIC reaches the transfer limit (intent log). Needs root and
/// loop devices (CI has both); skipped with a note otherwise.
#[test]
fn a_block_devices_own_physical_block_size_is_used_and_checked() {
    let dir = TempDir::new("appliance-geometry");
    let Some(k4) = loop_device(&dir, 4096) else {
        return;
    };
    let path = std::path::Path::new(&k4.0);
    let limits = srp_target::appliance::geometry::device_limits(path).expect("sysfs limits");
    assert_eq!(
        (limits.logical_block_bytes, limits.physical_block_bytes),
        (4096, 4096),
        "{}",
        k4.0
    );
    let err = build_on_device(&k4, "block_size = 512").expect_err("4Kn under 512-byte blocks");
    assert!(
        err.contains("block_size 512 is smaller")
            && err.contains("logical block size 4096")
            && err.contains(&k4.0),
        "{err}"
    );
    let app = build_on_device(&k4, "block_size = 4096").expect("starts");
    let (rc, bl) = rc16_and_block_limits(&app);
    assert_eq!(rc[13] & 0x0f, 0, "physical = logical");
    assert_eq!(rc[14] & 0x3f, 0, "lowest aligned LBA 0");
    if limits.discard_granularity_bytes > 0 {
        assert_eq!(
            be32(&bl[28..]),
            (limits.discard_granularity_bytes / 4096).max(1),
            "OPTIMAL UNMAP GRANULARITY: the device's discard unit"
        );
    }
    assert_eq!(
        be32(&bl[44..]),
        be32(&bl[8..]),
        "MAXIMUM ATOMIC TRANSFER LENGTH: the transfer limit (the device LU's intent log)"
    );
    drop(app);
    // A larger physical block than the device's: hosts aligning to it align to the
    // device's too; WRITE ATOMIC (through the intent log) up to the transfer limit, in
    // whole configured physical blocks.
    let app =
        build_on_device(&k4, "block_size = 4096\nphysical_block_size = 16384").expect("starts");
    let (rc, bl) = rc16_and_block_limits(&app);
    assert_eq!(rc[13] & 0x0f, 2);
    assert_eq!(
        (be32(&bl[44..]), be32(&bl[48..])),
        (be32(&bl[8..]), 4),
        "atomic: the transfer limit, aligned to the configured physical block"
    );
    drop(app);
    // 512-byte sectors: the device's discard unit (its backing file's filesystem block, as
    // the loop driver sets it), in 512-byte blocks.
    let Some(s512) = loop_device(&dir, 512) else {
        return;
    };
    let limits = srp_target::appliance::geometry::device_limits(std::path::Path::new(&s512.0))
        .expect("sysfs limits");
    let app = build_on_device(&s512, "block_size = 512").expect("starts");
    let (rc, bl) = rc16_and_block_limits(&app);
    assert_eq!(rc[13] & 0x0f, 0);
    if limits.discard_granularity_bytes > 0 {
        assert_eq!(
            be32(&bl[28..]),
            (limits.discard_granularity_bytes / 512).max(1),
            "OPTIMAL UNMAP GRANULARITY: the device's discard unit"
        );
    }
    drop(app);
    // Larger LUN blocks than the device's are fine (each is whole device blocks).
    assert!(build_on_device(&s512, "block_size = 4096").is_ok());
}

/// GET LBA STATUS on a block device: the kernel may not answer SEEK_DATA/SEEK_HOLE there
/// (6.18's block layer answers EINVAL); the LU reports the blocks mapped rather than a
/// MEDIUM ERROR (libiscsi's GetLBAStatus.Simple against a device LUN found it).
#[test]
fn get_lba_status_on_a_block_device_answers_mapped() {
    let dir = TempDir::new("appliance-lba-status");
    let Some(dev) = loop_device(&dir, 512) else {
        return;
    };
    let b = srp_target::FileBackend::open(&dev.0, srp_target::BlockSize::B512, false)
        .expect("the device opens");
    let e = srp_target::Backend::lba_status(&b, scsi::Lba(8), 64).expect("answers");
    assert!(!e.deallocated, "{e:?}");
    assert!(e.blocks >= 1);
}
