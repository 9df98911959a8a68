//! libFuzzer's entry for the `config_host` target; the checks are [`srp_stack_fuzz::config_host`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::config_host::run(data));
