//! The independent conformance battery: libiscsi's `iscsi-test-cu` (Debian libiscsi-bin,
//! not part of this project) run through Linux ib_srp's SCSI generic device against a
//! target, ours or LIO, test by test. LIO's results (its LUN 1, `fileio`) are the bar: the
//! summary names every test LIO passes and we fail. Ours is run on three LUNs — RAM, a
//! file and a block device (`side::CONFORMANCE_LUNS`) — so the battery's WRITE ATOMIC,
//! durability and provisioning tests meet every kind of backing store; each must pass at
//! least as many tests as LIO, none that LIO passes may fail, and WriteAtomic16 must pass
//! on the file and the device.

use super::Matrix;
use super::direction_a::Against;
use super::side::{CONFORMANCE_LUNS, Side};
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

/// The verdicts of one LUN's run, by test name.
pub type Verdicts = BTreeMap<String, Verdict>;

/// Runs the battery against `against`: on LIO's LUN 1, on each of ours
/// ([`CONFORMANCE_LUNS`]); (LUN kind, verdicts) per run.
pub fn run(against: Against, filter: Option<&str>) -> Result<Vec<(&'static str, Verdicts)>> {
    let work = WorkDir::new(&format!("conformance-{}", against.label()))?;
    let ns = NetNs::new()?;
    let guest = Guest::boot(GuestConfig::new(&ns).nics(&[1500, 1500]))?;
    let rxe = setup_rxe(&guest)?;
    let mut side = match against {
        Against::Ours => Side::ours_conformance(&ns, work.path(), &rxe)?,
        Against::OursRdmaCore => Side::ours_rdma_core(&guest, &rxe)?,
        Against::Lio => Side::lio(&guest, &rxe)?,
    };
    let luns: &[(u8, &'static str)] = match against {
        Against::Lio => &[(1, "fileio")],
        _ => &CONFORMANCE_LUNS,
    };
    let mut login = side.login(0, &rxe[0]);
    login.expect_disks = 1 + luns.len();
    let s = srp_login(&guest, &login)?;
    let test = filter.map(|f| format!("--test={f}")).unwrap_or_default();
    let mut runs = Vec::new();
    for &(lun, kind) in luns {
        let sg = s
            .disks
            .iter()
            .find(|d| d.lun == u64::from(lun))
            .map(|d| d.sg.clone())
            .ok_or_else(|| Error::Guest(format!("no LUN {lun}")))?;
        // 32 MiB LUNs keep the data-loss tests short.
        let out = guest.run(
            &format!("cd /tmp && iscsi-test-cu --dataloss --verbose {test} {sg} 2>&1"),
            Duration::from_secs(3 * 3600),
        )?;
        let log =
            std::env::temp_dir().join(format!("iscsi-test-cu-{}-{kind}.log", against.label()));
        let _ = std::fs::write(&log, &out.stdout);
        eprintln!(
            "iscsi-test-cu output against {} LUN {lun} ({kind}): {}",
            against.label(),
            log.display()
        );
        let verdicts = parse(&out.stdout);
        if verdicts.is_empty() {
            let _ = srp_logout(&guest, &s);
            side.stop(&guest);
            let _ = guest.shutdown();
            return Err(Error::Guest(format!(
                "iscsi-test-cu ran no test on LUN {lun} (exit {}):\n{}",
                out.rc,
                out.stdout.lines().take(40).collect::<Vec<_>>().join("\n")
            )));
        }
        runs.push((kind, verdicts));
    }
    let _ = srp_logout(&guest, &s);
    side.stop(&guest);
    // A guest that will not power off (LIO's failed checks can leave ib_srp busy) is
    // killed: nothing of ours to fail on.
    if let Err(e) = guest.shutdown() {
        eprintln!("guest shutdown: {e}");
    }
    Ok(runs)
}

/// CUnit's verbose lines: `  Test: <name> ...passed` or `...FAILED`; a test that prints
/// warnings first has its verdict alone on a later line. A test with no verdict before the
/// next one (the battery skipped it, or crashed) counts as skipped, and so does one that
/// printed `[SKIPPED]` before its `passed` (libiscsi's skip of a test the target does not
/// support prints as passed: LIO 6.1 "passes" GetLBAStatus that way, never having been
/// asked).
pub(crate) fn parse(text: &str) -> BTreeMap<String, Verdict> {
    let mut out = BTreeMap::new();
    let mut suite = String::new();
    let mut pending: Option<String> = None;
    let mut skipped = false;
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
            skipped = rest.contains("[SKIPPED]");
            match verdict(rest) {
                Some(Verdict::Passed) if skipped => {
                    out.insert(name, Verdict::Skipped);
                }
                Some(v) => {
                    out.insert(name, v);
                }
                None => pending = Some(name),
            }
        } else if let (Some(p), Some(v)) = (pending.as_ref(), verdict(l)) {
            let v = if skipped && v == Verdict::Passed {
                Verdict::Skipped
            } else {
                v
            };
            out.insert(p.clone(), v);
            pending = None;
        } else if pending.is_some() && l.contains("[SKIPPED]") {
            skipped = true;
        }
    }
    if let Some(p) = pending {
        out.insert(p, Verdict::Skipped);
    }
    out
}

