//! One login: an adapter under the configured driver model ([`HostAdapter`]: the StorPort
//! miniport or the iSCSI-model driver) running the SRP initiator from a local address to
//! one IOC's SRP service, and the disks found behind it.
//!
//! Contract: [`Session::open`] starts the adapter (HwFindAdapter opens the soft HCA port on
//! the local address; HwInitialize sends the login) and returns once the login succeeded,
//! or an error with the reason (rejected, no answer within the login timeout, address in
//! use) after dropping the adapter. Afterwards the miniport reconnects on its own by the
//! transport timers; [`Session::state`] reports where it stands. Dropping a session drops
//! its adapter (the soft HCA port closes; the target sees the channel go).

use crate::adapter::HostAdapter;
use crate::config::DriverModel;
use crate::config::HostConfig;
use crate::control::SessionInfo;
use crate::discover::SrpService;
use crate::disk::SrpDisk;
use access_layer::verbs::{Fabric, ProviderKind};
use ib_verbs::Guid;
use srp::initiator::PortState;
use srp::wire::{IoClass, PortId};
use srp_initiator_storport::port::{PAGE_SIZE, SystemMemory};
use srp_initiator_storport::srp::{LoginFailure, LoginVia, SrpAdapterConfig};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Pages of the host's system memory (every adapter's SRB buffers live in it, the HCA
/// moving data straight in and out): four LU queues at the maximum transfer, 16 to 128 MiB.
/// A request waits for pages while others hold them, so the size bounds throughput, never
/// correctness.
pub fn memory_pages(config: &HostConfig) -> usize {
    let per_cmd = (config.max_transfer as usize).div_ceil(PAGE_SIZE);
    (per_cmd * config.queue_depth as usize * 4).clamp(4096, 32768)
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Logged in; commands flow.
    Running,
    /// The channel is down; reconnecting, I/O held.
    Blocked,
    /// fast_io_fail expired; reconnecting, I/O fails.
    FailFast,
    /// dev_loss expired: the session must go.
    Lost,
    /// Not logged in yet.
    LoggingIn,
    /// Powered down on purpose (`srpctl host power suspend`): logged out, its I/O held
    /// until the resume; neither lost nor failed.
    Suspended,
}

impl SessionState {
    /// The name the control socket shows.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Blocked => "blocked",
            SessionState::FailFast => "fail-fast",
            SessionState::Lost => "lost",
            SessionState::LoggingIn => "logging-in",
            SessionState::Suspended => "suspended",
        }
    }
}

/// A disk of a session: its block file's name and the device.
#[derive(Debug, Clone)]
pub struct SessionDisk {
    /// The block file's name.
    pub name: String,
    /// The device.
    pub disk: Arc<SrpDisk>,
}

/// One login.
pub struct Session {
    id: u32,
    service: SrpService,
    local: IpAddr,
    via: LoginVia,
    port: Arc<HostAdapter>,
    disks: Mutex<Vec<SessionDisk>>,
    /// What a rescan has logged about this session's LUNs (skipped, refused): rescans run
    /// every sweep, so each is logged once.
    noted: Mutex<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("service", &self.service)
            .field("local", &self.local)
            .finish()
    }
}

/// How often a session's adapter sweeps its target's I/O unit (the IOC watch): a quarter
/// of `sweep_interval`, at least 250 ms, so an IOC arriving or leaving is seen well before
/// the next portal sweep (a DM sweep is a few MADs: IOUnitInfo, then each IOC's profile
/// and service entries).
pub fn ioc_watch_period(sweep_interval: Duration) -> Duration {
    (sweep_interval / 4).max(Duration::from_millis(250))
}

/// The IOC watch an adapter on `provider` is asked for: none under rdma-core, where the
/// kernel owns QP1 and there is no Device Management to watch with (asking would only
/// have the adapter warn at every login); every [`ioc_watch_period`] elsewhere.
pub fn ioc_watch(provider: ProviderKind, sweep_interval: Duration) -> Option<Duration> {
    match provider {
        ProviderKind::RdmaCore => None,
        ProviderKind::Soft | ProviderKind::Sim => Some(ioc_watch_period(sweep_interval)),
    }
}

