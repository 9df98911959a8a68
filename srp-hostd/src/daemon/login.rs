//! Sweeping the portals and logging in: one channel per free local address to each SRP
//! service without a session.

use super::{Discovery, Shared, lock};
use crate::config::DriverModel;
use crate::control::{HostControlError, LoginSpec, SessionInfo};
use crate::discover::{SrpService, route_source, srp_services, sweep};
use crate::session::{Session, driver_model};
use access_layer::verbs::{DeviceSpec, ProviderKind};
use ib_verbs::Guid;
use srp_initiator_storport::srp::LoginVia;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one Device Management sweep may take.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(3);

impl Shared {
    /// The local addresses sessions use.
    fn locals_in_use(&self) -> Vec<IpAddr> {
        lock(&self.state)
            .sessions
            .values()
            .map(|s| s.local())
            .collect()
    }

    /// The local addresses `portal` may be reached from that no session uses.
    fn free_locals(&self, portal: IpAddr) -> Vec<IpAddr> {
        let config = self.config();
        let configured = config
            .portals
            .iter()
            .find(|p| p.address == portal)
            .map(|p| p.local.clone())
            .unwrap_or_default();
        let candidates = if configured.is_empty() {
            route_source(portal).into_iter().collect()
        } else {
            configured
        };
        let used = self.locals_in_use();
        candidates
            .into_iter()
            .filter(|l| !used.contains(l))
            .collect()
    }

    fn has_session(&self, service: &SrpService) -> bool {
        lock(&self.state)
            .sessions
            .values()
            .any(|s| s.serves(service))
    }

    /// One sweep: every configured portal, then every persistent login (established
    /// again at start, and at every sweep while it has no session: as the operator's
    /// login was, with its own IOC, local address and driver model), logging in where
    /// needed.
    pub(super) fn sweep_all(&self) {
        self.sweep_where(|_| true);
    }

    /// A sweep of one portal (configured, or of a persistent login): what an IOC arriving
    /// there drives (`daemon/bus.rs`).
    pub(super) fn sweep_portal(&self, portal: IpAddr) {
        self.sweep_where(|p| p == portal);
    }

    /// A sweep of the portals `wanted` picks.
    fn sweep_where(&self, wanted: impl Fn(IpAddr) -> bool) {
        let config = self.config();
        let configured = config
            .portals
            .iter()
            .filter(|p| wanted(p.address))
            .map(|p| (LoginSpec::to(p.address), p.iocs.clone()));
        let persistent: Vec<(LoginSpec, Vec<Guid>)> = lock(&self.persistent)
            .list()
            .iter()
            .filter(|spec| wanted(spec.portal))
            .map(|spec| (spec.clone(), self.portal_iocs(spec)))
            .collect();
        let configured = configured.map(|(s, i)| (s, i, true));
        let persistent = persistent.into_iter().map(|(s, i)| (s, i, false));
        for (spec, iocs, by_rules) in configured.chain(persistent) {
            if self.stopping() {
                return;
            }
            let outcome = self.login_as(&spec, &iocs, by_rules);
            for s in outcome.iter().flatten() {
                tracing::info!(
                    session = s.id,
                    ioc = s.ioc_guid,
                    login = s.login,
                    driver = s.driver,
                    persistent = spec.persistent,
                    disks = ?s.disks,
                    "logged in"
                );
            }
            self.note_sweep(spec.portal, outcome.as_ref().err());
        }
    }

    /// The IOCs a login to `spec.portal` is limited to: the configured portal's list,
    /// unless the spec names its IOC.
    pub(super) fn portal_iocs(&self, spec: &LoginSpec) -> Vec<Guid> {
        self.config()
            .portals
            .iter()
            .find(|p| p.address == spec.portal && spec.ioc_guid.is_none())
            .map(|p| p.iocs.clone())
            .unwrap_or_default()
    }

