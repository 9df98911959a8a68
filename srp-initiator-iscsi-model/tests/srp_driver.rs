//! The SRP driver of the iSCSI model end to end under its emulated port, against a real
//! target daemon (a RAM LUN behind two IOCs) on loopback 127.0.136.x, the port's verifier
//! active: verified I/O from several submitters; a bus reset under load (the driver hands
//! everything back, logs in again, no completion after the flush); power down and up
//! (I/O submitted in D3 waits and runs after D0); a surprise removal of one IOC under a
//! verifying workload (no hang, every request answered, the failed ones go to the other
//! IOC, no acknowledged write lost); orderly removal and unload. Every wait is bounded;
//! ports drop before the daemon, even when an assertion fails.
// Against the real target daemon over the soft HCA's UDP sockets: Linux only.
#![cfg(target_os = "linux")]

#[path = "../../srp-initiator/tests/common/srp_adapter.rs"]
mod srp_adapter;

use srp_adapter::{Adapter, timers};
use srp_initiator_iscsi_model::port::{
    DataDirection, LuAddress, Port, PortConfig, PowerState, SrbFunction, SrbId, SrbRequest,
    SrbResult, SrbStatus, SystemMemory,
};
use srp_initiator_iscsi_model::srp::SrpDriver;
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BLOCK: usize = 512;
const BOUND: Duration = Duration::from_secs(15);
const HOST_GUID: u64 = 0x0002_c903_00be_e600;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 136, last))
}

/// A daemon with one RAM LUN behind IOCs `a` and `b` at 127.0.136.`t`.
fn target(t: u8) -> (Daemon, Vec<srp_target::config::IocConfig>) {
    let text = format!(
        r#"
[target]
node_guid = "0x0002c90300a1c6{t:02x}"
name = "iscsi-model-e2e"

[[port]]
name = "p0"
address = "{addr}"

[[lun]]
name = "ram0"
ram = true
size = "8MiB"

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300a1c7{t:02x}"
ports = ["p0"]
exports = {{ 0 = "ram0" }}
allow = ["any"]

[[ioc]]
name = "ioc-b"
guid = "0x0002c90300a1c8{t:02x}"
ports = ["p0"]
exports = {{ 0 = "ram0" }}
allow = ["any"]
"#,
        addr = ip(t)
    );
    let config = TargetConfig::from_str(&text, "iscsi-model.toml")
        .expect("config valid")
        .config;
    let iocs = config.iocs.clone();
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 16;
    options.limits.max_transfer = 256 << 10;
    options.limits.max_table_entries = 64;
    (Daemon::start(config, options).expect("daemon starts"), iocs)
}

