//! Reading and writing the fixed-size part of a message: the two helpers every wire module
//! needs, with the shortfall reported as data so each module maps it into its own error.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// A buffer shorter than the message part asked of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Short {
    /// Bytes needed.
    pub need: usize,
    /// Bytes available.
    pub have: usize,
}

/// Copies the fixed part `T` from the start of `buf`.
pub fn read_fixed<T: FromBytes + KnownLayout + Immutable>(buf: &[u8]) -> Result<T, Short> {
    T::read_from_prefix(buf).map(|(t, _)| t).map_err(|_| Short {
        need: size_of::<T>(),
        have: buf.len(),
    })
}

/// Writes `fixed` at the start of `buf`; returns its size.
pub fn write_fixed<T: IntoBytes + Immutable>(fixed: &T, buf: &mut [u8]) -> Result<usize, Short> {
    let need = size_of::<T>();
    let have = buf.len();
    let out = buf.get_mut(..need).ok_or(Short { need, have })?;
    out.copy_from_slice(fixed.as_bytes());
    Ok(need)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::network_endian::U32;

    #[test]
    fn reads_and_writes_prefixes_and_reports_shortfalls() {
        assert_eq!(
            read_fixed::<U32>(&[0, 0, 1, 2, 9]).map(|v| v.get()),
            Ok(0x0102)
        );
        assert_eq!(read_fixed::<U32>(&[0, 1]), Err(Short { need: 4, have: 2 }));
        let mut buf = [0xa5u8; 6];
        assert_eq!(write_fixed(&U32::new(0x0102_0304), &mut buf), Ok(4));
        assert_eq!(buf, [1, 2, 3, 4, 0xa5, 0xa5]);
        assert_eq!(
            write_fixed(&U32::new(1), &mut [0u8; 3]),
            Err(Short { need: 4, have: 3 })
        );
    }
}
