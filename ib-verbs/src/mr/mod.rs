//! Memory keys and rights: what a registration hands back and what a work request names.
//!
//! Keys follow IBTA and every provider (`index << 8 | key`): the upper 24 bits name the
//! region, the low 8 bits are the consumer's and change on each fast registration
//! (`ib_inc_rkey`), so a stale key stops matching. Files: `access.rs` ([`Access`], with
//! `ib_access_flags` values), `key.rs` ([`MrKey`], [`MrIndex`]).

mod access;
mod key;

pub use access::Access;
pub use key::{MAX_MR_INDEX, MrIndex, MrKey};

use crate::ids::{Lkey, Rkey};

/// A protection domain: a QP may use only the memory regions of its own PD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PdId(pub u32);

/// The keys of a new region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrKeys {
    /// The L_Key, for local scatter/gather entries.
    pub lkey: Lkey,
    /// The R_Key, for peers; `None` when the region allows no remote access.
    pub rkey: Option<Rkey>,
}

impl MrKeys {
    /// The region's index (its L_Key without the consumer's low byte).
    pub fn index(&self) -> MrIndex {
        MrKey::from(self.lkey).index()
    }
}

/// Most pages a fast-registration region may map (rxe `RXE_MAX_FMR_PAGE_LIST_LEN`; the
/// bound the initiator's pool is configured within).
pub const MAX_FAST_REG_PAGES: usize = 512;
/// Smallest fast-registration page size.
pub const MIN_PAGE_SIZE: u64 = 4 << 10;
/// Largest fast-registration page size.
pub const MAX_PAGE_SIZE: u64 = 2 << 20;
