//! The target daemon: the appliance served over CM logins on every configured port.
//!
//! [`Daemon::start`] builds the [`Appliance`](crate::appliance::Appliance) (every LUN
//! opened), opens one device per `[[port]]` from its [`Fabric`] (the software HCA on the
//! port's address, or an RDMA device through rdma-core, as the port's `provider` says) with
//! a connection manager on it (the access layer's over QP1, with Device Management agents,
//! or the provider's), and listens on each IOC's service ID (native IB CM login form) and on
//! the RDMA-CM service ID of TCP port `[target] rdma_cm_port` (or
//! [`DaemonOptions::rdma_cm_port`]; default [`DEFAULT_RDMA_CM_PORT`], 5555), the port Linux
//! `ib_srp ... dest=ip:port` logins name.
//! Then one thread runs the loop: CM MADs in and out, logins decided and answered, every
//! live [`ChannelIo`](crate::io::ChannelIo) turned, closed channels forgotten; with
//! nothing to do it arms every CQ and sleeps on one [`Doorbell`]
//! that CQ notifications, finished backend jobs and control requests ring (bounded by the
//! next CM timer). Backend I/O runs on a bounded [`Workers`](crate::io::Workers) pool. [`Daemon::shutdown`] sends
//! SRP_T_LOGOUT on every live channel, then a DREQ on every connection, then stops, each
//! step bounded in time.
//!
//! Control: [`Daemon::control`] hands out a [`ControlHandle`] whose requests the loop
//! answers between turns; with [`DaemonOptions::control_socket`] the same is served on a
//! Unix socket ([`crate::control`]).
//!
//! Files: [`dm`] (each port's Device Management agent: the IOCs reachable on it),
//! [`event`] (what the daemon reports: logins, rejects, logouts), [`port`] (one HCA port:
//! device, GSI, CM), [`login`] (a CM REQ to an answer and a channel), `run` (the loop and
//! shutdown) with `answer` (control requests: lists, IOC and port switches).

pub mod dm;
pub mod event;
pub mod event_log;
pub mod guards;
pub mod login;
pub mod port;
mod run;
mod stepped;

pub use event::DaemonEvent;
pub use event_log::EventLog;
pub use stepped::SteppedDaemon;

use crate::appliance::{ChannelLimits, StartErrors};
use crate::config::TargetConfig;
use crate::control::TargetService;
use crate::control::handle::ControlHandle;
use crate::control::model::{ControlAnswer, ControlError, ControlRequest};
use access_layer::ctl::{CtlAccess, CtlServer};
use access_layer::verbs::{Doorbell, Fabric, OpenError};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;

pub use crate::config::DEFAULT_RDMA_CM_PORT;

/// Credits per channel the daemon offers by default. Each channel registers one bounce
/// buffer of the largest transfer per credit, so window × max transfer is the memory a
/// login costs: 32 × 1 MiB here, where [`ChannelLimits::default`] (128 × 8 MiB) would cost
/// 1 GiB per channel.
pub const DEFAULT_WINDOW: u32 = 32;

/// Largest transfer per command the daemon accepts by default (see [`DEFAULT_WINDOW`]).
pub const DEFAULT_MAX_TRANSFER: u64 = 1 << 20;

/// Events kept for a reader before new ones are dropped (the loop never blocks on a log).
pub(crate) const EVENT_QUEUE: usize = 4096;

/// How the daemon runs, beyond the configuration file.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// RDMA-CM TCP port of RDMA-CM-form logins, overriding `[target] rdma_cm_port`.
    pub rdma_cm_port: Option<u16>,
    /// Channel limits of every IOC.
    pub limits: ChannelLimits,
    /// Backend worker threads; one LU runs on at most half of them
    /// ([`Workers`](crate::io::Workers)), so a stuck disk never takes them all.
    pub workers: usize,
    /// Backend jobs queued per LU before its commands are answered BUSY.
    pub queue: usize,
    /// How long shutdown waits for T_LOGOUTs to be sent, and then for DREPs.
    pub shutdown_step: Duration,
    /// Where to serve the control socket ([`crate::control`]); none when `None`. A stale
    /// socket file (its daemon gone) is replaced; a live one is an error.
    pub control_socket: Option<PathBuf>,
    /// Who may use the control socket and how many at once (default: root and the
    /// daemon's user, 16 connections).
    pub control_access: CtlAccess,
    /// The configuration file the daemon was started from: what a reload re-reads
    /// ([`Daemon::reload`], the control socket's RELOAD). `None`: a config built in
    /// memory, which cannot be reloaded.
    pub config_path: Option<PathBuf>,
    /// Where the ports' devices, the loop's clock and the CM's randomness come from: the
    /// product's fabric (crate `providers`: the software HCA or rdma-core, as each port
    /// says), or a simulated net's (the whole-stack simulator, [`SteppedDaemon`]: virtual
    /// time, seeded randomness; a single-threaded fabric also runs backend jobs inline on
    /// the loop instead of on workers).
    pub fabric: Arc<dyn Fabric>,
    /// A layer beneath every file LUN's backend (the simulator's disk model).
    pub medium_layer: Option<crate::backend::medium::MediumLayer>,
}

