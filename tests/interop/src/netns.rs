//! A network namespace owned by the test.

use crate::{Result, host};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Prefix of every namespace the harness creates: `srp-interop-<pid>-<n>`.
pub const PREFIX: &str = "srp-interop-";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace named `srp-interop-<pid>-<n>` with `lo` up. On drop every process
/// still inside it is killed and the namespace is deleted. Creating one also removes the
/// namespaces left behind by harness processes that no longer exist.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates a fresh namespace with `lo` up.
    pub fn new() -> Result<NetNs> {
        reap_stale();
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        host("ip", &["netns", "add", &name])?;
        let ns = NetNs { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name (for `ip netns exec`, `ip -n`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n <ns> <args>` and returns its standard output.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        host("ip", &all)
    }

    /// A command that runs `program` inside the namespace (`ip netns exec`), to be given its
    /// arguments and spawned by the caller.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// The processes inside the namespace.
    pub fn pids(&self) -> Vec<i32> {
        pids_of(&self.name)
    }

    /// Whether a namespace of this name exists.
    pub fn exists(name: &str) -> bool {
        Path::new("/run/netns").join(name).exists()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        remove(&self.name);
    }
}

fn pids_of(name: &str) -> Vec<i32> {
    host("ip", &["netns", "pids", name])
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kills everything in the namespace, then deletes it.
fn remove(name: &str) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = pids_of(name);
        if pids.is_empty() || Instant::now() > end {
            break;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = host("ip", &["netns", "del", name]);
}

/// Removes namespaces whose creating process is gone (a test killed before its drops ran).
fn reap_stale() {
    let Ok(list) = host("ip", &["netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            remove(name);
        }
    }
}
