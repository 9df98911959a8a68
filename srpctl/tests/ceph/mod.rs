//! A real Ceph cluster for tests: `scripts/ceph-cluster.sh` (one monitor, one manager, one
//! BlueStore OSD on a file, the pool `rbd` of size 1) started inside a network namespace
//! of the test's, bound to that namespace's address so the test's other namespaces reach it.
//! [`Cluster::start`] is bounded by the script's own timeout; dropping the cluster stops its
//! daemons and removes its directory, even after a panic (the namespace's drop then kills
//! whatever is left in it).
#![allow(dead_code, unreachable_pub)]

use super::netns::Netns;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The script, from the workspace root.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ceph-cluster.sh")
}

/// A running cluster; stopped on drop.
pub struct Cluster {
    ns: String,
    dir: PathBuf,
    /// The monitor's address.
    pub addr: String,
    /// Its `ceph.conf`.
    pub conf: PathBuf,
    /// `client.srp`'s keyring when the cluster runs with cephx.
    pub client_keyring: Option<PathBuf>,
    /// The daemons' pids, as their pid files said after the start.
    pub pids: Vec<i32>,
}

impl Cluster {
    /// Starts a cluster in `ns`, its daemons bound to `addr` (an address of `ns`); `cephx`:
    /// with authentication. Panics with the script's output if the start fails.
    pub fn start(ns: &Netns, addr: &str, cephx: bool) -> Cluster {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "srp-ceph-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut cmd = ns.exec("bash");
        cmd.arg(script())
            .arg("start")
            .arg(&dir)
            .args(["--addr", addr, "--timeout", "180"]);
        if cephx {
            cmd.arg("--cephx");
        }
        let out = cmd.output().expect("run scripts/ceph-cluster.sh");
        let cluster = Cluster {
            ns: ns.name().to_owned(),
            dir: dir.clone(),
            addr: addr.to_owned(),
            conf: dir.join("ceph.conf"),
            client_keyring: cephx.then(|| dir.join("client.srp.keyring")),
            pids: pids_in(&dir.join("run")),
        };
        assert!(
            out.status.success(),
            "the Ceph cluster did not start:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster
    }

    /// The directory the cluster lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `rbd <args>` from namespace `from` as `client.srp` (cephx) or the default
    /// client (no auth), against this cluster.
    pub fn rbd(&self, from: &Netns, args: &[&str]) -> Output {
        let mut cmd = from.exec("timeout");
        cmd.args(["60", "rbd", "-c"]).arg(&self.conf);
        if let Some(k) = &self.client_keyring {
            cmd.args(["--id", "srp", "--keyring"]).arg(k);
        }
        cmd.args(args).output().expect("run rbd")
    }
}

/// The pids in the `*.pid` files of `run`.
fn pids_in(run: &Path) -> Vec<i32> {
    std::fs::read_dir(run)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pid"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns))
            .arg("--")
            .arg("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}
