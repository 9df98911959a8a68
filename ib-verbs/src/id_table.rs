//! [`IdTable`]: a map from a 64-bit identity (a command's id, an SRB's) to what a data path
//! keeps for it, that allocates only when it grows — never per insert or remove, so a
//! steady state of commands in flight allocates nothing (a `BTreeMap` splits and merges
//! nodes as its size crosses them; a kernel has no `std` hash map).
//!
//! Storage: open addressing over a power-of-two slot array, Fibonacci hashing of the id,
//! linear probing, deletion by backward shift (no tombstones); kept at most half full, it
//! doubles when an insert would pass that. A table made `with_capacity(n)` and kept at `n`
//! entries by its user never grows: ids a peer chooses to collide (srp's `TagTable` at a
//! target) cost it probes bounded by the table, never memory.

use alloc::vec::Vec;

/// An identity an [`IdTable`] is keyed by.
pub trait IdKey: Copy + Eq {
    /// The identity's bits.
    fn id_bits(self) -> u64;
}

impl IdKey for u64 {
    fn id_bits(self) -> u64 {
        self
    }
}

/// Fibonacci hashing's multiplier (2^64 / φ).
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

/// Slots of a table's first allocation.
const MIN_SLOTS: usize = 16;

/// A map from ids to values (see the module doc).
#[derive(Debug, Clone)]
pub struct IdTable<K, V> {
    slots: Vec<Option<(K, V)>>,
    /// 64 minus log2 of the slot count (unused while there are no slots).
    shift: u32,
    len: usize,
}

impl<K, V> Default for IdTable<K, V> {
    fn default() -> Self {
        IdTable {
            slots: Vec::new(),
            shift: 64,
            len: 0,
        }
    }
}

impl<K: IdKey, V> IdTable<K, V> {
    /// An empty table (allocates at its first insert).
    pub fn new() -> IdTable<K, V> {
        IdTable::default()
    }

    /// An empty table that holds `n` entries before it grows.
    pub fn with_capacity(n: usize) -> IdTable<K, V> {
        let mut t = IdTable::default();
        t.resize(n.saturating_mul(2).max(MIN_SLOTS).next_power_of_two());
        t
    }

    fn resize(&mut self, slots: usize) {
        let mut fresh = Vec::with_capacity(slots);
        fresh.resize_with(slots, || None);
        let old = core::mem::replace(&mut self.slots, fresh);
        self.shift = 64 - slots.trailing_zeros();
        self.len = 0;
        for (k, v) in old.into_iter().flatten() {
            let i = self.free_slot(k);
            self.slots[i] = Some((k, v));
            self.len += 1;
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, k: K) -> usize {
        (k.id_bits().wrapping_mul(FIB) >> self.shift) as usize
    }

    /// The slot holding `k`. Never more than half full, so a probe meets an empty slot.
    fn find(&self, k: K) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mut i = self.home(k);
        loop {
            match &self.slots[i] {
                None => return None,
                Some((x, _)) if *x == k => return Some(i),
                Some(_) => i = (i + 1) & self.mask(),
            }
        }
    }

    /// The first empty slot of `k`'s probe (`k` known absent).
    fn free_slot(&self, k: K) -> usize {
        let mut i = self.home(k);
        while self.slots[i].is_some() {
            i = (i + 1) & self.mask();
        }
        i
    }

    /// Inserts `v` under `k`; the value `k` had, if any.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        if let Some(i) = self.find(k) {
            return self.slots[i].replace((k, v)).map(|(_, old)| old);
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.resize((self.slots.len() * 2).max(MIN_SLOTS));
        }
        let i = self.free_slot(k);
        self.slots[i] = Some((k, v));
        self.len += 1;
        None
    }

    /// The value under `k`.
    pub fn get(&self, k: K) -> Option<&V> {
        let i = self.find(k)?;
        self.slots[i].as_ref().map(|(_, v)| v)
    }

    /// The value under `k`, to change it.
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        let i = self.find(k)?;
        self.slots[i].as_mut().map(|(_, v)| v)
    }

    /// Whether `k` has a value.
    pub fn contains_key(&self, k: K) -> bool {
        self.find(k).is_some()
    }

    /// Removes `k`'s value.
    pub fn remove(&mut self, k: K) -> Option<V> {
        let mut hole = self.find(k)?;
        let (_, v) = self.slots[hole].take()?;
        self.len -= 1;
        // Backward shift: an entry after the hole moves into it unless its home lies
        // cyclically in (hole, j], where a probe for it would stop before the hole.
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some((x, _)) = &self.slots[j] else {
                break;
            };
            let h = self.home(*x);
            let stays = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
        Some(v)
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.slots.iter().flatten().map(|(k, v)| (*k, v))
    }

    /// The entries, in no particular order, to change their values.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (K, &mut V)> {
        self.slots.iter_mut().flatten().map(|(k, v)| (*k, v))
    }

    /// The ids, in id order (collected and sorted: for the rare walks that must be
    /// deterministic).
    pub fn ids_in_order(&self) -> Vec<K> {
        let mut ids: Vec<K> = self.iter().map(|(k, _)| k).collect();
        ids.sort_by_key(|k| k.id_bits());
        ids
    }

    /// The values, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().flatten().map(|(_, v)| v)
    }

    /// Removes every entry, keeping the slots, and returns them in id order (so whoever
    /// fails them does so deterministically, oldest id first).
    pub fn drain_by_id(&mut self) -> Vec<(K, V)> {
        let mut all: Vec<(K, V)> = self.slots.iter_mut().filter_map(Option::take).collect();
        self.len = 0;
        all.sort_by_key(|(k, _)| k.id_bits());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;

    /// Against a BTreeMap, through inserts, replacements and removals that wrap around the
    /// slot array and collide (ids that share their home slot).
    #[test]
    fn it_behaves_as_a_map_through_collisions_growth_and_backward_shifts() {
        let mut t: IdTable<u64, u64> = IdTable::new();
        let mut m = BTreeMap::new();
        // Ids with the same top bits of their hash collide in a small table.
        let mut x = 0x1234_5678_u64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = x % 97; // few ids: plenty of replacing and removing
            if x % 3 == 0 {
                assert_eq!(t.remove(k), m.remove(&k), "remove {k} at {step}");
            } else {
                assert_eq!(t.insert(k, step), m.insert(k, step), "insert {k} at {step}");
            }
            assert_eq!(t.len(), m.len());
        }
        for k in 0..97 {
            assert_eq!(t.get(k), m.get(&k));
            assert_eq!(t.contains_key(k), m.contains_key(&k));
        }
        let drained: Vec<_> = t.drain_by_id();
        let expected: Vec<_> = m.into_iter().collect();
        assert_eq!(drained, expected, "drained in id order");
        assert!(t.is_empty() && t.get(3).is_none());
    }

    /// Sequential ids, as a data path issues them: a window of in-flight ids sliding
    /// forward stays within the first allocation (no growth, so no allocation).
    #[test]
    fn a_sliding_window_of_ids_never_grows_the_table() {
        let mut t: IdTable<u64, ()> = IdTable::with_capacity(32);
        let slots = t.slots.len();
        for id in 0..32 {
            t.insert(id, ());
        }
        for id in 32..100_000u64 {
            assert!(t.remove(id - 32).is_some(), "{id}");
            t.insert(id, ());
        }
        assert_eq!((t.len(), t.slots.len()), (32, slots));
        for (id, ()) in t.iter() {
            assert!((100_000 - 32..100_000).contains(&id));
        }
    }
}
