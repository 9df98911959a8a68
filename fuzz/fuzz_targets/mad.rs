//! libFuzzer's entry for the `mad` target; the checks are [`srp_stack_fuzz::mad`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::mad::run(data));
