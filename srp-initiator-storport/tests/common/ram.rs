//! A RAM-disk miniport: EXECUTE_SCSI READ/WRITE(10/16), INQUIRY, READ CAPACITY(10) and
//! TEST UNIT READY against memory, completed inline from StartIo or, every Nth request,
//! from its own DPC thread (as an HBA completes from its DPC). Instrumented with atomics.
//! Knobs make it hold requests (to test queues), forget them on reset, or complete twice.

use access_layer::verbs::{at_dispatch, in_dispatch};
use srp_initiator_storport::port::ke::stall_execution;
use srp_initiator_storport::port::{
    AdapterControl, AdapterControlStatus, FindAdapterStatus, Miniport, PortConfigurationInfo,
    PortServices, Srb, SrbFunction, SrbStatus, SynchronizationModel,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

pub const BLOCK: usize = 512;

/// The miniport's knobs.
#[derive(Debug, Clone, Default)]
pub struct RamConfig {
    pub luns: u8,
    pub blocks: u64,
    /// Complete every Nth request from the DPC thread (0: never).
    pub async_every: u64,
    /// Keep EXECUTE_SCSI requests in StartIo without completing them.
    pub hold: bool,
    /// HwResetBus completes nothing (a broken miniport).
    pub forget_on_reset: bool,
    /// Complete TEST UNIT READY twice (a broken miniport).
    pub double_complete_tur: bool,
    /// HwBuildIo spins until another HwBuildIo runs (bounded), to show they overlap.
    pub rendezvous_build_io: bool,
}

pub type Ext = (u8, u64, u32);

/// The adapter's memory, queues and counters, shared with the test.
pub struct Probe {
    pub cfg: RamConfig,
    pub hold: AtomicBool,
    /// Answer this many EXECUTE_SCSI requests with SRB_STATUS_BUSY first.
    pub busy_answers: AtomicU32,
    pub build_calls: AtomicU64,
    disks: Vec<Mutex<Vec<u8>>>,
    held: Mutex<Vec<Srb<Ext>>>,
    dpc: Mutex<VecDeque<Srb<Ext>>>,
    dpc_cv: Condvar,
    pub services: OnceLock<PortServices<RamMiniport>>,
    pub build_active: AtomicU32,
    pub build_max: AtomicU32,
    pub start_active: AtomicU32,
    pub start_overlaps: AtomicU64,
    pub start_calls: AtomicU64,
    pub dpc_completions: AtomicU64,
    pub not_at_dispatch: AtomicU64,
    pub resets: AtomicU32,
    pub find_adapter_calls: AtomicU32,
    pub find_adapter_at_dispatch: AtomicU32,
    pub stops: AtomicU32,
}

impl Probe {
    pub fn new(cfg: RamConfig) -> Arc<Probe> {
        let size = cfg.blocks as usize * BLOCK;
        Arc::new(Probe {
            hold: AtomicBool::new(cfg.hold),
            busy_answers: AtomicU32::new(0),
            build_calls: AtomicU64::new(0),
            disks: (0..cfg.luns).map(|_| Mutex::new(vec![0; size])).collect(),
            held: Mutex::default(),
            dpc: Mutex::default(),
            dpc_cv: Condvar::new(),
            services: OnceLock::new(),
            build_active: AtomicU32::new(0),
            build_max: AtomicU32::new(0),
            start_active: AtomicU32::new(0),
            start_overlaps: AtomicU64::new(0),
            start_calls: AtomicU64::new(0),
            dpc_completions: AtomicU64::new(0),
            not_at_dispatch: AtomicU64::new(0),
            resets: AtomicU32::new(0),
            find_adapter_calls: AtomicU32::new(0),
            find_adapter_at_dispatch: AtomicU32::new(0),
            stops: AtomicU32::new(0),
            cfg,
        })
    }

    pub fn services(&self) -> &PortServices<RamMiniport> {
        self.services.get().expect("HwFindAdapter ran")
    }

    pub fn held_count(&self) -> usize {
        self.held.lock().expect("lock").len()
    }

    pub fn held_ids(&self) -> Vec<srp_initiator_storport::port::SrbId> {
        self.held
            .lock()
            .expect("lock")
            .iter()
            .map(|s| s.id())
            .collect()
    }

    /// Drops the held requests without completing them (after CompleteRequests).
    pub fn forget_held(&self) {
        self.held.lock().expect("lock").clear();
    }

    pub fn starts(&self) -> u64 {
        self.start_calls.load(SeqCst)
    }

    /// Executes and completes the first `n` held requests (from the test thread, at
    /// dispatch level as a DPC would).
    pub fn release_held(&self, n: usize) -> usize {
        let mut held = self.held.lock().expect("lock");
        let n = n.min(held.len());
        let srbs: Vec<_> = held.drain(..n).collect();
        at_dispatch(|| {
            for srb in &srbs {
                self.execute(srb);
                self.services().request_complete(srb);
            }
        });
        n
    }

    fn complete_status(&self, srb: &Srb<Ext>, status: SrbStatus) {
        srb.set_status(status);
        self.services().request_complete(srb);
    }

    fn check_condition(srb: &Srb<Ext>, key: u8, asc: u8, ascq: u8) {
        srb.set_status(SrbStatus::ERROR);
        srb.set_scsi_status(0x02);
        let mut sense = [0u8; 18];
        sense[0] = 0x70;
        sense[2] = key;
        sense[7] = 10;
        sense[12] = asc;
        sense[13] = ascq;
        srb.set_sense(&sense);
    }

    /// Runs the CDB against memory and sets the status.
    pub fn execute(&self, srb: &Srb<Ext>) {
        let (op, lba, blocks) = srb.with_extension(|x| *x);
        let Some(disk) = self.disks.get(usize::from(srb.address().lun)) else {
            return srb.set_status(SrbStatus::INVALID_LUN);
        };
        srb.set_scsi_status(0);
        srb.set_status(SrbStatus::SUCCESS);
        match op {
            0x00 => {}
            0x12 => {
                let mut inq = [0u8; 36];
                inq[2] = 5;
                inq[3] = 2;
                inq[4] = 31;
                inq[8..16].copy_from_slice(b"RUSTRAM ");
                inq[16..32].copy_from_slice(b"RAMDISK         ");
                inq[32..36].copy_from_slice(b"0001");
                let n = srb.scatter_gather_list().total_len().min(36);
                srb.write_data(0, &inq[..n]).expect("in the buffer");
                srb.set_data_transfer_length(n);
            }
            0x25 => {
                let mut cap = [0u8; 8];
                cap[..4].copy_from_slice(&((self.cfg.blocks - 1) as u32).to_be_bytes());
                cap[4..].copy_from_slice(&(BLOCK as u32).to_be_bytes());
                srb.write_data(0, &cap).expect("8 bytes");
            }
            0x28 | 0x2a | 0x88 | 0x8a => {
                let len = blocks as usize * BLOCK;
                if lba + u64::from(blocks) > self.cfg.blocks {
                    return Self::check_condition(srb, 0x05, 0x21, 0x00);
                }
                if len != srb.scatter_gather_list().total_len() {
                    return srb.set_status(SrbStatus::INVALID_REQUEST);
                }
                let at = lba as usize * BLOCK;
                let mut disk = disk.lock().expect("lock");
                let r = if op & 0x02 == 0 {
                    srb.write_data(0, &disk[at..at + len])
                } else {
                    srb.read_data(0, &mut disk[at..at + len])
                };
                r.expect("the list maps the buffer");
            }
            _ => Self::check_condition(srb, 0x05, 0x20, 0x00),
        }
    }

    /// The DPC: completes queued requests at dispatch level.
    fn dpc_loop(me: Weak<Probe>) {
        while let Some(p) = me.upgrade() {
            let mut q = p.dpc.lock().expect("lock");
            if q.is_empty() {
                q = p
                    .dpc_cv
                    .wait_timeout(q, Duration::from_millis(20))
                    .expect("condvar")
                    .0;
            }
            // Completed under the queue lock, so HwResetBus never misses one in flight.
            while let Some(srb) = q.pop_front() {
                at_dispatch(|| {
                    p.execute(&srb);
                    p.services().request_complete(&srb);
                });
                p.dpc_completions.fetch_add(1, SeqCst);
            }
        }
    }

    fn dispatch_check(&self) {
        if !in_dispatch() {
            self.not_at_dispatch.fetch_add(1, SeqCst);
        }
    }
}

/// The device extension.
#[derive(Default)]
pub struct RamMiniport {
    probe: OnceLock<Arc<Probe>>,
}

impl RamMiniport {
    fn p(&self) -> &Arc<Probe> {
        self.probe.get().expect("HwFindAdapter ran")
    }
}

/// Parses the CDB: (opcode, LBA, blocks).
fn parse(cdb: &[u8]) -> Ext {
    let be = |b: &[u8]| b.iter().fold(0u64, |a, &x| a << 8 | u64::from(x));
    match cdb.first() {
        Some(&op @ (0x28 | 0x2a)) if cdb.len() >= 10 => (op, be(&cdb[2..6]), be(&cdb[7..9]) as u32),
        Some(&op @ (0x88 | 0x8a)) if cdb.len() >= 16 => {
            (op, be(&cdb[2..10]), be(&cdb[10..14]) as u32)
        }
        Some(&op) => (op, 0, 0),
        None => (0xff, 0, 0),
    }
}

impl Miniport for RamMiniport {
    type HwContext = Arc<Probe>;
    type SrbExtension = Ext;

    fn find_adapter(
        &self,
        port: &PortServices<Self>,
        context: &Arc<Probe>,
        config: &mut PortConfigurationInfo,
    ) -> FindAdapterStatus {
        context.find_adapter_calls.fetch_add(1, SeqCst);
        if in_dispatch() {
            context.find_adapter_at_dispatch.fetch_add(1, SeqCst);
        }
        let _ = self.probe.set(context.clone());
        let _ = context.services.set(port.clone());
        config.maximum_transfer_length = 1 << 20;
        config.number_of_physical_breaks = 256;
        config.maximum_number_of_logical_units = context.cfg.luns;
        config.synchronization_model = SynchronizationModel::FullDuplex;
        FindAdapterStatus::Found
    }

    fn initialize(&self, _port: &PortServices<Self>) -> bool {
        let p = Arc::downgrade(self.p());
        if self.p().find_adapter_calls.load(SeqCst) == 1 {
            std::thread::spawn(move || Probe::dpc_loop(p));
        }
        true
    }

    fn build_io(&self, _port: &PortServices<Self>, srb: &Srb<Ext>) -> bool {
        let p = self.p();
        p.dispatch_check();
        p.build_calls.fetch_add(1, SeqCst);
        let now = p.build_active.fetch_add(1, SeqCst) + 1;
        p.build_max.fetch_max(now, SeqCst);
        if p.cfg.rendezvous_build_io {
            let end = Instant::now() + Duration::from_millis(50);
            while p.build_active.load(SeqCst) < 2 && Instant::now() < end {
                stall_execution(Duration::from_micros(20));
            }
            p.build_max.fetch_max(p.build_active.load(SeqCst), SeqCst);
        }
        srb.with_extension(|x| *x = parse(srb.cdb()));
        p.build_active.fetch_sub(1, SeqCst);
        true
    }

    fn start_io(&self, _port: &PortServices<Self>, srb: Srb<Ext>) -> bool {
        let p = self.p();
        p.dispatch_check();
        if p.start_active.fetch_add(1, SeqCst) != 0 {
            p.start_overlaps.fetch_add(1, SeqCst);
        }
        let n = p.start_calls.fetch_add(1, SeqCst) + 1;
        let busy = p
            .busy_answers
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok();
        match srb.function() {
            SrbFunction::ExecuteScsi if busy => {
                srb.with_extension(|x| assert_eq!(x.0, srb.cdb()[0], "built for this SRB"));
                p.complete_status(&srb, SrbStatus::BUSY);
            }
            SrbFunction::ExecuteScsi if p.hold.load(SeqCst) => {
                p.held.lock().expect("lock").push(srb)
            }
            SrbFunction::ExecuteScsi if p.cfg.async_every > 0 && n % p.cfg.async_every == 0 => {
                p.dpc.lock().expect("lock").push_back(srb);
                p.dpc_cv.notify_one();
            }
            SrbFunction::ExecuteScsi => {
                p.execute(&srb);
                p.services().request_complete(&srb);
                if p.cfg.double_complete_tur && srb.cdb()[0] == 0x00 {
                    p.services().request_complete(&srb);
                }
            }
            SrbFunction::AbortCommand => {
                let mut held = p.held.lock().expect("lock");
                let victim = held.iter().position(|s| Some(s.id()) == srb.abort_target());
                let found = victim.map(|i| held.remove(i));
                drop(held);
                if let Some(v) = &found {
                    p.complete_status(v, SrbStatus::ABORTED);
                }
                let st = if found.is_some() {
                    SrbStatus::SUCCESS
                } else {
                    SrbStatus::ABORT_FAILED
                };
                p.complete_status(&srb, st);
            }
            _ => p.complete_status(&srb, SrbStatus::SUCCESS),
        }
        p.start_active.fetch_sub(1, SeqCst);
        true
    }

    fn reset_bus(&self, _port: &PortServices<Self>, path_id: u8) -> bool {
        let p = self.p();
        p.dispatch_check();
        p.resets.fetch_add(1, SeqCst);
        if p.cfg.forget_on_reset {
            p.held.lock().expect("lock").clear();
            return true;
        }
        let mut dpc = p.dpc.lock().expect("lock");
        let mut all: Vec<Srb<Ext>> = dpc.drain(..).collect();
        all.append(&mut p.held.lock().expect("lock"));
        for srb in all.iter().filter(|s| s.address().path_id == path_id) {
            p.complete_status(srb, SrbStatus::BUS_RESET);
        }
        true
    }

    fn adapter_control(
        &self,
        _port: &PortServices<Self>,
        control: AdapterControl<'_>,
    ) -> AdapterControlStatus {
        match control {
            AdapterControl::QuerySupportedControlTypes(t) => {
                // As the 2005 SRP miniport: Stop, no Restart.
                t.stop_adapter = true;
                t.restart_adapter = false;
            }
            AdapterControl::StopAdapter => {
                self.p().stops.fetch_add(1, SeqCst);
            }
            AdapterControl::RestartAdapter => return AdapterControlStatus::Unsuccessful,
        }
        AdapterControlStatus::Success
    }
}
