//! Sans-IO state of a channel's fast-registration regions: which are free, which one of
//! them a command holds under which key, and which wait for their invalidation to complete.
//!
//! The rule it enforces: a region is handed out again only once it is known invalid, either
//! because the target's SEND WITH INVALIDATE named its current key, or because our
//! LOCAL_INV of it completed successfully. Every hand-out rolls the key's low byte (Linux
//! `ib_inc_rkey`), so a key the target learned for an earlier command never names a later
//! registration. Free regions are reused oldest first, which spreads the 256 key variants
//! over the whole pool before any key value comes back.

use super::super::alloc::collections::{BTreeMap, VecDeque};
use super::super::alloc::vec::Vec;
use super::RegError;
use ib_verbs::inline_one::InlineOne;
use ib_verbs::mr::MrKey;

/// Where one region is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Known invalid: may be registered.
    Free,
    /// Registered (or being registered) for a command.
    Mapped,
    /// A LOCAL_INV was handed out and has not completed yet.
    Invalidating,
    /// Its LOCAL_INV failed or was flushed: it must be invalidated again (after a reconnect).
    NeedsInvalidate,
    /// Given up by a command whose REG_MR may or may not have run (never posted, or posted
    /// on a queue pair that died): its key in the HCA is unknown, so no LOCAL_INV can name
    /// it. It is deregistered and allocated anew ([`KeyPool::take_discarded`],
    /// [`KeyPool::replace`]), as ib_srp recreates its pool on reconnect.
    Discarded,
    /// Handed out by [`KeyPool::take_discarded`]: its release and replacement are under
    /// way, and it is not handed out again (a second release of the same key, or a second
    /// replacement for one slot, would fail or leak).
    Replacing,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    key: MrKey,
    state: SlotState,
}

/// The regions of one channel.
#[derive(Clone, Debug)]
pub struct KeyPool {
    slots: Vec<Slot>,
    /// Indices of free slots, oldest freed first.
    free: VecDeque<usize>,
    /// The slot of each region index (the key without its variant byte): a key is found in
    /// O(log n) on every I/O's release, not by scanning the pool.
    by_index: BTreeMap<u32, usize>,
}

/// How many regions are in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Free.
    pub free: usize,
    /// Held by commands.
    pub mapped: usize,
    /// Waiting for a LOCAL_INV completion.
    pub invalidating: usize,
    /// Waiting for a LOCAL_INV to be posted again.
    pub needs_invalidate: usize,
    /// Waiting to be deregistered and allocated anew, or being replaced.
    pub discarded: usize,
}

impl KeyPool {
    /// A pool of regions allocated with these keys, all free (as `ib_alloc_mr` leaves them).
    pub fn new(keys: impl IntoIterator<Item = MrKey>) -> Self {
        let slots: Vec<Slot> = keys
            .into_iter()
            .map(|key| Slot {
                key,
                state: SlotState::Free,
            })
            .collect();
        let free = (0..slots.len()).collect();
        let by_index = (slots.iter().enumerate())
            .map(|(i, s)| (s.key.index().0, i))
            .collect();
        KeyPool {
            slots,
            free,
            by_index,
        }
    }

    /// Regions in the pool.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the pool has no region at all.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Regions in each state.
    pub fn counts(&self) -> PoolCounts {
        let mut c = PoolCounts::default();
        for s in &self.slots {
            match s.state {
                SlotState::Free => c.free += 1,
                SlotState::Mapped => c.mapped += 1,
                SlotState::Invalidating => c.invalidating += 1,
                SlotState::NeedsInvalidate => c.needs_invalidate += 1,
                SlotState::Discarded | SlotState::Replacing => c.discarded += 1,
            }
        }
        debug_assert_eq!(
            c.free,
            self.free.len(),
            "free list and slot states disagree"
        );
        c
    }

    /// Takes `n` free regions for one command, each under a new key variant; all or none.
    pub fn take(&mut self, n: usize) -> Result<InlineOne<MrKey>, RegError> {
        if self.free.len() < n {
            return Err(RegError::Busy {
                needed: n,
                free: self.free.len(),
            });
        }
        let mut keys = InlineOne::Empty;
        for _ in 0..n {
            let Some(i) = self.free.pop_front() else {
                break; // unreachable: counted above
            };
            let slot = &mut self.slots[i];
            debug_assert_eq!(slot.state, SlotState::Free);
            slot.key = slot.key.next_variant();
            slot.state = SlotState::Mapped;
            keys.push(slot.key);
        }
        Ok(keys)
    }

