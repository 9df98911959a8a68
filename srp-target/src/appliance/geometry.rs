//! A LUN's geometry (SBC-4 READ CAPACITY(16), VPD B0h): its physical block size, where
//! physical blocks start, and its unmap unit, taken from the configuration and checked
//! against what lies below it, so a host never aligns its I/O to a unit the medium does not
//! have.
//!
//! - A block device's queue limits come from sysfs (`/sys/dev/block/MAJ:MIN/`, a partition's
//!   `queue/` being its disk's): `logical_block_size`, `physical_block_size`,
//!   `discard_granularity`, and the device's or partition's own `alignment_offset` and
//!   `discard_alignment`, as LIO's iblock reads them (`iblock_get_alignment_offset_lbas`,
//!   `target_configure_unmap_from_queue`).
//! - A file's unmap unit is its filesystem block (`st_blksize`): holes are punched in whole
//!   ones.
//!
//! The rules, in [`lun_geometry`] (pure: sysfs values in, reported fields out):
//! - a device whose logical block is larger than the LUN's `block_size` is refused: the
//!   backend writes through the page cache without O_DIRECT, so a one-block write would be
//!   a read-modify-write of the device's block, which a power loss can tear, damaging
//!   blocks the host never wrote;
//! - a configured `physical_block_size` smaller than the device's is refused (hosts would
//!   align writes to a unit the device then reads, modifies and writes); equal or larger
//!   (a multiple: both are powers of two) is kept, since I/O aligned to it is aligned to
//!   the device's; without the key the device's own is taken;
//! - a device that starts part-way into a physical block (a partition at sector 63 of a
//!   512e disk) reports LOWEST ALIGNED LBA; an offset that is not whole LUN blocks (every
//!   block would straddle two physical ones) is refused.

use super::StartError;
use crate::config::{Backing, LunConfig};
use crate::exec::Alignment;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A block device's queue limits, in bytes, as sysfs reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// `queue/logical_block_size`: the smallest unit the device addresses.
    pub logical_block_bytes: u32,
    /// `queue/physical_block_size`: the unit it writes whole.
    pub physical_block_bytes: u32,
    /// `alignment_offset` of the device or partition: bytes from its start to the first
    /// physical block boundary; `None`: the kernel found it misaligned beyond repair (-1).
    pub alignment_offset_bytes: Option<u32>,
    /// `queue/discard_granularity`: the discard unit; 0 when the device cannot discard.
    pub discard_granularity_bytes: u32,
    /// `discard_alignment` of the device or partition: bytes from its start to the first
    /// discard unit boundary.
    pub discard_alignment_bytes: u32,
}

/// The sysfs directory of the block device at `path` (`/sys/dev/block/MAJ:MIN`); `None`
/// for anything that is not a block device.
fn sysfs_dir(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let rdev = meta.rdev();
    // Linux's dev_t encoding (glibc gnu_dev_major/minor).
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0x0fff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0x00ff);
    Some(PathBuf::from(format!("/sys/dev/block/{major}:{minor}")))
}

/// The limits under a sysfs block device directory `dev`: a disk's queue is `dev/queue`, a
/// partition's its disk's (`dev/../queue`); `alignment_offset` and `discard_alignment` are
/// the device's or partition's own. `None` when the queue's block sizes are unreadable.
pub fn read_limits(dev: &Path) -> Option<DeviceLimits> {
    let queue = [dev.join("queue"), dev.join("../queue")]
        .into_iter()
        .find(|q| q.join("physical_block_size").is_file())?;
    let num = |p: PathBuf| -> Option<i64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let u32_of = |v: Option<i64>| v.and_then(|v| u32::try_from(v).ok());
    Some(DeviceLimits {
        logical_block_bytes: u32_of(num(queue.join("logical_block_size")))?,
        physical_block_bytes: u32_of(num(queue.join("physical_block_size")))?,
        // Absent (an old kernel): aligned, as the kernel assumes.
        alignment_offset_bytes: match num(dev.join("alignment_offset")) {
            Some(v) => u32::try_from(v).ok(),
            None => Some(0),
        },
        discard_granularity_bytes: u32_of(num(queue.join("discard_granularity"))).unwrap_or(0),
        discard_alignment_bytes: u32_of(num(dev.join("discard_alignment"))).unwrap_or(0),
    })
}

/// The queue limits of the block device at `path`; `None` for anything else, or a device
/// sysfs does not describe.
pub fn device_limits(path: &Path) -> Option<DeviceLimits> {
    read_limits(&sysfs_dir(path)?)
}

