//! `srpctl bench disk`: the library-level block benchmark of PERFORMANCE.md.
//!
//! In one process: the target daemon serving a file LUN on /dev/shm (random data: a file
//! given with `--file`, or one made here and removed at the end) at `--target`, and the
//! SRP initiator driven directly through its port — the StorPort miniport, or with
//! `--driver` the iSCSI-model driver (`HostAdapter::submit` of READ SRBs, the host daemon's
//! adapter configuration) — from `--host`, as fio's nbd engine drives
//! libnbd. Each completion routine submits the next request, so exactly `depth` requests
//! stay outstanding. Workloads: 4 KiB random read at `--depth` (IOPS), 128 KiB sequential
//! read at `--depth` (MiB/s), 4 KiB random read at depth 1 (average latency). With
//! `--registration both` two sessions (per-I/O FRMR, and the all-memory region from the
//! next host address) run the same points interleaved, for the FRMR-cost goal; with
//! `--driver both` the iSCSI-model driver's sessions run beside the StorPort miniport's
//! (from the next addresses), labelled `iscsi-model …`. Rounds
//! interleave every point; medians are reported, with the bytes that crossed loopback per
//! data byte and the process's CPU time per I/O (target and initiator together).
//!
//! Peers (local file with fio libaio, nbdkit with fio's nbd engine) are measured in the
//! same run by `scripts/bench-disk.sh`, which also runs this command.

use anyhow::{Context, Result, anyhow, bail, ensure};
use ib_verbs::Guid;
use srp::initiator::PortState;
use srp_hostd::HostConfig;
use srp_hostd::adapter::HostAdapter;
use srp_hostd::config::DriverModel;
use srp_hostd::discover::SrpService;
use srp_initiator_storport::port::{
    DataBuffer, DataDirection, LuAddress, SrbRequest, SrbResult, SrbStatus, SystemMemory,
};
use srp_initiator_storport::srp::RegistrationMode;
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// Which memory registration the initiator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Registration {
    /// Per-I/O fast registration (FRMR), the secure default.
    PerIo,
    /// One region over all of the host's system memory (the 2005 model).
    TrustTarget,
    /// Both, as two sessions measured interleaved (the FRMR-cost goal).
    Both,
}

/// Which initiator driver model runs the sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Driver {
    /// The StorPort miniport (the default).
    Storport,
    /// The iSCSI-model driver.
    IscsiModel,
    /// Both, as sessions measured interleaved (the second model from the next addresses).
    Both,
}

/// One measured point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Workload {
    /// 4 KiB random read at `--depth` (IOPS).
    Randread4k,
    /// 4 KiB random write at `--depth` (IOPS; needs a LUN the run may write: `--rbd`, or
    /// the file made here).
    Randwrite4k,
    /// 128 KiB sequential read at `--depth` (MiB/s).
    Seqread128k,
    /// 4 KiB random read at depth 1 (average latency).
    Lat4k,
}

impl Workload {
    fn name(self, depth: usize) -> String {
        match self {
            Workload::Randread4k => format!("4k randread QD{depth}"),
            Workload::Randwrite4k => format!("4k randwrite QD{depth}"),
            Workload::Seqread128k => format!("128k seqread QD{depth}"),
            Workload::Lat4k => "4k randread QD1".to_owned(),
        }
    }

    fn key(self) -> &'static str {
        match self {
            Workload::Randread4k => "randread4k",
            Workload::Randwrite4k => "randwrite4k",
            Workload::Seqread128k => "seqread128k",
            Workload::Lat4k => "lat4k",
        }
    }

    fn bytes(self) -> u32 {
        match self {
            Workload::Seqread128k => 128 << 10,
            Workload::Randread4k | Workload::Randwrite4k | Workload::Lat4k => 4 << 10,
        }
    }

    fn depth(self, depth: usize) -> usize {
        match self {
            Workload::Lat4k => 1,
            Workload::Randread4k | Workload::Randwrite4k | Workload::Seqread128k => depth,
        }
    }

    fn sequential(self) -> bool {
        self == Workload::Seqread128k
    }

    fn writes(self) -> bool {
        self == Workload::Randwrite4k
    }
}

