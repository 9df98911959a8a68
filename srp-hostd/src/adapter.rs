//! [`HostAdapter`]: one login's initiator under the driver model the configuration chose —
//! the StorPort miniport under its emulated StorPort, or the iSCSI-model SRP driver under
//! its emulated SCSIport-era port. Both run the same SRP transport and take the same
//! SRBs; the daemon, its disks and multipath see one interface.
//!
//! Contract: [`HostAdapter::start`] opens the adapter and starts the login without waiting
//! for it (the caller reads [`HostAdapter::status`]); [`HostAdapter::submit`] hands an SRB
//! to the port, whose completion comes exactly once; [`HostAdapter::stop`] logs out in
//! order (StorPort: StopAdapter after a bounded drain; iSCSI model: orderly removal and
//! unload); [`HostAdapter::ioc_removed`] is the IOC disappearing as each model sees it
//! (iSCSI model: surprise removal; StorPort: a bus change whose re-enumeration removes
//! the IOC's LUs).
//!
//! Power: each adapter is a power domain of its own — its transport's HCA the root, the
//! driver its child (StorPort: the port's StopAdapter and RestartAdapter; the iSCSI model:
//! the port's power IRP) — so [`HostAdapter::suspend`] takes the driver down (drained,
//! logged out) before its HCA and [`HostAdapter::resume`] brings the HCA up before the
//! driver (a fresh login). Requests submitted while suspended are held by the port and
//! run after the resume; while suspended (or between), [`HostAdapter::is_suspended`].

use crate::config::DriverModel;
use access_layer::power::{PowerDomain, PowerState};
use access_layer::verbs::Completion;
use srp_initiator_iscsi_model::port as iscsi;
use srp_initiator_iscsi_model::srp::SrpDriver;
use srp_initiator_storport::port::{
    DataBuffer, MemoryError, Port, PortConfig, PortEvent, SrbRequest, SrbResult, SystemMemory,
};
use srp_initiator_storport::srp::{AdapterStatus, SrpAdapterConfig, SrpMiniport, SrpTransport};
use std::sync::Arc;
use std::time::Duration;

/// A login's adapter under one of the two driver models, in its power domain.
pub struct HostAdapter {
    driver: Driver,
    power: PowerDomain,
}

/// The port and driver of one model.
enum Driver {
    /// The StorPort miniport.
    StorPort(Arc<Port<SrpMiniport>>),
    /// The iSCSI-model driver.
    IscsiModel(Arc<iscsi::Port<SrpDriver>>),
}

/// How long a suspend waits for the driver to finish what it holds before it logs out.
const SUSPEND_DRAIN: Duration = Duration::from_secs(10);

impl std::fmt::Debug for HostAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostAdapter")
            .field("model", &self.model())
            .finish_non_exhaustive()
    }
}

/// An iSCSI-model adapter is unloaded when it goes (a lost or surprise-removed session
/// skips the orderly logout): the driver's worker stops and the soft HCA port is released.
impl Drop for HostAdapter {
    fn drop(&mut self) {
        if let Driver::IscsiModel(p) = &self.driver
            && !matches!(
                p.state(),
                iscsi::Lifecycle::Unloaded | iscsi::Lifecycle::BugChecked
            )
            && let Err(e) = p.unload()
        {
            tracing::debug!(%e, "unloading the iSCSI-model driver");
        }
    }
}

impl HostAdapter {
    /// Opens the adapter for `cfg` under `model`, its SRB buffers in `memory`, and starts
    /// the login.
    pub fn start(
        model: DriverModel,
        cfg: SrpAdapterConfig,
        memory: &Arc<SystemMemory>,
    ) -> Result<HostAdapter, String> {
        let driver = match model {
            DriverModel::StorPort => {
                let config = PortConfig {
                    memory: Some(memory.clone()),
                    ..PortConfig::default()
                };
                Port::<SrpMiniport>::start(cfg, config)
                    .map(|p| Driver::StorPort(Arc::new(p)))
                    .map_err(|e| e.to_string())?
            }
            DriverModel::IscsiModel => {
                let config = iscsi::PortConfig {
                    memory: Some(memory.clone()),
                    ..iscsi::PortConfig::default()
                };
                iscsi::Port::start(SrpDriver::new(cfg), config)
                    .map(|p| Driver::IscsiModel(Arc::new(p)))
                    .map_err(|e| e.to_string())?
            }
        };
        let power = match &driver {
            Driver::StorPort(p) => {
                srp_initiator_storport::srp::power::power_domain(p, SUSPEND_DRAIN)
            }
            Driver::IscsiModel(p) => {
                srp_initiator_iscsi_model::srp::power::power_domain(p, SUSPEND_DRAIN)
            }
        };
        Ok(HostAdapter { driver, power })
    }

    /// Takes the adapter down in its power domain — the driver drained and logged out,
    /// then its HCA's ports inactive — waiting at most `within`. Requests submitted from
    /// now on are held by the port until [`HostAdapter::resume`].
    pub fn suspend(&self, within: Duration) -> Result<(), String> {
        self.transition(PowerState::D3, within)
    }

    /// Brings the adapter up — its HCA, then the driver, which logs in again — waiting at
    /// most `within` for the transition (not for the login); held requests then run.
    pub fn resume(&self, within: Duration) -> Result<(), String> {
        self.transition(PowerState::D0, within)
    }

