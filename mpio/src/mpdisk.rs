//! [`MultipathDisk`]: one logical unit over all its paths, as one [`BlockDevice`].
//!
//! Contract:
//! - Each READ, WRITE or flush goes to the path the disk's policy picks
//!   ([`Dsm::lb_get_path`]) among the paths the DSM calls active. Its outcome goes to
//!   [`Dsm::interpret_error`]: done; surfaced to the caller (the device's own answer — no
//!   other path would answer differently); retried after a pause; or failed over — the
//!   path is taken out of service and the command goes to another path, unseen by the
//!   caller.
//! - With no usable path, a command waits (queue if no path) up to
//!   [`MpConfig::no_path_retry`] for one to return, then fails with EIO. A disk whose last
//!   path was removed fails at once with [`DeviceError::Gone`].
//! - [`MultipathDisk::tick`] is the maintenance the owner runs periodically, outside any
//!   I/O: each path's transport state becomes path events (a channel down takes the path
//!   out of service and, when another path is usable, asks the transport to fail its
//!   held I/O now so it moves over); failed paths whose transport is up are verified
//!   (TEST UNIT READY) and return; active paths are verified every
//!   [`MpConfig::verify_period`]; ALUA states are re-read with each verify; damping holds
//!   end.
//! - A command sent again after a failover was failed by its first path's transport for
//!   good (fast I/O fail semantics: it is never resent there), so a write never lands
//!   twice out of order.

use crate::alua::{AluaState, group_of, parse_groups};
use crate::dsm::{Dsm, DsmIdentifier, Verdict};
use crate::outcome::Outcome;
use crate::path::{Damping, Path, PathEvent, PathState};
use crate::policy::{Candidate, Policy, Selector};
use scsi::Lba;
use srp_host::{BlockDevice, DeviceError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long [`MultipathDisk::tick`] waits for the path verifies it started.
pub const VERIFY_WAIT: Duration = Duration::from_secs(1);

/// REPORT TARGET PORT GROUPS (MAINTENANCE IN, service action 0Ah), 4 KiB allocation.
const RTPG: [u8; 12] = [0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0];

/// A path's transport, as its owner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Logged in; commands flow.
    Up,
    /// Down and reconnecting (I/O held or failing).
    Down,
    /// Gone for good (device loss): the owner removes the path.
    Gone,
}

/// One path's device: the LU through one I_T nexus. Calls block until the command
/// completed on this path (bounded by the transport's timers).
pub trait PathDevice: Send + Sync {
    /// READ of whole blocks into `buf`.
    fn read(&self, lba: Lba, buf: &mut [u8]) -> Outcome;
    /// WRITE of whole blocks.
    fn write(&self, lba: Lba, data: &[u8], fua: bool) -> Outcome;
    /// SYNCHRONIZE CACHE of the whole LU.
    fn flush(&self) -> Outcome;
    /// Any command without data-out, with `data_in` bytes of data-in (path verify, RTPG).
    fn execute(&self, cdb: &[u8], data_in: usize) -> Outcome;
    /// The transport's state.
    fn transport(&self) -> Transport;
    /// Fail the I/O the transport holds for a reconnect now, as if fast I/O fail expired
    /// (another path will carry it). Never resent on this path afterwards.
    fn fail_fast(&self);
}

/// Who a path is, for displays.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PathLabel {
    /// The IOC's GUID, hex.
    pub ioc_guid: String,
    /// The IOC's name.
    pub ioc_name: String,
    /// The target portal.
    pub portal: String,
    /// The local address.
    pub local: String,
}

/// A path to add.
pub struct PathSpec {
    /// The owner's key for it (the session number): unique within the disk.
    pub key: u32,
    /// The LUN number through it.
    pub lun: u32,
    /// The device.
    pub device: Arc<dyn PathDevice>,
    /// What the DSM claimed it as.
    pub id: DsmIdentifier,
    /// Preferred (failover only's choice, round robin with subset's set, failback target).
    pub preferred: bool,
    /// Weight under weighted paths.
    pub weight: u32,
    /// Who it is.
    pub label: PathLabel,
}

