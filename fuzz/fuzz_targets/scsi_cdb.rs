//! libFuzzer's entry for the `scsi_cdb` target; the checks are [`srp_stack_fuzz::scsi_cdb`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::scsi_cdb::run(data));
