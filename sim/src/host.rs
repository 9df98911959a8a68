//! The simulated host: per path an emulated StorPort port in manual mode on the net's
//! virtual clock, running the SRP miniport logged in to one IOC; the LU found on each path
//! (INQUIRY, VPD 0x83, READ CAPACITY(16)) and claimed by the SRP DSM; one multipath core
//! ([`MpCore`]) over the paths. Commands go through the core exactly as the host daemon's
//! multipath disk sends them — policy, failover, queue if no path, retries, path verify,
//! fail-fast of held I/O — but nothing waits: each command is a small state machine the
//! world advances.

use access_layer::verbs::Completion as Done;
use hca::sim::SimNet;
use mpio::Policy;
use mpio::{
    Acquire, Completion, DiskIdentity, Dsm, DsmIdentifier, IoKind, Issued, MpConfig, MpCore,
    Outcome, PathLabel, PathSpec, SrpDsm, Transport, VerifyJob,
};
use srp::initiator::PortState;
use srp_initiator_storport::port::{
    DataDirection, LuAddress, Port, PortConfig, PortMode, SrbResult, SystemMemory,
};
use srp_initiator_storport::srp::{LoginVia, RegistrationMode, SrpAdapterConfig, SrpMiniport};
use srp_target::config::IocConfig;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the multipath maintenance runs (the host daemon's supervisor period).
pub const TICK: Duration = Duration::from_millis(100);

/// Each SRB's timeout.
const SRB_TIMEOUT: Duration = Duration::from_secs(30);

/// How a command ended: a read's data (`None` for the others), or the error the disk's
/// user would see.
pub type CmdResult = Result<Option<Vec<u8>>, String>;

/// A command of the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// READ of `blocks` blocks at `lba`.
    Read {
        /// First block.
        lba: u64,
        /// Blocks.
        blocks: u32,
    },
    /// WRITE of `data` (whole blocks) at `lba`.
    Write {
        /// First block.
        lba: u64,
        /// The blocks.
        data: Vec<u8>,
        /// Forced unit access.
        fua: bool,
    },
    /// SYNCHRONIZE CACHE of the whole LU.
    Flush,
}

impl Op {
    fn kind(&self) -> IoKind {
        match self {
            Op::Read { .. } => IoKind::Read,
            Op::Write { .. } => IoKind::Write,
            Op::Flush => IoKind::Flush,
        }
    }
}

/// Where a command is.
enum Stage {
    /// Not on a path: waiting for one (since `since`) or for a retry pause, until `at`.
    Waiting { since: Option<Instant>, at: Instant },
    /// Sent on a path.
    OnPath {
        issued: Issued,
        srb: Done<SrbResult>,
    },
}

struct Cmd {
    op: Op,
    tries: u32,
    stage: Stage,
}

/// A path verify in progress.
struct Verify {
    job: VerifyJob<usize>,
    tur: Option<Outcome>,
    srb: Done<SrbResult>,
}

/// The LU as one path's scan found it.
struct Scanned {
    id: DsmIdentifier,
    identity: DiskIdentity,
}

/// How the host is set up: drawn from the seed, so the runs cover both login forms, both
/// registration modes and every multipath policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSetup {
    /// The login form of both paths.
    pub login: LoginVia,
    /// How data buffers are registered.
    pub registration: RegistrationMode,
    /// The multipath policy (path 0 preferred under failover only).
    pub policy: Policy,
}

impl HostSetup {
    /// The setup of seed `seed`.
    pub fn draw(seed: u64) -> HostSetup {
        let mut rng = hca::sim::Rng::new(seed ^ 0x686f_7374);
        let login = if rng.chance(0.3) {
            LoginVia::RdmaCm {
                port: srp_target::daemon::DEFAULT_RDMA_CM_PORT,
            }
        } else {
            LoginVia::IbCm
        };
        let registration = if rng.chance(0.2) {
            RegistrationMode::TrustTarget
        } else {
            RegistrationMode::PerIo
        };
        let policy = Policy::ALL[rng.range(0, Policy::ALL.len() as u64) as usize];
        HostSetup {
            login,
            registration,
            policy,
        }
    }
}

