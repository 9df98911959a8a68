//! The independent conformance battery: libiscsi's `iscsi-test-cu` (Debian libiscsi-bin,
//! not part of this project) run through Linux ib_srp's SCSI generic device against a
//! target, ours or LIO, test by test. LIO's results are the bar: the summary names every
//! test LIO passes and we fail.

use super::Matrix;
use super::direction_a::Against;
use super::side::Side;
use crate::linux::{setup_rxe, srp_login, srp_logout};
use crate::ours::WorkDir;
use crate::{Error, Guest, GuestConfig, NetNs, Result};
use std::collections::BTreeMap;
use std::time::Duration;

/// One test's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Passed.
    Passed,
    /// Failed.
    Failed,
    /// Skipped by the battery (not applicable: needs iSCSI, a second initiator, …).
    Skipped,
}

/// Runs the battery against `against`; the verdict of every test, by name.
pub fn run(against: Against, filter: Option<&str>) -> Result<BTreeMap<String, Verdict>> {
    let work = WorkDir::new(&format!("conformance-{}", against.label()))?;
    let ns = NetNs::new()?;
    let guest = Guest::boot(GuestConfig::new(&ns).nics(&[1500, 1500]))?;
    let rxe = setup_rxe(&guest)?;
    let mut side = match against {
        Against::Ours => Side::ours(&ns, work.path(), &rxe)?,
        Against::OursRdmaCore => Side::ours_rdma_core(&guest, &rxe)?,
        Against::Lio => Side::lio(&guest, &rxe)?,
    };
    let s = srp_login(&guest, &side.login(0, &rxe[0]))?;
    let sg = s
        .disks
        .iter()
        .find(|d| d.lun == 1)
        .map(|d| d.sg.clone())
        .ok_or_else(|| Error::Guest("no LUN 1".into()))?;
    let test = filter.map(|f| format!("--test={f}")).unwrap_or_default();
    // LUN 1 (32 MiB) keeps the data-loss tests short.
    let out = guest.run(
        &format!("cd /tmp && iscsi-test-cu --dataloss --verbose {test} {sg} 2>&1"),
        Duration::from_secs(3 * 3600),
    )?;
    let log = std::env::temp_dir().join(format!("iscsi-test-cu-{}.log", against.label()));
    let _ = std::fs::write(&log, &out.stdout);
    eprintln!(
        "iscsi-test-cu output against {}: {}",
        against.label(),
        log.display()
    );
    let verdicts = parse(&out.stdout);
    let _ = srp_logout(&guest, &s);
    side.stop(&guest);
    // A guest that will not power off (LIO's failed checks can leave ib_srp busy) is
    // killed: nothing of ours to fail on.
    if let Err(e) = guest.shutdown() {
        eprintln!("guest shutdown: {e}");
    }
    if verdicts.is_empty() {
        return Err(Error::Guest(format!(
            "iscsi-test-cu ran no test (exit {}):\n{}",
            out.rc,
            out.stdout.lines().take(40).collect::<Vec<_>>().join("\n")
        )));
    }
    Ok(verdicts)
}

/// CUnit's verbose lines: `  Test: <name> ...passed` or `...FAILED`; a test that prints
/// warnings first has its verdict alone on a later line. A test with no verdict before the
/// next one (the battery skipped it, or crashed) counts as skipped.
fn parse(text: &str) -> BTreeMap<String, Verdict> {
    let mut out = BTreeMap::new();
    let mut suite = String::new();
    let mut pending: Option<String> = None;
    let verdict = |s: &str| {
        let s = s.trim_end();
        if s.ends_with("passed") {
            Some(Verdict::Passed)
        } else if s.ends_with("FAILED") {
            Some(Verdict::Failed)
        } else {
            None
        }
    };
    for line in text.lines() {
        let l = line.trim();
        if let Some(s) = l.strip_prefix("Suite: ") {
            if let Some(p) = pending.take() {
                out.insert(p, Verdict::Skipped);
            }
            suite = s.trim().to_owned();
        } else if let Some(t) = l.strip_prefix("Test: ") {
            if let Some(p) = pending.take() {
                out.insert(p, Verdict::Skipped);
            }
            let (name, rest) = t.split_once(" ...").unwrap_or((t, ""));
            let name = format!("{suite}.{}", name.trim());
            match verdict(rest) {
                Some(v) => {
                    out.insert(name, v);
                }
                None => pending = Some(name),
            }
        } else if let (Some(p), Some(v)) = (pending.as_ref(), verdict(l)) {
            out.insert(p.clone(), v);
            pending = None;
        }
    }
    if let Some(p) = pending {
        out.insert(p, Verdict::Skipped);
    }
    out
}

/// Runs the battery against both targets and records one check per target plus the
/// comparison in `m`.
pub fn compare(m: &mut Matrix, filter: Option<&str>) {
    let mut lio = BTreeMap::new();
    let mut ours = BTreeMap::new();
    for (against, into) in [(Against::Lio, &mut lio), (Against::Ours, &mut ours)] {
        m.check(against.label(), "C.iscsi-test-cu", || {
            *into = run(against, filter)?;
            let n = |v: Verdict| into.values().filter(|x| **x == v).count();
            Ok(format!(
                "{} tests: {} passed, {} failed, {} skipped",
                into.len(),
                n(Verdict::Passed),
                n(Verdict::Failed),
                n(Verdict::Skipped)
            ))
        });
    }
    m.check("ours", "C.no-test-lio-passes-and-ours-fails", || {
        let worse: Vec<&String> = lio
            .iter()
            .filter(|(_, v)| **v == Verdict::Passed)
            .map(|(k, _)| k)
            .filter(|k| ours.get(*k) != Some(&Verdict::Passed))
            .collect();
        let better: Vec<&String> = ours
            .iter()
            .filter(|(k, v)| **v == Verdict::Passed && lio.get(*k) != Some(&Verdict::Passed))
            .map(|(k, _)| k)
            .collect();
        if lio.is_empty() || ours.is_empty() {
            return Err(Error::Guest("a battery run is missing".into()));
        }
        if !worse.is_empty() {
            return Err(Error::Guest(format!(
                "{} test(s) LIO passes and we fail: {worse:?}",
                worse.len()
            )));
        }
        Ok(format!(
            "none; we pass {} test(s) LIO fails: {}",
            better.len(),
            better
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cunit_lines_parse() {
        let text = "Suite: Inquiry\n  Test: Standard ...passed\n  Test: MaxLen ...FAILED\n    1. x\n\
                    Test: BlockLimits ...    [WARNING] SBC-3 pagelength\nFAILED\n    1. y\n\
                    Test: Versions ...    [WARNING] no SPC\n    [WARNING] no SBC\npassed\n\
                    Suite: Read10\n  Test: Simple ...\n  Test: Other ...passed\n";
        let v = parse(text);
        assert_eq!(v.get("Inquiry.Standard"), Some(&Verdict::Passed));
        assert_eq!(v.get("Inquiry.MaxLen"), Some(&Verdict::Failed));
        assert_eq!(v.get("Inquiry.BlockLimits"), Some(&Verdict::Failed));
        assert_eq!(v.get("Inquiry.Versions"), Some(&Verdict::Passed));
        assert_eq!(v.get("Read10.Simple"), Some(&Verdict::Skipped));
        assert_eq!(v.get("Read10.Other"), Some(&Verdict::Passed));
    }
}
