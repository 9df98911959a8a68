//! [`SrpDriver`]: the SRP initiator as an iSCSI-model driver, on the emulated port of
//! [`crate::port`]. The SRP logic is the `srp::initiator` channel core under the same
//! transport the StorPort miniport runs ([`SrpTransport`]: the soft HCA port, CM, the RC
//! channel, per-I/O FRMR by default, task management, reconnects and the transport
//! timers); what differs is the model around it.
//!
//! Contract (who runs what, at which level):
//! - `initialize` (passive): opens the transport (resources, waits for the verbs), starts
//!   the worker thread and the login; returns the limits (one bus, one target,
//!   `max_luns` LUNs, `max_transfer`, `queue_depth` tags per LU, at most 255). It does not
//!   wait for the login: requests queue in the driver until the channel is up, and the
//!   owner reads [`SrpDriver::status`].
//! - `start_request` (dispatch): queues the request for the worker and wakes it; nothing
//!   else. The worker (`worker`, passive) moves requests into the transport, runs its
//!   completion rounds and completes requests to the port.
//! - `reset` (dispatch): takes every request back from the worker's queue and the
//!   transport (they are the port's to complete BUS_RESET), resets the channel (teardown,
//!   a fresh SINGLE login); a completion the transport produces afterwards for one of them
//!   is dropped, never handed to the port.
//! - `remove` (passive): orderly — waits (bounded by the command timeout) for what the
//!   transport holds, logs out, waits for the channel to close; anything left fails
//!   `SRB_STATUS_NO_DEVICE`. Surprise — the IOC is gone: the channel is abandoned without a
//!   logout and everything fails `SRB_STATUS_NO_DEVICE` at once (a multipath layer fails
//!   over on it).
//! - `power` (passive): D3 — the port drained the driver; the driver logs out and closes
//!   the channel (a kernel client goes down before its HCA). D0 — a fresh login; requests
//!   the port replays wait in the driver until it is up.
//! - `unload` (passive): the worker stops and is joined; the transport is dropped (what
//!   is left of the channel is torn down). A driver dropped without its unload stops and
//!   joins its worker too, so the soft HCA port and its address are always released.
//!
//! The entry points are the driver's own methods (`on_*`), written against the port
//! calls they make ([`IscsiPortCalls`]) with no `std`: the worker is a system thread
//! (`access_layer::verbs::spawn_thread`), its sleeps kernel events, its bounds on the
//! transport's device clock. Under the emulated port ([`crate::port`], `std`) the
//! [`Driver`](crate::port::Driver) implementation hands each entry to its method; a kernel
//! driver's glue would do the same from its IRP handlers.
//!
//! Files: `side` (held requests, wake-ups, completion to the port), `worker` (the worker
//! thread), `entry` (the emulated port's `Driver` over the methods, `std`), [`power`] (the
//! driver in its HCA's power domain: down before it, up after; `std`, as it names the
//! emulated port).

#[cfg(feature = "std")]
mod entry;
#[cfg(feature = "std")]
pub mod power;
mod side;
mod worker;

use crate::model::{
    DriverInfo, InitializeError, IscsiPortCalls, PowerState, REMOVAL_STATUS, Request,
};
use crate::prelude::*;
use access_layer::verbs::{KernelThread, spawn_thread};
use alloc::sync::Arc;
use core::sync::atomic::Ordering::Relaxed;
use core::time::Duration;
use ib_verbs::sync::{Lock, SetOnce};
use side::{PortCalls, Side};
use srp_initiator::{AdapterStatus, SrbExt, SrpAdapterConfig, SrpTransport};
use win_port::SrbStatus;

/// What `initialize` opened.
struct Running {
    side: Arc<Side>,
    transport: Arc<SrpTransport>,
    worker: Lock<Option<Box<dyn KernelThread>>>,
}

/// The SRP initiator driver of the iSCSI model (see the module doc).
pub struct SrpDriver {
    cfg: SrpAdapterConfig,
    running: SetOnce<Running>,
}

impl core::fmt::Debug for SrpDriver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SrpDriver")
            .field("local", &self.cfg.local)
            .field("target", &self.cfg.target)
            .field("started", &self.running.get().is_some())
            .finish()
    }
}

impl SrpDriver {
    /// A driver for the login `cfg` describes (the same configuration the StorPort
    /// miniport's HwFindAdapter takes).
    pub fn new(cfg: SrpAdapterConfig) -> SrpDriver {
        SrpDriver {
            cfg,
            running: SetOnce::new(),
        }
    }

    /// The login it was made for.
    pub fn config(&self) -> &SrpAdapterConfig {
        &self.cfg
    }

    /// The transport, once initialized.
    pub fn transport(&self) -> Option<&SrpTransport> {
        self.running.get().map(|r| &*r.transport)
    }

    /// Port state, logins, losses, the last failure, the negotiated limits (defaults
    /// before `initialize`).
    pub fn status(&self) -> AdapterStatus {
        self.transport()
            .map_or_else(AdapterStatus::default, SrpTransport::status)
    }

    /// For a multipath layer with another path: fail what the channel holds now while it
    /// is down (see [`SrpTransport::fail_fast_now`]).
    pub fn fail_fast_now(&self) {
        if let Some(t) = self.transport() {
            t.fail_fast_now();
        }
    }

    /// Requests the driver holds (its queue and the transport).
    pub fn held(&self) -> usize {
        self.running.get().map_or(0, |r| r.side.held())
    }

    /// Completions the transport produced for requests a reset or removal had already
    /// handed back to the port (dropped, as the model requires).
    pub fn dropped_completions(&self) -> u64 {
        self.running
            .get()
            .map_or(0, |r| r.side.dropped_completions.load(Relaxed))
    }

