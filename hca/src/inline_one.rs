//! [`InlineOne`]: a list that holds one element inline and more on the heap — the shape of
//! a work request's scatter/gather list and of its resolved spans, which nearly always
//! have one entry, so building one allocates nothing.

/// A list read as a slice: empty, one element inline, or several in a `Vec`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum InlineOne<T> {
    #[default]
    Empty,
    One(T),
    Many(Vec<T>),
}

impl<T> InlineOne<T> {
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            InlineOne::Empty => &[],
            InlineOne::One(x) => std::slice::from_ref(x),
            InlineOne::Many(v) => v,
        }
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
        }
        // Collecting results stops at the first error, as for a Vec.
        let r: Result<InlineOne<u8>, u8> = [Ok(1), Err(9), Ok(2)].into_iter().collect();
        assert_eq!(r, Err(9));
    }
}
