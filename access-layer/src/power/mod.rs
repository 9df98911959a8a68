//! Power management of an HCA and its client devices (ARCHITECTURE §3 item 9, the seed's
//! "power-down runs children first, the HCA last").
//!
//! Contract:
//! - A [`PowerDomain`] is one HCA ([`PowerDevice`]) and the client devices configured as
//!   children of its ports (like the IPoIB PDO). [`PowerDomain::power_down`] powers the
//!   children down, last registered first, then the HCA; [`PowerDomain::power_up`] powers
//!   the HCA up, then the children in registration order. Each step starts from the previous
//!   one's completion routine, so nothing blocks and the caller may be at dispatch level.
//! - [`PoweredCa`] is the HCA side: a [`crate::verbs::ChannelInterface`] over another one.
//!   While the HCA is not in D0, resource verbs and posts are queued (bounded) and their
//!   completions stay pending; on power-up they are replayed in call order. A request that
//!   can no longer succeed completes with an error, never vanishes: a resource verb gets the
//!   provider's error, a post whose replay the provider refuses gets a `WrFlushErr` work
//!   completion on its CQ (and a CQ notification), a post to a QP whose state the power-down
//!   reset (or whose peer went away) is flushed or fails its retries in the provider.
//! - [`PowerSwitch`] is what the provider does physically: for the software HCA (`hca`'s
//!   `SoftCa`) the HCA's ports go inactive in D3 (they drop traffic; peers time out) and
//!   active in D0.
//!
//! Modules: [`domain`] (the device tree and the ordering), [`powered`] ([`PoweredCa`]) and
//! [`switch`] ([`PowerSwitch`], which providers implement).

pub mod domain;
#[cfg(feature = "std")]
pub mod powered;
pub mod switch;

pub use domain::{ChildId, PowerDevice, PowerDomain};
#[cfg(feature = "std")]
pub use powered::{PowerPolicy, PowerStats, PoweredCa};
pub use switch::PowerSwitch;

/// A device power state (the D-states of PCI and Windows power IRPs; only the two ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PowerState {
    /// Fully on.
    D0,
    /// Off: no traffic, requests wait for power-up.
    D3,
}

/// Why a power request was refused before it started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PowerError {
    /// Another power transition of the same domain is in progress.
    #[error("a power transition is already in progress")]
    Busy,
    /// The domain already is in the requested state.
    #[error("the domain is already in {0:?}")]
    AlreadyIn(PowerState),
    /// Children are added and removed only while the domain is in D0 and idle.
    #[error("children change only in D0 with no transition in progress")]
    NotIdle,
}
