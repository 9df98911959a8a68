//! The test cluster itself (`scripts/ceph-cluster.sh`, `tests/ceph/`): started with cephx in
//! a namespace of its own, reached from another namespace over a veth pair — an image
//! created, written, listed by `client.srp`, and refused to a client without its key — then
//! stopped: every daemon gone, its directory removed. The RBD LUN tests build on it.

mod ceph;
mod netns;

use ceph::Cluster;
use netns::{Netns, VethPair};
use std::time::Instant;

#[test]
fn a_cephx_cluster_in_a_namespace_serves_another_and_goes_away() {
    let t0 = Instant::now();
    let ns_ceph = Netns::new("ceph");
    let ns_host = Netns::new("cephc");
    let _wire = VethPair::new(
        &ns_ceph,
        "cph0",
        "10.231.9.1",
        &ns_host,
        "cph1",
        "10.231.9.2",
    );
    let (dir, pids) = {
        let cluster = Cluster::start(&ns_ceph, "10.231.9.1", true);
        eprintln!("cluster up in {:?}", t0.elapsed());
        assert_eq!(cluster.pids.len(), 3, "a monitor, a manager and an OSD");
        let ok = |out: std::process::Output, what: &str| {
            assert!(
                out.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        ok(
            cluster.rbd(&ns_host, &["create", "--size", "16M", "rbd/smoke"]),
            "create an image",
        );
        let bench = ok(
            cluster.rbd(
                &ns_host,
                &[
                    "bench",
                    "--io-type",
                    "write",
                    "--io-size",
                    "4K",
                    "--io-total",
                    "1M",
                    "rbd/smoke",
                ],
            ),
            "write to it",
        );
        assert!(bench.contains("ops: 256"), "{bench}");
        let ls = ok(cluster.rbd(&ns_host, &["ls", "rbd"]), "list the pool");
        assert_eq!(ls.trim(), "smoke");
        // Without client.srp's key: refused.
        let out = ns_host
            .exec("timeout")
            .args(["60", "rbd", "-c"])
            .arg(&cluster.conf)
            .args(["--id", "srp", "--keyring", "/dev/null", "ls", "rbd"])
            .output()
            .expect("run rbd");
        assert!(!out.status.success(), "a client without the key is refused");
        (cluster.dir().to_owned(), cluster.pids.clone())
    };
    // Dropped: stopped.
    assert!(!dir.exists(), "{} removed", dir.display());
    for p in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{p}")).exists(),
            "daemon {p} still runs"
        );
    }
    eprintln!("cluster test done in {:?}", t0.elapsed());
}
