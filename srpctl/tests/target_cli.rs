//! The control-socket commands as an operator runs them, against the real
//! `srpctl target run` on loopback 127.0.111.x: `target iocs|ports|luns|sessions --json`
//! parse and describe the target; `ioc disable --drop` / `ioc enable` and `port down|up`
//! switch it, and the lists show it; errors name what is wrong and exit non-zero.

#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
mod process;

use common::TempDir;
use process::TargetProcess;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `srpctl target <args> -c <config>`; its stdout, or its stderr on failure.
fn srpctl(config: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_srpctl"))
        .arg("target")
        .args(args)
        .arg("-c")
        .arg(config)
        .output()
        .expect("run srpctl");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("UTF-8");
    if out.status.success() {
        Ok(text(out.stdout))
    } else {
        Err(text(out.stderr))
    }
}

fn json(config: &Path, what: &str) -> Value {
    let out = srpctl(config, &[what, "--json"]).expect(what);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what} --json: {e}: {out}"))
}

#[test]
fn operators_list_and_switch_a_running_target() {
    let dir = TempDir::new("target-cli");
    let cfg = dir.path().join("target.toml");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300e0e000\"\nname = \"cli\"\n\
         control_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.111.1\"\n\n\
         [[port]]\nname = \"p1\"\naddress = \"127.0.111.2\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300e0e001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300e0e002\"\nports = [\"p1\"]\n\
         exports = {{ 3 = \"vol\" }}\nallow = [\"any\"]\n",
        dir.path().join("ctl.sock").display()
    );
    std::fs::write(&cfg, text).expect("write config");
    let _target = TargetProcess::start(&cfg);

    let iocs = json(&cfg, "iocs");
    assert_eq!(iocs[0]["name"], "ioc-a");
    assert_eq!(iocs[0]["guid"], "0x0002c90300e0e001");
    assert_eq!(iocs[1]["enabled"], true);
    let ports = json(&cfg, "ports");
    assert_eq!(ports[1]["address"], "127.0.111.2:4791");
    assert_eq!(ports[0]["active"], true);
    assert!(
        ports[0]["resources"]["qps"].as_u64().expect("qps") >= 1,
        "GSI QP"
    );
    let luns = json(&cfg, "luns");
    assert_eq!(luns[0]["name"], "vol");
    assert_eq!(luns[0]["blocks"], 2048);
    assert_eq!(luns[0]["naa"].as_str().expect("naa").len(), 32);
    assert_eq!(json(&cfg, "sessions"), Value::Array(vec![]));

    // Tables for people.
    let table = srpctl(&cfg, &["iocs"]).expect("iocs");
    assert!(table.starts_with("IOC"), "{table}");
    assert!(
        table.contains("ioc-b") && table.contains("enabled"),
        "{table}"
    );

    let out = srpctl(&cfg, &["ioc", "disable", "ioc-b", "--drop"]).expect("disable");
    assert_eq!(out, "ioc ioc-b: disabled; 0 session(s) dropped\n");
    assert_eq!(json(&cfg, "iocs")[1]["enabled"], false);
    srpctl(&cfg, &["ioc", "enable", "ioc-b"]).expect("enable");
    assert_eq!(json(&cfg, "iocs")[1]["enabled"], true);
    srpctl(&cfg, &["port", "down", "p1"]).expect("down");
    assert_eq!(json(&cfg, "ports")[1]["active"], false);
    srpctl(&cfg, &["port", "up", "p1"]).expect("up");
    assert_eq!(json(&cfg, "ports")[1]["active"], true);

    let err = srpctl(&cfg, &["ioc", "disable", "ioc-z"]).expect_err("unknown IOC");
    assert!(err.contains("no IOC named \"ioc-z\""), "{err}");
    let err = srpctl(&cfg, &["port", "down", "p7"]).expect_err("unknown port");
    assert!(err.contains("no port named \"p7\""), "{err}");
    let gone = dir.path().join("nobody.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_srpctl"))
        .args(["target", "iocs", "-s"])
        .arg(&gone)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach the target's control socket"),
        "{err}"
    );
}