/// A disk's multipath settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpConfig {
    /// The load-balance policy.
    pub policy: Policy,
    /// A returning preferred path takes over again (failover only).
    pub failback: bool,
    /// How long I/O waits for a path when none is usable.
    pub no_path_retry: Duration,
    /// How often active paths are verified.
    pub verify_period: Duration,
    /// Flap damping.
    pub damping: Damping,
}

impl Default for MpConfig {
    fn default() -> MpConfig {
        MpConfig {
            policy: Policy::RoundRobin,
            failback: true,
            no_path_retry: Duration::from_secs(30),
            verify_period: Duration::from_secs(30),
            damping: Damping::default(),
        }
    }
}

/// What a disk is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiskIdentity {
    /// The LU's identity (the grouping key).
    pub identity: String,
    /// INQUIRY vendor.
    pub vendor: String,
    /// INQUIRY product.
    pub product: String,
    /// INQUIRY revision.
    pub revision: String,
    /// Logical block length.
    pub block_size: u32,
    /// Capacity in blocks.
    pub blocks: u64,
}

/// A path's counters and state, for displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSnapshot {
    /// The owner's key (session).
    pub key: u32,
    /// The LUN through it.
    pub lun: u32,
    /// Who it is.
    pub label: PathLabel,
    /// Its state.
    pub state: PathState,
    /// Whether the policy could pick it now (state and ALUA).
    pub active: bool,
    /// Its group's ALUA state, if the LU reports ALUA.
    pub alua: Option<AluaState>,
    /// Preferred.
    pub preferred: bool,
    /// Weight.
    pub weight: u32,
    /// I/Os on it now.
    pub in_flight: u32,
    /// Reads completed on it.
    pub reads: u64,
    /// Writes completed on it.
    pub writes: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// I/Os that failed on it.
    pub errors: u64,
    /// Times taken out of service.
    pub failures: u64,
}

/// A disk's counters and paths, for displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSnapshot {
    /// What it is.
    pub identity: DiskIdentity,
    /// Its policy.
    pub policy: Policy,
    /// I/Os waiting for a path now.
    pub queued: u32,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Commands moved to another path after a path failure.
    pub failovers: u64,
    /// Its paths.
    pub paths: Vec<PathSnapshot>,
}

struct MpPath {
    key: u32,
    lun: u32,
    device: Arc<dyn PathDevice>,
    id: DsmIdentifier,
    label: PathLabel,
    preferred: bool,
    weight: u32,
    path: Path,
    alua: Option<AluaState>,
    transport: Transport,
    in_flight: u32,
    blocks_in_flight: u64,
    service_us: u64,
    reads: u64,
    writes: u64,
    bytes: u64,
    errors: u64,
    last_verify: Option<Instant>,
    /// A verify is running.
    verifying: bool,
}

struct State {
    paths: Vec<MpPath>,
    selector: Selector,
    queued: u32,
    /// The paths as the policy sees them, rebuilt in place for every I/O (no allocation).
    candidates: Vec<Candidate>,
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    flushes: AtomicU64,
    errors: AtomicU64,
    failovers: AtomicU64,
}

/// One logical unit over its paths (see the module contract).
pub struct MultipathDisk {
    identity: DiskIdentity,
    dsm: Arc<dyn Dsm>,
    config: MpConfig,
    state: Mutex<State>,
    changed: Condvar,
    counters: Counters,
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
            identity,
            dsm,
            config,
            state: Mutex::new(State {
                paths: Vec::new(),
                selector: Selector::new(config.policy, config.failback),
                queued: 0,
                candidates: Vec::new(),
            }),
            changed: Condvar::new(),
            counters: Counters::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What it is.
    pub fn identity(&self) -> &DiskIdentity {
        &self.identity
    }

