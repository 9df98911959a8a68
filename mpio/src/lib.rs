//! Multipath I/O: one disk per logical unit identity over every path that reaches it,
//! modelled on Microsoft MPIO and its DSM interface (windows.md §4), for SRP logical units
//! behind several I/O controllers.
//!
//! # Architecture
//! - [`outcome`]: what a command's completion on one path was.
//! - [`identity`]: VPD 0x83 designators ranked as MSDSM ranks them; the grouping key.
//! - [`alua`]: TPGS, REPORT TARGET PORT GROUPS and a path's group state.
//! - [`policy`]: the load-balance policies and [`Selector`].
//! - [`path`]: one path's state machine with flap damping.
//! - [`dsm`]: the DSM callbacks ([`Dsm`]); [`srp_dsm`]: [`SrpDsm`], their SRP implementation.
//! - [`core`]: [`MpCore`], the sans-IO multipath core (paths, policy, failover, queue if
//!   no path, path verify, failback, counters; time passed in) that the blocking disk and
//!   the whole-stack simulator share.
//! - [`mpdisk`]: [`MultipathDisk`], the blocking block device over the paths: the core
//!   behind a mutex, commands waiting for a path, path verifies on their own threads.
//!
//! With no `std` (the default feature off: a kernel driver's build) the sans-IO core, policies, path states, ALUA, identities and the DSM remain (`core` + `alloc`, time as `ib_verbs::Time`); [`mpdisk`] (threads, blocking waits) is `std`.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

/// The `alloc` names a `std` crate has in its prelude (`use crate::prelude::*`).
#[allow(unused_imports)]
use ib_verbs::prelude;

pub mod alua;
pub mod clock;
pub mod core;
pub mod dsm;
pub mod identity;
#[cfg(feature = "std")]
pub mod mpdisk;
pub mod outcome;
pub mod path;
pub mod path_device;
pub mod policy;
pub mod srp_dsm;

pub use crate::core::{
    Acquire, Completion, DiskIdentity, DiskSnapshot, IoKind, Issued, MpConfig, MpCore, PathLabel,
    PathSnapshot, PathSpec, RTPG_ALLOCATION, RTPG_CDB, TickPlan, Transport, VerifyJob,
};
pub use dsm::{Decline, Dsm, DsmIdentifier, Verdict};
#[cfg(feature = "std")]
pub use mpdisk::MultipathDisk;
pub use outcome::{Outcome, TransportKind};
pub use path::{Damping, PathState};
pub use path_device::PathDevice;
pub use policy::{Policy, Selector};
pub use srp_dsm::SrpDsm;

#[cfg(test)]
mod core_tests;
