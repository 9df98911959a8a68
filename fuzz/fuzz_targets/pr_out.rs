//! libFuzzer's entry for the `pr_out` target; the checks are [`srp_stack_fuzz::pr_out`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::pr_out::run(data));
