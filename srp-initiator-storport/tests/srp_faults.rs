//! Transport faults under the SRP miniport (issue #6), against the real target daemon on
//! loopback 127.0.131.x with a file-backed LUN in a temporary directory, and short transport
//! timers (reconnect_delay 1 s, fast_io_fail 3–8 s, dev_loss 6–15 s):
//! - the target restarted mid-I/O within fast_io_fail: the SRBs around the outage complete
//!   successfully after the reconnect (held commands registered again and re-sent) and
//!   every block verifies;
//! - the target gone for good: held SRBs complete with `SRB_STATUS_SELECTION_TIMEOUT` (the
//!   transport-failfast mapping, a path failure to a disk class driver or MPIO) at
//!   fast_io_fail, new ones at once, and after dev_loss the adapter answers
//!   `SRB_STATUS_NO_DEVICE`.
//!
//! Every wait is bounded; the port drops before the daemon, both even when an assertion
//! fails. A hostile target sending malformed SRP_RSPs is not covered here.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

mod common;
#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use srp_adapter::{Adapter, Backing, OneLunTarget, daemon_options, timers};

use common::{lu, read10, write10};
use srp::initiator::{PortState, TransportTimers};
use srp_initiator_storport::port::{Port, PortConfig, SrbStatus};
use srp_initiator_storport::srp::SrpMiniport;
use srp_target::config::{IocConfig, TargetConfig};
use srp_target::daemon::Daemon;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const HOST_GUID: u64 = 0x0002_c903_00be_e601;
/// Longest any single SRB may take here (an outage plus a reconnect).
const SRB_DEADLINE: Duration = Duration::from_secs(20);

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 131, last))
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("srp-faults-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn target_config(t: u8, rdma_cm_port: u16, lun_file: &std::path::Path) -> TargetConfig {
    OneLunTarget {
        name: "storport-faults",
        address: ip(t),
        node_guid: 0x0002_c903_00a1_c300 + u64::from(t),
        ioc_guid: 0x0002_c903_00a1_c400 + u64::from(t),
        rdma_cm_port: Some(rdma_cm_port),
        lun: "file0",
        backing: Backing::File(lun_file),
        size: "8MiB",
    }
    .config()
}

fn start_daemon(config: &TargetConfig) -> Daemon {
    let mut options = daemon_options();
    options.shutdown_step = Duration::from_millis(500);
    Daemon::start(config.clone(), options).expect("daemon starts")
}

fn start_port(t: u8, h: u8, ioc: &IocConfig, timers: TransportTimers) -> Port<SrpMiniport> {
    let hw = Adapter {
        local: ip(h),
        target: ip(t),
        guid: HOST_GUID + u64::from(h),
        target_port_id: ioc.target_port_id(),
        service_id: ioc.service_id,
        queue_depth: 32,
        timers,
        cmd_timeout: Duration::from_secs(15),
    }
    .config();
    Port::<SrpMiniport>::start(hw, PortConfig::default()).expect("adapter starts")
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8 ^ (i >> 9) as u8)
        .collect()
}

fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn target_restarted_mid_io_within_fast_io_fail_loses_nothing() {
    let dir = TempDir::new("restart");
    let config = target_config(1, 5581, &dir.0.join("lun0.img"));
    let ioc = config.iocs[0].clone();
    // Declared before the port: dropped after it, whatever happens.
    let mut daemon = Some(start_daemon(&config));
    let port = start_port(1, 2, &ioc, timers(1, 8, 15));
    let stop = AtomicBool::new(false);
    let ops = std::sync::atomic::AtomicU64::new(0);
    let written: Vec<(u32, u32)> = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut written = Vec::new();
            let mut k = 0u32;
            while !stop.load(Ordering::Relaxed) {
                // 24 KiB (FRMR, scattered pages) at a fresh place each time.
                let lba = (k % 300) * 48;
                let data = pattern(24 << 10, k);
                let w = port
                    .submit(write10(lu(0), lba, data.clone()))
                    .expect("accepted");
                let w = w
                    .wait_timeout(SRB_DEADLINE)
                    .map(common::Done::from)
                    .expect("write completes");
                assert_eq!(w.status, SrbStatus::SUCCESS, "write {k}: {w:?}");
                let r = port.submit(read10(lu(0), lba, 48)).expect("accepted");
                let r = r
                    .wait_timeout(SRB_DEADLINE)
                    .map(common::Done::from)
                    .expect("read completes");
                assert_eq!(r.status, SrbStatus::SUCCESS, "read {k}: {r:?}");
                assert!(r.data == data, "block run {k} verifies");
                written.push((lba, k));
                ops.fetch_add(1, Ordering::Relaxed);
                k += 1;
            }
            written
        });
        let guard = StopOnDrop(&stop);
        wait_until("I/O before the outage", Duration::from_secs(10), || {
            ops.load(Ordering::Relaxed) >= 20
        });
        let events = daemon.take().map(Daemon::shutdown).unwrap_or_default();
        eprintln!("daemon stopped: {} events", events.len());
        std::thread::sleep(Duration::from_millis(1500));
        let before = ops.load(Ordering::Relaxed);
        daemon = Some(start_daemon(&config));
        wait_until("I/O after the restart", Duration::from_secs(20), || {
            ops.load(Ordering::Relaxed) >= before + 20
        });
        drop(guard);
        writer.join().expect("writer")
    });
    assert_eq!(port.miniport().channel_state(), Some(PortState::Running));
    let remapped = port.miniport().remapped();
    eprintln!("held commands registered again: {remapped}");
    assert!(
        remapped >= 1,
        "SRBs issued during the outage were held and re-registered"
    );
    // The last version of every block run survived the restart in the file.
    let mut last = std::collections::HashMap::new();
    for (lba, k) in written {
        last.insert(lba, k);
    }
    for (lba, k) in last {
        let r = port.submit(read10(lu(0), lba, 48)).expect("accepted");
        let r = r
            .wait_timeout(SRB_DEADLINE)
            .map(common::Done::from)
            .expect("read completes");
        assert_eq!(r.status, SrbStatus::SUCCESS);
        assert!(r.data == pattern(24 << 10, k), "run at {lba} (write {k})");
    }
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert!(!port.is_bugchecked());
    drop(port);
    drop(daemon);
}

