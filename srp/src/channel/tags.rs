//! The outstanding-tag table: each request in progress on a channel, by tag.
//!
//! A tag names a request until its response is sent; task management (ABORT TASK) finds the
//! request by it, and a new request reusing a live tag is refused rather than allowed to
//! shadow the first (SAM-5 5.10: overlapped commands). The table is bounded by the credit
//! window, so a conforming initiator cannot fill it.
//!
//! Storage: an `ib_verbs::IdTable` sized at creation for the window (it never grows, so
//! tracking a request allocates nothing and needs only `core` + `alloc`: no `std` hash map
//! in a kernel driver), bounded here by the window. Tags are the initiator's choice: a
//! hostile one can make its tags collide, which costs it probes bounded by its own window,
//! never more memory.

use super::ChannelError;
use crate::wire::Tag;
use alloc::vec::Vec;
use ib_verbs::{IdKey, IdTable};

impl IdKey for Tag {
    fn id_bits(self) -> u64 {
        self.0
    }
}

/// Requests in progress, by tag, with per-request state `T`.
#[derive(Debug)]
pub struct TagTable<T> {
    table: IdTable<Tag, T>,
    capacity: usize,
}

impl<T> TagTable<T> {
    /// An empty table holding at most `capacity` requests (the credit window).
    pub fn new(capacity: usize) -> TagTable<T> {
        TagTable {
            table: IdTable::with_capacity(capacity),
            capacity,
        }
    }

    /// Starts tracking `tag`; refuses a tag already live or a table that is full.
    pub fn insert(&mut self, tag: Tag, state: T) -> Result<(), ChannelError> {
        if self.table.contains_key(tag) {
            return Err(ChannelError::DuplicateTag(tag));
        }
        if self.table.len() >= self.capacity {
            return Err(ChannelError::TooManyOutstanding {
                capacity: self.capacity,
            });
        }
        self.table.insert(tag, state);
        Ok(())
    }

    /// The state of a live request.
    pub fn get(&self, tag: Tag) -> Option<&T> {
        self.table.get(tag)
    }

    /// The state of a live request, for update.
    pub fn get_mut(&mut self, tag: Tag) -> Option<&mut T> {
        self.table.get_mut(tag)
    }

    /// Stops tracking `tag` (its response was sent or it was aborted).
    pub fn remove(&mut self, tag: Tag) -> Option<T> {
        self.table.remove(tag)
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
        self.table.len()
    }

    /// Whether nothing is in progress.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Iterates the live requests (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = (Tag, &T)> {
        self.table.iter()
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
