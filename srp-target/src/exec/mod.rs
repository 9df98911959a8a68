//! The SCSI execution engine: [`LogicalUnit::execute`] runs one CDB against a LUN's backend.
//!
//! Contract (STYLE.md, SCSI): SCSI failures are `Ok` with CHECK CONDITION and the exact SPC
//! sense ([`CmdOutput::sense`]); `Err` is a [`TransportError`], which the transport answers
//! by its own rules. Nothing here knows SRP or RDMA: the transport fetches the data-out
//! before calling, and sends `data_in` after. A transport with registered memory passes
//! it ([`LogicalUnit::execute_io`]): READ fills it and WRITE takes its data from it through
//! the backend directly ([`CmdOutput::data_in_staged`]), no copy in between; every other
//! command works on bytes.
//!
//! Dispatch: [`scsi::Command::parse`] against the one opcode table, restricted to
//! [`supported_opcodes`], which also answers REPORT SUPPORTED OPERATION CODES.
//!
//! Files: [`commands`] (the supported-command table of docs/target.md), [`counters`] (per-LUN command counters), [`inquiry`] (INQUIRY, VPD pages), [`io`] (READ, WRITE, VERIFY, COMPARE AND WRITE,
//! SYNCHRONIZE CACHE, READ CAPACITY), [`writes`] (WRITE AND VERIFY, ORWRITE, WRITE ATOMIC),
//! [`medium`] (PRE-FETCH, GET LBA STATUS, READ DEFECT DATA, START STOP UNIT, PREVENT ALLOW
//! MEDIUM REMOVAL), [`provisioning`] (WRITE SAME, UNMAP), [`mode`] (MODE
//! SENSE/SELECT), [`report`] (REPORT LUNS, REPORT SUPPORTED OPERATION CODES, REPORT TARGET
//! PORT GROUPS, and commands to a LUN that does not exist), [`pr`] (PERSISTENT RESERVE
//! IN/OUT and the reservation conflict check every command passes first), [`ua`] (unit
//! attention conditions, checked before everything else).

pub mod aio;
pub mod commands;
pub mod copy;
pub mod counters;
mod durability;
pub mod geometry;
pub mod inquiry;
pub mod io;
pub mod medium;
pub mod mode;
pub mod pr;
pub mod provisioning;
pub mod report;
pub mod rules;
pub mod store;
pub mod ua;
pub mod writes;

pub use geometry::Alignment;
pub use report::execute_unknown_lun;

use crate::backend::{Backend, BackendError, MemSpan};
use crate::lu::{LunIdentity, PortIdentity, TargetPortGroup};
use scsi::{CdbError, Command, Lun, OpcodeInfo, Sense, SenseCode, Status};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use wirekit::WireRepr;

/// (Operation code, service action) pairs the table parses but this target does not
/// route: PERSISTENT RESERVE OUT / REGISTER AND MOVE. Absent from [`supported_opcodes`], so
/// INVALID FIELD IN CDB at the SERVICE ACTION, and REPORT SUPPORTED OPERATION CODES says
/// "not supported".
const NOT_ROUTED: [(u8, u8); 1] = [(0x5f, 0x07)];

fn routed(opcode: u8, service_action: Option<u8>) -> bool {
    !service_action.is_some_and(|sa| NOT_ROUTED.contains(&(opcode, sa)))
}

/// The commands this engine executes: scsi's [`scsi::OPCODES`] less REGISTER AND MOVE.
/// Drives both dispatch and REPORT SUPPORTED OPERATION CODES.
pub fn supported_opcodes() -> &'static [OpcodeInfo] {
    static TABLE: OnceLock<Vec<OpcodeInfo>> = OnceLock::new();
    TABLE.get_or_init(|| {
        scsi::OPCODES
            .iter()
            .filter(|e| routed(e.opcode, e.service_action))
            .copied()
            .collect()
    })
}

