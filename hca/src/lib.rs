//! The bottom layer of the stack: the software HCA.
//!
//! Today this crate holds what every layer above needs to name InfiniBand things: the identity
//! newtypes in [`ids`] (GUID, GID, LID, P_Key, Q_Key, QPN, PSN, L_Key, R_Key). The RoCEv2 verbs provider
//! itself (QPs, CQs, MRs, the UDP driver) arrives with issue #3 and will live beside them in
//! `qp/`, `cq/`, `mr/`, `wire/` and `port/`.
//!
//! Layering: `hca <- access-layer <- srp <- {srp-target, srp-initiator-*} <- mpio <- srpctl`.
#![deny(unsafe_code)]

// The UDP driver: sockets with sendmmsg, UDP GSO/GRO, IP_MTU_DISCOVER and epoll, all Linux.
// Everything else in this crate is sans-IO and builds for any target (x86_64-pc-windows-msvc is
// checked by scripts/test.sh); a Windows build gets its CA from the platform's HCA driver.
#[cfg(target_os = "linux")]
pub mod driver;
pub mod engine;
pub mod ids;
pub mod inline_one;
pub mod mem;
pub mod metrics;
pub mod mr;
pub mod qp;
pub mod sim;
pub mod time;
pub mod units;
pub mod verbs;
pub mod wire;

pub use ids::{Gid, Guid, IdError, Lid, Lkey, PKey, Psn, QKey, Qpn, Rkey};