/// What the host did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HostStats {
    /// Commands completed well.
    pub done: u64,
    /// Commands that failed to the workload.
    pub failed: u64,
    /// Path verifies run.
    pub verifies: u64,
    /// Fail-fast requests made of a path's transport.
    pub fail_fasts: u64,
}

/// The simulated host (see the module doc).
pub struct SimHost {
    net: Arc<SimNet>,
    ports: Vec<Arc<Port<SrpMiniport>>>,
    labels: Vec<String>,
    lu: LuAddress,
    dsm: Arc<SrpDsm>,
    core: Option<MpCore<usize>>,
    scans: Vec<Option<Scanned>>,
    scanning: Vec<Option<[Done<SrbResult>; 3]>>,
    cmds: BTreeMap<u64, Cmd>,
    finished: Vec<(u64, Op, CmdResult)>,
    verifies: Vec<Verify>,
    next_tick: Instant,
    setup: HostSetup,
    /// What it did.
    pub stats: HostStats,
}

impl std::fmt::Debug for SimHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHost")
            .field("paths", &self.labels)
            .field("commands", &self.cmds.len())
            .finish_non_exhaustive()
    }
}

/// The adapter of one path: the host daemon's defaults, with transport timers short
/// enough that a run sees reconnects, fast-io-fail and device loss.
fn adapter(
    setup: &HostSetup,
    net: &Arc<SimNet>,
    local: IpAddr,
    target: IpAddr,
    ioc: &IocConfig,
    n: u64,
) -> SrpAdapterConfig {
    use srp::wire::{IoClass, PortId};
    let guid = ib_verbs::Guid(0x0002_c903_00ee_0100 + n);
    SrpAdapterConfig {
        local,
        target,
        node_guid: guid,
        first_qpn: 0,
        initiator_port_id: PortId::new(0, ib_verbs::Guid(0x0002_c903_00ee_0100), IoClass::SrpR16a),
        target_port_id: ioc.target_port_id(),
        service_id: ioc.service_id,
        login_via: setup.login,
        max_transfer: 64 << 10,
        max_luns: 1,
        queue_depth: 32,
        timers: srp::initiator::TransportTimers::new(
            Some(Duration::from_secs(1)),
            Some(Duration::from_secs(5)),
            Some(Duration::from_secs(600)),
        )
        .unwrap_or_default(),
        cmd_timeout: Duration::from_secs(15),
        login_timeout: Duration::from_secs(5),
        max_wait: Duration::from_millis(100),
        registration: setup.registration,
        partition: ib_verbs::PKey::DEFAULT,
        ioc_watch: None,
        provider: access_layer::verbs::ProviderKind::Sim,
        device: None,
        device_port: None,
        gid_index: None,
        // The adapter's software HCA on the net; its CM's first communication ID from the
        // net's seed.
        fabric: Arc::new(hca::ca::SimFabric(net.clone())),
    }
}

fn port_error(e: impl std::fmt::Display) -> String {
    format!("cannot start the path's port: {e}")
}

impl SimHost {
    /// Starts a port per `(local, target, ioc)` path on `net` (each begins its login).
    pub fn start(
        net: &Arc<SimNet>,
        paths: &[(IpAddr, IpAddr, IocConfig)],
        setup: HostSetup,
    ) -> Result<SimHost, String> {
        let memory = SystemMemory::new(2048);
        let mut ports = Vec::new();
        let mut labels = Vec::new();
        for (n, (local, target, ioc)) in paths.iter().enumerate() {
            let config = PortConfig {
                memory: Some(memory.clone()),
                clock: net.clone(),
                mode: PortMode::Manual,
                ..PortConfig::default()
            };
            let cfg = adapter(&setup, net, *local, *target, ioc, n as u64);
            let port = Port::<SrpMiniport>::start(cfg, config).map_err(port_error)?;
            ports.push(Arc::new(port));
            labels.push(format!("{local} -> {target} ({})", ioc.name));
        }
        let n = ports.len();
        Ok(SimHost {
            net: net.clone(),
            ports,
            labels,
            lu: LuAddress {
                path_id: 0,
                target_id: 0,
                lun: 0,
            },
            dsm: Arc::new(SrpDsm::default()),
            core: None,
            scans: (0..n).map(|_| None).collect(),
            scanning: (0..n).map(|_| None).collect(),
            cmds: BTreeMap::new(),
            finished: Vec::new(),
            verifies: Vec::new(),
            next_tick: net.instant_at(net.time()),
            setup,
            stats: HostStats::default(),
        })
    }

