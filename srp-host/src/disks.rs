//! The set of disks a mount exposes, their inode numbers and open handles.
//!
//! Contract: every disk has a unique, valid file name and an inode number never reused within
//! the mount (so a stale kernel inode can never reach a newer disk). Removing a disk takes it
//! out of the directory at once and marks it gone: handles opened before keep the [`Disk`]
//! alive but every I/O through them fails with [`DeviceError::Gone`], without calling the
//! device again.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::SystemTime;

use crate::device::{BlockDevice, DeviceError};
use crate::range_lock::RangeLock;

/// The inode number of the root directory (FUSE_ROOT_ID).
pub(crate) const ROOT_INO: u64 = 1;

/// Why adding or removing a disk failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum DiskError {
    /// The name is empty, `.`, `..`, longer than 255 bytes, or holds `/` or NUL.
    #[error("invalid block file name {0:?}")]
    InvalidName(String),
    /// A disk of that name is already exposed.
    #[error("a block file named {0:?} already exists")]
    Exists(String),
    /// No disk of that name is exposed.
    #[error("no block file named {0:?}")]
    NotFound(String),
    /// The device's block size is not a power of two ≥ 512, or its byte size overflows 64 bits.
    #[error("device geometry unusable: {block_size} bytes × {blocks} blocks")]
    Geometry {
        /// The reported block size.
        block_size: u32,
        /// The reported capacity in blocks.
        blocks: u64,
    },
}

/// One exposed disk.
pub(crate) struct Disk {
    pub(crate) name: String,
    pub(crate) ino: u64,
    device: Arc<dyn BlockDevice>,
    /// Blocks held by in-flight writes (read-modify-write of edge blocks).
    pub(crate) writes: RangeLock,
    gone: AtomicBool,
    pub(crate) size_bytes: u64,
    pub(crate) block_size: u32,
    pub(crate) added: SystemTime,
}

impl Disk {
    /// The device, unless the disk was removed.
    pub(crate) fn device(&self) -> Result<&dyn BlockDevice, DeviceError> {
        if self.gone.load(Ordering::Acquire) {
            return Err(DeviceError::Gone);
        }
        Ok(self.device.as_ref())
    }
}

#[derive(Default)]
struct State {
    by_name: BTreeMap<String, Arc<Disk>>,
    by_ino: HashMap<u64, Arc<Disk>>,
    handles: HashMap<u64, Arc<Disk>>,
    last_ino: u64,
    last_fh: u64,
}

/// The disks of one mount.
#[derive(Default)]
pub(crate) struct Disks {
    state: RwLock<State>,
}

fn check_name(name: &str) -> Result<(), DiskError> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > 255
        || name.contains(['/', '\0']);
    if bad {
        return Err(DiskError::InvalidName(name.to_owned()));
    }
    Ok(())
}

impl Disks {
    // Every update is a single map insert or remove, so a panic elsewhere cannot leave the
    // maps inconsistent: poisoning is ignored.
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Expose `device` as `name`.
    pub(crate) fn add(
        &self,
        name: &str,
        device: Arc<dyn BlockDevice>,
    ) -> Result<Arc<Disk>, DiskError> {
        check_name(name)?;
        let (block_size, blocks) = (device.block_size(), device.capacity_blocks());
        let size_bytes = blocks
            .checked_mul(u64::from(block_size))
            .filter(|_| block_size >= 512 && block_size.is_power_of_two())
            .ok_or(DiskError::Geometry { block_size, blocks })?;
        let mut state = self.write();
        if state.by_name.contains_key(name) {
            return Err(DiskError::Exists(name.to_owned()));
        }
        // Inode 1 is the root; disks start at 2.
        state.last_ino = state.last_ino.max(ROOT_INO) + 1;
        let disk = Arc::new(Disk {
            name: name.to_owned(),
            ino: state.last_ino,
            device,
            writes: RangeLock::default(),
            gone: AtomicBool::new(false),
            size_bytes,
            block_size,
            added: SystemTime::now(),
        });
        state.by_name.insert(name.to_owned(), disk.clone());
        state.by_ino.insert(disk.ino, disk.clone());
        Ok(disk)
    }

    /// Take `name` out of the directory and fail its open handles from now on.
    pub(crate) fn remove(&self, name: &str) -> Result<Arc<Disk>, DiskError> {
        let mut state = self.write();
        let disk = state
            .by_name
            .remove(name)
            .ok_or_else(|| DiskError::NotFound(name.to_owned()))?;
        state.by_ino.remove(&disk.ino);
        disk.gone.store(true, Ordering::Release);
        Ok(disk)
    }

    pub(crate) fn by_name(&self, name: &str) -> Option<Arc<Disk>> {
        self.read().by_name.get(name).cloned()
    }

    pub(crate) fn by_ino(&self, ino: u64) -> Option<Arc<Disk>> {
        self.read().by_ino.get(&ino).cloned()
    }

    /// The disks in name order.
    pub(crate) fn list(&self) -> Vec<Arc<Disk>> {
        self.read().by_name.values().cloned().collect()
    }

    /// A new handle on the live disk `ino`.
    pub(crate) fn open(&self, ino: u64) -> Option<u64> {
        let mut state = self.write();
        let disk = state.by_ino.get(&ino).cloned()?;
        state.last_fh += 1;
        let fh = state.last_fh;
        state.handles.insert(fh, disk);
        Some(fh)
    }

    /// The disk behind handle `fh`, even if removed since.
    pub(crate) fn handle(&self, fh: u64) -> Option<Arc<Disk>> {
        self.read().handles.get(&fh).cloned()
    }

    pub(crate) fn release(&self, fh: u64) {
        self.write().handles.remove(&fh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scsi::Lba;

    struct Null(u32, u64);
    impl BlockDevice for Null {
        fn block_size(&self) -> u32 {
            self.0
        }
        fn capacity_blocks(&self) -> u64 {
            self.1
        }
        fn read(&self, _: Lba, _: &mut [u8]) -> Result<(), DeviceError> {
            Ok(())
        }
        fn write(&self, _: Lba, _: &[u8], _: bool) -> Result<(), DeviceError> {
            Ok(())
        }
        fn flush(&self) -> Result<(), DeviceError> {
            Ok(())
        }
    }

    #[test]
    fn names_are_checked_and_unique() {
        let disks = Disks::default();
        for bad in ["", ".", "..", "a/b", "a\0"] {
            assert!(matches!(
                disks.add(bad, Arc::new(Null(512, 1))),
                Err(DiskError::InvalidName(_))
            ));
        }
        disks.add("a", Arc::new(Null(512, 1))).expect("as set up");
        assert_eq!(
            disks.add("a", Arc::new(Null(512, 1))).err(),
            Some(DiskError::Exists("a".into()))
        );
        assert!(matches!(
            disks.add("b", Arc::new(Null(500, 1))),
            Err(DiskError::Geometry { .. })
        ));
    }

    #[test]
    fn removal_fails_handles_and_never_reuses_inodes() {
        let disks = Disks::default();
        let a = disks.add("a", Arc::new(Null(512, 8))).expect("as set up");
        let fh = disks.open(a.ino).expect("as set up");
        disks.remove("a").expect("as set up");
        assert!(disks.by_ino(a.ino).is_none());
        assert!(disks.open(a.ino).is_none());
        let held = disks.handle(fh).expect("as set up");
        assert_eq!(held.device().err(), Some(DeviceError::Gone));
        let again = disks.add("a", Arc::new(Null(512, 8))).expect("as set up");
        assert!(again.ino > a.ino);
        disks.release(fh);
        assert!(disks.handle(fh).is_none());
    }
}
