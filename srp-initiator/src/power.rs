//! The transport in its HCA's power domain (the access layer's
//! [`PowerDomain`](access_layer::power::PowerDomain): a client device goes down before its
//! HCA and comes up after it), as both driver models put it there: [`HcaPower`] is the
//! domain's root — the transport's channel adapter, its ports inactive in D3 — and each
//! model adds its own device as the child (StorPort: the port's StopAdapter and
//! RestartAdapter; the iSCSI model: the port's power IRP). A device's power IRP reaches a
//! driver at passive level and may wait while the domain's callbacks return at once:
//! [`work_item`] runs a transition on a thread of its own (an IoQueueWorkItem) and
//! completes the domain's [`Completion`] from there.
#[allow(unused_imports)]
use crate::prelude::*;

use crate::SrpTransport;
use access_layer::power::{PowerDevice, PowerState};
use access_layer::verbs::{Completion, VerbsError};

/// The transport's channel adapter as a power domain's root device.
pub struct HcaPower {
    name: String,
    transport: Option<SrpTransport>,
}

impl HcaPower {
    /// The HCA of `transport`, named `name` in logs and errors; `None`: a driver that has
    /// not opened its transport, whose every transition fails with that reason.
    pub fn new(name: String, transport: Option<SrpTransport>) -> HcaPower {
        HcaPower { name, transport }
    }

    fn set(&self, state: PowerState) -> Completion<()> {
        match &self.transport {
            Some(t) => t.set_hca_power(state),
            None => Completion::ready(Err(VerbsError::DeviceFailed {
                device: self.name.clone(),
                reason: "the driver has not opened its transport".into(),
            })),
        }
    }
}

impl PowerDevice for HcaPower {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn power_down(&self) -> Completion<()> {
        self.set(PowerState::D3)
    }

    fn power_up(&self) -> Completion<()> {
        self.set(PowerState::D0)
    }
}

/// Runs `transition` (a device's power IRP, which may wait) on a work-item thread named
/// `thread` and completes the returned completion with its outcome; `device` names the
/// device in the error. A transition that fails is logged at warning level. (`std`: a
/// kernel driver queues an `IoQueueWorkItem` instead.)
#[cfg(feature = "std")]
pub fn work_item(
    device: String,
    thread: &str,
    state: PowerState,
    transition: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Completion<()> {
    let (done, completion) = Completion::pair();
    let name = device.clone();
    let spawned = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            let r = transition().map_err(|e| {
                tracing::warn!(device = %name, ?state, %e, "a power transition failed");
                VerbsError::DeviceFailed {
                    device: name.clone(),
                    reason: format!("power transition to {state:?}: {e}"),
                }
            });
            done.complete(r);
        });
    match spawned {
        Ok(_) => completion,
        Err(e) => Completion::ready(Err(VerbsError::DeviceFailed {
            device,
            reason: format!("no thread for the power work item: {e}"),
        })),
    }
}