/// The response to one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmdOutput {
    /// SAM status.
    pub status: Status,
    /// Sense data, with CHECK CONDITION (and with GOOD for REQUEST SENSE's none).
    pub sense: Option<Sense>,
    /// Bytes of `data_in` to send: already cut to the CDB's ALLOCATION LENGTH; the
    /// transport computes the residual against the initiator's buffer.
    pub data_in_len: usize,
    /// Bytes of the data-out the command used; a longer data-out is an overrun the
    /// transport reports (SAM-5 5.4.3) with this as the expected length.
    pub data_out_len: usize,
    /// PREEMPT AND ABORT: the I_T nexuses whose tasks for this LU the transport must abort
    /// (SPC-4 5.13.11.2.6); empty for every other command.
    pub abort_nexuses: Vec<pr::ItNexus>,
    /// The `data_in_len` bytes of data-in are at the start of the staging memory given to
    /// [`LogicalUnit::execute_io`], not in `data_in`.
    pub data_in_staged: bool,
}

/// Where a command's data-out is, for [`LogicalUnit::execute_io`].
#[derive(Clone, Copy, Debug)]
pub enum DataOut<'a> {
    /// Bytes (immediate data, or a transport without registered memory).
    Bytes(&'a [u8]),
    /// Registered memory the transport fetched it into: WRITE hands it to the backend as
    /// it is; other commands read it out first.
    Staged(MemSpan<'a>),
}

impl CmdOutput {
    /// GOOD with `data_in_len` bytes of data-in.
    pub fn good(data_in_len: usize) -> CmdOutput {
        CmdOutput {
            status: Status::Good,
            sense: None,
            data_in_len,
            data_out_len: 0,
            abort_nexuses: Vec::new(),
            data_in_staged: false,
        }
    }
}

/// CHECK CONDITION with `sense`, no data.
pub fn check_condition(sense: Sense) -> CmdOutput {
    CmdOutput {
        status: Status::CheckCondition,
        sense: Some(sense),
        data_in_len: 0,
        data_out_len: 0,
        abort_nexuses: Vec::new(),
        data_in_staged: false,
    }
}

/// A failure that is not a SCSI status: the transport decides the answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The data-out holds fewer bytes than the CDB transfers: an underrun, which SAM-5
    /// leaves to the protocol (SRP: DOUNDER in SRP_RSP).
    #[error(
        "data-out underrun: the command needs {need_bytes} bytes, the transport delivered {have_bytes}"
    )]
    DataOutUnderrun {
        /// Bytes the CDB transfers.
        need_bytes: usize,
        /// Bytes delivered.
        have_bytes: usize,
    },
}

impl TransportError {
    /// The CHECK CONDITION LIO answers with (`target_cmd_size_check`): ABORTED COMMAND,
    /// INVALID FIELD IN COMMAND INFORMATION UNIT, for a transport that wants a SCSI status.
    pub fn sense(&self) -> Sense {
        match self {
            TransportError::DataOutUnderrun { .. } => {
                Sense::new(SenseCode::INVALID_FIELD_IN_COMMAND_IU)
            }
        }
    }
}

/// The I_T nexus (and port) a command arrived on: what REPORT LUNS, REPORT TARGET PORT
/// GROUPS, VPD 83h's port designators and persistent reservations answer from.
#[derive(Clone, Copy, Debug)]
pub struct Nexus<'a> {
    /// The initiator port identifier of the channel (SRP_LOGIN_REQ's): with the relative
    /// target port of `port`, the I_T nexus persistent reservations register.
    pub initiator: srp::wire::PortId,
    /// The LUNs this initiator sees through this port (REPORT LUNS).
    pub luns: &'a [Lun],
    /// The target port the command arrived through.
    pub port: PortIdentity,
    /// Every target port group of the target (REPORT TARGET PORT GROUPS).
    pub groups: &'a [TargetPortGroup],
    /// Set when the command's task is aborted: long commands (a copy) stop between steps,
    /// and a writer waiting for a copy's hold gives up.
    pub abort: Option<&'a AtomicBool>,
    /// Whether the command may wait for a copy holding its range. False when it runs on
    /// the daemon's loop (a backend that never blocks runs inline there): the loop must
    /// not wait for a copy, so such a writer is answered BUSY and the initiator retries.
    pub may_wait: bool,
    /// The LU's PR epoch when the command passed its reservation check (set by the
    /// engine): a command that takes the LU's order after a change from another appliance
    /// is answered BUSY (`pr/shared.rs`).
    pub pr_epoch: Option<u64>,
}

