//! SCSI request blocks. The submitter fills an [`SrbRequest`] (what a class driver puts in
//! an SRB before IoCallDriver); the port turns it into an [`Srb`], a handle the miniport
//! holds like the SRB pointer it is (clonable, kept in the miniport's own lists) until it
//! completes it; the submitter gets an [`SrbResult`].
//!
//! The miniport reads the request fields, moves data through the scatter-gather list
//! ([`Srb::read_data`], [`Srb::write_data`], [`Srb::dma_read`], [`Srb::dma_write`]), sets
//! the SRB status, SCSI status and autosense ([`Srb::set_sense`] copies the sense and sets
//! `SRB_STATUS_AUTOSENSE_VALID`), and keeps its per-request state in the SRB extension.
//! Closures given to [`Srb::with_extension`] must not complete the SRB.
#[allow(unused_imports)]
use crate::prelude::*;

use crate::memory::DataBuffer;
use crate::sgl::{ScatterGatherList, SglError};
use crate::status::SrbStatus;
use alloc::sync::Arc;
use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use ib_verbs::sync::{Lock, LockGuard};

/// A request's identity, unique in the process (for logs, aborts, verifier reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrbId(pub u64);

impl ib_verbs::IdKey for SrbId {
    fn id_bits(self) -> u64 {
        self.0
    }
}

impl fmt::Display for SrbId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// `SRB_FUNCTION_*` (srb.h): what the request asks of the miniport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SrbFunction {
    /// `SRB_FUNCTION_EXECUTE_SCSI` (0x00): run the CDB.
    ExecuteScsi,
    /// `SRB_FUNCTION_SHUTDOWN` (0x07).
    Shutdown,
    /// `SRB_FUNCTION_FLUSH` (0x08).
    Flush,
    /// `SRB_FUNCTION_ABORT_COMMAND` (0x10): abort [`Srb::abort_target`].
    AbortCommand,
    /// `SRB_FUNCTION_RESET_DEVICE` (0x13): reset the target.
    ResetDevice,
    /// `SRB_FUNCTION_RESET_LOGICAL_UNIT` (0x20).
    ResetLogicalUnit,
}

impl SrbFunction {
    /// The srb.h code.
    pub fn code(self) -> u8 {
        match self {
            SrbFunction::ExecuteScsi => 0x00,
            SrbFunction::Shutdown => 0x07,
            SrbFunction::Flush => 0x08,
            SrbFunction::AbortCommand => 0x10,
            SrbFunction::ResetDevice => 0x13,
            SrbFunction::ResetLogicalUnit => 0x20,
        }
    }

    /// Management requests go ahead of queued I/O and past the per-LU depth and
    /// DeviceBusy holds (not past an adapter pause, busy or reset).
    pub fn is_management(self) -> bool {
        !matches!(self, SrbFunction::ExecuteScsi)
    }
}

/// PathId / TargetId / Lun: where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LuAddress {
    /// The bus.
    pub path_id: u8,
    /// The target on it.
    pub target_id: u8,
    /// The logical unit.
    pub lun: u8,
}

impl LuAddress {
    /// `(path, target, lun)`.
    pub const fn new(path_id: u8, target_id: u8, lun: u8) -> LuAddress {
        LuAddress {
            path_id,
            target_id,
            lun,
        }
    }
}

impl fmt::Display for LuAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.path_id, self.target_id, self.lun)
    }
}

/// `SRB_FLAGS_DATA_IN` / `SRB_FLAGS_DATA_OUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirection {
    /// No data phase.
    None,
    /// Device to host (a read).
    In,
    /// Host to device (a write).
    Out,
}