/// Where session `id`'s adapter starts numbering QPs. Every adapter of the daemon has the
/// node GUID, so to a target they are ports of one CA and must not reuse each other's
/// QPNs (Linux's CM rejects a REQ whose CA GUID and QPN match a live connection as stale
/// and disconnects that connection: two sessions to one ib_srpt evicted each other). Each
/// session gets its own 64 Ki range, the ranges starting at a random offset per daemon
/// run so that a restarted daemon does not meet its predecessor's connections.
pub fn first_qpn(id: u32) -> u32 {
    static OFFSET: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let offset = *OFFSET.get_or_init(access_layer::cm::random_comm_id);
    (((offset.wrapping_add(id)) % 0xfe + 1) << 16) | 0x11
}

/// The adapter configuration of a login to `service` from `local` in the form `via`, its
/// QPNs from `first_qpn` on, its device from `fabric` as the service's portal says.
pub fn adapter_config(
    config: &HostConfig,
    service: &SrpService,
    local: IpAddr,
    via: LoginVia,
    first_qpn: u32,
    fabric: &Arc<dyn Fabric>,
) -> SrpAdapterConfig {
    let portal = config.portals.iter().find(|p| p.address == service.portal);
    SrpAdapterConfig {
        local,
        target: service.portal,
        node_guid: config.node_guid,
        first_qpn,
        initiator_port_id: PortId::new(config.initiator_ext, config.node_guid, IoClass::SrpR16a),
        target_port_id: PortId::new(service.id_ext, service.ioc_guid, IoClass::SrpR16a),
        service_id: service.service_id,
        login_via: via,
        max_transfer: config.max_transfer,
        max_luns: config.max_luns,
        queue_depth: config.queue_depth,
        timers: config.timers,
        cmd_timeout: config.cmd_timeout,
        login_timeout: config.login_timeout,
        max_wait: Duration::from_millis(100),
        registration: config.registration,
        partition: portal.map_or(ib_verbs::PKey::DEFAULT, |p| p.partition),
        ioc_watch: None,
        provider: portal.map_or(config.provider, |p| p.provider),
        device: portal.and_then(|p| p.device.clone()),
        device_port: portal.and_then(|p| p.device_port),
        gid_index: portal.and_then(|p| p.gid_index),
        fabric: fabric.clone(),
    }
}

/// The driver model a login to `service` runs under: its portal's, else the host's.
pub fn driver_model(config: &HostConfig, service: &SrpService) -> DriverModel {
    config
        .portals
        .iter()
        .find(|p| p.address == service.portal)
        .map_or(config.driver, |p| p.driver)
}

/// What every session of a host shares: the machine's memory (the adapters' SRB buffers)
/// and where the adapters' devices come from.
#[derive(Clone, Copy)]
pub struct HostParts<'a> {
    /// The host's memory.
    pub memory: &'a Arc<SystemMemory>,
    /// The fabric devices are opened from.
    pub fabric: &'a Arc<dyn Fabric>,
}

impl Session {
    /// Logs in to `service` from `local` (see the module contract) under the driver model
    /// `model`, its adapter's SRB buffers in the host's `memory`, trying each form of
    /// `forms` in turn while the target rejects the form below SRP or does not answer; an
    /// SRP_LOGIN_REJ ends the attempt (the form is understood, the login refused). The
    /// error names every form's failure.
    pub fn open(
        id: u32,
        service: SrpService,
        local: IpAddr,
        config: &HostConfig,
        forms: &[LoginVia],
        model: DriverModel,
        host: HostParts<'_>,
    ) -> Result<Session, String> {
        let mut failures = Vec::new();
        for &via in forms {
            let hw = adapter_config(config, &service, local, via, first_qpn(id), host.fabric);
            match Self::login(hw, config, model, host.memory) {
                Ok(port) => {
                    if !failures.is_empty() {
                        tracing::info!(
                            ioc = %format!("{:#018x}", service.ioc_guid.0),
                            portal = %service.portal,
                            "logged in {}; before: {}",
                            via.as_str(),
                            failures.join("; ")
                        );
                    }
                    return Ok(Session {
                        id,
                        service,
                        local,
                        via,
                        port: Arc::new(port),
                        disks: Mutex::new(Vec::new()),
                        noted: Mutex::new(Default::default()),
                    });
                }
                Err((text, other_form_may_work)) => {
                    failures.push(format!("{}: {text}", via.as_str()));
                    if !other_form_may_work {
                        break;
                    }
                }
            }
        }
        Err(format!(
            "login to IOC {:#018x} at {} failed: {}",
            service.ioc_guid.0,
            service.portal,
            failures.join("; ")
        ))
    }

