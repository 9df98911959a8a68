//! libFuzzer's entry for the `ctl_target` target; the checks are [`srp_stack_fuzz::ctl_target`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::ctl_target::run(data));
