//! libFuzzer's entry for the `lu_data` target; the checks are [`srp_stack_fuzz::lu_data`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::lu_data::run(data));
