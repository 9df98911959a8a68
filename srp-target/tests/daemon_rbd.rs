//! A LUN on a Ceph RBD image (issue #30, Deliver 1), through the running daemon with the
//! access-layer initiator, against a real cluster (`scripts/ceph-cluster.sh`, cephx,
//! `client.srp` with its keyring; 127.0.171.1): capacity from the image; data written
//! through the target is in the image (read back with `rbd export`, not through the
//! target), and read back through the target after it was changed in the cluster;
//! SYNCHRONIZE CACHE and a FUA write GOOD; UNMAP of a whole object deallocates it (GET LBA
//! STATUS says so, mapped where data was written), and so does WRITE SAME with UNMAP; COMPARE AND WRITE by librbd in the
//! cluster (one block, miscompare offset); the configuration check opens the
//! image; a resize by another client tells every initiator CAPACITY DATA HAS CHANGED and
//! the capacity follows; a wrong key or a missing image refuses the start naming the image
//! and the reason.
//! Loopback 127.0.140.x for the SRP ports.

mod common;
mod host;

use common::{TempDir, cdb16, compare_and_write, inquiry, pattern, read10, unmap_list, write10};
use host::node::{Form, In, Node, Out};
use scsi::{SenseCode, Status};
use srp_target::config::TargetConfig;
use srp_target::control::{ControlAnswer, ControlRequest};
use srp_target::daemon::Daemon;
use std::net::{IpAddr, Ipv4Addr};
use testkit::ceph::CephCluster;

const MIB: u64 = 1 << 20;

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 140, host))
}

fn toml_text(dir: &TempDir, c: &CephCluster, image: &str, keyring: &std::path::Path) -> String {
    toml_with(dir, c, image, keyring, "", "{ 0 = \"rbd0\" }")
}

/// The configuration with `extra` LUN tables and the IOC's `exports`.
fn toml_with(
    dir: &TempDir,
    c: &CephCluster,
    image: &str,
    keyring: &std::path::Path,
    extra: &str,
    exports: &str,
) -> String {
    format!(
        "[target]\nnode_guid = \"0x0002c90300d8b000\"\nstate_dir = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\n\
         [[lun]]\nname = \"rbd0\"\nrbd = \"rbd/{image}\"\nceph_conf = \"{}\"\n\
         ceph_client = \"srp\"\nceph_keyring = \"{}\"\n\n{extra}\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300d8b001\"\nports = [\"p0\"]\n\
         exports = {exports}\nallow = [\"any\"]\n",
        dir.path().join("state").display(),
        ip(1),
        c.conf().display(),
        keyring.display(),
    )
}

