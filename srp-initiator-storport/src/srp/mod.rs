//! The SRP miniport: [`SrpMiniport`], written as a StorPort miniport is, over the sans-IO
//! initiator channel core of `srp` and its per-I/O fast registration (or, opted into with
//! [`RegistrationMode::TrustTarget`], one region over all of the machine's memory, logged
//! as a warning). Data moves straight between the SRBs' own pages and the wire.
//! [`SrpMiniport::status`] reports the port state, logins, losses, the last failure and the
//! negotiated limits to a host daemon.
//!
//! Contract (who runs what, at which level):
//! - HwFindAdapter (passive): one adapter per IOC, named by [`SrpAdapterConfig`]; opens the
//!   soft HCA port, the GSI port and CM endpoint, the CQ, the control memory and the FRMR
//!   pool (its page lists name the SRBs' pages in the port's system memory); the device's event handler (the "ISR") queues the miniport's DPC
//!   with StorPortIssueDpc. Sets MaximumTransferLength and NumberOfPhysicalBreaks from the
//!   config.
//! - HwInitialize (dispatch): pauses the adapter and starts the login (the core's
//!   `connect` → a CM REQ); never waits. The first LOGIN_RSP resumes the adapter.
//! - The DPC routine (dispatch, on the port's one DPC; HwTimer runs the same): rounds (see
//!   `dpc`) feeding the core and completing SRBs with RequestComplete — their submitters'
//!   completion routines run next on the same thread. With nothing left it arms the CQs
//!   and asks for a timer call at the core's or CM's next timer; a CQ notification queues
//!   it again. One DPC per adapter: no thread of the miniport's own.
//! - HwBuildIo / HwStartIo: see `io`. Nothing blocks; exhaustion is BUSY.
//! - HwResetBus: every held SRB completes BUS_RESET at once (their regions invalidated),
//!   the adapter pauses, and a LOGICAL UNIT RESET goes to each LUN the adapter knows, so
//!   another initiator's SCSI-2 reservation is broken as Windows clusters expect; the
//!   adapter resumes with the last answer. A channel reset only as the escalation. See
//!   `reset`.
//! - Management SRBs (dispatch, from StartIo): ABORT_COMMAND → SRP_TSK_MGMT ABORT TASK (the
//!   named SRB completes ABORTED, the abort SUCCESS; an SRB already completed →
//!   ABORT_FAILED), RESET_LOGICAL_UNIT → LOGICAL UNIT RESET (the LU's SRBs complete
//!   BUS_RESET), RESET_DEVICE → a LOGICAL UNIT RESET of each known LUN (SRP has no
//!   TARGET RESET); see `control` and `reset`.
//! - HwAdapterControl (dispatch): StopAdapter logs out (SRP_I_LOGOUT, then the DREQ once the
//!   target closes or a bounded linger passes, finished by the DPC) and stops
//!   reconnecting; RestartAdapter logs in with a fresh core. Both reported supported.
//! - Not copied from 2005 (windows.md §1.9): no login inside HwFindAdapter, no whole-memory
//!   rkey by default (per-I/O FRMR, direction-narrowed rights, remote invalidation; the
//!   2005 region only as the explicit `TrustTarget` mode), non-GOOD status
//!   is ERROR + AUTOSENSE_VALID, tags are the core's O(1) slab, the reset completes each
//!   SRB by RequestComplete and reports success, not StorPortCompleteRequest(SP_UNTAGGED).
//!
//! The transport itself (resources, verbs, the completion rounds, resets, logout: files
//! `adapter`, `verbs`, `dpc`, `io`, `reset`, `control`, `outcome`, `status`) is the crate
//! `srp-initiator`, which the iSCSI-model driver shares; this module is the miniport's
//! face of it: [`SrpMiniport`] and the port's services as the transport's [`PortSide`].

#[cfg(feature = "std")]
pub mod power;

pub use srp_initiator::{
    AdapterStatus, LoginFailure, LoginVia, OpenError, PortSide, RegistrationMode, ResetCounts,
    SrbExt, SrpAdapterConfig, SrpTransport,
};

use crate::hw::{
    AdapterControl, AdapterControlStatus, FindAdapterStatus, PortConfigurationInfo, StorPortCalls,
    SynchronizationModel,
};
#[cfg(feature = "std")]
use crate::port::{Miniport, PortServices, SystemMemory};
#[cfg(feature = "std")]
use alloc::sync::Arc;
use core::time::Duration;
use ib_verbs::sync::SetOnce;
use win_port::{LuAddress, PAGE_SIZE, Srb, SrbStatus};

/// The device extension.
#[derive(Default)]
pub struct SrpMiniport {
    adapter: SetOnce<SrpTransport>,
}

impl core::fmt::Debug for SrpMiniport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SrpMiniport")
            .field("found", &self.adapter.get().is_some())
            .finish()
    }
}

