//! The verbs vocabulary: the words the access layer defines and every provider implements
//! (as smoltcp's `phy::Device` is defined by the layer that uses it) — InfiniBand
//! identities ([`ids`]), registered memory ([`mem`]), work requests and completions
//! ([`wr`]), memory keys and rights ([`mr`]), queue-pair attributes, states and the IBTA
//! transition table ([`qp`]), device objects and asynchronous events ([`ca`]), the path
//! MTU ([`mtu`]), time ([`time`]) and port counters ([`port`]).
//!
//! Contract: plain data and pure functions, `core` + `alloc` only (what a kernel build
//! needs); the `std` feature (on by default) adds the clock trait, file transfers into
//! registered memory and the counting allocator. No provider's type appears here: the
//! software HCA (`hca`), the rdma-core provider and the simulator depend on this crate,
//! never the other way.
//!
//! Layering: `wirekit <- ib-verbs <- {access-layer, srp}`; the access layer's interfaces
//! are written in this vocabulary, the providers (`hca`, `rdma-core-provider`) implement
//! them, and the sans-IO SRP cores (`srp`) build work requests in it without naming any
//! provider.
//!
//! The one `unsafe` of the crate is in [`mem`], the registered-memory module: file
//! transfers straight into registered words, and the counting allocator.
#![deny(unsafe_code)]
#![no_std]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod ca;
pub mod id_table;
pub mod ids;
pub mod inline_one;
pub mod mem;
pub mod mr;
pub mod mtu;
pub mod port;
/// The `alloc` names the Rust prelude gives a `std` crate, for the `no_std` crates of the
/// stack (`use ib_verbs::prelude::*`): `Box`, `String`, `ToString`, `ToOwned`, `Vec`,
/// `format!`, `vec!`.
pub mod prelude {
    pub use alloc::borrow::ToOwned;
    pub use alloc::boxed::Box;
    pub use alloc::string::{String, ToString};
    pub use alloc::vec::Vec;
    pub use alloc::{format, vec};
}
pub mod qp;
pub mod sync;
pub mod time;
pub mod wr;

pub use ca::{CqId, Event, QpId, Resources, SrqId};
pub use id_table::{IdKey, IdTable};
pub use ids::{Gid, Guid, IdError, Lid, Lkey, PKey, Psn, QKey, Qpn, Rkey};
pub use inline_one::InlineOne;
pub use mem::{MemBlock, MemError};
pub use mr::{Access, MrIndex, MrKey, MrKeys, PdId};
pub use mtu::PathMtu;
pub use port::PortCounters;
pub use qp::state::{QpAttrMask, QpState, QpType};
pub use qp::{QpAttr, QpInit, RcConnect};
pub use time::Time;
pub use wr::{
    ArmMode, FastRegPages, RecvWr, SendFlags, SendOp, SendWr, SgList, Sge, UdDest, Wc, WcOpcode,
    WcStatus,
};