/// The SRP driver at 127.0.136.`h` under a port, logged in to `ioc` at .`t`.
fn driver(
    t: u8,
    h: u8,
    ioc: &srp_target::config::IocConfig,
    memory: &Arc<SystemMemory>,
) -> Port<SrpDriver> {
    let cfg = Adapter {
        local: ip(h),
        target: ip(t),
        guid: HOST_GUID + u64::from(h),
        target_port_id: ioc.target_port_id(),
        service_id: ioc.service_id,
        queue_depth: 16,
        timers: timers(1, 3, 6),
        cmd_timeout: Duration::from_secs(8),
    }
    .config();
    let config = PortConfig {
        memory: Some(memory.clone()),
        ..PortConfig::default()
    };
    let port = Port::start(SrpDriver::new(cfg), config).expect("the driver initializes");
    wait_until("the login", || {
        port.driver().status().state == Some(srp::initiator::PortState::Running)
    });
    port
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + BOUND;
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within {BOUND:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn lu() -> LuAddress {
    LuAddress::new(0, 0, 0)
}

fn cdb10(op: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let mut cdb = [0u8; 10];
    cdb[0] = op;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

fn write_req(port: &Port<SrpDriver>, lba: u32, data: &[u8]) -> SrbRequest {
    let buf = port.buffer_from(data).expect("memory");
    let cdb = cdb10(0x2a, lba, (data.len() / BLOCK) as u16);
    SrbRequest::scsi(lu(), &cdb, DataDirection::Out, buf)
}

fn read_req(port: &Port<SrpDriver>, lba: u32, blocks: u16) -> SrbRequest {
    let buf = port
        .read_buffer(usize::from(blocks) * BLOCK)
        .expect("memory");
    SrbRequest::scsi(lu(), &cdb10(0x28, lba, blocks), DataDirection::In, buf)
}

fn run(port: &Port<SrpDriver>, req: SrbRequest) -> SrbResult {
    port.submit(req)
        .expect("accepted")
        .wait_timeout(BOUND)
        .expect("completed in time")
}

/// `blocks` blocks whose every byte says (lba, version).
fn pattern(lba: u32, blocks: u16, version: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(usize::from(blocks) * BLOCK);
    for b in 0..u32::from(blocks) {
        let seed = ((lba + b) as u64 * 0x9e37_79b9) ^ version.wrapping_mul(0x2545_f491);
        v.extend((0..BLOCK).map(|i| (seed.wrapping_add(i as u64 * 31) >> 3) as u8));
    }
    v
}

fn read_back(port: &Port<SrpDriver>, lba: u32, blocks: u16) -> Vec<u8> {
    let r = run(port, read_req(port, lba, blocks));
    assert_eq!(r.status, SrbStatus::SUCCESS, "read at {lba}: {r:?}");
    let mut out = vec![0; usize::from(blocks) * BLOCK];
    r.data.read(0, &mut out).expect("read the buffer");
    out
}

/// What each block may hold: the last acknowledged version and any attempted after it
/// whose outcome is unknown (failed by the removal, or reset).
#[derive(Default)]
struct Ledger {
    blocks: HashMap<u32, (u64, Vec<u64>)>,
}

impl Ledger {
    fn attempted(&mut self, lba: u32, version: u64) {
        self.blocks.entry(lba).or_default().1.push(version);
    }
    fn acked(&mut self, lba: u32, version: u64) {
        let e = self.blocks.entry(lba).or_default();
        e.0 = version;
        e.1.clear();
    }
    fn check(&self, port: &Port<SrpDriver>) -> usize {
        let mut checked = 0;
        for (&lba, (acked, maybe)) in &self.blocks {
            let got = read_back(port, lba, 1);
            let ok = std::iter::once(acked)
                .chain(maybe)
                .any(|&v| got == pattern(lba, 1, v));
            assert!(
                ok,
                "LBA {lba}: holds neither the acknowledged version {acked} nor one of {maybe:?}"
            );
            checked += 1;
        }
        checked
    }
}

/// A submitter thread writing then reading back single blocks of its own range on
/// `port` while `go`; a request the path failed (NO_DEVICE, BUS_RESET, SELECTION_TIMEOUT)
/// goes to `fallback` when given, like a multipath layer's failover.
fn submitter(
    ports: [Arc<Port<SrpDriver>>; 2],
    range: std::ops::Range<u32>,
    go: Arc<AtomicBool>,
    ledger: Arc<Mutex<Ledger>>,
    stats: Arc<Stats>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut version = u64::from(range.start) << 32;
        let mut lba = range.start;
        let mut which = 0;
        while go.load(SeqCst) {
            version += 1;
            let data = pattern(lba, 1, version);
            ledger.lock().expect("ledger").attempted(lba, version);
            loop {
                let port = &ports[which];
                let r = match port.submit(write_req(port, lba, &data)) {
                    Ok(c) => c.wait_timeout(BOUND).expect("a write completes in time"),
                    Err(_) => {
                        // The port refuses new requests after removal: the other path.
                        which = 1;
                        continue;
                    }
                };
                match r.status {
                    SrbStatus::SUCCESS => {
                        ledger.lock().expect("ledger").acked(lba, version);
                        stats.acked.fetch_add(1, SeqCst);
                        break;
                    }
                    SrbStatus::NO_DEVICE | SrbStatus::BUS_RESET | SrbStatus::SELECTION_TIMEOUT => {
                        stats.failed.fetch_add(1, SeqCst);
                        if r.status == SrbStatus::NO_DEVICE {
                            which = 1;
                        }
                    }
                    other => panic!("write at {lba}: {other:?}"),
                }
            }
            let port = &ports[which];
            if let Ok(c) = port.submit(read_req(port, lba, 1)) {
                let r = c.wait_timeout(BOUND).expect("a read completes in time");
                match r.status {
                    SrbStatus::SUCCESS => {
                        let mut got = vec![0; BLOCK];
                        r.data.read(0, &mut got).expect("buffer");
                        assert_eq!(got, data, "LBA {lba} read back after its write");
                        stats.verified.fetch_add(1, SeqCst);
                    }
                    // A read caught in flight by a reset or a removal is not retried
                    // (its write was acknowledged and is checked by the ledger), but it
                    // counts: the tests assert requests were caught in flight, and with
                    // each submitter at queue depth 1 the one caught may be a read.
                    SrbStatus::NO_DEVICE | SrbStatus::BUS_RESET | SrbStatus::SELECTION_TIMEOUT => {
                        stats.failed.fetch_add(1, SeqCst);
                        if r.status == SrbStatus::NO_DEVICE {
                            which = 1;
                        }
                    }
                    other => panic!("read at {lba}: {other:?}"),
                }
            }
            lba = if lba + 1 == range.end {
                range.start
            } else {
                lba + 1
            };
        }
    })
}

/// Four submitters over ranges of `span` blocks from `base`, on the first port, failing
/// over to the second (see [`submitter`]).
struct Load {
    go: Arc<AtomicBool>,
    ledger: Arc<Mutex<Ledger>>,
    stats: Arc<Stats>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(ports: [Arc<Port<SrpDriver>>; 2], base: u32, span: u32) -> Load {
        let go = Arc::new(AtomicBool::new(true));
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let stats = Arc::new(Stats::default());
        let threads = (0..4)
            .map(|i| {
                submitter(
                    ports.clone(),
                    base + i * span..base + (i + 1) * span,
                    go.clone(),
                    ledger.clone(),
                    stats.clone(),
                )
            })
            .collect();
        Load {
            go,
            ledger,
            stats,
            threads,
        }
    }

    /// Stops the submitters and joins them.
    fn stop(self) {
        self.go.store(false, SeqCst);
        for t in self.threads {
            t.join().expect("submitter");
        }
    }
}

#[derive(Default)]
struct Stats {
    acked: AtomicU64,
    failed: AtomicU64,
    verified: AtomicU64,
}

fn memory() -> Arc<SystemMemory> {
    SystemMemory::new(4096)
}

#[test]
fn verified_io_through_the_srp_driver_then_orderly_removal_and_unload() {
    let (daemon, iocs) = target(1);
    let mem = memory();
    let port = Arc::new(driver(1, 2, &iocs[0], &mem));
    // Scattered multi-page transfers through per-I/O FRMR, and a small immediate write.
    let big = pattern(64, 256, 7);
    assert_eq!(
        run(&port, write_req(&port, 64, &big)).status,
        SrbStatus::SUCCESS
    );
    assert_eq!(read_back(&port, 64, 256), big);
    let load = Load::start([port.clone(), port.clone()], 1000, 50);
    let (ledger, stats) = (load.ledger.clone(), load.stats.clone());
    std::thread::sleep(Duration::from_secs(2));
    load.stop();
    assert!(stats.verified.load(SeqCst) > 50, "I/O flowed");
    assert_eq!(stats.failed.load(SeqCst), 0);
    ledger.lock().expect("ledger").check(&port);
    let (_, frmr) = port.driver().transport().expect("open").mapped();
    assert!(frmr > 0, "data went through fast registration");
    assert_eq!(port.driver().held(), 0);
    port.unload().expect("orderly removal and unload");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    assert_eq!(port.driver().status().logins, 1);
    drop(port);
    drop(daemon);
}

#[test]
fn a_bus_reset_under_load_hands_everything_back_and_logs_in_again() {
    let (daemon, iocs) = target(3);
    let mem = memory();
    let port = Arc::new(driver(3, 4, &iocs[0], &mem));
    let load = Load::start([port.clone(), port.clone()], 0, 40);
    let (ledger, stats) = (load.ledger.clone(), load.stats.clone());
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        assert!(port.reset_bus(0).expect("a reset at passive level"));
        std::thread::sleep(Duration::from_millis(400));
    }
    load.stop();
    eprintln!(
        "acked {}, failed {}, dropped completions {}",
        stats.acked.load(SeqCst),
        stats.failed.load(SeqCst),
        port.driver().dropped_completions()
    );
    assert!(
        stats.failed.load(SeqCst) > 0,
        "the resets flushed requests in flight"
    );
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    wait_until("the login after the resets", || {
        port.driver().status().state == Some(srp::initiator::PortState::Running)
    });
    assert!(port.driver().status().logins >= 2, "logged in again");
    let n = ledger.lock().expect("ledger").check(&port);
    assert!(n > 0);
    port.unload().expect("unload");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    drop(daemon);
}

