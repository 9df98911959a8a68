//! Watching a source range while it is copied (or while a token represents it), and
//! holding writers off a range while it is copied again.
//!
//! Every medium-modifying command notes the range it is about to change
//! ([`LogicalUnit::note_write`]) under the LU's order, and a watch over an overlapping
//! range is marked touched — unless the write is the watching copy's own
//! ([`LogicalUnit::note_write_by`]: a list whose later segment writes what an earlier one
//! read is one copy, not a race). A copy that finds its source touched read a mix of old and
//! new data, so it copies again with the source ranges held (`xcopy.rs`); a token whose
//! range is touched is revoked (`token.rs`).
//!
//! A hold ([`LogicalUnit::hold`]) keeps the writers of the LU's own commands — WRITE, WRITE
//! SAME, UNMAP, COMPARE AND WRITE... ([`LogicalUnit::write_order_at`]) — off one range:
//! they wait, without the LU's order, until it is released or their task is aborted (the
//! abort wakes them: [`LogicalUnit::wake_hold_waiters`]); reads and writes elsewhere go
//! on. A writer that may not wait — it runs on the daemon's loop, which must never wait
//! for a copy ([`crate::exec::Nexus::may_wait`]) — is answered BUSY instead (counted,
//! logged); the workers take a held LU's commands, so that is only a race's outcome.
//! Copies never wait for a hold (two copies holding each other's destination would
//! wait for ever): their writes are noted, and a held copy whose source a copy wrote fails
//! rather than copy a mix.
//!
//! Registration (a watch or a hold) waits for the writes in flight (the LU's order,
//! exclusive, for an instant), so a write either finished before it began or is noted
//! (waits) by it. With no watch and no hold on the LU, a writer pays two atomic loads.

use super::super::{LogicalUnit, Nexus, Stop};
use scsi::{Lba, SenseCode};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::sync::{RwLockReadGuard, RwLockWriteGuard};

/// One watched range.
#[derive(Debug)]
struct Watch {
    id: u64,
    /// The copy watching (its own writes do not touch it); `None`: every write does.
    owner: Option<u64>,
    lba: u64,
    blocks: u64,
    touched: Arc<AtomicBool>,
}

/// One held range.
#[derive(Debug)]
struct Hold {
    id: u64,
    lba: u64,
    blocks: u64,
}

/// A LU's watched and held ranges.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    count: AtomicUsize,
    next: AtomicU64,
    list: Mutex<Vec<Watch>>,
    held: AtomicUsize,
    holds: Mutex<Vec<Hold>>,
    released: Condvar,
    /// Writers that waited for a hold (counters).
    waited: AtomicU64,
    /// Writers answered BUSY: a hold covered them and they could not wait (counters).
    refused: AtomicU64,
    /// Held copies that failed: another copy wrote their source (counters).
    collisions: AtomicU64,
}

/// A command-scoped watch: removed when dropped.
pub(crate) struct WatchGuard<'a> {
    lu: &'a LogicalUnit,
    id: u64,
    touched: Arc<AtomicBool>,
}

impl WatchGuard<'_> {
    /// Whether a write overlapped the range since the watch began.
    pub(crate) fn touched(&self) -> bool {
        self.touched.load(Ordering::Acquire)
    }
}

impl Drop for WatchGuard<'_> {
    fn drop(&mut self) {
        self.lu.unwatch(self.id);
    }
}

/// A held range: released (its waiting writers woken) when dropped.
pub(crate) struct HoldGuard<'a> {
    lu: &'a LogicalUnit,
    id: u64,
}

impl Drop for HoldGuard<'_> {
    fn drop(&mut self) {
        let mut holds = self.lu.holds();
        holds.retain(|h| h.id != self.id);
        self.lu.watches.held.store(holds.len(), Ordering::Release);
        drop(holds);
        self.lu.watches.released.notify_all();
    }
}

/// Whether `a`..+`an` and `b`..+`bn` share a block (an empty range overlaps nothing).
pub(super) fn overlaps(a: u64, an: u64, b: u64, bn: u64) -> bool {
    an > 0 && bn > 0 && a < b.saturating_add(bn) && b < a.saturating_add(an)
}

