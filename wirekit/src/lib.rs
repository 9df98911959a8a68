//! The wire-format toolkit every layer shares, and nothing else: it knows no protocol.
//!
//! - [`open_enum!`]: code points as enums whose unknown values survive a round trip;
//! - [`WireRepr`]: the parse/emit contract of every wire type (parse never panics, emit
//!   writes every byte), and [`wire_repr::check`], the assertions behind the four tests
//!   each wire type carries.
//!
//! - [`debug_as_hex!`]: `Debug` in hex for identifier newtypes; [`HexBytes`]: byte arrays
//!   as one hex string in logs;
//! - [`fixed`]: reading and writing a message's fixed-size part.
//!
//! It sits under `hca`, `scsi`, `access-layer` and `srp` so their wire modules read alike.
#![deny(unsafe_code)]
#![no_std]

mod debug_hex;
pub mod fixed;
mod open_enum;
pub mod wire_repr;

pub use debug_hex::HexBytes;
pub use fixed::{Short, read_fixed, write_fixed};
pub use wire_repr::WireRepr;
