//! Heap allocations per I/O in the steady state (issue #13, Deliver 3), counted by the
//! counting allocator `srpctl` installs (`hca::mem::CountingAlloc`): `srpctl bench disk`
//! runs a real target daemon and the SRP initiator under both driver models' emulated
//! ports in one process (`--driver both`: the StorPort miniport and the iSCSI-model
//! driver, each its own session) and reports `allocs_per_io` for each point and model —
//! target, initiator, port and the bench's own submitter together. Both ports draw their
//! SRBs, requests and submitters' completions from lookaside lists, so both models are
//! held to the same budgets.
//!
//! What is left per I/O (docs/benchmarks.md, "Zero copy, no allocation per I/O"): the
//! bench's completion routine (a boxed closure per READ — the submitter's choice; the host
//! daemon waits instead), and for a multi-page buffer its FRMR page list (one per REG_MR
//! that spans more than one page); a short run also counts the pools filling up. The
//! budgets hold that line: one allocation more per command anywhere fails the QD1 point.
//!
//! Times are not asserted (PERFORMANCE.md): only counts.

use std::process::Command;

/// (point name in the JSON, most allocations per I/O).
const BUDGETS: &[(&str, f64)] = &[
    ("4k randread QD32", 3.0),
    ("128k seqread QD32", 6.0),
    ("4k randread QD1", 2.0),
];

#[test]
fn steady_state_io_allocates_only_what_is_listed() {
    let out = Command::new(env!("CARGO_BIN_EXE_srpctl"))
        .args([
            "bench",
            "disk",
            "--secs",
            "1",
            "--rounds",
            "1",
            "--size-mib",
            "32",
            "--target",
            "127.0.206.1",
            "--host",
            "127.0.206.2",
            "--rdma-cm-port",
            "5606",
            "--driver",
            "both",
            "--json",
        ])
        .output()
        .expect("srpctl runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench disk failed: {stderr}");
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("bench disk prints JSON");
    let results = doc["results"].as_array().expect("results");
    for driver in ["storport", "iscsi-model"] {
        for &(name, budget) in BUDGETS {
            let point = results
                .iter()
                .find(|r| r["name"] == name && r["driver"] == driver)
                .unwrap_or_else(|| panic!("no point {name} under {driver} in {doc}"));
            let allocs = point["allocs_per_io"].as_f64().expect("allocs_per_io");
            let ios = point["iops"].as_f64().unwrap_or(0.0);
            assert!(ios > 0.0, "{name} under {driver}: no I/O");
            assert!(
                allocs <= budget,
                "{name} under {driver}: {allocs:.2} heap allocations per I/O, budget {budget} \
                 (see the module doc for what may allocate)"
            );
        }
    }
}