/// What a submitter asks for.
#[derive(Debug)]
pub struct SrbRequest {
    /// The function.
    pub function: SrbFunction,
    /// Where it goes.
    pub address: LuAddress,
    /// The CDB (1 to 16 bytes for EXECUTE_SCSI).
    pub cdb: scsi::CdbBytes,
    /// The data direction.
    pub direction: DataDirection,
    /// The data: the bytes to write, or a buffer of the transfer length to read into.
    pub data: SrbData,
    /// `SenseInfoBufferLength`: how many sense bytes the submitter takes.
    pub sense_len: u8,
    /// `TimeOutValue`: how long the miniport may hold the request.
    pub timeout: Duration,
    /// For ABORT_COMMAND: the request to abort.
    pub abort_target: Option<SrbId>,
}

impl SrbRequest {
    /// The timeout class drivers use by default.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

    /// An EXECUTE_SCSI request.
    pub fn scsi(
        address: LuAddress,
        cdb: &[u8],
        direction: DataDirection,
        data: impl Into<SrbData>,
    ) -> Self {
        SrbRequest {
            function: SrbFunction::ExecuteScsi,
            address,
            cdb: cdb.into(),
            direction,
            data: data.into(),
            sense_len: 18,
            timeout: Self::DEFAULT_TIMEOUT,
            abort_target: None,
        }
    }

    /// A request with no CDB and no data (ABORT_COMMAND, RESET_LOGICAL_UNIT, …).
    pub fn management(function: SrbFunction, address: LuAddress) -> Self {
        SrbRequest {
            function,
            cdb: scsi::CdbBytes::default(),
            ..SrbRequest::scsi(address, &[], DataDirection::None, DataBuffer::empty())
        }
    }

    /// The same with another timeout.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        SrbRequest { timeout, ..self }
    }

    /// The same request without its data (a re-issue's: the fields are kept, the buffer
    /// moves to the new SRB).
    fn again(&self) -> Self {
        let data = SrbData::default();
        SrbRequest {
            function: self.function,
            address: self.address,
            cdb: self.cdb.clone(),
            direction: self.direction,
            data,
            sense_len: self.sense_len,
            timeout: self.timeout,
            abort_target: self.abort_target,
        }
    }
}

/// An SRB's data as the submitter gives it.
#[derive(Debug)]
pub enum SrbData {
    /// Pages of the port's system memory the submitter filled (direct I/O): the miniport's
    /// DMA uses these very pages, nothing is copied.
    Buffer(DataBuffer),
    /// Bytes the port copies into fresh pages of its system memory at submission (buffered
    /// I/O, for small control transfers; waits for pages, never at dispatch level).
    Bytes(Vec<u8>),
}

