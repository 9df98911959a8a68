//! [`Port`]: the port driver's owner-facing side — start (HwFindAdapter, HwInitialize,
//! QuerySupportedControlTypes), the submitter's entry point, bus resets on request,
//! LU removal, stop and restart, what the verifier saw, and — in
//! [`PortMode::Manual`](super::PortMode::Manual), where the whole-stack simulator drives
//! the port in virtual time — [`Port::run_due`] and [`Port::next_due`].

use super::miniport::{
    AdapterControl, FindAdapterStatus, Miniport, PortConfigurationInfo, SupportedControlTypes,
};
use super::shared::{RunState, Shared};
use super::srb::{DataDirection, LuAddress, Srb, SrbData, SrbFunction, SrbRequest, SrbResult};
use super::status::SrbStatus;
use super::verifier::{Routine, Violation};
use super::{PortConfig, PortError, PortEvent, PortServices, ResetCause, worker};
use access_layer::verbs::{Completion, verifier as al_verifier};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One LU's queue, as the port sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LuStats {
    /// Held by the port.
    pub waiting: usize,
    /// Given to the miniport, not completed.
    pub outstanding: u32,
    /// The queue depth.
    pub depth: u32,
}

/// An adapter under the emulated StorPort (see the module doc of [`super`]).
pub struct Port<M: Miniport> {
    shared: Arc<Shared<M>>,
    threads: Vec<JoinHandle<()>>,
}

impl<M: Miniport> std::fmt::Debug for Port<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port")
            .field("bugchecked", &self.is_bugchecked())
            .field("outstanding", &self.outstanding())
            .finish_non_exhaustive()
    }
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
    if req.function == SrbFunction::AbortCommand && req.abort_target.is_none() {
        return Err(PortError::BadRequest("ABORT_COMMAND names the request"));
    }
    Ok(())
}

/// The status a request the adapter cannot take completes with, if any.
fn refusal<X>(info: &PortConfigurationInfo, srb: &Srb<X>) -> Option<SrbStatus> {
    let a = srb.address();
    let sg = srb.scatter_gather_list();
    if a.path_id >= info.number_of_buses {
        Some(SrbStatus::INVALID_PATH_ID)
    } else if a.target_id >= info.maximum_number_of_targets {
        Some(SrbStatus::INVALID_TARGET_ID)
    } else if a.lun >= info.maximum_number_of_logical_units {
        Some(SrbStatus::INVALID_LUN)
    } else if sg.total_len() > info.maximum_transfer_length as usize
        || sg.len() > info.number_of_physical_breaks as usize + 1
    {
        Some(SrbStatus::INVALID_REQUEST)
    } else {
        None
    }
}

impl<M: Miniport> Shared<M> {
    /// HwFindAdapter then HwInitialize (FindAdapter at dispatch level on a restart of a
    /// miniport without RestartAdapter, as StorPort does).
    fn find_and_initialize(&self, dispatch: bool) -> Result<(), PortError> {
        let port = self.services();
        let mut info = PortConfigurationInfo::default();
        let found = self.call(Routine::FindAdapter, dispatch, || {
            self.miniport.find_adapter(&port, &self.context, &mut info)
        });
        let found = found.map_err(|v| self.fail(v))?;
        if found != FindAdapterStatus::Found {
            return Err(PortError::AdapterNotFound(found));
        }
        if info.maximum_transfer_length == 0 {
            return Err(PortError::BadConfig {
                field: "MaximumTransferLength",
            });
        }
        if info.number_of_physical_breaks == 0 {
            return Err(PortError::BadConfig {
                field: "NumberOfPhysicalBreaks",
            });
        }
        self.lock().info = info;
        let ok = self.call(Routine::Initialize, true, || {
            self.miniport.initialize(&port)
        });
        if !ok.map_err(|v| self.fail(v))? {
            return Err(PortError::InitializeFailed);
        }
        Ok(())
    }

    /// Bugchecks and returns the error for the caller.
    fn fail(&self, v: Violation) -> PortError {
        self.bugcheck(v.clone());
        PortError::BugCheck(v)
    }
}