/// Stops the writer even when the main thread's assertion unwinds.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn target_gone_fails_io_fast_at_fast_io_fail_and_loses_the_device_at_dev_loss() {
    let dir = TempDir::new("gone");
    let config = target_config(3, 5582, &dir.0.join("lun0.img"));
    let ioc = config.iocs[0].clone();
    let mut daemon = Some(start_daemon(&config));
    let port = start_port(3, 4, &ioc, timers(1, 3, 6));
    let w = port
        .submit(write10(lu(0), 0, pattern(8192 + 512, 1)))
        .expect("accepted");
    let w = w
        .wait_timeout(SRB_DEADLINE)
        .map(common::Done::from)
        .expect("completes");
    assert_eq!(w.status, SrbStatus::SUCCESS);
    let _ = daemon.take().map(Daemon::shutdown);
    let lost_at = Instant::now();
    wait_until("the port blocked", Duration::from_secs(5), || {
        port.miniport().channel_state() != Some(PortState::Running)
    });
    // Held while blocked: FRMR-mapped reads and writes, and a small immediate write.
    let held: Vec<_> = (0..4u32)
        .map(|i| {
            let req = if i % 2 == 0 {
                read10(lu(0), i * 64, 32)
            } else {
                write10(lu(0), i * 64, pattern(if i == 1 { 1024 } else { 16384 }, i))
            };
            port.submit(req).expect("accepted")
        })
        .collect();
    for c in &held {
        let r = c
            .wait_timeout(SRB_DEADLINE)
            .map(common::Done::from)
            .expect("held SRB completes");
        assert_eq!(r.status, SrbStatus::SELECTION_TIMEOUT, "{r:?}");
    }
    let failed_after = lost_at.elapsed();
    assert!(
        failed_after >= Duration::from_millis(2500) && failed_after < Duration::from_secs(6),
        "held I/O failed after {failed_after:?}, fast_io_fail is 3 s"
    );
    assert_eq!(port.miniport().channel_state(), Some(PortState::FailFast));
    // In FAIL_FAST new I/O fails at once.
    let t = Instant::now();
    let r = port.submit(read10(lu(0), 0, 8)).expect("accepted");
    let r = r
        .wait_timeout(SRB_DEADLINE)
        .map(common::Done::from)
        .expect("completes");
    assert_eq!(r.status, SrbStatus::SELECTION_TIMEOUT);
    assert!(t.elapsed() < Duration::from_secs(1));
    wait_until("dev_loss", Duration::from_secs(10), || {
        port.miniport().channel_state() == Some(PortState::Lost)
    });
    assert!(lost_at.elapsed() >= Duration::from_millis(5500));
    let r = port.submit(read10(lu(0), 0, 8)).expect("accepted");
    let r = r
        .wait_timeout(SRB_DEADLINE)
        .map(common::Done::from)
        .expect("completes");
    assert_eq!(r.status, SrbStatus::NO_DEVICE, "{r:?}");
    // Everything mapped for the failed SRBs came back (regions recreated, not leaked).
    wait_until("arena and pool back", Duration::from_secs(5), || {
        port.miniport().resources().is_some_and(|(pages, c)| {
            pages == srp_initiator_storport::port::memory::DEFAULT_PAGES
                && c.mapped == 0
                && c.discarded == 0
                && c.invalidating == 0
        })
    });
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert!(!port.is_bugchecked());
    drop(port);
    drop(daemon);
}
