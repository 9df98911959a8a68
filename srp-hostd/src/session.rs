//! One login: an emulated StorPort adapter running the SRP miniport from a local address to
//! one IOC's SRP service, and the disks found behind it.
//!
//! Contract: [`Session::open`] starts the adapter (HwFindAdapter opens the soft HCA port on
//! the local address; HwInitialize sends the login) and returns once the login succeeded,
//! or an error with the reason (rejected, no answer within the login timeout, address in
//! use) after dropping the adapter. Afterwards the miniport reconnects on its own by the
//! transport timers; [`Session::state`] reports where it stands. Dropping a session drops
//! its adapter (the soft HCA port closes; the target sees the channel go).

use crate::config::HostConfig;
use crate::control::SessionInfo;
use crate::discover::SrpService;
use crate::disk::SrpDisk;
use hca::Guid;
use srp::initiator::PortState;
use srp::wire::{IoClass, PortId};
use srp_initiator_storport::port::{Port, PortConfig, PortEvent};
use srp_initiator_storport::srp::{SrpAdapterConfig, SrpMiniport};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Pages of the DMA arena per adapter: enough for every LU's queue at the maximum transfer,
/// capped (the arena is the adapter's bounce memory).
fn arena_pages(config: &HostConfig) -> usize {
    let per_cmd = (config.max_transfer as usize).div_ceil(4096);
    (per_cmd * config.queue_depth as usize * 2).clamp(1024, 16384)
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
    port: Arc<Port<SrpMiniport>>,
    disks: Mutex<Vec<SessionDisk>>,
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

/// The adapter configuration of a login to `service` from `local`.
pub fn adapter_config(
    config: &HostConfig,
    service: &SrpService,
    local: IpAddr,
) -> SrpAdapterConfig {
    SrpAdapterConfig {
        local,
        target: service.portal,
        node_guid: config.node_guid,
        initiator_port_id: PortId::new(config.initiator_ext, config.node_guid, IoClass::SrpR16a),
        target_port_id: PortId::new(service.id_ext, service.ioc_guid, IoClass::SrpR16a),
        service_id: service.service_id,
        max_transfer: config.max_transfer,
        max_luns: config.max_luns,
        queue_depth: config.queue_depth,
        timers: config.timers,
        cmd_timeout: config.cmd_timeout,
        login_timeout: config.login_timeout,
        arena_pages: arena_pages(config),
        poll_interval: Duration::from_micros(100),
        registration: config.registration,
    }
}

impl Session {
    /// Logs in to `service` from `local` (see the module contract).
    pub fn open(
        id: u32,
        service: SrpService,
        local: IpAddr,
        config: &HostConfig,
    ) -> Result<Session, String> {
        let hw = adapter_config(config, &service, local);
        let port = Port::<SrpMiniport>::start(hw, PortConfig::default()).map_err(|e| {
            format!("cannot start the adapter on {local}: {e} (is UDP 4791 on {local} in use?)")
        })?;
        let end = Instant::now() + config.login_timeout + Duration::from_secs(1);
        loop {
            let st = port.miniport().status();
            if st.state == Some(PortState::Running) {
                break;
            }
            if let Some(e) = st.last_error {
                return Err(format!(
                    "login to IOC {:#018x} at {} failed: {e}",
                    service.ioc_guid.0, service.portal
                ));
            }
            if Instant::now() >= end {
                return Err(format!(
                    "login to IOC {:#018x} at {} got no answer within {:?}",
                    service.ioc_guid.0, service.portal, config.login_timeout
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Session {
            id,
            service,
            local,
            port: Arc::new(port),
            disks: Mutex::new(Vec::new()),
        })
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

    /// The adapter.
    pub fn port(&self) -> &Arc<Port<SrpMiniport>> {
        &self.port
    }

    /// The disks.
    pub fn disks(&self) -> MutexGuard<'_, Vec<SessionDisk>> {
        self.disks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where it stands.
    pub fn state(&self) -> SessionState {
        match self.port.miniport().status().state {
            Some(PortState::Running) => SessionState::Running,
            Some(PortState::Blocked) => SessionState::Blocked,
            Some(PortState::FailFast) => SessionState::FailFast,
            Some(PortState::Lost) => SessionState::Lost,
            Some(PortState::New) | None => SessionState::LoggingIn,
        }
    }

    /// Whether the miniport asked for a rescan since the last call.
    pub fn bus_changed(&self) -> bool {
        self.port
            .take_events()
            .iter()
            .any(|e| matches!(e, PortEvent::BusChangeDetected { .. }))
    }

    /// The control socket's view.
    pub fn info(&self) -> SessionInfo {
        let st = self.port.miniport().status();
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
        }
    }

    /// Logs out in order (SRP_I_LOGOUT, then a CM disconnect; the miniport's StopAdapter),
    /// after at most 2 s for what the adapter still holds. A lost session has nothing to
    /// say: dropping it closes the channel.
    pub fn close(&self) {
        if self.state() == SessionState::Lost {
            return;
        }
        if let Err(e) = self.port.stop_adapter(Duration::from_secs(2)) {
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
