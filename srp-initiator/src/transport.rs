//! [`SrpTransport`]: the SRP channel adapter as a driver of another model uses it — one
//! login to one IOC (the soft HCA port, CM, the RC channel over the `srp::initiator` core,
//! registration), the same code the StorPort miniport runs, reached through a
//! [`PortSide`] of the caller's. The iSCSI-model driver (crate
//! `srp-initiator-iscsi-model`) runs it on its worker thread at passive level; the
//! StorPort miniport runs it from its port's routines and DPC.
//!
//! Contract: [`SrpTransport::open`] is for passive level (it creates resources and waits
//! for them); every other call never blocks (dispatch level is fine). Requests it takes
//! come back through [`PortSide::complete`], exactly once, outside its locks; the
//! completion context ([`SrpTransport::round`], [`SrpTransport::idle`]) must run after
//! every [`PortSide::wake`].
#[allow(unused_imports)]
use crate::prelude::*;

use super::adapter::Adapter;
use super::side::PortSide;
use super::status::AdapterStatus;
use super::{OpenError, SrbExt, SrpAdapterConfig, dpc};
use alloc::sync::Arc;
use core::sync::atomic::Ordering::Relaxed;
use core::time::Duration;
use win_port::{Srb, SrbStatus};

/// One SRP login's transport (see the module doc). A clone is another handle on the same
/// login (what a power domain's HCA device keeps).
#[derive(Clone)]
pub struct SrpTransport {
    pub(crate) a: Arc<Adapter>,
}

impl core::fmt::Debug for SrpTransport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SrpTransport")
            .field("local", &self.a.cfg.local)
            .field("target", &self.a.cfg.target)
            .finish_non_exhaustive()
    }
}

impl SrpTransport {
    /// Opens the adapter's resources for `cfg` (passive level: it waits for the verbs),
    /// its requests' completions and wake-ups going to `side`. Does not log in.
    pub fn open(cfg: SrpAdapterConfig, side: Arc<dyn PortSide>) -> Result<Self, OpenError> {
        Ok(SrpTransport {
            a: Arc::new(Adapter::open(cfg, side)?),
        })
    }

