//! Issue #30, Deliver 3: two target appliances serving one LU, as two machines — four
//! network namespaces: a Ceph cluster (`scripts/ceph-cluster.sh`, cephx) on 10.231.30.1,
//! appliance A (its cluster link 10.231.30.2, its host link 10.231.32.1), appliance B
//! (10.231.31.2 with a route to the cluster, 10.231.33.1), and the host (10.231.32.2,
//! 10.231.33.2). Both export the RBD image `rbd/vol` as LUN "vol": A from `port_base = 1`,
//! active/optimized, B from `port_base = 2`, active/non-optimized, each the other's
//! `[[peer]]`. The host daemon sees one disk with two paths, A's optimized and B's not, and
//! sends its I/O to A. Under `srpctl drill failover`'s verifying workload:
//! - `--fault kill`: A is SIGKILLed (`--kill-cmd`) and started again 3 s later
//!   (`--restart-cmd`): the I/O moves to B with 0 errors and 0 mismatches, and back to A
//!   once it returns (failback: A's READ count grows under new I/O, B's does not);
//! - `--fault link`: A's link to the host is cut while A still reaches the cluster (a
//!   partition), then restored: the same.
//!
//! Needs root, /dev/fuse, iproute2, nsenter and Ceph's packages (the script installs them).
//! Everything it starts — the cluster, the daemons, the namespaces, the FUSE mount — goes
//! on drop, even on failure; every step is bounded in time. With `SRP_DRILL_OUT=<dir>` the
//! drills' reports and pictures are copied there.

mod ceph;
#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
mod multipath;
mod netns;
mod process;

use common::TempDir;
use multipath::{NO_PATH_RETRY_S, disks, drill, read_block_file, session_from, stall_ms};
use netns::{Netns, VethPair};
use process::{HostProcess, SRPCTL, TargetProcess, output_within};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CLUSTER: &str = "10.231.30.1";
const A_HOST_LINK: &str = "10.231.32.1";
const B_HOST_LINK: &str = "10.231.33.1";
const HOST_TO_A: &str = "10.231.32.2";
const HOST_TO_B: &str = "10.231.33.2";
/// Seconds between the kill and the restart.
const DOWN_S: u64 = 3;
/// Seconds the host link of A stays cut.
const CUT_S: u64 = 4;

/// Appliance `name`'s configuration in `dir`: its port at `addr`, its IOC's groups from
/// `base` in state `alua`, its peer's group `peer_group` in state `peer_alua`.
fn appliance_config(
    dir: &Path,
    cluster: &ceph::Cluster,
    name: &str,
    (addr, base, alua): (&str, u16, &str),
    (peer, peer_group, peer_alua): (&str, u16, &str),
) -> PathBuf {
    let cfg = dir.join(format!("{name}.toml"));
    let n = base;
    let text = format!(
        "[target]\nname = \"{name}\"\nnode_guid = \"0x0002c90300eae{n}00\"\n\
         control_socket = \"{sock}\"\nstate_dir = \"{state}\"\nport_base = {base}\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{addr}\"\n\n\
         [[lun]]\nname = \"vol\"\nrbd = \"rbd/vol\"\nceph_conf = \"{conf}\"\n\
         ceph_client = \"srp\"\nceph_keyring = \"{keyring}\"\n\n\
         [[ioc]]\nname = \"ioc\"\nguid = \"0x0002c90300eae{n}01\"\nports = [\"p0\"]\n\
         alua = \"{alua}\"\nexports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[peer]]\nname = \"{peer}\"\nport_groups = [{peer_group}]\nalua = \"{peer_alua}\"\n",
        sock = dir.join(format!("{name}.sock")).display(),
        state = dir.join(format!("state-{name}")).display(),
        conf = cluster.conf.display(),
        keyring = cluster.client_keyring.as_ref().expect("cephx").display(),
    );
    std::fs::write(&cfg, text).expect("write appliance config");
    cfg
}

