//! libFuzzer's entry for the `config_target` target; the checks are [`srp_stack_fuzz::config_target`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::config_target::run(data));
