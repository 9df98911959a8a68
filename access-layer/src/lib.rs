//! The IB access layer (IBAL): everything between a verbs provider and the SRP initiator and
//! target. It defines the interfaces every provider implements — the channel interface
//! ([`verbs::ChannelInterface`]), the port beside it ([`verbs::PortInterface`]), devices
//! and the fabric they come from ([`verbs::Fabric`]), the connection-manager seam
//! ([`cm::ConnectionManager`]) — over the `ib-verbs` vocabulary, and runs the MAD services
//! on QP1 where a provider gives it ([`mads::MadService`]).
//!
//! Contract: MAD wire formats ([`mad`]) parse and emit byte-exact and never panic; the verbs
//! API ([`verbs`]) never blocks at dispatch (resource verbs complete through a `Completion`,
//! blocking calls there trip a verifier); the GSI agent ([`gsi`]), Communication Manager
//! ([`cm`]) and Device Management agent and client ([`dm`]) are sans-IO state machines a driver
//! feeds with MADs and time. PnP ([`pnp`]), power ([`power`]) and the control socket ([`ctl`])
//! complete the layer. See docs/access-layer.md.
//!
//! It sits on `ib-verbs` (the vocabulary) and `wirekit`; no provider. Providers (`hca`, the
//! rdma-core provider, the simulator's net) depend on it.
//!
//! With no `std` (default feature off: a Windows kernel driver) the crate is `core` +
//! `alloc`: the MAD formats, the GSI, CM and DM state machines, the verbs interfaces and
//! completions (routines and `.await`, no blocking wait), PnP events and topology and the
//! power domain. What needs threads, a blocking wait or the OS — the control socket, the
//! PnP delivery thread, the powered-down request queue, the doorbell, the synchronous CA
//! wrapper — is behind `std`; docs/architecture.md gives each piece's reason.
#![deny(unsafe_code)]
#![no_std]
#[allow(unused_imports)]
use crate::prelude::*;

extern crate alloc;
#[cfg(any(feature = "std", test))]
#[macro_use]
extern crate std;

/// The `alloc` names a `std` crate has in its prelude (`use crate::prelude::*`).
#[allow(unused_imports)]
use ib_verbs::prelude;

pub mod cm;
#[cfg(feature = "std")]
pub mod ctl;
pub mod dm;
pub mod gsi;
pub mod mad;
pub mod mads;
pub mod pnp;
pub mod power;
pub mod verbs;
