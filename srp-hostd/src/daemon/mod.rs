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
use crate::control::{DiskInfo, HostControl, HostService, SessionInfo};
use crate::session::Session;
use access_layer::ctl::{CtlAccess, CtlServer};
use access_layer::verbs::Fabric;
use mpio::{Dsm, MultipathDisk, SrpDsm};
use srp_host::{BlockFiles, MountError, MountOptions, Mounted};
use srp_initiator_storport::port::SystemMemory;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod bus;
mod control;
mod login;
mod paths;
mod power;
mod reload;
mod rules;
mod threads;

/// How often the supervisor looks at the sessions.
pub const TICK: Duration = Duration::from_millis(100);

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
    /// The SRP stack is powered down (`power.rs`): logins are refused.
    suspended: bool,
    /// The login form each IOC (portal, IOC GUID) last logged in with: tried first next time.
    learned_login: BTreeMap<(std::net::IpAddr, u64), srp_initiator_storport::srp::LoginVia>,
    /// The last sweep failure logged per portal (a failure is logged once per change).
    sweep_errors: BTreeMap<std::net::IpAddr, String>,
    /// What each portal's last sweep found (or why it failed), and when.
    discovered: BTreeMap<std::net::IpAddr, Discovery>,
}

/// A portal's last sweep.
#[derive(Debug, Clone)]
struct Discovery {
    /// When it ended.
    at: Instant,
    /// The SRP services found, or why the sweep failed.
    found: Result<Vec<crate::discover::SrpService>, String>,
}

/// What the supervisor, the control socket and the handle share.
struct Shared {
    /// The configuration in force: replaced whole by a reload ([`HostDaemon::reload`]).
    config: std::sync::RwLock<Arc<HostConfig>>,
    /// Where adapters' and sweeps' devices come from (the product's fabric: the software
    /// HCA or rdma-core as each portal says).
    fabric: Arc<dyn Fabric>,
    /// The host's memory: every adapter's SRB buffers.
    memory: Arc<SystemMemory>,
    dsm: Arc<dyn Dsm>,
    exposure: Exposure,
    state: Mutex<State>,
    /// Serializes sweeps, logins and logouts.
    logins: Mutex<()>,
    /// The persistent logins (a leaf lock).
    persistent: Mutex<crate::persist::PersistentLogins>,
    /// Policies and paths an operator set, applied again when they come back (a leaf lock).
    saved: Mutex<crate::saved::SavedPaths>,
    /// The discovery rules in force and what they decided (a leaf lock).
    rules: Mutex<rules::RulesState>,
    /// The IOC bus: IOC removal seen by watched sessions, through the access layer's PnP.
    bus: bus::IocBus,
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
            .field("name", &self.shared.config().name)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Binds `path` as a control socket: its directory is created (mode 0700 when new); a
/// stale socket file (no daemon behind it) is replaced; a live one is refused.
fn bind_socket(
    path: &Path,
    service: Arc<HostService>,
    access: CtlAccess,
) -> Result<CtlServer, HostError> {
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
    // Root, the daemon's user and the configured group only, with that mode from the moment
    // the socket exists (`CtlServer::bind_with`).
    CtlServer::bind_with(path, service, access).map_err(fail)
}

impl HostDaemon {
    /// Starts the daemon with FUSE block files and the control socket (see the module
    /// contract).
    pub fn start(config: HostConfig, fabric: Arc<dyn Fabric>) -> Result<HostDaemon, HostError> {
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
        let access = CtlAccess {
            group: config.control_group,
            ..CtlAccess::default()
        };
        let mut daemon = HostDaemon::launch(config, Exposure::Files(files), fabric);
        daemon.mounted = Some(mounted);
        let service = Arc::new(HostService::new(daemon.control()));
        daemon.server = Some(bind_socket(&socket, service, access)?);
        daemon.first_sweep();
        Ok(daemon)
    }

    /// Starts the daemon without block files or a socket: disks are reached through
    /// [`HostDaemon::disk`] (the demo on a machine without FUSE, and in-process tests).
    pub fn start_in_process(config: HostConfig, fabric: Arc<dyn Fabric>) -> HostDaemon {
        let daemon = HostDaemon::launch(config, Exposure::InProcess, fabric);
        daemon.first_sweep();
        daemon
    }

    fn launch(config: HostConfig, exposure: Exposure, fabric: Arc<dyn Fabric>) -> HostDaemon {
        let persistent = crate::persist::PersistentLogins::load(&config.state_dir);
        let saved = crate::saved::SavedPaths::load(&config.state_dir);
        let shared = Arc::new(Shared {
            memory: SystemMemory::new(crate::session::memory_pages(&config)),
            config: std::sync::RwLock::new(Arc::new(config)),
            fabric,
            dsm: Arc::new(SrpDsm::default()),
            exposure,
            state: Mutex::new(State {
                next_id: 1,
                ..State::default()
            }),
            logins: Mutex::new(()),
            persistent: Mutex::new(persistent),
            saved: Mutex::new(saved),
            rules: Mutex::new(rules::RulesState::default()),
            bus: bus::IocBus::new(),
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
    pub fn config(&self) -> Arc<HostConfig> {
        self.shared.config()
    }

    /// Re-reads the configuration file the daemon was started from and takes it (see
    /// `daemon/reload.rs`): what changed, or every reason nothing did.
    pub fn reload(&self) -> Result<Vec<String>, crate::control::HostControlError> {
        self.shared.reload_file()
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

    /// The IOC bus's PnP tree as arrival events, parents first: each watched session's
    /// adapter (a CA), the I/O unit and controllers its watch found, and the session as the
    /// SRP device of its IOC (`SRP\session-N`).
    pub fn ioc_tree(&self) -> Vec<access_layer::pnp::PnpEvent> {
        self.shared.bus.snapshot()
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
            s.leave_suspend(self.shared.config().login_timeout);
            self.shared.remove_disks(&s);
            s.close();
            self.shared.bus.remove(s.id());
        }
        self.shared.bus.close();
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
}
