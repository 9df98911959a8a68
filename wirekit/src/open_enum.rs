//! `open_enum!`: wire code points as enums that never lose a value.
//!
//! A code point read from the wire that this implementation does not know becomes
//! `Unknown(raw)` and is written back unchanged, so a parse/emit round trip is lossless
//! (smoltcp's `enum_with_unknown!`). `Unknown(v)` with a `v` that names a known variant is
//! representable but never produced by `from`; callers should not build it.

/// Declares an open enum over an integer representation.
///
/// ```
/// wirekit::open_enum! {
///     /// Example code point.
///     pub enum Colour(u8) {
///         /// Red.
///         Red = 1,
///         /// Blue.
///         Blue = 2,
///     }
/// }
/// assert_eq!(Colour::from(2u8), Colour::Blue);
/// assert_eq!(Colour::from(9u8), Colour::Unknown(9));
/// assert_eq!(u8::from(Colour::Unknown(9)), 9);
/// ```
#[macro_export]
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident($repr:ty) {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A code point this implementation does not know; kept so it survives a round trip.
            Unknown($repr),
        }

        impl ::core::convert::From<$repr> for $name {
            fn from(value: $repr) -> Self {
                $( if value == $value { return $name::$variant; } )+
                $name::Unknown(value)
            }
        }

        impl ::core::convert::From<$name> for $repr {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }

        impl $name {
            /// Whether this is a code point the implementation knows.
            pub fn is_known(self) -> bool {
                !matches!(self, $name::Unknown(_))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::open_enum! {
        /// Test enum.
        pub enum Sample(u16) {
            /// A.
            A = 0x0100,
            /// B.
            B = 0xff00,
        }
    }

    #[test]
    fn known_values_map_both_ways() {
        assert_eq!(Sample::from(0x0100u16), Sample::A);
        assert_eq!(u16::from(Sample::B), 0xff00);
        assert!(Sample::A.is_known());
    }

    #[test]
    fn unknown_values_survive() {
        let s = Sample::from(0x1234u16);
        assert_eq!(s, Sample::Unknown(0x1234));
        assert!(!s.is_known());
        assert_eq!(u16::from(s), 0x1234);
    }
}