    fn now(&self) -> Instant {
        use hca::time::Clock;
        self.net.now()
    }

    /// Path `i`'s transport, as the host daemon's disk reads it.
    fn transport(port: &Port<SrpMiniport>) -> Transport {
        match port.miniport().status().state {
            Some(PortState::Running) => Transport::Up,
            Some(PortState::Lost) => Transport::Gone,
            _ => Transport::Down,
        }
    }

    /// Whether the multipath disk exists (every path scanned once).
    pub fn is_ready(&self) -> bool {
        self.core.is_some()
    }

    /// What the scan found, once ready.
    pub fn identity(&self) -> Option<&DiskIdentity> {
        self.core.as_ref().map(MpCore::identity)
    }

    /// The multipath disk's counters and paths.
    pub fn snapshot(&self) -> Option<mpio::DiskSnapshot> {
        self.core.as_ref().map(MpCore::snapshot)
    }

    /// Commands in flight.
    pub fn in_flight(&self) -> usize {
        self.cmds.len()
    }

    /// Sends `op` as command `id`.
    pub fn submit(&mut self, id: u64, op: Op) {
        let at = self.now();
        self.cmds.insert(
            id,
            Cmd {
                op,
                tries: 0,
                stage: Stage::Waiting { since: None, at },
            },
        );
    }

    /// Commands that ended since the last call: read data, or the error.
    pub fn take_finished(&mut self) -> Vec<(u64, Op, CmdResult)> {
        std::mem::take(&mut self.finished)
    }

    /// Runs every port's due work, the scan, the multipath maintenance when due, and moves
    /// every command on; how much happened.
    pub fn run_due(&mut self) -> usize {
        let mut n: usize = self.ports.iter().map(|p| p.run_due()).sum();
        n += self.scan();
        let now = self.now();
        if self.core.is_some() && now >= self.next_tick {
            self.next_tick = now + TICK;
            n += self.tick(now);
        }
        n += self.verify_step(now);
        n += self.advance(now);
        n
    }

    /// When the host next has timed work of its own.
    pub fn next_due(&self) -> Option<Instant> {
        let ports = self.ports.iter().filter_map(|p| p.next_due());
        let cmds = self.cmds.values().filter_map(|c| match c.stage {
            Stage::Waiting { at, .. } => Some(at),
            Stage::OnPath { .. } => None,
        });
        let tick = self.core.as_ref().map(|_| self.next_tick);
        ports.chain(cmds).chain(tick).min()
    }

    fn submit_srb(
        &self,
        path: usize,
        cdb: &[u8],
        direction: DataDirection,
        data: Vec<u8>,
    ) -> Result<Done<SrbResult>, Outcome> {
        srp_hostd::command::submit(
            &self.ports[path],
            self.lu,
            cdb,
            direction,
            data,
            SRB_TIMEOUT,
        )
    }

