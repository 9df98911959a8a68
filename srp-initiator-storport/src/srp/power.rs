//! The miniport in its HCA's power domain (the access layer's [`PowerDomain`]: a client
//! device goes down before its HCA and comes up after it). A StorPort miniport has no power
//! IRP of its own: the port turns the adapter's D3 into HwAdapterControl(ScsiStopAdapter)
//! once it has drained, holding new requests in its queues, and D0 into
//! HwAdapterControl(ScsiRestartAdapter) (HwFindAdapter and HwInitialize again where that
//! is not supported), after which the held requests flow (windows.md §2). [`power_domain`]
//! makes that tree for a running port: the transport's HCA the root
//! (`srp_initiator::power::HcaPower`: ports inactive in D3), the port its child
//! ([`MiniportPower`]: [`Port::stop_adapter`] — the drain, then StopAdapter, an orderly
//! SRP_I_LOGOUT — and [`Port::restart_adapter`] — RestartAdapter, a fresh login, the port
//! paused until it succeeds), each as a work item at passive level.

use super::SrpMiniport;
use crate::port::Port;
use access_layer::power::{PowerDevice, PowerDomain, PowerState};
use access_layer::verbs::Completion;
use srp_initiator::power::{HcaPower, work_item};
use std::sync::Arc;
use std::time::Duration;

/// The StorPort adapter as a child device of its HCA.
pub struct MiniportPower {
    port: Arc<Port<SrpMiniport>>,
    /// How long a power-down waits for the miniport to finish what it holds.
    drain: Duration,
}

impl PowerDevice for MiniportPower {
    fn name(&self) -> String {
        match self.port.miniport().transport() {
            Some(t) => format!("SRP miniport (StorPort) to {}", t.config().target),
            None => "SRP miniport (StorPort), not found".into(),
        }
    }

    fn power_down(&self) -> Completion<()> {
        let (port, drain) = (self.port.clone(), self.drain);
        work_item(self.name(), "storport-power", PowerState::D3, move || {
            port.stop_adapter(drain).map_err(|e| e.to_string())
        })
    }

    fn power_up(&self) -> Completion<()> {
        let port = self.port.clone();
        work_item(self.name(), "storport-power", PowerState::D0, move || {
            port.restart_adapter().map_err(|e| e.to_string())
        })
    }
}

/// The power domain of `port`'s adapter: its HCA the root, the adapter its child on port 1;
/// a power-down drains the adapter for at most `drain`.
pub fn power_domain(port: &Arc<Port<SrpMiniport>>, drain: Duration) -> PowerDomain {
    let transport = port.miniport().transport().cloned();
    let name = match &transport {
        Some(t) => format!("HCA at {}", t.config().local),
        None => "HCA (the adapter was not found)".into(),
    };
    let domain = PowerDomain::new(Arc::new(HcaPower::new(name, transport)));
    // A new domain is in D0 and idle: adding its first child cannot fail.
    let _ = domain.add_child(
        1,
        Arc::new(MiniportPower {
            port: port.clone(),
            drain,
        }),
    );
    domain
}
