//! Issue #7's namespace acceptance test: the target and the host daemon in two network
//! namespaces joined by two veth pairs (10.231.1.0/24 and 10.231.2.0/24), the target
//! exporting one file-backed LUN through two IOCs, one per link, and the host logged in over
//! both (one multipath disk, two paths). `srpctl drill failover --fault link` cuts link 1,
//! then link 2, then both at once for less than `no_path_retry` (I/O queues, then resumes),
//! under its verifying workload; each report must show 0 I/O errors and 0 mismatches, a
//! single-link cut a stall far under `fast_io_fail`, the double cut a stall of about the
//! fault's length. Needs root, /dev/fuse, iproute2 and nsenter. Everything it starts —
//! daemons, namespaces (with their veths), the FUSE mount — goes on drop, even on failure;
//! every step is bounded in time. With `SRP_DRILL_OUT=<dir>` the drills' reports and
//! pictures are copied there.

#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
mod netns;
mod process;

use common::TempDir;
use netns::{Netns, VethPair};
use process::{HostProcess, SRPCTL, TargetProcess, output_within};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The host's `[timers] fast_io_fail`, seconds.
const FAST_IO_FAIL_S: u64 = 15;
/// The host's `[multipath] no_path_retry`, seconds.
const NO_PATH_RETRY_S: u64 = 20;
/// How long each single-link cut lasts, seconds: longer than the stall allowed, so that
/// I/O stuck on the cut path until the restore fails the test.
const LINK_FAULT_S: u64 = 8;
/// How long both links are cut, seconds (under `no_path_retry`).
const BOTH_FAULT_S: u64 = 5;

/// Target side and host side of link `i` (1 or 2).
fn target_addr(i: u32) -> String {
    format!("10.231.{i}.1")
}
fn host_addr(i: u32) -> String {
    format!("10.231.{i}.2")
}

