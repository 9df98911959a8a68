//! The fuzz targets of the SRP stack, as a library: each module's `run(&[u8])` is one
//! target's whole check. libFuzzer drives them through the thin binaries in
//! `fuzz_targets/` (nightly, `cargo fuzz`, `scripts/fuzz-smoke.sh`); `tests/corpus.rs`
//! replays every committed corpus file through the same functions on stable, so the
//! corpus is a regression suite in the ordinary test run.
//!
//! Parser targets (any bytes parse or are refused; whatever parses re-emits to the same
//! value): [`srp_iu`], [`scsi_cdb`], [`scsi_sense`], [`mad`], [`roce_packet`], [`ctl_msg`]
//! (the access layer's fixed-layout control formats).
//!
//! Stateful targets (the input is a script of operations on the real sans-IO code, with
//! invariants checked after every step): [`target_channel`] (the target's SRP channel
//! core), [`pr_out`] (persistent reservations from six I_T nexuses), [`lu_data`] (UNMAP,
//! WRITE SAME and MODE SELECT against a shadow of the medium and the mode pages),
//! [`ctl_target`] and [`ctl_host`] (the two control services, JSON bodies, behind the
//! socket framing), [`config_target`] and [`config_host`] (the two TOML configs).
//!
//! Shared: [`input`] (the input as a script of choices), [`round_trip`] (emit, parse,
//! compare), [`scsi_lu`] (a RAM logical unit and the checks every command's outcome passes),
//! [`ctl_frame`] (a control socket connection, sans-IO), [`toml_gen`] (TOML-ish text from a
//! config's schema).
#![forbid(unsafe_code)]

pub mod ctl_frame;
pub mod input;
pub mod round_trip;
pub mod scsi_lu;
pub mod toml_gen;

pub mod ctl_msg;
pub mod mad;
pub mod roce_packet;
pub mod scsi_cdb;
pub mod scsi_sense;
pub mod srp_iu;

pub mod config_host;
pub mod config_target;
pub mod ctl_host;
pub mod ctl_target;
pub mod lu_data;
pub mod pr_out;
pub mod target_channel;

/// A target's whole check of one input.
pub type Target = fn(&[u8]);

/// Every target by name, as `fuzz/corpus/<name>/` and `scripts/fuzz-smoke.sh` name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("srp_iu", srp_iu::run),
    ("scsi_cdb", scsi_cdb::run),
    ("scsi_sense", scsi_sense::run),
    ("mad", mad::run),
    ("roce_packet", roce_packet::run),
    ("ctl_msg", ctl_msg::run),
    ("target_channel", target_channel::run),
    ("pr_out", pr_out::run),
    ("lu_data", lu_data::run),
    ("ctl_target", ctl_target::run),
    ("ctl_host", ctl_host::run),
    ("config_target", config_target::run),
    ("config_host", config_host::run),
];
