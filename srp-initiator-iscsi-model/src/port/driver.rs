//! [`Driver`]: the entry points the port calls, each at the level it documents. A real
//! driver of this model is DriverEntry + AddDevice + its IRP handlers; here the port
//! calls them as methods on the driver object, which the owner creates and hands to
//! [`Port::start`](super::Port::start).
//!
//! Levels: at [`Level::Dispatch`] an entry must not block (the port traps it, rule a): it
//! may take short spin-lock-like locks, queue work for its threads, complete requests and
//! call any [`PortHandle`] service. At [`Level::Passive`] it may block, wait for its
//! threads, start or join them.

use super::handle::PortHandle;
use crate::model::{DriverInfo, InitializeError, PowerState, Request};

pub use crate::model::Level;

/// A driver of the iSCSI model. The port calls each entry point as documented and never
/// two of [`Driver::start_request`] at once; it calls none after [`Driver::unload`], nor
/// after it bugchecked. Entries never run under a port lock, so any may call the port's
/// services.
pub trait Driver: Send + Sync + Sized + 'static {
    /// The per-request driver state kept in each SRB (`SrbExtensionSize`), zeroed
    /// (`Default`) for each request.
    type Extension: Default + Send + 'static;

    /// DriverEntry, AddDevice and IRP_MN_START_DEVICE, at [`Level::Passive`]: may block,
    /// starts the driver's worker threads, connects its transport. Returns the limits; no
    /// request arrives before it returns.
    fn initialize(&self, port: &PortHandle<Self>) -> Result<DriverInfo, InitializeError>;

    /// The StartIo-like entry, at [`Level::Dispatch`], serialized: takes `request` (its
    /// tag unique among the LU's outstanding requests) and queues it for a worker thread,
    /// which completes it later at passive level. Must not block. May complete the request
    /// right here (e.g. an invalid CDB).
    fn start_request(&self, port: &PortHandle<Self>, request: Request<Self::Extension>);

    /// A bus reset (HwResetBus; the port's answer to a timed-out request, or the owner's),
    /// at [`Level::Dispatch`], with no request being started. The driver drops every
    /// request it holds on bus `path_id` and makes sure its threads complete none of them:
    /// when this returns, the port completes them all with `SRB_STATUS_BUS_RESET`, and a
    /// later completion of one is a violation (rule c). It may complete some here itself.
    /// Returns whether the reset succeeded. Must not block.
    fn reset(&self, port: &PortHandle<Self>, path_id: u8) -> bool;

    /// IRP_MN_REMOVE_DEVICE (`surprise`: IRP_MN_SURPRISE_REMOVAL, the device is already
    /// gone), at [`Level::Passive`]: may block. The port has stopped starting requests and
    /// failed its own queued ones; the driver completes every request it holds — finishing
    /// them (orderly removal) or failing them (surprise) — before it returns: whatever it
    /// still holds then is a violation (rule e).
    fn remove(&self, port: &PortHandle<Self>, surprise: bool);

    /// IRP_MN_SET_POWER, at [`Level::Passive`]: may block. Before [`PowerState::D3`] the
    /// port paused its queue and the driver holds no request; after [`PowerState::D0`] the
    /// port resumes the queue.
    fn power(&self, port: &PortHandle<Self>, state: PowerState);

    /// DriverUnload, at [`Level::Passive`], after removal: stops and joins the driver's
    /// threads. The port calls nothing after it, and a call from the driver into the port
    /// afterwards is a violation.
    fn unload(&self, port: &PortHandle<Self>);
}