impl Nexus<'_> {
    /// Whether the command's task was aborted.
    pub fn aborted(&self) -> bool {
        self.abort.is_some_and(|a| a.load(Ordering::Acquire))
    }
}

/// How to build a [`LogicalUnit`].
#[derive(Clone, Debug)]
pub struct LuConfig {
    /// The LUN's stable identity.
    pub identity: LunIdentity,
    /// Reject every command that modifies the medium (DATA PROTECT, WRITE PROTECTED).
    pub read_only: bool,
    /// Initial WCE. Off: every write is durable before status, as with FUA.
    pub write_cache: bool,
    /// Whether MODE SELECT may change WCE (`[[lun]] write_cache_changeable`); when not, a
    /// MODE SELECT that changes it is refused.
    pub wce_changeable: bool,
    /// WCE as configured, when `write_cache` was taken from a saved page (the caching
    /// page's default values); `None`: `write_cache`.
    pub default_write_cache: Option<bool>,
    /// Where the caching page is saved (MODE SELECT with SP=1): a changeable LU's file in
    /// the target's state directory; `None`: not savable.
    pub saved_pages: Option<std::path::PathBuf>,
    /// The WCE a saved page held at start (`mode::load_saved_wce`), if any.
    pub saved_write_cache: Option<bool>,
    /// Where the persistent reservation state is kept under APTPL; `None`: APTPL=1 is
    /// refused (PTPL_C=0).
    pub pr_file: Option<std::path::PathBuf>,
    /// The reservation state saved at `pr_file` (`pr::persist::load`), to start from.
    pub saved_pr: Option<pr::persist::SavedPr>,
    /// INQUIRY PRODUCT IDENTIFICATION (ASCII, at most 16 bytes; longer is cut).
    pub product: String,
    /// Largest READ/WRITE in bytes (VPD B0h MAXIMUM TRANSFER LENGTH): what the transport's
    /// channels accept per command, so the two limits agree.
    pub max_transfer_bytes: u32,
    /// The target's copy manager, shared by its LUs (EXTENDED COPY across them, tokens
    /// valid on all of them); `None`: one of its own.
    pub copy_manager: Option<std::sync::Arc<copy::CopyManager>>,
    /// Physical block size in bytes (`[[lun]] physical_block_size`; READ CAPACITY(16)'s
    /// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT, VPD B0h's granularities). `None`, or a
    /// value that is not a power-of-two multiple of the logical block size (the config
    /// refuses those): the logical block size.
    pub physical_block_bytes: Option<u32>,
    /// Where physical blocks and unmap units start, the unmap granularity ([`Alignment`]).
    pub alignment: Alignment,
    /// The intent log that makes WRITE ATOMIC power-fail atomic up to the transfer limit
    /// on a file or device (`crate::atomic`), already recovered; `None`: WRITE ATOMIC is
    /// limited to what the medium writes whole (one physical block).
    pub atomic_log: Option<std::sync::Arc<Mutex<crate::atomic::IntentLog>>>,
    /// The reservation state kept with other appliances serving the same LU
    /// ([`pr::shared`]); `None`: this appliance's alone.
    pub shared_pr: Option<std::sync::Arc<dyn pr::shared::SharedPrStore>>,
}

impl LuConfig {
    /// A writable LUN with write cache on and the default product name.
    pub fn new(identity: LunIdentity) -> LuConfig {
        LuConfig {
            identity,
            read_only: false,
            write_cache: true,
            wce_changeable: false,
            default_write_cache: None,
            saved_pages: None,
            saved_write_cache: None,
            pr_file: None,
            saved_pr: None,
            product: "SRP LUN".to_owned(),
            max_transfer_bytes: io::MAX_TRANSFER_BYTES,
            copy_manager: None,
            physical_block_bytes: None,
            alignment: Alignment::default(),
            atomic_log: None,
            shared_pr: None,
        }
    }
}