    /// Adds a path (a new one starts in service). Replaces a path of the same key.
    pub fn add_path(&self, spec: PathSpec) {
        let mut st = self.lock();
        st.paths.retain(|p| p.key != spec.key);
        st.paths.push(MpPath {
            key: spec.key,
            lun: spec.lun,
            device: spec.device,
            id: spec.id,
            label: spec.label,
            preferred: spec.preferred,
            weight: spec.weight,
            path: Path::new(self.config.damping),
            alua: None,
            transport: Transport::Up,
            in_flight: 0,
            blocks_in_flight: 0,
            service_us: 0,
            reads: 0,
            writes: 0,
            bytes: 0,
            errors: 0,
            last_verify: None,
            verifying: false,
        });
        st.paths.sort_by_key(|p| p.key);
        drop(st);
        self.changed.notify_all();
    }

    /// Removes the path `key`; the number of paths left.
    pub fn remove_path(&self, key: u32) -> usize {
        let mut st = self.lock();
        st.paths.retain(|p| p.key != key);
        let left = st.paths.len();
        drop(st);
        self.changed.notify_all();
        left
    }

    /// The keys of its paths.
    pub fn path_keys(&self) -> Vec<u32> {
        self.lock().paths.iter().map(|p| p.key).collect()
    }

    /// Whether `key` is one of its paths.
    pub fn has_path(&self, key: u32) -> bool {
        self.lock().paths.iter().any(|p| p.key == key)
    }

    /// Sets the policy now.
    pub fn set_policy(&self, policy: Policy) {
        self.lock().selector.set_policy(policy);
    }

    /// Takes path `key` out of service (`false`) or returns it for verification (`true`);
    /// whether the disk has that path.
    pub fn set_admin(&self, key: u32, enabled: bool, now: Instant) -> bool {
        let mut st = self.lock();
        let Some(p) = st.paths.iter_mut().find(|p| p.key == key) else {
            return false;
        };
        let event = if enabled {
            PathEvent::AdminUp
        } else {
            PathEvent::AdminDown
        };
        p.path.handle(event, now);
        drop(st);
        self.changed.notify_all();
        true
    }

    /// The counters and paths.
    pub fn snapshot(&self) -> DiskSnapshot {
        let st = self.lock();
        let c = &self.counters;
        DiskSnapshot {
            identity: self.identity.clone(),
            policy: st.selector.policy(),
            queued: st.queued,
            reads: c.reads.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            failovers: c.failovers.load(Ordering::Relaxed),
            paths: st
                .paths
                .iter()
                .map(|p| PathSnapshot {
                    key: p.key,
                    lun: p.lun,
                    label: p.label.clone(),
                    state: p.path.state(),
                    active: self.active(p),
                    alua: p.alua,
                    preferred: p.preferred,
                    weight: p.weight,
                    in_flight: p.in_flight,
                    reads: p.reads,
                    writes: p.writes,
                    bytes: p.bytes,
                    errors: p.errors,
                    failures: p.path.failures_total,
                })
                .collect(),
        }
    }

    fn active(&self, p: &MpPath) -> bool {
        self.dsm
            .is_path_active(p.path.usable() && p.transport == Transport::Up, p.alua)
    }

    /// The policy's pick among the active paths.
    fn pick(&self, st: &mut State) -> Option<usize> {
        let State {
            paths,
            selector,
            candidates,
            ..
        } = st;
        candidates.clear();
        candidates.extend(paths.iter().map(|p| Candidate {
            usable: self.active(p),
            preferred: p.preferred,
            tier: self.dsm.tier(p.alua),
            weight: p.weight,
            in_flight: p.in_flight,
            blocks_in_flight: p.blocks_in_flight,
            service_us: p.service_us,
        }));
        self.dsm.lb_get_path(selector, candidates)
    }

