//! The rdma-core provider's own test against the guest's rxe0
//! (`rdma-core-provider/tests/device.rs`: an RDMA-CM connection, SENDs, a memory window
//! opened, used, closed by LOCAL_INV and by SEND WITH INVALIDATE, a drain; a window bound
//! behind a SEND that RNR NAKs retry, which rxe would replay without the provider's bind
//! fence), built on this
//! machine and run in the guest twice: as built, and built with AddressSanitizer (nightly,
//! `-Zsanitizer=address`) — the FFI module's `unsafe` exercised under the sanitizer.
//! `P.device-test` and `P.device-test-asan`.

use super::Matrix;
use crate::linux::setup_rxe;
use crate::{Error, Guest, GuestConfig, NetNs, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const L: &str = "provider";

/// Builds the test binary (`asan`: with AddressSanitizer on nightly); its path.
fn build(asan: bool) -> Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new("cargo");
    if asan {
        cmd.arg("+nightly");
    }
    cmd.current_dir(&root).args([
        "test",
        "-p",
        "rdma-core-provider",
        "--test",
        "device",
        "--no-run",
        "--message-format=json",
    ]);
    if asan {
        // The sanitizer for our code and the standard library as built; the target named so
        // build scripts and proc-macros are built without it.
        cmd.env("RUSTFLAGS", "-Zsanitizer=address")
            .args(["--target", "x86_64-unknown-linux-gnu", "--target-dir"])
            .arg(root.join("target/asan"));
    }
    let out = cmd.output().map_err(Error::io("run cargo"))?;
    if !out.status.success() {
        return Err(Error::Guest(format!(
            "cargo test --no-run{} failed:\n{}",
            if asan { " (asan)" } else { "" },
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == "device")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| Error::Guest("cargo named no test executable".into()))
}

/// Runs the provider's device test in a guest, plain and under AddressSanitizer.
pub fn run(m: &mut Matrix) -> Result<()> {
    let plain = build(false);
    // A build without the sanitizer's runtime in it would pass without checking anything.
    let asan = build(true).and_then(|bin| {
        let bytes = std::fs::read(&bin).map_err(Error::io("read the ASan test binary"))?;
        if bytes.windows(11).any(|w| w == b"__asan_init") {
            Ok(bin)
        } else {
            Err(Error::Guest(format!(
                "{} is not instrumented",
                bin.display()
            )))
        }
    });
    let ns = NetNs::new()?;
    let guest = Guest::boot(GuestConfig::new(&ns))?;
    let rxe = setup_rxe(&guest)?;
    let ip = rxe[0].ip;
    for (name, bin) in [("P.device-test", plain), ("P.device-test-asan", asan)] {
        m.check(L, name, || {
            let bin = bin.as_ref().map_err(|e| Error::Guest(e.to_string()))?;
            in_guest_run(&guest, bin, ip)
        });
    }
    let _ = guest.shutdown();
    Ok(())
}

fn in_guest_run(guest: &Guest, bin: &Path, ip: std::net::Ipv4Addr) -> Result<String> {
    let t = std::time::Instant::now();
    // A copy in the guest's tmpfs (the 9p root is cached loosely).
    let out = guest.run(
        &format!(
            "cp {bin} /run/device-test && RDMA_CORE_TEST_ADDR={ip} \
             ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 /run/device-test --nocapture 2>&1",
            bin = bin.display()
        ),
        Duration::from_secs(300),
    )?;
    if out.rc != 0
        || !out.stdout.contains("test result: ok. 2 passed")
        || out.stdout.contains("SKIP")
        || out.stdout.contains("AddressSanitizer")
    {
        return Err(Error::Guest(format!(
            "exit {}:\n{}\n{}",
            out.rc, out.stdout, out.stderr
        )));
    }
    Ok(format!(
        "connection, SENDs, window bound/used/LOCAL_INV/SEND_WITH_INV, drain, a bind behind \
         a retried SEND not replayed, on rxe0 ({:.1} s)",
        t.elapsed().as_secs_f64()
    ))
}
