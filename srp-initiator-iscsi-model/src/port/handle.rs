//! [`PortHandle`]: the port services a driver calls (ScsiPortNotification and friends).
//! Callable from any thread at any level up to dispatch — the driver's passive worker
//! threads, or inside an entry point; none blocks and none calls into the driver. Once the
//! port is gone they do nothing; after [`Driver::unload`] returned,
//! a call is a [`Violation::CallAfterUnload`](super::Violation::CallAfterUnload).

use super::driver::Driver;
use super::request::{QueueTag, Request};
use super::shared::Shared;
use super::{LuAddress, SrbStatus, SystemMemory};
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// The port as the driver sees it.
pub struct PortHandle<D: Driver> {
    shared: Weak<Shared<D>>,
}

impl<D: Driver> Clone for PortHandle<D> {
    fn clone(&self) -> Self {
        PortHandle {
            shared: self.shared.clone(),
        }
    }
}

impl<D: Driver> fmt::Debug for PortHandle<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PortHandle")
            .field("port_alive", &(self.shared.strong_count() > 0))
            .finish()
    }
}

impl<D: Driver> PortHandle<D> {
    pub(crate) fn new(shared: Weak<Shared<D>>) -> Self {
        PortHandle { shared }
    }

    /// The port, unless it is gone or (a violation) the driver was unloaded.
    fn port(&self, call: &'static str) -> Option<Arc<Shared<D>>> {
        let sh = self.shared.upgrade()?;
        if sh.is_unloaded() {
            sh.after_unload(call);
            return None;
        }
        Some(sh)
    }

    /// `ScsiPortNotification(RequestComplete)`: the request, with the status, SCSI status,
    /// sense and transfer length the driver set on it, goes back to its submitter; the
    /// driver must not touch it again. A second completion (rule d), a completion of a
    /// request a reset or removal flushed (rule c), or of another port's request (rule b)
    /// bugchecks the port, as does a PENDING or INTERNAL_ERROR status.
    pub fn complete_request(&self, request: &Request<D::Extension>) {
        if let Some(sh) = self.port("complete_request") {
            sh.complete_request(request);
        }
    }

    /// Completes the request outstanding under `tag` on `lu` with `status` (set on it
    /// first): for a transport whose response carries only the tag. No such request
    /// outstanding (a tag never given, or one already completed) bugchecks the port
    /// (rule b).
    pub fn complete_tagged(&self, lu: LuAddress, tag: QueueTag, status: SrbStatus) {
        if let Some(sh) = self.port("complete_tagged") {
            sh.complete_tagged(lu, tag, status);
        }
    }

    /// `ScsiPortGetSrb`: the request outstanding under `tag` on `lu`, if any.
    pub fn get_request(&self, lu: LuAddress, tag: QueueTag) -> Option<Request<D::Extension>> {
        let sh = self.port("get_request")?;
        let s = sh.lock();
        Shared::<D>::outstanding_by_tag(&s, lu, tag)
    }

    /// A device (LU) appeared (the driver's transport found it: a login, a report of
    /// LUNs): the owner sees [`PortEvent::DeviceArrived`](super::PortEvent::DeviceArrived),
    /// and requests for it are accepted again if it had gone.
    pub fn notify_device_arrival(&self, lu: LuAddress) {
        if let Some(sh) = self.port("notify_device_arrival") {
            sh.set_lu_gone(lu, false);
        }
    }

    /// A device (LU) is gone: the port fails its waiting requests and refuses new ones
    /// with `SRB_STATUS_NO_DEVICE`, and the owner sees
    /// [`PortEvent::DeviceRemoved`](super::PortEvent::DeviceRemoved). Requests the driver
    /// holds for it are the driver's to complete.
    pub fn notify_device_removal(&self, lu: LuAddress) {
        if let Some(sh) = self.port("notify_device_removal") {
            sh.set_lu_gone(lu, true);
        }
    }

    /// The machine's memory request buffers live in (scatter-gather physical addresses
    /// are byte offsets of its block).
    pub fn system_memory(&self) -> Option<Arc<SystemMemory>> {
        self.port("system_memory").map(|sh| sh.memory.clone())
    }

    /// Now, on the port's clock (the driver's timers should use it, so a virtual clock
    /// governs them too).
    pub fn now(&self) -> Option<Instant> {
        self.port("now").map(|sh| sh.now())
    }
}

/// The emulated port's side of the calls the SRP driver makes (what a kernel driver's glue
/// implements over `ScsiPortNotification`).
impl<D: Driver> crate::model::IscsiPortCalls<D::Extension> for PortHandle<D> {
    fn complete_request(&self, request: &Request<D::Extension>) {
        PortHandle::complete_request(self, request);
    }

    fn system_memory(&self) -> Option<Arc<SystemMemory>> {
        PortHandle::system_memory(self)
    }
}