    fn slot_of(&mut self, key: MrKey, want: SlotState) -> Result<usize, RegError> {
        let matches = |s: &Slot| s.key == key && s.state == want;
        match self.by_index.get(&key.index().0) {
            Some(&i) if self.slots.get(i).is_some_and(matches) => Ok(i),
            // Keys sharing an index (only pools built over made-up keys) are scanned.
            _ => (self.slots.iter().position(matches)).ok_or(RegError::StaleHandle { key }),
        }
    }

    fn free_slot(&mut self, i: usize) {
        self.slots[i].state = SlotState::Free;
        self.free.push_back(i);
    }

    /// A command is done with `keys`. The region whose current key the target invalidated
    /// (`invalidated`, from the SRP_RSP's receive completion) is free at once; the others
    /// are returned, to be invalidated locally. Nothing changes on an error.
    pub fn release(
        &mut self,
        keys: &[MrKey],
        invalidated: Option<MrKey>,
    ) -> Result<InlineOne<MrKey>, RegError> {
        for &key in keys {
            self.slot_of(key, SlotState::Mapped)?;
        }
        let mut to_invalidate = InlineOne::Empty;
        for &key in keys {
            let i = self.slot_of(key, SlotState::Mapped)?;
            if invalidated == Some(key) {
                self.free_slot(i);
            } else {
                self.slots[i].state = SlotState::Invalidating;
                to_invalidate.push(key);
            }
        }
        Ok(to_invalidate)
    }

    /// The LOCAL_INV of `key` completed: on success the region is free, otherwise it must be
    /// invalidated again ([`KeyPool::take_retries`]).
    pub fn invalidate_done(&mut self, key: MrKey, ok: bool) -> Result<(), RegError> {
        let i = self.slot_of(key, SlotState::Invalidating)?;
        if ok {
            self.free_slot(i);
        } else {
            self.slots[i].state = SlotState::NeedsInvalidate;
        }
        Ok(())
    }

    /// The invalidation of `key` failed in a way that leaves the region's state unknown
    /// (not a flush: the work request may have run): the region is discarded — replaced,
    /// never named by a second invalidation.
    pub fn invalidate_abandoned(&mut self, key: MrKey) -> Result<(), RegError> {
        let i = self.slot_of(key, SlotState::Invalidating)?;
        self.slots[i].state = SlotState::Discarded;
        Ok(())
    }

    /// Keys whose invalidation failed (a flushed LOCAL_INV after a QP error), to post again
    /// on the new connection; they become Invalidating.
    pub fn take_retries(&mut self) -> Vec<MrKey> {
        let mut keys = Vec::new();
        for s in &mut self.slots {
            if s.state == SlotState::NeedsInvalidate {
                s.state = SlotState::Invalidating;
                keys.push(s.key);
            }
        }
        keys
    }

    /// A command gives up `keys` without knowing whether their REG_MRs ran: they become
    /// Discarded. Nothing changes on an error.
    pub fn discard(&mut self, keys: &[MrKey]) -> Result<(), RegError> {
        for &key in keys {
            self.slot_of(key, SlotState::Mapped)?;
        }
        for &key in keys {
            let i = self.slot_of(key, SlotState::Mapped)?;
            self.slots[i].state = SlotState::Discarded;
        }
        Ok(())
    }

    /// Discarded regions not handed out yet, by slot, with their last key (to deregister
    /// them); each becomes Replacing, so it is handed out once.
    pub fn take_discarded(&mut self) -> Vec<(usize, MrKey)> {
        let mut out = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.state == SlotState::Discarded {
                s.state = SlotState::Replacing;
                out.push((i, s.key));
            }
        }
        out
    }

    /// Slot `i` (Replacing) now holds a freshly allocated region under `key`: it is free.
    pub fn replace(&mut self, i: usize, key: MrKey) -> Result<(), RegError> {
        match self.slots.get(i) {
            Some(s) if s.state == SlotState::Replacing => {
                self.by_index.remove(&self.slots[i].key.index().0);
                self.by_index.insert(key.index().0, i);
                self.slots[i].key = key;
                self.free_slot(i);
                Ok(())
            }
            Some(s) => Err(RegError::StaleHandle { key: s.key }),
            None => Err(RegError::StaleHandle { key }),
        }
    }
}
