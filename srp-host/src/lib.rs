//! The SRP host's block-file layer: every disk as a file in a FUSE directory.
//!
//! On Linux the host daemon exposes each (multipath) disk as a regular file that can be
//! `losetup`'d, formatted and mounted. This crate knows nothing of SRP: it serves any
//! [`BlockDevice`] (the SRP disk implements it; tests use RAM). It sits on `fuser`'s pure-Rust
//! mount and the `scsi` unit types only.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # fn demo(disk: Arc<dyn srp_host::BlockDevice>) -> Result<(), Box<dyn std::error::Error>> {
//! let mounted = srp_host::BlockFiles::mount("/run/srp/disks", &Default::default())?;
//! let path = mounted.files().add("naa.600140512345678", disk)?; // losetup -f --show <path>
//! mounted.files().remove("naa.600140512345678")?;               // the LUN was lost
//! drop(mounted);                                                 // unmounts
//! # Ok(()) }
//! ```
//!
//! # Architecture
//! - [`device`]: the [`BlockDevice`] trait and its error.
//! - `io`: byte-offset reads and writes over whole blocks, read-modify-write of edge blocks.
//! - `range_lock`: the per-disk block-range lock that serializes overlapping writes.
//! - `disks`: the set of disks, inode numbers, open handles, removal.
//! - `fs`: the `fuser::Filesystem` (errno mapping, `direct_io`, FUSE limits).
//! - [`mount`]: [`BlockFiles::mount`], the [`Mounted`] guard, adding and removing disks.
//!
//! With no `std` (the default feature off) only [`device`] remains: the block-device interface the multipath core names; the block files are Linux and `std`.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod device;
// The FUSE file system, its mount and what only they use (the disk set, byte I/O over
// blocks, the range lock): Linux only (`/dev/fuse` and the kernel's mount call). The device
// trait is portable, so `mpio` builds for any target.
#[cfg(all(feature = "std", target_os = "linux"))]
mod disks;
#[cfg(all(feature = "std", target_os = "linux"))]
mod fs;
#[cfg(all(feature = "std", target_os = "linux"))]
mod io;
#[cfg(all(feature = "std", target_os = "linux"))]
pub mod mount;
#[cfg(all(feature = "std", target_os = "linux"))]
mod range_lock;

pub use device::{BlockDevice, DeviceError};
#[cfg(all(feature = "std", target_os = "linux"))]
pub use disks::DiskError;
#[cfg(all(feature = "std", target_os = "linux"))]
pub use io::IoError;
#[cfg(all(feature = "std", target_os = "linux"))]
pub use mount::{BlockFiles, MountError, MountOptions, Mounted};
