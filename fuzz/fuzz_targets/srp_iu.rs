//! libFuzzer's entry for the `srp_iu` target; the checks are [`srp_stack_fuzz::srp_iu`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::srp_iu::run(data));
