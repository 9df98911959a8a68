//! What the control interface reports (sessions, disks and their paths, targets, portals)
//! and
//! [`HostControl`] for the daemon's shared state.

use super::{Exposure, Shared, lock};
use crate::control::{
    DiskInfo, HostAnswer, HostControl, HostControlError, HostRequest, PathInfo, PortalInfo,
    SessionInfo, TargetInfo,
};
use crate::session::Session;
use mpio::{MultipathDisk, PathState, Policy};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

impl Shared {
    pub(super) fn sessions(&self) -> Vec<SessionInfo> {
        let sessions: Vec<Arc<Session>> = lock(&self.state).sessions.values().cloned().collect();
        sessions.iter().map(|s| s.info()).collect()
    }

    pub(super) fn disks(&self) -> Vec<DiskInfo> {
        let (disks, sessions): (Vec<Arc<MultipathDisk>>, Vec<Arc<Session>>) = {
            let st = lock(&self.state);
            (
                st.disks.values().cloned().collect(),
                st.sessions.values().cloned().collect(),
            )
        };
        // Each session's HCA counters, read once for all its paths.
        let hca: std::collections::BTreeMap<u32, ib_verbs::PortCounters> = sessions
            .iter()
            .map(|s| (s.id(), s.port().status().hca))
            .collect();
        disks
            .iter()
            .map(|mp| {
                let snap = mp.snapshot();
                let i = &snap.identity;
                DiskInfo {
                    name: i.identity.clone(),
                    path: match &self.exposure {
                        Exposure::Files(f) => f.path(&i.identity).display().to_string(),
                        Exposure::InProcess => String::new(),
                    },
                    identity: i.identity.clone(),
                    vendor: i.vendor.clone(),
                    product: i.product.clone(),
                    revision: i.revision.clone(),
                    block_size: i.block_size,
                    blocks: i.blocks,
                    policy: snap.policy.name().to_owned(),
                    queued: snap.queued,
                    reads: snap.reads,
                    writes: snap.writes,
                    flushes: snap.flushes,
                    errors: snap.errors,
                    failovers: snap.failovers,
                    latency: crate::control::model::DiskLatency {
                        read: snap.latency[0].clone(),
                        write: snap.latency[1].clone(),
                        flush: snap.latency[2].clone(),
                    },
                    paths: snap
                        .paths
                        .iter()
                        .map(|p| PathInfo {
                            session: p.key,
                            lun: p.lun,
                            ioc_guid: p.label.ioc_guid.clone(),
                            ioc_name: p.label.ioc_name.clone(),
                            portal: p.label.portal.parse().unwrap_or(IpAddr::from([0, 0, 0, 0])),
                            local: p.label.local.parse().unwrap_or(IpAddr::from([0, 0, 0, 0])),
                            state: match (p.state, p.active) {
                                (PathState::Active, false) => "standby".to_owned(),
                                (st, _) => st.as_str().to_owned(),
                            },
                            alua: p.alua.map(|a| a.as_str().to_owned()),
                            preferred: p.preferred,
                            weight: p.weight,
                            in_flight: p.in_flight,
                            reads: p.reads,
                            writes: p.writes,
                            bytes: p.bytes,
                            errors: p.errors,
                            failures: p.failures,
                            hca_dropped: hca.get(&p.key).map_or(0, |s| s.dropped()),
                            retransmits: hca.get(&p.key).map_or(0, |s| s.retransmitted()),
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The disk named (or identified) `name`.
    pub(super) fn disk_named(&self, name: &str) -> Option<Arc<MultipathDisk>> {
        lock(&self.state).disks.get(name).cloned()
    }

    /// The disks session `key` is a path of.
    fn disks_through(&self, key: u32) -> Vec<Arc<MultipathDisk>> {
        lock(&self.state)
            .disks
            .values()
            .filter(|d| d.has_path(key))
            .cloned()
            .collect()
    }
}

impl Shared {
    /// The SRP targets the last sweep of each portal found, with their sessions.
    fn targets(&self) -> Vec<TargetInfo> {
        let st = lock(&self.state);
        st.discovered
            .values()
            .filter_map(|d| d.found.as_ref().ok())
            .flatten()
            .map(|svc| TargetInfo {
                portal: svc.portal,
                ioc_guid: format!("{:#018x}", svc.ioc_guid.0),
                ioc_name: svc.ioc_name.clone(),
                id_ext: format!("{:#018x}", svc.id_ext),
                service_id: format!("{:#018x}", svc.service_id.0),
                sessions: st
                    .sessions
                    .values()
                    .filter(|s| s.serves(svc))
                    .map(|s| s.id())
                    .collect(),
            })
            .collect()
    }

    /// The configured portals, then any other a login or a persistent login named.
    fn portals(&self) -> Vec<PortalInfo> {
        let st = lock(&self.state);
        let mut addresses: Vec<(IpAddr, bool)> = self
            .config()
            .portals
            .iter()
            .map(|p| (p.address, true))
            .collect();
        let persistent: Vec<IpAddr> = lock(&self.persistent)
            .list()
            .iter()
            .map(|l| l.portal)
            .collect();
        let named = st.discovered.keys().copied().chain(persistent);
        for a in named {
            if !addresses.iter().any(|(b, _)| *b == a) {
                addresses.push((a, false));
            }
        }
        addresses
            .into_iter()
            .map(|(address, configured)| {
                let config = self.config();
                let p = config.portals.iter().find(|p| p.address == address);
                let d = st.discovered.get(&address);
                PortalInfo {
                    address,
                    configured,
                    local: p.map(|p| p.local.clone()).unwrap_or_default(),
                    driver: p.map_or(self.config().driver, |p| p.driver).as_str().into(),
                    login: p.map_or(self.config().login, |p| p.login).as_str().into(),
                    last_sweep: d.map(|d| {
                        d.found
                            .as_ref()
                            .map(|v| u32::try_from(v.len()).unwrap_or(u32::MAX))
                            .map_err(Clone::clone)
                    }),
                    swept_secs_ago: d.map(|d| d.at.elapsed().as_secs()),
                }
            })
            .collect()
    }
}

impl HostControl for Shared {
    fn call(&self, request: HostRequest) -> Result<HostAnswer, HostControlError> {
        match request {
            HostRequest::Sessions => Ok(HostAnswer::Sessions(self.sessions())),
            HostRequest::Disks => Ok(HostAnswer::Disks(self.disks())),
            HostRequest::Power { suspend } => self.power(suspend),
            HostRequest::Login(_) if lock(&self.state).suspended => {
                Err(HostControlError::Suspended)
            }
            HostRequest::Login(spec) => {
                let created = self.login(&spec, &self.portal_iocs(&spec))?;
                if spec.persistent {
                    lock(&self.persistent).add(&spec).map_err(|e| {
                        HostControlError::Failed(format!(
                            "logged in ({} sessions), but the persistent login could not be \
                             recorded in {}: {e}",
                            created.len(),
                            self.config().state_dir.display()
                        ))
                    })?;
                    tracing::info!(portal = %spec.portal, ioc = ?spec.ioc_guid, "persistent login recorded");
                }
                Ok(HostAnswer::LoggedIn(created))
            }
            HostRequest::Reload => self
                .reload_file()
                .map(|changes| HostAnswer::Reloaded { changes }),
            HostRequest::Targets => Ok(HostAnswer::Targets(self.targets())),
            HostRequest::Portals => Ok(HostAnswer::Portals(self.portals())),
            HostRequest::PersistentLogins => Ok(HostAnswer::Persistent(
                lock(&self.persistent).list().to_vec(),
            )),
            HostRequest::RemovePersistent { index } => {
                let removed = lock(&self.persistent).remove(index as usize);
                match removed {
                    None => Err(HostControlError::NoSuchPersistent(index)),
                    Some(Err(e)) => Err(HostControlError::Failed(format!(
                        "the persistent logins could not be written: {e}"
                    ))),
                    Some(Ok(spec)) => {
                        tracing::info!(portal = %spec.portal, ioc = ?spec.ioc_guid, "persistent login forgotten");
                        Ok(HostAnswer::Forgotten(spec))
                    }
                }
            }
            HostRequest::Logout { session } => {
                let _serial = lock(&self.logins);
                self.drop_session(session)
                    .map(|disks_removed| HostAnswer::LoggedOut { disks_removed })
                    .ok_or(HostControlError::NoSuchSession(session))
            }
            HostRequest::SetPolicy { disk, policy } => {
                let p = Policy::parse(&policy).ok_or(HostControlError::NoSuchPolicy(policy))?;
                let mp = self
                    .disk_named(&disk)
                    .ok_or(HostControlError::NoSuchDisk(disk.clone()))?;
                mp.set_policy(p);
                tracing::info!(disk, policy = p.name(), "policy set");
                let identity = mp.identity().identity.clone();
                if let Err(e) = lock(&self.saved).set_policy(&identity, p.name()) {
                    tracing::error!(disk, %e, "the policy is set but could not be saved");
                    return Err(HostControlError::Failed(format!(
                        "policy {} set on {disk}, but not saved for the next start: {e}",
                        p.name()
                    )));
                }
                Ok(HostAnswer::Done { disks: vec![disk] })
            }
            HostRequest::SetPath { session, enabled } => {
                if !lock(&self.state).sessions.contains_key(&session) {
                    return Err(HostControlError::NoSuchSession(session));
                }
                let now = Instant::now();
                let changed: Vec<_> = self
                    .disks_through(session)
                    .into_iter()
                    .filter(|d| d.set_admin(session, enabled, now))
                    .collect();
                // A restored path is verified at the next tick.
                self.wake.notify_all();
                let mut unsaved = Vec::new();
                for d in &changed {
                    let snap = d.snapshot();
                    let Some(p) = snap.paths.iter().find(|p| p.key == session) else {
                        continue;
                    };
                    let name = crate::saved::PathName {
                        disk: d.identity().identity.clone(),
                        ioc_guid: p.label.ioc_guid.clone(),
                        portal: p.label.portal.clone(),
                        local: p.label.local.clone(),
                    };
                    if let Err(e) = lock(&self.saved).set_down(name, !enabled) {
                        tracing::error!(session, %e, "the path state is set but could not be saved");
                        unsaved.push(e.to_string());
                    }
                }
                if let Some(e) = unsaved.first() {
                    return Err(HostControlError::Failed(format!(
                        "the path of session {session} is {}, but not saved for the next start: {e}",
                        if enabled { "back in service" } else { "down" }
                    )));
                }
                let disks = changed
                    .iter()
                    .map(|d| d.identity().identity.clone())
                    .collect();
                Ok(HostAnswer::Done { disks })
            }
        }
    }
}
