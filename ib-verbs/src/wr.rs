//! Work requests and work completions: what consumers post to queue pairs and poll from
//! completion queues (IBTA Vol 1 ch. 10–11; field names as libibverbs).

use crate::ids::{Gid, Lkey, QKey, Qpn, Rkey};
use crate::inline_one::InlineOne;
use crate::mem::MemBlock;
use alloc::sync::Arc;
use alloc::vec::Vec;

/// A scatter/gather element: `len` bytes at `addr` in the memory region named by `lkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    /// Address in the region's I/O virtual address space.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// The region's local key.
    pub lkey: Lkey,
}

/// A work request's scatter/gather list (`ibv_sge` array): one entry — nearly every request
/// — held inline, several on the heap, so posting a one-buffer request allocates nothing.
/// Reads as a slice of [`Sge`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SgList(InlineOne<Sge>);

impl SgList {
    /// A list of one entry.
    pub fn one(sge: Sge) -> SgList {
        SgList(InlineOne::One(sge))
    }
}

impl core::ops::Deref for SgList {
    type Target = [Sge];

    fn deref(&self) -> &[Sge] {
        self.0.as_slice()
    }
}

impl From<Sge> for SgList {
    fn from(sge: Sge) -> SgList {
        SgList::one(sge)
    }
}

impl<const N: usize> From<[Sge; N]> for SgList {
    fn from(a: [Sge; N]) -> SgList {
        a.into_iter().collect()
    }
}

impl From<Vec<Sge>> for SgList {
    fn from(v: Vec<Sge>) -> SgList {
        match v.len() {
            0 | 1 => v.into_iter().collect(),
            _ => SgList(InlineOne::Many(v)),
        }
    }
}

impl FromIterator<Sge> for SgList {
    fn from_iter<I: IntoIterator<Item = Sge>>(iter: I) -> SgList {
        SgList(iter.into_iter().collect())
    }
}

/// Where a UD send goes: the peer's GID (its IP address), QP number and Q_Key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdDest {
    /// Destination GID.
    pub gid: Gid,
    /// Destination QP.
    pub qpn: Qpn,
    /// Q_Key to send (QP1 uses [`QKey::GSI`]).
    pub qkey: QKey,
    /// QP1 only: the partition to send on, an index in the port's P_Key table (other UD
    /// QPs send on their own).
    pub pkey_index: u16,
}

/// The page list of a fast-registration work request (`IB_WR_REG_MR`).
#[derive(Clone, Debug)]
pub struct FastRegPages {
    /// The pages: block and byte offset of each page's start (one held inline).
    pub pages: crate::inline_one::InlineOne<(Arc<MemBlock>, u64)>,
    /// Page size in bytes (a power of two).
    pub page_size: u64,
    /// Offset of the region's first byte within the first page.
    pub first_byte_offset: u64,
    /// I/O virtual address the region gets.
    pub iova: u64,
    /// Length of the region in bytes.
    pub length: u64,
}

/// What a send work request does.
#[derive(Clone, Debug)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with 32 bits of immediate data.
    SendWithImm(u32),
    /// SEND that invalidates the peer's memory region `Rkey` on arrival.
    SendWithInv(Rkey),
    /// RDMA WRITE to the peer's `remote_addr` under `rkey`.
    Write {
        /// Peer address.
        remote_addr: u64,
        /// Peer key.
        rkey: Rkey,
    },
    /// RDMA WRITE that also consumes a receive at the peer and delivers immediate data.
    WriteWithImm {
        /// Peer address.
        remote_addr: u64,
        /// Peer key.
        rkey: Rkey,
        /// Immediate data.
        imm: u32,
    },
    /// RDMA READ from the peer's `remote_addr` under `rkey` into the local SGEs.
    Read {
        /// Peer address.
        remote_addr: u64,
        /// Peer key.
        rkey: Rkey,
    },
    /// Fast registration of the memory region whose current key is `key`'s index, giving it
    /// `key` (the low 8 bits rolled) and `access` (a local operation).
    RegMr {
        /// The new key.
        key: u32,
        /// Access rights.
        access: crate::mr::Access,
        /// The pages.
        pages: FastRegPages,
    },
    /// Local invalidation of the memory region or window named by `key` (a local
    /// operation, fenced).
    LocalInv(u32),
    /// Binds the type-2 memory window whose new key is `rkey` (its index an allocated
    /// window's, `ChannelInterface::alloc_mw`; the low byte the consumer's) over `len`
    /// bytes at I/O address `addr` of the region named by `region`, with `access` (remote
    /// rights): the peer can reach that range and nothing else until the window is
    /// invalidated (LOCAL_INV, or the peer's SEND with invalidate). The region needs
    /// `Access::MW_BIND` (and local write if the window grants remote write).
    BindMw {
        /// The window's new key.
        rkey: Rkey,
        /// The region the window lies in.
        region: Lkey,
        /// First I/O address of the window.
        addr: u64,
        /// Length in bytes.
        len: u64,
        /// What the peer may do.
        access: crate::mr::Access,
    },
}

