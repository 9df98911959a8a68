//! Issue #6's single-path fault acceptance at the disk user's level: a thread reads and
//! writes the FUSE block file of a host daemon's SRP disk while the in-process target
//! daemon (a file-backed LUN, loopback 127.0.141.x) goes away.
//! - Restarted within fast_io_fail: the disk user sees no error and every block reads back
//!   what was last written to it.
//! - Gone past fast_io_fail and device loss: I/O fails with EIO once fast_io_fail and the
//!   multipath no-path wait are over (never hangs), then, at device loss, the block file
//!   disappears from the directory and the session is dropped.
//!
//! Needs root and /dev/fuse (CI has them). Every wait is bounded; the host daemon and the
//! target stop even when an assertion fails.

mod common;

use common::TempDir;
use common::verify::{Workload, wait_for};

use srp_hostd::{HostConfig, HostDaemon};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::fs::OpenOptions;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 141, 1));
const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 141, 2));
/// Blocks the workload touches (4 KiB each).
const SLOTS: u64 = 256;

fn start_target(dir: &Path) -> Daemon {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f1f000\"\nname = \"faults\"\nrdma_cm_port = 5598\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{TARGET}\"\n\n\
         [[lun]]\nname = \"vol\"\nfile = \"{}\"\nsize = \"16MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300f1f001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
        dir.join("vol.img").display()
    );
    let config = TargetConfig::from_str(&text, "faults.toml")
        .expect("config valid")
        .config;
    Daemon::start(config, DaemonOptions::new(providers::system())).expect("target starts")
}

fn host_config(dir: &Path, driver: &str) -> HostConfig {
    let text = format!(
        "[host]\nname = \"faults\"\nnode_guid = \"0x0002c90300f1f100\"\ndriver = \"{driver}\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nsweep_interval = \"500ms\"\n\
         cmd_timeout = \"5s\"\nlogin_timeout = \"2s\"\n\n\
         [timers]\nreconnect_delay = \"1s\"\nfast_io_fail = \"4s\"\ndev_loss = \"8s\"\n\n\
         [multipath]\nno_path_retry = \"2s\"\n\n\
         [[portal]]\naddress = \"{TARGET}\"\nlocal = [\"{LOCAL}\"]\n",
        dir.join("disks").display(),
        dir.join("host.sock").display()
    );
    HostConfig::from_str(&text, "host.toml").expect("host config valid")
}

fn the_disk(host: &HostDaemon) -> PathBuf {
    let disks = host.disks();
    assert_eq!(disks.len(), 1, "{disks:?}");
    PathBuf::from(&disks[0].path)
}

/// The host suite runs under both initiator driver models, one after the other.
#[test]
fn a_restarted_target_is_invisible_and_a_lost_one_fails_cleanly() {
    for driver in ["storport", "iscsi-model"] {
        eprintln!("driver model: {driver}");
        restarted_then_lost(driver);
    }
}

fn restarted_then_lost(driver: &str) {
    let dir = TempDir::new("faults");
    let target = start_target(dir.path());
    let host = HostDaemon::start(host_config(dir.path(), driver), providers::system())
        .expect("host daemon starts");
    let path = the_disk(&host);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open the block file");
    let work = Workload::start(&file, SLOTS);
    wait_for("I/O flowing", Duration::from_secs(20), || work.ops() > 200);
    // The target goes away mid-I/O and comes back 1.5 s later (fast_io_fail is 4 s).
    drop(target.shutdown());
    let before = work.ops();
    std::thread::sleep(Duration::from_millis(1500));
    let target = start_target(dir.path());
    wait_for("I/O resuming", Duration::from_secs(20), || {
        work.ops() > before + 200
    });
    let sessions = host.sessions();
    assert_eq!(sessions.len(), 1);
    assert!(sessions[0].logins >= 2, "it logged in again: {sessions:?}");
    // Every slot holds its last generation (read through the disk after stopping).
    work.stop_and_check(&file);

    // Now the target goes for good: I/O fails at fast_io_fail, the disk goes at dev_loss.
    drop(target.shutdown());
    let t = Instant::now();
    let mut buf = vec![0u8; 4096];
    let err = file
        .read_exact_at(&mut buf, 0)
        .expect_err("I/O fails once the target is gone");
    assert_eq!(err.raw_os_error(), Some(libc_eio()), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(12),
        "failed in bounded time: {:?}",
        t.elapsed()
    );
    wait_for(
        "the block file to disappear",
        Duration::from_secs(20),
        || !path.exists(),
    );
    assert!(host.sessions().is_empty(), "the lost session was dropped");
    let err = file
        .read_exact_at(&mut buf, 0)
        .expect_err("an open handle keeps failing");
    assert_eq!(err.raw_os_error(), Some(libc_eio()));
    drop(file);
    host.shutdown();
}

fn libc_eio() -> i32 {
    5
}