/// One logical unit: a backend and the SCSI state the engine keeps for it.
#[derive(Debug)]
pub struct LogicalUnit {
    backend: store::Store,
    identity: LunIdentity,
    read_only: bool,
    max_transfer_bytes: u32,
    write_cache: AtomicBool,
    product: String,
    /// Reads and medium-modifying commands take it shared; COMPARE AND WRITE, ORWRITE and
    /// WRITE ATOMIC take it exclusive, so that no write lands between their read and their
    /// write and no read sees half of them (SBC-4 4.29, 5.3).
    io_order: RwLock<()>,
    /// Asynchronous reads and writes in flight, which exclusive ordering waits for
    /// ([`aio`]).
    gate: aio::Gate,
    /// Physical block size in bytes: a power-of-two multiple of the logical block size.
    physical_block_bytes: u32,
    /// Physical block and unmap unit alignment ([`geometry`]).
    alignment: Alignment,
    /// The copy manager ([`copy`]).
    copy: std::sync::Arc<copy::CopyManager>,
    /// EXTENDED COPY results by list identifier ([`copy`]).
    copy_lists: copy::results::CopyLists,
    /// Ranges watched by copies and tokens ([`copy`]).
    watches: copy::watch::Watches,
    /// This LU as shared ([`LogicalUnit::into_shared`]): what a token points back to.
    me: OnceLock<std::sync::Weak<LogicalUnit>>,
    /// Persistent reservations ([`pr`]).
    pr: RwLock<pr::PrState>,
    /// Where the reservation state is shared with other appliances ([`pr::shared`]).
    pr_shared: Option<std::sync::Arc<dyn pr::shared::SharedPrStore>>,
    /// The shared state's version this appliance holds.
    pr_version: pr::shared::PrVersion,
    /// Moves on with each change taken from another appliance.
    pr_epoch: std::sync::atomic::AtomicU64,
    /// Where the reservation state persists under APTPL ([`pr::persist`]); none: APTPL
    /// is not supported.
    pr_file: Option<std::path::PathBuf>,
    /// What the control socket reports ([`counters`]).
    counters: counters::LuCounters,
    /// Failed flushes, latched (`durability.rs`).
    flush_latch: durability::FlushLatch,
    /// WRITE ATOMIC's intent log ([`crate::atomic`]), if the LU has one.
    atomic_log: Option<std::sync::Arc<Mutex<crate::atomic::IntentLog>>>,
    /// Whether the caching page may change, and where it is saved ([`mode`]).
    mode: mode::ModeState,
    /// Unit attention conditions per I_T nexus ([`ua`]).
    ua: Mutex<ua::UaState>,
}

/// Why a handler stopped early: a SCSI status, or a transport failure.
#[derive(Debug)]
pub(crate) enum Stop {
    /// CHECK CONDITION with this sense.
    Check(Sense),
    /// Not a SCSI status.
    Transport(TransportError),
    /// RESERVATION CONFLICT met past the command's own check (a copy target's).
    Conflict,
    /// BUSY: the command did not run (a copy holds its range and it may not wait).
    Busy,
}

impl From<Sense> for Stop {
    fn from(s: Sense) -> Stop {
        Stop::Check(s)
    }
}

impl From<SenseCode> for Stop {
    fn from(c: SenseCode) -> Stop {
        Stop::Check(Sense::new(c))
    }
}

impl From<TransportError> for Stop {
    fn from(t: TransportError) -> Stop {
        Stop::Transport(t)
    }
}

impl From<CdbError> for Stop {
    fn from(e: CdbError) -> Stop {
        Stop::Check(
            e.sense()
                .unwrap_or_else(|| Sense::new(SenseCode::INVALID_FIELD_IN_CDB)),
        )
    }
}

/// What handlers return.
pub(crate) type Exec = Result<CmdOutput, Stop>;

/// Cuts `data_in` to `alloc_len` and answers GOOD with what is left.
pub(crate) fn good_data(data_in: &mut Vec<u8>, alloc_len: usize) -> Exec {
    data_in.truncate(alloc_len);
    Ok(CmdOutput::good(data_in.len()))
}

/// The first `need` bytes of the data-out, or an underrun.
pub(crate) fn data_out(data_out: &[u8], need: usize) -> Result<&[u8], Stop> {
    data_out
        .get(..need)
        .ok_or(Stop::Transport(TransportError::DataOutUnderrun {
            need_bytes: need,
            have_bytes: data_out.len(),
        }))
}

