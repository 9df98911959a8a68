//! The two-link multipath set-up the namespace tests share: a target exporting one
//! file-backed LUN through two IOCs, one per link (10.231.{1,2}.1), a host daemon logged in
//! over both (10.231.{1,2}.2: one disk, two paths), the host's view of its disks, and
//! `srpctl drill failover` run from the host's namespace and checked.
#![allow(dead_code, unreachable_pub)]

use crate::netns::Netns;
use crate::process::{SRPCTL, output_within};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The host's `[timers] fast_io_fail`, seconds.
pub const FAST_IO_FAIL_S: u64 = 15;
/// The host's `[multipath] no_path_retry`, seconds.
pub const NO_PATH_RETRY_S: u64 = 20;

/// Target side and host side of link `i` (1 or 2).
pub fn target_addr(i: u32) -> String {
    format!("10.231.{i}.1")
}

/// Host side of link `i`.
pub fn host_addr(i: u32) -> String {
    format!("10.231.{i}.2")
}

/// Writes the target's configuration in `dir`; returns its path.
pub fn write_target_config(dir: &Path) -> PathBuf {
    let cfg = dir.join("target.toml");
    let text = format!(
        "[target]\nname = \"mp-netns\"\nnode_guid = \"0x0002c90300e7e000\"\n\
         control_socket = \"{sock}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{a1}\"\n\n\
         [[port]]\nname = \"p1\"\naddress = \"{a2}\"\n\n\
         [[lun]]\nname = \"vol\"\nfile = \"{file}\"\nsize = \"64MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300e7e001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300e7e002\"\nports = [\"p1\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
        sock = dir.join("target.sock").display(),
        a1 = target_addr(1),
        a2 = target_addr(2),
        file = dir.join("vol.img").display(),
    );
    std::fs::write(&cfg, text).expect("write target config");
    cfg
}

/// Writes the host's configuration in `dir` (its logins under the driver model `driver`); returns it, its disks directory and its
/// control socket.
pub fn write_host_config(dir: &Path, driver: &str) -> (PathBuf, PathBuf, PathBuf) {
    let cfg = dir.join("host.toml");
    let disks = dir.join("disks");
    let socket = dir.join("host.sock");
    let text = format!(
        "[host]\nname = \"mp-netns\"\nnode_guid = \"0x0002c90300e7e100\"\ndriver = \"{driver}\"\n\
         disks_dir = \"{disks}\"\ncontrol_socket = \"{sock}\"\nsweep_interval = \"1s\"\n\n\
         [timers]\nreconnect_delay = \"1s\"\nfast_io_fail = \"{FAST_IO_FAIL_S}s\"\n\
         dev_loss = \"600s\"\n\n\
         [multipath]\npolicy = \"round-robin\"\nno_path_retry = \"{NO_PATH_RETRY_S}s\"\n\n\
         [[portal]]\naddress = \"{t1}\"\nlocal = [\"{h1}\"]\n\n\
         [[portal]]\naddress = \"{t2}\"\nlocal = [\"{h2}\"]\n",
        disks = disks.display(),
        sock = socket.display(),
        t1 = target_addr(1),
        h1 = host_addr(1),
        t2 = target_addr(2),
        h2 = host_addr(2),
    );
    std::fs::write(&cfg, text).expect("write host config");
    (cfg, disks, socket)
}

/// `srpctl disks --json` of the host daemon at `socket` (a Unix socket: reachable from any
/// network namespace).
pub fn disks(socket: &Path) -> Value {
    let mut cmd = Command::new(SRPCTL);
    cmd.args(["disks", "--json", "--socket"]).arg(socket);
    let out = output_within(cmd, 15);
    assert!(
        out.status.success(),
        "srpctl disks: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("disks --json")
}

/// The number of `disk`'s paths in state `active`.
pub fn active_paths(disk: &Value) -> usize {
    disk["paths"]
        .as_array()
        .map_or(0, |p| p.iter().filter(|p| p["state"] == "active").count())
}

/// Waits (up to 40 s) until the host has one disk with two active paths; returns it.
pub fn wait_two_active_paths(socket: &Path) -> Value {
    let end = Instant::now() + Duration::from_secs(40);
    loop {
        let list = disks(socket);
        if let Some([disk]) = list.as_array().map(Vec::as_slice) {
            if active_paths(disk) == 2 {
                return disk.clone();
            }
        }
        assert!(
            Instant::now() < end,
            "no disk with two active paths within 40 s: {list:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The session of `disk`'s path from local address `local`.
pub fn session_from(disk: &Value, local: &str) -> u64 {
    disk["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .find(|p| p["local"] == local)
        .and_then(|p| p["session"].as_u64())
        .unwrap_or_else(|| panic!("no path from {local}: {disk:#}"))
}

/// Reads 8 MiB of the disk's block file `file` with O_DIRECT.
pub fn read_block_file(file: &str) {
    let mut dd = Command::new("dd");
    dd.args([
        &format!("if={file}"),
        "of=/dev/null",
        "bs=1M",
        "count=8",
        "iflag=direct",
    ]);
    let out = output_within(dd, 30);
    assert!(
        out.status.success(),
        "reading the block file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One drill, run in the host's namespace with `args` after `drill failover --socket …`
/// (the fault and the phases), bounded by `within_s`; returns the parsed report after
/// checking that the drill passed with no I/O error, no mismatch, no fault error, a valid
/// picture and some I/O. With `SRP_DRILL_OUT=<dir>` the report and the picture are copied
/// there.
pub fn drill(
    hns: &Netns,
    socket: &Path,
    dir: &Path,
    label: &str,
    args: &[&str],
    within_s: u64,
) -> Value {
    let report = dir.join(format!("{label}.json"));
    let picture = dir.join(format!("{label}.svg"));
    let mut cmd = hns.exec(SRPCTL);
    cmd.args(["drill", "failover", "--socket"])
        .arg(socket)
        .args(args)
        .arg("--report")
        .arg(&report)
        .arg("--picture")
        .arg(&picture);
    let started = Instant::now();
    let out = output_within(cmd, within_s);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "== drill {label} ({:.1} s):\n{text}",
        started.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "drill {label} failed:\n{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(&report).expect("the report"))
        .unwrap_or_else(|e| panic!("report {label}: {e}"));
    if let Some(keep) = std::env::var_os("SRP_DRILL_OUT") {
        // Kept for a look (the temp dir goes with the test).
        let keep = PathBuf::from(keep);
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::fs::copy(&report, keep.join(format!("{label}.json")));
        let _ = std::fs::copy(&picture, keep.join(format!("{label}.svg")));
    }
    let svg = std::fs::read_to_string(&picture).expect("the picture");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(r["passed"], true, "{label}: {r:#}");
    assert_eq!(r["io"]["errors"], 0, "{label}: {:#}", r["errors"]);
    assert_eq!(r["io"]["mismatches"], 0, "{label}: {:#}", r["mismatches"]);
    assert_eq!(
        r["fault"]["errors"].as_array().map(Vec::len),
        Some(0),
        "{label}: the fault's injection or restore failed: {:#}",
        r["fault"]
    );
    let io = r["io"]["reads"].as_u64().unwrap_or(0) + r["io"]["writes"].as_u64().unwrap_or(0);
    assert!(io > 100, "{label}: hardly any I/O ({io})");
    r
}

/// The report's longest stall, ms.
pub fn stall_ms(r: &Value) -> f64 {
    r["max_stall"]["ms"].as_f64().expect("max_stall.ms")
}
