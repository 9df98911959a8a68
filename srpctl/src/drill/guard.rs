//! The drill writes: it overwrites the first `--region-mb` of the disk with its own
//! blocks. [`check_unused`] refuses a disk someone is using — mounted, attached to a loop
//! device, or open in another process — unless the operator passes `--destroy-data`.

use anyhow::{Result, bail};
use srp_target::backend::claim;
use std::path::Path;

/// How the disk at `path` is in use, one phrase each (empty: unused).
pub(crate) fn uses(path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for l in claim::loop_devices(path) {
        let on = claim::device_holders(&l);
        if on.is_empty() {
            out.push(format!("attached to {}", l.display()));
        } else {
            out.push(format!("attached to {} ({})", l.display(), on.join(", ")));
        }
    }
    if claim::is_block_device(path) {
        out.extend(claim::device_holders(path));
    }
    for h in claim::open_elsewhere(path) {
        out.push(format!("open in {h}"));
    }
    out
}

/// Refuses `path` while it is in use, unless `destroy` (`--destroy-data`): the drill
/// overwrites its first `region_mb` MiB.
pub(crate) fn check_unused(path: &Path, region_mb: u64, destroy: bool) -> Result<()> {
    let uses = uses(path);
    if uses.is_empty() {
        return Ok(());
    }
    if destroy {
        eprintln!(
            "warning: {} is in use ({}); --destroy-data: the drill overwrites its first {region_mb} MiB anyway",
            path.display(),
            uses.join("; ")
        );
        return Ok(());
    }
    bail!(
        "{} is in use ({}): the drill overwrites the first {region_mb} MiB of the disk, destroying what is there; \
         stop using it, or pass --destroy-data",
        path.display(),
        uses.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("drill-guard-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("disk");
        std::fs::write(&f, vec![0u8; 1 << 20]).expect("disk");
        f
    }

    #[test]
    fn a_disk_open_in_another_process_is_refused_unless_destroy_data() {
        let disk = scratch("open");
        assert!(check_unused(&disk, 64, false).is_ok(), "unused: allowed");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec 3<\"$0\"; exec sleep 30")
            .arg(&disk)
            .spawn()
            .expect("sh");
        let end = Instant::now() + Duration::from_secs(10);
        while uses(&disk).is_empty() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let refused = check_unused(&disk, 64, false);
        let forced = check_unused(&disk, 64, true);
        // The holder by its pid: its name is sh or sleep, as the exec has happened or not.
        let holder = format!("(pid {}))", child.id());
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(disk.parent().expect("dir"));
        let e = refused.expect_err("open elsewhere: refused").to_string();
        assert!(e.contains("open in ") && e.contains(&holder), "{e}");
        assert!(e.contains("--destroy-data"), "{e}");
        assert!(forced.is_ok());
    }

    #[test]
    fn a_disk_attached_to_a_loop_device_is_refused() {
        let disk = scratch("loop");
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&disk)
            .output()
            .expect("losetup runs");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let refused = check_unused(&disk, 64, false);
        let _ = Command::new("losetup").args(["-d", &dev]).status();
        let _ = std::fs::remove_dir_all(disk.parent().expect("dir"));
        let e = refused.expect_err("loop-attached: refused").to_string();
        assert!(e.contains(&format!("attached to {dev}")), "{e}");
    }
}
