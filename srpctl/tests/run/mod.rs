//! Running the `srpctl` binary from a test: exit status, stdout and stderr.
#![allow(dead_code, unreachable_pub)]

use std::process::Command;

/// Runs `srpctl <args>`; whether it succeeded, its stdout and its stderr.
pub fn srpctl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_srpctl"))
        .args(args)
        .output()
        .expect("run srpctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
