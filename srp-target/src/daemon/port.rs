//! One HCA port of the daemon: a device opened from the daemon's fabric as the port's
//! configuration says (the software HCA on the port's address, or an RDMA device through
//! rdma-core), its CA (every verb of the port's channels goes through its
//! [`access_layer::verbs::ChannelInterface`]), and its connection manager listening on the
//! port's service IDs — with Device Management agents where the provider gives the access
//! layer QP1 (`access_layer::mads`).

use super::DaemonError;
use crate::appliance::ChannelLimits;
use crate::config::{PortConfig, TargetConfig};
use access_layer::cm::{CmSetup, ConnEvent, ConnectionManager, DeviceManagement};
use access_layer::mad::ServiceId;
use access_layer::mad::cm::RdmaPortSpace;
use access_layer::verbs::port::PortIdentity;
use access_layer::verbs::{ChannelInterface, Device, Doorbell, Fabric, PortInterface, SyncCa};
use ib_verbs::mr::PdId;
use ib_verbs::{Gid, Guid, PathMtu};
use std::sync::Arc;
use std::time::Duration;

/// How long a closed CM connection answers stale MADs (IBA 12.9.8.5 time-wait).
const TIME_WAIT: Duration = Duration::from_millis(100);

/// A port, up and listening.
pub struct Port {
    /// The `[[port]]` name.
    pub name: String,
    /// Its channel adapter (shared with the port's channels).
    pub ca: Arc<dyn ChannelInterface>,
    /// The port beside it: state, counters, clock.
    pub port: Arc<dyn PortInterface>,
    /// Which provider and device the port is on.
    pub identity: PortIdentity,
    /// Its link's active MTU, if known: a REQ's offer above it is lowered to it.
    pub link_mtu: Option<PathMtu>,
    /// The protection domain of its channels.
    pub pd: PdId,
    /// The GID of its address.
    pub gid: Gid,
    /// Its address (IP and UDP port).
    pub address: std::net::SocketAddr,
    /// Its connection manager (ours over QP1, or the provider's), with the Device
    /// Management agents where QP1 is ours: one per partition of its P_Key table, in
    /// table order.
    pub cm: Box<dyn ConnectionManager>,
    /// What each IOC reachable here advertises when enabled.
    adverts: Vec<super::dm::Advert>,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .finish()
    }
}

/// The service IDs port `p` listens on: each IOC reachable on it (IB CM form) and the
/// RDMA-CM TCP port, of the login forms `[target] login_forms` serves. Disabled IOCs are
/// listened on too, so that their logins get the SRP reject that says so rather than a CM
/// "invalid service ID".
pub fn services(config: &TargetConfig, p: &PortConfig, rdma_cm_port: u16) -> Vec<ServiceId> {
    let forms = config.target.login_forms;
    let mut ids: Vec<ServiceId> = config
        .iocs
        .iter()
        .filter(|i| forms.ib_cm && i.ports.contains(&p.name))
        .map(|i| i.service_id)
        .collect();
    if forms.rdma_cm {
        ids.push(ServiceId::rdma_ip(RdmaPortSpace::Tcp, rdma_cm_port));
    }
    ids.sort();
    ids.dedup();
    ids
}

