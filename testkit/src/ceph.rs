//! A real Ceph cluster for a test (`scripts/ceph-cluster.sh`: one monitor, one manager, one
//! OSD, the pool `rbd` of size 1, cephx with the client `client.srp`), bound to a loopback
//! address of the test's own and stopped (its directory removed) on drop, even after a
//! panic. Tests that need the cluster in a network namespace run the script themselves
//! (srpctl's `tests/ceph`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster, stopped on drop.
pub struct CephCluster {
    dir: PathBuf,
}

impl CephCluster {
    /// Starts a cluster whose daemons bind to `addr` (a 127.x.y.z of the test's own), with
    /// cephx; `tag` names its directory. Panics with the script's output if it fails.
    pub fn start(addr: &str, tag: &str) -> CephCluster {
        let dir = std::env::temp_dir().join(format!("srp-ceph-{tag}-{}", std::process::id()));
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(&dir)
            .args(["--addr", addr, "--cephx", "--timeout", "180"])
            .output()
            .expect("run scripts/ceph-cluster.sh");
        let c = CephCluster { dir };
        assert!(
            out.status.success(),
            "the Ceph cluster did not start:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        c
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its `ceph.conf`.
    pub fn conf(&self) -> PathBuf {
        self.dir.join("ceph.conf")
    }

    /// `client.srp`'s keyring (rbd profile on the pool `rbd`).
    pub fn client_keyring(&self) -> PathBuf {
        self.dir.join("client.srp.keyring")
    }

    /// Runs `rbd <args>` as the administrator; panics unless it succeeds; its stdout.
    pub fn rbd(&self, args: &[&str]) -> Vec<u8> {
        let out = Command::new("timeout")
            .args(["60", "rbd", "-c"])
            .arg(self.conf())
            .args(args)
            .output()
            .expect("run rbd");
        assert!(
            out.status.success(),
            "rbd {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }
}

impl Drop for CephCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ceph-cluster.sh")
}