impl<M: Miniport> Port<M> {
    /// Creates the device extension, finds and initializes the adapter, and starts the
    /// port's threads (none in [`PortMode::Manual`](super::PortMode::Manual)).
    pub fn start(context: M::HwContext, config: PortConfig) -> Result<Port<M>, PortError> {
        let shared = Arc::new_cyclic(|me| Shared::new(M::default(), context, config, me.clone()));
        shared.find_and_initialize(false)?;
        let mut supported = SupportedControlTypes::default();
        let port = shared.services();
        let q = shared.call(Routine::AdapterControl, false, || {
            let query = AdapterControl::QuerySupportedControlTypes(&mut supported);
            shared.miniport.adapter_control(&port, query)
        });
        q.map_err(|v| shared.fail(v))?;
        {
            let mut s = shared.lock();
            s.supported = supported;
            s.run = RunState::Running;
        }
        let mut threads = Vec::new();
        if shared.manual() {
            return Ok(Port { shared, threads });
        }
        for (name, body) in [
            ("storport-dpc", worker::run_dpc::<M> as fn(Arc<Shared<M>>)),
            ("storport-timer", worker::run_timer::<M>),
        ] {
            let sh = shared.clone();
            let t = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || body(sh))
                .map_err(|e| PortError::Spawn(e.to_string()))?;
            threads.push(t);
        }
        Ok(Port { shared, threads })
    }

    /// Submits a request: queued, then started when the holds and depth allow; the
    /// completion gets the result exactly once. Invalid addresses, oversized buffers and
    /// removed LUs complete at once with the SRB status StorPort uses. In manual mode it
    /// never waits for system memory (no free pages: [`MemoryError::Exhausted`](super::MemoryError::Exhausted)).
    pub fn submit(&self, mut request: SrbRequest) -> Result<Completion<SrbResult>, PortError> {
        validate(&request)?;
        let sh = &self.shared;
        let data = match std::mem::take(&mut request.data) {
            SrbData::Buffer(b) if b.memory().is_some_and(|m| !Arc::ptr_eq(m, &sh.memory)) => {
                return Err(PortError::ForeignBuffer);
            }
            SrbData::Buffer(b) => b,
            // Manual mode: no waiting for pages (only the owner's thread could free them).
            SrbData::Bytes(v) if sh.manual() => {
                let b = sh.memory.try_alloc(v.len())?;
                b.write(0, &v)?;
                b
            }
            SrbData::Bytes(v) => sh.memory.alloc_from(&v)?,
        };
        let management = request.function.is_management();
        let srb: Srb<M::SrbExtension> = Srb::new(&sh.lookaside, sh.next_id(), request, data);
        let (completer, completion) = sh.completions.pair();
        {
            let mut s = sh.lock();
            if s.run == RunState::BugChecked {
                return Err(PortError::BugChecked);
            }
            s.completers.insert(srb.id(), completer);
            let lu = srb.address();
            let removed = s.queues.lus.get(&lu).is_some_and(|q| q.removed);
            match refusal(&s.info, &srb) {
                Some(status) => sh.complete_unstarted(&mut s, &srb, status),
                None if removed => sh.complete_unstarted(&mut s, &srb, SrbStatus::NO_DEVICE),
                None => s.queues.push(lu, srb, management),
            }
            sh.wake_idle(&mut s);
        }
        // The submitter starts it itself (pump); the DPC hands back what completed at once.
        sh.kick();
        sh.pump();
        Ok(completion)
    }

    /// Manual mode: does, at the clock's current `now()` and without blocking or sleeping,
    /// what the port's threads would — DPC passes (completions to submitters, the
    /// miniport's DPC routine if queued, its HwTimer if due, starting released requests,
    /// holds lapsing), the timer's tick if due (the DPC watchdog, request timeouts, and
    /// each timeout's bus reset inline) — until nothing more is due now. Returns how much
    /// it did (completions, routines, requests started, ticks, resets); 0: nothing was due.
    /// Does nothing (0) in [`PortMode::Threads`](super::PortMode::Threads). Not from inside
    /// a miniport routine.
    pub fn run_due(&self) -> usize {
        if !self.shared.manual() {
            return 0;
        }
        worker::run_due(&self.shared)
    }

    /// Manual mode: the earliest instant at which [`Port::run_due`] has something to do —
    /// the miniport's timer, the timer's next tick while the port holds requests (ticks
    /// every [`PortConfig::tick`] as the thread would), the end of a hold with a request
    /// behind it; the clock's `now()` when work is due already (a queued DPC, completions
    /// waiting, a request released). `None` when only an outside event (a submit, a
    /// notification such as `IssueDpc`) can give it work, and always in
    /// [`PortMode::Threads`](super::PortMode::Threads).
    pub fn next_due(&self) -> Option<Instant> {
        if !self.shared.manual() {
            return None;
        }
        worker::next_due(&self.shared)
    }

    /// The machine's memory the port's requests carry their buffers in.
    pub fn memory(&self) -> &Arc<super::SystemMemory> {
        &self.shared.memory
    }

    /// A zeroed buffer of `len` bytes in the port's memory, waiting for pages if needed
    /// (not at dispatch level).
    pub fn buffer(&self, len: usize) -> Result<super::DataBuffer, super::MemoryError> {
        self.shared.memory.alloc(len)
    }

    /// A buffer for a read of `len` bytes in the port's memory, not zeroed
    /// ([`super::SystemMemory::alloc_for_read`]).
    pub fn read_buffer(&self, len: usize) -> Result<super::DataBuffer, super::MemoryError> {
        self.shared.memory.alloc_for_read(len)
    }

    /// A buffer holding `bytes` in the port's memory (as [`Port::buffer`]).
    pub fn buffer_from(&self, bytes: &[u8]) -> Result<super::DataBuffer, super::MemoryError> {
        self.shared.memory.alloc_from(bytes)
    }

    /// What the miniport gets (for a test standing in for it, or the miniport's threads).
    pub fn services(&self) -> PortServices<M> {
        self.shared.services()
    }

    /// The device extension (the miniport).
    pub fn miniport(&self) -> &M {
        &self.shared.miniport
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

    /// The LU's queue.
    pub fn lu_stats(&self, lu: LuAddress) -> LuStats {
        let mut s = self.shared.lock();
        let q = s.queues.lu(lu);
        LuStats {
            waiting: q.waiting.len(),
            outstanding: q.outstanding,
            depth: q.depth,
        }
    }

    /// Requests the miniport holds, all LUs.
    pub fn outstanding(&self) -> u32 {
        self.shared.lock().queues.outstanding
    }

    /// What HwFindAdapter configured.
    pub fn configuration(&self) -> PortConfigurationInfo {
        self.shared.lock().info.clone()
    }

    /// Resets bus `path` now (HwResetBus); true if the miniport reported success. Waits
    /// for the StartIo lock: not from dispatch level.
    pub fn reset_bus(&self, path: u8) -> Result<bool, PortError> {
        al_verifier::may_block("Port::reset_bus")
            .map_err(|_| PortError::BlockingAtDispatch("Port::reset_bus"))?;
        self.shared.reset_bus(path, ResetCause::Requested)
    }

    /// The LU is gone: its waiting requests complete with NO_DEVICE and new ones are
    /// refused; requests the miniport holds complete as it completes them. The miniport
    /// is not told (as in 2005).
    pub fn remove_lu(&self, lu: LuAddress) {
        let mut s = self.shared.lock();
        s.queues.lu(lu).removed = true;
        self.shared.flush_lu(&mut s, lu);
        drop(s);
        self.shared.kick();
    }

    /// The LU is back (found again by a rescan).
    pub fn add_lu(&self, lu: LuAddress) {
        self.shared.lock().queues.lu(lu).removed = false;
        self.shared.kick();
    }

    /// Stops the adapter: holds new requests, waits up to `drain` for the miniport to
    /// complete what it holds, then HwAdapterControl(StopAdapter) if supported.
    ///
    /// In [`PortMode::Manual`](super::PortMode::Manual) it never waits: the drain needs
    /// time to pass, which only the owner can make happen. It runs what is due now
    /// ([`Port::run_due`]); if the miniport still holds requests, the adapter runs again
    /// and the answer is [`PortError::DrainTimeout`] at once (`drain` is not used): the
    /// owner drains first, in virtual time, until [`Port::outstanding`] is 0, then stops.
    pub fn stop_adapter(&self, drain: Duration) -> Result<(), PortError> {
        al_verifier::may_block("Port::stop_adapter")
            .map_err(|_| PortError::BlockingAtDispatch("Port::stop_adapter"))?;
        let sh = &self.shared;
        {
            let mut s = sh.lock();
            if s.run != RunState::Running {
                return Err(PortError::WrongState("not running"));
            }
            s.run = RunState::Stopped;
        }
        let deadline = sh.now() + drain;
        loop {
            if sh.manual() {
                worker::run_due(sh);
            }
            let outstanding = sh.lock().queues.outstanding;
            if outstanding == 0 {
                break;
            }
            if sh.manual() || sh.now() >= deadline {
                sh.lock().run = RunState::Running;
                sh.kick();
                return Err(PortError::DrainTimeout { outstanding });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if sh.lock().supported.stop_adapter {
            self.adapter_control(AdapterControl::StopAdapter)?;
        }
        Ok(())
    }

    /// Restarts a stopped adapter: HwAdapterControl(RestartAdapter) if supported, else
    /// HwFindAdapter (at dispatch level) and HwInitialize again; then requests flow.
    pub fn restart_adapter(&self) -> Result<(), PortError> {
        let sh = &self.shared;
        let (run, restart) = {
            let s = sh.lock();
            (s.run, s.supported.restart_adapter)
        };
        if run != RunState::Stopped {
            return Err(PortError::WrongState("not stopped"));
        }
        if restart {
            self.adapter_control(AdapterControl::RestartAdapter)?;
        } else {
            sh.find_and_initialize(true)?;
        }
        sh.lock().run = RunState::Running;
        sh.kick();
        sh.pump();
        Ok(())
    }

    /// HwAdapterControl at dispatch level (stands for DIRQL).
    fn adapter_control(&self, control: AdapterControl<'_>) -> Result<(), PortError> {
        let sh = &self.shared;
        let port = sh.services();
        let r = sh.call(Routine::AdapterControl, true, || {
            sh.miniport.adapter_control(&port, control)
        });
        r.map(|_| ()).map_err(|v| sh.fail(v))
    }
}

impl<M: Miniport> Drop for Port<M> {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.kick();
        self.shared.timer_wake.notify_all();
        let bugchecked = self.shared.is_bugchecked();
        for t in self.threads.drain(..) {
            // After a bugcheck a thread may be stuck in the miniport for good: leave it.
            if !bugchecked {
                let _ = t.join();
            }
        }
    }
}
