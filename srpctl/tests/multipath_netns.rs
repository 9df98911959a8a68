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
mod multipath;
mod netns;
mod process;

use common::TempDir;
use multipath::{
    FAST_IO_FAIL_S, NO_PATH_RETRY_S, drill, host_addr, read_block_file, session_from, stall_ms,
    target_addr, wait_two_active_paths, write_host_config, write_target_config,
};
use netns::{Netns, VethPair};
use process::{HostProcess, SRPCTL, TargetProcess};
use serde_json::Value;
use std::path::Path;

/// How long each single-link cut lasts, seconds: longer than the stall allowed, so that
/// I/O stuck on the cut path until the restore fails the test.
const LINK_FAULT_S: u64 = 8;
/// How long both links are cut, seconds (under `no_path_retry`).
const BOTH_FAULT_S: u64 = 5;

/// A link drill: `--fault link` on path `session`, cut with `down`, restored with `up`.
#[allow(clippy::too_many_arguments)]
fn link_drill(
    hns: &Netns,
    socket: &Path,
    dir: &Path,
    label: &str,
    session: u64,
    down: &str,
    up: &str,
    fault_s: u64,
) -> Value {
    let (session, fault_s) = (session.to_string(), fault_s.to_string());
    let args = [
        "--fault",
        "link",
        "--path",
        &session,
        "--link-cmd-down",
        down,
        "--link-cmd-up",
        up,
        "--warmup",
        "2",
        "--fault-secs",
        &fault_s,
        "--after",
        "3",
    ];
    let r = drill(hns, socket, dir, label, &args, 90);
    assert_eq!(r["fault"]["kind"], "link");
    r
}

/// The host suite runs under both initiator driver models, one after the other.
#[test]
fn cutting_each_link_then_both_loses_no_io_and_no_data() {
    for driver in ["storport", "iscsi-model"] {
        eprintln!("driver model: {driver}");
        cut_each_link_then_both(driver);
    }
}

fn cut_each_link_then_both(driver: &str) {
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
    let (host_cfg, disks_dir, socket) = write_host_config(dir.path(), driver);
    let _target = TargetProcess::start_command(tns.exec(SRPCTL), &target_cfg);
    let host = HostProcess::start_command(hns.exec(SRPCTL), &host_cfg, &disks_dir);

    // One disk, two active paths (one per link), and its block file reads.
    let disk = wait_two_active_paths(&socket);
    let file = disk["path"].as_str().expect("block file").to_owned();
    assert!(file.starts_with(&disks_dir.display().to_string()), "{file}");
    assert_eq!(disk["blocks"].as_u64(), Some((64 << 20) / 512), "{disk:#}");
    read_block_file(&file);
    let s1 = session_from(&disk, &host_addr(1));
    let s2 = session_from(&disk, &host_addr(2));

    // Each link in turn: the other path carries the I/O; the stall is far below the
    // fast-I/O-fail timer.
    for (i, (link, session)) in links.iter().zip([s1, s2]).enumerate() {
        let label = format!("{driver}-link{}", i + 1);
        let r = link_drill(
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
    let r = link_drill(
        &hns,
        &socket,
        dir.path(),
        &format!("{driver}-both"),
        s1,
        &down,
        &up,
        BOTH_FAULT_S,
    );
    let stall = stall_ms(&r);
    let fault_ms = BOTH_FAULT_S as f64 * 1000.0;
    assert!(
        stall >= fault_ms * 0.8 && stall < NO_PATH_RETRY_S as f64 * 1000.0,
        "{driver}, both links: max stall {stall} ms for a {fault_ms} ms cut (no_path_retry {NO_PATH_RETRY_S} s)"
    );
    eprintln!(
        "stalls: link1/link2 see above; both {stall} ms for a {fault_ms} ms cut \
         (reports and pictures in {})",
        dir.path().display()
    );
    wait_two_active_paths(&socket);
    host.stop();
}
