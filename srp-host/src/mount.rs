//! Mounting the block-file directory, and the live set of its files.
//!
//! Contract: [`BlockFiles::mount`] mounts an empty directory of block files on `dir` (as root
//! through the kernel's mount call, no `fusermount` needed) and returns a [`Mounted`] guard;
//! dropping the guard unmounts, so a test that panics leaves no mount behind. If the mount is
//! still in use (a loop device, an open file), the unmount is made lazy: the directory is
//! detached at once and the kernel ends the FUSE session when the last user goes, so dropping
//! never hangs. Disks come and go through [`BlockFiles`] while mounted; a removed disk's name
//! leaves the kernel's cache at once.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{BackgroundSession, Config, INodeNo, MountOption, Notifier, SessionACL};

use crate::device::BlockDevice;
use crate::disks::{DiskError, Disks, ROOT_INO};
use crate::fs::BlockFs;

/// Why mounting or unmounting failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// FUSE cannot be used on this machine; the message says what to do.
    #[error("FUSE unavailable: {0}")]
    FuseUnavailable(String),
    /// The mount point is missing or not a directory.
    #[error("mount point {0} is not a directory")]
    NotADirectory(PathBuf),
    /// The kernel refused the mount.
    #[error("mounting FUSE on {dir}: {source}")]
    Mount {
        /// The mount point.
        dir: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The connection could not be aborted through fusectl.
    #[error("aborting the FUSE connection of {dir}: {source}")]
    Abort {
        /// The mount point.
        dir: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Neither a plain nor a lazy unmount succeeded.
    #[error("unmounting {dir}: {source}")]
    Unmount {
        /// The mount point.
        dir: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// FUSE worker threads (each serves one request at a time; I/O to different disks or
    /// block ranges runs in parallel across them): the requests in flight per mount, so a
    /// queue depth of 32 needs 32. The kernel's background queue (`max_background`, where
    /// asynchronous direct I/O waits) is sized to twice this.
    pub threads: usize,
    /// The largest read or write one FUSE request carries, in bytes. The kernel caps it at
    /// `fs.fuse.max_pages_limit` pages (256 by default: 1 MiB).
    pub max_io_bytes: u32,
    /// Let users other than the mounting one reach the files (`allow_other`).
    pub allow_other: bool,
    /// The source name shown in `/proc/mounts`.
    pub fs_name: String,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            threads: 32,
            max_io_bytes: 1 << 20,
            allow_other: false,
            fs_name: "srp-host".to_owned(),
        }
    }
}

/// The block files of one mount; cheap to clone and usable from any thread.
#[derive(Clone)]
pub struct BlockFiles {
    disks: Arc<Disks>,
    notifier: Notifier,
    dir: PathBuf,
    /// The FUSE connection number (the minor of the mount's device), for fusectl.
    connection: Option<u64>,
}

/// Where fusectl shows one directory per FUSE connection.
const FUSECTL: &str = "/sys/fs/fuse/connections";

/// A mounted block-file directory; dropping it unmounts.
pub struct Mounted {
    files: BlockFiles,
    session: Option<BackgroundSession>,
}

fn check_fuse() -> Result<(), MountError> {
    match OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(MountError::FuseUnavailable(
            "/dev/fuse does not exist: load the fuse module (modprobe fuse) or give the \
             container the device"
                .to_owned(),
        )),
        Err(e) => Err(MountError::FuseUnavailable(format!(
            "cannot open /dev/fuse ({e}): run as root, or install fuse3 for fusermount3"
        ))),
    }
}

