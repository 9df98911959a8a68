//! [`HostDaemon`]: the sessions, the supervisor that keeps them, the block files and the
//! control socket.
//!
//! Contract:
//! - [`HostDaemon::start`] mounts the disks directory (FUSE), binds the control socket,
//!   runs the first sweep of every portal (logins and LUN scans included) and returns;
//!   portals that did not answer are retried every `sweep_interval`.
//! - The supervisor (one thread) checks every session every [`TICK`]: a session whose
//!   device-loss timer expired loses its disks (removed from the directory; open handles
//!   get EIO) and is dropped, freeing its local address; a bus change rescans the
//!   session's LUNs (new ones appear, vanished ones are removed). Every `sweep_interval`
//!   it sweeps each portal from a free local address and logs in to each SRP service
//!   without a session (one channel per local address).
//! - Logins, logouts and sweeps are serialized (the supervisor's and the control socket's),
//!   so two channels never race for one IOC or address.
//! - [`HostDaemon::shutdown`] stops the supervisor, removes the disks, drops the
//!   sessions, unmounts and removes the socket; dropping the daemon does the same.

use crate::config::HostConfig;
use crate::control::{
    DiskInfo, HostAnswer, HostControl, HostControlError, HostRequest, HostService, LoginSpec,
    SessionInfo,
};
use crate::discover::{SrpService, route_source, srp_services, sweep};
use crate::disk::SrpDisk;
use crate::scan::scan;
use crate::session::{Session, SessionDisk, SessionState};
use access_layer::ctl::CtlServer;
use hca::Guid;
use srp_host::{BlockDevice, BlockFiles, MountError, MountOptions, Mounted};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the supervisor looks at the sessions.
pub const TICK: Duration = Duration::from_millis(100);

/// How long one Device Management sweep may take.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The disks directory could not be created or mounted.
    #[error("cannot mount the disks directory {dir}: {source}")]
    Mount {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: MountError,
    },
    /// The control socket could not be bound.
    #[error("cannot serve the control socket {path}: {source}")]
    Socket {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The disks directory could not be created.
    #[error("cannot create {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What the daemon exposes disks through.
#[derive(Clone)]
enum Exposure {
    /// FUSE block files.
    Files(BlockFiles),
    /// Nothing: the disks are reached in process ([`HostDaemon::disk`]).
    InProcess,
}

#[derive(Default)]
struct State {
    sessions: BTreeMap<u32, Arc<Session>>,
    next_id: u32,
    stopping: bool,
}

/// What the supervisor, the control socket and the handle share.
struct Shared {
    config: HostConfig,
    exposure: Exposure,
    state: Mutex<State>,
    /// Serializes sweeps, logins and logouts.
    logins: Mutex<()>,
    wake: Condvar,
}

/// The running host daemon.
pub struct HostDaemon {
    shared: Arc<Shared>,
    supervisor: Option<JoinHandle<()>>,
    server: Option<CtlServer>,
    mounted: Option<Mounted>,
}

impl std::fmt::Debug for HostDaemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostDaemon")
            .field("name", &self.shared.config.name)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Binds `path` as a control socket: its directory is created (mode 0700 when new); a
/// stale socket file (no daemon behind it) is replaced; a live one is refused.
fn bind_socket(path: &Path, service: Arc<HostService>) -> Result<CtlServer, HostError> {
    let fail = |source| HostError::Socket {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).map_err(fail)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(fail(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another host daemon is serving it",
            )));
        }
        std::fs::remove_file(path).map_err(fail)?;
    }
    let server = CtlServer::bind(path, service).map_err(fail)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
    Ok(server)
}

