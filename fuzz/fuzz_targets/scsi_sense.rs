//! libFuzzer's entry for the `scsi_sense` target; the checks are [`srp_stack_fuzz::scsi_sense`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::scsi_sense::run(data));
