//! The fuzz corpus as a regression suite, on stable: every file of `fuzz/corpus/<target>/`
//! (and of `fuzz/artifacts/<target>/`, where a fuzz run leaves a failing input) goes
//! through the same check code the fuzz target runs. Run by `scripts/test.sh` as
//! `cargo test --manifest-path fuzz/Cargo.toml --no-default-features --locked`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `dir`, sorted; none if it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// Replays `target`'s corpus and artifacts through `run`; fails naming every file that
/// fails (the panic message of each is printed above).
fn replay(target: &str, run: fn(&[u8])) {
    let mut failed = Vec::new();
    let mut n = 0;
    for dir in ["corpus", "artifacts"] {
        for f in files(&root().join(dir).join(target)) {
            let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            n += 1;
            if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
                failed.push(f.display().to_string());
            }
        }
    }
    // A target with no inputs replays nothing and would pass whatever its code does.
    assert!(
        n > 0,
        "{target}: no inputs in corpus/{target}/ or artifacts/{target}/ (a missing corpus \
         proves nothing; seed it: scripts/fuzz-smoke.sh)"
    );
    assert!(
        failed.is_empty(),
        "{target}: {} of {n} inputs fail:\n{}",
        failed.len(),
        failed.join("\n")
    );
    eprintln!("{target}: {n} inputs pass");
}

macro_rules! corpus_tests {
    ($($t:ident),+ $(,)?) => {
        $(
            #[test]
            fn $t() {
                replay(stringify!($t), srp_stack_fuzz::$t::run);
            }
        )+

        /// The tests above, `TARGETS`, the corpus folders and the fuzz binaries name the
        /// same targets.
        #[test]
        fn every_target_is_replayed() {
            let tested = [$(stringify!($t)),+];
            let listed: Vec<&str> = srp_stack_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
            assert_eq!(listed, tested);
            for dir in std::fs::read_dir(root().join("corpus")).into_iter().flatten().flatten() {
                let name = dir.file_name().to_string_lossy().into_owned();
                assert!(tested.contains(&name.as_str()), "corpus/{name} has no target");
            }
            let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("manifest");
            let bins = manifest.matches("[[bin]]").count();
            assert_eq!(bins, tested.len(), "a fuzz binary per target");
            for t in tested {
                assert!(manifest.contains(&format!("name = \"{t}\"")), "no binary for {t}");
            }
        }
    };
}

corpus_tests!(
    srp_iu,
    scsi_cdb,
    scsi_sense,
    mad,
    roce_packet,
    ctl_msg,
    target_channel,
    pr_out,
    lu_data,
    ctl_target,
    ctl_host,
    config_target,
    config_host,
);
