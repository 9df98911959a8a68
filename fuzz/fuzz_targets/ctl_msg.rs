//! libFuzzer's entry for the `ctl_msg` target; the checks are [`srp_stack_fuzz::ctl_msg`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::ctl_msg::run(data));
