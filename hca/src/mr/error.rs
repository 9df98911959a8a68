//! [`MrError`], what each failure means to the engine ([`ErrorClass`]), and the operation that
//! failed ([`MrOp`]).

use super::{Access, MrIndex, MrKey, PdId};

/// The operation that met an error; with it the engine knows how to report the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MrOp {
    /// A local work request's scatter/gather entry (L_Key).
    LocalAccess,
    /// A peer's RDMA READ/WRITE/atomic (R_Key in a RETH or AtomicETH).
    RemoteAccess,
    /// A verb called by the HCA user: register, allocate or deregister.
    Register,
    /// A REG_MR (fast registration) work request.
    FastReg,
    /// A LOCAL_INV work request.
    LocalInvalidate,
    /// A peer's SEND_WITH_INV (R_Key in an IETH).
    RemoteInvalidate,
    /// A read or write through an [`MrSpan`](super::MrSpan) beyond its length.
    SpanAccess,
}

/// How the engine reports an [`MrError`], by the operation that met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Responder: NAK "remote access error" (AETH syndrome 0x62, class C); the requester then
    /// completes with `IB_WC_REM_ACCESS_ERR`.
    RemoteAccess,
    /// Completion status "local protection error" (`IB_WC_LOC_PROT_ERR`).
    LocalProtection,
    /// Completion status "local QP operation error" for a failed REG_MR or LOCAL_INV (as rxe).
    LocalOperation,
    /// A bad SEND_WITH_INV R_Key (rxe class J): receive completion `IB_WC_REM_INV_REQ_ERR`, QP to
    /// error.
    RemoteInvalidRequest,
    /// A verb's synchronous failure (EINVAL) or a caller bug; no completion.
    InvalidArgument,
}

impl MrOp {
    /// How a failure of this operation is reported.
    pub fn class(self) -> ErrorClass {
        match self {
            MrOp::LocalAccess => ErrorClass::LocalProtection,
            MrOp::RemoteAccess => ErrorClass::RemoteAccess,
            MrOp::FastReg | MrOp::LocalInvalidate => ErrorClass::LocalOperation,
            MrOp::RemoteInvalidate => ErrorClass::RemoteInvalidRequest,
            MrOp::Register | MrOp::SpanAccess => ErrorClass::InvalidArgument,
        }
    }

    /// The operation `check` performs for a local or remote access.
    pub fn access(remote: bool) -> MrOp {
        if remote {
            MrOp::RemoteAccess
        } else {
            MrOp::LocalAccess
        }
    }
}

