//! What a caller submits (a SCSI command with the descriptors of buffers it has already
//! registered) and what it gets back (exactly one [`Completion`] per command).

use super::InitiatorError;
use super::alloc::boxed::Box;
use super::alloc::vec::Vec;
use super::login::Negotiated;
use crate::wire::cmd::{Cmd, MAX_ADD_CDB_LEN, TaskAttr};
use crate::wire::desc::{DataDesc, DirectBuf, Indirect};
use crate::wire::rsp::Residual;
use crate::wire::{SolicitFlags, Tag, WireError};
use core::time::Duration;
use ib_verbs::Rkey;
use scsi::Lun;
use scsi::status::Status;

/// The core's name for a command, stable across re-sends (its wire tag is not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CmdId(pub u64);

impl ib_verbs::IdKey for CmdId {
    fn id_bits(self) -> u64 {
        self.0
    }
}

/// Direction of the data transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataDir {
    /// No data.
    None,
    /// Target to initiator (data-in).
    Read,
    /// Initiator to target (data-out).
    Write,
}

/// The registered buffer, as the target will address it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataDescriptors {
    /// No buffer.
    None,
    /// One direct descriptor (a fast-registered MR, the default).
    Direct(DirectBuf),
    /// An indirect table (the table itself registered by the caller) with its inline part.
    Indirect {
        /// The whole table in initiator memory.
        table: DirectBuf,
        /// Bytes the table describes.
        total_len: u32,
        /// Descriptors carried in the SRP_CMD.
        inline: Vec<DirectBuf>,
    },
}

/// A SCSI command to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// The logical unit.
    pub lun: Lun,
    /// The CDB, up to 16 + 252 bytes (up to 32 held inline).
    pub cdb: scsi::CdbBytes,
    /// SAM task attribute.
    pub task_attr: TaskAttr,
    /// Data direction.
    pub dir: DataDir,
    /// Bytes to transfer.
    pub data_len: u32,
    /// The registered buffer.
    pub data: DataDescriptors,
    /// For a write: the bytes themselves, offered for immediate data. Used instead of the
    /// descriptors when immediate data was negotiated and they fit; empty to never use it.
    pub imm_data: Vec<u8>,
    /// Ask the target to invalidate the buffer's rkey with its response (SEND with
    /// Invalidate).
    pub remote_invalidate: bool,
    /// This command's timeout; `None` uses the channel default.
    pub timeout: Option<Duration>,
}

impl Command {
    /// Whether this command goes as immediate data under `neg`.
    pub fn uses_imm_data(&self, neg: &Negotiated) -> bool {
        self.dir == DataDir::Write
            && neg.imm_data
            && !self.imm_data.is_empty()
            && self.imm_data.len() == self.data_len as usize
            && self.imm_data.len() as u64 <= u64::from(neg.max_imm_len)
    }

    /// The SRP_CMD IU for this command under `tag`.
    pub fn encode(&self, tag: Tag, neg: &Negotiated) -> Result<Vec<u8>, InitiatorError> {
        let mut buf = Vec::new();
        self.encode_into(tag, neg, &mut buf)?;
        Ok(buf)
    }

