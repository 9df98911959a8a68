//! `debug_as_hex!`: `Debug` for identifier newtypes in hex, the way operators read them
//! (`Tid(0x10)`, not `Tid(16)`), so `srpctl decode` output matches packet dumps.

/// Implements `Debug` as `Name(0x…)` for tuple newtypes over an integer.
///
/// ```
/// struct Tid(u64);
/// wirekit::debug_as_hex!(Tid);
/// assert_eq!(format!("{:?}", Tid(16)), "Tid(0x10)");
/// ```
#[macro_export]
macro_rules! debug_as_hex {
    ($($ty:ident),+ $(,)?) => {
        $(
            impl ::core::fmt::Debug for $ty {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    write!(f, concat!(stringify!($ty), "({:#x})"), self.0)
                }
            }
        )+
    };
}

/// Bytes shown as one hex string (`c2000000 00010002 …`, a space every four bytes), for
/// `Debug` and `Display` of byte arrays in logs: a 256-byte MAD reads as a line, not as
/// 256 numbers. Trailing zeros are summarised (`… +140 zero bytes`).
///
/// ```
/// assert_eq!(
///     format!("{:?}", wirekit::HexBytes(&[0xc2, 0, 0, 0, 1, 0, 0, 0])),
///     "c2000000 01 +3 zero bytes"
/// );
/// assert_eq!(format!("{}", wirekit::HexBytes(&[])), "(empty)");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HexBytes<'a>(pub &'a [u8]);

impl ::core::fmt::Display for HexBytes<'_> {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        let used = self.0.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        if self.0.is_empty() {
            return f.write_str("(empty)");
        }
        for (i, b) in self.0[..used].iter().enumerate() {
            if i > 0 && i % 4 == 0 {
                f.write_str(" ")?;
            }
            write!(f, "{b:02x}")?;
        }
        let zeros = self.0.len() - used;
        match (used, zeros) {
            (_, 0) => Ok(()),
            (0, n) => write!(f, "{n} zero bytes"),
            (_, n) => write!(f, " +{n} zero bytes"),
        }
    }
}

impl ::core::fmt::Debug for HexBytes<'_> {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        ::core::fmt::Display::fmt(self, f)
    }
}
