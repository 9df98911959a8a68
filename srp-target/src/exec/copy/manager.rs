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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

/// At most this many copies (EXTENDED COPY, WRITE USING TOKEN) run at once per copy
/// manager; one more is answered BUSY (TOTAL CONCURRENT COPIES). Half the daemon's default
/// eight backend workers: copies never take all of them from other LUs' commands.
pub const TOTAL_CONCURRENT_COPIES: usize = 4;

/// At most this many copies run at once for commands of one LU (each on one of that LU's
/// workers): half the LU's default share of four, so its other commands keep two.
pub const COPIES_PER_LU: usize = 2;

/// The LUs exported through one target port, by LUN.
type Exports = Vec<(Lun, Weak<LogicalUnit>)>;

/// The target's copy manager.
#[derive(Debug, Default)]
pub struct CopyManager {
    /// The LUs exported through each target port (by relative port identifier).
    ports: RwLock<BTreeMap<u16, Exports>>,
    running: AtomicUsize,
    /// Copies running per LU (by the address of the LU the command was sent to).
    per_lu: Mutex<BTreeMap<usize, usize>>,
    /// Names copies to the watches ([`super::watch`]).
    next_copy: AtomicU64,
    /// The ODX tokens it made, and its token operations' results (`token.rs`).
    pub(crate) tokens: super::token::Tokens,
}

/// A running copy's share of [`TOTAL_CONCURRENT_COPIES`] and of its LU's
/// [`COPIES_PER_LU`].
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    manager: &'a CopyManager,
    lu: usize,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut per_lu = self.manager.per_lu();
        if let Some(n) = per_lu.get_mut(&self.lu) {
            *n -= 1;
            if *n == 0 {
                per_lu.remove(&self.lu);
            }
        }
        self.manager.running.fetch_sub(1, Ordering::AcqRel);
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

    fn per_lu(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, usize>> {
        self.per_lu.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A share of the concurrent copies for a command sent to `lu`, if one is free.
    pub(crate) fn permit(&self, lu: &LogicalUnit) -> Option<Permit<'_>> {
        let key = std::ptr::from_ref(lu) as usize;
        let mut per_lu = self.per_lu();
        let mine = per_lu.entry(key).or_default();
        if *mine >= COPIES_PER_LU || self.running.load(Ordering::Acquire) >= TOTAL_CONCURRENT_COPIES
        {
            if *mine == 0 {
                per_lu.remove(&key);
            }
            return None;
        }
        *mine += 1;
        self.running.fetch_add(1, Ordering::AcqRel);
        Some(Permit {
            manager: self,
            lu: key,
        })
    }

    /// A name for a new copy, unique in the target.
    pub(crate) fn next_copy_id(&self) -> u64 {
        self.next_copy.fetch_add(1, Ordering::Relaxed)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::copy::watch::tests::lu;

    #[test]
    fn copies_are_bounded_per_lu_and_in_all() {
        let m = CopyManager::new();
        let luns: Vec<_> = (0..3).map(|i| lu(&format!("lu{i}"))).collect();
        let a: Vec<_> = (0..COPIES_PER_LU).map(|_| m.permit(&luns[0])).collect();
        assert!(a.iter().all(Option::is_some));
        assert!(m.permit(&luns[0]).is_none(), "beyond the LU's share");
        let b: Vec<_> = (0..TOTAL_CONCURRENT_COPIES - COPIES_PER_LU)
            .map(|_| m.permit(&luns[1]))
            .collect();
        assert!(b.iter().all(Option::is_some));
        assert_eq!(m.running(), TOTAL_CONCURRENT_COPIES);
        assert!(m.permit(&luns[2]).is_none(), "beyond the target's");
        drop(a);
        assert_eq!(m.running(), TOTAL_CONCURRENT_COPIES - COPIES_PER_LU);
        assert!(m.permit(&luns[2]).is_some());
        assert!(m.permit(&luns[0]).is_some());
    }
}