fn write_target_config(dir: &Path) -> PathBuf {
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

/// The host config, its disks directory and its control socket.
fn write_host_config(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let cfg = dir.join("host.toml");
    let disks = dir.join("disks");
    let socket = dir.join("host.sock");
    let text = format!(
        "[host]\nname = \"mp-netns\"\nnode_guid = \"0x0002c90300e7e100\"\n\
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
fn disks(socket: &Path) -> Value {
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

/// Waits (up to 40 s) until the host has one disk with two active paths; returns it.
fn wait_two_active_paths(socket: &Path) -> Value {
    let end = Instant::now() + Duration::from_secs(40);
    loop {
        let list = disks(socket);
        if let Some([disk]) = list.as_array().map(Vec::as_slice) {
            let paths = disk["paths"]
                .as_array()
                .map_or(0, |p| p.iter().filter(|p| p["state"] == "active").count());
            if paths == 2 {
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
fn session_from(disk: &Value, local: &str) -> u64 {
    disk["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .find(|p| p["local"] == local)
        .and_then(|p| p["session"].as_u64())
        .unwrap_or_else(|| panic!("no path from {local}: {disk:#}"))
}

/// One drill, run in the host's namespace: cut with `down`, restore with `up`; returns the
/// parsed report after checking that the drill passed with no error and no mismatch.
#[allow(clippy::too_many_arguments)]
fn drill(
    hns: &Netns,
    socket: &Path,
    dir: &Path,
    label: &str,
    session: u64,
    down: &str,
    up: &str,
    fault_s: u64,
) -> Value {
    let report = dir.join(format!("{label}.json"));
    let picture = dir.join(format!("{label}.svg"));
    let mut cmd = hns.exec(SRPCTL);
    cmd.args(["drill", "failover", "--socket"])
        .arg(socket)
        .args(["--fault", "link", "--path", &session.to_string()])
        .args(["--link-cmd-down", down, "--link-cmd-up", up])
        .args([
            "--warmup",
            "2",
            "--fault-secs",
            &fault_s.to_string(),
            "--after",
            "3",
        ])
        .arg("--report")
        .arg(&report)
        .arg("--picture")
        .arg(&picture);
    let started = Instant::now();
    let out = output_within(cmd, 90);
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
    assert_eq!(r["fault"]["kind"], "link");
    assert_eq!(
        r["fault"]["errors"].as_array().map(Vec::len),
        Some(0),
        "{label}: the cut or the restore failed: {:#}",
        r["fault"]
    );
    let io = r["io"]["reads"].as_u64().unwrap_or(0) + r["io"]["writes"].as_u64().unwrap_or(0);
    assert!(io > 100, "{label}: hardly any I/O ({io})");
    r
}

fn stall_ms(r: &Value) -> f64 {
    r["max_stall"]["ms"].as_f64().expect("max_stall.ms")
}

#[test]
fn cutting_each_link_then_both_loses_no_io_and_no_data() {
    let dir = TempDir::new("mp-netns");
    let tns = Netns::new("srpt-tgt");
    let hns = Netns::new("srpt-host");
    let links = [1, 2].map(|i| {
        VethPair::new(
            &hns,
            &format!("h{}", i - 1),
            &host_addr(i),
            &tns,
            &format!("t{}", i - 1),
            &target_addr(i),
        )
    });
    let target_cfg = write_target_config(dir.path());
    let (host_cfg, disks_dir, socket) = write_host_config(dir.path());
    let _target = TargetProcess::start_command(tns.exec(SRPCTL), &target_cfg);
    let host = HostProcess::start_command(hns.exec(SRPCTL), &host_cfg, &disks_dir);

    // One disk, two active paths (one per link), and its block file reads.
    let disk = wait_two_active_paths(&socket);
    let file = disk["path"].as_str().expect("block file").to_owned();
    assert!(file.starts_with(&disks_dir.display().to_string()), "{file}");
    assert_eq!(disk["blocks"].as_u64(), Some((64 << 20) / 512), "{disk:#}");
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
    let s1 = session_from(&disk, &host_addr(1));
    let s2 = session_from(&disk, &host_addr(2));

    // Each link in turn: the other path carries the I/O; the stall is far below the
    // fast-I/O-fail timer.
    for (i, (link, session)) in links.iter().zip([s1, s2]).enumerate() {
        let label = format!("link{}", i + 1);
        let r = drill(
            &hns,
            &socket,
            dir.path(),
            &label,
            session,
            &link.cmd_a("down"),
            &link.cmd_a("up"),
            LINK_FAULT_S,
        );
        let stall = stall_ms(&r);
        assert!(
            stall < 5000.0 && stall < FAST_IO_FAIL_S as f64 * 1000.0 / 3.0,
            "{label}: max stall {stall} ms (fast_io_fail {FAST_IO_FAIL_S} s)"
        );
        assert!(
            r["failover_ms"].as_f64().is_some(),
            "{label}: no I/O after the cut"
        );
        wait_two_active_paths(&socket);
    }

    // Both links: no path left, so I/O queues (no_path_retry) and resumes when the links
    // come back, without an error; the stall is about the cut's length.
    let down = format!("{} && {}", links[0].cmd_a("down"), links[1].cmd_a("down"));
    let up = format!("{} && {}", links[0].cmd_a("up"), links[1].cmd_a("up"));
    let r = drill(
        &hns,
        &socket,
        dir.path(),
        "both",
        s1,
        &down,
        &up,
        BOTH_FAULT_S,
    );
    let stall = stall_ms(&r);
    let fault_ms = BOTH_FAULT_S as f64 * 1000.0;
    assert!(
        stall >= fault_ms * 0.8 && stall < NO_PATH_RETRY_S as f64 * 1000.0,
        "both links: max stall {stall} ms for a {fault_ms} ms cut (no_path_retry {NO_PATH_RETRY_S} s)"
    );
    eprintln!(
        "stalls: link1/link2 see above; both {stall} ms for a {fault_ms} ms cut \
         (reports and pictures in {})",
        dir.path().display()
    );
    wait_two_active_paths(&socket);
    host.stop();
}
