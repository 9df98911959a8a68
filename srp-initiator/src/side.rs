//! [`PortSide`]: what the SRP channel adapter needs from the port it runs under — the one
//! seam between the model-independent adapter (resources, verbs, CM, the completion rounds
//! over the `srp::initiator` core) and a driver model. The StorPort miniport's side is the
//! port's own services (`PortServices`, crate `srp-initiator-storport`); the iSCSI-model driver's is its worker thread
//! and the held-request table behind `PortHandle` (crate `srp-initiator-iscsi-model`).
//!
//! Every method is callable at dispatch level from any thread, under the adapter lock or
//! not: none blocks and none calls back into the adapter.

use super::SrbExt;
use alloc::sync::Arc;
use win_port::{Srb, SystemMemory};

/// The port as the SRP channel adapter sees it.
pub trait PortSide: Send + Sync + 'static {
    /// The request is finished (status, SCSI status, sense and length set on it): hand it
    /// back to the port (StorPort: `StorPortNotification(RequestComplete)`).
    fn complete(&self, srb: &Srb<SrbExt>);
    /// Run the adapter's completion context soon (StorPort: `StorPortIssueDpc`; the
    /// iSCSI model: wake the driver's worker thread). Called by the device's event
    /// handler (CQ notifications), by asynchronous verbs' completion routines and by
    /// routines that left timers to arm.
    fn wake(&self);
    /// The channel is logging in: new requests are to wait, at most `timeout_secs`
    /// (StorPort: `StorPortPause`).
    fn hold(&self, timeout_secs: u32);
    /// The channel is up again: waiting requests may go (StorPort: `StorPortResume`).
    fn release(&self);
    /// The machine's memory SRB buffers live in.
    fn system_memory(&self) -> Option<Arc<SystemMemory>>;
}
