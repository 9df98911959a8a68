//! Transport-free SCSI: what a target executes and an initiator builds, knowing nothing of SRP,
//! InfiniBand or RDMA. Wire formats and parsing only; executing commands is the target's job.
//!
//! Contract (as every wire type in the stack, see [`wirekit::WireRepr`]): `parse` never
//! panics on any input and names the SPC response for what it rejects; `emit` writes every
//! byte, reserved ones as zero, and fails rather than panics on a short buffer or a value
//! its field cannot carry.
//!
//! Modules:
//! - [`lun`]: SAM LUN encoding ([`Lun`]);
//! - [`units`]: [`Lba`], [`BlockCount`];
//! - [`status`]: SAM [`Status`];
//! - [`sense`]: sense keys, [`SenseCode`] constants tested against SPC-4 Annex D, fixed and
//!   descriptor sense data ([`Sense`]);
//! - [`cdb_bytes`]: [`CdbBytes`], a CDB held inline (up to 32 bytes) as transports pass it;
//! - [`cdb`]: the [`OPCODES`] table, [`Command`] parse/emit with [`CdbError`] naming the
//!   sense to return, and REPORT SUPPORTED OPERATION CODES parameter data;
//! - [`copy`]: third-party copy parameter data (EXTENDED COPY descriptors, ODX ranges).
#![deny(unsafe_code)]
// A Windows kernel driver has no `std`: this crate needs only `core` and `alloc` (its
// tests use `std`). `x86_64-unknown-none`, a target without `std`, builds it in the test run.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

/// The four wire tests of STYLE.md for one known vector: `name: Type, BYTES, value`.
#[cfg(test)]
macro_rules! wire_tests {
    ($name:ident: $ty:ty, $bytes:expr, $value:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            use wirekit::wire_repr::check;

            #[test]
            fn decodes_known_bytes() {
                check::decodes(&$bytes, &$value);
            }

            #[test]
            fn emits_known_bytes() {
                check::emits(&$value, &$bytes);
            }

            #[test]
            fn round_trips() {
                check::round_trips(&$value, &mut Vec::new());
            }

            #[test]
            fn truncated_errors() {
                check::truncation_errors::<$ty>(&$bytes);
            }
        }
    };
}

pub mod cdb;
pub mod cdb_bytes;
pub mod copy;
pub mod lun;
pub mod sense;
pub mod status;
pub mod units;

pub use cdb::{CdbError, Command, OPCODES, OpcodeInfo};
pub use cdb_bytes::CdbBytes;
pub use lun::{Lun, LunError};
pub use sense::{Sense, SenseCode, SenseError, SenseKey};
pub use status::Status;
pub use units::{BlockCount, Lba};
