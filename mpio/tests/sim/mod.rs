//! A deterministic simulated logical unit and its paths, for the multipath tests.
//!
//! - [`SimLu`]: a RAM image of 512-byte blocks shared by all paths, its ALUA target port
//!   groups (reported by REPORT TARGET PORT GROUPS, SPC-4 6.37) and its identity (VPD
//!   0x83: an NAA designator of the LU, and per path its relative target port and target
//!   port group designators).
//! - [`SimPath`]: one path ([`mpio::PathDevice`]) with fault knobs the test flips at any
//!   time: [`SimPath::set_down`] (calls are held, as a reconnecting SRP channel holds
//!   them, until the path comes back, [`mpio::PathDevice::fail_fast`] is called or the
//!   hold ends: then `Transport { kind: PathFailed }`), [`SimPath::set_gone`], a medium
//!   error on one LBA, a unit attention once, holds of the next READs/WRITEs (to control
//!   what is in flight) and a per-command latency. It counts every command it receives.
//! - [`Rng`]: xorshift64*, fixed seeds, so workloads replay.
//! - [`Supervisor`]: ticks a disk every 10 ms, as the host daemon's supervisor does.
// Each test crate uses a different part of the simulator, and the module is private.
#![allow(dead_code, unreachable_pub)]

use mpio::{DiskIdentity, alua::AluaState};
use mpio::{
    Dsm, MpConfig, MultipathDisk, Outcome, PathDevice, PathLabel, PathSpec, SrpDsm, Transport,
    TransportKind,
};
use scsi::Lba;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The simulated LU's block size.
pub const BLOCK: usize = 512;

/// The longest any simulated call blocks (a guard against a hung test).
pub const GUARD: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// xorshift64* (Vigna): small, fast, and the same sequence for the same seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A target port group of the simulated LU.
#[derive(Debug, Clone)]
struct Group {
    id: u16,
    state: AluaState,
    ports: Vec<u16>,
}

fn state_code(s: AluaState) -> u8 {
    match s {
        AluaState::ActiveOptimized => 0,
        AluaState::ActiveNonOptimized => 1,
        AluaState::Standby => 2,
        AluaState::Unavailable => 3,
        AluaState::Offline => 0xe,
        AluaState::Transitioning => 0xf,
        AluaState::Other(c) => c & 0x0f,
    }
}

/// The logical unit: its blocks and its port groups.
#[derive(Debug)]
pub struct SimLu {
    image: Mutex<Vec<u8>>,
    blocks: u64,
    groups: Mutex<Vec<Group>>,
    naa: [u8; 16],
}

impl SimLu {
    /// `blocks` zeroed blocks, no ALUA.
    pub fn new(blocks: u64) -> Arc<SimLu> {
        let mut naa = [0u8; 16];
        naa[0] = 0x60; // NAA 6 (IEEE registered extended), OUI 00:14:05 as LIO's
        naa[1] = 0x01;
        naa[2] = 0x40;
        naa[3] = 0x50;
        naa[15] = 0x01;
        Arc::new(SimLu {
            image: Mutex::new(vec![0; blocks as usize * BLOCK]),
            blocks,
            groups: Mutex::new(Vec::new()),
            naa,
        })
    }

    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Whether the LU reports ALUA (TPGS = 01b, implicit) — once it has a group.
    pub fn alua(&self) -> bool {
        !lock(&self.groups).is_empty()
    }

    /// Adds or changes target port group `id` with its relative ports.
    pub fn set_group(&self, id: u16, state: AluaState, ports: &[u16]) {
        let mut g = lock(&self.groups);
        g.retain(|g| g.id != id);
        g.push(Group {
            id,
            state,
            ports: ports.to_vec(),
        });
        g.sort_by_key(|g| g.id);
    }

    /// The ALUA state of relative port `port`, if the LU reports ALUA.
    pub fn port_state(&self, port: u16) -> Option<AluaState> {
        lock(&self.groups)
            .iter()
            .find(|g| g.ports.contains(&port))
            .map(|g| g.state)
    }

