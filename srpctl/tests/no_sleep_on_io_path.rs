//! No sleep on the I/O path (issue #13): every file one I/O passes through — the soft HCA,
//! the access layer's verbs and GSI, the SRP core, the target's loop, channels, executor and
//! backends, the emulated port drivers' request paths and their shared primitives, the SRP
//! transport, the SRP miniport and the iSCSI-model
//! SRP driver, the multipath
//! disk, the host's disk and block files — waits only for an event (a condition variable,
//! epoll, a doorbell), never for a timer it set itself to look again. A `sleep(` there
//! fails this test unless listed below with the reason it is not a poll. Test modules and
//! `*_tests.rs` files are not the I/O path.

use std::path::{Path, PathBuf};

/// Directories and files of the I/O path, from the workspace root.
const IO_PATH: &[&str] = &[
    "hca/src/driver",
    "hca/src/engine",
    "hca/src/qp",
    "hca/src/verbs",
    "hca/src/mr",
    "hca/src/wire",
    "access-layer/src/verbs",
    "access-layer/src/gsi",
    "access-layer/src/cm",
    "srp/src",
    "srp-target/src/io",
    "srp-target/src/daemon",
    "srp-target/src/exec",
    "srp-target/src/backend",
    "srp-initiator/src",
    "win-port/src",
    "srp-initiator-storport/src/srp",
    "srp-initiator-storport/src/port",
    "srp-initiator-iscsi-model/src/port",
    "srp-initiator-iscsi-model/src/srp",
    "srp-hostd/src/adapter.rs",
    "mpio/src",
    "srp-hostd/src/disk.rs",
    "srp-host/src",
];

/// Sleeps that are not polls: (file, the line's text, why).
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "srp-initiator-storport/src/port/worker.rs",
        "std::thread::sleep(shared.config.tick);",
        "the port's timer thread (DPC watchdog, request timeouts) ticks while requests are \
         held; no request waits for it",
    ),
    (
        "srp-initiator-storport/src/port/driver.rs",
        "std::thread::sleep(Duration::from_millis(1));",
        "Port::stop draining the adapter before StopAdapter: administration, not I/O",
    ),
    (
        "win-port/src/ke.rs",
        "std::thread::sleep(d);",
        "KeStallExecutionProcessor's model, offered to miniports and trapped by the verifier \
         at dispatch level; the SRP miniport never calls it",
    ),
    (
        "mpio/src/mpdisk.rs",
        "std::thread::sleep(pause);",
        "the DSM's retry back-off (BUSY, becoming ready): a delay the device asked for",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn rust_files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(p)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for e in entries {
            rust_files(&e, out);
        }
    } else if p.extension().is_some_and(|e| e == "rs") {
        out.push(p.to_path_buf());
    }
}

/// The file's text without its test modules (`#[cfg(test)] mod … { … }`, found by brace
/// counting; a test-only item that is not a module is kept).
fn non_test_text(p: &Path) -> String {
    let text = std::fs::read_to_string(p).expect("read source");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        // The item after the attribute and any further attributes.
        let is_mod = after
            .lines()
            .skip(1)
            .find(|l| !l.trim_start().starts_with("#["))
            .is_some_and(|l| l.trim_start().starts_with("mod "));
        let Some(open) = after.find('{').filter(|_| is_mod) else {
            out.push_str("#[cfg(test)]");
            rest = &after["#[cfg(test)]".len()..];
            continue;
        };
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn nothing_on_the_io_path_sleeps_to_poll() {
    let root = root();
    let mut files = Vec::new();
    for p in IO_PATH {
        let at = root.join(p);
        assert!(at.exists(), "{p} moved: update this list");
        rust_files(&at, &mut files);
    }
    assert!(files.len() > 100, "the I/O path has {} files?", files.len());
    let mut found = Vec::new();
    let mut used = vec![false; ALLOWED.len()];
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .expect("under root")
            .to_string_lossy()
            .into_owned();
        if rel.ends_with("_tests.rs") || rel.contains("/tests/") {
            continue;
        }
        for (n, line) in non_test_text(f).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !code.contains("sleep(") {
                continue;
            }
            match ALLOWED
                .iter()
                .position(|(file, text, _)| *file == rel && line.trim() == *text)
            {
                Some(i) => used[i] = true,
                None => found.push(format!("{rel}:{}: {}", n + 1, line.trim())),
            }
        }
    }
    assert!(
        found.is_empty(),
        "sleeps on the I/O path (wait for an event instead):\n{}",
        found.join("\n")
    );
    for (i, (file, text, _)) in ALLOWED.iter().enumerate() {
        assert!(used[i], "allowed sleep no longer there: {file}: {text}");
    }
}
