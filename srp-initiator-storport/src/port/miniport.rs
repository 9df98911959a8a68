//! The miniport side of the contract: the HW_INITIALIZATION_DATA routines (windows.md §2.2)
//! as the [`Miniport`] trait, implemented by the miniport's device extension.
//!
//! How the port calls them (windows.md §2.1, enforced):
//! - `find_adapter` at passive level on start (no locks); on a restart of a miniport that
//!   does not support `RestartAdapter`, again — at dispatch level, as StorPort does. The
//!   extension is created once (`Default`, the zeroed extension) and not re-zeroed.
//! - `initialize` once after each `find_adapter`, at dispatch level (stands for DIRQL).
//! - `build_io` at dispatch level with no port lock held; several run at once on several
//!   threads. Returning false means the miniport already completed the SRB.
//! - `start_io` at dispatch level under the port's StartIo lock: never two at once.
//! - `reset_bus` at dispatch level with the adapter's queues held and the StartIo lock
//!   taken; the miniport must complete every SRB it holds on that path with
//!   `SRB_STATUS_BUS_RESET` before returning.
//! - `adapter_control`: `QuerySupportedControlTypes` at passive level, `StopAdapter` and
//!   `RestartAdapter` at dispatch level (stands for DIRQL under the interrupt lock).
//!
//! At dispatch level nothing may block: the port's verifier traps blocking calls made
//! through [`super::ke`] (and `access-layer`'s blocking calls), and a DPC watchdog catches
//! a routine that blocks in any other way. The miniport is never told that a LU went away.

use super::services::PortServices;
use super::srb::Srb;
pub use crate::hw::{
    AdapterControl, AdapterControlStatus, FindAdapterStatus, PortConfigurationInfo,
    SupportedControlTypes, SynchronizationModel,
};

/// A StorPort miniport: `Self` is the device extension, one per adapter.
pub trait Miniport: Default + Send + Sync + Sized + 'static {
    /// What HwFindAdapter is given to find its adapter (HwContext / ArgumentString).
    type HwContext: Send + Sync + 'static;
    /// The SRB extension: per-request scratch, zeroed for each request.
    type SrbExtension: Default + Send + 'static;

    /// HwFindAdapter.
    fn find_adapter(
        &self,
        port: &PortServices<Self>,
        context: &Self::HwContext,
        config: &mut PortConfigurationInfo,
    ) -> FindAdapterStatus;

    /// HwInitialize; false fails the start.
    fn initialize(&self, port: &PortServices<Self>) -> bool;

    /// HwBuildIo; false when the miniport completed the SRB itself.
    fn build_io(&self, port: &PortServices<Self>, srb: &Srb<Self::SrbExtension>) -> bool;

    /// HwStartIo; the miniport now owns the SRB until it completes it.
    fn start_io(&self, port: &PortServices<Self>, srb: Srb<Self::SrbExtension>) -> bool;

    /// HwResetBus; true on success.
    fn reset_bus(&self, port: &PortServices<Self>, path_id: u8) -> bool;

    /// HwAdapterControl.
    fn adapter_control(
        &self,
        port: &PortServices<Self>,
        control: AdapterControl<'_>,
    ) -> AdapterControlStatus;

    /// The miniport's DPC routine (`HW_DPC_ROUTINE`, set up by `StorPortInitializeDpc`):
    /// run on the port's DPC at dispatch level once queued with
    /// [`PortServices::issue_dpc`] (`StorPortIssueDpc`, what an interrupt handler calls).
    /// Requests it completes reach their submitters from the same DPC, without another
    /// thread hop. None by default.
    fn dpc(&self, _port: &PortServices<Self>) {}

    /// HwTimer: run on the port's DPC at dispatch level once the delay given to
    /// [`PortServices::request_timer_call`] passed. None by default.
    fn timer(&self, _port: &PortServices<Self>) {}
}