/// Parses `cdb` against [`supported_opcodes`].
pub(crate) fn parse(cdb: &[u8]) -> Result<Command, Stop> {
    if let (Some(&op), Some(&sa)) = (cdb.first(), cdb.get(1)) {
        if !routed(op, Some(sa & 0x1f)) {
            // As the table answers a service action it does not list.
            return Err(CdbError::InvalidField { byte: 1, bit: 4 }.into());
        }
    }
    Ok(Command::parse(cdb)?)
}

/// Turns a handler's result into the engine's.
pub(crate) fn finish(r: Exec, data_in: &mut Vec<u8>) -> Result<CmdOutput, TransportError> {
    match r {
        Ok(out) => Ok(out),
        Err(Stop::Check(sense)) => {
            data_in.clear();
            Ok(check_condition(sense))
        }
        Err(Stop::Transport(t)) => {
            data_in.clear();
            Err(t)
        }
        Err(Stop::Conflict) => {
            data_in.clear();
            Ok(pr::reservation_conflict())
        }
        Err(Stop::Busy) => {
            data_in.clear();
            Ok(CmdOutput {
                status: scsi::Status::Busy,
                ..CmdOutput::good(0)
            })
        }
    }
}

/// REQUEST SENSE data for `sense` in the format DESC asks for, cut to `alloc_len`.
pub(crate) fn request_sense_data(
    sense: &Sense,
    desc: bool,
    data_in: &mut Vec<u8>,
    alloc_len: u8,
) -> Exec {
    let s = if desc {
        Sense::Descriptor(sense.to_descriptor())
    } else {
        sense.clone()
    };
    data_in.resize(s.buffer_len(), 0);
    // buffer_len() sized it; a failure would be a scsi crate bug, answered as such.
    s.emit(data_in)
        .map_err(|_| Stop::Check(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE)))?;
    good_data(data_in, alloc_len.into())
}

impl LogicalUnit {
    /// A logical unit over `backend`.
    pub fn new(backend: Box<dyn Backend>, config: LuConfig) -> LogicalUnit {
        let backend_block = backend.block_size().bytes();
        LogicalUnit {
            backend: store::Store::new(backend),
            identity: config.identity,
            read_only: config.read_only,
            max_transfer_bytes: config.max_transfer_bytes,
            write_cache: AtomicBool::new(config.write_cache),
            product: config.product,
            io_order: RwLock::new(()),
            gate: aio::Gate::default(),
            physical_block_bytes: config
                .physical_block_bytes
                .filter(|&p| p > backend_block && p % backend_block == 0 && p.is_power_of_two())
                .unwrap_or(backend_block),
            alignment: config.alignment,
            copy: config.copy_manager.unwrap_or_default(),
            copy_lists: copy::results::CopyLists::default(),
            watches: copy::watch::Watches::default(),
            me: OnceLock::new(),
            pr: RwLock::new(config.saved_pr.map(|s| s.0).unwrap_or_default()),
            pr_shared: config.shared_pr,
            pr_version: pr::shared::PrVersion::default(),
            pr_epoch: std::sync::atomic::AtomicU64::new(0),
            pr_file: config.pr_file,
            counters: counters::LuCounters::default(),
            flush_latch: durability::FlushLatch::default(),
            atomic_log: config.atomic_log,
            mode: mode::ModeState {
                wce_changeable: config.wce_changeable,
                default_wce: config.default_write_cache.unwrap_or(config.write_cache),
                saved_at: config.saved_pages.clone(),
                saved: Mutex::new(config.saved_pages.as_ref().and(config.saved_write_cache)),
            },
            ua: Mutex::new(ua::UaState::default()),
        }
    }

    /// This LU shared, and known to itself as such (POPULATE TOKEN's tokens point back to
    /// it); every LU of a target is built so.
    pub fn into_shared(self) -> std::sync::Arc<LogicalUnit> {
        let lu = std::sync::Arc::new(self);
        let _ = lu.me.set(std::sync::Arc::downgrade(&lu));
        // Reservations shared with other appliances: their changes followed from now on.
        lu.follow_shared_pr();
        // A store resized outside the target (an RBD image): every nexus is told.
        let weak = std::sync::Arc::downgrade(&lu);
        lu.backend.watch_capacity(Box::new(move |blocks| {
            if let Some(lu) = weak.upgrade() {
                tracing::info!(lu = %lu.identity.unique_name(), blocks,
                    "the backing store changed size: CAPACITY DATA HAS CHANGED to every initiator");
                lu.unit_attention(ua::To::All, SenseCode::CAPACITY_DATA_HAS_CHANGED);
            }
        }));
        lu
    }

