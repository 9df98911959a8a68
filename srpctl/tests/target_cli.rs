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

/// The store guards as an operator meets them (issue #29, Deliver 4), on 127.0.163.x: the
/// running target's image is reported by `target check` as served by it, not an error; a
/// second configuration naming the same image fails the check and cannot start, naming the
/// process that holds it; the image was created 0600.
#[test]
fn a_served_image_is_the_running_targets_and_nobody_elses() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("target-guard");
    let img = dir.path().join("vol.img");
    let config = |name: &str, addr: &str, guid: &str| {
        let cfg = dir.path().join(format!("{name}.toml"));
        let text = format!(
            "[target]\nnode_guid = \"{guid}0\"\nname = \"{name}\"\n\
             control_socket = \"{}\"\nstate_dir = \"{}\"\n\n\
             [[port]]\nname = \"p0\"\naddress = \"{addr}\"\n\n\
             [[lun]]\nname = \"vol\"\nfile = \"{}\"\nsize = \"1MiB\"\n\n\
             [[ioc]]\nname = \"ioc-a\"\nguid = \"{guid}1\"\nports = [\"p0\"]\n\
             exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
            dir.path().join(format!("{name}.sock")).display(),
            dir.path().join(format!("{name}-state")).display(),
            img.display()
        );
        std::fs::write(&cfg, text).expect("write config");
        cfg
    };
    let first = config("first", "127.0.163.1", "0x0002c90300e3e00");
    let second = config("second", "127.0.163.2", "0x0002c90300e3e10");
    let check = |cfg: &Path| {
        Command::new(env!("CARGO_BIN_EXE_srpctl"))
            .args(["target", "check", "-c"])
            .arg(cfg)
            .output()
            .expect("srpctl target check")
    };
    let before = check(&first);
    assert!(before.status.success());
    assert!(
        String::from_utf8_lossy(&before.stderr).contains("the target creates it (mode 0600)"),
        "{}",
        String::from_utf8_lossy(&before.stderr)
    );
    let target = TargetProcess::start(&first);
    let mode = std::fs::metadata(&img).expect("image").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the image was created {mode:o}");
    // The running instance's own store: a note, not an error.
    let out = check(&first);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("held by the running target of this configuration (pid"),
        "{said}"
    );
    // Another configuration naming it: the check fails, naming the holder; it cannot start.
    let out = check(&second);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("locked by srpctl (pid"), "{said}");
    let run = Command::new("timeout")
        .args(["20", env!("CARGO_BIN_EXE_srpctl"), "target", "run", "-c"])
        .arg(&second)
        .output()
        .expect("a second target");
    let said = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(
        !run.status.success(),
        "a second target started on a served image: {said}"
    );
    assert!(said.contains("locked by srpctl (pid"), "{said}");
    drop(target);
    let out = check(&second);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
