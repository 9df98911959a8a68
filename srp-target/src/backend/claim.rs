//! Who else has a backing store: the data-safety guards of issue #29 (Deliver 4).
//!
//! - A block device is opened with `O_EXCL`, which Linux refuses (EBUSY) while the device
//!   is mounted, part of a device-mapper or md device, used as swap, or opened exclusively
//!   by another program (another target, `mkfs`): the error names the holder where Linux
//!   tells it ([`device_holders`]: `/proc/self/mountinfo`, `/sys/dev/block/M:m/holders`,
//!   `/proc/swaps`). A read-only LUN of a claimed device is allowed only when the
//!   configuration asks for it (`allow_claimed = true`).
//! - An image file is locked with `flock` (exclusive; shared for a read-only LUN), so a
//!   second target (or a second LUN of this one) cannot serve it; the error names the
//!   process holding the lock ([`lock_holders`]: `/proc/locks`).
//! - [`open_elsewhere`] lists the processes with a path open (`/proc/*/fd`), for the
//!   failover drill's refusal and for telling "held by the running instance" apart.

use nix::sys::stat::{SFlag, stat};
use std::fmt;
use std::path::{Path, PathBuf};

/// A process that has a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// Its pid.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub comm: String,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {})", self.comm, self.pid)
    }
}

fn holder(pid: u32) -> Holder {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map_or_else(|_| "?".to_owned(), |c| c.trim().to_owned());
    Holder { pid, comm }
}

/// Device and inode of `path` (of the device node itself for a block device: its rdev).
fn identity(path: &Path) -> Option<(u64, u64, bool)> {
    let st = stat(path).ok()?;
    let is_block = SFlag::from_bits_truncate(st.st_mode).contains(SFlag::S_IFBLK);
    Some((st.st_dev, st.st_ino, is_block))
}

/// The processes holding an `flock` on `path` (`/proc/locks`).
pub fn lock_holders(path: &Path) -> Vec<Holder> {
    let Some((dev, ino, _)) = identity(path) else {
        return Vec::new();
    };
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let Ok(text) = std::fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (major and minor in hex).
    let mut out: Vec<Holder> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let kind = f.iter().position(|w| *w == "FLOCK")?;
            let pid: u32 = f.get(kind + 3)?.parse().ok()?;
            let mut id = f.get(kind + 4)?.split(':');
            let maj = u64::from_str_radix(id.next()?, 16).ok()?;
            let min = u64::from_str_radix(id.next()?, 16).ok()?;
            let i: u64 = id.next()?.parse().ok()?;
            (maj == major && min == minor && i == ino).then(|| holder(pid))
        })
        .collect();
    out.dedup();
    out
}

/// What holds the block device `path`, in words, where Linux tells it: its mounts, the
/// devices built on it, swap.
pub fn device_holders(path: &Path) -> Vec<String> {
    let Ok(st) = stat(path) else {
        return Vec::new();
    };
    let (major, minor) = (
        nix::sys::stat::major(st.st_rdev),
        nix::sys::stat::minor(st.st_rdev),
    );
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") {
        // "36 35 8:1 / /mnt rw,relatime - ext4 /dev/sda1 rw": field 3 is major:minor.
        for l in text.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(2) == Some(&format!("{major}:{minor}").as_str()) {
                if let Some(mnt) = f.get(4) {
                    out.push(format!("mounted at {mnt}"));
                }
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir(format!("/sys/dev/block/{major}:{minor}/holders")) {
        for e in dir.flatten() {
            out.push(format!("used by {}", e.file_name().to_string_lossy()));
        }
    }
    if let Ok(text) = std::fs::read_to_string("/proc/swaps") {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        for l in text.lines().skip(1) {
            if let Some(name) = l.split_whitespace().next() {
                if Path::new(name) == canonical || Path::new(name) == path {
                    out.push("used as swap".to_owned());
                }
            }
        }
    }
    out
}

/// The processes other than this one with `path` open (`/proc/*/fd`; as root, all of
/// them), each once.
pub fn open_elsewhere(path: &Path) -> Vec<Holder> {
    let Some((dev, ino, is_block)) = identity(path) else {
        return Vec::new();
    };
    let rdev = stat(path).map(|s| s.st_rdev).unwrap_or(0);
    let me = std::process::id();
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let has = fds.flatten().any(|fd| {
            stat(&fd.path()).is_ok_and(|s| {
                if is_block {
                    SFlag::from_bits_truncate(s.st_mode).contains(SFlag::S_IFBLK)
                        && s.st_rdev == rdev
                } else {
                    s.st_dev == dev && s.st_ino == ino
                }
            })
        });
        if has {
            out.push(holder(pid));
        }
    }
    out
}

