//! The host daemon's control-socket commands as an operator runs them, against real
//! `srpctl target run` and `srpctl host run` processes on loopback 127.0.142.x: the host
//! logs in to the configured portal at start; `sessions`/`disks` (tables and `--json`)
//! describe it; `login` reaches a second IOC from a second address (a second path of the
//! same multipath disk), `logout` takes paths away and the disk with its last one;
//! `host power suspend|resume` takes both sessions down and up again; refusals name the
//! reason and exit non-zero. Needs root and /dev/fuse.

#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
mod process;

use common::TempDir;
use process::{HostProcess, TargetProcess};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `srpctl <args> --socket <socket>`: stdout, or stderr on failure.
fn srpctl(socket: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_srpctl"))
        .args(args)
        .arg("--socket")
        .arg(socket)
        .output()
        .expect("run srpctl");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("UTF-8");
    if out.status.success() {
        Ok(text(out.stdout))
    } else {
        Err(text(out.stderr))
    }
}

fn json(socket: &Path, what: &str) -> Value {
    let out = srpctl(socket, &[what, "--json"]).expect(what);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what} --json: {e}: {out}"))
}

#[test]
fn operators_log_in_list_and_log_out_through_the_host_daemon() {
    let dir = TempDir::new("host-cli");
    let target_cfg = dir.path().join("target.toml");
    std::fs::write(
        &target_cfg,
        format!(
            "[target]\nnode_guid = \"0x0002c90300e2e000\"\nname = \"cli\"\nrdma_cm_port = 5597\n\
             control_socket = \"{}\"\n\n\
             [[port]]\nname = \"p0\"\naddress = \"127.0.142.1\"\n\n\
             [[port]]\nname = \"p1\"\naddress = \"127.0.142.4\"\n\n\
             [[lun]]\nname = \"vol\"\nram = true\nsize = \"8MiB\"\n\n\
             [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300e2e001\"\nports = [\"p0\"]\n\
             exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
             [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300e2e002\"\nports = [\"p1\"]\n\
             exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
            dir.path().join("target.sock").display()
        ),
    )
    .expect("write target config");
    let host_cfg = dir.path().join("host.toml");
    let disks = dir.path().join("disks");
    let socket = dir.path().join("host.sock");
    std::fs::write(
        &host_cfg,
        format!(
            "[host]\nname = \"cli\"\nnode_guid = \"0x0002c90300e2e100\"\n\
             disks_dir = \"{}\"\ncontrol_socket = \"{}\"\n\n\
             [[portal]]\naddress = \"127.0.142.1\"\nlocal = [\"127.0.142.2\"]\n",
            disks.display(),
            socket.display()
        ),
    )
    .expect("write host config");
    let check = Command::new(env!("CARGO_BIN_EXE_srpctl"))
        .args(["host", "check", "-c"])
        .arg(&host_cfg)
        .output()
        .expect("host check");
    assert!(check.status.success());
    let shown = String::from_utf8_lossy(&check.stdout);
    assert!(
        shown.contains("portal 127.0.142.1: from 127.0.142.2"),
        "{shown}"
    );

    let _target = TargetProcess::start(&target_cfg);
    let host = HostProcess::start(&host_cfg, &disks);

    let sessions = json(&socket, "sessions");
    assert_eq!(sessions.as_array().expect("list").len(), 1, "{sessions}");
    assert_eq!(sessions[0]["state"], "running");
    assert_eq!(sessions[0]["ioc_guid"], "0x0002c90300e2e001");
    assert_eq!(sessions[0]["ioc_name"], "ioc-a");
    assert_eq!(sessions[0]["local"], "127.0.142.2");
    let list = json(&socket, "disks");
    assert_eq!(list[0]["blocks"], 16384);
    assert_eq!(list[0]["block_size"], 512);
    let first = list[0]["name"].as_str().expect("name").to_owned();
    assert!(first.starts_with("naa."), "{first}");
    assert!(disks.join(&first).exists());

    // The failover drill writes: a disk open in another process is refused, untouched.
    let block_file = disks.join(&first);
    let before = std::fs::read(&block_file).expect("read the disk");
    let mut holder = Command::new("sh")
        .arg("-c")
        .arg("exec 3<\"$0\"; exec sleep 30")
        .arg(&block_file)
        .spawn()
        .expect("a process holding the disk");
    // Until the holder has the file open (a bounded wait on another process's state).
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while srp_target::backend::claim::open_elsewhere(&block_file).is_empty() {
        assert!(
            std::time::Instant::now() < end,
            "the holder never opened the disk"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let drill = Command::new(env!("CARGO_BIN_EXE_srpctl"))
        .args(["drill", "failover", "--socket"])
        .arg(&socket)
        .args(["--warmup", "0.2", "--fault-secs", "0.2", "--after", "0.2"])
        .output()
        .expect("drill");
    let _ = holder.kill();
    let _ = holder.wait();
    let said = String::from_utf8_lossy(&drill.stderr);
    assert!(
        !drill.status.success(),
        "the drill ran on a disk in use: {said}"
    );
    assert!(
        said.contains("in use") && said.contains("--destroy-data"),
        "{said}"
    );
    assert!(
        std::fs::read(&block_file).expect("read the disk") == before,
        "the disk was written"
    );

    // The second IOC, from a second local address: the same LU through another session
    // is a second path of the same disk.
    let out = srpctl(&socket, &["login", "127.0.142.4", "--local", "127.0.142.5"]).expect("login");
    assert!(out.contains("ioc-b"), "{out}");
    let list = json(&socket, "disks");
    assert_eq!(list.as_array().expect("list").len(), 1, "{list}");
    let paths = list[0]["paths"].as_array().expect("paths");
    assert_eq!(paths.len(), 2, "one LU, two paths: {list}");
    assert_eq!(paths[1]["ioc_name"], "ioc-b");
    assert_eq!(paths[1]["local"], "127.0.142.5");
    assert_eq!(
        std::fs::read_dir(&disks).expect("dir").count(),
        1,
        "one block file"
    );
    // Nothing left to log in to there; an address in use; a session that does not exist.
    let err = srpctl(&socket, &["login", "127.0.142.4", "--local", "127.0.142.6"])
        .expect_err("already logged in");
    assert!(err.contains("nothing to log in to"), "{err}");
    let err = srpctl(&socket, &["login", "127.0.142.1", "--local", "127.0.142.2"])
        .expect_err("address in use");
    assert!(err.contains("no free local address"), "{err}");
    let err = srpctl(&socket, &["logout", "9"]).expect_err("no such session");
    assert!(err.contains("no session 9"), "{err}");

    let table = srpctl(&socket, &["sessions"]).expect("table");
    assert!(table.starts_with("ID"), "{table}");
    assert!(
        table.contains("ioc-b") && table.contains("running"),
        "{table}"
    );

    // Logging out of a session takes its path away; the disk stays on the other one.
    // Power: both sessions down (driver, then HCA) and up again, as the operator runs it.
    let out = srpctl(&socket, &["host", "power", "suspend"]).expect("suspend");
    assert_eq!(out.matches(": suspended").count(), 2, "{out}");
    let sessions = json(&socket, "sessions");
    for s in sessions.as_array().expect("list") {
        assert_eq!(s["state"], "suspended", "{sessions}");
    }
    let err = srpctl(&socket, &["host", "power", "suspend"]).expect_err("suspended already");
    assert!(err.contains("suspended already"), "{err}");
    let out = srpctl(&socket, &["host", "power", "resume"]).expect("resume");
    assert_eq!(out.matches(": resumed").count(), 2, "{out}");
    let start = std::time::Instant::now();
    while json(&socket, "sessions")
        .as_array()
        .expect("list")
        .iter()
        .any(|s| s["state"] != "running")
    {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "logged in again after the resume"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let out = srpctl(&socket, &["logout", "2"]).expect("logout");
    assert!(out.contains("session 2: logged out"), "{out}");
    assert!(disks.join(&first).exists(), "the disk keeps its other path");
    let list = json(&socket, "disks");
    assert_eq!(list[0]["paths"].as_array().expect("paths").len(), 1);
    assert_eq!(json(&socket, "sessions").as_array().expect("list").len(), 1);
    // The last path: the disk goes.
    let out = srpctl(&socket, &["logout", "1"]).expect("logout");
    assert!(out.contains(&first), "{out}");
    assert!(!disks.join(&first).exists(), "its block file is gone");

    host.stop();
    let err = srpctl(&socket, &["sessions"]).expect_err("daemon stopped");
    assert!(err.contains("is the host daemon running?"), "{err}");
}
