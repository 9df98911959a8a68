//! The full Linux-guest interop matrix (scripts/interop.sh runs it): direction A against
//! our target and against LIO (the bar), at MTU 1500 and 9000, and direction B. Prints a
//! line per check as it ends, then the summary, which `--summary FILE` also writes; exits
//! non-zero if a check of ours failed (those against LIO are the bar, shown for comparison)
//! or a part could not be set up.
//!
//! Usage: `interop-matrix [--only a-ours|a-lio|a-rdma-core|a-jumbo|b|b-rdma-core|provider|pair|conformance]... [--summary FILE]`.

use srp_interop::matrix::direction_a::{self, Against};
use srp_interop::matrix::{
    Matrix, conformance, direction_b, direction_b_rdma_core, pair, provider,
};
use srp_interop::{Watchdog, skip_reason};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut only: Vec<String> = Vec::new();
    let mut summary_file = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--only" => only.extend(it.next().cloned()),
            "--summary" => summary_file = it.next().cloned(),
            "-h" | "--help" => {
                println!(
                    "interop-matrix [--only a-ours|a-lio|a-rdma-core|a-jumbo|b|b-rdma-core|provider|pair|conformance]... [--summary FILE]"
                );
                return;
            }
            other => {
                eprintln!("unknown argument {other:?} (--help)");
                std::process::exit(2);
            }
        }
    }
    if let Some(why) = skip_reason() {
        eprintln!("cannot run: {why}");
        std::process::exit(2);
    }
    let _watchdog = Watchdog::new("interop-matrix", Duration::from_secs(3 * 3600));
    let wanted = |k: &str| only.is_empty() || only.iter().any(|o| o == k);
    let t0 = Instant::now();
    let mut m = Matrix::default();
    let mut setup_failures = Vec::new();
    let mut part = |name: &str, r: srp_interop::Result<()>| {
        if let Err(e) = r {
            eprintln!("{name}: {e}");
            setup_failures.push(format!(
                "{name}: {}",
                e.to_string().lines().next().unwrap_or("")
            ));
        }
    };
    if wanted("a-lio") {
        part(
            "A against LIO",
            direction_a::run(&mut m, Against::Lio, 1500),
        );
    }
    if wanted("a-ours") {
        part(
            "A against ours",
            direction_a::run(&mut m, Against::Ours, 1500),
        );
    }
    if wanted("a-rdma-core") {
        part(
            "A against ours over rdma-core",
            direction_a::run(&mut m, Against::OursRdmaCore, 1500),
        );
    }
    if wanted("a-jumbo") {
        part(
            "A against ours, MTU 9000",
            direction_a::run(&mut m, Against::Ours, 9000),
        );
        part(
            "A against LIO, MTU 9000",
            direction_a::run(&mut m, Against::Lio, 9000),
        );
    }
    if wanted("b") {
        part("B", direction_b::run(&mut m));
    }
    if wanted("provider") {
        part(
            "the rdma-core provider's device test",
            provider::run(&mut m),
        );
    }
    if wanted("b-rdma-core") {
        part(
            "B over rdma-core",
            direction_b_rdma_core::run(&mut m, &direction_b::driver()),
        );
    }
    if wanted("pair") {
        pair::run(&mut m);
    }
    if wanted("conformance") {
        let filter = std::env::var("SRP_INTEROP_CONFORMANCE_FILTER").ok();
        conformance::compare(&mut m, filter.as_deref());
    }
    let mut summary = m.summary("lio", "ours");
    for f in &setup_failures {
        summary.push_str(&format!("SETUP FAILED: {f}\n"));
    }
    summary.push_str(&format!("total {:.0} s\n", t0.elapsed().as_secs_f64()));
    println!("\n==== summary ====\n{summary}");
    if let Some(f) = summary_file {
        if let Err(e) = std::fs::write(&f, &summary) {
            eprintln!("cannot write {f}: {e}");
        }
    }
    // Checks against LIO are the bar: their failures are shown, not ours to fail on.
    if !m.ours_passed() || !setup_failures.is_empty() {
        std::process::exit(1);
    }
}