impl HostDaemon {
    /// Starts the daemon with FUSE block files and the control socket (see the module
    /// contract).
    pub fn start(config: HostConfig) -> Result<HostDaemon, HostError> {
        let dir = config.disks_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|source| HostError::Directory {
            path: dir.clone(),
            source,
        })?;
        let options = MountOptions {
            fs_name: format!("srp-host:{}", config.name),
            ..MountOptions::default()
        };
        let mounted = BlockFiles::mount(&dir, &options).map_err(|source| HostError::Mount {
            dir: dir.clone(),
            source,
        })?;
        let files = mounted.files().clone();
        let socket = config.control_socket.clone();
        let mut daemon = HostDaemon::launch(config, Exposure::Files(files));
        daemon.mounted = Some(mounted);
        let service = Arc::new(HostService::new(daemon.control()));
        daemon.server = Some(bind_socket(&socket, service)?);
        daemon.first_sweep();
        Ok(daemon)
    }

    /// Starts the daemon without block files or a socket: disks are reached through
    /// [`HostDaemon::disk`] (the demo on a machine without FUSE, and in-process tests).
    pub fn start_in_process(config: HostConfig) -> HostDaemon {
        let daemon = HostDaemon::launch(config, Exposure::InProcess);
        daemon.first_sweep();
        daemon
    }

    fn launch(config: HostConfig, exposure: Exposure) -> HostDaemon {
        let shared = Arc::new(Shared {
            config,
            exposure,
            state: Mutex::new(State {
                next_id: 1,
                ..State::default()
            }),
            logins: Mutex::new(()),
            wake: Condvar::new(),
        });
        let s = shared.clone();
        let supervisor = std::thread::Builder::new()
            .name("srp-host-supervisor".into())
            .spawn(move || s.supervise())
            .ok();
        HostDaemon {
            shared,
            supervisor,
            server: None,
            mounted: None,
        }
    }

    fn first_sweep(&self) {
        self.shared.sweep_all();
    }

    /// The configuration it runs.
    pub fn config(&self) -> &HostConfig {
        &self.shared.config
    }

    /// The in-process control interface (what the socket serves).
    pub fn control(&self) -> Arc<dyn HostControl> {
        self.shared.clone()
    }

    /// The disk exposed as `name`, if any.
    pub fn disk(&self, name: &str) -> Option<Arc<SrpDisk>> {
        let st = lock(&self.shared.state);
        st.sessions.values().find_map(|s| {
            s.disks()
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.disk.clone())
        })
    }

    /// The sessions.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.shared.sessions()
    }

    /// The disks.
    pub fn disks(&self) -> Vec<DiskInfo> {
        self.shared.disks()
    }

    /// The control socket's path, if one is served.
    pub fn control_socket(&self) -> Option<&Path> {
        self.server.as_ref().map(CtlServer::path)
    }

    /// The disks directory, if mounted.
    pub fn disks_dir(&self) -> Option<&Path> {
        self.mounted.as_ref().map(|m| m.files().dir())
    }

    /// Stops everything (see the module contract).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        {
            let mut st = lock(&self.shared.state);
            st.stopping = true;
        }
        self.shared.wake.notify_all();
        if let Some(t) = self.supervisor.take() {
            let _ = t.join();
        }
        self.server = None;
        let _serial = lock(&self.shared.logins);
        let sessions: Vec<Arc<Session>> = {
            let mut st = lock(&self.shared.state);
            std::mem::take(&mut st.sessions).into_values().collect()
        };
        for s in sessions {
            self.shared.remove_disks(&s);
        }
        if let Some(m) = self.mounted.take() {
            if let Err(e) = m.unmount() {
                tracing::warn!(%e, "unmounting the disks directory");
            }
        }
    }
}

impl Drop for HostDaemon {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn stopping(&self) -> bool {
        lock(&self.state).stopping
    }

    /// The supervisor loop.
    fn supervise(&self) {
        let mut next_sweep = Instant::now() + self.config.sweep_interval;
        loop {
            {
                let st = lock(&self.state);
                let (st, _) = self
                    .wake
                    .wait_timeout(st, TICK)
                    .unwrap_or_else(PoisonError::into_inner);
                if st.stopping {
                    return;
                }
            }
            self.check_sessions();
            if Instant::now() >= next_sweep {
                self.sweep_all();
                next_sweep = Instant::now() + self.config.sweep_interval;
            }
        }
    }

