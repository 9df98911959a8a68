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
//! Files: `adapter` (resources and locks), `verbs` (QP and CM verbs),
//! `dpc` (the completion context), `io` (BuildIo, StartIo), `reset` (HwResetBus and
//! RESET_DEVICE as LUN resets, the channel reset), `control` (management SRBs,
//! StopAdapter, RestartAdapter), `outcome` (SRB status mapping),
//! `status` (what [`SrpMiniport::status`] reports).

mod adapter;
mod control;
mod dpc;
mod io;
mod outcome;
mod pending;
mod reset;
mod side;
mod status;
mod transport;
mod verbs;
mod watch;

pub use adapter::OpenError;
pub use reset::ResetCounts;
pub use side::PortSide;
pub use status::{AdapterStatus, LoginFailure};
pub use transport::SrpTransport;

use crate::port::{
    AdapterControl, AdapterControlStatus, FindAdapterStatus, Miniport, PortConfigurationInfo,
    PortServices, Srb, SynchronizationModel,
};
use access_layer::mad::ServiceId;
use access_layer::verbs::{DeviceSpec, Fabric, ProviderKind};
use adapter::Adapter;
use ib_verbs::Guid;
use srp::initiator::TransportTimers;
use srp::wire::PortId;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How data buffers are described to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RegistrationMode {
    /// Per-I/O fast registration (FRMR) with direction-narrowed rights and remote
    /// invalidation; small writes as immediate data.
    #[default]
    PerIo,
    /// One region over all of the machine's memory with remote read and write, registered
    /// once at HwFindAdapter (the 2005 miniport's model): nothing registered or invalidated
    /// per I/O, but the target can reach every page of the host at any time. Logged with a warning; small
    /// writes still go as immediate data. Exempt by design from fencing: an I/O given up
    /// (timeout, abort, reset) keeps no key of its own to invalidate, so a late RDMA access
    /// of the target lands in whatever the buffer holds by then (`tests/srp_fencing.rs`
    /// proves the fence for `PerIo`).
    TrustTarget,
}

/// Which form of login the adapter sends (architecture decision 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoginVia {
    /// The native IB CM form: a REQ to the IOC's service ID (from Device Management)
    /// carrying the 64-byte SRP_LOGIN_REQ.
    #[default]
    IbCm,
    /// The RDMA-CM form, as Linux ib_srp's `dest=ip:port`: a REQ to service ID
    /// `0x0000000001060000 | port` (TCP port space) whose private data is the cma header
    /// (our address and a source port, the target's address) and the 56-byte login. Linux
    /// ib_srpt on a RoCE port accepts only this form.
    RdmaCm {
        /// The target's RDMA-CM port (ib_srpt's `rdma_cm_port`; 5555 by custom).
        port: u16,
    },
}

impl LoginVia {
    /// The core's name for the form.
    pub fn form(self) -> srp::initiator::LoginForm {
        match self {
            LoginVia::IbCm => srp::initiator::LoginForm::IbCm,
            LoginVia::RdmaCm { .. } => srp::initiator::LoginForm::RdmaCm,
        }
    }

    /// Its name in configuration and listings: `ib-cm` or `rdma-cm`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginVia::IbCm => "ib-cm",
            LoginVia::RdmaCm { .. } => "rdma-cm",
        }
    }
}

/// What HwFindAdapter is given: the IOC to log in to, who we are, and where the adapter's
/// channel adapter comes from.
#[derive(Debug, Clone)]
pub struct SrpAdapterConfig {
    /// The local port address (the software HCA binds it; under rdma-core the address
    /// whose GID the RDMA device's port carries).
    pub local: IpAddr,
    /// The target portal address.
    pub target: IpAddr,
    /// The local HCA's node GUID (the low half of the initiator port ID).
    pub node_guid: Guid,
    /// The first QPN of the adapter's software HCA: adapters that share `node_guid` are
    /// ports of one CA to a peer and need QPN ranges of their own (0: the HCA's default).
    pub first_qpn: u32,
    /// The verbs provider, and under rdma-core the device, port and GID index (`None`:
    /// the device and GID holding `local`).
    pub provider: ProviderKind,
    /// See `provider`.
    pub device: Option<String>,
    /// See `provider`.
    pub device_port: Option<u8>,
    /// See `provider`.
    pub gid_index: Option<u8>,
    /// INITIATOR PORT IDENTIFIER.
    pub initiator_port_id: PortId,
    /// TARGET PORT IDENTIFIER (IOC GUID and id_ext).
    pub target_port_id: PortId,
    /// The IOC's service ID (the IB CM form's REQ).
    pub service_id: ServiceId,
    /// Which login form to send.
    pub login_via: LoginVia,
    /// MaximumTransferLength.
    pub max_transfer: u32,
    /// LUNs exposed (MaximumNumberOfLogicalUnits).
    pub max_luns: u8,
    /// Per-LU queue depth set at HwInitialize.
    pub queue_depth: u32,
    /// reconnect_delay, fast_io_fail_tmo, dev_loss_tmo.
    pub timers: TransportTimers,
    /// The core's per-command timeout (abort escalation).
    pub cmd_timeout: Duration,
    /// How long a login may take (also the Pause length while logging in).
    pub login_timeout: Duration,
    /// The longest the adapter's DPC leaves its timer unset (CQ notifications and queued
    /// work queue the DPC; this only bounds how late a lost notification is noticed).
    pub max_wait: Duration,
    /// How data buffers are registered.
    pub registration: RegistrationMode,
    /// The partition to log in on (its P_Key; the default partition, 0xFFFF, unless the
    /// target exports the IOC on another). The adapter's port has this one partition.
    pub partition: ib_verbs::PKey,
    /// Watch the IOC through Device Management on the adapter's own GSI port, sweeping the
    /// target's I/O unit this often (`None`: not watched — StorPort hides device removal
    /// from a miniport). What the sweeps find (the IOC leaving the unit, coming back) comes
    /// out of [`SrpTransport::take_ioc_events`], for a PnP manager.
    pub ioc_watch: Option<Duration>,
    /// Where the adapter's device comes from (the product's fabric, or the whole-stack
    /// simulator's net), and the CM's first communication ID.
    pub fabric: Arc<dyn Fabric>,
}