/// Options of the benchmark (`srpctl bench disk`).
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct Options {
    /// Seconds per measured point.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) secs: f64,
    /// Rounds; every point is measured once per round, interleaved; medians reported.
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
    /// Requests kept outstanding by the QD points (1..255).
    #[arg(long, default_value_t = 32)]
    pub(crate) depth: usize,
    /// Points to measure, in this order each round.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "randread4k,seqread128k,lat4k"
    )]
    pub(crate) workloads: Vec<Workload>,
    /// Memory registration: per-I/O FRMR (the default), the all-memory region, or both
    /// as two sessions measured interleaved (the FRMR-cost goal).
    #[arg(long, value_enum, default_value = "per-io")]
    pub(crate) registration: Registration,
    /// The initiator's driver model: the StorPort miniport (the default), the iSCSI-model
    /// driver, or both as sessions measured interleaved.
    #[arg(long, value_enum, default_value = "storport")]
    pub(crate) driver: Driver,
    /// An existing backing file (random data, a multiple of 4 KiB) to serve read-only and
    /// leave in place; default: a file of --size-mib random bytes made on /dev/shm and
    /// removed at the end.
    #[arg(long)]
    pub(crate) file: Option<PathBuf>,
    /// Size of the file made when --file is not given, in MiB (1..1024).
    #[arg(long, default_value_t = 1024)]
    pub(crate) size_mib: u64,
    /// Serve a Ceph RBD image (`pool/image`, written by the write points) instead of a
    /// file: the data path fio's rbd engine is compared with (scripts/bench-rbd.sh).
    #[arg(long, conflicts_with = "file")]
    pub(crate) rbd: Option<String>,
    /// The cluster's configuration file, with --rbd.
    #[arg(long, requires = "rbd", default_value = "/etc/ceph/ceph.conf")]
    pub(crate) ceph_conf: PathBuf,
    /// The Ceph client id (without `client.`), with --rbd; default librados's.
    #[arg(long, requires = "rbd")]
    pub(crate) ceph_client: Option<String>,
    /// The client's keyring, with --rbd; default the configuration's.
    #[arg(long, requires = "rbd")]
    pub(crate) ceph_keyring: Option<PathBuf>,
    /// The target port's address.
    #[arg(long, default_value = "127.0.201.1")]
    pub(crate) target: IpAddr,
    /// The initiator's address (with --registration both, the trust-target session uses
    /// the next address).
    #[arg(long, default_value = "127.0.201.2")]
    pub(crate) host: IpAddr,
    /// The target's RDMA-CM TCP port.
    #[arg(long, default_value_t = 5601)]
    pub(crate) rdma_cm_port: u16,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
}

const LU: LuAddress = LuAddress::new(0, 0, 0);
const IOC_GUID: u64 = 0x0002_c903_00be_d201;

/// The backing file: made here (random data, removed on drop) or given.
struct Backing {
    path: PathBuf,
    owned: bool,
}

