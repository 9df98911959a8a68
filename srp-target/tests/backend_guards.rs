//! The data-safety guards of the backing stores (issue #29, Deliver 4): an image is
//! created 0600 and locked, so a second target (or LUN) cannot serve it and the refusal
//! names who holds it; a block device is opened exclusively, so a mounted one is refused
//! naming the mount, and a read-only LUN may share it only with `allow_claimed`; the
//! configuration check tells a store the running instance serves from one held by
//! someone else. Block devices are loop devices over files in a temp dir, made and
//! removed by the test (root, losetup, mkfs.ext4, mount).

mod common;

use common::TempDir;
use srp_target::backend::claim::{self, StoreCheck};
use srp_target::backend::{BackendError, OpenMode};
use srp_target::config::{Backing, LunConfig};
use srp_target::{BlockSize, FileBackend};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn held(r: Result<FileBackend, BackendError>) -> String {
    match r {
        Err(e @ BackendError::Held { .. }) => e.to_string(),
        Err(e) => panic!("refused, but not as held: {e}"),
        Ok(_) => panic!("opened a store someone holds"),
    }
}

fn lun(path: &Path, device: bool, read_only: bool, allow_claimed: bool) -> LunConfig {
    LunConfig {
        name: "guarded".into(),
        backing: if device {
            Backing::Device {
                path: path.to_path_buf(),
            }
        } else {
            Backing::File {
                path: path.to_path_buf(),
                size_bytes: None,
            }
        },
        block_size: BlockSize::B512,
        physical_block_size: None,
        read_only,
        allow_claimed,
        write_cache: true,
        write_cache_changeable: false,
        record_writes: None,
    }
}

/// A child process that runs `cmd` and is killed on drop.
struct Held(Child);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn an_image_is_created_0600_and_served_by_one_target_at_a_time() {
    let dir = TempDir::new("guard-image");
    let img = dir.path().join("vol.img");
    let first = FileBackend::create(&img, 1 << 20, BlockSize::B512).expect("create");
    let mode = std::fs::metadata(&img).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "created {mode:o}");
    // A second LUN of this process: refused, naming this target.
    let e = held(FileBackend::open(&img, BlockSize::B512, false));
    assert!(e.contains("locked by this target"), "{e}");
    let e = held(FileBackend::open(&img, BlockSize::B512, true));
    assert!(e.contains("locked by this target"), "{e}");
    drop(first);
    // Read-only LUNs share an image; a writer is refused while they hold it.
    let a = FileBackend::open(&img, BlockSize::B512, true).expect("read-only");
    let b = FileBackend::open(&img, BlockSize::B512, true).expect("read-only, shared");
    held(FileBackend::open(&img, BlockSize::B512, false));
    drop((a, b));
    // Another process (another target) holding it: refused, naming it.
    let _other = Held(
        Command::new("flock")
            .args(["-x", "-F"])
            .arg(&img)
            .args(["sleep", "30"])
            .spawn()
            .expect("flock(1)"),
    );
    wait_for("the other lock", || !claim::lock_holders(&img).is_empty());
    let e = held(FileBackend::open(&img, BlockSize::B512, false));
    assert!(e.contains("locked by sleep (pid"), "{e}");
    let e = held(FileBackend::create(&img, 1 << 20, BlockSize::B512));
    assert!(e.contains("locked by sleep (pid"), "{e}");
    // The configuration check: not served by a running instance of ours (none given, or
    // one that does not have it open): refused.
    let l = lun(&img, false, false, false);
    assert!(matches!(
        claim::check_store(&l, None),
        StoreCheck::Refused(_)
    ));
    assert!(matches!(
        claim::check_store(&l, Some(std::process::id())),
        StoreCheck::Refused(_)
    ));
}

