//! [`PowerSwitch`]: what a provider does physically when its HCA changes power state.

use super::PowerState;
use crate::verbs::Completion;
#[cfg(target_os = "linux")]
use crate::verbs::{SoftCa, VerbsError};

/// The physical side of a power transition, implemented by a verbs provider.
pub trait PowerSwitch: Send + Sync {
    /// Puts the HCA in `state`; returns at once, completes when the HCA is there.
    fn set_power(&self, state: PowerState) -> Completion<()>;
}

/// The soft HCA in D3 has every port inactive: it drops traffic in both directions, so its
/// peers' QPs retry and, if the HCA stays down past their retry budget, fail. In D0 every
/// port is active again. A short engine call (as the data-path verbs make), so it completes
/// at once.
#[cfg(target_os = "linux")]
impl PowerSwitch for SoftCa {
    fn set_power(&self, state: PowerState) -> Completion<()> {
        let active = state == PowerState::D0;
        let r = self.hca().with(|e, _| {
            let ports = u8::try_from(e.ports().len()).unwrap_or(u8::MAX);
            (1..=ports).try_for_each(|p| e.set_port_active(p, active))
        });
        Completion::ready(r.map_err(VerbsError::from))
    }
}
