//! Memory regions: keys, rights and the one checked path from a key to registered memory.
//!
//! Contract: the engine never touches a [`MemBlock`](crate::mem::MemBlock) except through an
//! [`MrSpan`] returned by [`MrTable::check`], which validates key (all 32 bits), protection
//! domain, state, rights and range with checked arithmetic, as rxe's `lookup_mr` and
//! `mr_check_range` do. Errors are one [`MrError`] whose [`MrError::class`] tells the engine
//! whether to NAK "remote access error", complete with "local protection error", and so on.
//!
//! Keys follow rxe (`index << 8 | variant`): L_Key always, R_Key only with a remote right.
//! Fast-registration MRs (`ib_alloc_mr`) start Free, become Valid by REG_MR ([`MrTable::fast_reg`],
//! the low key byte may change) and Free again by LOCAL_INV or SEND_WITH_INV
//! ([`MrTable::invalidate`]). A zero-length remote access needs no key (IBTA C9-88).
//!
//! Files:
//! - [`Access`] rights and [`MrKey`] (`index << 8 | variant`) are the vocabulary's (`ib_verbs::mr`);
//! - `table.rs`: [`MrTable`], registration, fast registration, invalidation, `check`;
//! - `span.rs`: [`MrSpan`], reads and writes across pages;
//! - `error.rs`: [`MrError`], [`MrOp`], [`ErrorClass`];
//! - `tests.rs`, `model_tests.rs`: lifecycle and violation tests; the seeded span model check.

mod error;
mod span;
mod table;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

pub use error::{ErrorClass, MrError, MrOp};
pub use ib_verbs::mr::{
    Access, MAX_FAST_REG_PAGES, MAX_MR_INDEX, MAX_PAGE_SIZE, MIN_PAGE_SIZE, MrIndex, MrKey, MrKeys,
    PdId,
};
pub use span::MrSpan;
pub use table::{FastRegWr, MrInfo, MrState, MrTable};

/// Checks the registration rule ([`Access::is_valid_for_registration`]: remote write or
/// atomic requires local write); `op` names the operation registering.
pub fn validate_access(access: Access, op: MrOp) -> Result<Access, MrError> {
    if access.is_valid_for_registration() {
        Ok(access)
    } else {
        Err(MrError::BadAccess { op, access })
    }
}