#[test]
fn io_submitted_in_d3_waits_and_runs_after_d0() {
    let (daemon, iocs) = target(5);
    let mem = memory();
    let port = driver(5, 6, &iocs[0], &mem);
    let before = pattern(8, 4, 1);
    assert_eq!(
        run(&port, write_req(&port, 8, &before)).status,
        SrbStatus::SUCCESS
    );
    port.set_power(PowerState::D3, BOUND).expect("down");
    // The kernel client went down before its HCA: the channel is logged out.
    wait_until("the logout", || {
        port.driver().transport().is_some_and(|t| t.closed())
    });
    let after = pattern(8, 4, 2);
    let c = port
        .submit(write_req(&port, 8, &after))
        .expect("accepted in D3");
    assert!(
        c.wait_timeout(Duration::from_millis(300)).is_err(),
        "nothing runs in D3"
    );
    port.set_power(PowerState::D0, BOUND).expect("up");
    let r = c.wait_timeout(BOUND).expect("replayed after D0");
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    assert_eq!(read_back(&port, 8, 4), after);
    assert_eq!(port.driver().status().logins, 2, "a fresh login at D0");
    port.unload().expect("unload");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    drop(daemon);
}

#[test]
fn surprise_removal_of_an_ioc_under_load_fails_over_and_loses_no_acknowledged_write() {
    let (daemon, iocs) = target(7);
    let mem = memory();
    let a = Arc::new(driver(7, 8, &iocs[0], &mem));
    let b = Arc::new(driver(7, 9, &iocs[1], &mem));
    let load = Load::start([a.clone(), b.clone()], 2000, 40);
    let (ledger, stats) = (load.ledger.clone(), load.stats.clone());
    std::thread::sleep(Duration::from_millis(700));
    let acked_before = stats.acked.load(SeqCst);
    let removed = Instant::now();
    a.surprise_remove().expect("surprise removal");
    assert!(removed.elapsed() < Duration::from_secs(2), "no hang");
    assert_eq!(a.driver().held(), 0, "everything held was answered");
    std::thread::sleep(Duration::from_millis(700));
    load.stop();
    eprintln!(
        "acked {} (before the removal {acked_before}), failed {}, verified {}",
        stats.acked.load(SeqCst),
        stats.failed.load(SeqCst),
        stats.verified.load(SeqCst)
    );
    assert!(acked_before > 0);
    // Requests in flight at the removal are either answered by the target before the
    // driver lets go (the driver's remove completes what it can) or handed back as
    // NO_DEVICE and retried on the other port: which, depends on timing (CI has seen both;
    // `failed` is printed above), so it is not asserted. What a surprise removal must
    // guarantee is: everything held answered (above), no acknowledged write lost (the
    // ledger below), and I/O going on through the other IOC.
    assert!(
        stats.acked.load(SeqCst) > acked_before + 20,
        "I/O went on through the other IOC"
    );
    let n = ledger.lock().expect("ledger").check(&b);
    assert!(n >= 100, "{n} blocks checked");
    assert!(a.violations().is_empty(), "{:?}", a.violations());
    assert!(b.violations().is_empty(), "{:?}", b.violations());
    a.unload().expect("unload after the surprise removal");
    b.unload().expect("unload");
    drop((a, b));
    drop(daemon);
}