    /// One login attempt with the adapter configuration `hw`: the running adapter, or why
    /// not and whether another form could be accepted.
    fn login(
        mut hw: SrpAdapterConfig,
        config: &HostConfig,
        model: DriverModel,
        memory: &Arc<SystemMemory>,
    ) -> Result<HostAdapter, (String, bool)> {
        let local = hw.local;
        // The IOC is watched for removal under both models (the IOC bus, `daemon/bus.rs`):
        // the iSCSI model sees it as its device's surprise removal, StorPort as a bus
        // change whose re-enumeration finds the IOC's LUs gone. Not under rdma-core: no
        // Device Management there.
        hw.ioc_watch = ioc_watch(hw.provider, config.sweep_interval);
        // The previous attempt's adapter (another login form) is gone: dropping its port
        // joined the port's threads and closed its HCA, UDP socket included.
        let provider = hw.provider;
        let port = HostAdapter::start(model, hw, memory).map_err(|e| {
            let hint = match provider {
                ProviderKind::Soft => format!(" (is UDP 4791 on {local} in use?)"),
                _ => String::new(),
            };
            (
                format!("cannot start the adapter on {local}: {e}{hint}"),
                false,
            )
        })?;
        let end = Instant::now() + config.login_timeout + Duration::from_secs(1);
        loop {
            let st = port.status();
            if st.state == Some(PortState::Running) {
                return Ok(port);
            }
            if let Some(e) = st.last_error {
                let other = matches!(
                    st.last_failure,
                    Some(LoginFailure::CmRejected(_) | LoginFailure::NoAnswer)
                );
                return Err((e, other));
            }
            if Instant::now() >= end {
                return Err((format!("no answer within {:?}", config.login_timeout), true));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The session's number.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// What it is logged in to.
    pub fn service(&self) -> &SrpService {
        &self.service
    }

    /// The local address.
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// The login form that logged in.
    pub fn login_via(&self) -> LoginVia {
        self.via
    }

    /// The adapter.
    pub fn port(&self) -> &Arc<HostAdapter> {
        &self.port
    }

    /// Whether its adapter watches the IOC through Device Management (the iSCSI model: it
    /// sees its device's removal; StorPort hides it).
    pub fn watched(&self) -> bool {
        self.port
            .transport()
            .is_some_and(|t| t.config().ioc_watch.is_some())
    }

    /// What the adapter's IOC watch found since the last call.
    pub fn take_ioc_events(&self) -> Vec<access_layer::dm::DmEvent> {
        self.port
            .transport()
            .map(|t| t.take_ioc_events())
            .unwrap_or_default()
    }

    /// Whether `what` is new for this session (the first time it is noted).
    pub fn first_note(&self, what: &str) -> bool {
        self.noted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(what.to_owned())
    }

    /// The disks.
    pub fn disks(&self) -> MutexGuard<'_, Vec<SessionDisk>> {
        self.disks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where it stands.
    pub fn state(&self) -> SessionState {
        if self.port.is_suspended() {
            return SessionState::Suspended;
        }
        match self.port.status().state {
            Some(PortState::Running) => SessionState::Running,
            Some(PortState::Blocked) => SessionState::Blocked,
            Some(PortState::FailFast) => SessionState::FailFast,
            Some(PortState::Lost) => SessionState::Lost,
            Some(PortState::New) | None => SessionState::LoggingIn,
        }
    }

    /// Whether the miniport asked for a rescan since the last call.
    pub fn bus_changed(&self) -> bool {
        self.port.bus_changed()
    }

    /// The control socket's view.
    pub fn info(&self) -> SessionInfo {
        let st = self.port.status();
        SessionInfo {
            id: self.id,
            portal: self.service.portal,
            local: self.local,
            ioc_guid: format!("{:#018x}", self.service.ioc_guid.0),
            ioc_name: self.service.ioc_name.clone(),
            id_ext: format!("{:#018x}", self.service.id_ext),
            service_id: format!("{:#018x}", self.service.service_id.0),
            state: self.state().as_str().to_owned(),
            logins: st.logins,
            losses: st.losses,
            last_error: st.last_error,
            outstanding: self.port.outstanding(),
            disks: self.disks().iter().map(|d| d.name.clone()).collect(),
            login: self.via.as_str().to_owned(),
            driver: self.port.model().as_str().to_owned(),
            hca: crate::control::hca_counters(&st.hca),
            provider: st.device.clone(),
            fencing: st.fencing.to_owned(),
            resets: self
                .port
                .transport()
                .map(|t| t.resets().into())
                .unwrap_or_default(),
        }
    }

    /// A session about to go (logout, shutdown) while suspended is resumed first and given
    /// up to `login_timeout` to log in again: what its port held then runs before the
    /// orderly stop that follows, instead of waiting for a resume that will never come.
    pub fn leave_suspend(&self, login_timeout: Duration) {
        if !self.port.is_suspended() {
            return;
        }
        tracing::info!(
            session = self.id,
            "resuming a suspended session before it goes"
        );
        if let Err(e) = self.port.resume(Duration::from_secs(30)) {
            tracing::warn!(session = self.id, %e, "resuming a suspended session before it goes");
            return;
        }
        // An administrative path, not the I/O path: a bounded look every 5 ms, as the
        // login at open waits.
        let end = Instant::now() + login_timeout;
        while self.port.status().state != Some(PortState::Running) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Logs out in order (SRP_I_LOGOUT, then a CM disconnect; the miniport's StopAdapter),
    /// after at most 2 s for what the adapter still holds. A lost session has nothing to
    /// say: dropping it closes the channel.
    pub fn close(&self) {
        if self.state() == SessionState::Lost {
            return;
        }
        if let Err(e) = self.port.stop(Duration::from_secs(2)) {
            tracing::debug!(session = self.id, %e, "stopping the adapter");
        }
    }

    /// Whether this session is to `service` (same IOC and target port).
    pub fn serves(&self, service: &SrpService) -> bool {
        self.service.ioc_guid == service.ioc_guid
            && self.service.id_ext == service.id_ext
            && self.service.portal == service.portal
    }
}

/// The node GUID's use as an initiator port ID (for logs).
pub fn initiator_port(config: &HostConfig) -> PortId {
    PortId::new(
        config.initiator_ext,
        Guid(config.node_guid.0),
        IoClass::SrpR16a,
    )
}

#[cfg(test)]
mod tests {
    use super::{first_qpn, ioc_watch};
    use access_layer::verbs::ProviderKind;
    use std::time::Duration;

    #[test]
    fn the_ioc_is_watched_where_device_management_exists() {
        let sweep = Duration::from_secs(16);
        assert_eq!(
            ioc_watch(ProviderKind::Soft, sweep),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            ioc_watch(ProviderKind::Sim, sweep),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            ioc_watch(ProviderKind::RdmaCore, sweep),
            None,
            "the kernel owns QP1 under rdma-core: no DM, no watch (and no warning per login)"
        );
    }

    #[test]
    fn every_session_numbers_its_qps_in_a_range_of_its_own() {
        // Linux's CM (cm_insert_remote_qpn) keys connections by (CA GUID, QPN): sessions
        // sharing the node GUID must never hand out the same QPN (docs/protocol-notes.md).
        let bases: Vec<u32> = (1..=254).map(first_qpn).collect();
        let mut unique = bases.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), bases.len(), "254 sessions, 254 ranges");
        for b in bases {
            assert_eq!(b & 0xffff, 0x11, "{b:#x}");
            assert!(
                (0x1_0000..0x100_0000).contains(&b),
                "{b:#x}: 24 bits, above 64 Ki"
            );
        }
    }
}
