//! The `srpctl` binary as an operator runs it.

use std::process::Command;

fn srpctl(args: &[&str]) -> (bool, String, String) {
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

#[test]
fn version_and_help() {
    let (ok, out, _) = srpctl(&["--version"]);
    assert!(ok);
    assert!(out.starts_with("srpctl "), "{out}");
    let (ok, out, _) = srpctl(&["--help"]);
    assert!(ok);
    assert!(out.contains("decode") && out.contains("demo"), "{out}");
}

#[test]
fn demo_checks_every_message() {
    let (ok, out, err) = srpctl(&["demo", "--dump"]);
    assert!(ok, "demo failed: {err}\n{out}");
    assert!(out.contains("LOGICAL BLOCK ADDRESS OUT OF RANGE"), "{out}");
    assert!(out.contains("11 messages"), "{out}");
    assert!(!out.contains("differs"), "{out}");
    assert!(
        out.contains("0000: c1"),
        "hex dumps expected with --dump:\n{out}"
    );
}

#[test]
fn decode_reports_fields_and_errors() {
    let (ok, out, _) = srpctl(&["decode", "cdb", "--hex", "28 00 00 00 10 00 00 00 08 00"]);
    assert!(ok);
    assert!(out.contains("Read"), "{out}");
    // An SRP_RSP cut short: the error names the IU and the sizes.
    let (ok, _, err) = srpctl(&["decode", "iu", "--hex", "c1 00 00 00 00 00 00 01"]);
    assert!(!ok);
    assert!(
        err.contains("SRP_RSP") && err.contains("need 36 bytes, have 8"),
        "{err}"
    );
    let (ok, _, err) = srpctl(&["decode", "mad"]);
    assert!(!ok);
    assert!(err.contains("no input"), "{err}");
}