#[test]
fn the_power_domain_takes_the_driver_down_before_its_hca_and_up_after() {
    use srp_initiator_iscsi_model::srp::power::power_domain;
    use srp_target::daemon::DaemonEvent;
    let (daemon, iocs) = target(11);
    let mem = memory();
    let port = Arc::new(driver(11, 12, &iocs[0], &mem));
    let before = pattern(40, 2, 1);
    assert_eq!(
        run(&port, write_req(&port, 40, &before)).status,
        SrbStatus::SUCCESS
    );
    while daemon.events().try_recv().is_ok() {}
    let domain = power_domain(&port, BOUND);
    domain
        .power_down()
        .expect("a transition starts")
        .wait_timeout(BOUND)
        .expect("down, in time");
    let t = port.driver().transport().expect("open");
    assert_eq!(
        port.state(),
        srp_initiator_iscsi_model::port::Lifecycle::PoweredDown
    );
    assert!(!t.hca_port_active(), "the HCA went down last");
    // The driver went down first, while its HCA still carried traffic: its logout reached
    // the target, which closed the channel as logged out (not by a timeout).
    let end = Instant::now() + BOUND;
    let reason = loop {
        let left = end.saturating_duration_since(Instant::now());
        match daemon.events().recv_timeout(left) {
            Ok(DaemonEvent::Logout { reason, .. }) => break reason,
            Ok(_) => {}
            Err(e) => panic!("no logout at the target: {e}"),
        }
    };
    assert!(reason.contains("logged out"), "{reason}");
    let after = pattern(40, 2, 2);
    let c = port
        .submit(write_req(&port, 40, &after))
        .expect("accepted in D3");
    assert!(
        c.wait_timeout(Duration::from_millis(300)).is_err(),
        "nothing runs in D3"
    );
    domain
        .power_up()
        .expect("a transition starts")
        .wait_timeout(BOUND)
        .expect("up, in time");
    assert!(t.hca_port_active(), "the HCA came up first");
    let r = c.wait_timeout(BOUND).expect("replayed after D0");
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    assert_eq!(read_back(&port, 40, 2), after);
    port.unload().expect("unload");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    drop(daemon);
}