impl Drop for Backing {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A fast deterministic generator (xorshift64*), for data and offsets.
fn next_rand(x: &mut u64) -> u64 {
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn make_backing(o: &Options) -> Result<Backing> {
    if let Some(p) = &o.file {
        let len = std::fs::metadata(p)
            .with_context(|| format!("{}", p.display()))?
            .len();
        ensure!(
            len >= 1 << 20 && len % 4096 == 0,
            "{}: {len} bytes; need a multiple of 4 KiB, at least 1 MiB",
            p.display()
        );
        return Ok(Backing {
            path: p.clone(),
            owned: false,
        });
    }
    ensure!((1..=1024).contains(&o.size_mib), "--size-mib: 1 to 1024");
    let path = PathBuf::from(format!(
        "/dev/shm/srpctl-bench-disk-{}.img",
        std::process::id()
    ));
    let backing = Backing {
        path: path.clone(),
        owned: true,
    };
    let mut f = std::fs::File::create(&path).with_context(|| format!("{}", path.display()))?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
    let mut chunk = vec![0u8; 1 << 20];
    for _ in 0..o.size_mib {
        for w in chunk.chunks_exact_mut(8) {
            w.copy_from_slice(&next_rand(&mut x).to_le_bytes());
        }
        f.write_all(&chunk)
            .with_context(|| format!("filling {}", path.display()))?;
    }
    f.sync_all().ok();
    Ok(backing)
}

fn target_config(o: &Options, file: Option<&Path>) -> Result<TargetConfig> {
    let writes = o.workloads.iter().any(|w| w.writes());
    let lun = match &o.rbd {
        Some(image) => {
            let mut t = format!(
                "rbd = \"{image}\"\nceph_conf = \"{}\"\n",
                o.ceph_conf.display()
            );
            if let Some(c) = &o.ceph_client {
                t += &format!("ceph_client = \"{c}\"\n");
            }
            if let Some(k) = &o.ceph_keyring {
                t += &format!("ceph_keyring = \"{}\"\n", k.display());
            }
            t
        }
        None => {
            let file = file.ok_or_else(|| anyhow!("no backing file"))?;
            ensure!(
                !writes || o.file.is_none(),
                "a write point would overwrite --file {}: give --rbd, or no --file",
                file.display()
            );
            format!("file = \"{}\"\nread_only = {}\n", file.display(), !writes)
        }
    };
    let text = format!(
        r#"[target]
name = "srpctl-bench-disk"
node_guid = "0x0002c90300bed200"
rdma_cm_port = {port}

[[port]]
name = "p0"
address = "{target}"

[[lun]]
name = "bench"
{lun}
[[ioc]]
name = "ioc-bench"
guid = "{IOC_GUID:#018x}"
ports = ["p0"]
exports = {{ 0 = "bench" }}
allow = ["any"]
"#,
        port = o.rdma_cm_port,
        target = o.target,
    );
    Ok(TargetConfig::from_str(&text, "bench-disk.toml")
        .map_err(|e| anyhow!("benchmark target configuration: {e}"))?
        .config)
}

/// The address after `ip` (the second session's).
fn next_addr(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v) => IpAddr::V4((u32::from(v).wrapping_add(1)).into()),
        IpAddr::V6(v) => IpAddr::V6((u128::from(v).wrapping_add(1)).into()),
    }
}

pub(crate) fn srb_ok(r: &SrbResult) -> bool {
    r.status.code() == SrbStatus::SUCCESS && r.scsi_status == 0
}

/// Runs `cdb` with `len` bytes of data-in and waits (setup only).
pub(crate) fn execute(port: &HostAdapter, cdb: &[u8], len: usize) -> Result<SrbResult> {
    let dir = if len == 0 {
        DataDirection::None
    } else {
        DataDirection::In
    };
    execute_with(port, cdb, dir, vec![0; len])
}

/// Runs `cdb` with `data` in direction `dir` and waits.
pub(crate) fn execute_with(
    port: &HostAdapter,
    cdb: &[u8],
    dir: DataDirection,
    data: Vec<u8>,
) -> Result<SrbResult> {
    let c = port
        .submit(SrbRequest::scsi(LU, cdb, dir, data))
        .map_err(|e| anyhow!("the port refused the request: {e}"))?;
    c.wait_timeout(Duration::from_secs(30))
        .map_err(|e| anyhow!("the request did not complete: {e}"))
}

pub(crate) fn read16(lba: u64, blocks: u32) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x88;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

/// One logged-in initiator.
pub(crate) struct Session {
    registration: RegistrationMode,
    driver: DriverModel,
    pub(crate) port: Arc<HostAdapter>,
    /// Blocks of the LU and their size.
    pub(crate) blocks: u64,
    pub(crate) block_size: u32,
}