#[test]
fn the_check_reports_a_store_the_running_instance_serves() {
    let dir = TempDir::new("guard-check");
    let img = dir.path().join("vol.img");
    let serving = FileBackend::create(&img, 1 << 20, BlockSize::B512).expect("create");
    let l = lun(&img, false, false, false);
    // This process stands for the running target: it has the image open and locked.
    match claim::check_store(&l, Some(std::process::id())) {
        StoreCheck::ServedByRunning(pid) => assert_eq!(pid, std::process::id()),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        claim::check_store(&l, None),
        StoreCheck::Refused(_)
    ));
    drop(serving);
    assert!(matches!(claim::check_store(&l, None), StoreCheck::Free));
    let missing = LunConfig {
        backing: Backing::File {
            path: dir.path().join("new.img"),
            size_bytes: Some(1 << 20),
        },
        ..l
    };
    assert!(matches!(
        claim::check_store(&missing, None),
        StoreCheck::WillBeCreated
    ));
}

/// A loop device over a file in `dir`, with ext4 on it, detached (and unmounted) on drop.
struct LoopDisk {
    dev: PathBuf,
    mounted: Option<PathBuf>,
}

impl LoopDisk {
    fn new(dir: &Path) -> LoopDisk {
        let file = dir.join("disk.img");
        std::fs::write(&file, vec![0u8; 16 << 20]).expect("disk file");
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&file)
            .output()
            .expect("losetup");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let d = LoopDisk { dev, mounted: None };
        let mkfs = Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&d.dev)
            .status()
            .expect("mkfs.ext4");
        assert!(mkfs.success());
        d
    }

    fn mount(&mut self, at: &Path) {
        std::fs::create_dir_all(at).expect("mount point");
        let ok = Command::new("mount")
            .arg(&self.dev)
            .arg(at)
            .status()
            .expect("mount");
        assert!(ok.success(), "mount {}", self.dev.display());
        self.mounted = Some(at.to_path_buf());
    }

    fn umount(&mut self) {
        if let Some(at) = self.mounted.take() {
            let _ = Command::new("umount").arg(&at).status();
        }
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        self.umount();
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

#[test]
fn a_mounted_device_is_refused_naming_the_mount_and_shared_read_only_only_when_asked() {
    let dir = TempDir::new("guard-device");
    let mut disk = LoopDisk::new(dir.path());
    let at = dir.path().join("mnt");
    disk.mount(&at);
    let e = held(FileBackend::open(&disk.dev, BlockSize::B512, false));
    assert!(e.contains(&format!("mounted at {}", at.display())), "{e}");
    // Read-only: refused too, saying how to share it.
    let e = held(FileBackend::open(&disk.dev, BlockSize::B512, true));
    assert!(e.contains("allow_claimed"), "{e}");
    let shared = FileBackend::open_as(
        &disk.dev,
        BlockSize::B512,
        OpenMode {
            read_only: true,
            allow_claimed: true,
        },
    )
    .expect("read-only, allow_claimed: shared");
    drop(shared);
    // allow_claimed does not make a writer share it (the configuration refuses it too).
    held(FileBackend::open_as(
        &disk.dev,
        BlockSize::B512,
        OpenMode {
            read_only: false,
            allow_claimed: true,
        },
    ));
    assert!(matches!(
        claim::check_store(&lun(&disk.dev, true, false, false), None),
        StoreCheck::Refused(_)
    ));
    disk.umount();
    // Free now; and while this target has it, nobody can mount it or open it exclusively.
    let ours = FileBackend::open(&disk.dev, BlockSize::B512, false).expect("unmounted: ours");
    let e = held(FileBackend::open(&disk.dev, BlockSize::B512, false));
    assert!(e.contains("in use by this target"), "{e}");
    std::fs::create_dir_all(&at).expect("mount point");
    let mount = Command::new("mount")
        .arg(&disk.dev)
        .arg(&at)
        .output()
        .expect("mount");
    if mount.status.success() {
        disk.mounted = Some(at.clone());
        panic!("mounted a device the target has open exclusively");
    }
    drop(ours);
}
