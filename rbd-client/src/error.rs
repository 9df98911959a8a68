//! The crate's one error type.

/// Why a librbd or librados call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RbdError {
    /// The libraries could not be loaded (what to install is in the message).
    #[error("{0}")]
    Load(String),
    /// A call returned a negative errno.
    #[error("{op}: {} (errno {errno})", std::io::Error::from_raw_os_error(*errno))]
    Call {
        /// The C function.
        op: &'static str,
        /// The errno (positive).
        errno: i32,
    },
    /// COMPARE AND WRITE found different bytes at this offset from the operation's start.
    #[error("compare and write: the data differ at byte {offset} of the range")]
    Mismatch {
        /// Bytes from the start of the compared range.
        offset: u64,
    },
    /// A name with a NUL byte, or an argument out of range.
    #[error("invalid argument: {0}")]
    Invalid(String),
}

impl RbdError {
    /// The errno of a failed call, if it was one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            RbdError::Call { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    pub(crate) fn call(op: &'static str, ret: i64) -> RbdError {
        RbdError::Call {
            op,
            errno: i32::try_from(-ret).unwrap_or(libc::EIO),
        }
    }
}