impl SrpMiniport {
    /// The adapter's transport, once HwFindAdapter opened it.
    pub fn transport(&self) -> Option<&SrpTransport> {
        self.adapter.get()
    }

    /// The channel core's port state (for tests and displays).
    pub fn channel_state(&self) -> Option<srp::initiator::PortState> {
        self.transport().map(SrpTransport::channel_state)
    }

    /// Buffers BuildIo mapped so far: (as immediate data, through fast registration).
    pub fn mapped(&self) -> (u64, u64) {
        self.transport().map_or((0, 0), SrpTransport::mapped)
    }

    /// Buffers BuildIo described through the all-memory region
    /// ([`RegistrationMode::TrustTarget`]) so far.
    pub fn mapped_all_memory(&self) -> u64 {
        self.transport().map_or(0, SrpTransport::mapped_all_memory)
    }

    /// The adapter's state for a host daemon: port state, login and loss counts, the last
    /// failure and the negotiated limits. All defaults before HwFindAdapter.
    pub fn status(&self) -> AdapterStatus {
        self.transport()
            .map_or_else(AdapterStatus::default, SrpTransport::status)
    }

    /// See [`SrpTransport::fail_fast_now`].
    pub fn fail_fast_now(&self) {
        if let Some(t) = self.transport() {
            t.fail_fast_now();
        }
    }

    /// How the adapter used its channel adapter's verbs (resource verbs started at
    /// dispatch level, CQ notifications, routine panics); `None` before HwFindAdapter.
    pub fn verbs(&self) -> Option<access_layer::verbs::CaStats> {
        self.transport().map(SrpTransport::verbs)
    }

    /// What bus and device resets did (`reset`): LUN resets sent, refused, escalated.
    pub fn resets(&self) -> ResetCounts {
        self.transport()
            .map_or_else(ResetCounts::default, SrpTransport::resets)
    }

    /// Held commands whose buffers were registered again after a reconnect.
    pub fn remapped(&self) -> u64 {
        self.transport().map_or(0, SrpTransport::remapped)
    }

    /// Free pages of system memory and regions of the FRMR pool in each state (all zero
    /// under [`RegistrationMode::TrustTarget`]).
    pub fn resources(&self) -> Option<(usize, srp::initiator::registration::PoolCounts)> {
        self.transport().map(SrpTransport::resources)
    }
}

/// Rounds one DPC runs before it yields (queues itself again), so completions reach
/// their submitters and new requests start between bursts.
const DPC_ROUNDS: usize = 8;

/// The HW_INITIALIZATION_DATA routines, written against the StorPort calls they make
/// ([`StorPortCalls`]): the emulated port reaches them through [`Miniport`] (`std`), a
/// kernel driver's glue through these directly.
impl SrpMiniport {
    /// The DPC routine (and HwTimer): rounds while there is work, at most `DPC_ROUNDS` (8);
    /// with none left, the CQs armed, a timer call at the next core or CM timer (at most
    /// `max_wait`, a guard against a lost notification). Still busy after its rounds, it
    /// queues itself again.
    pub fn hw_dpc(&self, port: &dyn StorPortCalls) {
        let Some(t) = self.transport() else {
            return;
        };
        for _ in 0..DPC_ROUNDS {
            if t.round() > 0 {
                continue;
            }
            if let Some(wait) = t.idle(t.config().max_wait) {
                port.request_timer_call(wait.max(Duration::from_micros(1)));
                return;
            }
        }
        port.issue_dpc();
    }

