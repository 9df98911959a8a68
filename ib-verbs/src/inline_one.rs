//! [`InlineOne`]: a list that holds one element inline and more on the heap — the shape of
//! a work request's scatter/gather list and of its resolved spans, and of an SRP command's
//! data descriptors, which nearly always have one entry, so building one allocates nothing.

use alloc::vec;
use alloc::vec::Vec;

/// A list read as a slice: empty, one element inline, or several in a `Vec`. Lists with
/// the same elements are equal whatever their shape.
#[derive(Clone, Debug, Default)]
pub enum InlineOne<T> {
    /// No element.
    #[default]
    Empty,
    /// One element, inline.
    One(T),
    /// Two or more (or any number, when built from a `Vec`).
    Many(Vec<T>),
}

impl<T> InlineOne<T> {
    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        match self {
            InlineOne::Empty => &[],
            InlineOne::One(x) => core::slice::from_ref(x),
            InlineOne::Many(v) => v,
        }
    }
}

impl<T> InlineOne<T> {
    /// The last element, to change it.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        match self {
            InlineOne::Empty => None,
            InlineOne::One(x) => Some(x),
            InlineOne::Many(v) => v.last_mut(),
        }
    }

    /// Room for `additional` more elements (moving one inline element to the heap).
    pub fn reserve(&mut self, additional: usize) {
        *self = match core::mem::take(self) {
            InlineOne::One(a) if additional > 0 => {
                let mut v = Vec::with_capacity(additional + 1);
                v.push(a);
                InlineOne::Many(v)
            }
            InlineOne::Many(mut v) => {
                v.reserve(additional);
                InlineOne::Many(v)
            }
            other => other,
        };
    }

    /// Appends `x` (the second element moves the list to the heap).
    pub fn push(&mut self, x: T) {
        *self = match core::mem::take(self) {
            InlineOne::Empty => InlineOne::One(x),
            InlineOne::One(a) => InlineOne::Many(vec![a, x]),
            InlineOne::Many(mut v) => {
                v.push(x);
                InlineOne::Many(v)
            }
        };
    }
}

impl<'a, T> IntoIterator for &'a InlineOne<T> {
    type Item = &'a T;
    type IntoIter = core::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<T> Extend<T> for InlineOne<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for x in iter {
            self.push(x);
        }
    }
}

impl<T> IntoIterator for InlineOne<T> {
    type Item = T;
    type IntoIter = InlineIter<T>;

    fn into_iter(self) -> InlineIter<T> {
        match self {
            InlineOne::Empty => InlineIter::One(None),
            InlineOne::One(x) => InlineIter::One(Some(x)),
            InlineOne::Many(v) => InlineIter::Many(v.into_iter()),
        }
    }
}

/// The elements of an [`InlineOne`], by value.
#[derive(Debug)]
pub enum InlineIter<T> {
    /// Of an empty or one-element list.
    One(Option<T>),
    /// Of a list on the heap.
    Many(alloc::vec::IntoIter<T>),
}

impl<T> Iterator for InlineIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            InlineIter::One(x) => x.take(),
            InlineIter::Many(it) => it.next(),
        }
    }
}

impl<T> core::ops::Deref for InlineOne<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: PartialEq> PartialEq for InlineOne<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Eq> Eq for InlineOne<T> {}

impl<T> From<Vec<T>> for InlineOne<T> {
    fn from(v: Vec<T>) -> Self {
        InlineOne::Many(v)
    }
}

impl<T> FromIterator<T> for InlineOne<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> InlineOne<T> {
        let mut it = iter.into_iter();
        match (it.next(), it.next()) {
            (None, _) => InlineOne::Empty,
            (Some(one), None) => InlineOne::One(one),
            (Some(a), Some(b)) => InlineOne::Many([a, b].into_iter().chain(it).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_element_is_held_inline_and_every_shape_reads_back() {
        assert_eq!(InlineOne::<u8>::from_iter([]), InlineOne::Empty);
        assert_eq!(InlineOne::from_iter([7]), InlineOne::One(7));
        assert_eq!(
            InlineOne::from_iter([1, 2, 3]),
            InlineOne::Many(vec![1, 2, 3])
        );
        for v in [vec![], vec![7], vec![1, 2, 3]] {
            assert_eq!(InlineOne::from_iter(v.clone()).as_slice(), v.as_slice());
            assert_eq!(
                InlineOne::from(v.clone()),
                InlineOne::from_iter(v),
                "shape-blind"
            );
        }
        let mut l = InlineOne::Empty;
        for x in [4, 5, 6] {
            l.push(x);
        }
        assert_eq!(l.as_slice(), [4, 5, 6]);
        assert_eq!(l.into_iter().collect::<Vec<_>>(), [4, 5, 6]);
        assert_eq!(InlineOne::One(9).into_iter().collect::<Vec<_>>(), [9]);
        // Collecting results stops at the first error, as for a Vec.
        let r: Result<InlineOne<u8>, u8> = [Ok(1), Err(9), Ok(2)].into_iter().collect();
        assert_eq!(r, Err(9));
    }
}