impl Session {
    /// Logs in from `local` to the first IOC of `target`, at `portal`, keeping up to
    /// `depth` requests outstanding; waits until the LU is ready.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        portal: IpAddr,
        depth: usize,
        target: &TargetConfig,
        local: IpAddr,
        registration: RegistrationMode,
        driver: DriverModel,
        guid: u64,
        memory: &Arc<SystemMemory>,
    ) -> Result<Session> {
        let ioc = &target.iocs[0];
        let service = SrpService {
            portal,
            ioc_guid: ioc.guid,
            ioc_name: ioc.name.clone(),
            id_ext: ioc.id_ext,
            service_id: ioc.service_id,
        };
        let mut host = HostConfig::with_portals("srpctl-bench-disk", Vec::new());
        host.node_guid = Guid(guid);
        host.registration = registration;
        host.queue_depth = host.queue_depth.max(depth as u32).min(255);
        let hw = srp_hostd::session::adapter_config(
            &host,
            &service,
            local,
            srp_initiator_storport::srp::LoginVia::IbCm,
            0,
            &providers::system(),
        );
        let port = HostAdapter::start(driver, hw, memory)
            .map_err(|e| anyhow!("starting the adapter on {local}: {e}"))?;
        let end = Instant::now() + host.login_timeout + Duration::from_secs(1);
        loop {
            let st = port.status();
            if st.state == Some(PortState::Running) {
                break;
            }
            if let Some(e) = st.last_error {
                bail!("login from {local} failed: {e}");
            }
            ensure!(Instant::now() < end, "login from {local}: no answer");
            std::thread::sleep(Duration::from_millis(5));
        }
        // A unit attention may stand after the login: TEST UNIT READY until it is clear.
        let mut ready = false;
        for _ in 0..8 {
            if srb_ok(&execute(&port, &[0; 6], 0)?) {
                ready = true;
                break;
            }
        }
        ensure!(ready, "the LU did not become ready");
        let r = execute(
            &port,
            &[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
            32,
        )?;
        ensure!(srb_ok(&r), "READ CAPACITY(16) failed: {:?}", r.status);
        let cap = r.data.to_vec();
        let last = u64::from_be_bytes(cap[..8].try_into()?);
        let block_size = u32::from_be_bytes(cap[8..12].try_into()?);
        ensure!(
            block_size == 512 || block_size == 4096,
            "block size {block_size}"
        );
        Ok(Session {
            registration,
            driver,
            port: Arc::new(port),
            blocks: last + 1,
            block_size,
        })
    }

    /// The session's name in the report: its registration, prefixed by its driver model
    /// unless that is the StorPort miniport (`per-io`, `iscsi-model per-io`).
    fn label(&self) -> String {
        let reg = match self.registration {
            RegistrationMode::PerIo => "per-io",
            RegistrationMode::TrustTarget => "trust-target",
        };
        match self.driver {
            DriverModel::StorPort => reg.to_owned(),
            DriverModel::IscsiModel => format!("iscsi-model {reg}"),
        }
    }

    /// Reads a few places through the session and compares them with the image, read
    /// straight through librbd (`--rbd`).
    #[cfg(target_os = "linux")]
    fn verify_rbd(&self, o: &Options) -> Result<()> {
        let name = o.rbd.as_deref().unwrap_or_default();
        let (pool, image) = name
            .split_once('/')
            .ok_or_else(|| anyhow!("--rbd {name}: write pool/image"))?;
        let cluster = rbd_client::Cluster::connect(
            &o.ceph_conf,
            o.ceph_client.as_deref(),
            o.ceph_keyring.as_deref(),
            &[("rbd_cache", "false")],
        )
        .map_err(|e| {
            anyhow!(
                "connecting to the cluster of {}: {e}",
                o.ceph_conf.display()
            )
        })?;
        let img = cluster
            .pool(pool)
            .and_then(|p| p.open(image))
            .map_err(|e| anyhow!("rbd:{name}: {e}"))?;
        self.verify_against("the image's", |off, want| {
            img.read_blocking(off, want)
                .map_err(|e| anyhow!("rbd:{name} at {off}: {e}"))
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn verify_rbd(&self, _o: &Options) -> Result<()> {
        bail!("RBD images need Linux")
    }

    /// Reads a few places through the session and compares them with the file.
    fn verify(&self, file: &Path) -> Result<()> {
        let f = std::fs::File::open(file)?;
        self.verify_against("the file", |off, want| Ok(f.read_exact_at(want, off)?))
    }

    /// Reads a few places (the start, the middle, the end) through the session and compares
    /// them with what `truth` reads at the same byte offsets (`whose` names it).
    fn verify_against(
        &self,
        whose: &str,
        mut truth: impl FnMut(u64, &mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let bytes = self.blocks * u64::from(self.block_size);
        for (off, len) in [
            (0u64, 4096usize),
            (bytes / 2, 128 << 10),
            (bytes - 4096, 4096),
        ] {
            let bs = u64::from(self.block_size);
            let r = execute(&self.port, &read16(off / bs, (len as u64 / bs) as u32), len)?;
            ensure!(srb_ok(&r), "READ at {off}: {:?}", r.status);
            let mut want = vec![0u8; len];
            truth(off, &mut want)?;
            ensure!(
                r.data == want,
                "{}: the data read at byte {off} differs from {whose}",
                self.label()
            );
        }
        Ok(())
    }
}

/// The state of one point's run, shared by its completion routines.
struct Job {
    port: Weak<HostAdapter>,
    blocks_per_io: u64,
    /// WRITE(16) of the buffer rather than READ(16) into it.
    write: bool,
    /// Slots of `blocks_per_io` in the LU.
    slots: u64,
    sequential: bool,
    next_slot: AtomicU64,
    stop: AtomicBool,
    ios: AtomicU64,
    lat_ns: AtomicU64,
    outstanding: Mutex<usize>,
    idle: Condvar,
    error: Mutex<Option<String>>,
}

impl Job {
    fn fail(&self, e: String) {
        self.stop.store(true, Ordering::Relaxed);
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
    }

    fn retire(&self) {
        let mut n = self
            .outstanding
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *n -= 1;
        if *n == 0 {
            self.idle.notify_all();
        }
    }

    /// Submits the next read into `buf` (pages of system memory, reused from read to
    /// read); its completion routine submits the one after.
    fn issue(self: &Arc<Job>, buf: DataBuffer, mut rng: u64) {
        let Some(port) = self.port.upgrade() else {
            self.fail("the port went away".into());
            return self.retire();
        };
        let slot = if self.sequential {
            self.next_slot.fetch_add(1, Ordering::Relaxed) % self.slots
        } else {
            next_rand(&mut rng) % self.slots
        };
        let mut cdb = read16(slot * self.blocks_per_io, self.blocks_per_io as u32);
        let dir = if self.write {
            cdb[0] = 0x8a; // WRITE(16)
            DataDirection::Out
        } else {
            DataDirection::In
        };
        let started = Instant::now();
        let submitted = port.submit(SrbRequest::scsi(LU, &cdb, dir, buf));
        drop(port);
        let completion = match submitted {
            Ok(c) => c,
            Err(e) => {
                self.fail(format!("the port refused a request: {e}"));
                return self.retire();
            }
        };
        let job = self.clone();
        completion.on_complete(move |r| {
            let lat = started.elapsed();
            match r {
                Ok(r) if srb_ok(&r) => {
                    if job.stop.load(Ordering::Relaxed) {
                        return job.retire();
                    }
                    job.ios.fetch_add(1, Ordering::Relaxed);
                    job.lat_ns
                        .fetch_add(lat.as_nanos() as u64, Ordering::Relaxed);
                    job.issue(r.data, rng);
                }
                Ok(r) => {
                    job.fail(format!(
                        "{} failed: SRB status {:?}, SCSI status {:#04x}, sense {:02x?}",
                        if job.write { "WRITE" } else { "READ" },
                        r.status,
                        r.scsi_status,
                        r.sense
                    ));
                    job.retire();
                }
                Err(e) => {
                    job.fail(format!("a request did not complete: {e}"));
                    job.retire();
                }
            }
        });
    }
}

/// Bytes received on loopback so far (0 if unreadable).
fn lo_bytes() -> u64 {
    std::fs::read_to_string("/sys/class/net/lo/statistics/rx_bytes")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time of this process (user + system), in seconds.
fn cpu_secs() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the ")" of the command name: state is field 3; utime 14, stime 15.
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // `rest` starts at field 3, so field n is at index n - 3. USER_HZ is 100 on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

/// What one point measured.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    iops: f64,
    mib_s: f64,
    lat_us: f64,
    cpu_us_per_io: f64,
    lo_per_byte: f64,
    /// Heap allocations per I/O, target and initiator together (the counting allocator).
    allocs_per_io: f64,
}

fn measure(s: &Session, w: Workload, depth: usize, secs: f64, seed: u64) -> Result<Sample> {
    let depth = w.depth(depth);
    let bytes = w.bytes();
    let blocks_per_io = u64::from(bytes / s.block_size);
    let job = Arc::new(Job {
        port: Arc::downgrade(&s.port),
        blocks_per_io,
        write: w.writes(),
        slots: s.blocks / blocks_per_io,
        sequential: w.sequential(),
        next_slot: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        ios: AtomicU64::new(0),
        lat_ns: AtomicU64::new(0),
        outstanding: Mutex::new(depth),
        idle: Condvar::new(),
        error: Mutex::new(None),
    });
    let (lo0, cpu0) = (lo_bytes(), cpu_secs());
    ib_verbs::mem::counting(true);
    let allocs0 = ib_verbs::mem::allocations();
    let start = Instant::now();
    for i in 0..depth {
        let mut rng = seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        next_rand(&mut rng);
        let buf = if w.writes() {
            let data: Vec<u8> = (0..bytes as usize / 8)
                .flat_map(|_| next_rand(&mut rng).to_le_bytes())
                .collect();
            s.port.buffer_from(&data).context("a write buffer")?
        } else {
            s.port
                .read_buffer(bytes as usize)
                .context("a read buffer")?
        };
        job.issue(buf, rng);
    }
    let deadline = start + Duration::from_secs_f64(secs);
    while Instant::now() < deadline && !job.stop.load(Ordering::Relaxed) {
        std::thread::sleep(
            deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(20)),
        );
    }
    job.stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    let (lo1, cpu1) = (lo_bytes(), cpu_secs());
    let ios = job.ios.load(Ordering::Relaxed);
    let allocs = ib_verbs::mem::allocations().since(allocs0);
    ib_verbs::mem::counting(false);
    let lat_ns = job.lat_ns.load(Ordering::Relaxed);
    {
        let end = Instant::now() + Duration::from_secs(60);
        let mut n = job
            .outstanding
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *n > 0 {
            let left = end
                .checked_duration_since(Instant::now())
                .ok_or_else(|| anyhow!("{} requests never completed", *n))?;
            n = job
                .idle
                .wait_timeout(n, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
    if let Some(e) = job
        .error
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        bail!("{} {}: {e}", s.label(), w.name(depth));
    }
    ensure!(ios > 0, "{} {}: no I/O completed", s.label(), w.name(depth));
    let data = ios as f64 * f64::from(bytes);
    Ok(Sample {
        iops: ios as f64 / elapsed,
        mib_s: data / elapsed / f64::from(1u32 << 20),
        lat_us: lat_ns as f64 / ios as f64 / 1e3,
        cpu_us_per_io: (cpu1 - cpu0) * 1e6 / ios as f64,
        lo_per_byte: lo1.saturating_sub(lo0) as f64 / data,
        allocs_per_io: allocs.allocations as f64 / ios as f64,
    })
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

/// The medians of one (session, workload) over the rounds.
struct Point {
    workload: Workload,
    registration: String,
    driver: DriverModel,
    rounds: Vec<Sample>,
}

impl Point {
    fn med(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        median(&self.rounds.iter().map(f).collect::<Vec<_>>())
    }

    /// The headline number: IOPS, MiB/s or µs.
    fn headline(&self) -> (f64, &'static str) {
        match self.workload {
            Workload::Randread4k | Workload::Randwrite4k => (self.med(|s| s.iops), "IOPS"),
            Workload::Seqread128k => (self.med(|s| s.mib_s), "MiB/s"),
            Workload::Lat4k => (self.med(|s| s.lat_us), "µs avg"),
        }
    }
}

/// Runs the benchmark and prints the report.
pub(crate) fn run(o: &Options) -> Result<()> {
    ensure!(o.secs > 0.0, "--secs must be positive");
    ensure!(o.rounds >= 1, "--rounds must be at least 1");
    ensure!((1..=255).contains(&o.depth), "--depth: 1 to 255");
    ensure!(!o.workloads.is_empty(), "no workload");
    let backing = match &o.rbd {
        Some(_) => None,
        None => Some(make_backing(o)?),
    };
    let config = target_config(o, backing.as_ref().map(|b| b.path.as_path()))?;
    let options = DaemonOptions {
        shutdown_step: Duration::from_millis(500),
        ..DaemonOptions::new(providers::system())
    };
    let daemon = Daemon::start(config.clone(), options).context("starting the target")?;
    let modes: Vec<RegistrationMode> = match o.registration {
        Registration::PerIo => vec![RegistrationMode::PerIo],
        Registration::TrustTarget => vec![RegistrationMode::TrustTarget],
        Registration::Both => vec![RegistrationMode::PerIo, RegistrationMode::TrustTarget],
    };
    let drivers: Vec<DriverModel> = match o.driver {
        Driver::Storport => vec![DriverModel::StorPort],
        Driver::IscsiModel => vec![DriverModel::IscsiModel],
        Driver::Both => vec![DriverModel::StorPort, DriverModel::IscsiModel],
    };
    // One system memory for every session, as a host daemon has (sized as it sizes it).
    let mut host = HostConfig::with_portals("srpctl-bench-disk", Vec::new());
    host.queue_depth = host.queue_depth.max(o.depth as u32).min(255);
    let memory =
        SystemMemory::new(srp_hostd::session::memory_pages(&host) * modes.len() * drivers.len());
    let mut sessions = Vec::new();
    let mut local = o.host;
    let mut i = 0u64;
    for &d in &drivers {
        for &m in &modes {
            sessions.push(Session::open(
                o.target,
                o.depth,
                &config,
                local,
                m,
                d,
                0x0002_c903_00be_d210 + i,
                &memory,
            )?);
            local = next_addr(local);
            i += 1;
        }
    }
    for s in &sessions {
        match &backing {
            Some(b) => s.verify(&b.path)?,
            None => s.verify_rbd(o)?,
        }
    }
    let size_mib = (sessions[0].blocks * u64::from(sessions[0].block_size)) >> 20;
    if !o.json {
        println!(
            "srpctl bench disk (library level: the miniport's port driven directly, in process): target {} <-> initiator {}, LUN {} ({size_mib} MiB, random data), {} round(s) of {:.1} s per point, interleaved",
            o.target,
            o.host,
            backing.as_ref().map_or_else(
                || format!("rbd:{}", o.rbd.as_deref().unwrap_or_default()),
                |b| b.path.display().to_string()
            ),
            o.rounds,
            o.secs
        );
    }
    let mut points: Vec<Point> = Vec::new();
    for s in &sessions {
        for &w in &o.workloads {
            points.push(Point {
                workload: w,
                registration: s.label(),
                driver: s.driver,
                rounds: Vec::new(),
            });
        }
    }
    for round in 0..o.rounds {
        for &w in &o.workloads {
            for s in &sessions {
                let seed = 0x5eed_0000 + round as u64;
                let sample = measure(s, w, o.depth, o.secs, seed)?;
                let p = points
                    .iter_mut()
                    .find(|p| p.workload == w && p.registration == s.label())
                    .ok_or_else(|| anyhow!("point"))?;
                p.rounds.push(sample);
            }
        }
        if !o.json {
            eprintln!("round {}/{} done", round + 1, o.rounds);
        }
    }
    for s in sessions {
        let _ = s.port.stop(Duration::from_secs(2));
        drop(s);
    }
    daemon.shutdown();
    drop(backing);

    if o.json {
        let results: Vec<serde_json::Value> = points
            .iter()
            .map(|p| {
                serde_json::json!({
                    "workload": p.workload.key(),
                    "name": p.workload.name(o.depth),
                    "registration": p.registration,
                    "driver": p.driver.as_str(),
                    "depth": p.workload.depth(o.depth),
                    "block_bytes": p.workload.bytes(),
                    "iops": p.med(|s| s.iops),
                    "mib_s": p.med(|s| s.mib_s),
                    "lat_avg_us": p.med(|s| s.lat_us),
                    "cpu_us_per_io": p.med(|s| s.cpu_us_per_io),
                    "lo_bytes_per_data_byte": p.med(|s| s.lo_per_byte),
                    "allocs_per_io": p.med(|s| s.allocs_per_io),
                    "rounds": p.rounds.iter().map(|s| serde_json::json!({
                        "iops": s.iops, "mib_s": s.mib_s, "lat_avg_us": s.lat_us,
                        "cpu_us_per_io": s.cpu_us_per_io, "lo_bytes_per_data_byte": s.lo_per_byte,
                        "allocs_per_io": s.allocs_per_io,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "benchmark": "srpctl bench disk",
            "level": "library",
            "target": o.target.to_string(),
            "host": o.host.to_string(),
            "lun_mib": size_mib,
            "secs": o.secs,
            "rounds": o.rounds,
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "\n{:<18}  {:<20}  {:>12}  {:<6}  {:>10}  {:>9}  {:>10}  {:>10}  {:>8}  {:>9}",
        "workload",
        "registration",
        "median",
        "unit",
        "IOPS",
        "MiB/s",
        "avg lat µs",
        "CPU µs/IO",
        "lo B/B",
        "allocs/IO"
    );
    for p in &points {
        let (v, unit) = p.headline();
        println!(
            "{:<18}  {:<20}  {:>12.1}  {:<6}  {:>10.0}  {:>9.1}  {:>10.1}  {:>10.1}  {:>8.2}  {:>9.1}",
            p.workload.name(o.depth),
            p.registration,
            v,
            unit,
            p.med(|s| s.iops),
            p.med(|s| s.mib_s),
            p.med(|s| s.lat_us),
            p.med(|s| s.cpu_us_per_io),
            p.med(|s| s.lo_per_byte),
            p.med(|s| s.allocs_per_io)
        );
    }
    // The headline of session `label` at workload `w`, for the same-run comparisons.
    let headline = |w: Workload, label: &str| {
        points
            .iter()
            .find(|p| p.workload == w && p.registration == label)
            .map(Point::headline)
    };
    if o.registration == Registration::Both {
        println!("\nFRMR cost (per-io against trust-target, same run; goal ≤ 5 %):");
        for &w in &o.workloads {
            if let (Some((a, unit)), Some((b, _))) =
                (headline(w, "per-io"), headline(w, "trust-target"))
            {
                // Cost: lower throughput or higher latency with FRMR.
                let cost = if w == Workload::Lat4k {
                    a / b - 1.0
                } else {
                    1.0 - a / b
                };
                println!(
                    "  {:<18}  per-io {a:.1} {unit}, trust-target {b:.1} {unit}: {:+.1} %",
                    w.name(o.depth),
                    cost * 100.0
                );
            }
        }
    }
    if o.driver == Driver::Both {
        println!("\nDriver models (the iSCSI model against StorPort, per-io, same run):");
        for &w in &o.workloads {
            if let (Some((a, unit)), Some((b, _))) =
                (headline(w, "iscsi-model per-io"), headline(w, "per-io"))
            {
                println!(
                    "  {:<18}  iscsi-model {a:.1} {unit}, storport {b:.1} {unit}: ratio {:.3}",
                    w.name(o.depth),
                    a / b
                );
            }
        }
    }
    println!(
        "\nCPU µs/IO: this process (target and initiator together) per I/O; lo B/B: bytes received on loopback per data byte read;\nallocs/IO: heap allocations per I/O, target and initiator together (counting allocator)"
    );
    Ok(())
}
