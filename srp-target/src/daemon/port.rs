//! One HCA port of the daemon: a soft device bound to the port's address, opened as a
//! channel adapter of the access layer ([`SoftCa`]: every verb of the port's channels goes
//! through its [`access_layer::verbs::ChannelInterface`]), the GSI QP that carries CM MADs
//! (the access layer's MAD service on the device), and the CM endpoint listening on the
//! port's service IDs.

use super::DaemonError;
use crate::appliance::ChannelLimits;
use crate::config::{PortConfig, TargetConfig};
use access_layer::cm::{CmConfig, CmEndpoint, CmEvent};
use access_layer::dm::DmAgent;
use access_layer::gsi::port::{GsiPort, GsiPortConfig};
use access_layer::gsi::{GsiAgent, GsiConfig};
use access_layer::mad::MgmtClass;
use access_layer::mad::ServiceId;
use access_layer::mad::cm::RdmaPortSpace;
use access_layer::verbs::{Doorbell, SoftCa, SyncCa};
use hca::driver::{Hca, HcaConfig};
use hca::mr::PdId;
use hca::wire::PathMtu;
use hca::{Gid, Guid};
use std::sync::Arc;
use std::time::Duration;

/// How long a closed CM connection answers stale MADs (IBA 12.9.8.5 time-wait).
const TIME_WAIT: Duration = Duration::from_millis(100);