impl Port {
    /// Opens port `index` of `config` on `fabric` as the port's `provider` says. A software
    /// device needs a GUID: port *i* gets the node GUID + *i*. Every event of the device
    /// (CQ notifications above all, and the provider's CM) rings `bell`, the serving loop's
    /// doorbell.
    pub fn open(
        config: &TargetConfig,
        index: usize,
        rdma_cm_port: u16,
        limits: &ChannelLimits,
        bell: &Arc<Doorbell>,
        fabric: &Arc<dyn Fabric>,
    ) -> Result<Port, DaemonError> {
        let p = &config.ports[index];
        let (agents, adverts) = super::dm::agents(config, p, limits)?;
        let guid = Guid(config.target.node_guid.0.wrapping_add(index as u64));
        let spec = p.device_spec(guid);
        let Device { ca, port } = fabric.open(&spec).map_err(|source| DaemonError::Open {
            name: p.name.clone(),
            address: p.address,
            source,
        })?;
        let verbs_err = |e: &dyn std::fmt::Display| DaemonError::Gsi {
            name: p.name.clone(),
            reason: e.to_string(),
        };
        let sync = SyncCa::new(ca.clone());
        let b = bell.clone();
        let attr = sync
            .open_ca(Arc::new(move |_| b.ring()))
            .map_err(|e| verbs_err(&e))?;
        let link_mtu = attr.ports.first().and_then(|p| p.link_mtu);
        let pd = sync.alloc_pd().map_err(|e| verbs_err(&e))?;
        // The port's partitions: what its QPs (and QP1) accept and what REQs may name.
        port.set_pkey_table(p.partitions.clone())
            .map_err(|e| verbs_err(&e))?;
        let setup = CmSetup {
            time_wait: TIME_WAIT,
            agent_id: (guid.0 as u32) ^ (index as u32),
            // A simulated run draws it from the net's seed, so the run replays.
            first_comm_id: (fabric.random() as u32).max(1),
        };
        let device = Device {
            ca: ca.clone(),
            port: port.clone(),
        };
        let dm = DeviceManagement {
            agents,
            client: None,
        };
        let mut cm = access_layer::mads::open_connection_manager(&device, &setup, dm)
            .map_err(|e| verbs_err(&e))?;
        let identity = port.identity();
        if cm.device_management().is_none() {
            tracing::warn!(
                port = %p.name,
                device = %identity,
                "no Device Management on this port (the provider owns QP1): hosts log in \
                 with the IOC's id_ext, ioc_guid and this port's address configured"
            );
        }
        for s in services(config, p, rdma_cm_port) {
            if let Err(e) = cm.listen(s) {
                // rdma-core cannot take the IB CM form: the RDMA-CM form still serves.
                if matches!(e, access_layer::cm::CmError::Unsupported(_)) {
                    tracing::warn!(port = %p.name, service = ?s, %e, "login form not served here");
                    continue;
                }
                return Err(DaemonError::Listen {
                    name: p.name.clone(),
                    service: format!("{s:?}"),
                    reason: e.to_string(),
                });
            }
        }
        Ok(Port {
            name: p.name.clone(),
            gid: attr
                .ports
                .first()
                .map_or_else(|| Gid::from_ip(p.address.ip()), |a| a.gid),
            ca,
            port,
            identity,
            link_mtu,
            pd,
            address: p.address,
            cm,
            adverts,
        })
    }

    /// A reload added or removed IOCs: listens on the service IDs `new` adds here and
    /// stops listening on those it drops (live connections are not touched), and lays out
    /// the Device Management agents again (the IOCs that stay keep their slots: they keep
    /// their order); `enabled` says which IOCs are shown.
    pub fn reconfigure(
        &mut self,
        old: &TargetConfig,
        new: &TargetConfig,
        rdma_cm_port: u16,
        limits: &ChannelLimits,
        enabled: impl Fn(&str) -> bool,
    ) -> Result<(), DaemonError> {
        let (Some(po), Some(pn)) = (old.port(&self.name), new.port(&self.name)) else {
            return Ok(());
        };
        let before = services(old, po, rdma_cm_port);
        let after = services(new, pn, rdma_cm_port);
        for s in before.iter().filter(|s| !after.contains(s)) {
            self.cm.unlisten(*s);
        }
        for s in after.iter().filter(|s| !before.contains(s)) {
            match self.cm.listen(*s) {
                Ok(()) => {}
                Err(access_layer::cm::CmError::Unsupported(_)) => {}
                Err(e) => {
                    return Err(DaemonError::Listen {
                        name: self.name.clone(),
                        service: format!("{s:?}"),
                        reason: e.to_string(),
                    });
                }
            }
        }
        let (agents, adverts) = super::dm::agents(new, pn, limits)?;
        if let Some(dm) = self.cm.device_management() {
            dm.agents = agents;
        }
        self.adverts = adverts;
        let names: Vec<String> = self.adverts.iter().map(|a| a.ioc.clone()).collect();
        for name in names {
            self.advertise(&name, enabled(&name));
        }
        Ok(())
    }

    /// Shows (`on`) or hides IOC `ioc` in Device Management, if it is reachable here.
    pub fn advertise(&mut self, ioc: &str, on: bool) {
        let Some(dm) = self.cm.device_management() else {
            return;
        };
        for a in self.adverts.iter().filter(|a| a.ioc == ioc) {
            if let Some(agent) = dm.agents.get_mut(a.agent) {
                a.apply(agent, on);
            }
        }
    }

    /// Arms the connection manager's notification (see [`access_layer::verbs::Doorbell`]
    /// for the order).
    pub fn arm(&mut self) {
        self.cm.arm();
    }

    /// How long until the connection manager's next timer, if it has one.
    pub fn next_timer(&self) -> Option<std::time::Duration> {
        let t = self.cm.poll_timeout()?;
        let now = self.now();
        Some(std::time::Duration::from_nanos(t.0.saturating_sub(now.0)))
    }

    /// Moves what arrived, fires due timers and returns the connection events.
    pub fn pump(&mut self) -> Vec<ConnEvent> {
        let now = self.now();
        self.cm.poll(now);
        std::iter::from_fn(|| self.cm.poll_event()).collect()
    }

    /// The device's current time (for CM calls).
    pub fn now(&self) -> ib_verbs::Time {
        self.port.now()
    }
}
