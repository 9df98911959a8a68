//! The boundary between the completion loop and SCSI execution. The loop hands a [`Job`]
//! (everything the command needs, owned) to an [`Executor`] and later receives its [`Done`]
//! on a channel; it never waits for a backend. [`Inline`] runs the job on the caller's
//! thread (tests, tiny setups); [`crate::io::Workers`] runs it on a bounded pool.

use crate::backend::{MemSpan, OwnedSpan};
use crate::exec::aio::AsyncCmd;
use crate::exec::{CmdOutput, DataOut, LogicalUnit, Nexus, TransportError};
use crate::lu::{PortIdentity, TargetPortGroup};
use access_layer::verbs::Doorbell;
use ib_verbs::mem::MemBlock;
use scsi::{Lun, Status};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, PoisonError};

/// What a [`Nexus`] borrows, owned, shared by every command of a channel.
#[derive(Clone, Debug)]
pub struct NexusInfo {
    /// The initiator port identifier from the login.
    pub initiator: srp::wire::PortId,
    /// The LUNs this initiator sees through this port.
    pub luns: Vec<Lun>,
    /// The target port the channel is on.
    pub port: PortIdentity,
    /// Every target port group of the target.
    pub groups: Vec<TargetPortGroup>,
}

impl NexusInfo {
    /// The borrowed view [`LogicalUnit::execute`] takes.
    pub fn nexus(&self) -> Nexus<'_> {
        Nexus {
            initiator: self.initiator,
            luns: &self.luns,
            port: self.port,
            groups: &self.groups,
            abort: None,
            may_wait: true,
            pr_epoch: None,
        }
    }
}

/// Set when a command's task is aborted (ABORT TASK, a LUN-wide TMF, PREEMPT AND ABORT):
/// shared by its slot and its [`Job`], so a job still queued for a worker is not run, and
/// a result that comes back anyway is not answered even if the initiator reused the tag.
///
/// It also knows whether the job is running on a worker, and who waits for it to stop: a
/// task management function is answered only once the tasks it aborted are no longer
/// running (SAM-5 7.1: a TMF completes after its tasks are aborted), so no step of an
/// aborted copy reaches the medium after the initiator was told the task is gone.
#[derive(Clone, Debug, Default)]
pub struct AbortFlag(Arc<FlagState>);

#[derive(Debug, Default)]
struct FlagState {
    aborted: AtomicBool,
    job: Mutex<JobState>,
}

/// Whether the job runs, and the drains waiting for it to stop.
#[derive(Debug, Default)]
struct JobState {
    running: bool,
    waiters: Vec<Arc<Drain>>,
}

impl FlagState {
    fn job(&self) -> std::sync::MutexGuard<'_, JobState> {
        self.job.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl AbortFlag {
    /// Marks the task aborted.
    pub fn set(&self) {
        self.0.aborted.store(true, Ordering::Release);
    }

    /// Marks the task aborted and, if its job is running, makes `drain` wait until it
    /// stops; whether it does.
    pub fn abort_and_wait(&self, drain: &Arc<Drain>) -> bool {
        // Set before the lock: a job that starts after this lock sees it (`start_job`).
        self.set();
        let mut j = self.0.job();
        if !j.running {
            return false;
        }
        drain.left.fetch_add(1, Ordering::AcqRel);
        j.waiters.push(drain.clone());
        true
    }

    /// A worker is about to run the job: false if the task is aborted (the job must not
    /// run). Every `true` is followed by one [`AbortFlag::end_job`].
    pub fn start_job(&self) -> bool {
        let mut j = self.0.job();
        if self.is_set() {
            return false;
        }
        j.running = true;
        true
    }

    /// The job stopped: whoever waits for it is told.
    pub fn end_job(&self) {
        let waiters = {
            let mut j = self.0.job();
            j.running = false;
            std::mem::take(&mut j.waiters)
        };
        for d in waiters {
            d.one_stopped();
        }
    }

    /// The flag a running command polls ([`Nexus::abort`]).
    pub fn flag(&self) -> &AtomicBool {
        &self.0.aborted
    }

    /// Whether the task was aborted.
    pub fn is_set(&self) -> bool {
        self.0.aborted.load(Ordering::Acquire)
    }

    /// A clear flag for the next task, this one's memory reused when nothing else holds it
    /// (its job finished): starting a command then allocates nothing.
    pub fn renew(&mut self) -> AbortFlag {
        if Arc::strong_count(&self.0) == 1 {
            self.0.aborted.store(false, Ordering::Release);
            let mut j = self.0.job();
            debug_assert!(
                !j.running && j.waiters.is_empty(),
                "a job outlived its flag"
            );
            j.running = false;
            j.waiters.clear();
        } else {
            *self = AbortFlag::default();
        }
        self.clone()
    }
}

/// A started job: ends it when dropped.
struct JobRunning<'a>(&'a AbortFlag);

