//! The outstanding-tag table: each request in progress on a channel, by tag.
//!
//! A tag names a request until its response is sent; task management (ABORT TASK) finds the
//! request by it, and a new request reusing a live tag is refused rather than allowed to
//! shadow the first (SAM-5 5.10: overlapped commands). The table is bounded by the credit
//! window, so a conforming initiator cannot fill it.
//!
//! Storage: an open-addressing table sized at creation (twice the window, a power of two;
//! linear probing, deletion by backward shift), so tracking a request allocates nothing
//! and needs only `core` + `alloc` (no `std` hash map in a kernel driver). Tags are the
//! initiator's choice: a hostile one can make its tags collide, which costs it probes
//! bounded by its own window, never more memory.

use super::ChannelError;
use crate::wire::Tag;
use alloc::vec::Vec;

/// Requests in progress, by tag, with per-request state `T`.
#[derive(Debug)]
pub struct TagTable<T> {
    slots: Vec<Option<(Tag, T)>>,
    /// 64 minus log2 of the slot count: a tag's home slot is the top bits of its hash.
    shift: u32,
    len: usize,
    capacity: usize,
}

/// Fibonacci hashing's multiplier (2^64 / φ).
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

impl<T> TagTable<T> {
    /// An empty table holding at most `capacity` requests (the credit window).
    pub fn new(capacity: usize) -> TagTable<T> {
        let n = capacity.saturating_mul(2).max(8).next_power_of_two();
        let mut slots = Vec::with_capacity(n);
        slots.resize_with(n, || None);
        TagTable {
            slots,
            shift: 64 - n.trailing_zeros(),
            len: 0,
            capacity,
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, tag: Tag) -> usize {
        (tag.0.wrapping_mul(FIB) >> self.shift) as usize
    }

    /// The slot holding `tag`. The table is never more than half full, so a probe meets an
    /// empty slot.
    fn find(&self, tag: Tag) -> Option<usize> {
        let mut i = self.home(tag);
        loop {
            match &self.slots[i] {
                None => return None,
                Some((t, _)) if *t == tag => return Some(i),
                Some(_) => i = (i + 1) & self.mask(),
            }
        }
    }

    /// Starts tracking `tag`; refuses a tag already live or a table that is full.
    pub fn insert(&mut self, tag: Tag, state: T) -> Result<(), ChannelError> {
        if self.find(tag).is_some() {
            return Err(ChannelError::DuplicateTag(tag));
        }
        if self.len >= self.capacity {
            return Err(ChannelError::TooManyOutstanding {
                capacity: self.capacity,
            });
        }
        let mut i = self.home(tag);
        while self.slots[i].is_some() {
            i = (i + 1) & self.mask();
        }
        self.slots[i] = Some((tag, state));
        self.len += 1;
        Ok(())
    }

    /// The state of a live request.
    pub fn get(&self, tag: Tag) -> Option<&T> {
        let i = self.find(tag)?;
        self.slots[i].as_ref().map(|(_, s)| s)
    }

    /// The state of a live request, for update.
    pub fn get_mut(&mut self, tag: Tag) -> Option<&mut T> {
        let i = self.find(tag)?;
        self.slots[i].as_mut().map(|(_, s)| s)
    }

    /// Stops tracking `tag` (its response was sent or it was aborted).
    pub fn remove(&mut self, tag: Tag) -> Option<T> {
        let mut hole = self.find(tag)?;
        let (_, state) = self.slots[hole].take()?;
        self.len -= 1;
        // Backward shift: an entry after the hole moves into it unless its home lies
        // cyclically in (hole, j], where a probe for it would stop before the hole.
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some((t, _)) = &self.slots[j] else {
                break;
            };
            let h = self.home(*t);
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
        Some(state)
    }

    /// Removes and returns every request matching `pred` (ABORT TASK SET, LUN RESET), in tag
    /// order so callers act deterministically.
    pub fn drain_matching(&mut self, mut pred: impl FnMut(Tag, &T) -> bool) -> Vec<(Tag, T)> {
        let mut tags: Vec<Tag> = self
            .iter()
            .filter(|(t, s)| pred(*t, s))
            .map(|(t, _)| t)
            .collect();
        tags.sort();
        tags.into_iter()
            .filter_map(|t| self.remove(t).map(|s| (t, s)))
            .collect()
    }

    /// Requests in progress.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is in progress.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Iterates the live requests (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = (Tag, &T)> {
        self.slots.iter().flatten().map(|(t, s)| (*t, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_tag_refused_and_first_request_kept() {
        let mut t = TagTable::new(4);
        t.insert(Tag(7), "first").expect("free tag");
        assert_eq!(
            t.insert(Tag(7), "second"),
            Err(ChannelError::DuplicateTag(Tag(7)))
        );
        assert_eq!(t.get(Tag(7)), Some(&"first"));
        assert_eq!(t.remove(Tag(7)), Some("first"));
        t.insert(Tag(7), "reuse after completion")
            .expect("tag free again");
    }

    #[test]
    fn capacity_bounds_the_table() {
        let mut t = TagTable::new(2);
        t.insert(Tag(1), ()).expect("room");
        t.insert(Tag(2), ()).expect("room");
        assert_eq!(
            t.insert(Tag(3), ()),
            Err(ChannelError::TooManyOutstanding { capacity: 2 })
        );
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn drain_matching_takes_only_matches_in_tag_order() {
        let mut t = TagTable::new(8);
        for (tag, lun) in [(5, 0), (1, 1), (3, 0), (2, 0)] {
            t.insert(Tag(tag), lun).expect("room");
        }
        let drained = t.drain_matching(|_, lun| *lun == 0);
        assert_eq!(drained, vec![(Tag(2), 0), (Tag(3), 0), (Tag(5), 0)]);
        assert_eq!(t.len(), 1);
        assert_eq!(t.get(Tag(1)), Some(&1));
        assert!(!t.is_empty());
        if let Some(s) = t.get_mut(Tag(1)) {
            *s = 9;
        }
        assert_eq!(t.iter().collect::<Vec<_>>(), vec![(Tag(1), &9)]);
    }

    #[test]
    fn agrees_with_a_map_under_colliding_churn() {
        use std::collections::BTreeMap;
        // Tags that share home slots (multiples of the slot count collide under any
        // multiplier's top bits only by chance; consecutive and strided tags both probe).
        let mut t = TagTable::new(32);
        let mut model = BTreeMap::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let tag = Tag(match x % 3 {
                0 => x % 40,
                1 => (x % 40) << 58,
                _ => (x % 40) * 64,
            });
            if x & 8 == 0 {
                let r = t.insert(tag, step);
                let want = if model.contains_key(&tag) {
                    Err(ChannelError::DuplicateTag(tag))
                } else if model.len() >= 32 {
                    Err(ChannelError::TooManyOutstanding { capacity: 32 })
                } else {
                    model.insert(tag, step);
                    Ok(())
                };
                assert_eq!(r, want, "insert {tag:?} at step {step}");
            } else {
                assert_eq!(
                    t.remove(tag),
                    model.remove(&tag),
                    "remove {tag:?} at step {step}"
                );
            }
            assert_eq!(t.len(), model.len());
            for (k, v) in &model {
                assert_eq!(t.get(*k), Some(v), "lost {k:?} at step {step}");
            }
        }
        let mut all: Vec<_> = t.iter().map(|(k, v)| (k, *v)).collect();
        all.sort();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    }
}
