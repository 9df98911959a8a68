//! Issue #6's acceptance shape on a RAM disk: losetup the block file, mkfs.ext4, mount, write a
//! tree, sync, unmount, detach; then over a fresh FUSE mount of the same disk, fsck, mount
//! again and find every file intact. Needs root, loop devices and e2fsprogs: without them the
//! test fails and says so (CI runs as root on a machine that has them).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{FsMount, LoopDev, RamDisk, TempDir, bounded, mount, pattern, run};

/// The tree written: (relative path, seed, length).
const TREE: &[(&str, u64, usize)] = &[
    ("a.txt", 1, 13),
    ("dir/b.bin", 2, 4096),
    ("dir/sub/c.bin", 3, 100_000),
    ("dir/sub/big.bin", 4, 3 << 20),
    ("empty", 5, 0),
];

fn require_tools() {
    for tool in ["losetup", "mkfs.ext4", "e2fsck", "mount", "umount"] {
        let found = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
        assert!(
            found,
            "{tool} not found: the ext4 round trip needs util-linux and e2fsprogs"
        );
    }
    assert!(
        Path::new("/dev/loop-control").exists(),
        "/dev/loop-control missing: the ext4 round trip needs loop devices (modprobe loop)"
    );
}

#[test]
fn ext4_on_a_block_file_survives_a_remount() {
    require_tools();
    bounded(50, || {
        let ram = Arc::new(RamDisk::new(512, 64 * 2048)); // 64 MiB
        {
            let (fuse_dir, ext_dir) = (TempDir::new("e4fuse"), TempDir::new("e4mnt"));
            let mounted = mount(fuse_dir.path());
            let file = mounted.files().add("lun0", ram.clone()).unwrap();
            let dev = LoopDev::attach(&file);
            run("mkfs.ext4", &["-q", "-F", &dev.0]);
            let fs = FsMount::mount(&dev.0, ext_dir.path());
            for &(name, seed, len) in TREE {
                let p = ext_dir.path().join(name);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, pattern(seed, len)).unwrap();
            }
            run("sync", &[]);
            drop(fs);
            drop(dev);
            mounted.unmount().unwrap();
        }
        // A new mount of the same disk: what ext4 wrote went through to the device.
        let (fuse_dir, ext_dir) = (TempDir::new("e4fuse2"), TempDir::new("e4mnt2"));
        let mounted = mount(fuse_dir.path());
        let file = mounted.files().add("lun0", ram.clone()).unwrap();
        let dev = LoopDev::attach(&file);
        run("e2fsck", &["-f", "-n", &dev.0]);
        let fs = FsMount::mount(&dev.0, ext_dir.path());
        for &(name, seed, len) in TREE {
            let got = std::fs::read(ext_dir.path().join(name)).unwrap();
            assert!(
                got == pattern(seed, len),
                "{name} differs after the remount"
            );
        }
        drop(fs);
        drop(dev);
        mounted.unmount().unwrap();
    });
}