    /// HwFindAdapter (passive): the limits into `config`, then the adapter's transport
    /// opened from `context` (once: a second call finds it open).
    pub fn hw_find_adapter(
        &self,
        port: &dyn StorPortCalls,
        context: &SrpAdapterConfig,
        config: &mut PortConfigurationInfo,
    ) -> FindAdapterStatus {
        config.maximum_transfer_length = context.max_transfer;
        config.number_of_physical_breaks = context.max_transfer / PAGE_SIZE as u32;
        config.maximum_number_of_logical_units = context.max_luns;
        config.synchronization_model = SynchronizationModel::FullDuplex;
        if self.adapter.get().is_some() {
            return FindAdapterStatus::Found;
        }
        let t = match SrpTransport::open(context.clone(), port.side()) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(%e, local = %context.local, "the adapter could not be opened");
                return FindAdapterStatus::Error;
            }
        };
        if !self.adapter.set(t) {
            return FindAdapterStatus::Error;
        }
        FindAdapterStatus::Found
    }

    /// HwInitialize (dispatch): each LU's queue depth, then the login started (the adapter
    /// paused until it succeeds); false with no adapter.
    pub fn hw_initialize(&self, port: &dyn StorPortCalls) -> bool {
        let Some(t) = self.transport() else {
            return false;
        };
        for lun in 0..t.config().max_luns {
            port.set_device_queue_depth(LuAddress::new(0, 0, lun), t.config().queue_depth);
        }
        // Paused until the login succeeds; the login's timers are the DPC's.
        t.connect();
        true
    }

    /// HwBuildIo (dispatch, concurrent): the SRB mapped, or completed NO_HBA with no
    /// adapter (false: already completed).
    pub fn hw_build_io(&self, port: &dyn StorPortCalls, srb: &Srb<SrbExt>) -> bool {
        match self.transport() {
            Some(t) => t.build_io(srb),
            None => {
                srb.set_status(SrbStatus::NO_HBA);
                port.request_complete(srb);
                false
            }
        }
    }

    /// HwStartIo (dispatch, serialized): the SRB handed to the channel, or completed
    /// NO_HBA with no adapter.
    pub fn hw_start_io(&self, port: &dyn StorPortCalls, srb: Srb<SrbExt>) -> bool {
        match self.transport() {
            Some(t) => t.start_io(srb),
            None => {
                srb.set_status(SrbStatus::NO_HBA);
                port.request_complete(&srb);
                true
            }
        }
    }

    /// HwResetBus (dispatch): see the module contract; false with no adapter.
    pub fn hw_reset_bus(&self, _path_id: u8) -> bool {
        self.transport().is_some_and(SrpTransport::reset_bus)
    }

    /// HwAdapterControl: both controls supported; StopAdapter logs out, RestartAdapter
    /// logs in again.
    pub fn hw_adapter_control(&self, control: AdapterControl<'_>) -> AdapterControlStatus {
        match (control, self.transport()) {
            (AdapterControl::QuerySupportedControlTypes(t), _) => {
                t.stop_adapter = true;
                t.restart_adapter = true;
                AdapterControlStatus::Success
            }
            (AdapterControl::StopAdapter, Some(t)) => {
                t.stop();
                AdapterControlStatus::Success
            }
            (AdapterControl::RestartAdapter, Some(t)) => {
                t.restart();
                AdapterControlStatus::Success
            }
            _ => AdapterControlStatus::Unsuccessful,
        }
    }
}

/// The emulated port's face of the routines above.
#[cfg(feature = "std")]
impl Miniport for SrpMiniport {
    type HwContext = SrpAdapterConfig;
    type SrbExtension = SrbExt;

    fn find_adapter(
        &self,
        port: &PortServices<Self>,
        context: &SrpAdapterConfig,
        config: &mut PortConfigurationInfo,
    ) -> FindAdapterStatus {
        self.hw_find_adapter(port, context, config)
    }

    fn initialize(&self, port: &PortServices<Self>) -> bool {
        self.hw_initialize(port)
    }

    fn build_io(&self, port: &PortServices<Self>, srb: &Srb<SrbExt>) -> bool {
        self.hw_build_io(port, srb)
    }

    fn start_io(&self, port: &PortServices<Self>, srb: Srb<SrbExt>) -> bool {
        self.hw_start_io(port, srb)
    }

    fn reset_bus(&self, _port: &PortServices<Self>, path_id: u8) -> bool {
        self.hw_reset_bus(path_id)
    }

    fn adapter_control(
        &self,
        _port: &PortServices<Self>,
        control: AdapterControl<'_>,
    ) -> AdapterControlStatus {
        self.hw_adapter_control(control)
    }

    fn dpc(&self, port: &PortServices<Self>) {
        self.hw_dpc(port);
    }

    fn timer(&self, port: &PortServices<Self>) {
        self.hw_dpc(port);
    }
}

/// The emulated port's StorPort calls (`PortServices`), as the routines make them.
#[cfg(feature = "std")]
impl StorPortCalls for PortServices<SrpMiniport> {
    fn issue_dpc(&self) -> bool {
        PortServices::issue_dpc(self)
    }

    fn request_timer_call(&self, after: Duration) {
        PortServices::request_timer_call(self, after);
    }

    fn request_complete(&self, srb: &Srb<SrbExt>) {
        PortServices::request_complete(self, srb);
    }

    fn set_device_queue_depth(&self, lu: LuAddress, depth: u32) -> bool {
        PortServices::set_device_queue_depth(self, lu, depth)
    }

    fn side(&self) -> Arc<dyn PortSide> {
        Arc::new(self.clone())
    }
}

#[cfg(feature = "std")]
impl PortSide for PortServices<SrpMiniport> {
    fn complete(&self, srb: &Srb<SrbExt>) {
        self.request_complete(srb);
    }

    fn wake(&self) {
        self.issue_dpc();
    }

    fn hold(&self, timeout_secs: u32) {
        self.pause(timeout_secs);
    }

    fn release(&self) {
        self.resume();
    }

    fn system_memory(&self) -> Option<Arc<SystemMemory>> {
        PortServices::system_memory(self)
    }
}
