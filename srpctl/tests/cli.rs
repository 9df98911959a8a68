//! The `srpctl` binary as an operator runs it.

mod run;

use run::srpctl;

#[test]
fn version_and_help() {
    let (ok, out, _) = srpctl(&["--version"]);
    assert!(ok);
    assert!(out.starts_with("srpctl "), "{out}");
    let (ok, out, _) = srpctl(&["--help"]);
    assert!(ok);
    assert!(out.contains("decode") && out.contains("demo"), "{out}");
}

/// The README's main command: a target and a host on loopback (127.0.200.x), two paths,
/// data written through one, read back through both and found in the target's file.
#[test]
fn the_live_demo_verifies_io_end_to_end() {
    let (ok, out, err) = srpctl(&["demo"]);
    assert!(ok, "demo failed: {err}\n{out}");
    assert!(out.contains("2 session(s)"), "{out}");
    assert!(out.contains("every byte matches"), "{out}");
    assert!(
        out.contains("its backing file holds the same bytes"),
        "{out}"
    );
    assert!(out.contains("nothing left behind"), "{out}");
}

#[test]
fn demo_checks_every_message() {
    let (ok, out, err) = srpctl(&["demo", "--wire", "--dump"]);
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

#[test]
fn target_check_shows_identity_or_every_error() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../srp-target/examples/target.toml"
    );
    let (ok, out, err) = srpctl(&["target", "check", "-c", example]);
    assert!(ok, "the shipped example must validate: {err}");
    assert!(out.contains("lun vol1 (naa.6001405"), "{out}");
    assert!(
        out.contains("ioc ioc-b: enabled target port 0x00000000000000010002c90300a1b2c4"),
        "{out}"
    );
    assert!(out.contains("  LUN 7 = scratch"), "{out}");

    let dir = std::env::temp_dir().join(format!("srpctl-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[target]\nnode_guid = \"0x1\"\n[[port]]\nname = \"p0\"\naddress = \"127.0.0.1\"\n\
         [[lun]]\nname = \"v\"\nram = true\n\
         [[ioc]]\nname = \"a\"\nguid = \"0x2\"\nports = [\"p9\"]\nexports = { 0 = \"w\" }\n",
    )
    .expect("write config");
    let (ok, _, err) = srpctl(&["target", "check", "-c", bad.to_str().expect("utf-8 path")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok);
    for needle in [
        "lun \"v\".size: missing",
        "ioc[0].ports[0]: port \"p9\" is not defined (defined: p0)",
        "ioc[0].exports.0: LUN \"w\" is not defined (defined: v)",
        "ioc[0].allow: missing",
        "not valid; nothing would start",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
}
