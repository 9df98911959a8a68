//! The copy manager (SPC-4 5.16, SBC-4 4.26): copy offload between logical units of this
//! target, without the data crossing the fabric.
//!
//! - EXTENDED COPY (LID1) with block to block segments, CSCDs named by NAA designator
//!   (`xcopy.rs`) — what VMware VAAI "XCOPY" and `sg_xcopy` send;
//! - RECEIVE COPY RESULTS: operating parameters, copy status, failure details
//!   (`results.rs`);
//! - POPULATE TOKEN / WRITE USING TOKEN / RECEIVE ROD TOKEN INFORMATION (`token.rs`) — what
//!   Windows ODX sends;
//! - the Third-party Copy VPD page (`vpd.rs`) and the INQUIRY 3PC bit;
//! - source ranges watched while they are copied or represented by a token (`watch.rs`),
//!   so a copy is of one point in time or fails, never a mix;
//! - which LUs a copy may name, and how many copies run at once (`manager.rs`).
//!
//! Copies run on the backend worker that took the command, as any command does (the
//! workers' per-LU share keeps other LUs' I/O moving), in [`COPY_CHUNK_BYTES`] steps between
//! which a task management abort stops them; one command's work is bounded by
//! [`MAX_SEGMENT_BYTES`] per segment and [`MAX_SEGMENT_DESCRIPTORS`] segments, or by one
//! token's [`token::MAX_TOKEN_BYTES`].

pub mod manager;
pub mod results;
pub mod token;
pub(crate) mod vpd;
pub(crate) mod watch;
pub(crate) mod xcopy;

pub use manager::CopyManager;

use super::store::MediumWrites;
use super::{Exec, LogicalUnit, Nexus};
use scsi::SenseCode;
use scsi::cdb::copy::{SA_EXTENDED_COPY_LID1, SA_POPULATE_TOKEN, SA_WRITE_USING_TOKEN};
use scsi::cdb::{CopyIn, CopyOut};

/// MAXIMUM CSCD DESCRIPTOR COUNT of one EXTENDED COPY.
pub const MAX_CSCD_DESCRIPTORS: u16 = 16;
/// MAXIMUM SEGMENT DESCRIPTOR COUNT of one EXTENDED COPY.
pub const MAX_SEGMENT_DESCRIPTORS: u16 = 16;
/// MAXIMUM DESCRIPTOR LIST LENGTH in bytes (16 CSCDs and 16 segments fit).
pub const MAX_DESCRIPTOR_LIST_BYTES: u32 = 1024;
/// MAXIMUM SEGMENT LENGTH in bytes: 65535 blocks of 4096 bytes fit, as LIO advertises.
pub const MAX_SEGMENT_BYTES: u32 = 256 << 20;
/// OPTIMAL TRANSFER COUNT of a token, in bytes (VPD 8Fh).
pub const OPTIMAL_TRANSFER_BYTES: u32 = 64 << 20;
/// Bytes moved per step of a copy.
pub const COPY_CHUNK_BYTES: usize = 1 << 20;

/// Whether `cdb` is a copy (THIRD-PARTY COPY OUT): it reads and writes LUs other than its
/// own, so it runs on a backend worker even when its own LU never blocks.
pub fn moves_between_lus(cdb: &[u8]) -> bool {
    cdb.first() == Some(&0x83)
}

/// THIRD-PARTY COPY OUT.
/// WRITE USING TOKEN writes this LU through `writes` (its rule's); EXTENDED COPY opens
/// its destinations' own (`rules::copy_target_writes`).
pub(crate) fn copy_out(
    lu: &LogicalUnit,
    nexus: &Nexus<'_>,
    c: &CopyOut,
    dout: &[u8],
    writes: Option<&MediumWrites<'_>>,
) -> Exec {
    match c.action {
        SA_EXTENDED_COPY_LID1 => xcopy::extended_copy(lu, nexus, c, dout),
        SA_POPULATE_TOKEN => token::populate_token(lu, nexus, c, dout),
        SA_WRITE_USING_TOKEN => token::write_using_token(lu, nexus, c, dout, super::door(writes)?),
        // The opcode table routes no other service action here.
        _ => Err(SenseCode::INVALID_FIELD_IN_CDB.into()),
    }
}

/// THIRD-PARTY COPY IN.
pub(crate) fn copy_in(lu: &LogicalUnit, nexus: &Nexus<'_>, c: &CopyIn, din: &mut Vec<u8>) -> Exec {
    results::receive(lu, nexus.it_nexus(), c, din)
}
