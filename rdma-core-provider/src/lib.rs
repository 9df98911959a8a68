//! A verbs provider over rdma-core: real InfiniBand and RoCE NICs, and the kernel's
//! rdma_rxe, under the access layer's interfaces — [`RdmaCa`] (the channel interface),
//! [`RdmaPort`] (the port interface) and [`RdmaCm`] (the connection-manager seam, through
//! librdmacm: the kernel owns QP1 and the CM here).
//!
//! libibverbs and librdmacm are loaded at run time (`dlopen`), so the crate builds
//! everywhere and a machine without rdma-core is told what to install when it asks for
//! this provider. Every `unsafe` of the crate is in its one FFI module (`ffi`), each block
//! with its SAFETY reasoning.
//!
//! What user space cannot do, and what the layers above do instead:
//! - no fast registration: the target registers its buffers once (local keys only, as
//!   ib_srpt and SPDK do); the host fences per I/O with type-2 memory windows where the
//!   device has them (`CaCaps::mem_windows`);
//! - no QP1: the RDMA-CM login form through librdmacm; no IB CM form, no Device
//!   Management (hosts name rdma-core targets by address and IDs, as Linux's
//!   `add_target`).
//!
//! Layering: `ib-verbs <- access-layer <- rdma-core-provider <- providers`.
#![deny(unsafe_code)]
#![cfg(target_os = "linux")]

mod bind_fence;
mod ca;
#[cfg(test)]
mod ca_tests;
mod cm;
mod device;
mod events;
mod ffi;
mod port;
mod sysfs;

pub use ca::RdmaCa;
pub use cm::RdmaCm;
pub use device::devices;
pub use port::RdmaPort;

use access_layer::verbs::{Device, DeviceSpec, OpenError, ProviderKind};
use std::sync::Arc;

/// Opens the RDMA port `spec` names (its device, port and GID; see `DeviceSpec`).
pub fn open(spec: &DeviceSpec) -> Result<Device, OpenError> {
    let dev = device::DeviceCore::open(spec)?;
    let name = dev.ctx.name().to_owned();
    let ca = Arc::new(RdmaCa::new(dev).map_err(|e| OpenError::Device {
        provider: ProviderKind::RdmaCore,
        device: name,
        reason: format!("threads: {e}"),
    })?);
    Ok(Device {
        port: Arc::new(RdmaPort::new(ca.clone())),
        ca,
    })
}