    /// Start (DriverEntry, AddDevice, IRP_MN_START_DEVICE; passive level): opens the
    /// transport, starts the worker thread and the login; returns the limits. No request
    /// arrives before it returns.
    pub fn on_initialize(&self, port: PortCalls) -> Result<DriverInfo, InitializeError> {
        let memory = port
            .system_memory()
            .ok_or_else(|| InitializeError("the port has no system memory".into()))?;
        let side = Side::new(port, memory).ok_or_else(|| {
            InitializeError("no kernel events to sleep on (install_kernel_wait)".into())
        })?;
        let side = Arc::new(side);
        let transport = SrpTransport::open(self.cfg.clone(), side.clone())
            .map_err(|e| InitializeError(format!("opening the SRP transport: {e}")))?;
        let transport = Arc::new(transport);
        let (s, t, max_wait) = (side.clone(), transport.clone(), self.cfg.max_wait);
        let worker = spawn_thread("srp-iscsi-worker", move || worker::run(s, t, max_wait))
            .map_err(|e| InitializeError(format!("the worker thread: {e}")))?;
        transport.connect();
        let running = Running {
            side,
            transport,
            worker: Lock::new(Some(worker)),
        };
        if !self.running.set(running) {
            return Err(InitializeError("initialized twice".into()));
        }
        Ok(DriverInfo {
            number_of_buses: 1,
            max_targets: 1,
            max_luns: self.cfg.max_luns.max(1),
            max_transfer_bytes: self.cfg.max_transfer as usize,
            tags_per_lu: self.cfg.queue_depth.clamp(1, 255) as u16,
        })
    }

    /// The StartIo-like entry (dispatch level): queues the request for the worker and
    /// wakes it; nothing else. Before `initialize` it fails `NO_HBA`.
    pub fn on_start_request(&self, port: &dyn IscsiPortCalls<SrbExt>, request: Request<SrbExt>) {
        match self.running.get() {
            Some(r) => r.side.queue(request),
            None => {
                request.set_status(SrbStatus::NO_HBA);
                port.complete_request(&request);
            }
        }
    }

    /// A bus reset (dispatch level): takes every request back from the worker's queue and
    /// the transport (they are the port's to complete BUS_RESET) and resets the channel.
    pub fn on_reset(&self, _path_id: u8) -> bool {
        let Some(r) = self.running.get() else {
            return false;
        };
        let _gate = r.side.gate();
        // Everything held becomes the port's (it completes them BUS_RESET after this).
        let (waiting, inside) = r.side.take_all();
        tracing::info!(
            target = %self.cfg.target,
            waiting = waiting.len(),
            inside = inside.len(),
            "bus reset: the channel is reset"
        );
        r.transport.reset()
    }

    /// Removal (passive level; `surprise`: the IOC is gone): completes every request the
    /// driver holds before it returns — finished within the command timeout and then
    /// failed (orderly, with a logout), or failed at once (surprise).
    pub fn on_remove(&self, surprise: bool) {
        let Some(r) = self.running.get() else {
            return;
        };
        if surprise {
            tracing::warn!(target = %self.cfg.target, held = r.side.held(), "surprise removal: the IOC is gone; failing what the driver holds");
            Self::fail_all(r, REMOVAL_STATUS);
            return;
        }
        let bound = self.cfg.cmd_timeout + Duration::from_secs(1);
        if !r
            .side
            .wait_for(bound, || r.transport.now(), || r.side.held() == 0)
        {
            tracing::warn!(target = %self.cfg.target, held = r.side.held(), "removal: requests still held after {bound:?}; failing them");
        }
        Self::fail_all(r, REMOVAL_STATUS);
        Self::logout(r, Duration::from_secs(2));
    }

    /// IRP_MN_SET_POWER (passive level): D3 logs out and closes the channel (the port
    /// drained the driver first); D0 logs in afresh.
    pub fn on_power(&self, state: PowerState) {
        let Some(r) = self.running.get() else {
            return;
        };
        match state {
            PowerState::D3 => Self::logout(r, Duration::from_secs(2)),
            PowerState::D0 => r.transport.restart(),
        }
    }

    /// DriverUnload (passive level): the worker stops and is joined.
    pub fn on_unload(&self) {
        if let Some(r) = self.running.get() {
            r.stop_worker();
        }
    }

    /// Logs out and waits (bounded) for the channel to close.
    fn logout(r: &Running, bound: Duration) {
        r.transport.stop();
        if !r
            .side
            .wait_for(bound, || r.transport.now(), || r.transport.closed())
        {
            tracing::warn!(target = %r.transport.config().target, "the logout did not finish in {bound:?}; the channel is torn down");
        }
    }

    /// Fails every request the driver holds with `status` (removal).
    fn fail_all(r: &Running, status: SrbStatus) {
        let _gate = r.side.gate();
        let (waiting, inside) = r.side.take_all();
        // The transport's completions for these now find nothing held: failed here, once.
        for req in waiting.iter().chain(inside.iter()) {
            req.set_status(status);
            r.side.port.complete_request(req);
        }
        r.transport.abandon(status);
    }
}

impl Running {
    /// Stops the worker and joins it (unload; or the driver dropped without one).
    fn stop_worker(&self) {
        self.side.stop();
        let worker = self.worker.lock().take();
        if let Some(w) = worker {
            w.join();
        }
    }
}

/// A driver dropped without its unload (a port dropped while the device was there, or
/// after a bugcheck) still stops its worker: the thread holds the transport, and with it
/// the soft HCA port and its address.
impl Drop for SrpDriver {
    fn drop(&mut self) {
        if let Some(r) = self.running.get() {
            r.stop_worker();
        }
    }
}
