//! Issue #14's real-network chaos run: the two-namespace multipath set-up of
//! `multipath_netns.rs` (one LUN through two IOCs, one multipath disk with a path over each
//! of two links) with every direction of both links impaired as `tc netem loss 1% delay
//! 2ms 1ms reorder 5% duplicate 1%`, under the drill's verifying workload (`srpctl drill
//! failover --fault none`) for 35 s: 0 I/O errors, 0 mismatches, both paths active
//! throughout; the longest stall and the IOPS are printed (docs/testing.md has the
//! figures). The kernels here lack sch_netem, so the links usually run through the
//! userspace impairer (tests/netem/); its counters are printed and checked too. Needs root,
//! /dev/fuse, iproute2, nsenter and ping. Everything it starts — daemons, namespaces, the
//! impairer's thread, the FUSE mount — goes on drop, even on failure; every step is bounded
//! in time. `SRP_NETEM_SEED=<n>` fixes the impairer's seed (else printed); `SRP_DRILL_OUT`
//! keeps the report and picture.

#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
mod multipath;
mod netem;
mod netns;
mod process;

use common::TempDir;
use multipath::{
    FAST_IO_FAIL_S, active_paths, disks, drill, host_addr, read_block_file, stall_ms, target_addr,
    wait_two_active_paths, write_host_config, write_target_config,
};
use netem::links::Link;
use netem::{ChaosLinks, Impairment};
use netns::Netns;
use process::{HostProcess, SRPCTL, TargetProcess};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Every direction of both links.
const CHAOS: Impairment = Impairment {
    loss_pct: 1.0,
    delay: Duration::from_millis(2),
    jitter: Duration::from_millis(1),
    reorder_pct: 5.0,
    duplicate_pct: 1.0,
};
/// The drill's phases, seconds: warmup, the (fault-less) middle, after.
const PHASES_S: [u64; 3] = [5, 25, 5];
/// Workload threads (each one synchronous I/O at a time).
const THREADS: u32 = 8;

fn seed() -> u64 {
    std::env::var("SRP_NETEM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// Every sample of the drill's report shows both paths active.
fn both_paths_active_throughout(r: &Value) {
    let samples = r["samples"].as_array().expect("samples");
    assert!(samples.len() > 100, "few samples: {}", samples.len());
    for s in samples {
        let states: Vec<&str> = s["paths"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p["state"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(
            states,
            ["active", "active"],
            "a path left the active state under netem at {} ms: {s:#}",
            s["at_ms"]
        );
    }
}

#[test]
fn multipath_under_netem_loses_no_io_and_no_data() {
    let started = Instant::now();
    let seed = seed();
    let dir = TempDir::new("mp-netem");
    let tns = Netns::new("srpn-tgt");
    let hns = Netns::new("srpn-host");
    let links: Vec<Link> = [1, 2]
        .map(|i| Link {
            a: format!("t{i}"),
            addr_a: target_addr(i),
            b: format!("h{i}"),
            addr_b: host_addr(i),
        })
        .into();
    let chaos = ChaosLinks::new(&tns, &hns, &links, seed);
    let target_cfg = write_target_config(dir.path());
    let (host_cfg, disks_dir, socket) = write_host_config(dir.path(), "storport");
    let _target = TargetProcess::start_command(tns.exec(SRPCTL), &target_cfg);
    let host = HostProcess::start_command(hns.exec(SRPCTL), &host_cfg, &disks_dir);
    let disk = wait_two_active_paths(&socket);
    read_block_file(disk["path"].as_str().expect("block file"));

    chaos.impair(CHAOS);
    eprintln!("netem on every direction of both links: {CHAOS}");
    let [warmup, hold, after] = PHASES_S.map(|s| s.to_string());
    let threads = THREADS.to_string();
    let args = [
        "--fault",
        "none",
        "--warmup",
        &warmup,
        "--fault-secs",
        &hold,
        "--after",
        &after,
        "--threads",
        &threads,
    ];
    let r = drill(&hns, &socket, dir.path(), "netem", &args, 120);
    let report = chaos.report();
    eprintln!("== netem ({CHAOS}), seed {seed:#x}:\n{report}");
    assert_eq!(r["fault"]["kind"], "none");
    both_paths_active_throughout(&r);
    let now = disks(&socket);
    assert_eq!(
        now.as_array().map(|d| d.iter().map(active_paths).collect()),
        Some(vec![2]),
        "two active paths after the run: {now:#}"
    );
    if let Some(s) = chaos.stats() {
        // The impairer worked as told, dropping nothing else.
        assert!(s.failed.is_none(), "{report}");
        assert_eq!(s.send_errors, 0, "{report}");
        assert_eq!(s.truncated, 0, "{report}");
        for (d, c) in s.dirs.iter().enumerate() {
            assert!(
                c.lost > 0 && c.duplicated > 0 && c.at_once > 0 && c.overtaken > 0,
                "direction {d} was not impaired as asked: {c}"
            );
        }
    }

    let stall = stall_ms(&r);
    let secs = r["end_ms"].as_f64().expect("end_ms") / 1000.0;
    let ios = r["io"]["reads"].as_u64().unwrap_or(0) + r["io"]["writes"].as_u64().unwrap_or(0);
    eprintln!(
        "netem run: {ios} I/Os in {secs:.1} s ({:.0} IOPS, {THREADS} threads of 4 KiB), \
         max stall {stall} ms; seed {seed:#x}; the test took {:.1} s",
        ios as f64 / secs,
        started.elapsed().as_secs_f64()
    );
    // A lost packet costs an RC retransmission (a NAK at once, or the ACK timeout when
    // nothing follows it), never a path: far under fast_io_fail.
    assert!(
        stall < FAST_IO_FAIL_S as f64 * 1000.0 / 3.0,
        "max stall {stall} ms under netem (fast_io_fail {FAST_IO_FAIL_S} s)"
    );
    chaos.impair(Impairment::NONE);
    host.stop();
}
