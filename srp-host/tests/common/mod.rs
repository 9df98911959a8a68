//! Helpers shared by the block-file tests: a RAM disk, temp dirs, time bounds, and guards
//! whose Drop undoes mounts and loop devices even when a test fails.
#![allow(dead_code, unreachable_pub, missing_docs, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use scsi::Lba;
use srp_host::{BlockDevice, BlockFiles, DeviceError, MountOptions, Mounted};

/// A RAM disk that counts flushes, records the largest I/O and can fail reads.
pub struct RamDisk {
    block_size: u32,
    pub data: Mutex<Vec<u8>>,
    pub flushes: AtomicUsize,
    pub fua_writes: AtomicUsize,
    pub max_read: AtomicUsize,
    pub max_write: AtomicUsize,
    pub fail_reads: AtomicBool,
    /// Microseconds each read sleeps, to widen race windows.
    pub read_delay_us: AtomicU64,
    /// Reads running now, and the most seen at once.
    pub reads_in_flight: AtomicUsize,
    pub max_reads_in_flight: AtomicUsize,
    /// When not 0, each read waits (up to 2 s) until this many have been in flight at once.
    pub read_gate: AtomicUsize,
}

impl RamDisk {
    pub fn new(block_size: u32, blocks: u64) -> Self {
        RamDisk {
            block_size,
            data: Mutex::new(vec![0; block_size as usize * blocks as usize]),
            flushes: AtomicUsize::new(0),
            fua_writes: AtomicUsize::new(0),
            max_read: AtomicUsize::new(0),
            max_write: AtomicUsize::new(0),
            fail_reads: AtomicBool::new(false),
            read_delay_us: AtomicU64::new(0),
            reads_in_flight: AtomicUsize::new(0),
            max_reads_in_flight: AtomicUsize::new(0),
            read_gate: AtomicUsize::new(0),
        }
    }

    fn range(&self, lba: Lba, len: usize) -> std::ops::Range<usize> {
        assert_eq!(
            len % self.block_size as usize,
            0,
            "partial block I/O reached the device"
        );
        let at = lba.0 as usize * self.block_size as usize;
        at..at + len
    }
}

impl BlockDevice for RamDisk {
    fn block_size(&self) -> u32 {
        self.block_size
    }
    fn capacity_blocks(&self) -> u64 {
        (self.data.lock().unwrap().len() / self.block_size as usize) as u64
    }
    fn read(&self, lba: Lba, buf: &mut [u8]) -> Result<(), DeviceError> {
        if self.fail_reads.load(Ordering::SeqCst) {
            return Err(DeviceError::Io("injected read failure".into()));
        }
        self.max_read.fetch_max(buf.len(), Ordering::SeqCst);
        let now = self.reads_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_reads_in_flight.fetch_max(now, Ordering::SeqCst);
        let gate = self.read_gate.load(Ordering::SeqCst);
        let until = std::time::Instant::now() + Duration::from_secs(2);
        while gate > 0
            && self.max_reads_in_flight.load(Ordering::SeqCst) < gate
            && std::time::Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let delay = self.read_delay_us.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
        self.reads_in_flight.fetch_sub(1, Ordering::SeqCst);
        let r = self.range(lba, buf.len());
        buf.copy_from_slice(&self.data.lock().unwrap()[r]);
        Ok(())
    }
    fn write(&self, lba: Lba, data: &[u8], fua: bool) -> Result<(), DeviceError> {
        self.max_write.fetch_max(data.len(), Ordering::SeqCst);
        if fua {
            self.fua_writes.fetch_add(1, Ordering::SeqCst);
        }
        let r = self.range(lba, data.len());
        self.data.lock().unwrap()[r].copy_from_slice(data);
        Ok(())
    }
    fn flush(&self) -> Result<(), DeviceError> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Deterministic pseudo-random bytes (xorshift), different per seed.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A directory removed on drop (after everything mounted on it is gone).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("srp-host-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every mount of this test binary, aborted if a test times out: a thread of ours stuck on
/// our own mount would otherwise keep the process from ever exiting.
static MOUNTS: Mutex<Vec<BlockFiles>> = Mutex::new(Vec::new());

/// Mount a block-file directory on `dir`, known to [`bounded`]'s timeout.
pub fn mount(dir: &Path) -> Mounted {
    let mounted = BlockFiles::mount(dir, &MountOptions::default())
        .unwrap_or_else(|e| panic!("cannot mount block files on {}: {e}", dir.display()));
    MOUNTS.lock().unwrap().push(mounted.files().clone());
    mounted
}

/// Run `f` on its own thread; fail if it takes longer than `secs` or panics.
pub fn bounded(secs: u64, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => t.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!(),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            for files in MOUNTS.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                let _ = files.abort();
            }
            panic!("test did not finish within {secs} s (FUSE connections aborted)")
        }
    }
}

/// Run a command, panicking with its output unless it succeeds; returns stdout.
pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e} (is it installed?)"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A loop device over a file, detached on drop.
pub struct LoopDev(pub String);

impl LoopDev {
    pub fn attach(file: &Path) -> Self {
        LoopDev(run("losetup", &["-f", "--show", file.to_str().unwrap()]))
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// A filesystem mounted on a directory, unmounted (lazily if busy) on drop.
pub struct FsMount(pub PathBuf);

impl FsMount {
    pub fn mount(dev: &str, dir: &Path) -> Self {
        run("mount", &[dev, dir.to_str().unwrap()]);
        FsMount(dir.to_owned())
    }
}

impl Drop for FsMount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}