/// A port, up and listening.
pub struct Port {
    /// The `[[port]]` name.
    pub name: String,
    /// Its channel adapter (one device per address; shared with the port's channels).
    pub ca: Arc<SoftCa>,
    /// Its link's active MTU, if known: a REQ's offer above it is lowered to it.
    pub link_mtu: Option<PathMtu>,
    /// The protection domain of its channels.
    pub pd: PdId,
    /// The GID of its address.
    pub gid: Gid,
    /// Its address (IP and UDP port).
    pub address: std::net::SocketAddr,
    gsi: GsiPort,
    /// Its CM.
    pub cm: CmEndpoint,
    /// Its Device Management agents (IOUnitInfo, IOControllerProfile, ServiceEntries), one
    /// per partition of its P_Key table, in table order.
    pub dm: Vec<DmAgent>,
    /// Answers Gets and Sets of every other class (SA, PerfMgt, vendor classes) with
    /// "class or version not supported", as IBTA Vol1 13.4.7 asks of a node that does not
    /// serve them; it serves no class itself.
    others: GsiAgent,
    /// What each IOC reachable here advertises when enabled.
    adverts: Vec<super::dm::Advert>,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port").field("name", &self.name).finish()
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
    /// Opens port `index` of `config` as its own device. Each device needs a GUID: port
    /// *i* gets the node GUID + *i*. Every event of the device (CQ notifications above all)
    /// rings `bell`, the serving loop's doorbell.
    pub fn open(
        config: &TargetConfig,
        index: usize,
        rdma_cm_port: u16,
        limits: &ChannelLimits,
        bell: &Arc<Doorbell>,
        sim: Option<&Arc<hca::sim::SimNet>>,
    ) -> Result<Port, DaemonError> {
        let p = &config.ports[index];
        let (dm, adverts) = super::dm::agents(config, p, limits)?;
        let guid = Guid(config.target.node_guid.0.wrapping_add(index as u64));
        let mut hc = HcaConfig::new(guid, vec![p.address.ip()]);
        hc.udp_port = p.address.port();
        hc.sim = sim.cloned();
        let hca = Hca::open(hc).map_err(|source| DaemonError::Hca {
            name: p.name.clone(),
            address: p.address,
            source,
        })?;
        let verbs_err = |e: &dyn std::fmt::Display| DaemonError::Gsi {
            name: p.name.clone(),
            reason: e.to_string(),
        };
        let ca = Arc::new(SoftCa::new(hca).map_err(|e| verbs_err(&e))?);
        let sync = SyncCa::new(ca.clone());
        let b = bell.clone();
        let attr = sync
            .open_ca(Arc::new(move |_| b.ring()))
            .map_err(|e| verbs_err(&e))?;
        let link_mtu = attr.ports.first().and_then(|p| p.link_mtu);
        let pd = sync.alloc_pd().map_err(|e| verbs_err(&e))?;
        // The port's partitions: the HCA's P_Key table (what its QPs and QP1 accept) and
        // the CM's (what REQs may name).
        ca.hca()
            .with(|e, _| e.set_pkey_table(1, p.partitions.clone()))
            .map_err(|e| verbs_err(&e))?;
        let gsi = ca
            .hca()
            .with(|e, now| GsiPort::open(e, now, 1, GsiPortConfig::default()))
            .map_err(|e| verbs_err(&e))?;
        let gid = Gid::from_ip(p.address.ip());
        let mut cm = CmEndpoint::new(CmConfig {
            local_ca_guid: guid,
            local_gid: gid,
            port: 1,
            time_wait: TIME_WAIT,
            agent_id: (guid.0 as u32) ^ (index as u32),
            // A simulated run draws it from the net's seed, so the run replays.
            first_comm_id: sim.map_or_else(access_layer::cm::random_comm_id, |n| n.random() as u32),
        });
        cm.set_pkey_table(p.partitions.clone());
        for s in services(config, p, rdma_cm_port) {
            cm.listen(s).map_err(|e| DaemonError::Listen {
                name: p.name.clone(),
                service: format!("{s:?}"),
                reason: e.to_string(),
            })?;
        }
        Ok(Port {
            name: p.name.clone(),
            ca,
            link_mtu,
            pd,
            gid,
            address: p.address,
            others: GsiAgent::new(GsiConfig::default()),
            adverts,
            gsi,
            cm,
            dm,
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
            self.cm.listen(*s).map_err(|e| DaemonError::Listen {
                name: self.name.clone(),
                service: format!("{s:?}"),
                reason: e.to_string(),
            })?;
        }
        let (dm, adverts) = super::dm::agents(new, pn, limits)?;
        self.dm = dm;
        self.adverts = adverts;
        let names: Vec<String> = self.adverts.iter().map(|a| a.ioc.clone()).collect();
        for name in names {
            self.advertise(&name, enabled(&name));
        }
        Ok(())
    }

    /// Shows (`on`) or hides IOC `ioc` in Device Management, if it is reachable here.
    pub fn advertise(&mut self, ioc: &str, on: bool) {
        for a in self.adverts.iter().filter(|a| a.ioc == ioc) {
            if let Some(dm) = self.dm.get_mut(a.agent) {
                a.apply(dm, on);
            }
        }
    }

    /// Arms the GSI's CQ (see [`access_layer::verbs::Doorbell`] for the order).
    pub fn arm(&self) {
        let gsi = &self.gsi;
        let _ = self.ca.hca().with(|e, _| gsi.arm(e));
    }

    /// How long until the CM's next timer, if it has one.
    pub fn next_timer(&self) -> Option<std::time::Duration> {
        let t = self.cm.poll_timeout()?;
        let now = self.now();
        Some(std::time::Duration::from_nanos(t.0.saturating_sub(now.0)))
    }

    /// Moves MADs both ways, fires CM timers and returns the CM's events.
    pub fn pump(&mut self) -> Vec<CmEvent> {
        let Port {
            ca,
            gsi,
            cm,
            dm,
            others,
            ..
        } = self;
        let mut events = Vec::new();
        ca.hca().with(|e, now| {
            while let Ok(Some((from, mad))) = gsi.recv(e, now) {
                // DM requests to the agent; everything else (CM, strays) to the CM, which
                // ignores what is not its own.
                match mad.header().map(|h| h.mgmt_class) {
                    // The agent of the partition it came on (the HCA matched it).
                    Ok(MgmtClass::DeviceMgmt) => {
                        if let Some(dm) = dm.get_mut(usize::from(from.pkey_index)) {
                            dm.handle_request(from, &mad);
                        }
                    }
                    Ok(MgmtClass::Cm) => cm.handle_mad(now, from, &mad.0),
                    // Requests get "not supported"; stray responses are dropped (counted).
                    Ok(_) => others.handle_mad(now, from, mad),
                    Err(_) => {}
                }
            }
            while let Some(out) = others.poll_transmit() {
                let _ = gsi.send(e, now, &out);
            }
            for out in dm
                .iter_mut()
                .flat_map(|d| std::iter::from_fn(move || d.poll_transmit()))
            {
                // A lost answer is the client's to retry (DM requests are retried).
                let _ = gsi.send(e, now, &out);
            }
            if cm.poll_timeout().is_some_and(|t| t <= now) {
                cm.handle_timeout(now);
            }
            Self::transmit(cm, gsi, e, now);
            while let Some(ev) = cm.poll_event() {
                events.push(ev);
            }
        });
        events
    }

    /// Sends what the CM has queued (after an accept, reject or disconnect).
    pub fn flush(&mut self) {
        let Port { ca, gsi, cm, .. } = self;
        ca.hca().with(|e, now| Self::transmit(cm, gsi, e, now));
    }

    fn transmit(
        cm: &mut CmEndpoint,
        gsi: &mut GsiPort,
        e: &mut hca::engine::Engine,
        now: hca::time::Time,
    ) {
        while let Some(out) = cm.poll_transmit() {
            // A MAD that cannot be sent now is retried by the CM's own timers.
            let _ = gsi.send(e, now, &out);
        }
    }

    /// The device's current time (for CM calls; no lock taken).
    pub fn now(&self) -> hca::time::Time {
        self.ca.hca().now()
    }
}
