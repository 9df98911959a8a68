//! A RAM driver of the iSCSI model: `start_request` (dispatch level) only queues; worker
//! threads of its own (passive level) run READ/WRITE/TEST UNIT READY against memory and
//! complete through the port. It drops what a reset flushed by a generation count checked
//! under its lock, fails what it holds at surprise removal, and finishes it at orderly
//! removal. Instrumented; one knob ([`Fault`]) breaks exactly one rule of the model.
#![allow(dead_code, unreachable_pub)]

use access_layer::verbs::in_dispatch;
use scsi::cdb::Command;
use scsi::sense::{FixedSense, SenseCode};
use srp_initiator_iscsi_model::port::{
    DataDirection, Driver, DriverInfo, InitializeError, LuAddress, Port, PortConfig, PortHandle,
    PowerState, Request, SrbId, SrbRequest, SrbResult, SrbStatus,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use win_port::ke::KeEvent;
use wirekit::WireRepr;

pub const BLOCK: usize = 512;
/// Every wait in the tests is bounded by this.
pub const BOUND: Duration = Duration::from_secs(10);

/// The one rule a broken driver breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    #[default]
    None,
    /// (a) `start_request` waits on a kernel event: a blocking call at dispatch level.
    BlockInStart,
    /// (a) `reset` sleeps (a plain sleep the verifier cannot see) past the watchdog.
    SleepInReset(Duration),
    /// (b) completes by tag twice: the second names a tag with nothing outstanding.
    CompleteTagTwice,
    /// (c) `reset` does not stop its workers: they complete what the reset flushed.
    CompleteAfterReset,
    /// (d) completes every WRITE twice.
    DoubleCompleteWrites,
    /// (e) `remove` returns without completing what it holds.
    LeaveAtRemoval,
}

/// The driver's knobs.
#[derive(Debug, Clone)]
pub struct RamConfig {
    pub luns: u8,
    pub blocks: u64,
    pub tags_per_lu: u16,
    pub workers: usize,
    /// Workers take no request until [`Ram::release`].
    pub hold: bool,
    pub fault: Fault,
}

impl Default for RamConfig {
    fn default() -> Self {
        RamConfig {
            luns: 2,
            blocks: 2048,
            tags_per_lu: 8,
            workers: 2,
            hold: false,
            fault: Fault::None,
        }
    }
}

/// What the driver holds, under its lock.
#[derive(Default)]
struct Held {
    queue: VecDeque<Request<()>>,
    by_id: BTreeMap<SrbId, Request<()>>,
    /// Bumped by a reset or a surprise removal: a worker completes a request only if the
    /// generation it took it in is still current.
    generation: u64,
    hold: bool,
    stop: bool,
}

/// The driver's memory, state and counters, shared with its workers and the test.
pub struct Ram {
    pub cfg: RamConfig,
    disks: Vec<Mutex<Vec<u8>>>,
    held: Mutex<Held>,
    cv: Condvar,
    port: OnceLock<PortHandle<RamDriver>>,
    /// Entry points in call order, with whether each ran at dispatch level.
    pub entries: Mutex<Vec<(&'static str, bool)>>,
    /// The most requests the driver held at once per LU.
    pub max_held_per_lu: Mutex<BTreeMap<LuAddress, usize>>,
    /// Two held requests of one LU with the same tag (the port's rule b, checked here).
    pub tag_collisions: AtomicU64,
    /// A worker found itself at dispatch level.
    pub worker_at_dispatch: AtomicU64,
    pub completions: AtomicU64,
    /// Worker completions dropped because a reset or removal came between.
    pub dropped_stale: AtomicU64,
}

impl Ram {
    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().expect("driver lock")
    }

    pub fn port(&self) -> &PortHandle<RamDriver> {
        self.port.get().expect("initialized")
    }

    fn entry(&self, name: &'static str) {
        self.entries
            .lock()
            .expect("lock")
            .push((name, in_dispatch()));
    }