impl Drop for JobRunning<'_> {
    fn drop(&mut self) {
        self.0.end_job();
    }
}

/// [`JobRunning`] owned, for a job whose end comes from a store's completion.
struct JobEnd(AbortFlag);

impl Drop for JobEnd {
    fn drop(&mut self) {
        self.0.end_job();
    }
}

/// The jobs of aborted tasks still running on workers, that an answer waits for (a task
/// management function, a PREEMPT AND ABORT). Each stopped job counts down; the last rings
/// the waiting loop's doorbell, so the answer goes out at once (no polling).
#[derive(Debug, Default)]
pub struct Drain {
    left: AtomicUsize,
    bell: Option<Arc<Doorbell>>,
}

impl Drain {
    /// A drain that rings `bell` when its last job stops.
    pub fn new(bell: Option<Arc<Doorbell>>) -> Arc<Drain> {
        Arc::new(Drain {
            left: AtomicUsize::new(0),
            bell,
        })
    }

    /// Whether every job it waits for has stopped.
    pub fn is_done(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }

    /// Jobs it still waits for.
    pub fn left(&self) -> usize {
        self.left.load(Ordering::Acquire)
    }

    fn one_stopped(&self) {
        let before = self.left.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "a drain counted below zero");
        if before == 1 {
            if let Some(b) = &self.bell {
                b.ring();
            }
        }
    }
}

/// A command slot's registered memory (its bounce buffer, the one its RDMA READs fill and
/// its RDMA WRITEs send from), lent to the job so the backend works on it directly.
#[derive(Clone, Debug)]
pub struct Staging {
    /// The channel's memory (kept alive by the job even if the channel goes meanwhile).
    pub mem: Arc<MemBlock>,
    /// Offset of the slot's buffer.
    pub offset: usize,
    /// Its length.
    pub len: usize,
    /// `Some(n)`: the data-out is the buffer's first `n` bytes (already read by RDMA).
    /// `None`: no data-out there, so a READ may put its data-in in the buffer.
    pub data_out_len: Option<usize>,
}

/// One command to execute.
pub struct Job {
    /// Returned in [`Done::token`]: which command of which channel.
    pub token: u64,
    /// The logical unit.
    pub lu: Arc<LogicalUnit>,
    /// The I_T nexus it came through.
    pub nexus: Arc<NexusInfo>,
    /// The CDB.
    pub cdb: scsi::CdbBytes,
    /// The data-out, already fetched (empty when it lies in `staging`).
    pub data_out: Vec<u8>,
    /// The slot's registered memory, if the transport has some (see [`Staging`]).
    pub staging: Option<Staging>,
    /// Where the data-in goes: an empty buffer whose capacity is reused (the channel
    /// recycles its buffers; `Vec::new()` is fine).
    pub data_in: Vec<u8>,
    /// Where to send the result.
    pub reply: Reply,
    /// Set if the task is aborted before a worker takes it.
    pub abort: AbortFlag,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("token", &self.token)
            .field("cdb", &self.cdb)
            .field("data_out_len", &self.data_out.len())
            .finish()
    }
}

impl Job {
    /// Executes the job and sends its [`Done`]; a closed reply channel (the channel was
    /// torn down meanwhile) drops the result. A job aborted while queued is not executed:
    /// its `Done` says TASK ABORTED, so the slot is freed (SAM-5: an aborted task never
    /// reaches the medium once the abort is in force). For a worker: the command may wait
    /// (for a copy holding its range).
    pub fn run(self) {
        self.run_with(true);
    }

    /// [`Job::run`] on the loop that serves the channel (a backend that never blocks): the
    /// command must not wait for a copy, it is answered BUSY instead ([`Nexus::may_wait`]).
    pub fn run_inline(self) {
        self.run_with(false);
    }

    fn run_with(self, may_wait: bool) {
        if !self.abort.start_job() {
            let (reply, mut data_in) = (self.reply, self.data_in);
            data_in.clear();
            reply.send(Done {
                token: self.token,
                result: Ok(CmdOutput {
                    status: Status::TaskAborted,
                    ..CmdOutput::good(0)
                }),
                data_in,
                data_out: self.data_out,
            });
            return;
        }
        // A worker starts a READ, WRITE or SYNCHRONIZE CACHE on a store with asynchronous
        // I/O and goes on; the store's completion answers it (`exec/aio.rs`).
        let started = if may_wait { self.async_command() } else { None };
        match started {
            Some(cmd) => self.run_async(cmd),
            None => self.run_started(may_wait),
        }
    }

