//! What both emulated Windows port drivers share (design §3 item 8: port-driver models
//! are enforced, not described): the SCSI request block and its status codes, the
//! machine's system memory and the scatter-gather lists over it, the kernel primitives a
//! driver may call (with the verifier's hooks), and how a port runs an entry point under
//! its verifier and watchdog.
//!
//! Contract: the StorPort port (`srp-initiator-storport::port`) and the iSCSI-model port
//! (`srp-initiator-iscsi-model::port`) are siblings over this crate and the SRP initiator
//! transport (`srp-initiator`); neither imports the other. What differs between the two
//! models — StorPort's BuildIo/StartIo split, Busy/Pause holds and queue depth against the
//! iSCSI model's tagged queues, lifecycle and removal rules — stays in each port; what is
//! the same structure in both models (the SRB, memory, `ke`) or the same verifier rule
//! (blocking at dispatch level, the watchdog) lives here once.
//!
//! Modules: [`srb`] (SRBs, requests, results), [`status`] (SRB status codes), [`memory`]
//! (system memory, data buffers), [`sgl`] (scatter-gather lists), [`ke`] (kernel
//! primitives), [`entry`] (running an entry point under the verifier; the watchdog's
//! table).
//!
//! With no `std` (the default feature off: a kernel driver's build) the SRB, its data buffer
//! and scatter-gather list and the status codes remain: `core` + `alloc`. The kernel
//! primitives and the entry verifier stand for the kernel and its verifier, so they are
//! `std` only (a driver has the real ones).
#![deny(unsafe_code)]
#![no_std]

extern crate alloc;
#[cfg(any(feature = "std", test))]
#[macro_use]
extern crate std;

/// The `alloc` names a `std` crate has in its prelude (`use crate::prelude::*`).
#[allow(unused_imports)]
use ib_verbs::prelude;

#[cfg(feature = "std")]
pub mod entry;
#[cfg(feature = "std")]
pub mod ke;
pub mod memory;
pub mod sgl;
pub mod srb;
pub mod status;

#[cfg(feature = "std")]
pub use entry::{DispatchCalls, EntryFault, run_entry};
pub use memory::{DataBuffer, MemoryError, SystemMemory};
pub use sgl::{PAGE_SIZE, ScatterGatherList, SgElement};
pub use srb::{
    DataDirection, LuAddress, Srb, SrbData, SrbFunction, SrbId, SrbOwner, SrbRequest, SrbResult,
};
pub use status::SrbStatus;
