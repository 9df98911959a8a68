//! libFuzzer's entry for the `ctl_host` target; the checks are [`srp_stack_fuzz::ctl_host`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::ctl_host::run(data));
