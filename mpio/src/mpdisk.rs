//! [`MultipathDisk`]: one logical unit over all its paths, as one blocking [`BlockDevice`]
//! over blocking [`PathDevice`]s. It is a thin shell around [`MpCore`], which holds every
//! state and decision (and states the contract): a mutex over the core, a condition
//! variable for commands waiting for a path, the clock, the calls to the paths with no
//! lock held, the DSM's retry pause, and the path verifies on threads of their own.

use crate::core::{
    Acquire, Completion, IoKind, Issued, MpCore, RTPG_ALLOCATION, RTPG_CDB, VerifyJob,
};
use crate::dsm::Dsm;
use crate::policy::Policy;
use scsi::Lba;
use srp_host::{BlockDevice, DeviceError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

pub use crate::core::{
    DiskIdentity, DiskSnapshot, MpConfig, PathLabel, PathSnapshot, PathSpec, Transport,
};

/// How long [`MultipathDisk::tick`] waits for the path verifies it started.
pub const VERIFY_WAIT: Duration = Duration::from_secs(1);

/// How long a command waiting for a path sleeps on the condition variable before it looks
/// at the deadline again (a path's return wakes it at once).
const WAIT_SLICE: Duration = Duration::from_millis(100);

pub use crate::path_device::PathDevice;

/// The core with the blocking disk's device handle.
type Core = MpCore<Arc<dyn PathDevice>>;

/// One logical unit over its paths (see [`MpCore`]'s contract).
pub struct MultipathDisk {
    identity: DiskIdentity,
    core: Mutex<Core>,
    /// A path returned, was added or removed, or a verify ended: waiting commands look.
    changed: Condvar,
}

impl std::fmt::Debug for MultipathDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultipathDisk")
            .field("identity", &self.identity.identity)
            .finish()
    }
}

/// What one command is, for the I/O loop.
#[derive(Clone, Copy)]
enum Op<'a> {
    Read(Lba, &'a std::cell::RefCell<&'a mut [u8]>),
    Write(Lba, &'a [u8], bool),
    Flush,
}