#[test]
fn task_management_goes_through_the_same_transport() {
    let (daemon, iocs) = target(13);
    let mem = memory();
    let port = driver(13, 14, &iocs[0], &mem);
    let management = |function, target| {
        let mut r = SrbRequest::management(function, lu());
        r.abort_target = target;
        run(&port, r)
    };
    // An abort of a request the driver does not hold: ABORT_FAILED.
    let r = management(SrbFunction::AbortCommand, Some(SrbId(u64::MAX)));
    assert_eq!(r.status, SrbStatus::ABORT_FAILED, "{r:?}");
    // LOGICAL UNIT RESET answered FUNCTION COMPLETE by the target.
    let r = management(SrbFunction::ResetLogicalUnit, None);
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    // RESET_DEVICE: a LOGICAL UNIT RESET of each LUN the transport knows (SRP has no
    // TARGET RESET), on the same channel; I/O goes on after it.
    let r = management(SrbFunction::ResetDevice, None);
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    let data = pattern(90, 1, 9);
    let mut r = run(&port, write_req(&port, 90, &data));
    if r.status != SrbStatus::SUCCESS {
        // The new nexus reports its reset once: UNIT ATTENTION (sense key 6).
        assert_eq!(r.sense.get(2).map(|k| k & 0x0f), Some(6), "{r:?}");
        r = run(&port, write_req(&port, 90, &data));
    }
    assert_eq!(r.status, SrbStatus::SUCCESS, "{r:?}");
    assert_eq!(read_back(&port, 90, 1), data);
    assert_eq!(port.driver().status().logins, 1, "no channel reset");
    port.unload().expect("unload");
    assert!(port.violations().is_empty(), "{:?}", port.violations());
    drop(port);
    drop(daemon);
}
