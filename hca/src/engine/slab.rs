//! A tiny slab: objects in a vector, ids are indices, freed slots are reused.

/// Objects addressed by `u32` ids.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Stores `value`; returns its id.
    pub(crate) fn insert(&mut self, value: T) -> u32 {
        if let Some(id) = self.free.pop() {
            self.slots[id as usize] = Some(value);
            return id;
        }
        self.slots.push(Some(value));
        (self.slots.len() - 1) as u32
    }

    /// The object with this id.
    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        self.slots.get(id as usize)?.as_ref()
    }

    /// The object with this id, mutably.
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        self.slots.get_mut(id as usize)?.as_mut()
    }

    /// Number of live objects.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Removes and returns the object.
    pub(crate) fn remove(&mut self, id: u32) -> Option<T> {
        let v = self.slots.get_mut(id as usize)?.take()?;
        self.free.push(id);
        Some(v)
    }
}
