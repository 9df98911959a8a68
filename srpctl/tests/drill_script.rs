//! `scripts/drill.sh`, the failover drill as the README tells an operator to run it: a
//! target and a host daemon on loopback 127.0.202.x (two IOCs, one multipath disk with two
//! paths), `srpctl drill failover --fault ioc`. It must pass, report no I/O error and no
//! mismatch, and its picture must show the fault, the failover and the failback. The test
//! runs the script with this build's `srpctl` (SRPCTL) and short phases, under each driver
//! model: the disabled IOC's session is removed as each model's port sees it (the IOC
//! left its unit: the iSCSI model's surprise removal, StorPort's bus change and
//! re-enumeration) and logged in again after the restore. Needs root (FUSE).

use serde_json::Value;
use std::process::Command;

/// The host suite runs under both initiator driver models, one after the other.
#[test]
fn the_readme_drill_passes_and_its_picture_shows_the_failover() {
    for driver in ["storport", "iscsi-model"] {
        eprintln!("driver model: {driver}");
        drill(driver);
    }
}

fn drill(driver: &str) {
    let out = std::env::temp_dir().join(format!("srp-drill-test-{}-{driver}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/drill.sh");
    let run = Command::new("timeout")
        .args(["180", "bash", script])
        .arg(&out)
        .env("SRPCTL", env!("CARGO_BIN_EXE_srpctl"))
        .env("DRILL_DRIVER", driver)
        .env("DRILL_WARMUP", "2")
        .env("DRILL_FAULT_SECS", "3")
        .env("DRILL_AFTER", "3")
        .output()
        .expect("run scripts/drill.sh");
    let text =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "the drill failed:\n{text}");
    assert!(text.contains("PASSED"), "{text}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("drill-report.json")).expect("the report"))
            .expect("JSON");
    let svg = std::fs::read_to_string(out.join("drill.svg")).expect("the picture");
    let host_log = std::fs::read_to_string(out.join("host.log")).expect("the host's log");
    let _ = std::fs::remove_dir_all(&out);
    // Both models see the IOC leave its unit (Device Management through PnP): the iSCSI
    // model surprise-removes the session, StorPort sees a bus change whose re-enumeration
    // finds the IOC's LUs gone.
    let how = match driver {
        "iscsi-model" => "the IOC left its I/O unit: surprise removal",
        _ => "the IOC left its I/O unit: bus change",
    };
    assert!(host_log.contains(how), "{driver}:\n{host_log}");
    assert!(
        report["failback_ms"].as_f64().is_some(),
        "{driver}: the IOC's path carried I/O again after the restore: {report:#}"
    );
    let summary = report.to_string();
    assert!(summary.contains("\"errors\":0"), "{summary}");
    assert!(summary.contains("\"mismatches\":0"), "{summary}");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for mark in [
        "id=\"fault\"",
        "inject",
        "restore",
        "path 1",
        "path 2",
        "max stall",
    ] {
        assert!(svg.contains(mark), "the picture lacks {mark}");
    }
}