    /// Drops lost sessions; rescans those whose bus changed.
    fn check_sessions(&self) {
        let sessions: Vec<Arc<Session>> = lock(&self.state).sessions.values().cloned().collect();
        for s in sessions {
            match s.state() {
                SessionState::Lost => {
                    tracing::warn!(
                        session = s.id(),
                        "device loss: removing the session's disks"
                    );
                    let _serial = lock(&self.logins);
                    self.drop_session(s.id());
                }
                SessionState::Running if s.bus_changed() => {
                    let _serial = lock(&self.logins);
                    self.expose(&s);
                }
                _ => {}
            }
        }
    }

    /// Removes session `id` and its disks; the block files it had.
    fn drop_session(&self, id: u32) -> Option<Vec<String>> {
        let s = lock(&self.state).sessions.remove(&id)?;
        Some(self.remove_disks(&s))
    }

    fn remove_disks(&self, s: &Session) -> Vec<String> {
        let disks = std::mem::take(&mut *s.disks());
        let mut names = Vec::new();
        for d in disks {
            d.disk.set_gone();
            if let Exposure::Files(f) = &self.exposure
                && let Err(e) = f.remove(&d.name)
            {
                tracing::warn!(%e, name = d.name, "removing a block file");
            }
            names.push(d.name);
        }
        names
    }

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
        let configured = self
            .config
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

    /// One sweep of every configured portal, logging in where needed.
    fn sweep_all(&self) {
        for p in self.config.portals.clone() {
            if self.stopping() {
                return;
            }
            let spec = LoginSpec {
                portal: p.address,
                local: None,
                ioc_guid: None,
            };
            match self.login(&spec, &p.iocs) {
                Ok(new) => {
                    for s in new {
                        tracing::info!(session = s.id, ioc = s.ioc_guid, disks = ?s.disks, "logged in");
                    }
                }
                Err(HostControlError::NothingToLogIn(_) | HostControlError::NoLocalAddress(_)) => {}
                Err(e) => tracing::debug!(portal = %p.address, %e, "sweep"),
            }
        }
    }

