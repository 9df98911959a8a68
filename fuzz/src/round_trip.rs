//! What every parser target checks of a value that parsed: it emits (into a buffer
//! pre-filled with 0xa5, exactly `buffer_len` bytes), and the emitted bytes parse back to
//! the same value.

use wirekit::WireRepr;

/// Emits `v` and checks the bytes parse back to `v`.
pub fn round_trip<'a, T: WireRepr<'a> + PartialEq + core::fmt::Debug>(v: &T, buf: &'a mut Vec<u8>) {
    buf.clear();
    buf.resize(v.buffer_len(), 0xa5);
    let n = v.emit(buf).expect("a parsed value must emit");
    assert_eq!(n, v.buffer_len(), "emit wrote other than buffer_len bytes");
    let buf: &'a Vec<u8> = buf;
    let back = T::parse(&buf[..n]).expect("emitted bytes must parse");
    assert_eq!(&back, v);
}

/// If a type parses the data, the value must round-trip.
#[macro_export]
macro_rules! check {
    ($data:expr, $($t:ty),+ $(,)?) => {
        $( if let Ok(v) = <$t>::parse($data) {
            $crate::round_trip::round_trip(&v, &mut Vec::new());
        } )+
    };
}
