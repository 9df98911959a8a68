//! Devices and where they come from: a [`Device`] is one port of a provider's device —
//! its verbs ([`ChannelInterface`]) and the port beside them ([`PortInterface`]) — opened
//! from a [`DeviceSpec`] by a [`Fabric`].
//!
//! A [`Fabric`] is the one seam where a provider is chosen: the layers above ask it for
//! devices, a clock and randomness and never name a provider. The product's fabric (crate
//! `providers`) opens the software HCA or rdma-core as the spec says; the whole-stack
//! simulator passes its seeded net as a fabric of its own (virtual time, seeded
//! randomness, no threads).
#[allow(unused_imports)]
use crate::prelude::*;

use super::ChannelInterface;
use super::port::PortInterface;
use alloc::sync::Arc;
use core::fmt;
use core::net::SocketAddr;
#[cfg(feature = "std")]
use ib_verbs::time::Clock;
use ib_verbs::{Gid, Guid};

/// Which provider a device is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// The software RoCEv2 HCA over UDP sockets (`hca`): runs anywhere.
    #[default]
    Soft,
    /// A real RDMA device (InfiniBand or RoCE NIC, or the kernel's rdma_rxe) through
    /// libibverbs and librdmacm.
    RdmaCore,
    /// The software HCA on a simulated net (the whole-stack simulator).
    Sim,
}

impl ProviderKind {
    /// Its name in configuration files and listings: `soft`, `rdma-core`, `sim`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Soft => "soft",
            ProviderKind::RdmaCore => "rdma-core",
            ProviderKind::Sim => "sim",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::str::FromStr for ProviderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "soft" => Ok(ProviderKind::Soft),
            "rdma-core" => Ok(ProviderKind::RdmaCore),
            _ => Err(format!(
                "unknown provider {s:?}: \"soft\" (the software RoCE HCA) or \"rdma-core\" \
                 (an RDMA device through libibverbs)"
            )),
        }
    }
}

/// What device to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The provider.
    pub provider: ProviderKind,
    /// The port's address: for the software HCA the IP and UDP port it binds; under
    /// rdma-core the IP whose GID the port uses (its RDMA-CM address; the UDP port is the
    /// NIC's, 4791, and this one is ignored).
    pub address: SocketAddr,
    /// The node GUID of a software device (a real device has its own).
    pub node_guid: Guid,
    /// rdma-core: the device (`rxe0`, `mlx5_0`); `None`: the device whose GID table holds
    /// `address`.
    pub device: Option<String>,
    /// rdma-core: the port number (1-based); `None`: the port whose GID table holds
    /// `address`, else 1.
    pub port: Option<u8>,
    /// rdma-core: the GID index; `None`: the RoCEv2 GID of `address`.
    pub gid_index: Option<u8>,
    /// The software HCA: its first QP number (0: the default). Devices sharing a node GUID
    /// must not hand out the same QPNs (a peer's CM takes a repeated pair for a stale
    /// connection).
    pub first_qpn: u32,
    /// The software HCA: send runs of equal packets as one UDP GSO datagram and receive
    /// with GRO (on by default; off when every packet must be its own frame on a capture).
    pub gso: bool,
}

impl DeviceSpec {
    /// A software HCA device at `address` with `node_guid`.
    pub fn soft(address: SocketAddr, node_guid: Guid) -> DeviceSpec {
        DeviceSpec {
            provider: ProviderKind::Soft,
            address,
            node_guid,
            device: None,
            port: None,
            gid_index: None,
            first_qpn: 0,
            gso: true,
        }
    }
}

/// One port of an opened device. The CA is not open yet: its consumer opens it with its
/// event handler ([`ChannelInterface::open_ca`]).
#[derive(Clone)]
pub struct Device {
    /// The verbs.
    pub ca: Arc<dyn ChannelInterface>,
    /// The port beside them.
    pub port: Arc<dyn PortInterface>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// Why a device could not be opened. Each says what to install or configure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The provider is not available here: its libraries are missing, or it does not run
    /// on this platform.
    #[error("provider {provider} is not available: {reason}")]
    NoProvider {
        /// The provider.
        provider: ProviderKind,
        /// Why, and what to install.
        reason: String,
    },
    /// The provider runs but has no such device or port.
    #[error("provider {provider}: {reason}")]
    NoDevice {
        /// The provider.
        provider: ProviderKind,
        /// What was looked for and what exists.
        reason: String,
    },
    /// The device exists and could not be opened or set up.
    #[error("provider {provider}, {device}: {reason}")]
    Device {
        /// The provider.
        provider: ProviderKind,
        /// The device.
        device: String,
        /// Why.
        reason: String,
    },
}

/// Where devices, time and randomness come from. See the module doc. (`std`: in a kernel
/// driver, devices arrive through PnP and the clock is the kernel's.)
pub trait Fabric: Send + Sync + fmt::Debug {
    /// Opens the device `spec` names.
    fn open(&self, spec: &DeviceSpec) -> Result<Device, OpenError>;

    /// The clock the layers above read (the system's, or a simulated net's; `std`: a
    /// kernel driver reads the kernel's).
    #[cfg(feature = "std")]
    fn clock(&self) -> Arc<dyn Clock>;

    /// 64 random bits (CM communication IDs): the system's entropy, or a simulated run's
    /// seeded generator, so a run replays.
    fn random(&self) -> u64;

    /// Whether everything on this fabric runs on its owner's one thread (a simulated
    /// net): daemons then run their backend jobs inline instead of on worker threads.
    fn single_threaded(&self) -> bool {
        false
    }
}

/// 64 bits from the system's randomness (a fresh hasher's random keys, the time and the
/// process): what a real fabric's [`Fabric::random`] returns.
#[cfg(feature = "std")]
pub fn system_random() -> u64 {
    use core::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// One port of a device as a provider lists them (`srpctl devices`): what an operator
/// names in a configuration (`device`, `device_port`, `gid_index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// The device.
    pub device: String,
    /// The device's node GUID.
    pub node_guid: Guid,
    /// The port number.
    pub port: u8,
    /// `ACTIVE`, `DOWN`, …
    pub state: &'static str,
    /// `InfiniBand` or `Ethernet`.
    pub link_layer: &'static str,
    /// Active and largest MTU, bytes.
    pub active_mtu: Option<usize>,
    /// See `active_mtu`.
    pub max_mtu: Option<usize>,
    /// The GID table's used entries: index, GID, type (`RoCE v2`, `RoCE v1`, `IB`).
    pub gids: Vec<(u8, Gid, &'static str)>,
    /// Fast registration work requests (kernel consumers; not user space).
    pub fast_reg: bool,
    /// Type-2 memory windows: how a host in user space fences remote access per I/O.
    pub mem_windows: bool,
}
