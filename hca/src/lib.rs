//! The software HCA: a RoCEv2 verbs provider over UDP (wire-compatible with Linux
//! rdma_rxe), and the seeded simulated net the whole-stack simulator runs devices on.
//!
//! It implements the access layer's provider interfaces ([`ca`]: `SoftCa`, `SoftPort`,
//! `open`) over the `ib-verbs` vocabulary: `wirekit <- ib-verbs <- access-layer <- hca`.
//! Nothing above the access layer names this crate; one place chooses and opens a provider
//! (crate `providers`), and the simulator passes its [`sim::SimNet`] as a fabric. Files:
//! [`engine`] (the sans-IO device), [`qp`], [`mr`], [`verbs`] (CQs, SRQs), [`wire`]
//! (packets, ICRC), [`driver`] (UDP sockets, Linux), [`sim`] (the simulated net).
#![deny(unsafe_code)]

// The UDP driver: sockets with sendmmsg, UDP GSO/GRO, IP_MTU_DISCOVER and epoll, all Linux.
// Everything else in this crate is sans-IO and builds for any target (x86_64-pc-windows-msvc is
// checked by scripts/test.sh); a Windows build gets its CA from the platform's HCA driver.
#[cfg(target_os = "linux")]
pub mod driver;
// The access layer's provider interfaces over the driver (Linux, as the driver).
#[cfg(target_os = "linux")]
pub mod ca;
pub mod engine;
pub mod mr;
pub mod qp;
pub mod sim;
pub mod verbs;
pub mod wire;

// The vocabulary this provider implements, where the engine's modules name it.
pub use ib_verbs::{Gid, Guid, IdError, Lid, Lkey, PKey, Psn, QKey, Qpn, Rkey};
pub use ib_verbs::{ids, inline_one, mem, time};