impl SrbData {
    /// Bytes of data.
    pub fn len(&self) -> usize {
        match self {
            SrbData::Buffer(b) => b.len(),
            SrbData::Bytes(v) => v.len(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for SrbData {
    fn default() -> Self {
        SrbData::Buffer(DataBuffer::empty())
    }
}

impl From<DataBuffer> for SrbData {
    fn from(b: DataBuffer) -> Self {
        SrbData::Buffer(b)
    }
}

impl From<Vec<u8>> for SrbData {
    fn from(v: Vec<u8>) -> Self {
        SrbData::Bytes(v)
    }
}

/// What the submitter gets back.
#[derive(Debug)]
pub struct SrbResult {
    /// The request.
    pub id: SrbId,
    /// The SRB status, flags included.
    pub status: SrbStatus,
    /// The SCSI status byte.
    pub scsi_status: u8,
    /// The sense bytes (meaningful when the status has `AUTOSENSE_VALID`).
    pub sense: Vec<u8>,
    /// The data buffer (a read's data), handed back; empty when the port completed the
    /// request while the miniport still held it (the buffer stays with the SRB until the
    /// miniport lets go, so no late DMA reaches reused pages).
    pub data: DataBuffer,
    /// `DataTransferLength` as the miniport left it (less than asked on underrun).
    pub data_transfer_length: usize,
}

/// The parts the miniport writes.
struct SrbIo<X> {
    data: DataBuffer,
    status: SrbStatus,
    scsi_status: u8,
    sense: Vec<u8>,
    data_transfer_length: usize,
    extension: X,
}

struct Inner<X> {
    id: SrbId,
    request: SrbRequest,
    sg: ScatterGatherList,
    io: Lock<SrbIo<X>>,
    completed: AtomicBool,
}

/// An SRB as the miniport sees it: a handle (clones are the same SRB). `X` is the SRB
/// extension (`SrbExtensionSize`), zeroed (`Default`) for each request.
pub struct Srb<X> {
    inner: Arc<Inner<X>>,
}

impl<X> fmt::Debug for Srb<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Srb")
            .field("id", &self.inner.id)
            .field("function", &self.inner.request.function)
            .field("address", &self.inner.request.address)
            .field("completed", &self.is_completed())
            .finish_non_exhaustive()
    }
}

impl<X> Clone for Srb<X> {
    fn clone(&self) -> Self {
        Srb {
            inner: self.inner.clone(),
        }
    }
}

impl<X: Default> Inner<X> {
    fn fresh(id: SrbId, request: SrbRequest, data: DataBuffer) -> Inner<X> {
        Inner {
            id,
            sg: data.sg_list(),
            io: Lock::new(SrbIo {
                data_transfer_length: data.len(),
                data,
                status: SrbStatus::PENDING,
                scsi_status: 0,
                sense: Vec::new(),
                extension: X::default(),
            }),
            completed: AtomicBool::new(false),
            request,
        }
    }
}

/// SRBs the port completed, kept for new requests (StorPort draws SRBs and IRPs from
/// lookaside lists likewise): one is reused once nothing else holds it — the miniport let
/// go of its handles — so a request allocates no SRB in the steady state.
pub struct Lookaside<X> {
    retired: Lock<Vec<Arc<Inner<X>>>>,
}

/// SRBs a lookaside list keeps at most.
const LOOKASIDE_DEPTH: usize = 256;
/// Retired SRBs one allocation looks at (the oldest are likeliest to be free).
const LOOKASIDE_SCAN: usize = 8;

impl<X> Default for Lookaside<X> {
    fn default() -> Self {
        Lookaside {
            retired: Lock::new(Vec::new()),
        }
    }
}

impl<X: Default> Lookaside<X> {
    /// Keeps a completed SRB's memory for a later request (the port's, not a driver's).
    pub fn retire(&self, srb: Srb<X>) {
        let mut r = self.retired.lock();
        if r.len() < LOOKASIDE_DEPTH {
            r.push(srb.inner);
        }
    }

    /// A retired SRB nothing else holds any more, if one is near the front.
    fn take_free(&self) -> Option<Arc<Inner<X>>> {
        let mut r = self.retired.lock();
        let i = r
            .iter()
            .take(LOOKASIDE_SCAN)
            .position(|a| Arc::strong_count(a) == 1)?;
        Some(r.swap_remove(i))
    }
}

impl<X: Default> Srb<X> {
    /// The SRB for `request` with its buffer `data` (the request's own, placed in system
    /// memory), mapped by the buffer's scatter-gather list; from `lookaside` when it holds
    /// a free one. The port's, not a driver's.
    pub fn new(
        lookaside: &Lookaside<X>,
        id: SrbId,
        request: SrbRequest,
        data: DataBuffer,
    ) -> Srb<X> {
        if let Some(mut inner) = lookaside.take_free()
            && let Some(slot) = Arc::get_mut(&mut inner)
        {
            *slot = Inner::fresh(id, request, data);
            return Srb { inner };
        }
        Srb {
            inner: Arc::new(Inner::fresh(id, request, data)),
        }
    }
}

/// The port's side of an SRB: what a port driver — this crate's or another model's (the
/// iSCSI model's SCSIport-era port builds its SCSI_REQUEST_BLOCKs from the same type) —
/// keeps of each request it gives a driver. It makes the SRB, marks it completed and takes
/// the submitter's result; the driver only ever gets [`Srb`] handles ([`SrbOwner::srb`]),
/// so it can do none of these.
pub struct SrbOwner<X> {
    srb: Srb<X>,
}

impl<X> fmt::Debug for SrbOwner<X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SrbOwner").field(&self.srb).finish()
    }
}

