//! The SRP initiator transport both Windows driver models share: one login to one IOC —
//! the channel adapter (the software HCA, an RDMA device through rdma-core, or the
//! simulator's), the connection manager, the RC channel over the sans-IO `srp::initiator`
//! core, and the registration of the requests' own pages (per-I/O fast registration, or
//! opted into with [`RegistrationMode::TrustTarget`], one region over all of the machine's
//! memory, logged as a warning). Data moves straight between the SRBs' pages and the wire.
//!
//! Contract: a driver model reaches it through [`SrpTransport`] and gives it a
//! [`PortSide`] of its own — the StorPort miniport (`srp-initiator-storport`) its port's
//! services, the iSCSI-model driver (`srp-initiator-iscsi-model`) its worker thread and
//! held-request table. [`SrpTransport::open`] is for passive level; every other call
//! never blocks (dispatch level is fine). Requests come back through
//! [`PortSide::complete`] exactly once, outside the transport's locks. Requests are
//! `win-port` SRBs carrying an [`SrbExt`].
//!
//! What the routines do, by file: `adapter` (resources and locks; the state under the lock
//! split into connection, channel and posting state), `verbs` (QP and CM verbs), `dpc` (the
//! completion context), `io` (BuildIo, StartIo: mapping and submitting), `reset` (a bus or
//! device reset as LUN resets, the channel reset), `control` (management SRBs, logout,
//! restart), `outcome` (SRB status mapping), `pending` (asynchronous verbs' completions),
//! `status` (what [`SrpTransport::status`] reports), `watch` (the IOC's Device Management
//! watch), [`power`] (the transport's HCA in a power domain, and the power IRP's work item). The StorPort-specific contract (which routine calls what at which level) is in
//! `srp-initiator-storport::srp`.
//!
//! Not copied from 2005 (windows.md §1.9): no login inside HwFindAdapter, no whole-memory
//! rkey by default (per-I/O FRMR, direction-narrowed rights, remote invalidation; the 2005
//! region only as the explicit `TrustTarget` mode), non-GOOD status is ERROR +
//! AUTOSENSE_VALID, tags are the core's O(1) slab, a reset completes each SRB and reports
//! success.
//!
//! With no `std` (the default feature off: a kernel driver's build) the crate is `core` +
//! `alloc`: locks are spin locks, the data path's spare lists sit in a shared stash, a
//! passive-level wait sleeps on the kernel event the access layer's glue provides, and the
//! power work item (a thread) is left out.
#![deny(unsafe_code)]
#![no_std]

extern crate alloc;
#[cfg(any(feature = "std", test))]
#[macro_use]
extern crate std;

/// The `alloc` names a `std` crate has in its prelude (`use crate::prelude::*`).
#[allow(unused_imports)]
use ib_verbs::prelude;

mod adapter;
mod control;
mod dpc;
mod io;
mod outcome;
mod pending;
pub mod power;
mod reset;
mod scratch;
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

use crate::prelude::*;
use access_layer::mad::ServiceId;
use access_layer::verbs::{DeviceSpec, Fabric, ProviderKind};
use alloc::sync::Arc;
use core::net::IpAddr;
use core::time::Duration;
use ib_verbs::Guid;
use srp::initiator::TransportTimers;
use srp::wire::PortId;

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
            address: core::net::SocketAddr::new(self.local, 4791),
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