bitflags::bitflags! {
    /// Send work request flags (`IB_SEND_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct SendFlags: u8 {
        /// Generate a completion even on success.
        const SIGNALED = 0x01;
        /// Wait for earlier RDMA READs and atomics to complete first.
        const FENCE = 0x02;
        /// Set the solicited-event bit on the last packet.
        const SOLICITED = 0x04;
    }
}

/// A send work request.
#[derive(Clone, Debug)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Local buffers (source for SEND/WRITE, destination for READ; unused for local ops).
    pub sg_list: SgList,
    /// Flags.
    pub flags: SendFlags,
    /// UD only: where to send.
    pub ud: Option<UdDest>,
}

/// A receive work request.
#[derive(Clone, Debug)]
pub struct RecvWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Buffers incoming data fills, in order.
    pub sg_list: SgList,
}

wirekit::open_enum! {
    /// Completion status (`enum ib_wc_status` values).
    pub enum WcStatus(u8) {
        /// Success.
        Success = 0,
        /// A receive buffer was too small, or a message too long.
        LocLenErr = 1,
        /// Local QP operation error.
        LocQpOpErr = 2,
        /// Local protection error: an SGE failed the key/range/access check.
        LocProtErr = 4,
        /// Flushed: the QP went to the error state before this request completed.
        WrFlushErr = 5,
        /// Memory window bind error.
        MwBindErr = 6,
        /// Bad response from the responder.
        BadRespErr = 7,
        /// Local access error.
        LocAccessErr = 8,
        /// The responder NAKed: invalid request.
        RemInvReqErr = 9,
        /// The responder NAKed: remote access error (key, range or rights).
        RemAccessErr = 10,
        /// The responder NAKed: remote operational error.
        RemOpErr = 11,
        /// Transport retries exhausted (no ACK within the retry budget).
        RetryExcErr = 12,
        /// RNR retries exhausted.
        RnrRetryExcErr = 13,
        /// Fatal error.
        FatalErr = 19,
        /// Generic error.
        GeneralErr = 21,
    }
}

/// What completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOpcode {
    /// A SEND (any kind).
    Send,
    /// An RDMA WRITE (any kind).
    RdmaWrite,
    /// An RDMA READ.
    RdmaRead,
    /// A fast registration.
    RegMr,
    /// A local invalidation.
    LocalInv,
    /// A memory window bind.
    BindMw,
    /// A receive of a SEND.
    Recv,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
}

/// A work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// What completed (meaningful on success).
    pub opcode: WcOpcode,
    /// The local QP.
    pub qpn: Qpn,
    /// Bytes received (receives) or transferred (READ).
    pub byte_len: u32,
    /// Immediate data, when the message carried it.
    pub imm: Option<u32>,
    /// The rkey a SEND_WITH_INV invalidated.
    pub invalidated: Option<Rkey>,
    /// UD receives: the sender's QP.
    pub src_qp: Option<Qpn>,
    /// UD receives: the sender's GID (its IP address).
    pub src_gid: Option<Gid>,
    /// The message had the solicited-event bit.
    pub solicited: bool,
    /// UD receives: the partition it arrived on, an index in the port's P_Key table.
    pub pkey_index: Option<u16>,
}

impl Wc {
    /// A completion with everything but the identity empty.
    pub fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qpn: Qpn) -> Self {
        Wc {
            wr_id,
            status,
            opcode,
            qpn,
            byte_len: 0,
            imm: None,
            invalidated: None,
            src_qp: None,
            src_gid: None,
            solicited: false,
            pkey_index: None,
        }
    }
}

/// What arms a completion queue's next notification (`ibv_req_notify_cq`'s
/// `solicited_only`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArmMode {
    /// Notify on the next completion of any kind.
    NextCompletion,
    /// Notify on the next solicited completion, or any unsuccessful one.
    Solicited,
}