    /// Sweeps `spec.portal` and logs in to each SRP service without a session (only
    /// `iocs`, if any; only `spec.ioc_guid`, if set).
    fn login(&self, spec: &LoginSpec, iocs: &[Guid]) -> Result<Vec<SessionInfo>, HostControlError> {
        let _serial = lock(&self.logins);
        if self.stopping() {
            return Err(HostControlError::Stopping);
        }
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
        let found = sweep(
            spec.portal,
            sweep_from,
            self.config.node_guid,
            SWEEP_TIMEOUT,
        )
        .map_err(|e| HostControlError::Failed(e.to_string()))?;
        let wanted: Vec<SrpService> = srp_services(spec.portal, &found)
            .into_iter()
            .filter(|s| iocs.is_empty() || iocs.contains(&s.ioc_guid))
            .filter(|s| only.is_none_or(|g| g == s.ioc_guid))
            .filter(|s| !self.has_session(s))
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
        for service in wanted {
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
            match Session::open(id, service, local, &self.config) {
                Ok(s) => {
                    let s = Arc::new(s);
                    lock(&self.state).sessions.insert(id, s.clone());
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

    /// Scans `s` and brings its disks in line: new LUNs exposed, vanished ones removed.
    fn expose(&self, s: &Arc<Session>) {
        let timeout = self.config.cmd_timeout;
        let found = match scan(s.port(), s.id(), self.config.max_luns, timeout) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(session = s.id(), %e, "LUN scan");
                return;
            }
        };
        for why in &found.skipped {
            tracing::info!(session = s.id(), "LUN skipped: {why}");
        }
        let taken: Vec<String> = lock(&self.state)
            .sessions
            .values()
            .flat_map(|o| o.disks().iter().map(|d| d.name.clone()).collect::<Vec<_>>())
            .collect();
        let mut disks = s.disks();
        // Vanished LUNs (or a LUN now answering with another identity).
        let (keep, gone): (Vec<SessionDisk>, Vec<SessionDisk>) =
            std::mem::take(&mut *disks).into_iter().partition(|d| {
                found
                    .luns
                    .iter()
                    .any(|l| l.lun == d.disk.info().lun && l.identity == d.disk.info().identity)
            });
        *disks = keep;
        for d in gone {
            d.disk.set_gone();
            if let Exposure::Files(f) = &self.exposure {
                let _ = f.remove(&d.name);
            }
            tracing::info!(name = d.name, "LUN gone");
        }
        for info in found.luns {
            if disks.iter().any(|d| d.disk.info().lun == info.lun) {
                continue;
            }
            // The same LU through another session (multipath merges them, #7): its own name.
            let mut name = info.identity.clone();
            if taken.contains(&name) {
                name = format!("{}-s{}", info.identity, s.id());
            }
            let disk = Arc::new(SrpDisk::new(
                s.port().clone(),
                info,
                self.config.max_transfer,
                self.srb_timeout(),
            ));
            if let Exposure::Files(f) = &self.exposure {
                let dev: Arc<dyn BlockDevice> = disk.clone();
                if let Err(e) = f.add(&name, dev) {
                    tracing::warn!(%e, name, "exposing a disk");
                    continue;
                }
            }
            disks.push(SessionDisk { name, disk });
        }
    }

    /// An SRB's timeout: long enough for the core's own command timeout and escalation,
    /// and for I/O held across a reconnect until fast_io_fail.
    fn srb_timeout(&self) -> Duration {
        let t = &self.config.timers;
        let held = t
            .fast_io_fail()
            .or(t.dev_loss())
            .unwrap_or(Duration::from_secs(60));
        self.config.cmd_timeout * 2 + held + self.config.login_timeout
    }

    fn sessions(&self) -> Vec<SessionInfo> {
        let sessions: Vec<Arc<Session>> = lock(&self.state).sessions.values().cloned().collect();
        sessions.iter().map(|s| s.info()).collect()
    }

    fn disks(&self) -> Vec<DiskInfo> {
        let sessions: Vec<Arc<Session>> = lock(&self.state).sessions.values().cloned().collect();
        let mut out = Vec::new();
        for s in sessions {
            for d in s.disks().iter() {
                let i = d.disk.info();
                let c = d.disk.counters();
                out.push(DiskInfo {
                    name: d.name.clone(),
                    path: match &self.exposure {
                        Exposure::Files(f) => f.path(&d.name).display().to_string(),
                        Exposure::InProcess => String::new(),
                    },
                    session: s.id(),
                    lun: i.lun,
                    identity: i.identity.clone(),
                    vendor: i.vendor.clone(),
                    product: i.product.clone(),
                    revision: i.revision.clone(),
                    block_size: i.block_size,
                    blocks: i.blocks,
                    reads: c.reads.load(Ordering::Relaxed),
                    writes: c.writes.load(Ordering::Relaxed),
                    flushes: c.flushes.load(Ordering::Relaxed),
                    errors: c.errors.load(Ordering::Relaxed),
                });
            }
        }
        out
    }
}

impl HostControl for Shared {
    fn call(&self, request: HostRequest) -> Result<HostAnswer, HostControlError> {
        match request {
            HostRequest::Sessions => Ok(HostAnswer::Sessions(self.sessions())),
            HostRequest::Disks => Ok(HostAnswer::Disks(self.disks())),
            HostRequest::Login(spec) => {
                let iocs = self
                    .config
                    .portals
                    .iter()
                    .find(|p| p.address == spec.portal && spec.ioc_guid.is_none())
                    .map(|p| p.iocs.clone())
                    .unwrap_or_default();
                self.login(&spec, &iocs).map(HostAnswer::LoggedIn)
            }
            HostRequest::Logout { session } => {
                let _serial = lock(&self.logins);
                self.drop_session(session)
                    .map(|disks_removed| HostAnswer::LoggedOut { disks_removed })
                    .ok_or(HostControlError::NoSuchSession(session))
            }
        }
    }
}