    /// The LU found through each path once its login is up; the multipath disk made when
    /// every path answered.
    fn scan(&mut self) -> usize {
        if self.core.is_some() {
            return 0;
        }
        let mut n = 0;
        for i in 0..self.ports.len() {
            if self.scans[i].is_some() {
                continue;
            }
            let state = match &self.scanning[i] {
                None => 0,
                Some(srbs) if srbs.iter().all(Done::is_complete) => 1,
                Some(_) => 2,
            };
            match state {
                0 if Self::transport(&self.ports[i]) == Transport::Up => {
                    let inq = [0x12, 0, 0, 0, 96, 0];
                    let vpd = [0x12, 1, 0x83, 0, 255, 0];
                    let cap = [0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0];
                    let mut srbs = Vec::new();
                    for (cdb, len) in [(&inq[..], 96), (&vpd[..], 255), (&cap[..], 32)] {
                        if let Ok(c) = self.submit_srb(i, cdb, DataDirection::In, vec![0; len]) {
                            srbs.push(c);
                        }
                    }
                    if let Ok(s) = <[Done<SrbResult>; 3]>::try_from(srbs) {
                        self.scanning[i] = Some(s);
                        n += 1;
                    }
                }
                1 => {
                    let Some(srbs) = self.scanning[i].take() else {
                        continue;
                    };
                    n += 1;
                    let data: Vec<Option<Vec<u8>>> = srbs
                        .iter()
                        .map(|c| match c.try_take() {
                            Some(Ok(r)) => match srp_hostd::command::classify(r, DataDirection::In)
                            {
                                Outcome::Good(d) => Some(d),
                                _ => None,
                            },
                            _ => None,
                        })
                        .collect();
                    // A scan that failed (the login dropped meanwhile) is tried again.
                    let (Some(inq), Some(vpd), Some(cap)) = (&data[0], &data[1], &data[2]) else {
                        continue;
                    };
                    self.scans[i] = Self::claim(&self.dsm, inq, vpd, cap, &self.labels[i]);
                }
                _ => {}
            }
        }
        if self.scans.iter().all(Option::is_some) {
            self.build_disk();
            n += 1;
        }
        n
    }