impl<X: Default> SrbOwner<X> {
    /// The SRB `id` for `request`, its data in `data` (the request's own buffer, placed in
    /// system memory), mapped by the buffer's scatter-gather list; the request's own
    /// `data` field is not used. The extension starts zeroed (`Default`).
    pub fn new(id: SrbId, request: SrbRequest, data: DataBuffer) -> SrbOwner<X> {
        SrbOwner {
            srb: Srb {
                inner: Arc::new(Inner::fresh(id, request, data)),
            },
        }
    }
}

impl<X: Default> SrbOwner<X> {
    /// [`SrbOwner::new`], the SRB from `lookaside` when it holds a free one (retire it
    /// there, [`Lookaside::retire`], once the request is over).
    pub fn from_lookaside(
        lookaside: &Lookaside<X>,
        id: SrbId,
        request: SrbRequest,
        data: DataBuffer,
    ) -> SrbOwner<X> {
        SrbOwner {
            srb: Srb::new(lookaside, id, request, data),
        }
    }
}

impl<X> SrbOwner<X> {
    /// The handle the driver gets (clones are the same SRB).
    pub fn srb(&self) -> &Srb<X> {
        &self.srb
    }

    /// Marks the SRB completed; false if it already was.
    pub fn mark_completed(&self) -> bool {
        self.srb.mark_completed()
    }

    /// The submitter's result, taking the data buffer: the driver's status, SCSI status
    /// and sense, or `status` when the port completes on its own authority (`forced`: then
    /// it never waits for a driver holding the SRB, and the data stays behind if one does).
    pub fn take_result(&self, status: Option<SrbStatus>, forced: bool) -> SrbResult {
        self.srb.take_result(status, forced)
    }
}

impl<X: Default> Srb<X> {
    /// A fresh SRB for the same request (same id, same buffer, zeroed extension): how the
    /// port re-issues a request the miniport completed with `SRB_STATUS_BUSY`. The
    /// port's, not a driver's.
    pub fn reissue(&self, lookaside: &Lookaside<X>) -> Srb<X> {
        let data = core::mem::take(&mut self.io().data);
        Srb::new(lookaside, self.inner.id, self.inner.request.again(), data)
    }
}