    /// This LU as shared, if it was built so.
    pub(crate) fn self_arc(&self) -> Option<std::sync::Arc<LogicalUnit>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    /// The copy manager.
    pub fn copy_manager(&self) -> &std::sync::Arc<copy::CopyManager> {
        &self.copy
    }

    /// The backend, without its writes (those go through [`rules`]).
    pub fn backend(&self) -> &store::Store {
        &self.backend
    }

    /// The stable identity.
    pub fn identity(&self) -> &LunIdentity {
        &self.identity
    }

    /// Whether the LUN is write protected.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Current WCE (the caching mode page; MODE SELECT changes it).
    pub fn write_cache(&self) -> bool {
        self.write_cache.load(Ordering::Relaxed)
    }

    /// Executes `cdb` (trailing bytes past its length are ignored, as SRP pads to 16):
    /// reads what it needs from `data_out`, replaces `data_in` with the data-in.
    ///
    /// Blocking: the backend I/O happens on the calling thread (a backend worker).
    pub fn execute(
        &self,
        nexus: &Nexus<'_>,
        cdb: &[u8],
        data_out: &[u8],
        data_in: &mut Vec<u8>,
    ) -> Result<CmdOutput, TransportError> {
        self.execute_io(nexus, cdb, DataOut::Bytes(data_out), data_in, None)
    }

