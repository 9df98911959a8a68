//! [`PortServices`]: the StorPort routines and notifications a miniport calls back on
//! (`StorPortNotification`, `StorPortBusy`, …). Callable from any thread at any level up
//! to dispatch, from inside a routine or from the miniport's own DPC; none blocks and none
//! calls back into the miniport (the port's DPC starts what they release). Once the port
//! is gone they do nothing.

use super::PortEvent;
use super::miniport::Miniport;
use super::queue::{Busy, MAX_LU_QUEUE_DEPTH};
use super::sgl::ScatterGatherList;
use super::shared::{RunState, Shared, State};
use super::srb::{LuAddress, Srb, SrbId};
use super::status::SrbStatus;
use std::fmt;
use std::sync::Weak;
use std::time::Duration;

/// The port as the miniport sees it (the HwDeviceExtension handle of every StorPort call).
pub struct PortServices<M: Miniport> {
    shared: Weak<Shared<M>>,
}

impl<M: Miniport> Clone for PortServices<M> {
    fn clone(&self) -> Self {
        PortServices {
            shared: self.shared.clone(),
        }
    }
}

impl<M: Miniport> fmt::Debug for PortServices<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PortServices")
            .field("port_alive", &(self.shared.strong_count() > 0))
            .finish()
    }
}

impl<M: Miniport> PortServices<M> {
    pub(crate) fn new(shared: Weak<Shared<M>>) -> Self {
        PortServices { shared }
    }

    /// Runs `f` on the port state, then wakes the DPC.
    fn with_state(&self, f: impl FnOnce(&Shared<M>, &mut State<M::SrbExtension>)) {
        if let Some(sh) = self.shared.upgrade() {
            let mut s = sh.lock();
            f(&sh, &mut s);
            drop(s);
            sh.kick();
        }
    }

    /// `StorPortIssueDpc`: queues the miniport's DPC routine ([`Miniport::dpc`]) on the
    /// port's DPC; false if it was queued already (it runs once for both). Callable from
    /// any context, an interrupt-like event handler included.
    pub fn issue_dpc(&self) -> bool {
        let mut queued = false;
        self.with_state(|_, s| {
            queued = !s.dpc_queued;
            s.dpc_queued = true;
        });
        queued
    }

    /// `StorPortNotification(RequestTimerCall)`: runs [`Miniport::timer`] on the port's
    /// DPC once `after` passed; replaces an earlier request (one timer per adapter);
    /// `Duration::ZERO` cancels it.
    pub fn request_timer_call(&self, after: Duration) {
        self.with_state(|sh, s| {
            s.timer_at = (!after.is_zero()).then(|| sh.now() + after);
        });
    }

    /// `StorPortNotification(RequestComplete)`: the SRB goes back to its submitter; the
    /// miniport must not touch it again. A second completion is a verifier violation.
    pub fn request_complete(&self, srb: &Srb<M::SrbExtension>) {
        if let Some(sh) = self.shared.upgrade() {
            sh.request_complete(srb);
        }
    }

    /// `StorPortCompleteRequest(path, target, lun, status)`: completes every SRB the
    /// miniport holds on that path (`None` target or LUN: all), with `status`. Requests
    /// the port still queues are not touched. The miniport must forget those SRBs.
    pub fn complete_requests(
        &self,
        path_id: u8,
        target_id: Option<u8>,
        lun: Option<u8>,
        status: SrbStatus,
    ) {
        self.with_state(|sh, s| {
            if s.run == RunState::BugChecked {
                return;
            }
            let mut ids: Vec<SrbId> = s
                .owned
                .iter()
                .filter(|(_, o)| {
                    let a = o.srb.address();
                    o.started.is_some()
                        && a.path_id == path_id
                        && target_id.is_none_or(|t| t == a.target_id)
                        && lun.is_none_or(|l| l == a.lun)
                })
                .map(|(id, _)| id)
                .collect();
            ids.sort();
            for id in ids {
                sh.force_complete(s, id, status);
            }
        });
    }

    /// `NextRequest` (a SCSIport notification; StorPort manages its own queues): only
    /// wakes the port's DPC.
    pub fn next_request(&self) {
        self.with_state(|_, _| {});
    }

