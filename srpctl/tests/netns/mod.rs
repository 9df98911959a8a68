//! Network namespaces and veth pairs for tests that need several hosts on one machine.
//!
//! [`Netns`] adds a namespace named after a tag, this process's pid and a counter (so
//! parallel tests and parallel runs never collide), brings its `lo` up, and deletes it on
//! drop, even after a panic, killing whatever still runs in it first. [`VethPair`] joins
//! two namespaces with a veth pair, one end in each, addressed (or not: a wire's end) and
//! up; `set_down`/`set_up` cut and restore the link. Interfaces live and die with their
//! namespaces.
//!
//! Programs run in a namespace through [`Netns::exec`], which is `nsenter --net=…`: it
//! enters only the network namespace. (`ip netns exec` also unshares the mount namespace,
//! so a FUSE mount made by a daemon started that way would be invisible to the test.)
//! `Command`s from `exec` exec the program in place, so the child's pid is the program's.
#![allow(dead_code, unreachable_pub)]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Runs `ip <args>`; panics with its stderr unless it succeeds.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace, deleted on drop.
pub struct Netns {
    name: String,
}

impl Netns {
    /// Adds namespace `<tag>-<pid>-<n>` (tag: a few letters) with `lo` up.
    pub fn new(tag: &str) -> Netns {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// The namespace's name (`ip netns exec NAME`, `ip -n NAME`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME <args>`; panics unless it succeeds.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// A command running `program` inside the namespace (network namespace only; the
    /// mount namespace stays the test's).
    pub fn exec(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{}", self.name))
            .arg("--")
            .arg(program);
        c
    }

    /// The pids of processes in the namespace.
    pub fn pids(&self) -> Vec<i32> {
        Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Whatever still runs in it was started by this test: end it, by pid.
        for _ in 0..50 {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for p in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A veth pair: end `a` in one namespace, end `b` in another, each with an address (a
/// /24) and up. The interfaces go with their namespaces; drop the pair before them or not.
pub struct VethPair {
    ns_a: String,
    a: String,
    ns_b: String,
    b: String,
}

impl VethPair {
    /// Creates `a` (address `addr_a`, e.g. "10.231.1.2") in `ns_a` and `b` (`addr_b`) in
    /// `ns_b`, both up.
    pub fn new(ns_a: &Netns, a: &str, addr_a: &str, ns_b: &Netns, b: &str, addr_b: &str) -> Self {
        Self::create(ns_a, a, Some(addr_a), ns_b, b, Some(addr_b))
    }

    /// As [`VethPair::new`], an end without an address where it has none (a wire's end).
    pub fn create(
        ns_a: &Netns,
        a: &str,
        addr_a: Option<&str>,
        ns_b: &Netns,
        b: &str,
        addr_b: Option<&str>,
    ) -> Self {
        ip(&[
            "link",
            "add",
            a,
            "netns",
            ns_a.name(),
            "type",
            "veth",
            "peer",
            "name",
            b,
            "netns",
            ns_b.name(),
        ]);
        if let Some(addr) = addr_a {
            ns_a.ip(&["addr", "add", &format!("{addr}/24"), "dev", a]);
        }
        if let Some(addr) = addr_b {
            ns_b.ip(&["addr", "add", &format!("{addr}/24"), "dev", b]);
        }
        let pair = VethPair {
            ns_a: ns_a.name().to_owned(),
            a: a.to_owned(),
            ns_b: ns_b.name().to_owned(),
            b: b.to_owned(),
        };
        pair.set_up();
        pair
    }

    /// The shell command that sets end `a` `state` ("up" or "down"), for fault options.
    pub fn cmd_a(&self, state: &str) -> String {
        format!("ip -n {} link set {} {state}", self.ns_a, self.a)
    }

    /// Cuts the link (end `a` down).
    pub fn set_down(&self) {
        ip(&["-n", &self.ns_a, "link", "set", &self.a, "down"]);
    }

    /// Both ends up.
    pub fn set_up(&self) {
        ip(&["-n", &self.ns_a, "link", "set", &self.a, "up"]);
        ip(&["-n", &self.ns_b, "link", "set", &self.b, "up"]);
    }
}