/// Whether process `pid` has `path` open.
pub fn has_open(pid: u32, path: &Path) -> bool {
    let Some((dev, ino, is_block)) = identity(path) else {
        return false;
    };
    let rdev = stat(path).map(|s| s.st_rdev).unwrap_or(0);
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        stat(&fd.path()).is_ok_and(|s| {
            if is_block {
                SFlag::from_bits_truncate(s.st_mode).contains(SFlag::S_IFBLK) && s.st_rdev == rdev
            } else {
                s.st_dev == dev && s.st_ino == ino
            }
        })
    })
}

/// The pid of the process serving the unix socket at `path` (its peer credentials), if
/// one answers: the running target of a configuration, by its control socket.
pub fn socket_peer_pid(path: &Path) -> Option<u32> {
    let stream = std::os::unix::net::UnixStream::connect(path).ok()?;
    let cred =
        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials).ok()?;
    u32::try_from(cred.pid()).ok()
}

/// What a configuration check finds of one LUN's store.
#[derive(Debug)]
pub enum StoreCheck {
    /// Free: the target could take it now.
    Free,
    /// An image file that does not exist yet: the target creates it (0600).
    WillBeCreated,
    /// Served by the running instance of this configuration (its pid): not an error.
    ServedByRunning(u32),
    /// Not there (yet): the target would not start without it. A warning: a check may
    /// run before the device or image is in place.
    Missing(super::BackendError),
    /// Held by someone else, or unusable: the target would refuse it.
    Refused(super::BackendError),
}

/// Checks `lun`'s store as the target would open it, releasing it at once; `running` is
/// the pid of the running instance of this configuration, if one answers (its control
/// socket's peer): a store that instance has open is reported as served by it.
pub fn check_store(lun: &crate::config::LunConfig, running: Option<u32>) -> StoreCheck {
    use crate::config::Backing;
    let (path, created) = match &lun.backing {
        Backing::Ram { .. } => return StoreCheck::Free,
        // An image is checked by opening it as the target would (cluster, pool, image,
        // size); its writers are the cluster's business (exclusive lock, blocklist).
        #[cfg(target_os = "linux")]
        Backing::Rbd(b) => {
            return match super::RbdBackend::open(&super::rbd::RbdSpec::from(b), lun.block_size) {
                Ok(_) => StoreCheck::Free,
                Err(e) => StoreCheck::Refused(e),
            };
        }
        #[cfg(not(target_os = "linux"))]
        Backing::Rbd(_) => return StoreCheck::Free,
        Backing::File { path, size_bytes } => (path, size_bytes.is_some()),
        Backing::Device { path } => (path, false),
    };
    if created && !path.exists() {
        return StoreCheck::WillBeCreated;
    }
    let opened = super::FileBackend::open_as(
        path,
        lun.block_size,
        super::OpenMode {
            read_only: lun.read_only,
            allow_claimed: lun.allow_claimed,
        },
    );
    match opened {
        Ok(_) => StoreCheck::Free,
        Err(e @ super::BackendError::Held { .. }) => match running {
            Some(pid) if has_open(pid, path) => StoreCheck::ServedByRunning(pid),
            _ => StoreCheck::Refused(e),
        },
        Err(e @ super::BackendError::Io { .. }) if matches!(&e, super::BackendError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound) => {
            StoreCheck::Missing(e)
        }
        Err(e) => StoreCheck::Refused(e),
    }
}

/// The loop devices backed by `path` (`/sys/block/loop*/loop/backing_file`).
pub fn loop_devices(path: &Path) -> Vec<PathBuf> {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("loop/backing_file"))
                .is_ok_and(|b| Path::new(b.trim()) == canonical)
        })
        .map(|e| Path::new("/dev").join(e.file_name()))
        .collect()
}

/// Whether `path` is a block device.
pub fn is_block_device(path: &Path) -> bool {
    identity(path).is_some_and(|(_, _, b)| b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_held_elsewhere_is_named_with_its_process() {
        let dir = std::env::temp_dir().join(format!("claim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("image");
        std::fs::write(&file, [0u8; 512]).expect("file");
        // flock(1) holds it from another process.
        let mut child = std::process::Command::new("flock")
            .args(["-x", "-F"])
            .arg(&file)
            .args(["sleep", "30"])
            .spawn()
            .expect("flock(1) runs");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let holders = loop {
            let h = lock_holders(&file);
            if !h.is_empty() || std::time::Instant::now() > deadline {
                break h;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let open = open_elsewhere(&file);
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(holders.len(), 1, "{holders:?}");
        assert!(
            open.iter().any(|h| h.pid == holders[0].pid),
            "{open:?} vs {holders:?}"
        );
    }
}