    /// `NextLuRequest` (SCSIport; as [`PortServices::next_request`]).
    pub fn next_lu_request(&self, _lu: LuAddress) {
        self.with_state(|_, _| {});
    }

    /// `BusChangeDetected`: the caller rescans (REPORT LUNS, INQUIRY) on the event.
    pub fn bus_change_detected(&self, path_id: u8) {
        self.with_state(|_, s| s.events.push(PortEvent::BusChangeDetected { path_id }));
    }

    /// `StorPortBusy(n)`: hold new requests until `n` complete (or Ready).
    pub fn busy(&self, requests_to_complete: u32) {
        self.with_state(|sh, s| {
            s.queues.adapter.busy = Some(Busy {
                remaining: requests_to_complete.max(1),
                since: sh.now(),
            });
        });
    }

    /// `StorPortReady`.
    pub fn ready(&self) {
        self.with_state(|_, s| s.queues.adapter.busy = None);
    }

    /// `StorPortPause(seconds)`: hold every request until Resume or the time passes.
    pub fn pause(&self, timeout_seconds: u32) {
        let hold = Duration::from_secs(u64::from(timeout_seconds));
        self.with_state(|sh, s| s.queues.adapter.paused_until = Some(sh.now() + hold));
    }

    /// `StorPortResume`.
    pub fn resume(&self) {
        self.with_state(|_, s| s.queues.adapter.paused_until = None);
    }

    /// `StorPortDeviceBusy(lu, n)`: hold the LU's new requests until `n` of its complete.
    pub fn device_busy(&self, lu: LuAddress, requests_to_complete: u32) {
        self.with_state(|sh, s| {
            s.queues.lu(lu).holds.busy = Some(Busy {
                remaining: requests_to_complete.max(1),
                since: sh.now(),
            });
        });
    }

    /// `StorPortDeviceReady`.
    pub fn device_ready(&self, lu: LuAddress) {
        self.with_state(|_, s| s.queues.lu(lu).holds.busy = None);
    }

    /// `StorPortPauseDevice(lu, seconds)`.
    pub fn pause_device(&self, lu: LuAddress, timeout_seconds: u32) {
        let hold = Duration::from_secs(u64::from(timeout_seconds));
        self.with_state(|sh, s| s.queues.lu(lu).holds.paused_until = Some(sh.now() + hold));
    }

    /// `StorPortResumeDevice`.
    pub fn resume_device(&self, lu: LuAddress) {
        self.with_state(|_, s| s.queues.lu(lu).holds.paused_until = None);
    }

    /// `StorPortSetDeviceQueueDepth`: 1 to 255; false otherwise.
    pub fn set_device_queue_depth(&self, lu: LuAddress, depth: u32) -> bool {
        if !(1..=MAX_LU_QUEUE_DEPTH).contains(&depth) {
            return false;
        }
        self.with_state(|_, s| s.queues.lu(lu).depth = depth);
        true
    }

    /// `StorPortStallExecution`: spins for `d` ([`super::ke::stall_execution`]). On a
    /// [`PortMode::Manual`](super::PortMode::Manual) port it returns at once: the owner's
    /// one thread is the only thing that advances the (virtual) clock, so waiting for it
    /// would spin forever, and a stall is processor time, which virtual time does not
    /// count. Nothing once the port is gone.
    pub fn stall_execution(&self, d: Duration) {
        match self.shared.upgrade() {
            Some(sh) if !sh.manual() => super::ke::stall_execution(d),
            _ => {}
        }
    }

    /// The machine's memory: the physical addresses of scatter-gather elements are byte
    /// offsets of its block (what a miniport registers for DMA). `None` once the port is gone.
    pub fn system_memory(&self) -> Option<std::sync::Arc<super::SystemMemory>> {
        self.shared.upgrade().map(|sh| sh.memory.clone())
    }

    /// `StorPortGetScatterGatherList`: valid until the SRB completes.
    pub fn get_scatter_gather_list<'a>(
        &self,
        srb: &'a Srb<M::SrbExtension>,
    ) -> &'a ScatterGatherList {
        srb.scatter_gather_list()
    }
}