    /// Waits for a usable path up to the no-path deadline; the chosen path's key and
    /// device, with the I/O counted on it.
    fn acquire(&self, blocks: u64) -> Result<(u32, Arc<dyn PathDevice>), DeviceError> {
        let mut st = self.lock();
        let mut since: Option<Instant> = None;
        loop {
            if st.paths.is_empty() {
                return Err(DeviceError::Gone);
            }
            if let Some(i) = self.pick(&mut st) {
                let p = &mut st.paths[i];
                p.in_flight += 1;
                p.blocks_in_flight += blocks;
                return Ok((p.key, p.device.clone()));
            }
            let start = *since.get_or_insert_with(Instant::now);
            let waited = start.elapsed();
            if waited >= self.config.no_path_retry {
                return Err(DeviceError::Io(format!(
                    "no usable path to {} for {:?}",
                    self.identity.identity, self.config.no_path_retry
                )));
            }
            let left = self.config.no_path_retry - waited;
            st.queued += 1;
            let (guard, _) = self
                .changed
                .wait_timeout(st, left.min(Duration::from_millis(100)))
                .unwrap_or_else(PoisonError::into_inner);
            st = guard;
            st.queued -= 1;
        }
    }

    /// Accounts a command's end on path `key`.
    fn release(
        &self,
        key: u32,
        blocks: u64,
        bytes: u64,
        read: Option<bool>,
        started: Instant,
        ok: bool,
    ) {
        let mut st = self.lock();
        if let Some(p) = st.paths.iter_mut().find(|p| p.key == key) {
            p.in_flight = p.in_flight.saturating_sub(1);
            p.blocks_in_flight = p.blocks_in_flight.saturating_sub(blocks);
            if ok {
                let us = started.elapsed().as_micros() as u64;
                p.service_us = if p.service_us == 0 {
                    us
                } else {
                    (p.service_us * 7 + us) / 8
                };
                p.bytes += bytes;
                match read {
                    Some(true) => p.reads += 1,
                    Some(false) => p.writes += 1,
                    None => {}
                }
            } else {
                p.errors += 1;
            }
        }
    }

    /// Path `key` failed an I/O.
    fn path_failed(&self, key: u32, why: &Outcome) {
        let mut st = self.lock();
        if let Some(p) = st.paths.iter_mut().find(|p| p.key == key)
            && p.path.state() == PathState::Active
        {
            tracing::warn!(disk = self.identity.identity, path = key, %why, "path failed; I/O moves to another path");
            p.path.handle(PathEvent::IoFailed, Instant::now());
        }
    }

    /// The I/O loop (see the module contract).
    fn run(&self, op: Op<'_>) -> Result<(), DeviceError> {
        let bs = u64::from(self.identity.block_size);
        let (blocks, bytes, read) = match op {
            Op::Read(_, b) => {
                let n = b.borrow().len() as u64;
                (n / bs, n, Some(true))
            }
            Op::Write(_, d, _) => (d.len() as u64 / bs, d.len() as u64, Some(false)),
            Op::Flush => (0, 0, None),
        };
        let mut tries = 0u32;
        loop {
            let (key, device) = match self.acquire(blocks) {
                Ok(x) => x,
                Err(e) => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
            };
            let started = Instant::now();
            let outcome = match op {
                Op::Read(lba, buf) => device.read(lba, &mut buf.borrow_mut()),
                Op::Write(lba, data, fua) => device.write(lba, data, fua),
                Op::Flush => device.flush(),
            };
            let verdict = self.dsm.interpret_error(&outcome, tries);
            self.release(key, blocks, bytes, read, started, verdict == Verdict::Done);
            match verdict {
                Verdict::Done => {
                    let c = match read {
                        Some(true) => &self.counters.reads,
                        Some(false) => &self.counters.writes,
                        None => &self.counters.flushes,
                    };
                    c.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Verdict::Surface => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    return Err(DeviceError::Io(outcome.to_string()));
                }
                Verdict::Retry(pause) => {
                    tries += 1;
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                }
                Verdict::Failover => {
                    self.counters.failovers.fetch_add(1, Ordering::Relaxed);
                    self.path_failed(key, &outcome);
                    tries = 0;
                }
            }
        }
    }

