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
