//! A LUN's physical block size: as configured (`physical_block_size`), or a block device's
//! own, and the two checked against each other so a host never aligns its I/O to a physical
//! block the device does not have.

use super::StartError;
use crate::config::{Backing, LunConfig};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The physical block size of the block device at `path`, from sysfs
/// (`/sys/dev/block/MAJ:MIN/queue/physical_block_size`, a partition's from its disk's
/// queue); `None` for anything else, or a device sysfs does not describe.
pub fn device_physical_block_size(path: &Path) -> Option<u32> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let rdev = meta.rdev();
    // Linux's dev_t encoding (glibc gnu_dev_major/minor).
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0fff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0x00ff);
    let dev = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    [dev.join("queue"), dev.join("../queue")]
        .iter()
        .find_map(|q| std::fs::read_to_string(q.join("physical_block_size")).ok())
        .and_then(|s| s.trim().parse().ok())
}

/// The physical block size `l` exports: the configured one (which must be the device's own
/// when the backing is a block device that reports one), else the device's own when it is
/// a multiple of the logical block size, else `None` (the logical block size).
pub(super) fn physical_block_size(l: &LunConfig) -> Result<Option<u32>, StartError> {
    let device = match &l.backing {
        Backing::Device { path } => device_physical_block_size(path).map(|d| (path, d)),
        Backing::File { .. } | Backing::Ram { .. } => None,
    };
    let bs = l.block_size.bytes();
    match (l.physical_block_size, device) {
        (Some(p), Some((path, d))) if p != d => Err(StartError::Geometry {
            lun: l.name.clone(),
            why: format!(
                "physical_block_size {p} disagrees with {}'s own physical block size {d}: remove the key to take the device's, or set it to {d}",
                path.display()
            ),
        }),
        (Some(p), _) => Ok(Some(p)),
        (None, Some((_, d))) if d > bs && d % bs == 0 && (d / bs).is_power_of_two() => Ok(Some(d)),
        (None, _) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_and_missing_paths_have_no_device_geometry() {
        assert_eq!(device_physical_block_size(Path::new("/etc/hostname")), None);
        assert_eq!(
            device_physical_block_size(Path::new("/nonexistent/x")),
            None
        );
    }

    #[test]
    fn a_block_device_reports_its_physical_block_size() {
        // Any block device this machine has (loop devices exist on the CI machine; skip
        // with a note where none is visible).
        let Some(dev) = std::fs::read_dir("/dev").ok().and_then(|d| {
            d.flatten().map(|e| e.path()).find(|p| {
                std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device())
                    && device_physical_block_size(p).is_some()
            })
        }) else {
            eprintln!("no block device with sysfs geometry here: nothing to check");
            return;
        };
        let p = device_physical_block_size(&dev).unwrap_or(0);
        assert!(p >= 512 && p.is_power_of_two(), "{}: {p}", dev.display());
    }
}
