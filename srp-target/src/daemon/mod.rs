//! The target daemon: the appliance served over CM logins on every configured port.
//!
//! [`Daemon::start`] builds the [`Appliance`](crate::appliance::Appliance) (every LUN
//! opened), opens one soft [`hca::driver::Hca`] per `[[port]]` address with a GSI port and a
//! CM endpoint on it, and listens on each IOC's service ID (native IB CM login form) and on
//! the RDMA-CM service ID of TCP port `[target] rdma_cm_port` (or
//! [`DaemonOptions::rdma_cm_port`]; default [`DEFAULT_RDMA_CM_PORT`], 5555), the port Linux
//! `ib_srp ... dest=ip:port` logins name.
//! Then one thread runs the loop: CM MADs in and out, logins decided and answered, every
//! live [`ChannelIo`](crate::io::ChannelIo) polled, closed channels forgotten. Backend I/O
//! runs on a bounded [`Workers`](crate::io::Workers) pool. [`Daemon::shutdown`] sends
//! SRP_T_LOGOUT on every live channel, then a DREQ on every connection, then stops, each
//! step bounded in time.
//!
//! Files: [`dm`] (each port's Device Management agent: the IOCs reachable on it), [`event`] (what the daemon reports: logins, rejects, logouts), [`port`] (one HCA
//! port: device, GSI, CM), [`login`] (a CM REQ to an answer and a channel), `run` (the loop
//! and shutdown).

pub mod dm;
pub mod event;
pub mod login;
pub mod port;
mod run;

pub use event::DaemonEvent;

use crate::appliance::{ChannelLimits, StartErrors};
use crate::config::TargetConfig;
use std::net::SocketAddr;
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
const EVENT_QUEUE: usize = 4096;

/// How the daemon runs, beyond the configuration file.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// RDMA-CM TCP port of RDMA-CM-form logins, overriding `[target] rdma_cm_port`.
    pub rdma_cm_port: Option<u16>,
    /// Channel limits of every IOC.
    pub limits: ChannelLimits,
    /// Backend worker threads.
    pub workers: usize,
    /// Backend jobs queued before commands are answered BUSY.
    pub queue: usize,
    /// How long shutdown waits for T_LOGOUTs to be sent, and then for DREPs.
    pub shutdown_step: Duration,
}

impl Default for DaemonOptions {
    fn default() -> DaemonOptions {
        DaemonOptions {
            rdma_cm_port: None,
            limits: ChannelLimits {
                window: DEFAULT_WINDOW,
                max_transfer: DEFAULT_MAX_TRANSFER,
                max_table_entries: (DEFAULT_MAX_TRANSFER / 4096) as usize,
                ..ChannelLimits::default()
            },
            workers: 4,
            queue: 256,
            shutdown_step: Duration::from_secs(2),
        }
    }
}

/// Why the daemon did not start. Nothing is left running when it did not.
#[derive(Debug, Error)]
pub enum DaemonError {
    /// A LUN could not be opened.
    #[error("{0}")]
    Appliance(StartErrors),
    /// A port's HCA could not be opened.
    #[error("port {name} ({address}): {source}")]
    Hca {
        /// The port's name.
        name: String,
        /// Its address.
        address: SocketAddr,
        /// Why.
        source: hca::driver::DriverError,
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
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    events: Receiver<DaemonEvent>,
    started: Started,
}

impl Daemon {
    /// Starts the target for `config`: every LUN opened, every port bound and listening,
    /// or nothing at all.
    pub fn start(config: TargetConfig, options: DaemonOptions) -> Result<Daemon, DaemonError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (events_tx, events) = sync_channel(EVENT_QUEUE);
        let (ready_tx, ready_rx) = sync_channel(1);
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("srpt-daemon".into())
            .spawn(
                move || match run::Loop::build(&config, &options, events_tx) {
                    Ok((mut lp, started)) => {
                        let _ = ready_tx.send(Ok(started));
                        lp.run(&flag);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                },
            )?;
        match ready_rx.recv() {
            Ok(Ok(started)) => Ok(Daemon {
                stop,
                thread: Some(thread),
                events,
                started,
            }),
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

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
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