    pub fn entry_names(&self) -> Vec<&'static str> {
        self.entries
            .lock()
            .expect("lock")
            .iter()
            .map(|e| e.0)
            .collect()
    }

    /// Lets the workers take requests.
    pub fn release(&self) {
        self.lock().hold = false;
        self.cv.notify_all();
    }

    /// Requests the driver holds, by id.
    pub fn held_ids(&self) -> Vec<SrbId> {
        self.lock().by_id.keys().copied().collect()
    }

    /// The tags the driver holds requests under on `lu`.
    pub fn held_tags(&self, lu: LuAddress) -> BTreeSet<u8> {
        self.lock()
            .by_id
            .values()
            .filter(|r| r.lu() == lu)
            .map(|r| r.tag().0)
            .collect()
    }

    /// Waits until the driver holds `n` requests.
    pub fn wait_held(&self, n: usize) -> bool {
        let deadline = Instant::now() + BOUND;
        while Instant::now() < deadline {
            if self.lock().by_id.len() == n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }

    /// Runs the CDB against memory and sets the status.
    fn execute(&self, req: &Request<()>) {
        let Some(disk) = self.disks.get(usize::from(req.lu().lun)) else {
            return req.set_status(SrbStatus::INVALID_LUN);
        };
        req.set_scsi_status(0);
        req.set_status(SrbStatus::SUCCESS);
        let (rw, write) = match Command::parse(req.cdb()) {
            Ok(Command::TestUnitReady) => return,
            Ok(Command::Read(rw)) => (rw, false),
            Ok(Command::Write(rw)) => (rw, true),
            _ => return check_condition(req, SenseCode::INVALID_COMMAND_OPERATION_CODE),
        };
        let (lba, blocks) = (rw.lba.0, u64::from(rw.blocks.0));
        if lba
            .checked_add(blocks)
            .is_none_or(|end| end > self.cfg.blocks)
        {
            return check_condition(req, SenseCode::LBA_OUT_OF_RANGE);
        }
        let (at, len) = (lba as usize * BLOCK, blocks as usize * BLOCK);
        if len != req.scatter_gather_list().total_len() {
            return req.set_status(SrbStatus::INVALID_REQUEST);
        }
        let mut disk = disk.lock().expect("disk");
        let moved = if write {
            req.read_data(0, &mut disk[at..at + len])
        } else {
            req.write_data(0, &disk[at..at + len])
        };
        moved.expect("the list maps the buffer");
    }

    /// A worker: takes requests at passive level, runs them, completes them.
    fn worker(self: Arc<Ram>) {
        loop {
            let (req, generation) = {
                let mut h = self.lock();
                while (h.queue.is_empty() || h.hold) && !h.stop {
                    h = self.cv.wait(h).expect("driver lock");
                }
                if h.stop {
                    return;
                }
                let Some(req) = h.queue.pop_front() else {
                    continue;
                };
                (req, h.generation)
            };
            if in_dispatch() {
                self.worker_at_dispatch.fetch_add(1, SeqCst);
            }
            self.execute(&req);
            // Completed under the driver's lock, so a reset or removal never races it.
            let mut h = self.lock();
            let current = h.generation == generation && h.by_id.remove(&req.id()).is_some();
            let port = self.port();
            match self.cfg.fault {
                // Broken: no generation check, no forgetting.
                Fault::CompleteAfterReset => {
                    h.by_id.remove(&req.id());
                    port.complete_request(&req);
                }
                Fault::CompleteTagTwice if current => {
                    port.complete_tagged(req.lu(), req.tag(), req.status());
                    port.complete_tagged(req.lu(), req.tag(), req.status());
                }
                Fault::DoubleCompleteWrites if current => {
                    port.complete_request(&req);
                    if req.cdb()[0] == 0x2a {
                        port.complete_request(&req);
                    }
                }
                _ if current => port.complete_request(&req),
                _ => {
                    self.dropped_stale.fetch_add(1, SeqCst);
                    continue;
                }
            }
            self.completions.fetch_add(1, SeqCst);
        }
    }

    /// Stops and joins the workers.
    fn stop_workers(&self, workers: &Mutex<Vec<JoinHandle<()>>>) {
        self.lock().stop = true;
        self.cv.notify_all();
        for t in workers.lock().expect("lock").drain(..) {
            t.join().expect("worker");
        }
    }
}