    /// The job as an asynchronous command, if its LU and data allow one. Immediate data
    /// (in `data_out`, a few KiB) is copied into the slot's memory first, so that the store
    /// writes from registered memory like any other data-out.
    fn async_command(&self) -> Option<AsyncCmd> {
        let st = self.staging.as_ref()?;
        let staged = match st.data_out_len {
            Some(n) => Some(n),
            None if self.data_out.is_empty() => None,
            None => {
                let n = self.data_out.len();
                let cmd = self.lu.async_command(&self.cdb, st.len, Some(n))?;
                if n > st.len || st.mem.write(st.offset, &self.data_out).is_err() {
                    return None;
                }
                return Some(cmd);
            }
        };
        self.lu.async_command(&self.cdb, st.len, staged)
    }

    /// Starts the job on its store; its [`Done`] is sent from the completion, and the job
    /// counts as running (for an abort's wait) until then.
    fn run_async(self, cmd: AsyncCmd) {
        let Job {
            token,
            lu,
            nexus,
            cdb,
            data_out,
            staging,
            mut data_in,
            reply,
            abort,
        } = self;
        data_in.clear();
        let Some(st) = staging else {
            unreachable!("an asynchronous command has its slot's memory (async_command)");
        };
        // Immediate data was copied to the slot's memory by `async_command`.
        let len = match (st.data_out_len, data_out.len()) {
            (Some(n), _) => n,
            (None, 0) => st.len,
            (None, n) => n,
        };
        let span = OwnedSpan {
            len,
            block: st.mem,
            offset: st.offset,
        };
        let running = JobEnd(abort.clone());
        let nx = Nexus {
            abort: Some(abort.flag()),
            may_wait: true,
            ..nexus.nexus()
        };
        lu.start_async(
            &nx,
            &cdb,
            cmd,
            span,
            Box::new(move |result| {
                drop(running);
                reply.send(Done {
                    token,
                    result,
                    data_in,
                    data_out,
                });
            }),
        );
    }

    /// Runs the started job here and sends its [`Done`].
    fn run_started(self, may_wait: bool) {
        let mut data_in = self.data_in;
        data_in.clear();
        let result = {
            let span = self.staging.as_ref().map(|s| MemSpan {
                block: &s.mem,
                offset: s.offset,
                len: s.len,
            });
            let (dout, din_staging) = match (&self.staging, span) {
                (
                    Some(Staging {
                        data_out_len: Some(n),
                        ..
                    }),
                    Some(sp),
                ) => (DataOut::Staged(sp.head(*n)), None),
                _ => (DataOut::Bytes(&self.data_out), span),
            };
            let nexus = Nexus {
                abort: Some(self.abort.flag()),
                may_wait,
                ..self.nexus.nexus()
            };
            // However it ends (a panic included), the backend is then done with this
            // command: an abort waiting for it may answer.
            let _running = JobRunning(&self.abort);
            self.lu
                .execute_io(&nexus, &self.cdb, dout, &mut data_in, din_staging)
        };
        self.reply.send(Done {
            token: self.token,
            result,
            data_in,
            data_out: self.data_out,
        });
    }
}

/// Where a finished command goes: its channel's queue, then a ring of the doorbell of the
/// loop that serves the channel, so the response goes out at once (no polling).
#[derive(Clone, Debug)]
pub struct Reply {
    tx: Sender<Done>,
    bell: Option<Arc<Doorbell>>,
}

impl Reply {
    /// Results to `tx`, each followed by a ring of `bell`.
    pub fn new(tx: Sender<Done>, bell: Option<Arc<Doorbell>>) -> Reply {
        Reply { tx, bell }
    }

    /// A [`Drain`] that rings this reply's doorbell.
    pub fn drain(&self) -> Arc<Drain> {
        Drain::new(self.bell.clone())
    }

    /// Sends `done` (dropped if the channel is gone) and rings.
    pub fn send(&self, done: Done) {
        if self.tx.send(done).is_ok() {
            if let Some(b) = &self.bell {
                b.ring();
            }
        }
    }
}

/// A finished command.
#[derive(Debug)]
pub struct Done {
    /// The job's token.
    pub token: u64,
    /// What the logical unit answered.
    pub result: Result<CmdOutput, TransportError>,
    /// The data-in it produced.
    pub data_in: Vec<u8>,
    /// The job's data-out buffer, handed back for reuse.
    pub data_out: Vec<u8>,
}

/// Runs jobs somewhere. `submit` never blocks: a full executor hands the job back, and the
/// command is answered BUSY.
pub trait Executor: Send + Sync {
    /// Queues `job`, or returns it when there is no room.
    // The job comes back whole on the rare refusal; boxing it would cost an allocation
    // on every command.
    #[allow(clippy::result_large_err)]
    fn submit(&self, job: Job) -> Result<(), Job>;
}

/// Runs each job at once on the submitting thread (the backend I/O blocks the caller).
#[derive(Clone, Copy, Debug, Default)]
pub struct Inline;

impl Executor for Inline {
    fn submit(&self, job: Job) -> Result<(), Job> {
        job.run_inline();
        Ok(())
    }
}
