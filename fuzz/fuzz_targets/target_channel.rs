//! libFuzzer's entry for the `target_channel` target; the checks are [`srp_stack_fuzz::target_channel`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::target_channel::run(data));