    /// REPORT TARGET PORT GROUPS parameter data, length format (SPC-4 6.37).
    pub fn rtpg(&self) -> Vec<u8> {
        let mut d = vec![0u8; 4];
        for g in lock(&self.groups).iter() {
            d.push(state_code(g.state)); // PREF 0, ASYMMETRIC ACCESS STATE
            d.push(0x0f); // T_SUP O_SUP S_SUP AN_SUP... (AO, ANO, standby, unavailable)
            d.extend(g.id.to_be_bytes()); // TARGET PORT GROUP
            d.push(0); // reserved
            d.push(0); // STATUS CODE
            d.push(0); // vendor specific
            d.push(g.ports.len() as u8); // TARGET PORT COUNT
            for p in &g.ports {
                d.extend([0, 0]); // obsolete
                d.extend(p.to_be_bytes()); // RELATIVE TARGET PORT IDENTIFIER
            }
        }
        let len = (d.len() - 4) as u32;
        d[..4].copy_from_slice(&len.to_be_bytes());
        d
    }

    /// Standard INQUIRY data: a disk, TPGS 01b when the LU has groups.
    pub fn inquiry(&self) -> Vec<u8> {
        let mut d = vec![0u8; 36];
        d[2] = 0x06; // SPC-4
        d[3] = 0x02;
        d[4] = 31;
        if self.alua() {
            d[5] = 0x10;
        }
        d[8..16].copy_from_slice(b"SIM     ");
        d[16..32].copy_from_slice(b"MULTIPATH LU    ");
        d[32..36].copy_from_slice(b"0001");
        d
    }

    /// VPD page 0x83 as read through relative port `port` of group `group`.
    pub fn vpd83(&self, port: u16, group: u16) -> Vec<u8> {
        let mut p = vec![0, 0x83, 0, 0];
        p.extend([0x01, 0x03, 0, 16]); // binary, LU, NAA
        p.extend(self.naa);
        p.extend([0x01, 0x14, 0, 4, 0, 0]); // binary, target port, relative target port
        p.extend(port.to_be_bytes());
        p.extend([0x01, 0x15, 0, 4, 0, 0]); // binary, target port, target port group
        p.extend(group.to_be_bytes());
        let len = (p.len() - 4) as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p
    }

    fn range(&self, lba: Lba, len: usize) -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(lba.0).ok()?.checked_mul(BLOCK)?;
        let end = start.checked_add(len)?;
        (len % BLOCK == 0 && end <= self.blocks as usize * BLOCK).then_some(start..end)
    }

    /// Test access to the image, bypassing every path.
    pub fn peek(&self, lba: u64) -> Vec<u8> {
        let r = lba as usize * BLOCK..(lba as usize + 1) * BLOCK;
        lock(&self.image)[r].to_vec()
    }
}

/// A path's link, as the test sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Up,
    Down,
    Gone,
}

#[derive(Debug)]
struct Ctl {
    link: Link,
    /// The hold of this down period was ended by `fail_fast` (until the path is up).
    failed_fast: bool,
    /// How long a call is held while down before it fails (the transport's fast_io_fail).
    down_hold: Duration,
    medium_error: Option<u64>,
    unit_attention: bool,
    /// READs and WRITEs still to hold until [`SimPath::release`].
    hold_next: u32,
    /// Whether held READs and WRITEs may go on.
    released: bool,
    latency: Duration,
}

/// Commands one path received.
#[derive(Debug, Default)]
pub struct Counts {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub flushes: AtomicU64,
    pub tur: AtomicU64,
    pub rtpg: AtomicU64,
    pub other: AtomicU64,
    /// Commands answered with CHECK CONDITION.
    pub checks: AtomicU64,
    /// Commands failed by the transport (held, then failed fast or timed out).
    pub path_failed: AtomicU64,
    pub fail_fast_calls: AtomicU64,
}

/// A snapshot of [`Counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Count {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub tur: u64,
    pub rtpg: u64,
    pub other: u64,
    pub checks: u64,
    pub path_failed: u64,
    pub fail_fast_calls: u64,
}

impl Count {
    /// READs and WRITEs.
    pub fn io(&self) -> u64 {
        self.reads + self.writes
    }
}