/// Errors of memory-region operations. Each carries the key or range it is about and the
/// operation ([`MrError::op`]) that decides how it is reported ([`MrError::class`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MrError {
    /// No memory region has the key's index.
    #[error("{op:?}: no memory region for key {key}")]
    NoSuchMr {
        /// The failed operation.
        op: MrOp,
        /// The key presented.
        key: MrKey,
    },
    /// No memory region at this index.
    #[error("{op:?}: no memory region at index {index:?}")]
    NoSuchIndex {
        /// The failed operation.
        op: MrOp,
        /// The index presented.
        index: MrIndex,
    },
    /// The key's index names a region whose current key is different (stale or forged variant).
    #[error("{op:?}: key {key} does not match the region's key {current}")]
    KeyMismatch {
        /// The failed operation.
        op: MrOp,
        /// The key presented.
        key: MrKey,
        /// The region's key (L_Key for local use, R_Key for remote).
        current: MrKey,
    },
    /// A remote operation named a region that has no R_Key (no remote access).
    #[error("{op:?}: region of key {key} has no R_Key")]
    NoRemoteKey {
        /// The failed operation.
        op: MrOp,
        /// The key presented.
        key: MrKey,
    },
    /// The region belongs to another protection domain.
    #[error("{op:?}: key {key} is in {mr_pd:?}, not {pd:?}")]
    WrongPd {
        /// The failed operation.
        op: MrOp,
        /// The key presented.
        key: MrKey,
        /// The PD of the QP.
        pd: PdId,
        /// The PD of the region.
        mr_pd: PdId,
    },
    /// The region is a fast-registration MR that is not registered (or was invalidated).
    #[error("{op:?}: region of key {key} is not valid (free or invalidated)")]
    NotValid {
        /// The failed operation.
        op: MrOp,
        /// The key presented.
        key: MrKey,
    },
    /// `[iova, iova + len)` is not inside the region (the end may overflow u64).
    #[error("{op:?}: key {key}: {iova:#x}+{len:#x} is outside {mr_iova:#x}+{mr_len:#x}")]
    OutOfRange {
        /// The failed operation.
        op: MrOp,
        /// The key presented.
        key: MrKey,
        /// Start of the requested range.
        iova: u64,
        /// Length of the requested range.
        len: u64,
        /// Start of the region.
        mr_iova: u64,
        /// Length of the region.
        mr_len: u64,
    },
    /// The region lacks a right the access needs.
    #[error("{op:?}: key {key} needs {need:?} but allows {have:?}")]
    AccessDenied {
        /// The failed operation.
        op: MrOp,
        /// The key presented.
        key: MrKey,
        /// Rights the access needs.
        need: Access,
        /// Rights the region has.
        have: Access,
    },
    /// Remote write or atomic asked without local write.
    #[error("{op:?}: access {access:?} has remote write/atomic without LOCAL_WRITE")]
    BadAccess {
        /// The failed operation.
        op: MrOp,
        /// The rights asked for.
        access: Access,
    },
    /// Fast registration or invalidation of a region that is not a fast-registration MR.
    #[error("{op:?}: region of key {key} is not a fast-registration MR")]
    NotFastReg {
        /// The failed operation.
        op: MrOp,
        /// The key presented.
        key: MrKey,
    },
    /// REG_MR on a region that is still valid (rxe: state must be FREE).
    #[error("FastReg: region {mr:?} is valid; invalidate it first")]
    NotFree {
        /// The region.
        mr: MrIndex,
    },
    /// REG_MR with a key whose index is not the region's (only the low 8 bits may change).
    #[error("FastReg: key {key} does not name region {mr:?}")]
    KeyIndexChanged {
        /// The region.
        mr: MrIndex,
        /// The new key asked for.
        key: MrKey,
    },
    /// `max_pages` of a fast-registration MR is 0 or above the device limit.
    #[error("Register: max_pages {max_pages} is not in 1..={limit}")]
    BadMaxPages {
        /// The number asked for.
        max_pages: usize,
        /// The device limit.
        limit: usize,
    },
    /// REG_MR with more pages than the region was allocated for.
    #[error("FastReg: {pages} pages, but the region holds at most {max_pages}")]
    TooManyPages {
        /// Pages in the request.
        pages: usize,
        /// The region's maximum.
        max_pages: usize,
    },
    /// Page size not a power of two in 4 KiB..=2 MiB.
    #[error("FastReg: page size {page_size:#x} is not a power of two in 4 KiB..=2 MiB")]
    BadPageSize {
        /// The page size asked for.
        page_size: u64,
    },
    /// First byte offset and length do not fit the page list.
    #[error(
        "FastReg: offset {first_byte_offset:#x} + length {length:#x} do not fit {pages} pages of {page_size:#x}"
    )]
    BadLayout {
        /// Offset of the region's first byte in the first page.
        first_byte_offset: u64,
        /// Length of the region.
        length: u64,
        /// Pages in the request.
        pages: usize,
        /// Page size.
        page_size: u64,
    },
    /// A page of the list runs past the end of its block.
    #[error(
        "FastReg: page {page} at {offset:#x}+{page_size:#x} is outside a block of {block_len:#x}"
    )]
    PageOutOfBlock {
        /// Position in the page list.
        page: usize,
        /// Offset of the page in its block.
        offset: u64,
        /// Page size.
        page_size: u64,
        /// Length of the block.
        block_len: usize,
    },
    /// A regular MR's `offset + len` is outside its block.
    #[error("{op:?}: {offset:#x}+{len:#x} is outside a block of {block_len:#x}")]
    OutOfBlock {
        /// The failed operation.
        op: MrOp,
        /// Offset in the block.
        offset: u64,
        /// Length asked for.
        len: u64,
        /// Length of the block.
        block_len: usize,
    },
    /// `iova + length` overflows u64.
    #[error("{op:?}: iova {iova:#x} + length {len:#x} overflows")]
    IovaOverflow {
        /// The failed operation.
        op: MrOp,
        /// Start address.
        iova: u64,
        /// Length.
        len: u64,
    },
    /// Every index of the table is in use.
    #[error("Register: all {max} memory regions are in use")]
    TableFull {
        /// The table's capacity.
        max: u32,
    },
    /// A span read or write beyond the span (an engine bug: `check` sized the span).
    #[error("SpanAccess: {offset:#x}+{len:#x} is outside a span of {span_len:#x}")]
    OutOfSpan {
        /// Offset in the span.
        offset: u64,
        /// Length asked for.
        len: u64,
        /// Length of the span.
        span_len: u64,
    },
}

impl MrError {
    /// The operation that failed.
    pub fn op(&self) -> MrOp {
        match *self {
            MrError::NoSuchMr { op, .. }
            | MrError::NoSuchIndex { op, .. }
            | MrError::KeyMismatch { op, .. }
            | MrError::NoRemoteKey { op, .. }
            | MrError::WrongPd { op, .. }
            | MrError::NotValid { op, .. }
            | MrError::OutOfRange { op, .. }
            | MrError::AccessDenied { op, .. }
            | MrError::BadAccess { op, .. }
            | MrError::NotFastReg { op, .. }
            | MrError::OutOfBlock { op, .. }
            | MrError::IovaOverflow { op, .. } => op,
            MrError::NotFree { .. }
            | MrError::KeyIndexChanged { .. }
            | MrError::TooManyPages { .. }
            | MrError::BadPageSize { .. }
            | MrError::BadLayout { .. }
            | MrError::PageOutOfBlock { .. } => MrOp::FastReg,
            MrError::BadMaxPages { .. } | MrError::TableFull { .. } => MrOp::Register,
            MrError::OutOfSpan { .. } => MrOp::SpanAccess,
        }
    }

    /// How the engine reports this error.
    pub fn class(&self) -> ErrorClass {
        self.op().class()
    }

    /// Whether the responder answers with NAK "remote access error".
    pub fn is_remote_access_error(&self) -> bool {
        self.class() == ErrorClass::RemoteAccess
    }

    /// Whether the work request completes with "local protection error".
    pub fn is_local_protection_error(&self) -> bool {
        self.class() == ErrorClass::LocalProtection
    }
}
