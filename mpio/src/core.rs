//! [`MpCore`]: the sans-IO multipath core of one logical unit — its paths, their states
//! and counters, the policy, and every decision about a command and a path. It never reads
//! a clock (time is passed in), never blocks, sleeps or spawns: the blocking
//! [`crate::MultipathDisk`] and a deterministic simulator drive the very same logic. `D`
//! is the handle the driver sends a path's commands through.
//!
//! Contract:
//! - Each READ, WRITE or flush goes to the path the disk's policy picks
//!   ([`Dsm::lb_get_path`]) among the paths the DSM calls active ([`MpCore::acquire`]).
//!   Its outcome goes to [`Dsm::interpret_error`] ([`MpCore::complete`]): done; surfaced
//!   to the caller (the device's own answer — no other path would answer differently);
//!   retried after a pause; or failed over — the path is taken out of service and the
//!   command goes to another path, unseen by the caller.
//! - With no usable path, a command waits (queue if no path) up to
//!   [`MpConfig::no_path_retry`] for one to return, then fails with EIO
//!   ([`MpCore::no_path_wait`]); the driver does the waiting. A disk whose last path was
//!   removed fails at once with [`DeviceError::Gone`].
//! - [`MpCore::tick_plan`] is the maintenance the owner runs periodically, outside any
//!   I/O: each path's transport state becomes path events (a channel down takes the path
//!   out of service and, when another path is usable, asks the transport to fail its held
//!   I/O now so it moves over: [`TickPlan::fail_fast`]); failed paths whose transport is up
//!   are verified (TEST UNIT READY, [`TickPlan::verify`], results through
//!   [`MpCore::verify_done`]) and return; active paths are verified every
//!   [`MpConfig::verify_period`]; ALUA states are re-read with each verify; damping holds
//!   end.
//! - A command sent again after a failover was failed by its first path's transport for
//!   good (fast I/O fail semantics: it is never resent there), so a write never lands
//!   twice out of order.
//! - Counters: a command ends once — [`Completion::Done`] counts a read, write or flush;
//!   [`Completion::Failed`], [`Acquire::Gone`] and an expired [`MpCore::no_path_wait`]
//!   count an error.
#[allow(unused_imports)]
use crate::prelude::*;

mod io;
mod maintenance;
mod types;

pub use io::{Acquire, Completion, IoKind, Issued};
pub use maintenance::{RTPG_ALLOCATION, RTPG_CDB, TickPlan, VerifyJob};
pub use types::{
    DiskIdentity, DiskSnapshot, MpConfig, PathLabel, PathSnapshot, PathSpec, Transport,
};

use crate::alua::AluaState;
use crate::clock::Instant;
use crate::dsm::{Dsm, DsmIdentifier};
use crate::path::{Path, PathEvent};
use crate::policy::{Candidate, Policy, Selector};
use alloc::sync::Arc;
use srp_host::DeviceError;

/// One path with its state and counters.
struct MpPath<D> {
    key: u32,
    lun: u32,
    device: D,
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

/// The disk's counters.
#[derive(Debug, Default, Clone)]
struct Counters {
    reads: u64,
    writes: u64,
    flushes: u64,
    errors: u64,
    failovers: u64,
    /// Latency of completed reads, writes and flushes (the try that succeeded, from its
    /// start on its path).
    latency: [opskit::metrics::Histogram; 3],
}

/// One logical unit over its paths, sans IO (see the module contract).
pub struct MpCore<D> {
    identity: DiskIdentity,
    dsm: Arc<dyn Dsm>,
    config: MpConfig,
    paths: Vec<MpPath<D>>,
    selector: Selector,
    /// Commands waiting for a path now.
    queued: u32,
    /// The paths as the policy sees them, rebuilt in place for every I/O (no allocation).
    candidates: Vec<Candidate>,
    counters: Counters,
}

impl<D> core::fmt::Debug for MpCore<D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MpCore")
            .field("identity", &self.identity.identity)
            .field("paths", &self.paths.len())
            .finish()
    }
}