impl MultipathDisk {
    /// A disk with no path yet; add them with [`MultipathDisk::add_path`].
    pub fn new(identity: DiskIdentity, dsm: Arc<dyn Dsm>, config: MpConfig) -> MultipathDisk {
        MultipathDisk {
            core: Mutex::new(MpCore::new(identity.clone(), dsm, config)),
            identity,
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What it is.
    pub fn identity(&self) -> &DiskIdentity {
        &self.identity
    }

    /// Adds a path (a new one starts in service). Replaces a path of the same key.
    pub fn add_path(&self, spec: PathSpec) {
        self.lock().add_path(spec);
        self.changed.notify_all();
    }

    /// Removes the path `key`; the number of paths left.
    pub fn remove_path(&self, key: u32) -> usize {
        let left = self.lock().remove_path(key);
        self.changed.notify_all();
        left
    }

    /// The keys of its paths.
    pub fn path_keys(&self) -> Vec<u32> {
        self.lock().path_keys()
    }

    /// Whether `key` is one of its paths.
    pub fn has_path(&self, key: u32) -> bool {
        self.lock().has_path(key)
    }

    /// Sets the policy now.
    pub fn set_policy(&self, policy: Policy) {
        self.lock().set_policy(policy);
    }

    /// Takes path `key` out of service (`false`) or returns it for verification (`true`);
    /// whether the disk has that path.
    pub fn set_admin(&self, key: u32, enabled: bool, now: Instant) -> bool {
        let known = self.lock().set_admin(key, enabled, now);
        if known {
            self.changed.notify_all();
        }
        known
    }

    /// The counters and paths.
    pub fn snapshot(&self) -> DiskSnapshot {
        self.lock().snapshot()
    }

    /// Waits for a usable path up to the no-path deadline; the chosen path's key and
    /// device, with the I/O counted on it.
    fn acquire(&self, blocks: u64) -> Result<(u32, Arc<dyn PathDevice>), DeviceError> {
        let mut core = self.lock();
        let mut since: Option<Instant> = None;
        loop {
            match core.acquire(blocks) {
                Acquire::Path { key, device } => return Ok((key, device)),
                Acquire::Gone => return Err(DeviceError::Gone),
                Acquire::NoPath => {}
            }
            let now = Instant::now();
            let left = core.no_path_wait(*since.get_or_insert(now), now)?;
            core.wait_begin();
            let (guard, _) = self
                .changed
                .wait_timeout(core, left.min(WAIT_SLICE))
                .unwrap_or_else(PoisonError::into_inner);
            core = guard;
            core.wait_end();
        }
    }

    /// The I/O loop: a path, the command on it with no lock held, the core's verdict.
    fn run(&self, op: Op<'_>) -> Result<(), DeviceError> {
        let bs = u64::from(self.identity.block_size);
        let (kind, bytes) = match op {
            Op::Read(_, b) => (IoKind::Read, b.borrow().len() as u64),
            Op::Write(_, d, _) => (IoKind::Write, d.len() as u64),
            Op::Flush => (IoKind::Flush, 0),
        };
        let blocks = bytes / bs;
        let mut tries = 0u32;
        loop {
            let (key, device) = self.acquire(blocks)?;
            let started = Instant::now();
            let outcome = match op {
                Op::Read(lba, buf) => device.read(lba, &mut buf.borrow_mut()),
                Op::Write(lba, data, fua) => device.write(lba, data, fua),
                Op::Flush => device.flush(),
            };
            let issued = Issued {
                key,
                kind,
                blocks,
                bytes,
                started,
                tries,
            };
            let next = self.lock().complete(&issued, &outcome, Instant::now());
            match next {
                Completion::Done => return Ok(()),
                Completion::Failed(e) => return Err(e),
                Completion::Retry { pause, tries: t } => {
                    tries = t;
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                }
                Completion::Failover { tries: t } => tries = t,
            }
        }
    }

    /// Maintenance (see [`MpCore::tick_plan`]). Path verifies run on threads of their own,
    /// so a verify stuck on a path that just died never holds up the other paths; this
    /// waits up to [`VERIFY_WAIT`] for them, and a verify still running then applies its
    /// result when it ends (the path is not verified again meanwhile).
    pub fn tick(self: &Arc<Self>, now: Instant) {
        // Transport states and damping holds, under the lock; fail_fast and verifies after.
        let (plan, cdb) = {
            let mut core = self.lock();
            let plan = core.tick_plan(now, |d| d.transport());
            (plan, core.verify_cdb())
        };
        for d in plan.fail_fast {
            d.fail_fast();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let mut spawned = 0;
        for job in plan.verify {
            let key = job.key;
            let disk = Arc::clone(self);
            let tx = tx.clone();
            let cdb = cdb.clone();
            let started = std::thread::Builder::new()
                .name("mpio-verify".into())
                .spawn(move || {
                    disk.verify(&job, &cdb);
                    let _ = tx.send(());
                });
            match started {
                Ok(_) => spawned += 1,
                Err(e) => {
                    tracing::warn!(disk = %self.identity().identity, path = key, %e,
                        "cannot start a path verify");
                    self.lock().verify_abandoned(key);
                }
            }
        }
        let end = Instant::now() + VERIFY_WAIT;
        for _ in 0..spawned {
            let left = end.saturating_duration_since(Instant::now());
            if rx.recv_timeout(left).is_err() {
                break;
            }
        }
        self.changed.notify_all();
    }

    /// One path verify (`cdb`: TEST UNIT READY, then REPORT TARGET PORT GROUPS for ALUA),
    /// its result applied.
    fn verify(&self, job: &VerifyJob<Arc<dyn PathDevice>>, cdb: &[u8]) {
        let tur = job.device.execute(cdb, 0);
        let alua = self.lock().needs_rtpg(job, &tur);
        // The lock is not held across a command.
        let rtpg = alua.then(|| job.device.execute(&RTPG_CDB, RTPG_ALLOCATION));
        self.lock()
            .verify_done(job, &tur, rtpg.as_ref(), Instant::now());
        self.changed.notify_all();
    }
}

impl BlockDevice for MultipathDisk {
    fn block_size(&self) -> u32 {
        self.identity.block_size
    }

    fn capacity_blocks(&self) -> u64 {
        self.identity.blocks
    }

    fn read(&self, lba: Lba, buf: &mut [u8]) -> Result<(), DeviceError> {
        let cell = std::cell::RefCell::new(buf);
        self.run(Op::Read(lba, &cell))
    }

    fn write(&self, lba: Lba, data: &[u8], fua: bool) -> Result<(), DeviceError> {
        self.run(Op::Write(lba, data, fua))
    }

    fn flush(&self) -> Result<(), DeviceError> {
        self.run(Op::Flush)
    }
}