    fn claim(dsm: &SrpDsm, inq: &[u8], vpd: &[u8], cap: &[u8], label: &str) -> Option<Scanned> {
        let id = match dsm.inquire(inq, vpd, None) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(path = label, %e, "the DSM declined the LU");
                return None;
            }
        };
        if cap.len() < 12 {
            return None;
        }
        let mut last = [0u8; 8];
        last.copy_from_slice(&cap[..8]);
        let mut bs = [0u8; 4];
        bs.copy_from_slice(&cap[8..12]);
        let text = |r: std::ops::Range<usize>| {
            String::from_utf8_lossy(inq.get(r).unwrap_or_default())
                .trim()
                .to_string()
        };
        Some(Scanned {
            identity: DiskIdentity {
                identity: id.identity.clone(),
                vendor: text(8..16),
                product: text(16..32),
                revision: text(32..36),
                block_size: u32::from_be_bytes(bs),
                blocks: u64::from_be_bytes(last) + 1,
            },
            id,
        })
    }

    fn build_disk(&mut self) {
        let scans: Vec<Scanned> = self.scans.iter_mut().filter_map(Option::take).collect();
        let Some(first) = scans.first() else {
            return;
        };
        let config = MpConfig {
            policy: self.setup.policy,
            no_path_retry: Duration::from_secs(60),
            ..MpConfig::default()
        };
        let dsm: Arc<dyn Dsm> = self.dsm.clone();
        let mut core = MpCore::new(first.identity.clone(), dsm, config);
        for (i, s) in scans.iter().enumerate() {
            if !self.dsm.compare_devices(&first.id, &s.id) {
                tracing::warn!(
                    path = self.labels[i],
                    "a different LU on this path: not added"
                );
                continue;
            }
            core.add_path(PathSpec {
                key: i as u32,
                lun: 0,
                device: i,
                id: s.id.clone(),
                preferred: i == 0,
                weight: 1,
                label: PathLabel {
                    local: self.labels[i].clone(),
                    ..PathLabel::default()
                },
            });
        }
        self.core = Some(core);
    }

    /// The multipath maintenance pass: transports read, held I/O failed fast, verifies
    /// started.
    fn tick(&mut self, now: Instant) -> usize {
        let ports = &self.ports;
        let Some(core) = self.core.as_mut() else {
            return 0;
        };
        let plan = core.tick_plan(now, |&i| Self::transport(&ports[i]));
        let mut n = 0;
        for i in plan.fail_fast {
            self.stats.fail_fasts += 1;
            self.ports[i].miniport().fail_fast_now();
            n += 1;
        }
        for job in plan.verify {
            let cdb = core.verify_cdb();
            match srp_hostd::command::submit(
                &self.ports[job.device],
                self.lu,
                &cdb,
                DataDirection::None,
                Vec::new(),
                SRB_TIMEOUT,
            ) {
                Ok(srb) => {
                    self.stats.verifies += 1;
                    self.verifies.push(Verify {
                        job,
                        tur: None,
                        srb,
                    });
                }
                Err(_) => core.verify_abandoned(job.key),
            }
            n += 1;
        }
        n
    }

    /// Moves path verifies on: TEST UNIT READY, then REPORT TARGET PORT GROUPS for ALUA.
    fn verify_step(&mut self, now: Instant) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.verifies.len() {
            let Some(r) = self.verifies[i].srb.try_take() else {
                i += 1;
                continue;
            };
            n += 1;
            let v = self.verifies.swap_remove(i);
            let direction = if v.tur.is_none() {
                DataDirection::None
            } else {
                DataDirection::In
            };
            let outcome = match r {
                Ok(r) => srp_hostd::command::classify(r, direction),
                Err(e) => Outcome::NoDevice(e.to_string()),
            };
            let Some(core) = self.core.as_mut() else {
                continue;
            };
            match v.tur {
                None if core.needs_rtpg(&v.job, &outcome) => {
                    let srb = srp_hostd::command::submit(
                        &self.ports[v.job.device],
                        self.lu,
                        &mpio::RTPG_CDB,
                        DataDirection::In,
                        vec![0; mpio::RTPG_ALLOCATION],
                        SRB_TIMEOUT,
                    );
                    match srb {
                        Ok(srb) => self.verifies.push(Verify {
                            job: v.job,
                            tur: Some(outcome),
                            srb,
                        }),
                        Err(o) => {
                            core.verify_done(&v.job, &outcome, Some(&o), now);
                        }
                    }
                }
                None => {
                    core.verify_done(&v.job, &outcome, None, now);
                }
                Some(tur) => {
                    core.verify_done(&v.job, &tur, Some(&outcome), now);
                }
            }
        }
        n
    }

    /// Moves every command on: waiting ones to a path, completed ones to their verdict.
    fn advance(&mut self, now: Instant) -> usize {
        let Some(core) = self.core.as_mut() else {
            return 0;
        };
        let mut n = 0;
        let ids: Vec<u64> = self.cmds.keys().copied().collect();
        for id in ids {
            let Some(mut cmd) = self.cmds.remove(&id) else {
                continue;
            };
            let stage = std::mem::replace(
                &mut cmd.stage,
                Stage::Waiting {
                    since: None,
                    at: now,
                },
            );
            let next = match stage {
                Stage::Waiting { since, at } if at <= now => {
                    n += 1;
                    Self::send(core, &self.ports, self.lu, &mut cmd, since, now)
                }
                Stage::OnPath { issued, srb } => match srb.try_take() {
                    None => Ok(Stage::OnPath { issued, srb }),
                    Some(r) => {
                        n += 1;
                        Self::ended(core, &mut cmd, &issued, r, now)
                    }
                },
                waiting => Ok(waiting),
            };
            match next {
                Ok(stage) => {
                    cmd.stage = stage;
                    self.cmds.insert(id, cmd);
                }
                Err(result) => {
                    if result.is_ok() {
                        self.stats.done += 1;
                    } else {
                        self.stats.failed += 1;
                    }
                    self.finished.push((id, cmd.op, result));
                }
            }
        }
        n
    }

    /// Sends `cmd` on the path the core picks, or keeps it waiting; `Err` ends it.
    fn send(
        core: &mut MpCore<usize>,
        ports: &[Arc<Port<SrpMiniport>>],
        lu: LuAddress,
        cmd: &mut Cmd,
        since: Option<Instant>,
        now: Instant,
    ) -> Result<Stage, CmdResult> {
        let bs = u64::from(core.identity().block_size);
        let (blocks, bytes) = match &cmd.op {
            Op::Read { blocks, .. } => (u64::from(*blocks), u64::from(*blocks) * bs),
            Op::Write { data, .. } => (data.len() as u64 / bs, data.len() as u64),
            Op::Flush => (0, 0),
        };
        match core.acquire(blocks) {
            Acquire::Gone => Err(Err("the disk has no path".into())),
            Acquire::NoPath => {
                if since.is_none() {
                    core.wait_begin();
                }
                let since = since.unwrap_or(now);
                match core.no_path_wait(since, now) {
                    // Looked at again at the next maintenance pass or when a path returns.
                    Ok(left) => Ok(Stage::Waiting {
                        since: Some(since),
                        at: now + left.min(TICK),
                    }),
                    Err(e) => {
                        core.wait_end();
                        Err(Err(e.to_string()))
                    }
                }
            }
            Acquire::Path { key, device } => {
                if since.is_some() {
                    core.wait_end();
                }
                let issued = Issued {
                    key,
                    kind: cmd.op.kind(),
                    blocks,
                    bytes,
                    started: now,
                    tries: cmd.tries,
                };
                let (cdb, direction, data): (Vec<u8>, _, _) = match &cmd.op {
                    Op::Read { lba, blocks } => (
                        srp_hostd::command::rw_cdb(true, *lba, *blocks, false).to_vec(),
                        DataDirection::In,
                        vec![0; bytes as usize],
                    ),
                    Op::Write { lba, data, fua } => (
                        srp_hostd::command::rw_cdb(false, *lba, blocks as u32, *fua).to_vec(),
                        DataDirection::Out,
                        data.clone(),
                    ),
                    Op::Flush => (
                        vec![0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                        DataDirection::None,
                        Vec::new(),
                    ),
                };
                let srb = srp_hostd::command::submit(
                    &ports[device],
                    lu,
                    &cdb,
                    direction,
                    data,
                    SRB_TIMEOUT,
                );
                match srb {
                    Ok(srb) => Ok(Stage::OnPath { issued, srb }),
                    Err(outcome) => Self::verdict(core, cmd, &issued, outcome, now),
                }
            }
        }
    }

    /// A command's SRB completed.
    fn ended(
        core: &mut MpCore<usize>,
        cmd: &mut Cmd,
        issued: &Issued,
        r: Result<SrbResult, access_layer::verbs::VerbsError>,
        now: Instant,
    ) -> Result<Stage, CmdResult> {
        let direction = match cmd.op {
            Op::Read { .. } => DataDirection::In,
            Op::Write { .. } => DataDirection::Out,
            Op::Flush => DataDirection::None,
        };
        let outcome = match r {
            Ok(r) => srp_hostd::command::classify(r, direction),
            Err(e) => Outcome::NoDevice(format!("the request never completed: {e}")),
        };
        Self::verdict(core, cmd, issued, outcome, now)
    }

    fn verdict(
        core: &mut MpCore<usize>,
        cmd: &mut Cmd,
        issued: &Issued,
        outcome: Outcome,
        now: Instant,
    ) -> Result<Stage, CmdResult> {
        match core.complete(issued, &outcome, now) {
            Completion::Done => Err(Ok(match outcome {
                Outcome::Good(d) if matches!(cmd.op, Op::Read { .. }) => Some(d),
                _ => None,
            })),
            Completion::Failed(e) => Err(Err(e.to_string())),
            Completion::Retry { pause, tries } => {
                cmd.tries = tries;
                Ok(Stage::Waiting {
                    since: None,
                    at: now + pause,
                })
            }
            Completion::Failover { tries } => {
                cmd.tries = tries;
                Ok(Stage::Waiting {
                    since: None,
                    at: now,
                })
            }
        }
    }
}