    /// Now, on the device's clock (the transport's timers run on it; a driver's bounded
    /// waits should too).
    pub fn now(&self) -> ib_verbs::time::Time {
        self.a.now()
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &SrpAdapterConfig {
        &self.a.cfg
    }

    /// Starts the login (a CM REQ): [`PortSide::hold`] until it succeeds, then
    /// [`PortSide::release`]. The login's timers are the completion context's.
    pub fn connect(&self) {
        let a = &self.a;
        let mut done = dpc::done_list();
        {
            let mut s = a.lock();
            s.ch.paused = true;
            a.port.hold(a.cfg.login_timeout.as_secs().max(1) as u32);
            let now = a.now();
            s.ch.channel.connect(now);
            a.run_actions(&mut s, &*a.port, &mut done);
        }
        dpc::complete_all(&*a.port, done);
        a.port.wake();
    }

    /// Maps an SRB's buffer for [`SrpTransport::submit`]; the status it must complete with
    /// when it cannot go (BUSY: no region free now, try after a completion).
    pub fn prepare(&self, srb: &Srb<SrbExt>) -> Result<(), SrbStatus> {
        self.a.prepare(srb)
    }

    /// HwBuildIo: maps the SRB's buffer and leaves the command ready in its extension, or
    /// completes it (BUSY when no region is free now); true if it is to go to
    /// [`SrpTransport::start_io`].
    pub fn build_io(&self, srb: &Srb<SrbExt>) -> bool {
        self.a.build_io(&*self.a.port, srb)
    }

    /// HwStartIo: starts the SRB — a command, or a management SRB (ABORT_COMMAND,
    /// RESET_LOGICAL_UNIT, RESET_DEVICE) — or completes it (BUSY when the channel cannot
    /// take it now). Always true, as a StartIo returns.
    pub fn start_io(&self, srb: Srb<SrbExt>) -> bool {
        self.a.start_io(&*self.a.port, srb)
    }

    /// HwResetBus: every held SRB completes BUS_RESET now and a LOGICAL UNIT RESET goes to
    /// each known LUN (a channel reset only as the escalation); see `reset`.
    pub fn reset_bus(&self) -> bool {
        self.a.reset_bus(&*self.a.port)
    }

    /// Starts a prepared SRB; gives it back (unprepared, not completed) when the channel
    /// cannot take it now: not logged in, or its queue full.
    pub fn submit(&self, srb: Srb<SrbExt>) -> Option<Srb<SrbExt>> {
        self.a.submit(&*self.a.port, srb)
    }

    /// One round of the completion context (MADs, CM, the CQ, the core's timers, what the
    /// core yields, completions); how much it did, 0 for nothing.
    pub fn round(&self) -> usize {
        self.a.round(&*self.a.port)
    }

    /// After a round that did nothing: arms the completion queues and says how long the
    /// completion context may sleep (until the next timer, at most `max`); `None`: work
    /// came in meanwhile, run a round at once.
    pub fn idle(&self, max: Duration) -> Option<Duration> {
        self.a.idle(&*self.a.port, max)
    }

    /// A channel reset: everything held completes BUS_RESET, the channel is torn down and
    /// a fresh SINGLE login starts (ends our own I_T nexus only; the StorPort miniport's
    /// HwResetBus resets the LUNs instead, see `reset`).
    pub fn reset(&self) -> bool {
        self.a.channel_reset(&*self.a.port)
    }

    /// The device is gone (a surprise removal): the channel is torn down without a logout
    /// and everything held completes with `status`. No reconnect: the core goes LOST.
    pub fn abandon(&self, status: SrbStatus) {
        let a = &self.a;
        let mut done = dpc::done_list();
        {
            let mut s = a.lock();
            a.teardown(&mut s);
            a.flush_held(&mut s, status, &mut done);
            // The core learns the channel is gone, then that it is not to come back.
            let now = a.now();
            s.ch.channel.handle_disconnect(now);
            s.ch.channel.logout(now, Duration::ZERO);
            a.run_actions(&mut s, &*a.port, &mut done);
            if s.ch.paused {
                s.ch.paused = false;
                a.port.release();
            }
        }
        dpc::complete_all(&*a.port, done);
    }

    /// Logs out in order (StopAdapter): what is still held completes REQUEST_FLUSHED,
    /// SRP_I_LOGOUT, the DREQ after the target closes or a short linger (the completion
    /// context's timer). No reconnect.
    pub fn stop(&self) {
        self.a.stop(&*self.a.port);
    }

    /// What is left of the channel goes and a fresh core logs in (RestartAdapter).
    pub fn restart(&self) {
        self.a.restart(&*self.a.port);
    }

    /// What the IOC watch's Device Management sweeps found since the last call (empty
    /// without `ioc_watch`): the unit and the IOCs arriving and leaving, in order, for a
    /// PnP manager (`access_layer::pnp::PnpManager::dm_event`).
    pub fn take_ioc_events(&self) -> Vec<access_layer::dm::DmEvent> {
        self.a
            .lock()
            .link
            .watch
            .as_mut()
            .map(|w| core::mem::take(&mut w.events))
            .unwrap_or_default()
    }

    /// Puts the transport's channel adapter in `state`: in D3 its port is inactive and
    /// drops traffic (the provider's port interface; one that cannot take a real port
    /// down refuses). For a power domain whose client devices (the driver) go down before
    /// it and come up after it.
    pub fn set_hca_power(
        &self,
        state: access_layer::power::PowerState,
    ) -> access_layer::verbs::Completion<()> {
        let active = state == access_layer::power::PowerState::D0;
        access_layer::verbs::Completion::ready(self.a.device.set_active(active))
    }

    /// Whether the transport's channel adapter port is active.
    pub fn hca_port_active(&self) -> bool {
        self.a.device.attr().active
    }

    /// Requests it holds (commands and task management).
    pub fn held(&self) -> usize {
        let s = self.a.lock();
        s.ch.cmds.len() + s.ch.mgmt.len()
    }

    /// Whether nothing of the channel is left (no CM connection, no QP): a logout finished.
    pub fn closed(&self) -> bool {
        let s = self.a.lock();
        s.link.conn.is_none() && s.link.qp.is_none()
    }

    /// The channel core's port state.
    pub fn channel_state(&self) -> srp::initiator::PortState {
        self.a.lock().ch.channel.state()
    }

    /// Buffers mapped so far: (as immediate data, through fast registration).
    pub fn mapped(&self) -> (u64, u64) {
        (self.a.mapped.0.load(Relaxed), self.a.mapped.1.load(Relaxed))
    }

    /// Buffers described through the all-memory region (TrustTarget) so far.
    pub fn mapped_all_memory(&self) -> u64 {
        self.a.mapped_all_memory.load(Relaxed)
    }

    /// Port state, login and loss counts, the last failure, the negotiated limits, the
    /// HCA port's counters.
    pub fn status(&self) -> AdapterStatus {
        let a = &self.a;
        // Not nested: the adapter lock is dropped before the status lock is taken.
        let state = a.lock().ch.channel.state();
        let hca = a.device.counters();
        let device = a.device.identity().to_string();
        let fencing = a.reg().fencing().as_str();
        a.status()
            .snapshot(state, a.cfg.login_via.as_str(), device, fencing, hca)
    }

    /// For a multipath layer with another path: while the channel is down and holding I/O,
    /// fail what it holds now, as at fast_io_fail (the core's `fail_fast_now`); the
    /// completion context completes those SRBs with SELECTION_TIMEOUT at its next round.
    /// Reconnects go on.
    pub fn fail_fast_now(&self) {
        let now = self.a.now();
        self.a.lock().ch.channel.fail_fast_now(now);
        self.a.port.wake();
    }

    /// How the adapter used its channel adapter's verbs.
    pub fn verbs(&self) -> access_layer::verbs::CaStats {
        self.a.ca.stats()
    }

    /// What bus and device resets did (LUN resets sent, refused, escalated).
    pub fn resets(&self) -> super::ResetCounts {
        self.a.resets.snapshot()
    }

    /// Held commands whose buffers were registered again after a reconnect.
    pub fn remapped(&self) -> u64 {
        self.a.remapped.load(Relaxed)
    }

    /// Free pages of system memory and regions of the FRMR pool in each state.
    pub fn resources(&self) -> (usize, srp::initiator::registration::PoolCounts) {
        (self.a.memory.free_pages(), self.a.reg().counts())
    }
}