impl<D: Clone> MpCore<D> {
    /// A disk with no path yet; add them with [`MpCore::add_path`].
    pub fn new(identity: DiskIdentity, dsm: Arc<dyn Dsm>, config: MpConfig) -> MpCore<D> {
        MpCore {
            identity,
            dsm,
            config,
            paths: Vec::new(),
            selector: Selector::new(config.policy, config.failback),
            queued: 0,
            candidates: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// What it is.
    pub fn identity(&self) -> &DiskIdentity {
        &self.identity
    }

    /// Its settings (the policy as configured; [`MpCore::set_policy`] changes the live one).
    pub fn config(&self) -> &MpConfig {
        &self.config
    }

    /// Adds a path (a new one starts in service). Replaces a path of the same key.
    pub fn add_path(&mut self, spec: PathSpec<D>) {
        self.paths.retain(|p| p.key != spec.key);
        self.paths.push(MpPath {
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
        self.paths.sort_by_key(|p| p.key);
    }

    /// Removes the path `key`; the number of paths left.
    pub fn remove_path(&mut self, key: u32) -> usize {
        self.paths.retain(|p| p.key != key);
        self.paths.len()
    }

    /// The keys of its paths, ascending.
    pub fn path_keys(&self) -> Vec<u32> {
        self.paths.iter().map(|p| p.key).collect()
    }

    /// Whether `key` is one of its paths.
    pub fn has_path(&self, key: u32) -> bool {
        self.paths.iter().any(|p| p.key == key)
    }

    /// Sets the policy now.
    pub fn set_policy(&mut self, policy: Policy) {
        self.selector.set_policy(policy);
    }

    /// Takes path `key` out of service (`false`) or returns it for verification (`true`);
    /// whether the disk has that path.
    pub fn set_admin(&mut self, key: u32, enabled: bool, now: Instant) -> bool {
        let Some(p) = self.path_mut(key) else {
            return false;
        };
        let event = if enabled {
            PathEvent::AdminUp
        } else {
            PathEvent::AdminDown
        };
        p.path.handle(event, now);
        true
    }

    /// The counters and paths.
    pub fn snapshot(&self) -> DiskSnapshot {
        let c = &self.counters;
        DiskSnapshot {
            identity: self.identity.clone(),
            policy: self.selector.policy(),
            queued: self.queued,
            reads: c.reads,
            writes: c.writes,
            flushes: c.flushes,
            errors: c.errors,
            failovers: c.failovers,
            latency: c.latency.clone(),
            paths: self
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

    fn path_mut(&mut self, key: u32) -> Option<&mut MpPath<D>> {
        self.paths.iter_mut().find(|p| p.key == key)
    }

    /// Whether the policy may pick `p` now (its state, transport and ALUA state).
    fn active(&self, p: &MpPath<D>) -> bool {
        self.dsm
            .is_path_active(p.path.usable() && p.transport == Transport::Up, p.alua)
    }

    /// The policy's pick among the active paths.
    fn pick(&mut self) -> Option<usize> {
        let mut candidates = core::mem::take(&mut self.candidates);
        candidates.clear();
        candidates.extend(self.paths.iter().map(|p| Candidate {
            usable: self.active(p),
            preferred: p.preferred,
            tier: self.dsm.tier(p.alua),
            weight: p.weight,
            in_flight: p.in_flight,
            blocks_in_flight: p.blocks_in_flight,
            service_us: p.service_us,
        }));
        let pick = self.dsm.lb_get_path(&mut self.selector, &candidates);
        self.candidates = candidates;
        pick
    }
}

/// The error of a command that found no path to this disk within `no_path_retry`.
fn no_path_error(identity: &DiskIdentity, config: &MpConfig) -> DeviceError {
    DeviceError::Io(format!(
        "no usable path to {} for {:?}",
        identity.identity, config.no_path_retry
    ))
}
