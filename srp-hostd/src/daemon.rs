//! [`HostDaemon`]: the sessions, the supervisor that keeps them, the block files and the
//! control socket.
//!
//! Contract:
//! - [`HostDaemon::start`] mounts the disks directory (FUSE), binds the control socket,
//!   runs the first sweep of every portal (logins and LUN scans included) and returns;
//!   portals that did not answer are retried every `sweep_interval`.
//! - Two threads keep the daemon. The path supervisor only runs each multipath disk's
//!   maintenance every [`TICK`] ([`MultipathDisk::tick`]: path states from the sessions,
//!   held I/O moved off a dead path, path verifies); nothing it does waits on the network,
//!   so a failover never waits for a sweep, a login or a scan. The sweeper checks every
//!   session every [`TICK`] — a session whose device-loss timer expired loses its paths
//!   (a disk with none left leaves the directory; open handles get EIO) and is dropped,
//!   freeing its local address; a bus change rescans its LUNs — and every
//!   `sweep_interval` sweeps each portal from a free local address, logs in to each SRP
//!   service without a session (one channel per local address) and rescans the running
//!   sessions (new LUNs appear, vanished ones lose their path).
//! - Logins, logouts, sweeps and scans are serialized (the sweeper's and the control
//!   socket's), so two channels never race for one IOC or address.
//! - [`HostDaemon::shutdown`] stops both threads, removes the disks, logs the sessions
//!   out, unmounts and removes the socket; dropping the daemon does the same.

use crate::config::HostConfig;
use crate::control::{
    DiskInfo, HostAnswer, HostControl, HostControlError, HostRequest, HostService, LoginSpec,
    PathInfo, SessionInfo,
};
use crate::discover::{SrpService, route_source, srp_services, sweep};
use crate::disk::SrpDisk;
use crate::scan::scan;
use crate::session::{Session, SessionDisk, SessionState};
use access_layer::ctl::CtlServer;
use hca::Guid;
use mpio::{DiskIdentity, Dsm, MultipathDisk, PathLabel, PathSpec, PathState, Policy, SrpDsm};
use srp_host::{BlockDevice, BlockFiles, MountError, MountOptions, Mounted};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
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
    /// The multipath disks, by name (their identity).
    disks: BTreeMap<String, Arc<MultipathDisk>>,
    next_id: u32,
    stopping: bool,
}

/// What the supervisor, the control socket and the handle share.
struct Shared {
    config: HostConfig,
    dsm: Arc<dyn Dsm>,
    exposure: Exposure,
    state: Mutex<State>,
    /// Serializes sweeps, logins and logouts.
    logins: Mutex<()>,
    wake: Condvar,
}

