//! The target's copy manager: which logical units a third-party copy may name, and how many
//! copies run at once.
//!
//! One [`CopyManager`] serves every LU of a target (the appliance gives each LU the same
//! one). An EXTENDED COPY resolves its CSCD descriptors only among the LUs exported through
//! the target port the command came in on (the LUs the initiator itself could address),
//! never the whole target: LIO resolved them target-wide until CVE-2020-28374.

use super::super::LogicalUnit;
use crate::lu::RelativePortId;
use scsi::Lun;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};

/// At most this many copies (EXTENDED COPY, WRITE USING TOKEN) run at once per copy
/// manager; one more is answered BUSY (TOTAL CONCURRENT COPIES).
pub const TOTAL_CONCURRENT_COPIES: usize = 8;

/// The LUs exported through one target port, by LUN.
type Exports = Vec<(Lun, Weak<LogicalUnit>)>;

/// The target's copy manager.
#[derive(Debug, Default)]
pub struct CopyManager {
    /// The LUs exported through each target port (by relative port identifier).
    ports: RwLock<BTreeMap<u16, Exports>>,
    running: AtomicUsize,
    /// The ODX tokens it made, and its token operations' results (`token.rs`).
    pub(crate) tokens: super::token::Tokens,
}

/// A running copy's share of [`TOTAL_CONCURRENT_COPIES`].
#[derive(Debug)]
pub(crate) struct Permit<'a>(&'a AtomicUsize);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl CopyManager {
    /// A copy manager with no LUs.
    pub fn new() -> Arc<CopyManager> {
        Arc::new(CopyManager::default())
    }

    /// `lu` is exported as `lun` through target port `port`.
    pub fn export(&self, port: RelativePortId, lun: Lun, lu: &Arc<LogicalUnit>) {
        let mut ports = self
            .ports
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ports
            .entry(port.0)
            .or_default()
            .push((lun, Arc::downgrade(lu)));
    }

    /// Replaces every export at once (a reload): `(port, lun, lu)` each. A copy resolving a
    /// CSCD sees the old table or the new, never a mix.
    pub fn set_exports<'a>(
        &self,
        table: impl IntoIterator<Item = (RelativePortId, Lun, &'a Arc<LogicalUnit>)>,
    ) {
        let mut next: BTreeMap<u16, Exports> = BTreeMap::new();
        for (port, lun, lu) in table {
            next.entry(port.0)
                .or_default()
                .push((lun, Arc::downgrade(lu)));
        }
        *self
            .ports
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
    }

    /// The LU exported through `port` whose NAA designator is `naa`.
    pub(crate) fn resolve(&self, port: RelativePortId, naa: &[u8]) -> Option<Arc<LogicalUnit>> {
        let ports = self
            .ports
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ports
            .get(&port.0)?
            .iter()
            .filter_map(|(_, w)| w.upgrade())
            .find(|lu| lu.identity().naa().as_slice() == naa)
    }

    /// A share of the concurrent copies, if one is free.
    pub(crate) fn permit(&self) -> Option<Permit<'_>> {
        let n = self.running.fetch_add(1, Ordering::AcqRel);
        let p = Permit(&self.running);
        (n < TOTAL_CONCURRENT_COPIES).then_some(p)
    }

    /// ODX tokens alive now.
    pub fn tokens(&self) -> usize {
        self.tokens.live()
    }

    /// Copies running now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }
}
