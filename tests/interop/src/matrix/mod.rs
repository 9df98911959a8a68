//! The interop matrix: named checks run one after another, each with its outcome, time and
//! a line of detail, printed as it ends and summarised at the end (the lines
//! docs/interop.md keeps).
//!
//! - [`side`]: the target under test in direction A, ours (`srpctl target run` in the
//!   namespace on our software HCA, or in the guest over rdma-core) or Linux's own (LIO +
//!   ib_srpt in the guest), behind one interface.
//! - [`direction_a`]: Linux ib_srp against a target: login and refusals, identity pages,
//!   I/O and file systems, resets, relogins, login options, multichannel, MTU, dm-multipath.
//! - [`direction_b`]: our host against Linux ib_srpt: discovery, login, block file, ext4,
//!   multipath and a failover drill.
//! - [`direction_b_rdma_core`]: our host inside the guest over rdma-core (memory-window
//!   fencing) against ib_srpt: login, multipath disk, block file, ext4, failover drill.
//! - [`provider`]: the rdma-core provider's device test in the guest, plain and under
//!   AddressSanitizer.
//! - [`conformance`]: libiscsi's iscsi-test-cu through ib_srp against ours and LIO.
//! - [`pair`]: two of our appliances serving one RBD LU, through ib_srp: one identity,
//!   reservations enforced across them (sg_persist, libiscsi's PR suites).

pub mod conformance;
pub mod direction_a;
pub mod direction_b;
pub mod direction_b_rdma_core;
pub mod pair;
pub mod provider;
pub mod side;

use std::fmt::Write as _;
use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

/// One check's result.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// Which run (`ours`, `lio`, `host`): what was under test.
    pub under_test: String,
    /// The check's name (`A.login`).
    pub name: String,
    /// Passed.
    pub pass: bool,
    /// Seconds it took.
    pub secs: f64,
    /// What it saw (or why it failed), first line.
    pub detail: String,
}

impl CheckResult {
    /// The summary line: `PASS  ours  A.login  3.1 s  detail`.
    pub fn line(&self) -> String {
        format!(
            "{}  {:<5} {:<28} {:>6.1} s  {}",
            if self.pass { "PASS" } else { "FAIL" },
            self.under_test,
            self.name,
            self.secs,
            self.detail
        )
    }
}

/// Results of a run, printed as they come.
#[derive(Debug, Default)]
pub struct Matrix {
    /// Every check so far.
    pub results: Vec<CheckResult>,
}

impl Matrix {
    /// Runs `f` as check `name` of `under_test`; a panic counts as a failure. Prints the
    /// line (and a failure's whole message to stderr). Returns whether it passed.
    pub fn check(
        &mut self,
        under_test: &str,
        name: &str,
        f: impl FnOnce() -> crate::Result<String>,
    ) -> bool {
        let t = Instant::now();
        let got = std::panic::catch_unwind(AssertUnwindSafe(f));
        let (pass, detail, full) = match got {
            Ok(Ok(d)) => (true, d.clone(), d),
            Ok(Err(e)) => {
                let s = e.to_string();
                (false, first_line(&s), s)
            }
            Err(p) => {
                let s = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panic".into());
                (false, first_line(&s), s)
            }
        };
        let r = CheckResult {
            under_test: under_test.into(),
            name: name.into(),
            pass,
            secs: t.elapsed().as_secs_f64(),
            detail: first_line(&detail),
        };
        println!("{}", r.line());
        if !pass {
            eprintln!("---- {under_test} {name} failed ----\n{full}\n----");
        }
        let _ = std::io::stdout().flush();
        self.results.push(r);
        pass
    }

    /// Records a check that could not run because an earlier one failed.
    pub fn skip(&mut self, under_test: &str, name: &str, why: &str) {
        let r = CheckResult {
            under_test: under_test.into(),
            name: name.into(),
            pass: false,
            secs: 0.0,
            detail: format!("not run: {why}"),
        };
        println!("{}", r.line());
        self.results.push(r);
    }

    /// Whether every check passed.
    pub fn all_passed(&self) -> bool {
        self.results.iter().all(|r| r.pass)
    }

    /// Whether every check of ours passed: all but the runs against Linux's own target
    /// (`lio…`), whose failures are the bar's, shown for comparison.
    pub fn ours_passed(&self) -> bool {
        self.results
            .iter()
            .filter(|r| !r.under_test.starts_with("lio"))
            .all(|r| r.pass)
    }

    /// The summary: every line, then the checks where `a` passes and `b` fails (the
    /// comparison against Linux's own target), then the totals.
    pub fn summary(&self, a: &str, b: &str) -> String {
        let mut s = String::new();
        for r in &self.results {
            let _ = writeln!(s, "{}", r.line());
        }
        let worse: Vec<&str> = self
            .results
            .iter()
            .filter(|r| r.under_test == a && r.pass)
            .filter(|r| {
                self.results
                    .iter()
                    .any(|o| o.under_test == b && o.name == r.name && !o.pass)
            })
            .map(|r| r.name.as_str())
            .collect();
        if self.results.iter().any(|r| r.under_test == a) {
            let _ = writeln!(
                s,
                "checks {a} passes and {b} fails: {}",
                if worse.is_empty() {
                    "none".to_owned()
                } else {
                    worse.join(", ")
                }
            );
        }
        let passed = self.results.iter().filter(|r| r.pass).count();
        let ours: Vec<&CheckResult> = self
            .results
            .iter()
            .filter(|r| !r.under_test.starts_with("lio"))
            .collect();
        let ours_passed = ours.iter().filter(|r| r.pass).count();
        let _ = writeln!(
            s,
            "{passed} of {} checks passed; of ours (all but those against LIO): {ours_passed} of {}",
            self.results.len(),
            ours.len()
        );
        s
    }
}

fn first_line(s: &str) -> String {
    let l = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let l: String = l.chars().take(200).collect();
    l
}