    /// [`LogicalUnit::execute`] with the transport's registered memory: `data_out` may lie
    /// in it, and a READ may put its data-in at the start of `staging` (then
    /// [`CmdOutput::data_in_staged`]; a READ longer than `staging` uses `data_in`).
    pub fn execute_io(
        &self,
        nexus: &Nexus<'_>,
        cdb: &[u8],
        data_out: DataOut<'_>,
        data_in: &mut Vec<u8>,
        staging: Option<MemSpan<'_>>,
    ) -> Result<CmdOutput, TransportError> {
        data_in.clear();
        let started = std::time::Instant::now();
        // A panic in a handler (a target bug) answers this command and leaves the worker
        // and the LU serving: every lock here recovers from poisoning.
        let run =
            std::panic::AssertUnwindSafe(|| match self.check_unit_attention(nexus, cdb, data_in) {
                Some(ua) => ua,
                None => parse(cdb)
                    .and_then(|cmd| self.dispatch_io(nexus, cmd, data_out, data_in, staging)),
            });
        let r = std::panic::catch_unwind(run).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(lu = %self.identity.unique_name(), cdb = ?cdb, %what,
                "a command panicked in the target (a bug): answered INTERNAL TARGET FAILURE");
            Err(Stop::Check(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE)))
        });
        let out = finish(r, data_in);
        self.counters.record(cdb.first().copied(), &out);
        let us = started.elapsed().as_micros().try_into().unwrap_or(u64::MAX);
        self.counters.latency(cdb.first().copied(), us);
        out
    }

    /// Applies the command's rule ([`rules`]): the reservation check first, then the
    /// handler, given the LU's door for writes when the command writes it; the door flushes
    /// after the handler when the rule asks for durability.
    fn dispatch_io(
        &self,
        nexus: &Nexus<'_>,
        cmd: Command,
        dout: DataOut<'_>,
        din: &mut Vec<u8>,
        staging: Option<MemSpan<'_>>,
    ) -> Exec {
        // The epoch before the check: a change from another appliance after it makes the
        // command BUSY once it has the LU's order (`pr/shared.rs`).
        let nexus = &Nexus {
            pr_epoch: Some(self.pr_epoch()),
            ..*nexus
        };
        let rule = rules::rule(&cmd);
        if self
            .pr_read()
            .conflicts_with(nexus.it_nexus(), &cmd, rule.access)
        {
            return Ok(pr::reservation_conflict());
        }
        match rule.writes {
            rules::Writes::ThisLu(durability) => {
                let writes = store::MediumWrites::new(self, durability);
                let r = self.route(nexus, cmd, dout, din, staging, Some(&writes));
                writes.finish(r)
            }
            rules::Writes::Nothing | rules::Writes::CopyTargets => {
                self.route(nexus, cmd, dout, din, staging, None)
            }
        }
    }

    /// READ into and WRITE from registered memory directly; the rest on bytes.
    fn route(
        &self,
        nexus: &Nexus<'_>,
        cmd: Command,
        dout: DataOut<'_>,
        din: &mut Vec<u8>,
        staging: Option<MemSpan<'_>>,
        writes: Option<&store::MediumWrites<'_>>,
    ) -> Exec {
        match (&cmd, dout, staging) {
            (Command::Read(rw), DataOut::Bytes([]), Some(st))
                if self.bytes_of(rw.blocks) <= st.len =>
            {
                io::read_staged(self, rw, st)
            }
            (Command::Write(rw), DataOut::Staged(src), _) => {
                io::write_staged(self, nexus, rw, src, door(writes)?)
            }
            (_, DataOut::Bytes(b), _) => self.dispatch(nexus, cmd, b, din, writes),
            (_, DataOut::Staged(src), _) => {
                // A control command's data-out, small: read out of the registered memory.
                let mut bytes = vec![0u8; src.len];
                src.block.read(src.offset, &mut bytes).map_err(|_| {
                    Stop::Transport(TransportError::DataOutUnderrun {
                        need_bytes: src.len,
                        have_bytes: 0,
                    })
                })?;
                self.dispatch(nexus, cmd, &bytes, din, writes)
            }
        }
    }

    /// The LUN's command counters.
    pub fn counters(&self) -> counters::LuCountersSnapshot {
        counters::LuCountersSnapshot {
            flush_errors: self.flush_errors(),
            writes_held: self.writes_held(),
            writes_busy_for_copies: self.writes_refused_for_copies(),
            copy_collisions: self.copy_collisions(),
            async_commands: self.gate.counts().0,
            async_peak: self.gate.counts().1,
            ..self.counters.snapshot()
        }
    }

    /// Its service-time histograms (READ, medium-modifying, SYNCHRONIZE CACHE).
    pub fn latency(&self) -> counters::LuLatency {
        self.counters.latency_snapshot()
    }

    fn dispatch(
        &self,
        nexus: &Nexus<'_>,
        cmd: Command,
        dout: &[u8],
        din: &mut Vec<u8>,
        writes: Option<&store::MediumWrites<'_>>,
    ) -> Exec {
        use Command as C;
        let w = || door(writes);
        match cmd {
            C::TestUnitReady => Ok(CmdOutput::good(0)),
            // Autosense: sense goes with the failing command; a pending unit attention was
            // answered before dispatch ([`ua`]), so there is nothing else to report.
            C::RequestSense(r) => {
                request_sense_data(&Sense::new(SenseCode::NO_SENSE), r.desc, din, r.alloc_len)
            }
            C::Inquiry(q) => inquiry::inquiry(self, nexus, &q, din),
            C::ModeSense(m) => mode::mode_sense(self, &m, din),
            C::ModeSelect(m) => mode::mode_select(self, nexus, &m, dout),
            C::StartStopUnit(s) => medium::start_stop_unit(self, nexus, &s),
            C::PreventAllowMediumRemoval { .. } => medium::prevent_allow(),
            C::Reserve(_) => pr::scsi2::reserve(self, nexus),
            C::Release(_) => pr::scsi2::release(self, nexus),
            C::PreFetch(p) => medium::prefetch(self, &p),
            C::GetLbaStatus(g) => medium::get_lba_status(self, &g, din),
            C::ReadDefectData(r) => medium::read_defect_data(&r, din),
            C::WriteAndVerify(v) => writes::write_and_verify(self, nexus, &v, dout, w()?),
            C::OrWrite(rw) => writes::orwrite(self, nexus, &rw, dout, w()?),
            C::WriteAtomic(a) => writes::write_atomic(self, nexus, &a, dout, w()?),
            C::ReadCapacity10 => io::read_capacity10(self, din),
            C::ReadCapacity16(r) => io::read_capacity16(self, &r, din),
            C::Read(rw) => io::read(self, &rw, din),
            C::Write(rw) => io::write(self, nexus, &rw, dout, w()?),
            C::Verify(v) => io::verify(self, &v, dout),
            C::CompareAndWrite(c) => io::compare_and_write(self, nexus, &c, dout, w()?),
            C::SynchronizeCache(s) => io::synchronize_cache(self, &s),
            C::WriteSame(ws) => provisioning::write_same(self, nexus, &ws, dout, w()?),
            C::Unmap(u) => provisioning::unmap(self, nexus, &u, dout, w()?),
            C::CopyOut(c) => copy::copy_out(self, nexus, &c, dout, writes),
            C::CopyIn(c) => copy::copy_in(self, nexus, &c, din),
            C::ReportLuns(r) => report::report_luns(nexus, &r, din),
            C::ReportSupportedOpcodes(r) => report::report_supported_opcodes(&r, din),
            C::ReportTargetPortGroups(r) => report::report_target_port_groups(nexus, &r, din),
            C::PersistentReserveIn(p) => pr::cdb_in::pr_in(self, &p, din),
            C::PersistentReserveOut(p) => pr::cdb_out::pr_out(self, nexus, &p, dout),
        }
    }

    /// Shared ordering for a read: waits only for an atomic command in progress.
    pub(crate) fn read_order(&self) -> RwLockReadGuard<'_, ()> {
        self.write_order()
    }

    /// Shared ordering for a medium-modifying command.
    pub(crate) fn write_order(&self) -> RwLockReadGuard<'_, ()> {
        // The guarded value is (): poisoning carries no broken invariant.
        self.io_order.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Exclusive ordering for COMPARE AND WRITE: once no asynchronous read or write is in
    /// flight either (`aio.rs`).
    pub(crate) fn atomic_order(&self) -> RwLockWriteGuard<'_, ()> {
        let order = self
            .io_order
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        self.gate.wait_empty();
        order
    }

    /// DATA PROTECT, WRITE PROTECTED on a read-only LUN.
    pub(crate) fn check_writable(&self) -> Result<(), Stop> {
        if self.read_only {
            return Err(SenseCode::WRITE_PROTECTED.into());
        }
        Ok(())
    }

    pub(crate) fn set_write_cache(&self, on: bool) {
        self.write_cache.store(on, Ordering::Relaxed);
    }

    pub(crate) fn product(&self) -> &str {
        &self.product
    }
}