/// One path to a [`SimLu`].
#[derive(Debug)]
pub struct SimPath {
    lu: Arc<SimLu>,
    port: u16,
    group: u16,
    ctl: Mutex<Ctl>,
    changed: Condvar,
    counts: Counts,
    /// Calls waiting now (held while down, or held by `hold_next`).
    waiting: Mutex<u32>,
}

impl SimPath {
    /// A healthy path through relative port `port` of group `group`.
    pub fn new(lu: &Arc<SimLu>, port: u16, group: u16) -> Arc<SimPath> {
        Arc::new(SimPath {
            lu: lu.clone(),
            port,
            group,
            ctl: Mutex::new(Ctl {
                link: Link::Up,
                failed_fast: false,
                down_hold: GUARD,
                medium_error: None,
                unit_attention: false,
                hold_next: 0,
                released: false,
                latency: Duration::ZERO,
            }),
            changed: Condvar::new(),
            counts: Counts::default(),
            waiting: Mutex::new(0),
        })
    }

    fn set(&self, f: impl FnOnce(&mut Ctl)) {
        f(&mut lock(&self.ctl));
        self.changed.notify_all();
    }

    /// The channel goes down: calls are held (reconnecting).
    pub fn set_down(&self) {
        self.set(|c| c.link = Link::Down);
    }

    /// The channel is up again (held calls go on, as resent after a reconnect).
    pub fn set_up(&self) {
        self.set(|c| {
            c.link = Link::Up;
            c.failed_fast = false;
        });
    }

    /// The device is lost on this path.
    pub fn set_gone(&self) {
        self.set(|c| c.link = Link::Gone);
    }

    /// How long a call is held while down before the transport fails it.
    pub fn set_down_hold(&self, hold: Duration) {
        self.set(|c| c.down_hold = hold);
    }

    /// READs touching `lba` answer MEDIUM ERROR, UNRECOVERED READ ERROR (3/11/00).
    pub fn set_medium_error(&self, lba: Option<u64>) {
        self.set(|c| c.medium_error = lba);
    }

    /// The next command answers UNIT ATTENTION, POWER ON OR RESET (6/29/00), once.
    pub fn arm_unit_attention(&self) {
        self.set(|c| c.unit_attention = true);
    }

    /// Hold the next `n` READs/WRITEs (they count as in flight) until [`SimPath::release`].
    pub fn hold_next(&self, n: u32) {
        self.set(|c| {
            c.hold_next = n;
            c.released = false;
        });
    }

    /// Lets the held READs/WRITEs complete.
    pub fn release(&self) {
        self.set(|c| c.released = true);
    }

    /// Each command takes this long.
    pub fn set_latency(&self, latency: Duration) {
        self.set(|c| c.latency = latency);
    }

    /// Calls waiting in the path now.
    pub fn waiting(&self) -> u32 {
        *lock(&self.waiting)
    }

    /// Waits (bounded by `limit`) until `n` calls wait in the path.
    pub fn wait_waiting(&self, n: u32, limit: Duration) -> bool {
        wait_until(limit, || self.waiting() >= n)
    }

    pub fn count(&self) -> Count {
        let c = &self.counts;
        let l = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Count {
            reads: l(&c.reads),
            writes: l(&c.writes),
            flushes: l(&c.flushes),
            tur: l(&c.tur),
            rtpg: l(&c.rtpg),
            other: l(&c.other),
            checks: l(&c.checks),
            path_failed: l(&c.path_failed),
            fail_fast_calls: l(&c.fail_fast_calls),
        }
    }

    /// The [`PathSpec`] the host daemon would build: claimed by [`SrpDsm::inquire`] from
    /// the INQUIRY and VPD 0x83 data read through this path.
    pub fn spec(self: &Arc<SimPath>, key: u32, preferred: bool, weight: u32) -> PathSpec {
        let inquiry = match self.execute(&[0x12, 0, 0, 0, 36, 0], 36) {
            Outcome::Good(d) => d,
            o => panic!("INQUIRY through path {key}: {o}"),
        };
        let vpd = match self.execute(&[0x12, 1, 0x83, 0x10, 0, 0], 4096) {
            Outcome::Good(d) => d,
            o => panic!("VPD 0x83 through path {key}: {o}"),
        };
        let id = SrpDsm::default()
            .inquire(&inquiry, &vpd, None)
            .expect("the DSM claims the LU");
        assert_eq!(id.relative_port, Some(self.port));
        PathSpec {
            key,
            lun: 0,
            device: self.clone(),
            id,
            preferred,
            weight,
            label: PathLabel {
                ioc_guid: format!("{key:#018x}"),
                ioc_name: format!("sim-ioc-{key}"),
                portal: format!("sim:{}", self.port),
                local: "sim-host".into(),
            },
        }
    }

