//! The disk's and its paths' descriptions: what a path is when added ([`PathSpec`]), the
//! disk's settings ([`MpConfig`]) and identity ([`DiskIdentity`]), a path's transport
//! ([`Transport`]) and the snapshots for displays.
#[allow(unused_imports)]
use crate::prelude::*;

use crate::alua::AluaState;
use crate::dsm::DsmIdentifier;
use crate::path::{Damping, PathState};
use crate::path_device::PathDevice;
use crate::policy::Policy;
use alloc::sync::Arc;
use core::time::Duration;

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

/// A path to add; `D` is the handle its user sends commands through (the blocking disk's
/// [`PathDevice`] by default).
pub struct PathSpec<D = Arc<dyn PathDevice>> {
    /// The owner's key for it (the session number): unique within the disk.
    pub key: u32,
    /// The LUN number through it.
    pub lun: u32,
    /// The device.
    pub device: D,
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
    /// Latency of completed reads, writes and flushes, in that order.
    pub latency: [opskit::metrics::Histogram; 3],
    /// Its paths.
    pub paths: Vec<PathSnapshot>,
}