/// The door for writes a writing command's rule made: absent only through a bug
/// ([`rules::rule`] and the handler table disagreeing).
fn door<'a, 'lu>(
    writes: Option<&'a store::MediumWrites<'lu>>,
) -> Result<&'a store::MediumWrites<'lu>, Stop> {
    writes.ok_or_else(|| {
        tracing::error!(
            "a writing command reached its handler without its rule's writes (a target bug)"
        );
        Stop::Check(Sense::new(SenseCode::INTERNAL_TARGET_FAILURE))
    })
}

/// The sense for a backend failure at `lba`: SPACE ALLOCATION FAILED WRITE PROTECT when the
/// store is full, else `code` (a MEDIUM ERROR) with the LBA as INFORMATION.
pub(crate) fn backend_sense(e: &BackendError, code: SenseCode, lba: scsi::Lba) -> Stop {
    if e.is_out_of_space() {
        return SenseCode::SPACE_ALLOCATION_FAILED_WRITE_PROTECT.into();
    }
    Stop::Check(Sense::with_information(code, lba.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_drops_register_and_move_only() {
        let t = supported_opcodes();
        assert_eq!(scsi::OPCODES.len() - t.len(), 1);
        assert!(
            t.iter()
                .all(|e| (e.opcode, e.service_action) != (0x5f, Some(0x07)))
        );
        assert_eq!(t.iter().filter(|e| e.opcode == 0x5e).count(), 4);
        assert_eq!(t.iter().filter(|e| e.opcode == 0x5f).count(), 7);
    }

    #[test]
    fn transport_error_sense_is_lio_answer() {
        let t = TransportError::DataOutUnderrun {
            need_bytes: 512,
            have_bytes: 0,
        };
        assert_eq!(t.sense().code(), SenseCode::INVALID_FIELD_IN_COMMAND_IU);
    }
}