    fn path_failed(&self) -> Outcome {
        self.counts.path_failed.fetch_add(1, Ordering::SeqCst);
        Outcome::Transport {
            kind: TransportKind::PathFailed,
            detail: "SELECTION_TIMEOUT".into(),
        }
    }

    /// The transport's part of every command: held while down; `None` to go on to the LU.
    fn transport_gate(&self, data: bool) -> Option<Outcome> {
        let mut c = lock(&self.ctl);
        let start = Instant::now();
        let mut waiting = false;
        let held = data && c.hold_next > 0;
        if held {
            c.hold_next -= 1;
        }
        let outcome = loop {
            let elapsed = start.elapsed();
            let limit = match c.link {
                Link::Gone => break Some(Outcome::NoDevice("device loss".into())),
                Link::Down if c.failed_fast => break Some(self.path_failed()),
                Link::Down if elapsed >= c.down_hold => break Some(self.path_failed()),
                Link::Down => c.down_hold - elapsed,
                Link::Up if held && !c.released && elapsed < GUARD => GUARD - elapsed,
                Link::Up => break None,
            };
            if !waiting {
                waiting = true;
                *lock(&self.waiting) += 1;
            }
            c = self
                .changed
                .wait_timeout(c, limit)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        let latency = c.latency;
        drop(c);
        if waiting {
            *lock(&self.waiting) -= 1;
        }
        if outcome.is_none() && !latency.is_zero() {
            std::thread::sleep(latency);
        }
        outcome
    }

    /// The LU's part: a pending unit attention, then ALUA access.
    fn lu_gate(&self, data: bool) -> Option<Outcome> {
        let check = |key, asc, ascq| {
            self.counts.checks.fetch_add(1, Ordering::SeqCst);
            Some(Outcome::Check { key, asc, ascq })
        };
        if std::mem::take(&mut lock(&self.ctl).unit_attention) {
            return check(0x6, 0x29, 0x00);
        }
        match self.lu.port_state(self.port) {
            Some(s) if data && !s.serves_io() => check(0x2, 0x04, 0x0b), // port in standby
            _ => None,
        }
    }
}

impl PathDevice for SimPath {
    fn read(&self, lba: Lba, buf: &mut [u8]) -> Outcome {
        self.counts.reads.fetch_add(1, Ordering::SeqCst);
        if let Some(o) = self.transport_gate(true).or_else(|| self.lu_gate(true)) {
            return o;
        }
        let medium = lock(&self.ctl).medium_error;
        let blocks = (buf.len() / BLOCK) as u64;
        if medium.is_some_and(|bad| (lba.0..lba.0 + blocks).contains(&bad)) {
            self.counts.checks.fetch_add(1, Ordering::SeqCst);
            return Outcome::Check {
                key: 0x3,
                asc: 0x11,
                ascq: 0,
            };
        }
        let Some(r) = self.lu.range(lba, buf.len()) else {
            return Outcome::Check {
                key: 0x5,
                asc: 0x21,
                ascq: 0,
            }; // LBA out of range
        };
        buf.copy_from_slice(&lock(&self.lu.image)[r]);
        Outcome::Good(Vec::new())
    }

    fn write(&self, lba: Lba, data: &[u8], _fua: bool) -> Outcome {
        self.counts.writes.fetch_add(1, Ordering::SeqCst);
        if let Some(o) = self.transport_gate(true).or_else(|| self.lu_gate(true)) {
            return o;
        }
        let Some(r) = self.lu.range(lba, data.len()) else {
            return Outcome::Check {
                key: 0x5,
                asc: 0x21,
                ascq: 0,
            };
        };
        lock(&self.lu.image)[r].copy_from_slice(data);
        Outcome::Good(Vec::new())
    }

