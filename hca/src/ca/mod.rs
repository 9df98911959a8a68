//! The software HCA as a provider of the access layer: [`SoftCa`] (the channel interface
//! over a [`Hca`]), [`SoftPort`] (the port interface beside it), and [`open`], which opens
//! both from a [`DeviceSpec`] — on UDP sockets, or on a simulated net
//! ([`crate::sim::SimNet`], itself a [`access_layer::verbs::Fabric`]).
//!
//! The software HCA gives the access layer QP1 (`create_gsi_qp`), so its ports run the
//! access layer's own MAD service and CM (`access_layer::mads`).

mod softca;

pub use softca::SoftCa;

use crate::driver::{DriverError, Hca, HcaConfig};
use crate::engine::VerbsError as EngineError;
use crate::sim::SimNet;
use access_layer::power::{PowerState, PowerSwitch};
use access_layer::verbs::port::PortIdentity;
use access_layer::verbs::{
    Completion, Device, DeviceSpec, OpenError, PortAttr, PortInterface, ProviderError,
    ProviderErrorKind, ProviderKind, VerbsError,
};
use ib_verbs::{Gid, PKey, PortCounters, Resources, Time};
use std::sync::Arc;

/// An engine's refusal as the access layer reports it.
pub(crate) fn provider_error_of(e: EngineError) -> ProviderError {
    let kind = match &e {
        EngineError::NoSuch { .. } => ProviderErrorKind::NoSuch,
        EngineError::InUse { .. } => ProviderErrorKind::InUse,
        EngineError::SrqFull(_) | EngineError::NoQpn => ProviderErrorKind::Exhausted,
        EngineError::BadPort(_) => ProviderErrorKind::NoSuch,
        _ => ProviderErrorKind::Invalid,
    };
    ProviderError::new(kind, e.to_string())
}

/// See [`provider_error_of`].
pub(crate) fn provider_error(e: EngineError) -> VerbsError {
    VerbsError::Provider(provider_error_of(e))
}

/// One port of a software HCA beside its [`SoftCa`].
#[derive(Debug)]
pub struct SoftPort {
    ca: Arc<SoftCa>,
    port: u8,
}

impl SoftPort {
    /// Port `port` (1-based) of `ca`'s device.
    pub fn new(ca: Arc<SoftCa>, port: u8) -> SoftPort {
        SoftPort { ca, port }
    }

    fn hca(&self) -> &Hca {
        self.ca.hca()
    }
}

impl PortInterface for SoftPort {
    fn identity(&self) -> PortIdentity {
        let hca = self.hca();
        let addr = hca
            .port_addrs()
            .get(usize::from(self.port).wrapping_sub(1))
            .map_or_else(|| "?".to_owned(), |a| a.to_string());
        let (provider, device) = match hca.sim_net() {
            Some(_) => (ProviderKind::Sim, format!("sim:{addr}")),
            None => (ProviderKind::Soft, format!("soft:{addr}")),
        };
        PortIdentity {
            provider,
            device,
            port: self.port,
            gid_index: None,
        }
    }

    fn attr(&self) -> PortAttr {
        let hca = self.hca();
        let (gid, active) = hca.with(|e, _| {
            e.ports()
                .get(usize::from(self.port).wrapping_sub(1))
                .map_or((Gid::default(), false), |p| (p.gid(), p.active))
        });
        PortAttr {
            port: self.port,
            gid,
            active,
            link_mtu: hca.link_mtu(self.port),
        }
    }

    fn now(&self) -> Time {
        self.hca().now()
    }

    fn set_pkey_table(&self, table: Vec<PKey>) -> Result<(), VerbsError> {
        self.hca()
            .with(|e, _| e.set_pkey_table(self.port, table))
            .map_err(provider_error)
    }

    fn pkey_table(&self) -> Vec<PKey> {
        self.hca()
            .with(|e, _| e.pkey_table(self.port).map(<[PKey]>::to_vec))
            .unwrap_or_default()
    }

