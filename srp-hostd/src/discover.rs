//! One Device Management sweep of a portal, as `ibsrpdm` does: IOUnitInfo, each IOC's
//! IOControllerProfile and its service entries, through a device of our own on a local
//! address (the access layer's MAD service with a [`DmClient`], on the device's QP1). The
//! device is closed when the sweep returns, so the address is free for a login afterwards.
//! A provider that owns QP1 itself (rdma-core) cannot sweep: its targets are configured.

use access_layer::cm::{CmSetup, DeviceManagement};
use access_layer::dm::{DmClient, DmClientConfig, DmEvent, IocRecord};
use access_layer::mad::{MadAddress, ServiceId};
use access_layer::verbs::{DeviceSpec, Doorbell, Fabric, SyncCa};
use ib_verbs::{Gid, Guid};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The RoCEv2 UDP port.
pub const ROCE_PORT: u16 = 4791;

/// Why a sweep found nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoverError {
    /// No route to the portal.
    #[error("no route to {0}")]
    NoRoute(IpAddr),
    /// The local port could not be opened.
    #[error("cannot open a port on {local}: {reason}")]
    Port {
        /// The local address.
        local: IpAddr,
        /// Why.
        reason: String,
    },
    /// The provider owns QP1 (rdma-core: the kernel's): no Device Management from here.
    #[error(
        "{local}: the {provider} provider has no Device Management (the kernel owns QP1): \
         configure the portal's targets (id_ext, ioc_guid), as Linux add_target takes them"
    )]
    NoDeviceManagement {
        /// The local address.
        local: IpAddr,
        /// The provider.
        provider: access_layer::verbs::ProviderKind,
    },
    /// The portal answered that it has no unit, or stopped answering.
    #[error("{0}: no Device Management answer (is a target serving there?)")]
    NoAnswer(IpAddr),
    /// No complete answer in time.
    #[error("{portal}: no complete answer within {timeout:?}")]
    Timeout {
        /// The portal.
        portal: IpAddr,
        /// How long we waited.
        timeout: Duration,
    },
}

/// One SRP service an IOC offers: what a login needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrpService {
    /// The portal it was found at.
    pub portal: IpAddr,
    /// The IOC's GUID.
    pub ioc_guid: Guid,
    /// The IOC's IDString.
    pub ioc_name: String,
    /// The SRP target port's identifier extension.
    pub id_ext: u64,
    /// The CM service ID.
    pub service_id: ServiceId,
}

/// The SRP services of `iocs` (an IOC may offer several), in the order found.
pub fn srp_services(portal: IpAddr, iocs: &[IocRecord]) -> Vec<SrpService> {
    iocs.iter()
        .flat_map(|r| {
            r.entries.iter().filter_map(move |e| {
                e.srp_id_ext().map(|id_ext| SrpService {
                    portal,
                    ioc_guid: r.profile.guid,
                    ioc_name: r.profile.id_string_str().unwrap_or_default().to_owned(),
                    id_ext,
                    service_id: e.service_id,
                })
            })
        })
        .collect()
}

/// The local address the kernel would send to `portal` from (a connected UDP socket's name;
/// nothing is sent).
pub fn route_source(portal: IpAddr) -> Result<IpAddr, DiscoverError> {
    let any: SocketAddr = match portal {
        IpAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        IpAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    };
    let s = UdpSocket::bind(any).map_err(|_| DiscoverError::NoRoute(portal))?;
    s.connect(SocketAddr::new(portal, ROCE_PORT))
        .map_err(|_| DiscoverError::NoRoute(portal))?;
    s.local_addr()
        .map(|a| a.ip())
        .map_err(|_| DiscoverError::NoRoute(portal))
}

/// Sweeps `portal` once from the device `spec` names (its address is the local one) on
/// partition `pkey`, within `timeout`: its IOCs (a target answers on a partition with the
/// IOCs exported there). The device comes from `fabric` and is closed on return.
pub fn sweep(
    fabric: &Arc<dyn Fabric>,
    spec: &DeviceSpec,
    portal: IpAddr,
    pkey: ib_verbs::PKey,
    timeout: Duration,
) -> Result<Vec<IocRecord>, DiscoverError> {
    let local = spec.address.ip();
    let port_err = |reason: String| DiscoverError::Port { local, reason };
    let device = fabric.open(spec).map_err(|e| port_err(e.to_string()))?;
    // Every event of the device (a MAD's CQ notification) wakes the sweep.
    let bell = Arc::new(Doorbell::new());
    let b = bell.clone();
    SyncCa::new(device.ca.clone())
        .open_ca(Arc::new(move |_| b.ring()))
        .map_err(|e| port_err(format!("open: {e}")))?;
    device
        .port
        .set_pkey_table(vec![pkey])
        .map_err(|e| port_err(format!("P_Key table: {e}")))?;
    let addr = MadAddress::gsi(1, Gid::from_ip(portal));
    let mut client = DmClient::new(DmClientConfig::default());
    client
        .add_portal(device.port.now(), addr)
        .map_err(|e| port_err(format!("DM client: {e}")))?;
    let setup = CmSetup {
        time_wait: Duration::from_millis(20),
        agent_id: fabric.random() as u32,
        first_comm_id: (fabric.random() as u32).max(1),
    };
    let dm = DeviceManagement {
        agents: Vec::new(),
        client: Some(client),
    };
    let mut mads = access_layer::mads::open_connection_manager(&device, &setup, dm)
        .map_err(|e| port_err(format!("MAD service: {e}")))?;
    if mads.device_management().is_none() {
        return Err(DiscoverError::NoDeviceManagement {
            local,
            provider: spec.provider,
        });
    }
    let end = Instant::now() + timeout;
    loop {
        mads.poll(device.port.now());
        let Some(client) = mads.device_management().and_then(|d| d.client.as_mut()) else {
            return Err(DiscoverError::NoAnswer(portal));
        };
        let mut gone = false;
        while let Some(ev) = client.poll_event() {
            if matches!(ev, DmEvent::IouRemoved { .. }) {
                gone = true;
            }
        }
        if let Some(r) = client.records().find(|r| r.addr == addr) {
            return Ok(r.iocs.clone());
        }
        if gone {
            return Err(DiscoverError::NoAnswer(portal));
        }
        let now = Instant::now();
        if now >= end {
            return Err(DiscoverError::Timeout { portal, timeout });
        }
        // Until a MAD arrives (its CQ notification rings) or a retry timer is due.
        mads.arm();
        if mads.poll(device.port.now()) > 0 {
            continue;
        }
        let timer = mads
            .poll_timeout()
            .map(|t| Duration::from_nanos(t.0.saturating_sub(device.port.now().0)));
        let wait = timer.unwrap_or(timeout).min(end - now);
        bell.wait(wait);
    }
}
