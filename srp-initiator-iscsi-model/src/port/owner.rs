//! [`Port`]: the port's owner-facing side — start (the driver's initialize), the
//! submitter's entry points, the queue's pause and resume, power, bus resets on request,
//! removal (orderly and surprise), unload, and what the verifier saw. Every owner call
//! that may wait (start, removal, power, reset, unload) is for passive level; from
//! dispatch level it is refused.

use super::driver::Driver;
use super::lifecycle::{LifeEvent, Lifecycle};
use super::queue::Queued;
use super::request::{FlushCause, QueueTag};
use super::shared::Shared;
use super::verifier::{EntryPoint, Violation};
use super::{
    DataBuffer, DataDirection, LuAddress, MemoryError, PortConfig, PortError, PortEvent,
    REMOVAL_STATUS, ResetCause, SrbData, SrbFunction, SrbId, SrbOwner, SrbRequest, SrbResult,
    SrbStatus, SystemMemory, timer,
};
use crate::model::{DriverInfo, PowerState};
use access_layer::verbs::{Completion, verifier as al_verifier};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// One LU's queue, as the port sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LuStats {
    /// Waiting in the port.
    pub waiting: usize,
    /// In the driver.
    pub outstanding: usize,
    /// Tags in use (outstanding, and reserved by waiting requests that named theirs).
    pub tags_in_use: usize,
    /// The driver reported the device gone.
    pub gone: bool,
}

/// A device under the emulated iSCSI-model port (see the module doc of [`super`]).
pub struct Port<D: Driver> {
    shared: Arc<Shared<D>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl<D: Driver> std::fmt::Debug for Port<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("state", &self.state())
            .field("outstanding", &self.outstanding())
            .finish_non_exhaustive()
    }
}

/// Refuses an owner call that may wait, from dispatch level.
fn passive(call: &'static str) -> Result<(), PortError> {
    al_verifier::may_block(call).map_err(|_| PortError::BlockingAtDispatch(call))
}

/// Checks what no SRB can carry.
fn validate(req: &SrbRequest) -> Result<(), PortError> {
    if req.function == SrbFunction::ExecuteScsi && !(1..=16).contains(&req.cdb.len()) {
        return Err(PortError::BadRequest(
            "an EXECUTE_SCSI CDB has 1 to 16 bytes",
        ));
    }
    if (req.direction == DataDirection::None) != req.data.is_empty() {
        return Err(PortError::BadRequest(
            "a data buffer needs a direction and a direction needs a buffer",
        ));
    }
    Ok(())
}

/// Checks the driver's limits.
fn check_info(info: &DriverInfo) -> Result<(), PortError> {
    if !(1..=QueueTag::COUNT).contains(&info.tags_per_lu) {
        return Err(PortError::BadInfo("tags_per_lu must be 1 to 255"));
    }
    if info.max_transfer_bytes == 0 {
        return Err(PortError::BadInfo("max_transfer_bytes must not be 0"));
    }
    if info.number_of_buses == 0 || info.max_targets == 0 || info.max_luns == 0 {
        return Err(PortError::BadInfo("buses, targets and LUNs must not be 0"));
    }
    Ok(())
}

/// The status a request the device cannot take completes with at once, if any.
fn refusal(info: &DriverInfo, a: LuAddress, len: usize, gone: bool) -> Option<SrbStatus> {
    if a.path_id >= info.number_of_buses {
        Some(SrbStatus::INVALID_PATH_ID)
    } else if a.target_id >= info.max_targets {
        Some(SrbStatus::INVALID_TARGET_ID)
    } else if a.lun >= info.max_luns {
        Some(SrbStatus::INVALID_LUN)
    } else if len > info.max_transfer_bytes {
        Some(SrbStatus::INVALID_REQUEST)
    } else if gone {
        Some(SrbStatus::NO_DEVICE)
    } else {
        None
    }
}