fn check_condition(req: &Request<()>, code: SenseCode) {
    req.set_status(SrbStatus::ERROR);
    req.set_scsi_status(0x02);
    let sense = FixedSense::new(code);
    let mut buf = vec![0u8; sense.buffer_len()];
    sense.emit(&mut buf).expect("sized");
    req.set_sense(&buf);
}

/// The driver object the port holds.
pub struct RamDriver {
    pub ram: Arc<Ram>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl RamDriver {
    pub fn new(cfg: RamConfig) -> RamDriver {
        let size = cfg.blocks as usize * BLOCK;
        let ram = Arc::new(Ram {
            disks: (0..cfg.luns).map(|_| Mutex::new(vec![0; size])).collect(),
            held: Mutex::new(Held {
                hold: cfg.hold,
                ..Held::default()
            }),
            cv: Condvar::new(),
            port: OnceLock::new(),
            entries: Mutex::default(),
            max_held_per_lu: Mutex::default(),
            tag_collisions: AtomicU64::new(0),
            worker_at_dispatch: AtomicU64::new(0),
            completions: AtomicU64::new(0),
            dropped_stale: AtomicU64::new(0),
            cfg,
        });
        RamDriver {
            ram,
            workers: Mutex::default(),
        }
    }
}

impl Drop for RamDriver {
    fn drop(&mut self) {
        // Not joined: after a bugcheck a worker may be anywhere.
        self.ram.lock().stop = true;
        self.ram.cv.notify_all();
    }
}

impl Driver for RamDriver {
    type Extension = ();

    fn initialize(&self, port: &PortHandle<Self>) -> Result<DriverInfo, InitializeError> {
        self.ram.entry("initialize");
        self.ram
            .port
            .set(port.clone())
            .map_err(|_| InitializeError("initialized twice".into()))?;
        for i in 0..self.ram.cfg.workers {
            let ram = self.ram.clone();
            let t = std::thread::Builder::new()
                .name(format!("ram-worker-{i}"))
                .spawn(move || ram.worker())
                .map_err(|e| InitializeError(e.to_string()))?;
            self.workers.lock().expect("lock").push(t);
        }
        for lun in 0..self.ram.cfg.luns {
            port.notify_device_arrival(LuAddress::new(0, 0, lun));
        }
        Ok(DriverInfo {
            max_luns: self.ram.cfg.luns,
            tags_per_lu: self.ram.cfg.tags_per_lu,
            ..DriverInfo::default()
        })
    }

    fn start_request(&self, _port: &PortHandle<Self>, request: Request<()>) {
        self.ram.entry("start_request");
        if self.ram.cfg.fault == Fault::BlockInStart {
            // KeWaitForSingleObject at DISPATCH_LEVEL.
            let _ = KeEvent::default().wait(Duration::from_secs(5));
        }
        let mut h = self.ram.lock();
        let lu = request.lu();
        if h.by_id
            .values()
            .any(|r| r.lu() == lu && r.tag() == request.tag())
        {
            self.ram.tag_collisions.fetch_add(1, SeqCst);
        }
        h.by_id.insert(request.id(), request.clone());
        let n = h.by_id.values().filter(|r| r.lu() == lu).count();
        let mut max = self.ram.max_held_per_lu.lock().expect("lock");
        let m = max.entry(lu).or_default();
        *m = (*m).max(n);
        h.queue.push_back(request);
        drop(h);
        self.ram.cv.notify_one();
    }