#[test]
fn an_rbd_lun_through_the_daemon() {
    let c = CephCluster::start("127.0.171.1", "daemon-rbd");
    // Without exclusive-lock (layering only): nothing but the target's own settings keeps a
    // second writer's bytes from being hidden behind a cache (with exclusive-lock, librbd
    // hands the lock over and drops its cache at each change of writer).
    c.rbd(&[
        "create",
        "--size",
        "16M",
        "--image-feature",
        "layering",
        "rbd/lun0",
    ]);
    let dir = TempDir::new("daemon-rbd");
    let text = toml_text(&dir, &c, "lun0", &c.client_keyring());
    let config = TargetConfig::from_str(&text, "rbd.toml")
        .expect("config valid")
        .config;
    let check = srp_target::backend::claim::check_store(&config.luns[0], None);
    assert!(
        matches!(check, srp_target::backend::claim::StoreCheck::Free),
        "the configuration check opens the image: {check:?}"
    );
    let file = dir.path().join("target.toml");
    std::fs::write(&file, &text).expect("write the configuration");
    let mut options = common::daemon_options();
    options.config_path = Some(file.clone());
    // One backend worker: the writes in flight together below are librbd's, not threads'.
    options.workers = 1;
    let daemon = Daemon::start(config.clone(), options).expect("daemon starts");
    let mut a = Node::open(ip(2), ip(1), 0xa901, &config.iocs[0], Form::IbCm, false);

    // READ CAPACITY(16): the image's 16 MiB in 512-byte blocks.
    let cap = a.good(0, &cdb16(0x9e, 0x10, 0, 32), &[], 32);
    let last = u64::from_be_bytes(cap[..8].try_into().expect("8 bytes"));
    assert_eq!(last + 1, 16 * MIB / 512, "capacity from the image");

    // 64 KiB across the first object boundary (4 MiB), FUA.
    let lba = (4 * MIB / 512 - 64) as u32;
    let data = pattern(64 << 10, 0x31);
    a.good(0, &write10(lba, 128, true), &data, 0);
    a.good(0, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[], 0); // SYNCHRONIZE CACHE(10)
    let exported = dir.path().join("export.img");
    c.rbd(&["export", "rbd/lun0", exported.to_str().expect("utf-8 path")]);
    let image = std::fs::read(&exported).expect("read the export");
    let at = usize::try_from(u64::from(lba) * 512).expect("offset");
    assert_eq!(
        &image[at..at + data.len()],
        &data[..],
        "the bytes are in the image"
    );
    assert_eq!(a.good(0, &read10(lba, 128), &[], 64 << 10), data);

    // Changed in the cluster behind the target (another client, through librbd): the
    // target reads the cluster's bytes, not a copy of its own (librbd's cache is off:
    // `rbd_cache = true` with `rbd_cache_policy = writeback` in backend/rbd.rs fails this).
    let other = pattern(4096, 0x77);
    {
        let admin =
            rbd_client::Cluster::connect(&c.conf(), None, None, &[]).expect("connect as admin");
        let img = admin
            .pool("rbd")
            .and_then(|p| p.open("lun0"))
            .expect("open lun0");
        img.write_blocking(u64::from(lba) * 512, &other)
            .expect("write behind the target");
    }
    assert_eq!(a.good(0, &read10(lba, 8), &[], 4096), other);

    // Twelve 4 KiB WRITEs sent together, 256 KiB apart: the one worker starts
    // each on librbd and goes on (exec/aio.rs); their completions answer them. The LU's
    // counters show them in flight together. (Waiting on the worker, as the synchronous
    // path does, runs them one by one: the peak stays 0 — `let started = None` in
    // io/executor.rs fails this.)
    let base = 9 * MIB / 512;
    let ius: Vec<Vec<u8>> = (0..12u32)
        .map(|k| {
            let tag = a.next_tag();
            let at = host::node::OUT + u64::from(k) * 8192;
            let lba = (base + u64::from(k) * (MIB / 512) / 4) as u32;
            let data = pattern(4096, 0x50 + k as u8);
            a.cmd_at(
                at,
                tag,
                0,
                &write10(lba, 8, false),
                Out::Direct(&data),
                In::None,
            )
            .0
        })
        .collect();
    a.send_all(&ius);
    for _ in 0..12 {
        let r = a.reply(&[]);
        assert_eq!((r.status, r.sense.is_none()), (Status::Good, true), "{r:?}");
    }
    for k in 0..12u32 {
        let lba = (base + u64::from(k) * (MIB / 512) / 4) as u32;
        assert_eq!(
            a.good(0, &read10(lba, 8), &[], 4096),
            pattern(4096, 0x50 + k as u8)
        );
    }
    let luns = match daemon.control().call(ControlRequest::ListLuns) {
        Ok(ControlAnswer::Luns(l)) => l,
        other => panic!("LUNs: {other:?}"),
    };
    let counters = luns[0].counters;
    assert!(
        counters.async_peak >= 2 && counters.async_commands >= 24,
        "one worker, several librbd operations in flight: {counters:?}"
    );

    // GET LBA STATUS: mapped at the written range, deallocated in the untouched last object.
    let status = |a: &mut Node, lba: u64| {
        let d = a.good(0, &cdb16(0x9e, 0x12, lba, 24), &[], 24);
        (
            u64::from_be_bytes(d[8..16].try_into().expect("8")),
            u32::from_be_bytes(d[16..20].try_into().expect("4")),
            d[20] & 0x0f,
        )
    };
    let (first, _, prov) = status(&mut a, u64::from(lba));
    assert_eq!(
        (first, prov),
        (u64::from(lba), 0),
        "mapped where data was written"
    );
    let tail = 12 * MIB / 512;
    let (first, _, prov) = status(&mut a, tail);
    assert_eq!(
        (first, prov),
        (tail, 1),
        "deallocated where nothing was written"
    );

    // UNMAP of the whole second object (4 MiB..8 MiB): deallocated.
    let obj = 4 * MIB / 512;
    let list = unmap_list(&[(obj, (4 * MIB / 512) as u32)]);
    a.good(
        0,
        &[0x42, 0, 0, 0, 0, 0, 0, 0, list.len() as u8, 0],
        &list,
        0,
    );
    let (_, _, prov) = status(&mut a, obj);
    assert_eq!(prov, 1, "the unmapped object is deallocated");
    // WRITE SAME with UNMAP over a whole object that holds data: deallocated too, zeros.
    let last = 12 * MIB / 512;
    a.good(0, &write10(last as u32, 8, false), &pattern(4096, 0x19), 0);
    assert_eq!(status(&mut a, last).2, 0, "mapped once written");
    a.good(
        0,
        &cdb16(0x93, 0x08, last, (4 * MIB / 512) as u32),
        &[0u8; 512],
        0,
    );
    assert_eq!(
        status(&mut a, last).2,
        1,
        "WRITE SAME with UNMAP deallocated the object"
    );
    assert_eq!(
        a.good(0, &read10(last as u32, 8), &[], 4096),
        vec![0u8; 4096]
    );
    // UNMAP of a few blocks inside an object: they read as zeros (LBPRZ), however small.
    let list = unmap_list(&[(u64::from(lba) + 8, 8)]);
    a.good(
        0,
        &[0x42, 0, 0, 0, 0, 0, 0, 0, list.len() as u8, 0],
        &list,
        0,
    );
    assert_eq!(a.good(0, &read10(lba + 8, 8), &[], 4096), vec![0u8; 4096]);

    // COMPARE AND WRITE in the cluster (librbd's compare-and-write): one 512-byte block,
    // as the Block Limits page says; a stale comparison writes nothing and names the
    // first differing byte.
    let b0 = a.good(0, &inquiry(Some(0xb0), 64), &[], 64);
    assert_eq!(b0[5], 1, "MAXIMUM COMPARE AND WRITE LENGTH: one block");
    let cur = a.good(0, &read10(200, 1), &[], 512);
    let new = pattern(512, 0x44);
    a.good(
        0,
        &compare_and_write(200, 1),
        &[cur.clone(), new.clone()].concat(),
        0,
    );
    assert_eq!(a.good(0, &read10(200, 1), &[], 512), new);
    let mut stale = new.clone();
    stale[100] ^= 0xff;
    let s = a.check(
        0,
        &compare_and_write(200, 1),
        &[stale, pattern(512, 1)].concat(),
        0,
        SenseCode::MISCOMPARE_DURING_VERIFY,
    );
    assert_eq!(s.information(), Some(100), "the first differing byte");
    assert_eq!(a.good(0, &read10(200, 1), &[], 512), new, "nothing written");
    a.check(
        0,
        &compare_and_write(200, 2),
        &pattern(2048, 3),
        0,
        SenseCode::INVALID_FIELD_IN_CDB,
    );

    // Done by librbd's compare-and-write, in the cluster (not the target's own read,
    // compare and write, atomic on this appliance only): the target's librbd client
    // counted each (its admin socket's perf counters: `cmp`), the miscompare included.
    let asok = c.dir().join("run/client.srp.asok");
    let out = std::process::Command::new("timeout")
        .args(["30", "ceph", "--admin-daemon"])
        .arg(&asok)
        .args(["perf", "dump"])
        .output()
        .expect("run ceph --admin-daemon");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let perf: serde_json::Value = serde_json::from_slice(&out.stdout).expect("perf dump JSON");
    let cmp: u64 = perf
        .as_object()
        .expect("an object")
        .iter()
        .filter(|(k, _)| k.starts_with("librbd-") && k.ends_with("rbd-lun0"))
        .filter_map(|(_, v)| v["cmp"].as_u64())
        .sum();
    assert_eq!(
        cmp, 2,
        "both COMPARE AND WRITEs went to librbd's compare-and-write"
    );

    // WRITE ATOMIC: one physical block (a single RADOS write), no more — there is no
    // intent log on this machine for an image other clients write.
    let mut wa = [0u8; 16];
    wa[0] = 0x9c;
    wa[2..10].copy_from_slice(&100u64.to_be_bytes());
    wa[12..14].copy_from_slice(&1u16.to_be_bytes());
    a.good(0, &wa, &pattern(512, 9), 0);
    wa[12..14].copy_from_slice(&2u16.to_be_bytes());
    a.check(
        0,
        &wa,
        &pattern(1024, 9),
        0,
        SenseCode::INVALID_FIELD_IN_CDB,
    );
    assert!(
        !dir.path().join("state/atomic/rbd0.log").exists(),
        "no intent log for an RBD LUN"
    );

    // Resized by another client: every initiator hears CAPACITY DATA HAS CHANGED, and the
    // capacity follows the image.
    c.rbd(&["resize", "--size", "32M", "rbd/lun0"]);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r = a.direct(0, &[0; 6], &[], 0);
        if r.status == Status::CheckCondition {
            assert_eq!(
                r.code(),
                Some(SenseCode::CAPACITY_DATA_HAS_CHANGED),
                "{r:?}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "no CAPACITY DATA HAS CHANGED after the resize"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let cap = a.good(0, &cdb16(0x9e, 0x10, 0, 32), &[], 32);
    let last = u64::from_be_bytes(cap[..8].try_into().expect("8 bytes"));
    assert_eq!(last + 1, 32 * MIB / 512, "the capacity follows the image");
    a.good(
        0,
        &write10((20 * MIB / 512) as u32, 8, false),
        &pattern(4096, 5),
        0,
    );

    // Live reload adds an RBD LUN (opened) and removes it (closed: the image has no
    // watcher left).
    c.rbd(&["create", "--size", "8M", "rbd/lun1"]);
    let lun1 = format!(
        "[[lun]]\nname = \"rbd1\"\nrbd = \"rbd/lun1\"\nceph_conf = \"{}\"\n\
         ceph_client = \"srp\"\nceph_keyring = \"{}\"\n\n",
        c.conf().display(),
        c.client_keyring().display()
    );
    let two = "{ 0 = \"rbd0\", 1 = \"rbd1\" }";
    std::fs::write(
        &file,
        toml_with(&dir, &c, "lun0", &c.client_keyring(), &lun1, two),
    )
    .expect("write");
    let msgr_before = messenger_threads();
    let report = daemon.reload().expect("reloaded");
    assert!(
        report
            .changes
            .iter()
            .any(|l| l == "lun rbd1 added: rbd rbd/lun1"),
        "{report:?}"
    );
    eprintln!("messenger threads {msgr_before} -> {}", messenger_threads());
    assert_eq!(
        messenger_threads(),
        msgr_before,
        "the second LUN of one cluster and client shares the first one's connection"
    );
    let _ = a.direct(0, &[0; 6], &[], 0); // REPORTED LUNS DATA HAS CHANGED
    let d = pattern(8192, 0x66);
    a.good(1, &write10(8, 16, false), &d, 0);
    assert_eq!(a.good(1, &read10(8, 16), &[], 8192), d);
    let watchers = || String::from_utf8_lossy(&c.rbd(&["status", "rbd/lun1"])).into_owned();
    assert!(
        watchers().contains("watcher="),
        "open while exported: {}",
        watchers()
    );
    std::fs::write(&file, toml_text(&dir, &c, "lun0", &c.client_keyring())).expect("write");
    let report = daemon.reload().expect("reloaded");
    assert!(
        report
            .changes
            .iter()
            .any(|l| l.starts_with("lun rbd1 removed")),
        "{report:?}"
    );
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while watchers().contains("watcher=") {
        assert!(
            std::time::Instant::now() < end,
            "still open after its removal: {}",
            watchers()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(a);
    drop(daemon);

    // Refused starts name the image and why.
    let bad = dir.path().join("bad.keyring");
    std::fs::write(
        &bad,
        "[client.srp]\n\tkey = AQBzTnJhAAAAABAAqRzq7+ty5P5HVKmG0ZrFbg==\n",
    )
    .expect("write");
    for (image, keyring, why) in [
        ("lun0", bad.as_path(), "Permission denied"),
        ("missing", c.client_keyring().as_path(), "No such file"),
    ] {
        let text = toml_text(&dir, &c, image, keyring);
        let config = TargetConfig::from_str(&text, "rbd.toml")
            .expect("valid")
            .config;
        let e = Daemon::start(config, common::daemon_options()).expect_err("refused");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("rbd/{image}")) && msg.contains(why),
            "{msg}"
        );
    }
}

/// Threads of librados's messengers in this process (three per open cluster connection).
fn messenger_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|c| c.starts_with("msgr-worker"))
        .count()
}
