//! The driver in its HCA's power domain (the access layer's [`PowerDomain`]: the seed's
//! power ordering — a kernel client goes down before its HCA and comes up after it).
//! [`power_domain`] makes the domain of a running SRP driver: its root is the transport's
//! soft HCA ([`HcaPower`]: ports inactive in D3), its one child the driver's port
//! ([`DriverPower`]: the port's power IRP, `Port::set_power` — the queue held and drained,
//! the driver logged out in D3; a fresh login and the held I/O replayed in D0).
//!
//! A power IRP reaches a driver at passive level and may wait; the domain's callbacks
//! return at once. So [`DriverPower`] runs each transition as a work item on a thread of
//! its own (an IoQueueWorkItem) and completes the domain's [`Completion`] from there.

use super::SrpDriver;
use crate::port::{Port, PowerState as DevicePower};
use access_layer::power::{PowerDevice, PowerDomain, PowerState};
use access_layer::verbs::{Completion, VerbsError};
use std::sync::Arc;
use std::time::Duration;

/// The transport's HCA as the domain's root device.
pub struct HcaPower {
    port: Arc<Port<SrpDriver>>,
}

impl PowerDevice for HcaPower {
    fn name(&self) -> String {
        format!("soft HCA at {}", self.port.driver().cfg.local)
    }

    fn power_down(&self) -> Completion<()> {
        self.set(PowerState::D3)
    }

    fn power_up(&self) -> Completion<()> {
        self.set(PowerState::D0)
    }
}

impl HcaPower {
    fn set(&self, state: PowerState) -> Completion<()> {
        match self.port.driver().transport() {
            Some(t) => t.set_hca_power(state),
            None => Completion::ready(Err(VerbsError::DeviceFailed {
                device: self.name(),
                reason: "the driver has not opened its transport".into(),
            })),
        }
    }
}

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
        let (done, completion) = Completion::pair();
        let (port, drain, device) = (self.port.clone(), self.drain, self.name());
        let failed = move |reason: String| VerbsError::DeviceFailed {
            device: device.clone(),
            reason,
        };
        let spawned = std::thread::Builder::new()
            .name("iscsi-power".into())
            .spawn(move || {
                let r = port.set_power(state, drain).map_err(|e| {
                    tracing::warn!(%e, ?state, "the driver's power transition");
                    failed(format!("power transition to {state:?}: {e}"))
                });
                done.complete(r);
            });
        match spawned {
            Ok(_) => completion,
            Err(e) => Completion::ready(Err(VerbsError::DeviceFailed {
                device: self.name(),
                reason: format!("no thread for the power work item: {e}"),
            })),
        }
    }
}

/// The power domain of `port`'s driver: its HCA the root, the driver its child on port 1;
/// a power-down drains the driver for at most `drain`.
pub fn power_domain(port: &Arc<Port<SrpDriver>>, drain: Duration) -> PowerDomain {
    let domain = PowerDomain::new(Arc::new(HcaPower { port: port.clone() }));
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