impl<D: Driver> Port<D> {
    /// Runs the driver's initialize at passive level (it may block: connect, log in) and
    /// starts the port's threads.
    pub fn start(driver: D, config: PortConfig) -> Result<Port<D>, PortError> {
        passive("Port::start")?;
        let shared = Arc::new_cyclic(|me| Shared::new(driver, config, me.clone()));
        let handle = shared.handle();
        let info = shared
            .call(EntryPoint::Initialize, || shared.driver.initialize(&handle))
            .map_err(|v| shared.fail(v))??;
        check_info(&info)?;
        {
            let mut s = shared.lock();
            s.info = info;
            s.queues.depth = usize::from(info.tags_per_lu);
            Shared::<D>::transition(&mut s, LifeEvent::Started)?;
        }
        let mut threads = Vec::new();
        for (name, body) in [
            ("iscsiport-dpc", timer::run_dpc::<D> as fn(Arc<Shared<D>>)),
            ("iscsiport-timer", timer::run_timer::<D>),
        ] {
            let sh = shared.clone();
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || body(sh))
                .map_err(|e| PortError::Spawn(e.to_string()))?;
            threads.push(t);
        }
        Ok(Port {
            shared,
            threads: Mutex::new(threads),
        })
    }

    /// Submits a request: the port assigns its tag when it starts it. The completion gets
    /// the result exactly once. Bad addresses, oversized transfers and devices the driver
    /// reported gone complete at once with the SRB status SCSIport uses; while the port is
    /// paused or powered down the request waits; during and after removal it is refused.
    pub fn submit(&self, request: SrbRequest) -> Result<Completion<SrbResult>, PortError> {
        self.submit_inner(request, None)
    }

    /// Submits a request under the submitter's own `tag` (rule b): refused with
    /// [`PortError::TagInUse`] while another request of the LU — waiting or in the driver
    /// — holds that tag.
    pub fn submit_tagged(
        &self,
        request: SrbRequest,
        tag: QueueTag,
    ) -> Result<Completion<SrbResult>, PortError> {
        if tag == QueueTag::UNTAGGED {
            return Err(PortError::BadRequest("SP_UNTAGGED (255) is not a tag"));
        }
        self.submit_inner(request, Some(tag))
    }

    fn submit_inner(
        &self,
        mut request: SrbRequest,
        tag: Option<QueueTag>,
    ) -> Result<Completion<SrbResult>, PortError> {
        validate(&request)?;
        let sh = &self.shared;
        if sh.is_bugchecked() {
            return Err(PortError::BugChecked);
        }
        let data = match std::mem::take(&mut request.data) {
            SrbData::Buffer(b) if b.memory().is_some_and(|m| !Arc::ptr_eq(m, &sh.memory)) => {
                return Err(PortError::ForeignBuffer);
            }
            SrbData::Buffer(b) => b,
            SrbData::Bytes(v) => sh.memory.alloc_from(&v)?,
        };
        let lu = request.address;
        let len = data.len();
        let owner = SrbOwner::from_lookaside(&sh.lookaside, sh.next_id(), request, data);
        let (completer, completion) = sh.completions.pair();
        let item = Queued {
            owner,
            tag,
            completer,
        };
        let mut s = sh.lock();
        match s.life {
            Lifecycle::BugChecked => return Err(PortError::BugChecked),
            life if !life.accepts() => return Err(PortError::NotAccepting(life)),
            _ => {}
        }
        let gone = s.queues.lus.get(&lu).is_some_and(|q| q.gone);
        if let Some(status) = refusal(&s.info, lu, len, gone) {
            Shared::<D>::fail_queued(&mut s, item, status);
            drop(s);
            sh.deliver();
            return Ok(completion);
        }
        if s.queues.push(lu, item).is_err() {
            let tag = tag.unwrap_or(QueueTag::UNTAGGED);
            return Err(PortError::TagInUse { lu, tag });
        }
        drop(s);
        sh.pump();
        Ok(completion)
    }

    /// Holds the queue: requests are accepted and wait; those in the driver go on.
    pub fn pause(&self) -> Result<(), PortError> {
        let mut s = self.shared.lock();
        Shared::<D>::transition(&mut s, LifeEvent::Pause)?;
        s.events.push(PortEvent::QueuePaused(true));
        Ok(())
    }

    /// Releases the queue.
    pub fn resume(&self) -> Result<(), PortError> {
        {
            let mut s = self.shared.lock();
            Shared::<D>::transition(&mut s, LifeEvent::Resume)?;
            s.events.push(PortEvent::QueuePaused(false));
        }
        self.shared.pump();
        Ok(())
    }

    /// A power transition. To [`PowerState::D3`]: the queue is held, the driver given up
    /// to `drain` to finish what it holds (else [`PortError::DrainTimeout`] and the queue
    /// as it was), then [`Driver::power`]. To [`PowerState::D0`]: [`Driver::power`], then
    /// the queue runs again.
    pub fn set_power(&self, state: PowerState, drain: Duration) -> Result<(), PortError> {
        passive("Port::set_power")?;
        let sh = &self.shared;
        let handle = sh.handle();
        match state {
            PowerState::D3 => {
                let paused_here = {
                    let mut s = sh.lock();
                    // Checked before anything changes: only Running or Paused go down.
                    s.life
                        .on(LifeEvent::PowerDown)
                        .map_err(|(from, event)| PortError::IllegalTransition { from, event })?;
                    s.life == Lifecycle::Running
                        && Shared::<D>::transition(&mut s, LifeEvent::Pause).is_ok()
                };
                let deadline = sh.now() + drain;
                if !sh.wait_until(Some(deadline), |s| s.outstanding.is_empty()) {
                    let mut s = sh.lock();
                    if s.life == Lifecycle::BugChecked {
                        return Err(PortError::BugChecked);
                    }
                    if paused_here {
                        let _ = Shared::<D>::transition(&mut s, LifeEvent::Resume);
                    }
                    let outstanding = s.outstanding.len();
                    drop(s);
                    sh.pump();
                    return Err(PortError::DrainTimeout { outstanding });
                }
                sh.call(EntryPoint::Power, || sh.driver.power(&handle, state))
                    .map_err(|v| sh.fail(v))?;
                let mut s = sh.lock();
                Shared::<D>::transition(&mut s, LifeEvent::PowerDown)?;
                s.events.push(PortEvent::PowerChanged(state));
            }
            PowerState::D0 => {
                {
                    let s = sh.lock();
                    s.life
                        .on(LifeEvent::PowerUp)
                        .map_err(|(from, event)| PortError::IllegalTransition { from, event })?;
                }
                sh.call(EntryPoint::Power, || sh.driver.power(&handle, state))
                    .map_err(|v| sh.fail(v))?;
                {
                    let mut s = sh.lock();
                    Shared::<D>::transition(&mut s, LifeEvent::PowerUp)?;
                    s.events.push(PortEvent::PowerChanged(state));
                }
                sh.pump();
            }
        }
        Ok(())
    }

    /// Resets bus `path_id` now ([`Driver::reset`]); true if the driver reported success.
    /// What the driver held on the bus completes with `SRB_STATUS_BUS_RESET`.
    pub fn reset_bus(&self, path_id: u8) -> Result<bool, PortError> {
        passive("Port::reset_bus")?;
        self.shared.reset_bus(path_id, ResetCause::Requested)
    }

    /// Orderly removal (IRP_MN_REMOVE_DEVICE): see [`Port::surprise_remove`], with
    /// `surprise` false — the driver may finish what it holds.
    pub fn remove(&self) -> Result<(), PortError> {
        self.remove_device(false)
    }

    /// Surprise removal (the device is already gone): nothing more is accepted, the
    /// port's queued requests fail with [`REMOVAL_STATUS`](super::REMOVAL_STATUS), then
    /// [`Driver::remove`] runs at passive level and must complete everything the driver
    /// holds; what it still holds when it returns fails with the removal status and
    /// bugchecks the port (rule e).
    pub fn surprise_remove(&self) -> Result<(), PortError> {
        self.remove_device(true)
    }

    fn remove_device(&self, surprise: bool) -> Result<(), PortError> {
        passive("Port::remove")?;
        let sh = &self.shared;
        let failed_queued = {
            let mut s = sh.lock();
            Shared::<D>::transition(&mut s, LifeEvent::Remove)?;
            let queued = s.queues.drain(None);
            let n = queued.len();
            for item in queued {
                Shared::<D>::fail_queued(&mut s, item, REMOVAL_STATUS);
            }
            n
        };
        sh.deliver();
        // No request is being started and no reset runs while the driver is removed.
        if !sh.wait_until(None, |s| !s.pumping && s.resetting == 0) {
            return Err(PortError::BugChecked);
        }
        let handle = sh.handle();
        sh.call(EntryPoint::Remove, || sh.driver.remove(&handle, surprise))
            .map_err(|v| sh.fail(v))?;
        let left = {
            let mut s = sh.lock();
            if s.life == Lifecycle::BugChecked {
                return Err(PortError::BugChecked);
            }
            let left: Vec<SrbId> = s.outstanding.ids_in_order();
            for id in &left {
                sh.flush(&mut s, *id, REMOVAL_STATUS, FlushCause::Removal);
            }
            Shared::<D>::transition(&mut s, LifeEvent::Removed)?;
            s.events.push(PortEvent::Removed {
                surprise,
                failed_queued,
            });
            left
        };
        sh.deliver();
        if !left.is_empty() {
            return Err(sh.fail(Violation::IoLeftAtRemoval {
                surprise,
                ids: left,
            }));
        }
        Ok(())
    }

    /// Stop then unload: an orderly removal first if the device is still there, then
    /// [`Driver::unload`] at passive level; the port's threads stop, and no entry point is
    /// called again.
    pub fn unload(&self) -> Result<(), PortError> {
        passive("Port::unload")?;
        let sh = &self.shared;
        if sh.lock().life.accepts() {
            self.remove()?;
        }
        {
            let s = sh.lock();
            s.life
                .on(LifeEvent::Unload)
                .map_err(|(from, event)| match from {
                    Lifecycle::BugChecked => PortError::BugChecked,
                    _ => PortError::IllegalTransition { from, event },
                })?;
        }
        let handle = sh.handle();
        sh.call(EntryPoint::Unload, || sh.driver.unload(&handle))
            .map_err(|v| sh.fail(v))?;
        {
            let mut s = sh.lock();
            Shared::<D>::transition(&mut s, LifeEvent::Unload)?;
            s.events.push(PortEvent::Unloaded);
        }
        sh.set_unloaded();
        self.stop_threads();
        Ok(())
    }

    /// Where the port is in its life.
    pub fn state(&self) -> Lifecycle {
        self.shared.lock().life
    }

    /// The driver's limits (from its initialize).
    pub fn info(&self) -> DriverInfo {
        self.shared.lock().info
    }

    /// The driver.
    pub fn driver(&self) -> &D {
        &self.shared.driver
    }

    /// The machine's memory the port's requests carry their buffers in.
    pub fn memory(&self) -> &Arc<SystemMemory> {
        &self.shared.memory
    }

    /// A buffer holding `bytes` in the port's memory (waits for pages; not at dispatch).
    pub fn buffer_from(&self, bytes: &[u8]) -> Result<DataBuffer, MemoryError> {
        self.shared.memory.alloc_from(bytes)
    }

    /// A buffer for a read of `len` bytes in the port's memory.
    pub fn read_buffer(&self, len: usize) -> Result<DataBuffer, MemoryError> {
        self.shared.memory.alloc_for_read(len)
    }

    /// Takes the events reported since the last call.
    pub fn take_events(&self) -> Vec<PortEvent> {
        std::mem::take(&mut self.shared.lock().events)
    }

    /// Every violation the verifier caught.
    pub fn violations(&self) -> Vec<Violation> {
        self.shared.lock().violations.clone()
    }

    /// Whether the verifier stopped the port.
    pub fn is_bugchecked(&self) -> bool {
        self.shared.is_bugchecked()
    }

    /// Requests the driver holds, all LUs.
    pub fn outstanding(&self) -> usize {
        self.shared.lock().outstanding.len()
    }

    /// The LU's queue.
    pub fn lu_stats(&self, lu: LuAddress) -> LuStats {
        let s = self.shared.lock();
        s.queues
            .lus
            .get(&lu)
            .map_or(LuStats::default(), |q| LuStats {
                waiting: q.waiting.len(),
                outstanding: q.outstanding,
                tags_in_use: q.tags.len(),
                gone: q.gone,
            })
    }

    /// Stops and joins the port's threads (not after a bugcheck: one may be stuck in the
    /// driver for good).
    fn stop_threads(&self) {
        {
            let mut s = self.shared.lock();
            s.shutdown = true;
        }
        self.shared.dpc_wake.notify_all();
        self.shared.timer_wake.notify_all();
        let threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        let bugchecked = self.shared.is_bugchecked();
        for t in threads {
            if !bugchecked {
                let _ = t.join();
            }
        }
    }
}

impl<D: Driver> Drop for Port<D> {
    /// Stops the port's threads; the driver is not called (unload it first for an orderly
    /// end).
    fn drop(&mut self) {
        self.stop_threads();
    }
}
