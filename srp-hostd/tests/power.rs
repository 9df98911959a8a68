//! Issue #31, Deliver 5: `srpctl host power suspend|resume` on the product path, under a
//! verifying workload, for both driver models. A host daemon logged in to a target's two IOCs
//! from two local addresses (one multipath disk, two paths; loopback 127.0.155.x) is suspended
//! through its control socket while a thread writes, reads back and compares its block
//! file: each session's driver drains and logs out before its HCA goes down (the target
//! sees two SRP_I_LOGOUTs — a logout that could not reach it would end as a timeout), the
//! sessions show `suspended`, the I/O that arrives meanwhile — the workload's and a read
//! issued while suspended — is held past multipath's no-path queueing time (no round trip
//! completes) and no path fails over; resumed, each HCA comes up, each driver logs in
//! again, the held I/O completes, and the workload ends with 0 errors and 0 mismatches,
//! every slot holding its last generation. A second suspend request while suspended, and
//! a login, are refused with their reasons. A shutdown while suspended resumes the
//! sessions first, so a read held by them completes and the shutdown ends.
//!
//! Needs root and /dev/fuse (CI has them). Every wait is bounded; the daemons stop even
//! when an assertion fails.

mod common;

use common::TempDir;
use common::verify::{Workload, wait_for};
use srp_hostd::control::{HostClient, HostControlError, LoginSpec};
use srp_hostd::{HostConfig, HostDaemon};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use std::fs::OpenOptions;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 155, 1));
const LOCAL_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 155, 2));
const LOCAL_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 155, 3));
const SLOTS: u64 = 128;

fn start_target(dir: &Path) -> Daemon {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f5f000\"\nname = \"power\"\nrdma_cm_port = 5613\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{TARGET}\"\n\n\
         [[lun]]\nname = \"vol\"\nfile = \"{}\"\nsize = \"16MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300f5f001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300f5f002\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n",
        dir.join("vol.img").display()
    );
    let config = TargetConfig::from_str(&text, "power.toml")
        .expect("config valid")
        .config;
    Daemon::start(config, DaemonOptions::new(providers::system())).expect("target starts")
}

fn host_config(dir: &Path, driver: &str) -> HostConfig {
    let text = format!(
        "[host]\nname = \"power\"\nnode_guid = \"0x0002c90300f5f100\"\ndriver = \"{driver}\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nsweep_interval = \"500ms\"\n\
         cmd_timeout = \"10s\"\nlogin_timeout = \"3s\"\n\n\
         [timers]\nreconnect_delay = \"1s\"\nfast_io_fail = \"4s\"\ndev_loss = \"8s\"\n\n\
         [multipath]\nno_path_retry = \"1s\"\n\n\
         [[portal]]\naddress = \"{TARGET}\"\nlocal = [\"{LOCAL_A}\", \"{LOCAL_B}\"]\n",
        dir.join("disks").display(),
        dir.join("host.sock").display()
    );
    HostConfig::from_str(&text, "host.toml").expect("host config valid")
}

/// The suite under both initiator driver models, one after the other.
#[test]
fn a_suspended_host_holds_its_io_and_a_resumed_one_completes_it() {
    for driver in ["storport", "iscsi-model"] {
        eprintln!("driver model: {driver}");
        suspend_and_resume(driver);
    }
}

