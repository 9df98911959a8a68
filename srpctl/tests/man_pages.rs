//! `srpctl man` and `srpctl completions` as a packager runs them: every subcommand path the
//! binary's help lists (walked from `srpctl --help` down) gets a page naming it and
//! carrying its about text, and no page is left over; the shells' completion scripts name
//! the subcommands.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the built `srpctl`; its stdout, after checking it succeeded.
fn srpctl(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_srpctl"))
        .args(args)
        .output()
        .expect("run srpctl");
    assert!(
        out.status.success(),
        "srpctl {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// A directory of our own under the system's temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("srpctl-{what}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `Commands:` section of a help text: (name, about) per line, `help` left out.
fn commands(help: &str) -> Vec<(String, String)> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let (name, about) = l.trim().split_once(char::is_whitespace)?;
            Some((name.to_owned(), about.trim().to_owned()))
        })
        .filter(|(name, _)| name != "help")
        .collect()
}

/// Every subcommand path under `path` with its about text, from the binary's help.
fn walk(path: &[String], out: &mut Vec<(Vec<String>, String)>) {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    for (name, about) in commands(&srpctl(&args)) {
        let mut sub = path.to_vec();
        sub.push(name);
        out.push((sub.clone(), about));
        walk(&sub, out);
    }
}

/// A page's text with roff's escapes of `-`, `'` and `\` undone.
fn plain(page: &str) -> String {
    page.replace(r"\*(Aq", "'")
        .replace(r"\&", "")
        .replace(r"\-", "-")
        .replace(r"\\", r"\")
}

/// The pages written into `dir`, by file name.
fn pages(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read the pages' directory")
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_subcommand_has_a_page_with_its_name_and_about() {
    let mut paths = Vec::new();
    walk(&[], &mut paths);
    let listed: Vec<String> = paths.iter().map(|(p, _)| p.join(" ")).collect();
    for known in [
        "decode",
        "demo",
        "discover",
        "target run",
        "target ioc disable",
        "man",
    ] {
        assert!(listed.iter().any(|p| p == known), "{known}: {listed:?}");
    }
    let scratch = Scratch::new("man-pages");
    let out = scratch.0.join("man1");
    let printed = srpctl(&["man", "--out", out.to_str().expect("utf-8 path")]);
    assert_eq!(printed.lines().count(), paths.len() + 1, "{printed}");

    let top = plain(&std::fs::read_to_string(out.join("srpctl.1")).expect("srpctl.1"));
    assert!(top.contains(".TH srpctl 1"), "{top}");
    assert!(top.contains("SRP storage stack"), "{top}");
    let mut want = vec!["srpctl.1".to_owned()];
    for (path, about) in &paths {
        let file = format!("srpctl-{}.1", path.join("-"));
        let page =
            std::fs::read_to_string(out.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let page = plain(&page);
        assert!(!page.trim().is_empty(), "{file} is empty");
        let title = format!("srpctl-{}", path.join("-"));
        let usage = format!("srpctl {}", path.join(" "));
        assert!(page.contains(&format!(".TH {title} 1")), "{file}:\n{page}");
        assert!(page.contains(&usage), "{file} lacks {usage:?}:\n{page}");
        assert!(
            page.contains(about.as_str()),
            "{file} lacks {about:?}:\n{page}"
        );
        // The parent's page refers to it.
        let parent = match path.len() {
            1 => "srpctl.1".to_owned(),
            n => format!("srpctl-{}.1", path[..n - 1].join("-")),
        };
        let parent_page = plain(&std::fs::read_to_string(out.join(&parent)).expect("parent"));
        assert!(
            parent_page.contains(&format!("{title}(1)")),
            "{parent} does not list {title}(1)"
        );
        want.push(file);
    }
    want.sort();
    assert_eq!(pages(&out), want, "a page for each path, and no other");
}

#[test]
fn completions_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = srpctl(&["completions", shell]);
        assert!(script.len() > 1000, "{shell}: {script}");
        if matches!(shell, "bash" | "zsh" | "fish") {
            for known in ["target", "discover", "demo", "clear-flush-error"] {
                assert!(script.contains(known), "{shell} lacks {known}:\n{script}");
            }
        }
    }
    let scratch = Scratch::new("completions");
    let printed = srpctl(&[
        "completions",
        "bash",
        "--out",
        scratch.0.to_str().expect("utf-8 path"),
    ]);
    let file = scratch.0.join("srpctl.bash");
    assert_eq!(printed.trim(), file.display().to_string());
    let written = std::fs::read_to_string(&file).expect("srpctl.bash");
    assert_eq!(written, srpctl(&["completions", "bash"]));
}