    /// [`Command::encode`] into `buf` (replacing what it held; its memory is reused).
    pub fn encode_into(
        &self,
        tag: Tag,
        neg: &Negotiated,
        buf: &mut Vec<u8>,
    ) -> Result<(), InitiatorError> {
        let bad = |value: usize, why| {
            InitiatorError::BadCommand(WireError::BadField {
                iu: "SRP_CMD",
                field: "CDB length",
                value: value as u64,
                why,
            })
        };
        if self.cdb.is_empty() || self.cdb.len() > 16 + MAX_ADD_CDB_LEN {
            return Err(bad(self.cdb.len(), "must be 1..=268 bytes"));
        }
        let mut cdb = [0u8; 16];
        let head = self.cdb.len().min(16);
        cdb[..head].copy_from_slice(&self.cdb[..head]);
        let mut add_cdb = self.cdb[head..].to_vec();
        add_cdb.resize(add_cdb.len().next_multiple_of(4), 0);
        let imm = self.uses_imm_data(neg);
        let desc = match &self.data {
            DataDescriptors::None => DataDesc::None,
            DataDescriptors::Direct(d) => DataDesc::Direct(*d),
            DataDescriptors::Indirect {
                table,
                total_len,
                inline,
            } => DataDesc::Indirect(Indirect {
                table: *table,
                total_len: *total_len,
                inline,
            }),
        };
        let (data_out, data_in) = match (self.dir, imm) {
            (DataDir::Write, true) => (DataDesc::Immediate, DataDesc::None),
            (DataDir::Write, false) => (desc, DataDesc::None),
            (DataDir::Read, _) => (DataDesc::None, desc),
            (DataDir::None, _) => (DataDesc::None, DataDesc::None),
        };
        let cmd = Cmd {
            flags: SolicitFlags::empty(),
            tag,
            lun: self.lun,
            task_attr: self.task_attr,
            cdb,
            add_cdb: &add_cdb,
            data_out,
            data_in,
            imm_data: if imm { &self.imm_data } else { &[] },
            remote_invalidate: self.remote_invalidate,
        };
        let len = cmd.buffer_len_with(neg.imm_data_offset);
        if len > neg.max_it_iu_len as usize {
            return Err(InitiatorError::BadCommand(WireError::BufferTooSmall {
                iu: "SRP_CMD",
                need: len,
                have: neg.max_it_iu_len as usize,
            }));
        }
        buf.clear();
        buf.resize(len, 0);
        cmd.emit_with(buf, neg.imm_data_offset)
            .map_err(InitiatorError::BadCommand)?;
        Ok(())
    }
}

/// What the target said about a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// SCSI status.
    pub status: Status,
    /// Sense data (empty unless SNSVALID).
    pub sense: Vec<u8>,
    /// Data-in residual (DIUNDER / DIOVER).
    pub data_in_residual: Residual,
    /// Data-out residual (DOUNDER / DOOVER).
    pub data_out_residual: Residual,
    /// The rkey the target invalidated with its SEND, as the driver saw in the completion;
    /// `None` means the caller must invalidate the buffer's MR itself.
    pub invalidated: Option<Rkey>,
}

/// How a command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The target answered with an SRP_RSP.
    Done(Response),
    /// It timed out and ABORT TASK ended it (the SCSI layer treats it as timed out).
    Aborted,
    /// A LOGICAL UNIT RESET ended it (it may be retried, as `DID_RESET`).
    Reset,
    /// It timed out and neither ABORT TASK nor LOGICAL UNIT RESET helped; the channel was
    /// reset.
    TimedOut,
    /// fast_io_fail expired while it was held (`DID_TRANSPORT_FAILFAST`: retry on another
    /// path).
    TransportFailFast,
    /// The port is lost (`DID_NO_CONNECT`).
    NoConnect,
}

/// A command's end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Which command.
    pub id: CmdId,
    /// How it ended.
    pub outcome: Outcome,
}

/// A command the core would not take, handed back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// Why.
    pub reason: InitiatorError,
    /// The command, untouched.
    pub command: Box<Command>,
}

/// The driver's answer to [`Action::Remap`](super::Action::Remap).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remapped {
    /// The descriptors are still valid (nothing was registered per command, or the region
    /// covers all memory): re-send as it was.
    Unchanged,
    /// Registered anew: re-send with these (a write may now go as immediate data).
    New {
        /// The new descriptors.
        data: DataDescriptors,
        /// Immediate bytes (empty unless the buffer now goes as immediate data).
        imm_data: Vec<u8>,
        /// Ask the target to invalidate the one region with its response.
        remote_invalidate: bool,
    },
    /// The buffer could not be registered again: the command completes with
    /// [`Outcome::Reset`] (retryable, as `DID_RESET`).
    Failed,
}