    /// Logs a portal's sweep failure at warning level once per change (every sweep retries,
    /// so a target that keeps refusing is named once, not every few seconds), and its end.
    fn note_sweep(&self, portal: IpAddr, error: Option<&HostControlError>) {
        // Nothing to log in to, or every local address already carries a session: normal.
        let text = match error {
            None
            | Some(HostControlError::NothingToLogIn(_))
            | Some(HostControlError::NoLocalAddress(_)) => None,
            Some(e) => Some(e.to_string()),
        };
        let mut st = lock(&self.state);
        match text {
            Some(t) => {
                if st.sweep_errors.get(&portal) != Some(&t) {
                    tracing::warn!(%portal, "sweep: {t} (retried every {:?})", self.config().sweep_interval);
                    st.sweep_errors.insert(portal, t);
                }
            }
            None => {
                if st.sweep_errors.remove(&portal).is_some() {
                    tracing::info!(%portal, "sweep: the earlier failure is resolved");
                }
            }
        }
    }

    /// The login forms to try for `service`: what logged in last time first, then the
    /// portal's choice.
    fn login_forms(&self, service: &SrpService) -> Vec<LoginVia> {
        let (choice, port) = self
            .config()
            .portals
            .iter()
            .find(|p| p.address == service.portal)
            .map_or((self.config().login, self.config().rdma_cm_port), |p| {
                (p.login, p.rdma_cm_port)
            });
        let mut forms = choice.candidates(port);
        let rdma_core = self
            .config()
            .portals
            .iter()
            .find(|p| p.address == service.portal)
            .is_some_and(|p| p.provider == ProviderKind::RdmaCore);
        if rdma_core {
            // Under rdma-core only the RDMA-CM form reaches the kernel's CM (user space has
            // no IB CM since Linux removed ib_ucm).
            forms.retain(|f| matches!(f, LoginVia::RdmaCm { .. }));
            if forms.is_empty() {
                forms.push(LoginVia::RdmaCm { port });
            }
        }
        let learned = lock(&self.state)
            .learned_login
            .get(&(service.portal, service.ioc_guid.0))
            .copied();
        if let Some(l) = learned.filter(|l| forms.contains(l)) {
            forms.retain(|f| *f != l);
            forms.insert(0, l);
        }
        forms
    }

    /// Sweeps `spec.portal` and logs in to each SRP service without a session (only
    /// `iocs`, if any; only `spec.ioc_guid`, if set): an operator's login, which the
    /// discovery rules do not filter (their login options apply).
    pub(super) fn login(
        &self,
        spec: &LoginSpec,
        iocs: &[Guid],
    ) -> Result<Vec<SessionInfo>, HostControlError> {
        self.login_as(spec, iocs, false)
    }

