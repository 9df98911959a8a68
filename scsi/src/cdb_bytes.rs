//! [`CdbBytes`]: a command's CDB as a transport carries it — held inline up to
//! [`CdbBytes::INLINE`] bytes (the 16 of every common command, with room for a short
//! additional CDB), so passing a command on allocates nothing; longer ones on the heap.

use alloc::vec::Vec;
use core::fmt;
use core::ops::Deref;

/// A CDB (see the module doc).
#[derive(Clone, PartialEq, Eq)]
pub enum CdbBytes {
    /// Up to [`CdbBytes::INLINE`] bytes: the first `len` of `bytes`.
    Inline {
        /// Bytes used.
        len: u8,
        /// The bytes.
        bytes: [u8; CdbBytes::INLINE],
    },
    /// A longer CDB (SRP's additional CDB, variable-length CDBs).
    Heap(Vec<u8>),
}

impl CdbBytes {
    /// Bytes held inline.
    pub const INLINE: usize = 32;
}

impl Default for CdbBytes {
    fn default() -> Self {
        CdbBytes::Inline {
            len: 0,
            bytes: [0; CdbBytes::INLINE],
        }
    }
}

impl Deref for CdbBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            CdbBytes::Inline { len, bytes } => &bytes[..usize::from(*len)],
            CdbBytes::Heap(v) => v,
        }
    }
}

impl From<&[u8]> for CdbBytes {
    fn from(cdb: &[u8]) -> Self {
        cdb.iter().copied().collect()
    }
}

impl From<Vec<u8>> for CdbBytes {
    fn from(cdb: Vec<u8>) -> Self {
        if cdb.len() <= CdbBytes::INLINE {
            cdb.into_iter().collect()
        } else {
            CdbBytes::Heap(cdb)
        }
    }
}

impl FromIterator<u8> for CdbBytes {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> Self {
        let mut bytes = [0; CdbBytes::INLINE];
        let mut len = 0;
        let mut it = iter.into_iter();
        for b in it.by_ref() {
            if len == CdbBytes::INLINE {
                let mut v = bytes.to_vec();
                v.push(b);
                v.extend(it);
                return CdbBytes::Heap(v);
            }
            bytes[len] = b;
            len += 1;
        }
        CdbBytes::Inline {
            len: len as u8,
            bytes,
        }
    }
}

impl fmt::Debug for CdbBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x?}", &**self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_cdbs_are_inline_and_long_ones_whole() {
        let ten: CdbBytes = [0x28u8, 0, 0, 0, 0, 7, 0, 0, 1, 0].as_slice().into();
        assert!(matches!(ten, CdbBytes::Inline { len: 10, .. }));
        assert_eq!(&*ten, &[0x28, 0, 0, 0, 0, 7, 0, 0, 1, 0]);
        let exact: CdbBytes = (0..32u8).collect();
        assert!(matches!(exact, CdbBytes::Inline { len: 32, .. }));
        let long: CdbBytes = (0..40u8).collect();
        assert!(matches!(long, CdbBytes::Heap(_)));
        assert_eq!(&*long, (0..40u8).collect::<Vec<_>>().as_slice());
        assert!(CdbBytes::default().is_empty());
        assert_eq!(
            format!("{ten:?}"),
            "[28, 00, 00, 00, 00, 07, 00, 00, 01, 00]"
        );
    }
}
