//! The one place that chooses and opens a verbs provider. [`System`] is the product's
//! [`Fabric`]: a [`DeviceSpec`] naming `soft` opens the software RoCEv2 HCA (crate `hca`)
//! on a UDP socket, `rdma-core` an RDMA device through libibverbs and librdmacm (crate
//! `rdma-core-provider`). Daemons and tools are handed a fabric and never name a provider;
//! the whole-stack simulator hands them its own (`hca::ca::SimFabric`).
//!
//! Layering: `access-layer <- {hca, rdma-core-provider} <- providers <- srpctl` (and the
//! tests of the layers between, which need a real provider).
#![deny(unsafe_code)]

use access_layer::verbs::{Device, DeviceSpec, Fabric, OpenError, PortInfo, ProviderKind};
use ib_verbs::time::Clock;
use std::sync::Arc;

/// The product's fabric. See the crate doc.
#[derive(Debug, Default, Clone, Copy)]
pub struct System;

impl Fabric for System {
    fn open(&self, spec: &DeviceSpec) -> Result<Device, OpenError> {
        match spec.provider {
            ProviderKind::Soft => hca::ca::open(spec, None),
            #[cfg(target_os = "linux")]
            ProviderKind::RdmaCore => rdma_core_provider::open(spec),
            #[cfg(not(target_os = "linux"))]
            ProviderKind::RdmaCore => Err(OpenError::NoProvider {
                provider: ProviderKind::RdmaCore,
                reason: "rdma-core is a Linux library; this build has no rdma-core provider".into(),
            }),
            ProviderKind::Sim => Err(OpenError::NoProvider {
                provider: ProviderKind::Sim,
                reason: "a simulated net is the simulator's fabric, not the system's".into(),
            }),
        }
    }

    fn clock(&self) -> Arc<dyn Clock> {
        ib_verbs::time::system_clock()
    }

    fn random(&self) -> u64 {
        access_layer::verbs::device::system_random()
    }
}

/// The RDMA devices rdma-core sees, with their ports and GIDs (for `srpctl devices`).
/// Errors when rdma-core is not installed (the message says what to install).
pub fn rdma_devices() -> Result<Vec<PortInfo>, OpenError> {
    #[cfg(target_os = "linux")]
    return rdma_core_provider::devices();
    #[cfg(not(target_os = "linux"))]
    Err(OpenError::NoProvider {
        provider: ProviderKind::RdmaCore,
        reason: "rdma-core is a Linux library".into(),
    })
}

/// The product's fabric, shared.
pub fn system() -> Arc<dyn Fabric> {
    Arc::new(System)
}