/// What a LUN reports of its medium.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LunGeometry {
    /// The physical block size; `None`: the logical block size.
    pub physical_block_bytes: Option<u32>,
    /// LOWEST ALIGNED LBA and the unmap unit.
    pub alignment: Alignment,
}

/// What lies below a LUN, as far as its geometry goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium<'a> {
    /// A block device (named in errors) and its limits.
    Device(&'a Path, DeviceLimits),
    /// A regular file on a filesystem whose block is this many bytes (`st_blksize`).
    File(u32),
    /// Memory, or a device sysfs does not describe: nothing to check against.
    Unknown,
}

/// The geometry a LUN of `block_bytes`-byte blocks reports over `medium`, with
/// `physical_block_size` as configured; or why the two cannot go together (see the module
/// doc for the rules).
pub fn lun_geometry(
    block_bytes: u32,
    configured: Option<u32>,
    medium: Medium<'_>,
) -> Result<LunGeometry, String> {
    let (path, d) = match medium {
        Medium::Device(path, d) => (path, d),
        Medium::File(fs_block) => {
            let physical = configured.filter(|&p| p > block_bytes);
            let per_physical = physical.map_or(1, |p| p / block_bytes);
            // A hole is punched in whole filesystem blocks: unmapping less keeps the space.
            let gran = (fs_block / block_bytes).max(per_physical).max(1);
            // Nothing tells a file's atomic unit: at most a filesystem block (one logical
            // block at least) is written whole.
            let fs_blocks = (fs_block / block_bytes).max(1);
            return Ok(LunGeometry {
                physical_block_bytes: configured,
                alignment: Alignment {
                    unmap_granularity_blocks: Some(gran),
                    atomic_blocks: (fs_blocks < per_physical).then_some(fs_blocks),
                    ..Alignment::default()
                },
            });
        }
        Medium::Unknown => {
            return Ok(LunGeometry {
                physical_block_bytes: configured,
                alignment: Alignment::default(),
            });
        }
    };
    let dev = path.display();
    if d.logical_block_bytes > block_bytes {
        return Err(format!(
            "block_size {block_bytes} is smaller than {dev}'s logical block size {}: each write of one block would be a read-modify-write of the device's block, which a power loss can tear; set block_size = {}",
            d.logical_block_bytes, d.logical_block_bytes
        ));
    }
    let physical = match configured {
        Some(p) if p < d.physical_block_bytes => {
            return Err(format!(
                "physical_block_size {p} is smaller than {dev}'s own physical block size {}: hosts would align writes to {p} bytes, which the device reads, modifies and writes; remove the key to take the device's, or set it to a multiple of {}",
                d.physical_block_bytes, d.physical_block_bytes
            ));
        }
        Some(p) => Some(p),
        None => Some(d.physical_block_bytes).filter(|&p| {
            p > block_bytes && p % block_bytes == 0 && (p / block_bytes).is_power_of_two()
        }),
    };
    let per_physical = physical.map_or(1, |p| p / block_bytes);
    let offset = d.alignment_offset_bytes.unwrap_or_else(|| {
        tracing::warn!(device = %dev, "the kernel reports the device misaligned (alignment_offset -1): LOWEST ALIGNED LBA reported as 0, as LIO does");
        0
    });
    if offset % block_bytes != 0 {
        return Err(format!(
            "{dev} starts {offset} bytes before a physical block boundary (alignment_offset), not whole {block_bytes}-byte blocks: every block would straddle two physical blocks; align the partition to {} bytes",
            d.physical_block_bytes
        ));
    }
    let lowest = (offset / block_bytes) % per_physical;
    // READ CAPACITY(16) has 14 bits for it.
    let lowest_aligned_lba = u16::try_from(lowest)
        .ok()
        .filter(|&l| l <= 0x3fff)
        .ok_or_else(|| {
            format!("{dev}: LOWEST ALIGNED LBA {lowest} does not fit READ CAPACITY(16)'s 14 bits")
        })?;
    // The device's discard unit (LIO: target_configure_unmap_from_queue); none (the backend
    // writes zeros): the default.
    let unmap_granularity_blocks = (d.discard_granularity_bytes > 0)
        .then(|| (d.discard_granularity_bytes / block_bytes).max(1));
    let unmap_alignment_blocks = match unmap_granularity_blocks {
        Some(g) => (d.discard_alignment_bytes / block_bytes) % g,
        None => 0,
    };
    Ok(LunGeometry {
        physical_block_bytes: physical,
        alignment: Alignment {
            lowest_aligned_lba,
            unmap_granularity_blocks,
            unmap_alignment_blocks,
            // A physical block configured above the device's: the device's is what it
            // writes whole.
            atomic_blocks: (d.physical_block_bytes < per_physical * block_bytes)
                .then(|| (d.physical_block_bytes / block_bytes).max(1)),
        },
    })
}