impl LogicalUnit {
    fn holds(&self) -> MutexGuard<'_, Vec<Hold>> {
        self.watches
            .holds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the LU's order with `take` once no hold covers any of `ranges` (lba, blocks):
    /// a held range's writer waits without the order (a copy reading under it must go on)
    /// until the hold ends or its task is aborted (ABORTED COMMAND; the answer is not sent);
    /// one that may not wait is answered BUSY.
    fn order_unheld<G>(
        &self,
        nexus: &Nexus<'_>,
        ranges: &[(u64, u64)],
        take: impl Fn() -> G,
    ) -> Result<G, Stop> {
        let held = |hs: &[Hold]| {
            hs.iter()
                .any(|h| ranges.iter().any(|&(l, n)| overlaps(h.lba, h.blocks, l, n)))
        };
        loop {
            let order = take();
            if let Some(seen) = nexus.pr_epoch {
                self.check_pr_epoch(seen)?;
            }
            if self.watches.held.load(Ordering::Acquire) == 0 {
                return Ok(order);
            }
            let mut holds = self.holds();
            if !held(&holds) {
                return Ok(order);
            }
            drop(order);
            let lu = self.identity().unique_name();
            if !nexus.may_wait {
                self.watches.refused.fetch_add(1, Ordering::Relaxed);
                tracing::info!(lu = %lu, ranges = ?ranges, "a write answered BUSY: a copy holds its range and it runs on the daemon's loop, which does not wait");
                return Err(Stop::Busy);
            }
            self.watches.waited.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(lu = %lu, ranges = ?ranges, "a write waits for a copy holding its range");
            while held(&holds) {
                // Checked under the list's lock, which the abort's wake takes: not lost.
                if nexus.aborted() {
                    return Err(SenseCode::ABORTED_COMMAND.into());
                }
                holds = self
                    .watches
                    .released
                    .wait(holds)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }

    /// Shared ordering for a command that changes `blocks` blocks at `lba` (it waits while
    /// a copy holds the range; see [`LogicalUnit::order_unheld`]).
    pub(crate) fn write_order_at(
        &self,
        nexus: &Nexus<'_>,
        lba: Lba,
        blocks: u64,
    ) -> Result<RwLockReadGuard<'_, ()>, Stop> {
        self.order_unheld(nexus, &[(lba.0, blocks)], || self.write_order())
    }

    /// [`LogicalUnit::write_order_at`] for a command changing several ranges (UNMAP's
    /// descriptors): it waits only for holds over one of them.
    pub(crate) fn write_order_over(
        &self,
        nexus: &Nexus<'_>,
        ranges: &[(u64, u64)],
    ) -> Result<RwLockReadGuard<'_, ()>, Stop> {
        self.order_unheld(nexus, ranges, || self.write_order())
    }

