//! libFuzzer's entry for the `roce_packet` target; the checks are [`srp_stack_fuzz::roce_packet`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| srp_stack_fuzz::roce_packet::run(data));
