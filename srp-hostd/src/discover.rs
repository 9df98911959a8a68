//! One Device Management sweep of a portal, as `ibsrpdm` does: IOUnitInfo, each IOC's
//! IOControllerProfile and its service entries, through a soft HCA port of our own on a
//! local address (the access layer's [`DmClient`] on a GSI agent and port). The port is
//! closed when the sweep returns, so the address is free for a login afterwards.

use access_layer::dm::{DmClient, DmClientConfig, DmEvent, IocRecord};
use access_layer::gsi::{GsiAgent, GsiConfig, GsiEvent, GsiPort, GsiPortConfig};
use access_layer::mad::{MadAddress, MgmtClass, ServiceId};
use hca::driver::{Hca, HcaConfig};
use hca::{Gid, Guid};
use std::net::{IpAddr, SocketAddr, UdpSocket};
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
    #[error("cannot open a soft RoCE port on {local} (UDP {ROCE_PORT} in use?): {reason}")]
    Port {
        /// The local address.
        local: IpAddr,
        /// Why.
        reason: String,
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

/// Sweeps `portal` once from `local` with node GUID `guid` on partition `pkey`, within
/// `timeout`: its IOCs (a target answers on a partition with the IOCs exported there).
pub fn sweep(
    portal: IpAddr,
    local: IpAddr,
    guid: Guid,
    pkey: hca::PKey,
    timeout: Duration,
) -> Result<Vec<IocRecord>, DiscoverError> {
    let port_err = |reason: String| DiscoverError::Port { local, reason };
    let hca = Hca::open(HcaConfig::new(guid, vec![local])).map_err(|e| port_err(e.to_string()))?;
    hca.with(|e, _| e.set_pkey_table(1, vec![pkey]))
        .map_err(|e| port_err(format!("P_Key table: {e}")))?;
    let mut port = hca
        .with(|e, now| GsiPort::open(e, now, 1, GsiPortConfig::default()))
        .map_err(|e| port_err(format!("GSI QP: {e}")))?;
    let mut agent = GsiAgent::new(GsiConfig::default());
    agent.register_client(MgmtClass::DeviceMgmt);
    let mut dm = DmClient::new(DmClientConfig::default());
    let addr = MadAddress::gsi(1, Gid::from_ip(portal));
    hca.with(|_, now| dm.add_portal(now, addr))
        .map_err(|e| port_err(format!("DM client: {e}")))?;
    let end = Instant::now() + timeout;
    loop {
        let mut gone = false;
        hca.with(|e, now| {
            while let Ok(Some((from, mad))) = port.recv(e, now) {
                agent.handle_mad(now, from, mad);
            }
            if agent.poll_timeout().is_some_and(|t| t <= now) {
                agent.handle_timeout(now);
            }
            if dm.poll_timeout().is_some_and(|t| t <= now) {
                dm.handle_timeout(now, &mut agent);
            }
            while let Some(ev) = agent.poll_event() {
                if !matches!(ev, GsiEvent::Request { .. }) {
                    dm.handle_event(now, &mut agent, &ev);
                }
            }
            while let Some(out) = agent.poll_transmit() {
                // A MAD that cannot be sent now is retried by the agent's timers.
                let _ = port.send(e, now, &out);
            }
        });
        while let Some(ev) = dm.poll_event() {
            if matches!(ev, DmEvent::IouRemoved { .. }) {
                gone = true;
            }
        }
        if let Some(r) = dm.records().find(|r| r.addr == addr) {
            return Ok(r.iocs.clone());
        }
        if gone {
            return Err(DiscoverError::NoAnswer(portal));
        }
        if Instant::now() >= end {
            return Err(DiscoverError::Timeout { portal, timeout });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