    fn reset(&self, _port: &PortHandle<Self>, _path_id: u8) -> bool {
        self.ram.entry("reset");
        match self.ram.cfg.fault {
            Fault::SleepInReset(d) => std::thread::sleep(d),
            Fault::CompleteAfterReset => return true,
            _ => {}
        }
        let mut h = self.ram.lock();
        h.generation += 1;
        h.queue.clear();
        h.by_id.clear();
        true
    }

    fn remove(&self, port: &PortHandle<Self>, surprise: bool) {
        self.ram.entry(if surprise {
            "remove(surprise)"
        } else {
            "remove"
        });
        if self.ram.cfg.fault == Fault::LeaveAtRemoval {
            return;
        }
        if surprise {
            // The device is gone: fail everything held, and make the workers drop theirs.
            let mut h = self.ram.lock();
            h.generation += 1;
            h.queue.clear();
            for (_, req) in std::mem::take(&mut h.by_id) {
                req.set_status(SrbStatus::NO_DEVICE);
                port.complete_request(&req);
            }
        } else {
            // Orderly: let the workers finish what is held (passive level: may wait).
            self.ram.release();
            let deadline = Instant::now() + BOUND;
            let mut h = self.ram.lock();
            while !h.by_id.is_empty() && Instant::now() < deadline {
                h = self
                    .ram
                    .cv
                    .wait_timeout(h, Duration::from_millis(5))
                    .expect("driver lock")
                    .0;
            }
        }
        self.ram.stop_workers(&self.workers);
    }

    fn power(&self, _port: &PortHandle<Self>, state: PowerState) {
        self.ram.entry(match state {
            PowerState::D0 => "power(D0)",
            PowerState::D3 => "power(D3)",
        });
    }

    fn unload(&self, _port: &PortHandle<Self>) {
        self.ram.entry("unload");
        self.ram.stop_workers(&self.workers);
    }
}

/// A port over a RAM driver, and the driver's shared state.
pub fn start(cfg: RamConfig) -> (Port<RamDriver>, Arc<Ram>) {
    start_with(cfg, PortConfig::default())
}

pub fn start_with(cfg: RamConfig, config: PortConfig) -> (Port<RamDriver>, Arc<Ram>) {
    let driver = RamDriver::new(cfg);
    let ram = driver.ram.clone();
    let port = Port::start(driver, config).expect("start");
    (port, ram)
}

pub fn lu(lun: u8) -> LuAddress {
    LuAddress::new(0, 0, lun)
}

/// A WRITE(10) of `data` at `lba`.
pub fn write10(port: &Port<RamDriver>, lun: u8, lba: u32, data: &[u8]) -> SrbRequest {
    let blocks = (data.len() / BLOCK) as u16;
    let mut cdb = [0u8; 10];
    cdb[0] = 0x2a;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    let buf = port.buffer_from(data).expect("memory");
    SrbRequest::scsi(lu(lun), &cdb, DataDirection::Out, buf)
}

/// A READ(10) of `blocks` at `lba`.
pub fn read10(port: &Port<RamDriver>, lun: u8, lba: u32, blocks: u16) -> SrbRequest {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x28;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    let buf = port
        .read_buffer(usize::from(blocks) * BLOCK)
        .expect("memory");
    SrbRequest::scsi(lu(lun), &cdb, DataDirection::In, buf)
}

/// TEST UNIT READY.
pub fn tur(lun: u8) -> SrbRequest {
    SrbRequest::scsi(lu(lun), &[0; 6], DataDirection::None, Vec::new())
}

/// Submits and waits (bounded) for the result.
pub fn run(port: &Port<RamDriver>, req: SrbRequest) -> SrbResult {
    port.submit(req)
        .expect("accepted")
        .wait_timeout(BOUND)
        .expect("completed in time")
}