    fn transition(&self, to: PowerState, within: Duration) -> Result<(), String> {
        let started = match to {
            PowerState::D3 => self.power.power_down(),
            PowerState::D0 => self.power.power_up(),
        };
        started
            .map_err(|e| e.to_string())?
            .wait_timeout(within)
            .map_err(|e| e.to_string())
    }

    /// Whether the adapter is powered down or on its way down or up: its channel's state
    /// says nothing of the path then (a suspended path is not a lost one).
    pub fn is_suspended(&self) -> bool {
        self.power.is_busy() || self.power.state() == PowerState::D3
    }

    /// Its driver model.
    pub fn model(&self) -> DriverModel {
        match &self.driver {
            Driver::StorPort(_) => DriverModel::StorPort,
            Driver::IscsiModel(_) => DriverModel::IscsiModel,
        }
    }

    /// The SRP transport (once the adapter opened it).
    pub fn transport(&self) -> Option<&SrpTransport> {
        match &self.driver {
            Driver::StorPort(p) => p.miniport().transport(),
            Driver::IscsiModel(p) => p.driver().transport(),
        }
    }

    /// Hands `req` to the port.
    pub fn submit(&self, req: SrbRequest) -> Result<Completion<SrbResult>, String> {
        match &self.driver {
            Driver::StorPort(p) => p.submit(req).map_err(|e| e.to_string()),
            Driver::IscsiModel(p) => p.submit(req).map_err(|e| e.to_string()),
        }
    }

    /// Port state, logins, losses, the last failure, the HCA port's counters.
    pub fn status(&self) -> AdapterStatus {
        match &self.driver {
            Driver::StorPort(p) => p.miniport().status(),
            Driver::IscsiModel(p) => p.driver().status(),
        }
    }

    /// For multipath with another path: fail what the channel holds now while it is down.
    pub fn fail_fast_now(&self) {
        match &self.driver {
            Driver::StorPort(p) => p.miniport().fail_fast_now(),
            Driver::IscsiModel(p) => p.driver().fail_fast_now(),
        }
    }

    /// Requests the port has handed to the driver and not had back.
    pub fn outstanding(&self) -> u32 {
        match &self.driver {
            Driver::StorPort(p) => p.outstanding(),
            Driver::IscsiModel(p) => u32::try_from(p.outstanding()).unwrap_or(u32::MAX),
        }
    }

    /// Whether the driver reported a change of its devices since the last call (a
    /// rescan is due).
    pub fn bus_changed(&self) -> bool {
        match &self.driver {
            Driver::StorPort(p) => p
                .take_events()
                .iter()
                .any(|e| matches!(e, PortEvent::BusChangeDetected { .. })),
            Driver::IscsiModel(p) => p.take_events().iter().any(|e| {
                matches!(
                    e,
                    iscsi::PortEvent::DeviceArrived(_) | iscsi::PortEvent::DeviceRemoved(_)
                )
            }),
        }
    }

    /// A buffer for a read of `len` bytes in the port's memory.
    pub fn read_buffer(&self, len: usize) -> Result<DataBuffer, MemoryError> {
        match &self.driver {
            Driver::StorPort(p) => p.read_buffer(len),
            Driver::IscsiModel(p) => p.read_buffer(len),
        }
    }

    /// A buffer holding `bytes` in the port's memory.
    pub fn buffer_from(&self, bytes: &[u8]) -> Result<DataBuffer, MemoryError> {
        match &self.driver {
            Driver::StorPort(p) => p.buffer_from(bytes),
            Driver::IscsiModel(p) => p.buffer_from(bytes),
        }
    }

    /// Logs out in order after at most `drain` for what is outstanding.
    pub fn stop(&self, drain: Duration) -> Result<(), String> {
        match &self.driver {
            Driver::StorPort(p) => {
                let r = p.stop_adapter(drain).map_err(|e| e.to_string());
                // The adapter goes for good: what waits in the port's queues, or reaches
                // them from now on, ends NO_DEVICE as at a device's removal, instead of
                // waiting for a RestartAdapter that will not come.
                let luns = p.miniport().transport().map_or(0, |t| t.config().max_luns);
                for lun in 0..luns {
                    p.remove_lu(srp_initiator_storport::port::LuAddress::new(0, 0, lun));
                }
                r
            }
            Driver::IscsiModel(p) => p.unload().map_err(|e| e.to_string()),
        }
    }

    /// The IOC is gone (it left its unit), as each model's port sees it. The iSCSI model:
    /// the port's surprise removal — everything the driver holds fails NO_DEVICE now and
    /// the channel is abandoned without a logout. StorPort hides device removal from a
    /// miniport; it sees a bus change: the miniport's BusChangeDetected, and the
    /// re-enumeration that follows finds none of `luns` behind the IOC any more, so the
    /// port removes each (its queued requests complete NO_DEVICE) and what the miniport
    /// still holds fails as a path failure (fast_io_fail now), for multipath to move.
    pub fn ioc_removed(&self, luns: &[srp_initiator_storport::port::LuAddress]) {
        match &self.driver {
            Driver::StorPort(p) => {
                p.services().bus_change_detected(0);
                // The rescan this asks for is the next `bus_changed`'s; the IOC is known
                // gone, so its result is known too.
                let _ = p.take_events();
                for lu in luns {
                    p.remove_lu(*lu);
                }
                p.miniport().fail_fast_now();
            }
            Driver::IscsiModel(p) => {
                if let Err(e) = p.surprise_remove() {
                    tracing::warn!(%e, "surprise removal");
                }
            }
        }
    }
}