impl BlockFiles {
    /// Mount an empty block-file directory on `dir`.
    pub fn mount(dir: impl AsRef<Path>, options: &MountOptions) -> Result<Mounted, MountError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(MountError::NotADirectory(dir.to_owned()));
        }
        check_fuse()?;
        let dir = dir.canonicalize().map_err(|source| MountError::Mount {
            dir: dir.to_owned(),
            source,
        })?;
        let disks = Arc::new(Disks::default());
        let fs = BlockFs {
            disks: disks.clone(),
            max_io_bytes: options.max_io_bytes,
            max_background: u16::try_from(options.threads.max(1) * 2).unwrap_or(u16::MAX),
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            mounted: SystemTime::now(),
        };
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName(options.fs_name.clone()),
            MountOption::Subtype("srp-host".to_owned()),
            MountOption::NoSuid,
            MountOption::NoDev,
            MountOption::NoExec,
        ];
        if options.allow_other {
            config.acl = SessionACL::All;
        }
        config.n_threads = Some(options.threads.max(1));
        config.clone_fd = true;
        let session = fuser::spawn_mount(fs, &dir, &config).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                // The kernel mount was refused and fuser fell back to the setuid helper.
                MountError::FuseUnavailable(format!(
                    "mounting without root needs fusermount3 (apt-get install fuse3): {source}"
                ))
            } else {
                MountError::Mount {
                    dir: dir.clone(),
                    source,
                }
            }
        })?;
        // The first stat waits for the kernel's INIT, so the mount is ready on return.
        let connection = std::fs::metadata(&dir)
            .map(|m| std::os::unix::fs::MetadataExt::dev(&m))
            .ok()
            .map(|dev| (dev & 0xff) | ((dev >> 12) & 0xf_ff00));
        let files = BlockFiles {
            disks,
            notifier: session.notifier(),
            dir,
            connection,
        };
        Ok(Mounted {
            files,
            session: Some(session),
        })
    }

    /// Expose `device` as the file `name`; returns its path.
    pub fn add(&self, name: &str, device: Arc<dyn BlockDevice>) -> Result<PathBuf, DiskError> {
        self.disks.add(name, device)?;
        Ok(self.dir.join(name))
    }

    /// Remove the file `name`: it leaves the directory at once and every handle still open on
    /// it fails with EIO from now on. The device is not called again.
    pub fn remove(&self, name: &str) -> Result<(), DiskError> {
        let disk = self.disks.remove(name)?;
        // Drop the kernel's cached name now rather than after the entry TTL. ENOENT (the
        // kernel had not cached it) is already mapped to success by fuser.
        if let Err(e) = self
            .notifier
            .delete(INodeNo(ROOT_INO), INodeNo(disk.ino), name.as_ref())
        {
            tracing::warn!(name, error = %e, "could not invalidate a removed block file");
        }
        Ok(())
    }

    /// The names of the files, in order.
    pub fn names(&self) -> Vec<String> {
        self.disks.list().iter().map(|d| d.name.clone()).collect()
    }

    /// Abort the FUSE connection (fusectl `abort`): requests in flight fail with ECONNABORTED,
    /// later ones with ENOTCONN. The last resort when a device call never returns — or when the process
    /// must exit while its own threads wait on its mount, which would otherwise never finish.
    /// Mounts fusectl on its usual place if nothing is there yet.
    pub fn abort(&self) -> Result<(), MountError> {
        let err = |source| MountError::Abort {
            dir: self.dir.clone(),
            source,
        };
        let conn = self
            .connection
            .ok_or_else(|| err(std::io::ErrorKind::NotFound.into()))?;
        let ctl = Path::new(FUSECTL);
        if !ctl.join(conn.to_string()).exists() {
            nix::mount::mount(
                Some("fusectl"),
                ctl,
                Some("fusectl"),
                nix::mount::MsFlags::empty(),
                None::<&str>,
            )
            .map_err(|e| err(e.into()))?;
        }
        std::fs::write(ctl.join(conn.to_string()).join("abort"), b"1").map_err(err)
    }

    /// The mount point.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the file `name` (whether or not it exists).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Mounted {
    /// The live set of block files.
    pub fn files(&self) -> &BlockFiles {
        &self.files
    }

    /// Unmount now, reporting failure (dropping does the same, logging it).
    pub fn unmount(mut self) -> Result<(), MountError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), MountError> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let dir = self.files.dir.clone();
        if let Err(e) = session.umount_and_join() {
            // Busy (a loop device or an open file): detach lazily; the session thread ends
            // when the kernel drops the connection after the last user.
            tracing::warn!(dir = %dir.display(), error = %e, "unmount failed; detaching lazily");
            match nix::mount::umount2(&dir, nix::mount::MntFlags::MNT_DETACH) {
                // EINVAL: no longer a mount point (the unmount worked, the join reported).
                Ok(()) | Err(nix::errno::Errno::EINVAL) => {}
                Err(errno) => {
                    return Err(MountError::Unmount {
                        dir,
                        source: errno.into(),
                    });
                }
            }
        }
        Ok(())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "block-file directory left mounted");
        }
    }
}
