//! Issue #6's end-to-end acceptance with real processes on loopback 127.0.140.x: the target
//! daemon (`srpctl target run`, a file-backed LUN) and the host daemon (`srpctl host run`);
//! the disk's FUSE block file is `losetup`'d, formatted ext4, mounted, a tree of files is
//! written, synced and unmounted; both daemons restart; the file system is checked,
//! mounted again and every file matches. Needs root, FUSE, loop devices and e2fsprogs
//! (CI has them). Every step is bounded; the daemons are stopped even on failure.

#[path = "../../srp-host/tests/common/mod.rs"]
mod block;
mod process;

use block::{FsMount, LoopDev, TempDir, bounded, pattern, run};
use process::{HostProcess, SRPCTL, TargetProcess, output_within};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The tree written: (relative path, seed, length).
const TREE: &[(&str, u64, usize)] = &[
    ("a.txt", 1, 13),
    ("dir/b.bin", 2, 4096),
    ("dir/sub/c.bin", 3, 100_000),
    ("dir/sub/big.bin", 4, 5 << 20),
    ("empty", 5, 0),
];

fn target_config(dir: &Path) -> PathBuf {
    let cfg = dir.join("target.toml");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300e1e000\"\nname = \"e2e\"\n\
         control_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.140.1\"\n\n\
         [[lun]]\nname = \"vol\"\nfile = \"{}\"\nsize = \"64MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300e1e001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
        dir.join("target.sock").display(),
        dir.join("vol.img").display()
    );
    std::fs::write(&cfg, text).expect("write target config");
    cfg
}

fn host_config(dir: &Path, driver: &str) -> (PathBuf, PathBuf) {
    let cfg = dir.join("host.toml");
    let disks = dir.join("disks");
    let text = format!(
        "[host]\nname = \"e2e-host\"\nnode_guid = \"0x0002c90300e1e100\"\ndriver = \"{driver}\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nsweep_interval = \"1s\"\n\n\
         [timers]\nreconnect_delay = \"1s\"\nfast_io_fail = \"10s\"\ndev_loss = \"60s\"\n\n\
         [[portal]]\naddress = \"127.0.140.1\"\nlocal = [\"127.0.140.2\"]\n",
        disks.display(),
        dir.join("host.sock").display()
    );
    std::fs::write(&cfg, text).expect("write host config");
    (cfg, disks)
}

/// The one block file in `disks`, waited for (the first sweep may race the target).
fn the_disk(disks: &Path) -> PathBuf {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let files: Vec<PathBuf> = std::fs::read_dir(disks)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        if let [one] = files.as_slice() {
            return one.clone();
        }
        assert!(
            Instant::now() < end,
            "no single disk in {}: {files:?}",
            disks.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The host suite runs under both initiator driver models, one after the other.
#[test]
fn ext4_through_an_srp_disk_survives_restarting_both_daemons() {
    for driver in ["storport", "iscsi-model"] {
        eprintln!("driver model: {driver}");
        ext4_survives_restarts(driver);
    }
}

fn ext4_survives_restarts(driver: &'static str) {
    bounded(240, move || {
        let dir = TempDir::new("host-e2e");
        let target_cfg = target_config(dir.path());
        let (host_cfg, disks) = host_config(dir.path(), driver);
        let ext = dir.path().join("mnt");
        std::fs::create_dir_all(&ext).expect("mkdir");
        {
            let _target = TargetProcess::start(&target_cfg);
            let host = HostProcess::start(&host_cfg, &disks);
            let file = the_disk(&disks);
            let name = file
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            assert!(
                name.starts_with("naa.6"),
                "named by its NAA identity: {name}"
            );
            assert_eq!(std::fs::metadata(&file).expect("stat").len(), 64 << 20);
            let mut ask = std::process::Command::new(SRPCTL);
            ask.args(["sessions", "--json", "--socket"])
                .arg(dir.path().join("host.sock"));
            let sessions: serde_json::Value =
                serde_json::from_slice(&output_within(ask, 10).stdout).expect("sessions JSON");
            assert_eq!(
                sessions[0]["driver"], driver,
                "the session runs the {driver} model: {sessions:#}"
            );
            let dev = LoopDev::attach(&file);
            run("mkfs.ext4", &["-q", "-F", &dev.0]);
            let fs = FsMount::mount(&dev.0, &ext);
            for &(name, seed, len) in TREE {
                let p = ext.join(name);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                std::fs::write(&p, pattern(seed, len)).expect("write");
            }
            run("sync", &[]);
            drop(fs);
            drop(dev);
            host.stop();
        }
        // Both daemons again, from their config files.
        let _target = TargetProcess::start(&target_cfg);
        let host = HostProcess::start(&host_cfg, &disks);
        let file = the_disk(&disks);
        let dev = LoopDev::attach(&file);
        run("e2fsck", &["-f", "-n", &dev.0]);
        let fs = FsMount::mount(&dev.0, &ext);
        for &(name, seed, len) in TREE {
            let got = std::fs::read(ext.join(name)).expect("read back");
            assert!(
                got == pattern(seed, len),
                "{name} differs after the restart"
            );
        }
        drop(fs);
        drop(dev);
        host.stop();
    });
}