    /// Maintenance (see the module contract). Path verifies run on threads of their own,
    /// so a verify stuck on a path that just died never holds up the other paths; this
    /// waits up to [`VERIFY_WAIT`] for them, and a verify still running then applies its
    /// result when it ends (the path is not verified again meanwhile).
    pub fn tick(self: &Arc<Self>, now: Instant) {
        // Transport states and damping holds, under the lock; verifies after it.
        let mut verify = Vec::new();
        let mut fail_fast = Vec::new();
        {
            let mut st = self.lock();
            let any_usable = |st: &State, except: u32| {
                st.paths.iter().any(|p| p.key != except && self.active(p))
            };
            for i in 0..st.paths.len() {
                let transport = st.paths[i].device.transport();
                let key = st.paths[i].key;
                st.paths[i].transport = transport;
                if transport != Transport::Up {
                    if st.paths[i].path.state() == PathState::Active {
                        st.paths[i].path.handle(PathEvent::TransportDown, now);
                    }
                    // Not only when the channel goes down: I/O held while no other path was
                    // usable moves as soon as one is (fail_fast is idempotent).
                    if st.paths[i].in_flight > 0 && any_usable(&st, key) {
                        fail_fast.push(st.paths[i].device.clone());
                    }
                }
                let p = &mut st.paths[i];
                p.path.handle_timeout(now);
                let due = p
                    .last_verify
                    .is_none_or(|t| now.duration_since(t) >= self.config.verify_period);
                let failed = p.path.state() == PathState::Failed;
                if transport == Transport::Up
                    && !p.verifying
                    && (failed || due)
                    && p.path.state() != PathState::AdminDown
                    && p.path.state() != PathState::Damped
                {
                    p.last_verify = Some(now);
                    p.verifying = true;
                    verify.push((p.key, p.device.clone(), p.id.clone()));
                }
            }
        }
        for d in fail_fast {
            d.fail_fast();
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let mut spawned = 0;
        for (key, device, id) in verify {
            let disk = Arc::clone(self);
            let tx = tx.clone();
            let started = std::thread::Builder::new()
                .name("mpio-verify".into())
                .spawn(move || {
                    disk.verify(key, device.as_ref(), &id);
                    let _ = tx.send(());
                });
            match started {
                Ok(_) => spawned += 1,
                Err(e) => {
                    tracing::warn!(%e, "cannot start a path verify");
                    if let Some(p) = self.lock().paths.iter_mut().find(|p| p.key == key) {
                        p.verifying = false;
                    }
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

    /// One path verify (TEST UNIT READY, then REPORT TARGET PORT GROUPS for ALUA), its
    /// result applied.
    fn verify(&self, key: u32, device: &dyn PathDevice, id: &DsmIdentifier) {
        let ok = self
            .dsm
            .path_verified(&device.execute(&self.dsm.path_verify_cdb(), 0));
        let alua = if ok && id.alua {
            match device.execute(&RTPG, 4096) {
                Outcome::Good(d) => {
                    let groups = parse_groups(&d);
                    group_of(&groups, id.relative_port, id.port_group).map(|g| g.state)
                }
                _ => None,
            }
        } else {
            None
        };
        let mut st = self.lock();
        if let Some(p) = st.paths.iter_mut().find(|p| p.key == key) {
            p.verifying = false;
            if id.alua && ok {
                p.alua = alua;
            }
            let event = if ok {
                PathEvent::VerifyOk
            } else {
                PathEvent::VerifyFailed
            };
            let before = p.path.state();
            let after = p.path.handle(event, Instant::now());
            if before != PathState::Active && after == PathState::Active {
                tracing::info!(
                    disk = self.identity.identity,
                    path = key,
                    "path verified: back in service"
                );
            }
        }
        drop(st);
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