fn suspend_and_resume(driver: &str) {
    let dir = TempDir::new("power");
    let target = start_target(dir.path());
    let host = HostDaemon::start(host_config(dir.path(), driver), providers::system())
        .expect("host daemon starts");
    wait_for("two sessions", Duration::from_secs(20), || {
        host.sessions().len() == 2
    });
    let disks = host.disks();
    assert_eq!(disks.len(), 1, "one disk over two paths: {disks:?}");
    assert_eq!(disks[0].paths.len(), 2, "{disks:?}");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&disks[0].path)
        .expect("open the block file");
    let work = Workload::start(&file, SLOTS);
    wait_for("I/O flowing", Duration::from_secs(20), || work.ops() > 200);
    let failovers_before = host.disks()[0].failovers;
    while target.events().try_recv().is_ok() {}

    let mut ctl = HostClient::connect(dir.path().join("host.sock")).expect("control socket");
    let lines = ctl.power(true).expect("suspended");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines.iter().all(|l| l.ends_with("suspended")), "{lines:?}");
    // Both drivers logged out while their HCAs still carried traffic.
    let end = Instant::now() + Duration::from_secs(5);
    let mut logouts = Vec::new();
    while logouts.len() < 2 {
        let left = end.saturating_duration_since(Instant::now());
        match target.events().recv_timeout(left) {
            Ok(DaemonEvent::Logout { reason, .. }) => logouts.push(reason),
            Ok(_) => {}
            Err(e) => panic!("two logouts at the target, got {logouts:?}: {e}"),
        }
    }
    assert!(
        logouts.iter().all(|r| r.contains("logged out")),
        "SRP_I_LOGOUTs, not timeouts: {logouts:?}"
    );
    let states: Vec<String> = host.sessions().into_iter().map(|s| s.state).collect();
    assert_eq!(states, ["suspended", "suspended"]);
    // I/O that arrives while suspended: a read issued once the path supervisor has looked
    // at the suspended paths (it ticks every 100 ms), beside the workload's own.
    std::thread::sleep(Duration::from_millis(300));
    let late_read = {
        let f = file.try_clone().expect("dup");
        std::thread::spawn(move || {
            let mut b = vec![0u8; 4096];
            f.read_exact_at(&mut b, 5 * 4096).map(|()| b)
        })
    };
    // Held, not failed: no round trip completes while suspended (one may have been
    // between its write and its read), for longer than multipath would queue I/O with no
    // path (no_path_retry, 1 s): a suspended path is not a failed one.
    let at = work.ops();
    std::thread::sleep(Duration::from_millis(1500));
    let states: Vec<String> = host.disks()[0]
        .paths
        .iter()
        .map(|p| p.state.clone())
        .collect();
    assert_eq!(
        states,
        ["active", "active"],
        "suspended paths are not failed"
    );
    assert!(
        !late_read.is_finished(),
        "the read issued while suspended was not held"
    );
    assert!(
        work.ops() <= at + 1,
        "I/O ran while suspended: {at} → {}",
        work.ops()
    );
    work.assert_clean();
    assert_eq!(
        host.sessions().len(),
        2,
        "no session dropped while suspended"
    );
    match ctl.power(true) {
        Err(e) => assert!(e.to_string().contains("suspended already"), "{e}"),
        Ok(l) => panic!("a second suspend was taken: {l:?}"),
    }
    let spec = LoginSpec {
        portal: TARGET,
        local: None,
        ioc_guid: None,
        persistent: false,
        driver: None,
    };
    match ctl.login(spec) {
        Err(e) => assert!(
            e.to_string()
                .contains(&HostControlError::Suspended.to_string()),
            "{e}"
        ),
        Ok(s) => panic!("a login while suspended: {s:?}"),
    }

    let lines = ctl.power(false).expect("resumed");
    assert!(lines.iter().all(|l| l.ends_with("resumed")), "{lines:?}");
    let b = late_read
        .join()
        .expect("reader")
        .expect("the read issued while suspended completes after the resume");
    assert_eq!(b[..8], 5u64.to_be_bytes(), "slot 5's own block");
    wait_for("I/O resuming", Duration::from_secs(20), || {
        work.ops() > at + 200
    });
    let sessions = host.sessions();
    assert_eq!(sessions.len(), 2);
    for s in &sessions {
        assert_eq!(s.state, "running", "{s:?}");
        assert!(s.logins >= 2, "a fresh login after the resume: {s:?}");
    }
    assert_eq!(
        host.disks()[0].failovers,
        failovers_before,
        "a suspend is not a path failure"
    );
    work.stop_and_check(&file);

    // Shut down while suspended, with a read held: the sessions are resumed before they go,
    // so the read completes and the shutdown ends (bounded), rather than waiting forever.
    ctl.power(true).expect("suspended again");
    drop(ctl);
    std::thread::sleep(Duration::from_millis(300));
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = {
        let (f, tx) = (file.try_clone().expect("dup"), tx.clone());
        std::thread::spawn(move || {
            let mut b = vec![0u8; 4096];
            let _ = tx.send((
                "read",
                f.read_exact_at(&mut b, 7 * 4096).map_err(|e| e.to_string()),
            ));
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    std::thread::spawn(move || {
        host.shutdown();
        let _ = tx.send(("shutdown", Ok(())));
    });
    let mut ended = Vec::new();
    while ended.len() < 2 {
        let (what, r) = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("a suspended host's shutdown hung; ended: {ended:?}"));
        assert_eq!(r, Ok(()), "{what}");
        ended.push(what);
    }
    // Both ended, the read with its data (not EIO): it ran once the session resumed, whichever
    // of the two threads woke first.
    reader.join().expect("reader");
    drop(file);
    drop(target.shutdown());
}