impl<X> Srb<X> {
    fn io(&self) -> LockGuard<'_, SrbIo<X>> {
        self.inner.io.lock()
    }

    /// Its identity.
    pub fn id(&self) -> SrbId {
        self.inner.id
    }
    /// `Function`.
    pub fn function(&self) -> SrbFunction {
        self.inner.request.function
    }
    /// PathId / TargetId / Lun.
    pub fn address(&self) -> LuAddress {
        self.inner.request.address
    }
    /// The CDB.
    pub fn cdb(&self) -> &[u8] {
        &self.inner.request.cdb
    }
    /// The data direction.
    pub fn direction(&self) -> DataDirection {
        self.inner.request.direction
    }
    /// `TimeOutValue`.
    pub fn timeout(&self) -> Duration {
        self.inner.request.timeout
    }
    /// For ABORT_COMMAND, the request to abort.
    pub fn abort_target(&self) -> Option<SrbId> {
        self.inner.request.abort_target
    }
    /// The scatter-gather list of the data buffer.
    pub fn scatter_gather_list(&self) -> &ScatterGatherList {
        &self.inner.sg
    }
    /// Whether two handles are the same SRB.
    pub fn same(&self, other: &Srb<X>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Copies buffer bytes `offset..` into `out`, element by element.
    pub fn read_data(&self, offset: usize, out: &mut [u8]) -> Result<(), SglError> {
        for (at, phys, n) in self.inner.sg.pieces(offset, out.len())? {
            self.dma_read(phys, &mut out[at - offset..at - offset + n])?;
        }
        Ok(())
    }

    /// Copies `data` into the buffer at `offset..`, element by element.
    pub fn write_data(&self, offset: usize, data: &[u8]) -> Result<(), SglError> {
        for (at, phys, n) in self.inner.sg.pieces(offset, data.len())? {
            self.dma_write(phys, &data[at - offset..at - offset + n])?;
        }
        Ok(())
    }

    /// A DMA read of `out.len()` bytes at physical `address` (inside one element).
    pub fn dma_read(&self, address: u64, out: &mut [u8]) -> Result<(), SglError> {
        let at = self.inner.sg.offset_of(address, out.len())?;
        let gone = SglError::OutOfList {
            address,
            len: out.len(),
        };
        self.io().data.read(at, out).map_err(|_| gone)
    }

    /// A DMA write of `data` at physical `address` (inside one element).
    pub fn dma_write(&self, address: u64, data: &[u8]) -> Result<(), SglError> {
        let at = self.inner.sg.offset_of(address, data.len())?;
        let gone = SglError::OutOfList {
            address,
            len: data.len(),
        };
        self.io().data.write(at, data).map_err(|_| gone)
    }

    /// `SrbStatus`.
    pub fn status(&self) -> SrbStatus {
        self.io().status
    }
    /// Sets `SrbStatus`.
    pub fn set_status(&self, status: SrbStatus) {
        self.io().status = status;
    }
    /// Sets `ScsiStatus`.
    pub fn set_scsi_status(&self, scsi_status: u8) {
        self.io().scsi_status = scsi_status;
    }
    /// `DataTransferLength`.
    pub fn data_transfer_length(&self) -> usize {
        self.io().data_transfer_length
    }
    /// Lowers `DataTransferLength` (an underrun); never above the buffer.
    pub fn set_data_transfer_length(&self, len: usize) {
        let mut io = self.io();
        io.data_transfer_length = len.min(io.data.len());
    }

    /// Autosense: copies `sense` (cut to `SenseInfoBufferLength`) and sets
    /// `SRB_STATUS_AUTOSENSE_VALID` on the current status.
    pub fn set_sense(&self, sense: &[u8]) {
        let cap = usize::from(self.inner.request.sense_len);
        let mut io = self.io();
        io.sense = sense[..sense.len().min(cap)].to_vec();
        io.status = io.status.with_autosense();
    }

    /// Runs `f` on the SRB extension.
    pub fn with_extension<R>(&self, f: impl FnOnce(&mut X) -> R) -> R {
        f(&mut self.io().extension)
    }

    /// Marks the SRB completed; false if it already was (a double completion). The port's
    /// (its completion path), not a driver's.
    pub fn mark_completed(&self) -> bool {
        !self.inner.completed.swap(true, Ordering::AcqRel)
    }

    /// Whether the SRB has been completed.
    pub fn is_completed(&self) -> bool {
        self.inner.completed.load(Ordering::Acquire)
    }

    /// The result for the submitter, taking the data buffer; `status` overrides the
    /// miniport's (the port completing on its own). Never waits on a miniport holding
    /// the SRB when `forced` (the port completing on its own): then the data stays behind.
    pub fn take_result(&self, status: Option<SrbStatus>, forced: bool) -> SrbResult {
        let mut r = SrbResult {
            id: self.inner.id,
            status: status.unwrap_or(SrbStatus::INTERNAL_ERROR),
            scsi_status: 0,
            sense: Vec::new(),
            data: DataBuffer::empty(),
            data_transfer_length: 0,
        };
        let io = if forced {
            self.inner.io.try_lock()
        } else {
            Some(self.io())
        };
        if let Some(mut io) = io {
            r.status = status.unwrap_or(io.status);
            if status.is_none() {
                r.scsi_status = io.scsi_status;
                r.sense = io.sense.clone();
            }
            r.data_transfer_length = io.data_transfer_length;
            r.data = core::mem::take(&mut io.data);
        }
        r
    }
}