impl DaemonOptions {
    /// The defaults, with devices from `fabric`.
    pub fn new(fabric: Arc<dyn Fabric>) -> DaemonOptions {
        DaemonOptions {
            rdma_cm_port: None,
            limits: ChannelLimits {
                window: DEFAULT_WINDOW,
                max_transfer: DEFAULT_MAX_TRANSFER,
                max_table_entries: (DEFAULT_MAX_TRANSFER / 4096) as usize,
                ..ChannelLimits::default()
            },
            workers: 8,
            queue: 256,
            shutdown_step: Duration::from_secs(2),
            control_socket: None,
            control_access: CtlAccess::default(),
            config_path: None,
            fabric,
            medium_layer: None,
        }
    }
}

/// Why the daemon did not start. Nothing is left running when it did not.
#[derive(Debug, Error)]
pub enum DaemonError {
    /// A LUN could not be opened.
    #[error("{0}")]
    Appliance(StartErrors),
    /// A port's device could not be opened.
    #[error("port {name} ({address}): {source}")]
    Open {
        /// The port's name.
        name: String,
        /// Its address.
        address: SocketAddr,
        /// Why (what to install or configure).
        source: OpenError,
    },
    /// A port's GSI QP could not be set up.
    #[error("port {name}: GSI: {reason}")]
    Gsi {
        /// The port's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The port's Device Management agent could not be set up.
    #[error("port {name}: device management: {reason}")]
    Dm {
        /// The port's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A CM listen failed (a service ID twice on one port).
    #[error("port {name}: listen on service {service}: {reason}")]
    Listen {
        /// The port's name.
        name: String,
        /// The service ID.
        service: String,
        /// Why.
        reason: String,
    },
    /// The worker pool or the loop thread could not be started.
    #[error("cannot start threads: {0}")]
    Thread(#[from] std::io::Error),
    /// The loop thread died while starting.
    #[error("the daemon thread exited while starting")]
    Died,
    /// The control socket could not be served.
    #[error("control socket {path}: {reason}")]
    Control {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// What started: one line per IOC and port, for the startup summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// Per IOC: name, target port ID, service ID, ports, LUN count, enabled.
    pub iocs: Vec<String>,
    /// Per port: name and bound address.
    pub ports: Vec<String>,
}

/// A running target. Dropping it shuts it down.
#[derive(Debug)]
pub struct Daemon {
    // Served first, dropped first: no request waits on a loop that is gone.
    server: Option<CtlServer>,
    stop: Arc<AtomicBool>,
    /// The loop's doorbell: rung to make it see `stop`.
    bell: Arc<Doorbell>,
    control: ControlHandle,
    thread: Option<JoinHandle<()>>,
    events: Receiver<DaemonEvent>,
    started: Started,
    /// What [`Daemon::reload`] re-reads.
    config_path: Option<PathBuf>,
}

impl Daemon {
    /// Starts the target for `config`: every LUN opened, every port bound and listening,
    /// or nothing at all.
    pub fn start(config: TargetConfig, options: DaemonOptions) -> Result<Daemon, DaemonError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (events_tx, events) = sync_channel(EVENT_QUEUE);
        let (ready_tx, ready_rx) = sync_channel(1);
        let bell = Arc::new(Doorbell::new());
        let (control, control_rx) = ControlHandle::pair_with_bell(Some(bell.clone()));
        let socket = options.control_socket.clone();
        let access = options.control_access;
        let config_path = options.config_path.clone();
        let flag = stop.clone();
        let loop_bell = bell.clone();
        let thread = std::thread::Builder::new()
            .name("srpt-daemon".into())
            .spawn(move || {
                match run::Loop::build(&config, &options, events_tx, control_rx, loop_bell) {
                    Ok((mut lp, started)) => {
                        let _ = ready_tx.send(Ok(started));
                        lp.run(&flag);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })?;
        match ready_rx.recv() {
            Ok(Ok(started)) => {
                let mut daemon = Daemon {
                    server: None,
                    stop,
                    bell,
                    control,
                    thread: Some(thread),
                    events,
                    started,
                    config_path: config_path.clone(),
                };
                if let Some(path) = socket {
                    // On error the daemon drops here and shuts down: nothing half-started.
                    let service = TargetService::new(daemon.control(), config_path);
                    daemon.server = Some(serve_control(&path, service, access)?);
                }
                Ok(daemon)
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(DaemonError::Died)
            }
        }
    }

    /// What started.
    pub fn started(&self) -> &Started {
        &self.started
    }

    /// A handle for control requests (lists, counters, IOC and port switches); the
    /// control socket serves the same.
    pub fn control(&self) -> ControlHandle {
        self.control.clone()
    }

    /// Re-reads the configuration file the daemon was started from and applies it live
    /// ([`crate::reload`]): what changed, or why nothing did. What SIGHUP does.
    pub fn reload(&self) -> Result<crate::control::ReloadReport, ControlError> {
        let path = self
            .config_path
            .as_ref()
            .ok_or(ControlError::NoConfigFile)?;
        match self.control.reload_from(path)? {
            ControlAnswer::Reloaded(r) => Ok(r),
            _ => Err(ControlError::Failed("an answer to another request".into())),
        }
    }

    /// Applies `config` live ([`crate::reload`]), as a reload of a file holding it would.
    pub fn apply(
        &self,
        config: TargetConfig,
    ) -> Result<crate::control::ReloadReport, ControlError> {
        match self.control.call_within(
            ControlRequest::Apply(Box::new(config)),
            crate::control::handle::RELOAD_TIMEOUT,
        )? {
            ControlAnswer::Reloaded(r) => Ok(r),
            _ => Err(ControlError::Failed("an answer to another request".into())),
        }
    }

    /// Live device objects of every port, in configuration order: what a leak check
    /// compares.
    pub fn resources(&self) -> Result<Vec<ib_verbs::Resources>, ControlError> {
        match self.control.call(ControlRequest::ListPorts)? {
            ControlAnswer::Ports(p) => Ok(p.into_iter().map(|p| p.resources).collect()),
            _ => Err(ControlError::Stopped),
        }
    }

    /// Logins, rejects and logouts as they happen.
    pub fn events(&self) -> &Receiver<DaemonEvent> {
        &self.events
    }

    /// Whether the loop has exited (after a shutdown).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Sends T_LOGOUT to every live channel, then DREQ to every connection, and waits for
    /// the loop to exit (bounded by twice [`DaemonOptions::shutdown_step`]). Returns the
    /// events not yet read, the shutdown's logouts among them.
    pub fn shutdown(mut self) -> Vec<DaemonEvent> {
        self.stop_and_join();
        self.events.try_iter().collect()
    }

    /// The control socket's path, when one is served.
    pub fn control_socket(&self) -> Option<&std::path::Path> {
        self.server.as_ref().map(CtlServer::path)
    }

    fn stop_and_join(&mut self) {
        self.server = None;
        self.stop.store(true, Ordering::Relaxed);
        self.bell.ring();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Binds the control socket at `path`, replacing a stale file whose daemon is gone.
fn serve_control(
    path: &std::path::Path,
    service: TargetService,
    access: CtlAccess,
) -> Result<CtlServer, DaemonError> {
    let fail = |reason: String| DaemonError::Control {
        path: path.to_path_buf(),
        reason,
    };
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(fail("another daemon is serving it".into()));
        }
        std::fs::remove_file(path)
            .map_err(|e| fail(format!("cannot remove the stale socket: {e}")))?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    }
    // The socket turns IOCs and ports off: root, the daemon's user and the configured group
    // only, with that mode from the moment it exists (`CtlServer::bind_with`).
    CtlServer::bind_with(path, Arc::new(service), access).map_err(|e| fail(e.to_string()))
}
