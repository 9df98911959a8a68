//! [`PowerSwitch`]: what a provider does physically when its HCA changes power state.

use super::PowerState;
use crate::verbs::Completion;

/// The physical side of a power transition, implemented by a verbs provider.
pub trait PowerSwitch: Send + Sync {
    /// Puts the HCA in `state`; returns at once, completes when the HCA is there.
    fn set_power(&self, state: PowerState) -> Completion<()>;
}