    /// [`Shared::login`]; with `by_rules` (a configured portal's sweep) only the services
    /// the discovery rules allow.
    pub(super) fn login_as(
        &self,
        spec: &LoginSpec,
        iocs: &[Guid],
        by_rules: bool,
    ) -> Result<Vec<SessionInfo>, HostControlError> {
        let _serial = lock(&self.logins);
        if self.stopping() {
            return Err(HostControlError::Stopping);
        }
        let model = match spec.driver.as_deref() {
            None => None,
            Some(t) => Some(DriverModel::parse(t).ok_or_else(|| {
                HostControlError::BadRequest(format!(
                    "driver {t:?}: \"storport\" or \"iscsi-model\""
                ))
            })?),
        };
        let only = match &spec.ioc_guid {
            Some(g) => Some(Guid(
                crate::config::parse_id64(g).map_err(HostControlError::BadRequest)?,
            )),
            None => None,
        };
        let mut free = match spec.local {
            Some(l) if self.locals_in_use().contains(&l) => {
                return Err(HostControlError::NoLocalAddress(spec.portal));
            }
            Some(l) => vec![l],
            None => self.free_locals(spec.portal),
        };
        let Some(&sweep_from) = free.first() else {
            return Err(HostControlError::NoLocalAddress(spec.portal));
        };
        // On the portal's partition, if it is a configured one: the IOCs exported there.
        let portal = self
            .config()
            .portals
            .iter()
            .find(|p| p.address == spec.portal)
            .cloned();
        let pkey = portal
            .as_ref()
            .map_or(ib_verbs::PKey::DEFAULT, |p| p.partition);
        // Targets named by hand (as Linux add_target) are logged in to without a sweep;
        // under rdma-core they are the only way (the kernel owns QP1).
        let swept = match portal.as_ref().filter(|p| !p.targets.is_empty()) {
            Some(p) => Ok(configured_iocs(p)),
            None => {
                let device = DeviceSpec {
                    provider: portal
                        .as_ref()
                        .map_or(self.config().provider, |p| p.provider),
                    address: std::net::SocketAddr::new(sweep_from, 4791),
                    node_guid: self.config().node_guid,
                    device: portal.as_ref().and_then(|p| p.device.clone()),
                    port: portal.as_ref().and_then(|p| p.device_port),
                    gid_index: portal.as_ref().and_then(|p| p.gid_index),
                    first_qpn: 0,
                    gso: true,
                };
                sweep(&self.fabric, &device, spec.portal, pkey, SWEEP_TIMEOUT)
            }
        };
        lock(&self.state).discovered.insert(
            spec.portal,
            Discovery {
                at: Instant::now(),
                found: swept
                    .as_ref()
                    .map(|f| srp_services(spec.portal, f))
                    .map_err(ToString::to_string),
            },
        );
        let found = swept.map_err(|e| HostControlError::Failed(e.to_string()))?;
        let wanted: Vec<(SrpService, crate::rules::Decision)> = srp_services(spec.portal, &found)
            .into_iter()
            .filter(|s| iocs.is_empty() || iocs.contains(&s.ioc_guid))
            .filter(|s| only.is_none_or(|g| g == s.ioc_guid))
            .filter(|s| !self.has_session(s))
            .map(|s| {
                let d = self.decide(&s, pkey);
                (s, d)
            })
            .filter(|(_, d)| !by_rules || d.action == crate::rules::Action::Allow)
            .collect();
        if wanted.is_empty() {
            return Err(HostControlError::NothingToLogIn(format!(
                "{} offers no SRP service{} without a session",
                spec.portal,
                only.map(|g| format!(" of IOC {:#018x}", g.0))
                    .unwrap_or_default()
            )));
        }
        let mut created = Vec::new();
        let mut errors = Vec::new();
        for (service, decision) in wanted {
            if free.is_empty() {
                errors.push(format!(
                    "IOC {:#018x}: no free local address left (one channel per address)",
                    service.ioc_guid.0
                ));
                continue;
            }
            let local = free.remove(0);
            let id = {
                let mut st = lock(&self.state);
                st.next_id += 1;
                st.next_id - 1
            };
            let forms = self.login_forms(&service);
            let model = model.unwrap_or_else(|| driver_model(&self.config(), &service));
            // The rule's login options over the host's.
            let o = decision.options;
            let config = crate::config::HostConfig {
                queue_depth: o.queue_depth.unwrap_or(self.config().queue_depth),
                max_transfer: o.max_transfer.unwrap_or(self.config().max_transfer),
                registration: o.registration.unwrap_or(self.config().registration),
                ..(*self.config()).clone()
            };
            let host = crate::session::HostParts {
                memory: &self.memory,
                fabric: &self.fabric,
            };
            match Session::open(id, service, local, &config, &forms, model, host) {
                Ok(s) => {
                    let s = Arc::new(s);
                    {
                        let mut st = lock(&self.state);
                        st.learned_login
                            .insert((s.service().portal, s.service().ioc_guid.0), s.login_via());
                        st.sessions.insert(id, s.clone());
                    }
                    if s.watched() {
                        self.bus.add(id, s.local(), s.service().ioc_guid);
                    }
                    self.expose(&s);
                    created.push(s.info());
                }
                Err(e) => {
                    // The address is still free for the next service.
                    free.insert(0, local);
                    errors.push(e);
                }
            }
        }
        if created.is_empty() {
            return Err(HostControlError::Failed(errors.join("; ")));
        }
        for e in errors {
            tracing::warn!(%e, "login");
        }
        Ok(created)
    }
}

/// The IOCs a portal's configured targets stand for, as a sweep would have found them: one
/// SRP service each (service ID = IOC GUID, as ib_srpt listens; the RDMA-CM form names only
/// the target port ID).
fn configured_iocs(portal: &crate::config::PortalConfig) -> Vec<access_layer::dm::IocRecord> {
    use access_layer::mad::dm::{IocProfile, ServiceEntry};
    portal
        .targets
        .iter()
        .filter_map(|t| {
            let profile = IocProfile::srp(t.ioc_guid, 0, 0, 0, 0, "configured target").ok()?;
            Some(access_layer::dm::IocRecord {
                slot: 0,
                profile,
                entries: vec![ServiceEntry::srp(
                    t.id_ext,
                    access_layer::mad::ServiceId(t.ioc_guid.0),
                )],
            })
        })
        .collect()
}
