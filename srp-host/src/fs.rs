//! The FUSE filesystem: a root directory with one regular file per disk.
//!
//! Contract: each file is `capacity × block size` bytes and can be neither created, removed,
//! renamed nor resized through the mount — only [`crate::BlockFiles`] changes the set. Reads
//! and writes at any offset go to the device through [`crate::io`]; `fsync` and `flush` (every
//! `close`) call [`crate::BlockDevice::flush`], as closing a block device syncs it; a write on a
//! file opened `O_SYNC`/`O_DSYNC` is FUA. Errors: device failures and removed disks → EIO,
//! writes starting at the end → ENOSPC, resizing → EPERM, unknown names → ENOENT.
//!
//! Files are opened `direct_io`: the kernel keeps no page cache of a disk. The host must not
//! cache blocks another initiator path may change, a lost disk must fail reads at once rather
//! than serve stale pages, and a loop device or filesystem above already caches. It also lets
//! one `read`/`write` reach us whole (up to `max_write`, 1 MiB) instead of page by page, and
//! `FOPEN_PARALLEL_DIRECT_WRITES` lets writers run concurrently (hence the range lock).

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::device::DeviceError;
use crate::disks::{Disk, Disks, ROOT_INO};
use crate::io::{self, IoError};

/// How long the kernel may cache names and attributes; removal also invalidates at once.
const TTL: Duration = Duration::from_secs(1);

/// The errno a failed I/O returns to the application.
fn errno(e: &IoError) -> Errno {
    match e {
        IoError::NoSpace { .. } => Errno::ENOSPC,
        IoError::Geometry { .. } | IoError::Device(DeviceError::Io(_) | DeviceError::Gone) => {
            Errno::EIO
        }
    }
}

/// The filesystem served by the FUSE session threads.
pub(crate) struct BlockFs {
    pub(crate) disks: Arc<Disks>,
    pub(crate) max_io_bytes: u32,
    /// The kernel's background-request limit asked for at init.
    pub(crate) max_background: u16,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) mounted: SystemTime,
}

impl BlockFs {
    fn root_attr(&self) -> FileAttr {
        self.attr(
            INodeNo(ROOT_INO),
            FileType::Directory,
            0,
            0o755,
            self.mounted,
            4096,
        )
    }

    fn disk_attr(&self, disk: &Disk) -> FileAttr {
        let ino = INodeNo(disk.ino);
        let blksize = disk.block_size.max(4096);
        let mut attr = self.attr(
            ino,
            FileType::RegularFile,
            disk.size_bytes,
            0o600,
            disk.added,
            blksize,
        );
        attr.nlink = 1;
        attr
    }

    fn attr(
        &self,
        ino: INodeNo,
        kind: FileType,
        size: u64,
        perm: u16,
        t: SystemTime,
        blksize: u32,
    ) -> FileAttr {
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind,
            perm,
            nlink: 2,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize,
            flags: 0,
        }
    }

    fn attr_of(&self, ino: INodeNo) -> Option<FileAttr> {
        if ino.0 == ROOT_INO {
            return Some(self.root_attr());
        }
        self.disks.by_ino(ino.0).map(|d| self.disk_attr(&d))
    }

    fn flush_handle(&self, fh: FileHandle, reply: ReplyEmpty) {
        let Some(disk) = self.disks.handle(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        match disk.device().and_then(|d| d.flush()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&IoError::Device(e))),
        }
    }
}

/// Ask the kernel for `value`, or the nearest it accepts.
fn nearest(mut set: impl FnMut(u32) -> Result<u32, u32>, value: u32) {
    if let Err(n) = set(value) {
        let _ = set(n);
    }
}

impl Filesystem for BlockFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        nearest(|v| config.set_max_write(v), self.max_io_bytes);
        // Asynchronous direct I/O (libaio, io_uring) waits in the kernel's background queue:
        // room for every FUSE thread's request and as many queued behind them.
        let _ = config.set_max_background(self.max_background);
        let _ = config.set_congestion_threshold(self.max_background / 4 * 3);
        // Async direct I/O lets the kernel send the pieces of one large O_DIRECT request
        // concurrently; older kernels simply lack the flag.
        let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        // O_TRUNC reaches open() as a flag, which a block file ignores as a block device
        // does (`dd of=…` without conv=notrunc); without this the kernel would send a
        // SETATTR to size 0, indistinguishable from ftruncate, which is refused.
        let _ = config.add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let disk = name
            .to_str()
            .filter(|_| parent.0 == ROOT_INO)
            .and_then(|n| self.disks.by_name(n));
        match disk {
            Some(d) => reply.entry(&TTL, &self.disk_attr(&d), Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr_of(ino) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    // chmod, utimes and the like are accepted and ignored (tools such as `cp` call them);
    // a size change is refused: a disk does not grow or shrink through its block file.
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        match self.attr_of(ino) {
            Some(attr) if size.is_none_or(|s| s == attr.size) => reply.attr(&TTL, &attr),
            Some(_) => reply.error(Errno::EPERM),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == ROOT_INO {
            return reply.error(Errno::EISDIR);
        }
        match self.disks.open(ino.0) {
            Some(fh) => reply.opened(
                FileHandle(fh),
                FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES,
            ),
            None => reply.error(Errno::ENODEV),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(disk) = self.disks.handle(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        match disk
            .device()
            .map_err(IoError::from)
            .and_then(|d| io::read_at(d, offset, size))
        {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(disk) = self.disks.handle(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        // O_SYNC includes the O_DSYNC bit on Linux.
        let fua = flags.0 & libc::O_DSYNC != 0;
        let written = disk
            .device()
            .map_err(IoError::from)
            .and_then(|d| io::write_at(d, &disk.writes, offset, data, fua));
        match written.map(u32::try_from) {
            Ok(Ok(n)) => reply.written(n),
            Ok(Err(_)) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lo: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.flush_handle(fh, reply);
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.flush_handle(fh, reply);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.disks.release(fh.0);
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino.0 != ROOT_INO {
            return reply.error(Errno::ENOTDIR);
        }
        let root = INodeNo(ROOT_INO);
        let dots = [
            (root, FileType::Directory, ".".to_owned()),
            (root, FileType::Directory, "..".to_owned()),
        ];
        let disks = self
            .disks
            .list()
            .into_iter()
            .map(|d| (INodeNo(d.ino), FileType::RegularFile, d.name.clone()));
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (ino, kind, name)) in dots.into_iter().chain(disks).enumerate().skip(skip) {
            // The offset handed back is where the next readdir resumes.
            if reply.add(ino, i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let disks = self.disks.list();
        let bytes: u64 = disks.iter().map(|d| d.size_bytes).sum();
        reply.statfs(bytes / 4096, 0, 0, disks.len() as u64, 0, 4096, 255, 4096);
    }
}
