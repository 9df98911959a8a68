//! The contract every wire type in the stack follows, and the assertions behind its four tests.
//!
//! A wire type is a validated representation (`Repr`, smoltcp's term) over zerocopy structs:
//! - [`WireRepr::parse`] never panics, whatever the input; it accepts trailing bytes after the
//!   message (IUs arrive in receive buffers and CM private data larger than themselves) and
//!   rejects anything shorter than the message its own length fields describe;
//! - [`WireRepr::emit`] writes every byte of the message, reserved bytes included, and fails
//!   rather than panics when the buffer is smaller than [`WireRepr::buffer_len`].
//!
//! The [`check`] module holds the four assertions STYLE.md asks of every type, so each test
//! next to a type is one line that names what it checks.

/// A message that can be parsed from and emitted to its exact wire bytes.
pub trait WireRepr<'a>: Sized {
    /// The error of the module that defines the type.
    type Error: core::fmt::Debug;

    /// Parses and validates the message at the start of `buf`.
    fn parse(buf: &'a [u8]) -> Result<Self, Self::Error>;

    /// The number of bytes [`WireRepr::emit`] writes.
    fn buffer_len(&self) -> usize;

    /// Writes the message to the start of `buf`; returns the number of bytes written.
    fn emit(&self, buf: &mut [u8]) -> Result<usize, Self::Error>;
}

/// Assertions for the four wire tests: known bytes decode, emit into a 0xa5-filled buffer
/// reproduces them, parse(emit(x)) == x, and every truncation errors.
pub mod check {
    extern crate alloc;
    use super::WireRepr;
    use alloc::vec;
    use core::fmt::Debug;

    /// Known bytes decode to `expected`.
    pub fn decodes<'a, T: WireRepr<'a> + PartialEq + Debug>(bytes: &'a [u8], expected: &T) {
        match T::parse(bytes) {
            Ok(got) => assert_eq!(
                &got, expected,
                "decoded value differs from the expected one"
            ),
            Err(e) => panic!("known bytes failed to parse: {e:?}"),
        }
    }

    /// Emitting `repr` into a buffer pre-filled with 0xa5 reproduces `bytes` exactly, writes
    /// `bytes.len()` bytes, and leaves the rest of the buffer alone.
    pub fn emits<'a, T: WireRepr<'a> + Debug>(repr: &T, bytes: &[u8]) {
        assert_eq!(
            repr.buffer_len(),
            bytes.len(),
            "buffer_len disagrees with the known bytes"
        );
        let mut buf = vec![0xa5u8; bytes.len() + 8];
        let n = repr
            .emit(&mut buf)
            .expect("emit into a large enough buffer");
        assert_eq!(n, bytes.len(), "emit wrote a different number of bytes");
        for (i, (got, want)) in buf[..n].iter().zip(bytes).enumerate() {
            assert_eq!(
                got, want,
                "byte {i} differs: emitted {got:#04x}, expected {want:#04x}"
            );
        }
        assert!(
            buf[n..].iter().all(|&b| b == 0xa5),
            "emit wrote past the message"
        );
        if n > 0 {
            let mut short = vec![0xa5u8; n - 1];
            assert!(
                repr.emit(&mut short).is_err(),
                "emit into a short buffer must fail"
            );
        }
    }

    /// `parse(emit(repr)) == repr`. `buf` holds the emitted bytes, so types that borrow from
    /// their buffer can be checked too.
    pub fn round_trips<'a, T>(repr: &T, buf: &'a mut alloc::vec::Vec<u8>)
    where
        T: WireRepr<'a> + PartialEq + Debug,
    {
        buf.clear();
        buf.resize(repr.buffer_len(), 0);
        let n = repr.emit(buf).expect("emit");
        let buf: &'a alloc::vec::Vec<u8> = buf;
        let back = T::parse(&buf[..n]).expect("parse what we emitted");
        assert_eq!(&back, repr, "round trip changed the value");
    }

    /// Every strict prefix of the (minimal) known bytes is rejected.
    pub fn truncation_errors<'a, T: WireRepr<'a> + Debug>(bytes: &'a [u8]) {
        for n in 0..bytes.len() {
            if let Ok(v) = T::parse(&bytes[..n]) {
                panic!(
                    "a {n}-byte prefix of a {}-byte message parsed as {v:?}",
                    bytes.len()
                );
            }
        }
    }
}
