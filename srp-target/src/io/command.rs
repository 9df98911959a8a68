//! One command in flight on a channel (a slot: its bounce buffer, table buffer and response
//! buffer) and the work-request ids that tie completions back to it.

use srp::channel::{Buffer, ChannelError};
use srp::wire::Tag;
use srp::wire::tsk_mgmt::TaskMgmtFunction;

/// What a work request was for: packed into its 64-bit `wr_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrKind {
    /// Receive buffer `n`.
    Recv(usize),
    /// RDMA READ of slot `n`'s external descriptor table.
    Table(usize),
    /// RDMA READ of slot `n`'s data-out.
    DataOut(usize),
    /// RDMA WRITE of slot `n`'s data-in (unsignaled; completes only on error).
    DataIn(usize),
    /// The SRP_RSP SEND of slot `n`.
    Rsp(usize),
    /// The SRP_T_LOGOUT SEND.
    Logout,
    /// The SRP_CRED_REQ SEND.
    Cred,
    /// The teardown's drain marker: a zero-length RDMA WRITE posted after the QP went to
    /// ERR (its flushed completion is the QP's last; `super::verbs`).
    Drain,
}

impl WrKind {
    /// The `wr_id`.
    pub fn encode(self) -> u64 {
        let (k, n) = match self {
            WrKind::Recv(n) => (1u64, n),
            WrKind::Table(n) => (2, n),
            WrKind::DataOut(n) => (3, n),
            WrKind::DataIn(n) => (4, n),
            WrKind::Rsp(n) => (5, n),
            WrKind::Logout => (6, 0),
            WrKind::Cred => (7, 0),
            WrKind::Drain => (8, 0),
        };
        (k << 56) | (n as u64 & 0x00ff_ffff_ffff_ffff)
    }

    /// The kind a `wr_id` names, if it is one of ours.
    pub fn decode(wr_id: u64) -> Option<WrKind> {
        let n = usize::try_from(wr_id & 0x00ff_ffff_ffff_ffff).ok()?;
        Some(match wr_id >> 56 {
            1 => WrKind::Recv(n),
            2 => WrKind::Table(n),
            3 => WrKind::DataOut(n),
            4 => WrKind::DataIn(n),
            5 => WrKind::Rsp(n),
            6 => WrKind::Logout,
            7 => WrKind::Cred,
            8 => WrKind::Drain,
            _ => return None,
        })
    }
}

/// What a slot is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the RDMA READ of an external descriptor table (of data-out if `out`).
    FetchTable {
        /// Which direction's table.
        out: bool,
    },
    /// Waiting for `pending` RDMA READs of data-out.
    Reading {
        /// READs not yet completed.
        pending: usize,
    },
    /// With the executor.
    Executing,
    /// The response (and any data-in WRITEs before it) is posted.
    Responding,
}

/// What the slot carries out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// A SCSI command.
    Scsi {
        /// The CDB.
        cdb: scsi::CdbBytes,
        /// Data-out plan.
        data_out: Option<Buffer>,
        /// Data-in plan.
        data_in: Option<Buffer>,
        /// Immediate data-out.
        imm_data: Vec<u8>,
        /// Answer with SEND WITH INVALIDATE of the descriptors' one R_Key, if they share one.
        remote_invalidate: bool,
    },
    /// A command refused by a per-command check: CHECK CONDITION.
    Bad(ChannelError),
    /// A task management request.
    Tmf {
        /// The function.
        function: TaskMgmtFunction,
        /// ABORT TASK's target.
        task_tag: Tag,
    },
}

/// One command in flight.
#[derive(Clone, Debug)]
pub struct Slot {
    /// Set when its task is aborted: it is then never executed nor answered.
    pub abort: super::executor::AbortFlag,
    /// Its tag.
    pub tag: Tag,
    /// Its LUN.
    pub lun: scsi::Lun,
    /// What it is.
    pub work: Work,
    /// Where it is.
    pub phase: Phase,
}
