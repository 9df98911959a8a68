//! SRP, the SCSI RDMA Protocol: the information units that cross an RDMA channel between an
//! SRP initiator port and an SRP target port.
//!
//! Contract: [`wire`] turns bytes into validated values and back, byte-exact against SRP r16a
//! (plus the SRP-2 immediate-data fields and Linux's RDMA-CM login form), and never panics on
//! input. It knows nothing of queue pairs or sockets; the SCSI payload types (LUN, status)
//! come from the transport-free `scsi` crate.
//!
//! [`channel`] is the sans-IO logic both ends share: credit accounting, the outstanding-tag
//! table, and descriptor-to-RDMA planning with residuals. The target's login and reconnect
//! handling lives in srp-target.
//!
//! [`initiator`] is the sans-IO initiator channel core both initiator port-driver models run
//! on: login and re-login, credits with the task-management reserve, generation-checked tags,
//! timeout escalation (ABORT TASK, LUN RESET, channel reset), target requests, and reconnect
//! under the SRP transport class timers. It uses only `core` and `alloc`.
//!
//! Layering: `wirekit <- ib-verbs <- srp <- {srp-target, srp-initiator-*}` (and `scsi`).
#![deny(unsafe_code)]
// A Windows kernel driver has no `std`: this crate needs only `core` and `alloc` (its tests
// use `std`); `scripts/test.sh` builds it for a target with no `std` at all.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod channel;
pub mod initiator;
pub mod wire;
