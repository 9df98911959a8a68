//! Our target over rdma-core next to LIO/ib_srpt in the Linux guest, both driven by the
//! same ib_srp and fio (scripts/interop-bench.sh runs it; docs/benchmarks.md keeps the
//! table). Prints each round as it ends, then the table of medians and ratios, which
//! `--out FILE` also writes.
//!
//! Usage: `interop-bench [--rounds N (3)] [--secs S (10)] [--profile] [--out FILE]`;
//! `--profile` adds where the guest's CPU went during one more 4k QD32 run of each target
//! (`perf record -a`, by command and object).

use srp_interop::bench;
use srp_interop::{Watchdog, skip_reason};
use std::time::Duration;

fn main() {
    let mut rounds = 3usize;
    let mut secs = 10u32;
    let mut out = None;
    let mut profile = false;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| {
            it.next().cloned().unwrap_or_else(|| {
                eprintln!("{a} needs {what}");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--rounds" => rounds = value("a count").parse().unwrap_or(rounds).max(1),
            "--secs" => secs = value("seconds").parse().unwrap_or(secs).max(1),
            "--out" => out = Some(value("a file")),
            "--profile" => profile = true,
            "-h" | "--help" => {
                println!("interop-bench [--rounds N] [--secs S] [--profile] [--out FILE]");
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
    let _watchdog = Watchdog::new("interop-bench", Duration::from_secs(3600));
    match bench::run(rounds, secs, profile) {
        Ok(r) => {
            let mut t = format!(
                "{} rounds of {} s per point, medians, rounds interleaved:\n\n{}",
                rounds,
                secs,
                bench::table(&r)
            );
            for (who, report) in &r.profiles {
                t.push_str(&format!(
                    "\nWhere the guest's CPU went, 4k randread QD32 against {who} \
                     (perf record -a, cpu-clock; by command and object, >= 1.5 %):\n\n```\n{}\n```\n",
                    report.trim_end()
                ));
            }
            println!("{t}");
            if let Some(f) = out {
                if let Err(e) = std::fs::write(&f, &t) {
                    eprintln!("write {f}: {e}");
                    std::process::exit(1);
                }
            }
        }
        Err(e) => {
            eprintln!("interop-bench: {e}");
            std::process::exit(1);
        }
    }
}