    /// Exclusive ordering for a command that reads and changes `blocks` blocks at `lba`
    /// as one (COMPARE AND WRITE, ORWRITE, WRITE ATOMIC); waits while a copy holds them.
    pub(crate) fn atomic_order_at(
        &self,
        nexus: &Nexus<'_>,
        lba: Lba,
        blocks: u64,
    ) -> Result<RwLockWriteGuard<'_, ()>, Stop> {
        self.order_unheld(nexus, &[(lba.0, blocks)], || self.atomic_order())
    }

    /// Whether a copy holds a range of the LU now: its commands then go to the workers
    /// rather than the loop ([`crate::io::Workers`]).
    pub(crate) fn has_holds(&self) -> bool {
        self.watches.held.load(Ordering::Acquire) > 0
    }

    /// Wakes the writers waiting for a hold, to look at their abort flags: called after a
    /// task management function marked tasks of this LU aborted.
    pub(crate) fn wake_hold_waiters(&self) {
        if self.has_holds() {
            // Under the list's lock: a waiter between its abort check and its wait is not
            // missed.
            drop(self.holds());
            self.watches.released.notify_all();
        }
    }

    /// Holds the LU's own writers off `blocks` blocks at `lba` until the guard drops; the
    /// writes in flight finish first.
    pub(crate) fn hold(&self, lba: Lba, blocks: u64) -> HoldGuard<'_> {
        let id = self.watches.next.fetch_add(1, Ordering::Relaxed);
        {
            let mut holds = self.holds();
            holds.push(Hold {
                id,
                lba: lba.0,
                blocks,
            });
            self.watches.held.store(holds.len(), Ordering::Release);
        }
        // A writer that looked before the hold was in the list has the order until done.
        drop(self.atomic_order());
        HoldGuard { lu: self, id }
    }

    /// A medium-modifying command is about to change `blocks` blocks at `lba` (called
    /// with the LU's order held shared, or exclusive).
    pub(crate) fn note_write(&self, lba: Lba, blocks: u64) {
        self.note_write_by(None, lba, blocks);
    }

    /// [`LogicalUnit::note_write`] by copy `owner`, whose own watches it does not touch.
    pub(crate) fn note_write_by(&self, owner: Option<u64>, lba: Lba, blocks: u64) {
        if self.watches.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut list = self
            .watches
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A touched watch has said all it can (its flag, which its owner keeps, stays set):
        // it leaves the list, so a revoked token's ranges cost later writes nothing.
        list.retain(|w| {
            let hit =
                (w.owner.is_none() || w.owner != owner) && overlaps(w.lba, w.blocks, lba.0, blocks);
            if hit {
                w.touched.store(true, Ordering::Release);
            }
            !hit
        });
        self.watches.count.store(list.len(), Ordering::Release);
    }

    /// Starts watching `blocks` blocks at `lba` for every writer: its id and touched flag.
    pub(crate) fn watch_range(&self, lba: Lba, blocks: u64) -> (u64, Arc<AtomicBool>) {
        self.watch_range_by(None, lba, blocks)
    }

    fn watch_range_by(&self, owner: Option<u64>, lba: Lba, blocks: u64) -> (u64, Arc<AtomicBool>) {
        let touched = Arc::new(AtomicBool::new(false));
        let id = self.watches.next.fetch_add(1, Ordering::Relaxed);
        // Writes in flight finish first: each is then before the watch, or noted by it.
        let _quiet = self.atomic_order();
        let mut list = self
            .watches
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        list.push(Watch {
            id,
            owner,
            lba: lba.0,
            blocks,
            touched: touched.clone(),
        });
        self.watches.count.store(list.len(), Ordering::Release);
        (id, touched)
    }

    /// Ends watch `id`.
    pub(crate) fn unwatch(&self, id: u64) {
        let mut list = self
            .watches
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        list.retain(|w| w.id != id);
        self.watches.count.store(list.len(), Ordering::Release);
    }

    /// A watch by copy `owner` for the duration of one command.
    pub(crate) fn watch_by(&self, owner: u64, lba: Lba, blocks: u64) -> WatchGuard<'_> {
        let (id, touched) = self.watch_range_by(Some(owner), lba, blocks);
        WatchGuard {
            lu: self,
            id,
            touched,
        }
    }

    /// Ranges watched now (tests, counters).
    pub fn watched_ranges(&self) -> usize {
        self.watches.count.load(Ordering::Acquire)
    }

    /// Ranges held by copies now (tests, counters).
    pub fn held_ranges(&self) -> usize {
        self.watches.held.load(Ordering::Acquire)
    }

    /// A held copy failed: another copy wrote its source.
    pub(crate) fn count_copy_collision(&self) {
        self.watches.collisions.fetch_add(1, Ordering::Relaxed);
    }

    /// Copies failed since start because another copy wrote their held source (counters).
    pub fn copy_collisions(&self) -> u64 {
        self.watches.collisions.load(Ordering::Relaxed)
    }

    /// Writes that waited for a copy's hold since start (counters).
    pub fn writes_held(&self) -> u64 {
        self.watches.waited.load(Ordering::Relaxed)
    }

    /// Writes answered BUSY since start: a copy held their range and they ran on the
    /// daemon's loop (counters).
    pub fn writes_refused_for_copies(&self) -> u64 {
        self.watches.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backend::RamBackend;
    use crate::exec::LuConfig;
    use crate::lu::{LunIdentity, Oui};
    use std::time::{Duration, Instant};

    /// A 64-block RAM LU named `name`.
    pub(crate) fn lu(name: &str) -> LogicalUnit {
        let oui = Oui::new(0x00_1405).expect("24 bits");
        let b = RamBackend::new(64, crate::backend::BlockSize::B512).expect("ram");
        LogicalUnit::new(Box::new(b), LuConfig::new(LunIdentity::derive(name, oui)))
    }

    /// A command's nexus: on a worker (`may_wait`) or on the loop, aborted by `abort`.
    fn nexus(may_wait: bool, abort: Option<&AtomicBool>) -> Nexus<'_> {
        Nexus {
            initiator: srp::wire::PortId([0xa0; 16]),
            luns: &[],
            port: crate::lu::PortIdentity::for_ioc(0).expect("port"),
            groups: &[],
            abort,
            may_wait,
            pr_epoch: None,
        }
    }

    /// Waits (bounded) until `lu` has seen `n` writers wait for a hold.
    fn until_waiting(lu: &LogicalUnit, n: u64) {
        let t0 = Instant::now();
        while lu.writes_held() < n {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the writer never waited"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_hold_waits_only_for_writers_of_its_range() {
        let lu = lu("held");
        let worker = nexus(true, None);
        let held = lu.hold(Lba(0), 8);
        // Reads of the range, and writes elsewhere, go on.
        drop(lu.read_order());
        drop(lu.write_order_at(&worker, Lba(8), 8).expect("not held"));
        drop(lu.atomic_order_at(&worker, Lba(16), 1).expect("not held"));
        // UNMAP's ranges around the held one (not their span) go on too.
        drop(
            lu.write_order_over(&worker, &[(8, 1), (60, 4)])
                .expect("not held"),
        );
        let written = AtomicBool::new(false);
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let _o = lu
                    .write_order_over(&nexus(true, None), &[(40, 1), (4, 1)])
                    .expect("released");
                written.store(true, Ordering::Release);
            });
            until_waiting(&lu, 1);
            // Waiting without the order: a reader (a copy step) still gets it.
            drop(lu.read_order());
            assert!(!written.load(Ordering::Acquire), "written while held");
            assert_eq!(lu.held_ranges(), 1);
            drop(held);
            writer.join().expect("writer");
        });
        assert!(written.load(Ordering::Acquire));
        assert_eq!(lu.held_ranges(), 0);
    }

    /// The daemon's loop never waits for a copy: a writer running there is answered BUSY
    /// (counted), and the workers take the LU's commands while it is held.
    #[test]
    fn a_writer_on_the_loop_is_answered_busy_not_held() {
        let lu = lu("loop");
        let on_loop = nexus(false, None);
        assert!(!lu.has_holds());
        let held = lu.hold(Lba(0), 8);
        assert!(lu.has_holds());
        assert!(matches!(
            lu.write_order_at(&on_loop, Lba(7), 1),
            Err(Stop::Busy)
        ));
        assert!(matches!(
            lu.atomic_order_at(&on_loop, Lba(0), 8),
            Err(Stop::Busy)
        ));
        assert_eq!(lu.writes_refused_for_copies(), 2);
        assert_eq!(lu.writes_held(), 0);
        drop(lu.write_order_at(&on_loop, Lba(8), 1).expect("not held"));
        drop(held);
        assert!(!lu.has_holds());
        drop(lu.write_order_at(&on_loop, Lba(0), 8).expect("released"));
        assert_eq!(lu.writes_refused_for_copies(), 2);
    }

    /// A writer waiting for a hold gives up when its task is aborted and the abort wakes
    /// the LU's waiters; the hold stays.
    #[test]
    fn an_aborted_writer_stops_waiting_for_a_hold() {
        let lu = lu("aborted");
        let held = lu.hold(Lba(0), 8);
        let abort = AtomicBool::new(false);
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                lu.write_order_at(&nexus(true, Some(&abort)), Lba(2), 2)
                    .map(drop)
            });
            until_waiting(&lu, 1);
            // A wake without the abort: it goes back to waiting.
            lu.wake_hold_waiters();
            abort.store(true, Ordering::Release);
            lu.wake_hold_waiters();
            let t0 = Instant::now();
            while !writer.is_finished() {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "the aborted writer still waits"
                );
                std::thread::yield_now();
            }
            match writer.join().expect("writer") {
                Err(Stop::Check(sense)) => assert_eq!(sense.code(), SenseCode::ABORTED_COMMAND),
                other => panic!("{other:?}"),
            }
        });
        assert_eq!(lu.held_ranges(), 1);
        drop(held);
    }

    /// A touched watch leaves the list (its flag stays set for its owner, and ending it
    /// later is harmless): writes after do not scan it.
    #[test]
    fn a_touched_watch_leaves_the_list() {
        let lu = lu("leaves");
        let w = lu.watch_by(1, Lba(0), 8);
        let other = lu.watch_by(2, Lba(32), 8);
        assert_eq!(lu.watched_ranges(), 2);
        lu.note_write(Lba(4), 1);
        assert!(w.touched() && !other.touched());
        assert_eq!(lu.watched_ranges(), 1);
        drop(w);
        assert_eq!(lu.watched_ranges(), 1);
        drop(other);
        assert_eq!(lu.watched_ranges(), 0);
    }

    #[test]
    fn a_copy_does_not_touch_its_own_watch() {
        let lu = lu("owned");
        let mine = lu.watch_by(1, Lba(0), 8);
        let other = lu.watch_by(2, Lba(0), 8);
        lu.note_write_by(Some(1), Lba(0), 8);
        assert!(!mine.touched());
        assert!(other.touched());
        // An empty write touches nothing.
        let w = lu.watch_by(3, Lba(0), 8);
        lu.note_write(Lba(4), 0);
        assert!(!w.touched());
        lu.note_write(Lba(4), 1);
        assert!(w.touched() && mine.touched());
    }

    #[test]
    fn overlap_is_half_open() {
        assert!(overlaps(0, 8, 7, 1));
        assert!(!overlaps(0, 8, 8, 1));
        assert!(!overlaps(8, 1, 0, 8));
        assert!(overlaps(5, 1, 0, 8));
        assert!(!overlaps(0, 0, 0, 8));
        // An empty range overlaps nothing, wherever it is.
        assert!(!overlaps(0, 8, 3, 0));
        assert!(overlaps(u64::MAX - 1, 10, u64::MAX - 1, 1));
    }
}