/// The running host daemon.
pub struct HostDaemon {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
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
            dsm: Arc::new(SrpDsm::default()),
            exposure,
            state: Mutex::new(State {
                next_id: 1,
                ..State::default()
            }),
            logins: Mutex::new(()),
            wake: Condvar::new(),
        });
        let mut threads = Vec::new();
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("srp-host-paths".into())
            .spawn(move || s.supervise_paths());
        threads.extend(
            spawned
                .map_err(|e| tracing::error!(%e, "no path supervisor"))
                .ok(),
        );
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("srp-host-sweeper".into())
            .spawn(move || s.sweep_loop());
        threads.extend(spawned.map_err(|e| tracing::error!(%e, "no sweeper")).ok());
        HostDaemon {
            shared,
            threads,
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

    /// The multipath disk exposed as `name`, if any.
    pub fn disk(&self, name: &str) -> Option<Arc<MultipathDisk>> {
        self.shared.disk_named(name)
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
        for t in self.threads.drain(..) {
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
            s.close();
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

    /// Waits a tick (or a wake-up); whether the daemon is stopping.
    fn nap(&self) -> bool {
        let st = lock(&self.state);
        let (st, _) = self
            .wake
            .wait_timeout(st, TICK)
            .unwrap_or_else(PoisonError::into_inner);
        st.stopping
    }

    /// The path supervisor (see the module contract).
    fn supervise_paths(&self) {
        while !self.nap() {
            let disks: Vec<Arc<MultipathDisk>> =
                lock(&self.state).disks.values().cloned().collect();
            for d in disks {
                d.tick(Instant::now());
            }
        }
    }

    /// The sweeper (see the module contract).
    fn sweep_loop(&self) {
        let mut next_sweep = Instant::now() + self.config.sweep_interval;
        while !self.nap() {
            self.check_sessions();
            if Instant::now() >= next_sweep {
                self.sweep_all();
                self.rescan_all();
                next_sweep = Instant::now() + self.config.sweep_interval;
            }
        }
    }

    /// Rescans every running session (LUNs added or removed at the target: the miniport
    /// reports no bus change).
    fn rescan_all(&self) {
        let sessions: Vec<Arc<Session>> = lock(&self.state).sessions.values().cloned().collect();
        for s in sessions {
            if self.stopping() {
                return;
            }
            if s.state() == SessionState::Running {
                let _serial = lock(&self.logins);
                self.expose(&s);
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
        let removed = self.remove_disks(&s);
        s.close();
        Some(removed)
    }

    /// Takes every path of `s` away; the disks removed with their last path.
    fn remove_disks(&self, s: &Session) -> Vec<String> {
        let disks = std::mem::take(&mut *s.disks());
        disks
            .iter()
            .filter_map(|d| self.remove_path(s.id(), d))
            .collect()
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

    /// Scans `s` and brings its paths in line: each LUN found becomes a path of the
    /// multipath disk of its identity (created and exposed on its first path); vanished
    /// LUNs lose their path (a disk with none left disappears).
    fn expose(&self, s: &Arc<Session>) {
        let timeout = self.config.cmd_timeout;
        let found = match scan(s.port(), self.dsm.as_ref(), self.config.max_luns, timeout) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(session = s.id(), %e, "LUN scan");
                return;
            }
        };
        for why in &found.skipped {
            tracing::info!(session = s.id(), "LUN skipped: {why}");
        }
        let gone: Vec<SessionDisk> = {
            let mut disks = s.disks();
            let (keep, gone) = std::mem::take(&mut *disks).into_iter().partition(|d| {
                found
                    .luns
                    .iter()
                    .any(|l| l.lun == d.disk.info().lun && l.identity == d.disk.info().identity)
            });
            *disks = keep;
            gone
        };
        for d in gone {
            tracing::info!(name = d.name, session = s.id(), "LUN gone from the session");
            self.remove_path(s.id(), &d);
        }
        let portal = self
            .config
            .portals
            .iter()
            .find(|p| p.address == s.service().portal);
        for info in found.luns {
            if s.disks().iter().any(|d| d.disk.info().lun == info.lun) {
                continue;
            }
            let name = info.identity.clone();
            let lun = info.lun;
            let id = info.id.clone();
            let identity = DiskIdentity {
                identity: info.identity.clone(),
                vendor: info.vendor.clone(),
                product: info.product.clone(),
                revision: info.revision.clone(),
                block_size: info.block_size,
                blocks: info.blocks,
            };
            let disk = Arc::new(SrpDisk::new(
                s.port().clone(),
                info,
                self.config.max_transfer,
                self.srb_timeout(),
            ));
            let service = s.service();
            let spec = PathSpec {
                key: s.id(),
                lun,
                device: disk.clone(),
                id,
                preferred: portal.is_some_and(|p| p.preferred),
                weight: portal.map_or(1, |p| p.weight),
                label: PathLabel {
                    ioc_guid: format!("{:#018x}", service.ioc_guid.0),
                    ioc_name: service.ioc_name.clone(),
                    portal: service.portal.to_string(),
                    local: s.local().to_string(),
                },
            };
            let existing = lock(&self.state).disks.get(&name).cloned();
            match existing {
                Some(mp)
                    if mp.identity().block_size == identity.block_size
                        && mp.identity().blocks == identity.blocks =>
                {
                    mp.add_path(spec);
                    tracing::info!(name, session = s.id(), "another path to the disk");
                }
                Some(_) => {
                    tracing::warn!(
                        name,
                        session = s.id(),
                        "the same identity with another geometry: path refused"
                    );
                    disk.set_gone();
                    continue;
                }
                None => {
                    let mp = Arc::new(MultipathDisk::new(
                        identity,
                        self.dsm.clone(),
                        self.config.multipath,
                    ));
                    mp.add_path(spec);
                    if let Exposure::Files(f) = &self.exposure {
                        let dev: Arc<dyn BlockDevice> = mp.clone();
                        if let Err(e) = f.add(&name, dev) {
                            tracing::warn!(%e, name, "exposing a disk");
                            disk.set_gone();
                            continue;
                        }
                    }
                    lock(&self.state).disks.insert(name.clone(), mp);
                }
            }
            s.disks().push(SessionDisk { name, disk });
        }
    }

    /// Takes session `key`'s path `d` away from its disk; the disk's name if it had no
    /// path left and is gone.
    fn remove_path(&self, key: u32, d: &SessionDisk) -> Option<String> {
        d.disk.set_gone();
        let mp = lock(&self.state).disks.get(&d.name).cloned()?;
        if mp.remove_path(key) > 0 {
            return None;
        }
        lock(&self.state).disks.remove(&d.name);
        if let Exposure::Files(f) = &self.exposure
            && let Err(e) = f.remove(&d.name)
        {
            tracing::warn!(%e, name = d.name, "removing a block file");
        }
        tracing::info!(name = d.name, "last path gone: disk removed");
        Some(d.name.clone())
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
        let disks: Vec<Arc<MultipathDisk>> = lock(&self.state).disks.values().cloned().collect();
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
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The disk named (or identified) `name`.
    fn disk_named(&self, name: &str) -> Option<Arc<MultipathDisk>> {
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
            HostRequest::SetPolicy { disk, policy } => {
                let p = Policy::parse(&policy).ok_or(HostControlError::NoSuchPolicy(policy))?;
                let mp = self
                    .disk_named(&disk)
                    .ok_or(HostControlError::NoSuchDisk(disk.clone()))?;
                mp.set_policy(p);
                tracing::info!(disk, policy = p.name(), "policy set");
                Ok(HostAnswer::Done { disks: vec![disk] })
            }
            HostRequest::SetPath { session, enabled } => {
                if !lock(&self.state).sessions.contains_key(&session) {
                    return Err(HostControlError::NoSuchSession(session));
                }
                let now = Instant::now();
                let disks = self
                    .disks_through(session)
                    .into_iter()
                    .filter(|d| d.set_admin(session, enabled, now))
                    .map(|d| d.identity().identity.clone())
                    .collect();
                // A restored path is verified at the next tick.
                self.wake.notify_all();
                Ok(HostAnswer::Done { disks })
            }
        }
    }
}
