//! The IB access layer (IBAL): everything between the verbs of the `hca` crate and the SRP
//! initiator and target.
//!
//! Contract: MAD wire formats ([`mad`]) parse and emit byte-exact and never panic; the verbs
//! API ([`verbs`]) never blocks at dispatch (resource verbs complete through a `Completion`,
//! blocking calls there trip a verifier); the GSI agent ([`gsi`]), Communication Manager
//! ([`cm`]) and Device Management agent and client ([`dm`]) are sans-IO state machines a driver
//! feeds with MADs and time. PnP ([`pnp`]), power ([`power`]) and the control socket ([`ctl`])
//! complete the layer. See docs/access-layer.md.
//!
//! It sits on `hca` (identity newtypes, the engine and its UDP driver) and `wirekit`.
#![deny(unsafe_code)]

pub mod cm;
pub mod ctl;
pub mod dm;
pub mod gsi;
pub mod mad;
pub mod pnp;
pub mod power;
pub mod verbs;