impl SrpAdapterConfig {
    /// The device HwFindAdapter opens.
    pub fn device_spec(&self) -> DeviceSpec {
        DeviceSpec {
            provider: self.provider,
            address: std::net::SocketAddr::new(self.local, 4791),
            node_guid: self.node_guid,
            device: self.device.clone(),
            port: self.device_port,
            gid_index: self.gid_index,
            first_qpn: self.first_qpn,
            gso: true,
        }
    }
}

/// The SRB extension: what BuildIo prepared for StartIo.
#[derive(Debug, Default)]
pub struct SrbExt {
    prepared: Option<io::Prepared>,
}

/// The device extension.
#[derive(Default)]
pub struct SrpMiniport {
    adapter: OnceLock<SrpTransport>,
}

impl std::fmt::Debug for SrpMiniport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrpMiniport")
            .field("found", &self.adapter.get().is_some())
            .finish()
    }
}

impl SrpMiniport {
    fn adapter(&self) -> Option<&Arc<Adapter>> {
        self.adapter.get().map(|t| &t.a)
    }

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

impl SrpMiniport {
    /// The DPC routine (and HwTimer): rounds while there is work, at most [`DPC_ROUNDS`];
    /// with none left, the CQs armed, a timer call at the next core or CM timer (at most
    /// `max_wait`, a guard against a lost notification).
    fn run_dpc(&self, port: &PortServices<Self>) {
        let Some(a) = self.adapter() else {
            return;
        };
        for _ in 0..DPC_ROUNDS {
            if a.round(port) > 0 {
                continue;
            }
            if let Some(wait) = a.idle(port, a.cfg.max_wait) {
                port.request_timer_call(wait.max(Duration::from_micros(1)));
                return;
            }
        }
        port.issue_dpc();
    }
}

impl Miniport for SrpMiniport {
    type HwContext = SrpAdapterConfig;
    type SrbExtension = SrbExt;

    fn find_adapter(
        &self,
        port: &PortServices<Self>,
        context: &SrpAdapterConfig,
        config: &mut PortConfigurationInfo,
    ) -> FindAdapterStatus {
        config.maximum_transfer_length = context.max_transfer;
        config.number_of_physical_breaks = context.max_transfer / crate::port::PAGE_SIZE as u32;
        config.maximum_number_of_logical_units = context.max_luns;
        config.synchronization_model = SynchronizationModel::FullDuplex;
        if self.adapter.get().is_some() {
            return FindAdapterStatus::Found;
        }
        let a = match Adapter::open(context.clone(), Arc::new(port.clone())) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(%e, local = %context.local, "the adapter could not be opened");
                return FindAdapterStatus::Error;
            }
        };
        if self.adapter.set(SrpTransport { a: Arc::new(a) }).is_err() {
            return FindAdapterStatus::Error;
        }
        FindAdapterStatus::Found
    }

    fn initialize(&self, port: &PortServices<Self>) -> bool {
        let Some(t) = self.transport() else {
            return false;
        };
        for lun in 0..t.config().max_luns {
            port.set_device_queue_depth(
                crate::port::LuAddress::new(0, 0, lun),
                t.config().queue_depth,
            );
        }
        // Paused until the login succeeds; the login's timers are the DPC's.
        t.connect();
        true
    }

    fn build_io(&self, port: &PortServices<Self>, srb: &Srb<SrbExt>) -> bool {
        match self.adapter() {
            Some(a) => a.build_io(port, srb),
            None => {
                srb.set_status(crate::port::SrbStatus::NO_HBA);
                port.request_complete(srb);
                false
            }
        }
    }

    fn start_io(&self, port: &PortServices<Self>, srb: Srb<SrbExt>) -> bool {
        match self.adapter() {
            Some(a) => a.start_io(port, srb),
            None => {
                srb.set_status(crate::port::SrbStatus::NO_HBA);
                port.request_complete(&srb);
                true
            }
        }
    }

    fn reset_bus(&self, port: &PortServices<Self>, _path_id: u8) -> bool {
        self.adapter().is_some_and(|a| a.reset_bus(port))
    }

    fn adapter_control(
        &self,
        port: &PortServices<Self>,
        control: AdapterControl<'_>,
    ) -> AdapterControlStatus {
        match (control, self.adapter()) {
            (AdapterControl::QuerySupportedControlTypes(t), _) => {
                t.stop_adapter = true;
                t.restart_adapter = true;
                AdapterControlStatus::Success
            }
            (AdapterControl::StopAdapter, Some(a)) => {
                a.stop(port);
                AdapterControlStatus::Success
            }
            (AdapterControl::RestartAdapter, Some(a)) => {
                a.restart(port);
                AdapterControlStatus::Success
            }
            _ => AdapterControlStatus::Unsuccessful,
        }
    }

    fn dpc(&self, port: &PortServices<Self>) {
        self.run_dpc(port);
    }

    fn timer(&self, port: &PortServices<Self>) {
        self.run_dpc(port);
    }
}
