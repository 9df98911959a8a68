//! Tags with O(1) lookup: a slab whose index is the low 32 bits of the SRP tag and whose
//! per-slot generation is the high 32 bits.
//!
//! Freeing a slot bumps its generation, so a response carrying the tag of a finished request
//! (a stale tag, a duplicate, or a forged one) no longer matches and is detected rather than
//! completing whatever request reuses the slot. Generation 0 is never issued, so tag 0 (the
//! login tag) never names a request. The slab is bounded; a full slab makes the caller wait.

use super::alloc::vec::Vec;
use crate::wire::Tag;

/// A slot index and generation, as carried in an SRP tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TaggedSlot {
    index: u32,
    generation: u32,
}

impl TaggedSlot {
    /// The wire tag: generation in the high half, index in the low half.
    pub fn tag(self) -> Tag {
        Tag((u64::from(self.generation) << 32) | u64::from(self.index))
    }

    /// Splits a wire tag (no validity check; see [`TagSlab::get`]).
    pub fn from_tag(tag: Tag) -> TaggedSlot {
        TaggedSlot {
            index: (tag.0 & 0xffff_ffff) as u32,
            generation: (tag.0 >> 32) as u32,
        }
    }
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Live requests by tag, at most `capacity` at once.
#[derive(Debug)]
pub struct TagSlab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    capacity: usize,
    live: usize,
}

impl<T> TagSlab<T> {
    /// An empty slab holding at most `capacity` requests.
    pub fn new(capacity: usize) -> TagSlab<T> {
        TagSlab {
            slots: Vec::new(),
            free: Vec::new(),
            capacity,
            live: 0,
        }
    }

    /// Changes the bound (at login, to the new window); live requests stay.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
    }

    /// Requests live.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether nothing is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Whether another request fits.
    pub fn has_room(&self) -> bool {
        self.live < self.capacity
    }

    /// Stores `value` and returns its tag, or hands `value` back when full.
    pub fn insert(&mut self, value: T) -> Result<Tag, T> {
        if !self.has_room() {
            return Err(value);
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let Ok(i) = u32::try_from(self.slots.len()) else {
                    return Err(value);
                };
                self.slots.push(Slot {
                    generation: 1,
                    value: None,
                });
                i
            }
        };
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return Err(value);
        };
        debug_assert!(slot.value.is_none(), "free list names a live slot");
        slot.value = Some(value);
        self.live += 1;
        Ok(TaggedSlot {
            index,
            generation: slot.generation,
        }
        .tag())
    }

    fn slot(&self, tag: Tag) -> Option<&Slot<T>> {
        let t = TaggedSlot::from_tag(tag);
        self.slots
            .get(t.index as usize)
            .filter(|s| s.generation == t.generation && s.value.is_some())
    }

    /// The live request `tag` names; `None` for a stale, forged or unknown tag.
    pub fn get(&self, tag: Tag) -> Option<&T> {
        self.slot(tag).and_then(|s| s.value.as_ref())
    }

    /// [`TagSlab::get`], for update.
    pub fn get_mut(&mut self, tag: Tag) -> Option<&mut T> {
        let t = TaggedSlot::from_tag(tag);
        self.slots
            .get_mut(t.index as usize)
            .filter(|s| s.generation == t.generation)
            .and_then(|s| s.value.as_mut())
    }

    /// Ends the request `tag` names and retires the tag.
    pub fn remove(&mut self, tag: Tag) -> Option<T> {
        let t = TaggedSlot::from_tag(tag);
        let slot = self
            .slots
            .get_mut(t.index as usize)
            .filter(|s| s.generation == t.generation)?;
        let value = slot.value.take()?;
        // Skip generation 0 on wrap so tag 0 never becomes valid.
        slot.generation = slot.generation.wrapping_add(1).max(1);
        self.free.push(t.index);
        self.live -= 1;
        Some(value)
    }

    /// Tags of every live request, in slot order (deterministic).
    pub fn tags(&self) -> Vec<Tag> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.value.is_some())
            .map(|(i, s)| {
                TaggedSlot {
                    index: i as u32,
                    generation: s.generation,
                }
                .tag()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_layout_is_generation_high_index_low() {
        let mut s = TagSlab::new(4);
        let a = s.insert("a").expect("room");
        let b = s.insert("b").expect("room");
        assert_eq!(a, Tag(0x0000_0001_0000_0000));
        assert_eq!(b, Tag(0x0000_0001_0000_0001));
        assert_eq!(s.remove(a), Some("a"));
        let c = s.insert("c").expect("room");
        assert_eq!(c, Tag(0x0000_0002_0000_0000), "slot 0 reused, generation 2");
        assert_eq!(s.tags(), vec![c, b]);
    }

    #[test]
    fn stale_and_forged_tags_find_nothing() {
        let mut s = TagSlab::new(2);
        let a = s.insert(1).expect("room");
        assert_eq!(s.remove(a), Some(1));
        let b = s.insert(2).expect("room");
        assert_eq!(s.get(a), None, "stale generation");
        assert_eq!(s.get_mut(a), None);
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(b), Some(&2));
        assert_eq!(s.get(Tag(0)), None, "login tag");
        assert_eq!(s.get(Tag(0x0000_0002_0000_0007)), None, "index never used");
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn capacity_hands_the_value_back() {
        let mut s = TagSlab::new(1);
        s.insert('x').expect("room");
        assert_eq!(s.insert('y'), Err('y'));
        assert!(!s.has_room());
        assert!(!s.is_empty());
    }
}
