//! What HW_INITIALIZATION_DATA's routines take and return (windows.md §2.2), and the StorPort
//! calls the SRP miniport makes ([`StorPortCalls`]): the `no_std` half of the miniport's
//! contract. The emulated port ([`crate::port`], `std`) implements the calls with its
//! `PortServices`; a kernel driver's glue implements them over `storport.sys`'s imports.

use crate::srp::{PortSide, SrbExt};
use alloc::sync::Arc;
use core::time::Duration;
use win_port::{LuAddress, Srb};

/// `SP_RETURN_*`: HwFindAdapter's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindAdapterStatus {
    /// `SP_RETURN_FOUND`.
    Found,
    /// `SP_RETURN_NOT_FOUND`.
    NotFound,
    /// `SP_RETURN_ERROR`.
    Error,
    /// `SP_RETURN_BAD_CONFIG`.
    BadConfig,
}

/// `SynchronizationModel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SynchronizationModel {
    /// `StorSynchronizeHalfDuplex` (the StorPort default; StartIo at DIRQL — here the
    /// same dispatch level).
    #[default]
    HalfDuplex,
    /// `StorSynchronizeFullDuplex`.
    FullDuplex,
}

/// The parts of `PORT_CONFIGURATION_INFORMATION` the port enforces. HwFindAdapter must set
/// `maximum_transfer_length` and `number_of_physical_breaks` (non-zero), or the adapter
/// fails to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfigurationInfo {
    /// `MaximumTransferLength` in bytes; longer requests complete `INVALID_REQUEST`.
    pub maximum_transfer_length: u32,
    /// `NumberOfPhysicalBreaks`: a request's list may hold one element more than this.
    pub number_of_physical_breaks: u32,
    /// `NumberOfBuses`: valid PathIds are below it.
    pub number_of_buses: u8,
    /// `MaximumNumberOfTargets`.
    pub maximum_number_of_targets: u8,
    /// `MaximumNumberOfLogicalUnits` per target.
    pub maximum_number_of_logical_units: u8,
    /// `SynchronizationModel`.
    pub synchronization_model: SynchronizationModel,
}

impl Default for PortConfigurationInfo {
    fn default() -> Self {
        PortConfigurationInfo {
            maximum_transfer_length: 0,
            number_of_physical_breaks: 0,
            number_of_buses: 1,
            maximum_number_of_targets: 1,
            maximum_number_of_logical_units: 1,
            synchronization_model: SynchronizationModel::HalfDuplex,
        }
    }
}

/// What `QuerySupportedControlTypes` fills in (QuerySupportedControlTypes itself is
/// always supported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SupportedControlTypes {
    /// `ScsiStopAdapter`.
    pub stop_adapter: bool,
    /// `ScsiRestartAdapter` (without it the port re-runs FindAdapter and Initialize).
    pub restart_adapter: bool,
}

/// `SCSI_ADAPTER_CONTROL_TYPE`, with the query's output buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum AdapterControl<'a> {
    /// `ScsiQuerySupportedControlTypes`.
    QuerySupportedControlTypes(&'a mut SupportedControlTypes),
    /// `ScsiStopAdapter`: I/O is drained first.
    StopAdapter,
    /// `ScsiRestartAdapter`.
    RestartAdapter,
}

/// `SCSI_ADAPTER_CONTROL_STATUS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterControlStatus {
    /// `ScsiAdapterControlSuccess`.
    Success,
    /// `ScsiAdapterControlUnsuccessful`.
    Unsuccessful,
}

/// The StorPort routines the SRP miniport calls on its adapter (their WDK names below).
pub trait StorPortCalls: Send + Sync {
    /// `StorPortIssueDpc`: queues the miniport's DPC routine; whether it was not already
    /// queued.
    fn issue_dpc(&self) -> bool;
    /// `StorPortNotification(RequestTimerCall)`: HwTimer once, `after` from now.
    fn request_timer_call(&self, after: Duration);
    /// `StorPortNotification(RequestComplete)`: `srb` is done.
    fn request_complete(&self, srb: &Srb<SrbExt>);
    /// `StorPortSetDeviceQueueDepth`; whether the port took it.
    fn set_device_queue_depth(&self, lu: LuAddress, depth: u32) -> bool;
    /// The transport's side of this adapter: complete, wake (the DPC), hold and release
    /// (`StorPortPause`/`StorPortResume`), the system memory.
    fn side(&self) -> Arc<dyn PortSide>;
}
