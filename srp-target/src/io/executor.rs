//! The boundary between the completion loop and SCSI execution. The loop hands a [`Job`]
//! (everything the command needs, owned) to an [`Executor`] and later receives its [`Done`]
//! on a channel; it never waits for a backend. [`Inline`] runs the job on the caller's
//! thread (tests, tiny setups); [`crate::io::Workers`] runs it on a bounded pool.

use crate::backend::MemSpan;
use crate::exec::{CmdOutput, DataOut, LogicalUnit, Nexus, TransportError};
use crate::lu::{PortIdentity, TargetPortGroup};
use access_layer::verbs::Doorbell;
use hca::mem::MemBlock;
use scsi::{Lun, Status};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;

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
        }
    }
}

/// Set when a command's task is aborted (ABORT TASK, a LUN-wide TMF, PREEMPT AND ABORT):
/// shared by its slot and its [`Job`], so a job still queued for a worker is not run, and
/// a result that comes back anyway is not answered even if the initiator reused the tag.
#[derive(Clone, Debug, Default)]
pub struct AbortFlag(Arc<AtomicBool>);

impl AbortFlag {
    /// Marks the task aborted.
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// The flag a running command polls ([`Nexus::abort`]).
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }

    /// Whether the task was aborted.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// A clear flag for the next task, this one's memory reused when nothing else holds it
    /// (its job finished): starting a command then allocates nothing.
    pub fn renew(&mut self) -> AbortFlag {
        if Arc::strong_count(&self.0) == 1 {
            self.0.store(false, Ordering::Release);
        } else {
            *self = AbortFlag::default();
        }
        self.clone()
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
    /// reaches the medium once the abort is in force).
    pub fn run(self) {
        let mut data_in = self.data_in;
        data_in.clear();
        let result = if self.abort.is_set() {
            Ok(CmdOutput {
                status: Status::TaskAborted,
                ..CmdOutput::good(0)
            })
        } else {
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
                ..self.nexus.nexus()
            };
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
        job.run();
        Ok(())
    }
}