    fn flush(&self) -> Outcome {
        self.counts.flushes.fetch_add(1, Ordering::SeqCst);
        self.transport_gate(false)
            .or_else(|| self.lu_gate(false))
            .unwrap_or(Outcome::Good(Vec::new()))
    }

    fn execute(&self, cdb: &[u8], data_in: usize) -> Outcome {
        let trim = |mut d: Vec<u8>| {
            d.truncate(data_in);
            Outcome::Good(d)
        };
        match cdb {
            [0x00, ..] => self.counts.tur.fetch_add(1, Ordering::SeqCst),
            [0xa3, sa, ..] if sa & 0x1f == 0x0a => self.counts.rtpg.fetch_add(1, Ordering::SeqCst),
            _ => self.counts.other.fetch_add(1, Ordering::SeqCst),
        };
        if let Some(o) = self.transport_gate(false) {
            return o;
        }
        match cdb {
            [0x12, 0, ..] => trim(self.lu.inquiry()),
            [0x12, 1, 0x83, ..] => trim(self.lu.vpd83(self.port, self.group)),
            [0x00, ..] => self.lu_gate(false).unwrap_or(Outcome::Good(Vec::new())),
            [0xa3, sa, ..] if sa & 0x1f == 0x0a && self.lu.alua() => trim(self.lu.rtpg()),
            _ => {
                self.counts.checks.fetch_add(1, Ordering::SeqCst);
                Outcome::Check {
                    key: 0x5,
                    asc: 0x20,
                    ascq: 0,
                } // INVALID COMMAND OPERATION CODE
            }
        }
    }

    fn transport(&self) -> Transport {
        match lock(&self.ctl).link {
            Link::Up => Transport::Up,
            Link::Down => Transport::Down,
            Link::Gone => Transport::Gone,
        }
    }

    fn fail_fast(&self) {
        self.counts.fail_fast_calls.fetch_add(1, Ordering::SeqCst);
        self.set(|c| {
            if c.link == Link::Down {
                c.failed_fast = true;
            }
        });
    }
}

/// Polls `f` every millisecond until it holds or `limit` passes; whether it held.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A config for tests: the given policy, quick no-path retry, rare periodic verifies.
pub fn config(policy: mpio::Policy) -> MpConfig {
    MpConfig {
        policy,
        failback: true,
        no_path_retry: Duration::from_secs(5),
        verify_period: Duration::from_secs(600),
        ..MpConfig::default()
    }
}

/// A disk over `lu` with `paths` (key = index), the first `preferred` of them preferred,
/// all weight 1; one tick (the verify reads ALUA states) before it is returned.
pub fn disk(
    lu: &Arc<SimLu>,
    paths: &[Arc<SimPath>],
    preferred: usize,
    config: MpConfig,
) -> Arc<MultipathDisk> {
    disk_weighted(lu, paths, preferred, &vec![1; paths.len()], config)
}

/// [`disk`] with the paths' weights.
pub fn disk_weighted(
    lu: &Arc<SimLu>,
    paths: &[Arc<SimPath>],
    preferred: usize,
    weights: &[u32],
    config: MpConfig,
) -> Arc<MultipathDisk> {
    let identity = DiskIdentity {
        identity: SrpDsm::default()
            .inquire(&lu.inquiry(), &lu.vpd83(1, 1), None)
            .expect("claimed")
            .identity,
        vendor: "SIM".into(),
        product: "MULTIPATH LU".into(),
        revision: "0001".into(),
        block_size: BLOCK as u32,
        blocks: lu.blocks(),
    };
    let d = Arc::new(MultipathDisk::new(
        identity,
        Arc::new(SrpDsm::default()),
        config,
    ));
    for (i, p) in paths.iter().enumerate() {
        d.add_path(p.spec(i as u32, i < preferred, weights[i]));
    }
    d.tick(Instant::now());
    d
}

/// Ticks a disk every 10 ms on its own thread until dropped.
pub struct Supervisor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Supervisor {
    pub fn start(disk: &Arc<MultipathDisk>) -> Supervisor {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, d) = (stop.clone(), disk.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                d.tick(Instant::now());
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Supervisor {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
