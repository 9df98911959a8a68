//! The driver in its HCA's power domain (the access layer's [`PowerDomain`]: the seed's
//! power ordering — a kernel client goes down before its HCA and comes up after it).
//! [`power_domain`] makes the domain of a running SRP driver: its root is the transport's
//! HCA (`srp_initiator::power::HcaPower`: ports inactive in D3), its one child the driver's
//! port ([`DriverPower`]: the port's power IRP, `Port::set_power` — the queue held and
//! drained, the driver logged out in D3; a fresh login and the held I/O replayed in D0),
//! run as a work item at passive level (`srp_initiator::power::work_item`).

use super::SrpDriver;
use crate::port::{Port, PowerState as DevicePower};
use access_layer::power::{PowerDevice, PowerDomain};
use access_layer::verbs::Completion;
use srp_initiator::power::{HcaPower, work_item};
use std::sync::Arc;
use std::time::Duration;

/// The driver's port as a child device of its HCA.
pub struct DriverPower {
    port: Arc<Port<SrpDriver>>,
    /// How long a power-down waits for the driver to finish what it holds.
    drain: Duration,
}

impl PowerDevice for DriverPower {
    fn name(&self) -> String {
        format!(
            "SRP initiator (iSCSI model) to {}",
            self.port.driver().cfg.target
        )
    }

    fn power_down(&self) -> Completion<()> {
        self.irp(DevicePower::D3)
    }

    fn power_up(&self) -> Completion<()> {
        self.irp(DevicePower::D0)
    }
}

impl DriverPower {
    /// The power IRP as a work item at passive level.
    fn irp(&self, state: DevicePower) -> Completion<()> {
        let (port, drain) = (self.port.clone(), self.drain);
        let domain_state = match state {
            DevicePower::D0 => access_layer::power::PowerState::D0,
            DevicePower::D3 => access_layer::power::PowerState::D3,
        };
        work_item(self.name(), "iscsi-power", domain_state, move || {
            port.set_power(state, drain).map_err(|e| e.to_string())
        })
    }
}

/// The power domain of `port`'s driver: its HCA the root, the driver its child on port 1;
/// a power-down drains the driver for at most `drain`.
pub fn power_domain(port: &Arc<Port<SrpDriver>>, drain: Duration) -> PowerDomain {
    let hca = HcaPower::new(
        format!("HCA at {}", port.driver().cfg.local),
        port.driver().transport().cloned(),
    );
    let domain = PowerDomain::new(Arc::new(hca));
    // A new domain is in D0 and idle: adding its first child cannot fail.
    let _ = domain.add_child(
        1,
        Arc::new(DriverPower {
            port: port.clone(),
            drain,
        }),
    );
    domain
}