/// The geometry `l` reports, from its configuration and its medium (a block device's
/// queue limits, a file's filesystem block); call once the backing store is open (a file
/// LUN's file then exists).
pub(super) fn geometry(l: &LunConfig) -> Result<LunGeometry, StartError> {
    let limits;
    let medium = match &l.backing {
        Backing::Device { path } => match device_limits(path) {
            Some(d) => {
                limits = (path.clone(), d);
                Medium::Device(&limits.0, limits.1)
            }
            None => {
                tracing::warn!(lun = %l.name, device = %path.display(),
                    "sysfs does not describe this block device: its geometry is not checked");
                Medium::Unknown
            }
        },
        Backing::File { path, .. } => std::fs::metadata(path)
            .ok()
            .and_then(|m| u32::try_from(m.blksize()).ok())
            .map_or(Medium::Unknown, Medium::File),
        Backing::Ram { .. } | Backing::Rbd(_) => Medium::Unknown,
    };
    let g = lun_geometry(l.block_size.bytes(), l.physical_block_size, medium).map_err(|why| {
        StartError::Geometry {
            lun: l.name.clone(),
            why,
        }
    })?;
    if let Medium::Device(path, d) = medium {
        tracing::info!(lun = %l.name, device = %path.display(), ?d, geometry = ?g,
            "geometry from the block device's queue limits");
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 512e disk: 512-byte logical blocks, 4 KiB physical ones, 4 KiB discard unit.
    fn e512(offset: u32, discard_alignment: u32) -> DeviceLimits {
        DeviceLimits {
            logical_block_bytes: 512,
            physical_block_bytes: 4096,
            alignment_offset_bytes: Some(offset),
            discard_granularity_bytes: 4096,
            discard_alignment_bytes: discard_alignment,
        }
    }

    fn dev(d: DeviceLimits) -> Medium<'static> {
        Medium::Device(Path::new("/dev/sdx1"), d)
    }

    #[test]
    fn an_aligned_512e_disk_reports_its_physical_block_and_discard_unit() {
        let g = lun_geometry(512, None, dev(e512(0, 0))).expect("fits");
        assert_eq!(g.physical_block_bytes, Some(4096));
        assert_eq!(
            g.alignment,
            Alignment {
                lowest_aligned_lba: 0,
                unmap_granularity_blocks: Some(8),
                unmap_alignment_blocks: 0,
                atomic_blocks: None,
            }
        );
    }

    #[test]
    fn a_partition_at_sector_63_reports_its_lowest_aligned_lba() {
        // Sector 63 is 3584 bytes into a 4 KiB block: the next boundary is 512 bytes on,
        // LBA 1, which Linux reports as alignment_offset 512 and discard_alignment 512.
        let g = lun_geometry(512, None, dev(e512(512, 512))).expect("fits");
        assert_eq!(g.alignment.lowest_aligned_lba, 1);
        assert_eq!(g.alignment.unmap_alignment_blocks, 1);
        // A larger configured physical block keeps the device's offset (it is < 4 KiB).
        let g = lun_geometry(512, Some(8192), dev(e512(3584, 0))).expect("fits");
        assert_eq!(
            (g.physical_block_bytes, g.alignment.lowest_aligned_lba),
            (Some(8192), 7)
        );
        // The device writes 4 KiB whole, not the configured 8 KiB.
        assert_eq!(g.alignment.atomic_blocks, Some(8));
    }

    #[test]
    fn an_offset_that_is_not_whole_lun_blocks_is_refused() {
        let err = lun_geometry(4096, None, dev(e512(512, 0))).expect_err("straddles");
        assert!(
            err.contains("alignment_offset") && err.contains("/dev/sdx1"),
            "{err}"
        );
    }

    #[test]
    fn a_device_block_larger_than_the_lun_block_is_refused() {
        let k4n = DeviceLimits {
            logical_block_bytes: 4096,
            ..e512(0, 0)
        };
        let err = lun_geometry(512, None, dev(k4n)).expect_err("4Kn under 512");
        assert!(
            err.contains("block_size 512") && err.contains("logical block size 4096"),
            "{err}"
        );
        let g = lun_geometry(4096, None, dev(k4n)).expect("4Kn under 4096");
        assert_eq!(g.physical_block_bytes, None, "physical = logical");
        assert_eq!(g.alignment.unmap_granularity_blocks, Some(1));
    }

    #[test]
    fn a_configured_physical_block_may_not_be_smaller_than_the_devices() {
        let err = lun_geometry(512, Some(512), dev(e512(0, 0))).expect_err("smaller");
        assert!(
            err.contains("physical_block_size 512 is smaller") && err.contains("4096"),
            "{err}"
        );
        for p in [4096, 16384] {
            let g = lun_geometry(512, Some(p), dev(e512(0, 0))).expect("not smaller");
            assert_eq!(g.physical_block_bytes, Some(p));
        }
        // Equal to a 512n device's: harmless, kept.
        let n512 = DeviceLimits {
            physical_block_bytes: 512,
            ..e512(0, 0)
        };
        let g = lun_geometry(512, Some(512), dev(n512)).expect("equal");
        assert_eq!(g.physical_block_bytes, Some(512));
    }

    #[test]
    fn a_device_without_discard_or_with_a_large_unit_reports_it() {
        let none = DeviceLimits {
            discard_granularity_bytes: 0,
            discard_alignment_bytes: 0,
            ..e512(0, 0)
        };
        let g = lun_geometry(512, None, dev(none)).expect("fits");
        assert_eq!(g.alignment.unmap_granularity_blocks, None, "the default");
        let thin = DeviceLimits {
            discard_granularity_bytes: 1 << 20,
            discard_alignment_bytes: 64 << 10,
            ..e512(0, 0)
        };
        let g = lun_geometry(512, None, dev(thin)).expect("fits");
        assert_eq!(g.alignment.unmap_granularity_blocks, Some(2048));
        assert_eq!(g.alignment.unmap_alignment_blocks, 128);
    }

    #[test]
    fn a_file_unmaps_in_its_filesystem_blocks() {
        let g = lun_geometry(512, None, Medium::File(4096)).expect("fits");
        assert_eq!(g.alignment.unmap_granularity_blocks, Some(8));
        let g = lun_geometry(512, Some(16384), Medium::File(4096)).expect("fits");
        assert_eq!(g.alignment.unmap_granularity_blocks, Some(32));
        // Atomic: a filesystem block, not the configured 16 KiB.
        assert_eq!(g.alignment.atomic_blocks, Some(8));
        let g = lun_geometry(512, Some(4096), Medium::File(4096)).expect("fits");
        assert_eq!(g.alignment.atomic_blocks, None);
        let g = lun_geometry(4096, None, Medium::File(65536)).expect("fits");
        assert_eq!(g.alignment.unmap_granularity_blocks, Some(16));
        assert_eq!(g.alignment.lowest_aligned_lba, 0);
    }

    #[test]
    fn sysfs_files_are_read_from_the_device_and_its_disks_queue() {
        let base = std::env::temp_dir().join(format!("geometry-sysfs-{}", std::process::id()));
        let part = base.join("sdx").join("sdx1");
        let queue = base.join("sdx").join("queue");
        std::fs::create_dir_all(&part).expect("dirs");
        std::fs::create_dir_all(&queue).expect("dirs");
        let put = |p: PathBuf, v: &str| std::fs::write(p, format!("{v}\n")).expect("write");
        put(queue.join("logical_block_size"), "512");
        put(queue.join("physical_block_size"), "4096");
        put(queue.join("discard_granularity"), "4096");
        put(part.join("alignment_offset"), "512");
        put(part.join("discard_alignment"), "512");
        // The disk's own alignment differs: the partition's is taken.
        put(base.join("sdx").join("alignment_offset"), "0");
        assert_eq!(read_limits(&part), Some(e512(512, 512)));
        assert_eq!(read_limits(&base.join("sdx")), Some(e512(0, 0)));
        put(part.join("alignment_offset"), "-1");
        assert_eq!(
            read_limits(&part).map(|d| d.alignment_offset_bytes),
            Some(None)
        );
        assert_eq!(read_limits(&base.join("nothing")), None);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn regular_files_and_missing_paths_have_no_device_geometry() {
        assert_eq!(device_limits(Path::new("/etc/hostname")), None);
        assert_eq!(device_limits(Path::new("/nonexistent/x")), None);
    }

    #[test]
    fn a_block_device_reports_its_queue_limits() {
        // Any block device this machine has (loop devices exist on the CI machine; skip
        // with a note where none is visible).
        let Some((dev, d)) = std::fs::read_dir("/dev").ok().and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find_map(|p| device_limits(&p).map(|l| (p, l)))
        }) else {
            eprintln!("no block device with sysfs geometry here: nothing to check");
            return;
        };
        let p = d.physical_block_bytes;
        assert!(p >= 512 && p.is_power_of_two(), "{}: {d:?}", dev.display());
        assert!(d.logical_block_bytes <= p, "{}: {d:?}", dev.display());
    }
}