    fn counters(&self) -> PortCounters {
        let stats = self
            .hca()
            .with(|e, _| e.port_stats(self.port))
            .unwrap_or_default();
        let mut c = PortCounters::from_pairs(stats.named());
        // The UDP driver's system calls (the device's, over its ports): how well sends and
        // receives batch.
        let io = self.hca().io_stats();
        c.add(&PortCounters::from_pairs([
            ("send_calls", io.send_calls),
            ("datagrams_sent", io.datagrams_sent),
            ("recv_calls", io.recv_calls),
            ("datagrams_received", io.datagrams_received),
            ("wakeups", io.wakeups),
        ]));
        c
    }

    fn resources(&self) -> Resources {
        self.hca().with(|e, _| e.resources())
    }

    fn set_active(&self, active: bool) -> Result<(), VerbsError> {
        self.hca()
            .with(|e, _| e.set_port_active(self.port, active))
            .map_err(provider_error)
    }
}

/// The software HCA in D3 has every port inactive: it drops traffic in both directions, so
/// its peers' QPs retry and, if the HCA stays down past their retry budget, fail. In D0
/// every port is active again. A short engine call (as the data-path verbs make), so it
/// completes at once.
impl PowerSwitch for SoftCa {
    fn set_power(&self, state: PowerState) -> Completion<()> {
        let active = state == PowerState::D0;
        let r = self.hca().with(|e, _| {
            let ports = u8::try_from(e.ports().len()).unwrap_or(u8::MAX);
            (1..=ports).try_for_each(|p| e.set_port_active(p, active))
        });
        Completion::ready(r.map_err(provider_error))
    }
}

/// Opens a one-port software device for `spec` (its address, node GUID and first QPN), on
/// `net` when given (no socket, no thread; the net's clock), else on a UDP socket.
pub fn open(spec: &DeviceSpec, net: Option<&Arc<SimNet>>) -> Result<Device, OpenError> {
    let provider = if net.is_some() {
        ProviderKind::Sim
    } else {
        ProviderKind::Soft
    };
    let config = HcaConfig {
        udp_port: spec.address.port(),
        first_qpn: spec.first_qpn,
        gso: spec.gso,
        sim: net.cloned(),
        ..HcaConfig::new(spec.node_guid, vec![spec.address.ip()])
    };
    let failed = |reason: String| OpenError::Device {
        provider,
        device: format!("{}:{}", provider, spec.address),
        reason,
    };
    open_config(config).map_err(failed)
}

/// Opens a software device as `config` says (every knob of the driver: GSO, several
/// ports); the [`Device`] is its port 1. The error says why.
pub fn open_config(config: HcaConfig) -> Result<Device, String> {
    let hca = Hca::open(config).map_err(|e: DriverError| e.to_string())?;
    let ca = Arc::new(SoftCa::new(hca).map_err(|e| format!("dispatcher thread: {e}"))?);
    Ok(Device {
        port: Arc::new(SoftPort::new(ca.clone(), 1)),
        ca,
    })
}

/// A simulated net as the fabric the layers above open devices on: every device a
/// software HCA on the net (whatever provider the spec names: the simulator models the
/// software HCA), the net's virtual clock, its seeded randomness, and no threads.
#[derive(Debug, Clone)]
pub struct SimFabric(pub Arc<SimNet>);

impl access_layer::verbs::Fabric for SimFabric {
    fn open(&self, spec: &DeviceSpec) -> Result<Device, OpenError> {
        open(spec, Some(&self.0))
    }

    fn clock(&self) -> Arc<dyn ib_verbs::time::Clock> {
        self.0.clone()
    }

    fn random(&self) -> u64 {
        self.0.random()
    }

    fn single_threaded(&self) -> bool {
        true
    }
}

/// The software HCA on UDP sockets as a fabric: every device a software HCA, the system's
/// clock and entropy. What tests of the layers above open when they need a real provider;
/// the product chooses providers in crate `providers`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SoftFabric;

impl access_layer::verbs::Fabric for SoftFabric {
    fn open(&self, spec: &DeviceSpec) -> Result<Device, OpenError> {
        match spec.provider {
            ProviderKind::Soft => open(spec, None),
            other => Err(OpenError::NoProvider {
                provider: other,
                reason: "this fabric opens software HCAs only".into(),
            }),
        }
    }

    fn clock(&self) -> Arc<dyn ib_verbs::time::Clock> {
        ib_verbs::time::system_clock()
    }

    fn random(&self) -> u64 {
        access_layer::verbs::device::system_random()
    }
}
