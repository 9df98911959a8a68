//! The SRP initiator as a Windows-XP-era **iSCSI-model driver** (issue #15; design §2:
//! the second initiator driver, beside the StorPort miniport of `srp-initiator-storport`).
//!
//! Contract: [`port`] is the emulated SCSIport-era port of that model, which a driver
//! written in the model's shape plugs into ([`port::Driver`]). Unlike a StorPort miniport,
//! the driver owns its transport on its own worker threads at passive level: the port hands
//! it each request through one dispatch-level entry that only queues, the driver completes
//! requests from its threads through [`port::PortHandle`], and it sees bus resets, device
//! removal (orderly and surprise), power transitions and unload. The port enforces the
//! model's rules — no blocking at dispatch level, one request per tag, no completion of a
//! request a reset or removal flushed, no double completion, no I/O left at removal — and
//! its verifier bugchecks the port on a break without hanging any submitter.
//!
//! [`srp`] is the SRP initiator in that shape: the same SRP transport the StorPort miniport
//! runs (`srp_initiator::SrpTransport`, over the `srp::initiator` channel
//! core and the access layer's verbs), owned by the driver's worker thread; its power in
//! its HCA's power domain ([`srp::power`]). The host daemon (`srp-hostd`) runs it under
//! `driver = "iscsi-model"`, feeds IOC removal to it from the access layer's PnP, and keeps
//! persistent logins. The port is proven with a RAM driver, the SRP driver against the
//! real target (`tests/`).
//!
//! Modules: [`model`] (what the model gives a driver: levels, limits, requests, the port
//! calls), [`port`] (`std`), [`srp`] (the SRP driver).
//!
//! With no `std` (the default feature off: a kernel driver's build) [`model`] and [`srp`]
//! remain — the SRP driver's entry points written against the port calls it makes
//! ([`model::IscsiPortCalls`]), its worker a system thread and its sleeps kernel events
//! from the access layer's hooks — and the emulated port, which stands for the system's
//! port driver, is left out with the power domain that names it.
#![deny(unsafe_code)]
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

/// The `alloc` names a `std` crate has in its prelude (`use crate::prelude::*`).
#[allow(unused_imports)]
use ib_verbs::prelude;

pub mod model;
#[cfg(feature = "std")]
pub mod port;
pub mod srp;