fn tally(v: &Verdicts) -> String {
    let n = |x: Verdict| v.values().filter(|y| **y == x).count();
    format!(
        "{} tests: {} passed, {} failed, {} skipped",
        v.len(),
        n(Verdict::Passed),
        n(Verdict::Failed),
        n(Verdict::Skipped)
    )
}

fn passed(v: &Verdicts) -> usize {
    v.values().filter(|x| **x == Verdict::Passed).count()
}

/// Runs the battery against both targets and records one check per run plus the
/// comparisons in `m`: for each of our LUNs, no test LIO passes and it fails, and at least
/// as many tests passed as LIO; WriteAtomic16 passes on our file and device LUNs.
pub fn compare(m: &mut Matrix, filter: Option<&str>) {
    let mut lio = Verdicts::new();
    let mut ours: Vec<(&'static str, Verdicts)> = Vec::new();
    m.check("lio", "C.iscsi-test-cu", || {
        let runs = run(Against::Lio, filter)?;
        lio = runs.into_iter().next().map(|(_, v)| v).unwrap_or_default();
        Ok(tally(&lio))
    });
    m.check("ours", "C.iscsi-test-cu-ram-file-device", || {
        ours = run(Against::Ours, filter)?;
        Ok(ours
            .iter()
            .map(|(kind, v)| format!("{kind}: {}", tally(v)))
            .collect::<Vec<_>>()
            .join("; "))
    });
    for (kind, v) in &ours {
        m.check(
            "ours",
            &format!("C.no-test-lio-passes-and-ours-fails-{kind}"),
            || {
                if lio.is_empty() || v.is_empty() {
                    return Err(Error::Guest("a battery run is missing".into()));
                }
                let worse: Vec<&String> = lio
                    .iter()
                    .filter(|(_, x)| **x == Verdict::Passed)
                    .map(|(k, _)| k)
                    .filter(|k| v.get(*k) != Some(&Verdict::Passed))
                    .collect();
                let better: Vec<&String> = v
                    .iter()
                    .filter(|(k, x)| {
                        **x == Verdict::Passed && lio.get(*k) != Some(&Verdict::Passed)
                    })
                    .map(|(k, _)| k)
                    .collect();
                if !worse.is_empty() {
                    return Err(Error::Guest(format!(
                        "{} test(s) LIO passes and we fail on the {kind} LUN: {worse:?}",
                        worse.len()
                    )));
                }
                // The tally is checked, not only quoted: at least LIO's.
                if passed(v) < passed(&lio) {
                    return Err(Error::Guest(format!(
                        "the {kind} LUN passes {} tests, LIO {}",
                        passed(v),
                        passed(&lio)
                    )));
                }
                Ok(format!(
                    "none; {} passed against LIO's {}; we pass {} test(s) LIO fails: {}",
                    passed(v),
                    passed(&lio),
                    better.len(),
                    better
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                ))
            },
        );
    }
    m.check("ours", "C.write-atomic16-on-file-and-device", || {
        let mut seen = Vec::new();
        for (kind, v) in ours.iter().filter(|(k, _)| *k != "ram") {
            let atomic: Vec<(&String, &Verdict)> = v
                .iter()
                .filter(|(k, _)| k.contains("WriteAtomic16"))
                .collect();
            if atomic.is_empty() && filter.is_none() {
                return Err(Error::Guest(format!(
                    "no WriteAtomic16 test ran on the {kind} LUN"
                )));
            }
            if let Some((k, x)) = atomic.iter().find(|(_, x)| **x != Verdict::Passed) {
                return Err(Error::Guest(format!("{k} {x:?} on the {kind} LUN")));
            }
            seen.push(format!("{kind}: {} passed", atomic.len()));
        }
        if seen.len() != 2 {
            return Err(Error::Guest("the file and device runs are missing".into()));
        }
        Ok(seen.join(", "))
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
                    Suite: Read10\n  Test: Simple ...\n  Test: Other ...passed\n\
                    Suite: GetLBAStatus\n  Test: Simple ...    [SKIPPED] GET_LBA_STATUS is not implemented.\n\
                    [SKIPPED] GETLBASTATUS is not implemented.\npassed\n\
                    Test: Unmap ...passed\n\
                    Test: Inline ...    [SKIPPED] not supported ...passed\n";
        let v = parse(text);
        assert_eq!(v.get("Inquiry.Standard"), Some(&Verdict::Passed));
        assert_eq!(v.get("Inquiry.MaxLen"), Some(&Verdict::Failed));
        assert_eq!(v.get("Inquiry.BlockLimits"), Some(&Verdict::Failed));
        assert_eq!(v.get("Inquiry.Versions"), Some(&Verdict::Passed));
        assert_eq!(v.get("Read10.Simple"), Some(&Verdict::Skipped));
        assert_eq!(v.get("Read10.Other"), Some(&Verdict::Passed));
        assert_eq!(v.get("GetLBAStatus.Simple"), Some(&Verdict::Skipped));
        assert_eq!(v.get("GetLBAStatus.Unmap"), Some(&Verdict::Passed));
        assert_eq!(v.get("GetLBAStatus.Inline"), Some(&Verdict::Skipped));
    }
}
