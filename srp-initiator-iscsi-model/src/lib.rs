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
//! Today: the port and its verifier, proven with a RAM driver (`tests/`). Later: the SRP
//! driver on it (the `srp::initiator` channel core over the access layer's verbs), PnP of
//! IOCs, power ordering, and the WMI-like management surface.
//!
//! Modules: [`port`], [`srp`] (the SRP driver).
#![deny(unsafe_code)]

pub mod port;
pub mod srp;