fn host_config(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let cfg = dir.join("host.toml");
    let disks = dir.join("disks");
    let socket = dir.join("host.sock");
    let text = format!(
        "[host]\nname = \"two-appliances\"\nnode_guid = \"0x0002c90300eaf100\"\n\
         disks_dir = \"{disks}\"\ncontrol_socket = \"{sock}\"\nsweep_interval = \"1s\"\n\n\
         [timers]\nreconnect_delay = \"1s\"\nfast_io_fail = \"15s\"\ndev_loss = \"600s\"\n\n\
         [multipath]\npolicy = \"round-robin\"\nno_path_retry = \"{NO_PATH_RETRY_S}s\"\n\n\
         [[portal]]\naddress = \"{A_HOST_LINK}\"\nlocal = [\"{HOST_TO_A}\"]\n\n\
         [[portal]]\naddress = \"{B_HOST_LINK}\"\nlocal = [\"{HOST_TO_B}\"]\n",
        disks = disks.display(),
        sock = socket.display(),
    );
    std::fs::write(&cfg, text).expect("write host config");
    (cfg, disks, socket)
}

/// Waits (up to 60 s) for one disk whose path from `HOST_TO_A` is active/optimized and
/// whose path from `HOST_TO_B` is active/non-optimized, both active; returns it.
fn wait_both_paths(socket: &Path) -> Value {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let list = disks(socket);
        if let Some([disk]) = list.as_array().map(Vec::as_slice) {
            let path = |local: &str| {
                disk["paths"].as_array().and_then(|ps| {
                    ps.iter()
                        .find(|p| p["local"] == local)
                        .map(|p| (p["state"].clone(), p["alua"].clone()))
                })
            };
            let want_a = Some((Value::from("active"), Value::from("active/optimized")));
            let want_b = Some((Value::from("active"), Value::from("active/non-optimized")));
            if path(HOST_TO_A) == want_a && path(HOST_TO_B) == want_b {
                return disk.clone();
            }
        }
        assert!(
            Instant::now() < end,
            "no disk with A's path optimized and B's non-optimized within 60 s: {list:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The READ commands appliance `socket` has executed on its LUN.
fn reads_at(socket: &Path) -> u64 {
    let mut cmd = Command::new(SRPCTL);
    cmd.args(["target", "luns", "--json", "--socket"])
        .arg(socket);
    let out = output_within(cmd, 15);
    assert!(
        out.status.success(),
        "srpctl target luns: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let luns: Value = serde_json::from_slice(&out.stdout).expect("luns --json");
    luns[0]["counters"]["reads"]
        .as_u64()
        .unwrap_or_else(|| panic!("no read counter: {luns:#}"))
}

/// Failback: new reads through the disk go to A (optimized), none to B.
fn reads_go_to_a(file: &str, a: &Path, b: &Path, when: &str) {
    let (a0, b0) = (reads_at(a), reads_at(b));
    read_block_file(file);
    let (a1, b1) = (reads_at(a), reads_at(b));
    assert!(
        a1 - a0 >= 8 && b1 == b0,
        "{when}: reads through A {} and through B {} (A optimized: all at A)",
        a1 - a0,
        b1 - b0
    );
}

#[test]
fn failover_and_failback_across_two_appliances() {
    let dir = TempDir::new("two-appliances");
    let cl = Netns::new("srpcl");
    let na = Netns::new("srpa");
    let nb = Netns::new("srpb");
    let nh = Netns::new("srph");
    let _cl_a = VethPair::new(&cl, "cla", CLUSTER, &na, "acl", "10.231.30.2");
    let _cl_b = VethPair::new(&cl, "clb", "10.231.31.1", &nb, "bcl", "10.231.31.2");
    nb.ip(&["route", "add", "10.231.30.0/24", "via", "10.231.31.1"]);
    let a_link = VethPair::new(&nh, "ha", HOST_TO_A, &na, "ah", A_HOST_LINK);
    let _b_link = VethPair::new(&nh, "hb", HOST_TO_B, &nb, "bh", B_HOST_LINK);

    let cluster = ceph::Cluster::start(&cl, CLUSTER, true);
    let made = cluster.rbd(
        &nb,
        &[
            "create",
            "--size",
            "64M",
            "--image-feature",
            "layering",
            "rbd/vol",
        ],
    );
    assert!(
        made.status.success(),
        "create rbd/vol from B's namespace: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let a_cfg = appliance_config(
        dir.path(),
        &cluster,
        "a",
        (A_HOST_LINK, 1, "active/optimized"),
        ("b", 2, "active/non-optimized"),
    );
    let b_cfg = appliance_config(
        dir.path(),
        &cluster,
        "b",
        (B_HOST_LINK, 2, "active/non-optimized"),
        ("a", 1, "active/optimized"),
    );
    let (a_sock, b_sock) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let pid_file = dir.path().join("a.pid");
    let log = dir.path().join("a-restarted.log");
    // Declared before the processes: dropped after them (the restarted appliance last).
    let _restarted = process::PidFileGuard {
        pid_file: pid_file.clone(),
        config: a_cfg.clone(),
    };
    let a = TargetProcess::start_command(na.exec(SRPCTL), &a_cfg);
    std::fs::write(&pid_file, a.pid().to_string()).expect("write pid file");
    let _b = TargetProcess::start_command(nb.exec(SRPCTL), &b_cfg);
    let (host_cfg, disks_dir, socket) = host_config(dir.path());
    let host = HostProcess::start_command(nh.exec(SRPCTL), &host_cfg, &disks_dir);

    // One disk over both appliances: A's path optimized, B's not; I/O goes to A.
    let disk = wait_both_paths(&socket);
    assert_eq!(disk["blocks"].as_u64(), Some((64 << 20) / 512), "{disk:#}");
    let file = disk["path"].as_str().expect("block file").to_owned();
    reads_go_to_a(&file, &a_sock, &b_sock, "at start");

    // kill -9 of A under the verifying workload, A started again 3 s later.
    let kill = format!("kill -9 \"$(cat '{}')\"", pid_file.display());
    let restart = format!(
        "nsenter --net=/run/netns/{ns} -- '{SRPCTL}' target run -c '{cfg}' >>'{log}' 2>&1 \
         </dev/null & echo $! >'{pid}'",
        ns = na.name(),
        cfg = a_cfg.display(),
        log = log.display(),
        pid = pid_file.display()
    );
    let (down, after) = (DOWN_S.to_string(), "6".to_owned());
    let r = drill(
        &nh,
        &socket,
        dir.path(),
        "two-appliances-kill",
        &[
            "--fault",
            "kill",
            "--kill-cmd",
            &kill,
            "--restart-cmd",
            &restart,
            "--warmup",
            "2",
            "--fault-secs",
            &down,
            "--after",
            &after,
            "--region-mb",
            "8",
            "--io-size",
            "4096",
        ],
        120,
    );
    let stall = stall_ms(&r);
    assert!(
        stall < 5000.0,
        "kill: max stall {stall} ms: the I/O should have moved to B, not waited for A"
    );
    assert!(
        r["failover_ms"].as_f64().is_some(),
        "kill: no I/O after the kill: {r:#}"
    );
    let new_pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    assert_ne!(
        new_pid,
        a.pid(),
        "the restart command started a new appliance A"
    );
    drop(a);
    wait_both_paths(&socket);
    reads_go_to_a(&file, &a_sock, &b_sock, "after A came back");

    // A partition: A's link to the host cut while A still reaches the cluster.
    let disk = wait_both_paths(&socket);
    let session = session_from(&disk, HOST_TO_A).to_string();
    let cut = CUT_S.to_string();
    let r = drill(
        &nh,
        &socket,
        dir.path(),
        "two-appliances-partition",
        &[
            "--fault",
            "link",
            "--path",
            &session,
            "--link-cmd-down",
            &a_link.cmd_a("down"),
            "--link-cmd-up",
            &a_link.cmd_a("up"),
            "--warmup",
            "2",
            "--fault-secs",
            &cut,
            "--after",
            &after,
            "--region-mb",
            "8",
            "--io-size",
            "4096",
        ],
        120,
    );
    let stall = stall_ms(&r);
    assert!(stall < 5000.0, "partition: max stall {stall} ms");
    assert!(
        r["failover_ms"].as_f64().is_some(),
        "partition: no I/O after the cut"
    );
    wait_both_paths(&socket);
    reads_go_to_a(&file, &a_sock, &b_sock, "after the partition healed");
    host.stop();
}
