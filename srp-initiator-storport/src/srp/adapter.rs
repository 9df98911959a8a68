//! One adapter (one IOC): what HwFindAdapter opens at passive level — the channel adapter
//! ([`AdapterCa`]: the soft HCA under the access layer's `SoftCa`), its GSI port and CM
//! endpoint, the RC CQ, the control memory for IUs and the registration (a
//! fast-registration pool over the SRBs' own pages, or under
//! [`RegistrationMode::TrustTarget`] one region over all of the machine's memory) — and the
//! state the routines and the DPC share. Data buffers are the
//! SRBs' pages in system memory, registered as they are: no bounce memory, no copy.
//!
//! Every verb of the RC channel goes through the access layer's [`ChannelInterface`]: the
//! resources of HwFindAdapter through its blocking wrapper (passive level), the data path
//! (posts, polls, arming) as direct calls, and the resource verbs a login or a loss needs
//! at dispatch level (create, connect and destroy the QP, replace a discarded FRMR) as
//! asynchronous verbs whose completions the DPC takes up ([`super::pending`]). Only the
//! MAD services (the GSI port under the CM) use the device itself: QP1 is the access
//! layer's, reached through the provider's own MAD interface (umad, under rdma-core).
//!
//! Locks (spin locks in a real miniport, held briefly, never across a wait): `inner`
//! (channel core, CM, queue pair, outstanding commands) before `reg` (registration pool)
//! before the system memory's; `status` and the pending completions are leaves; the device's
//! engine lock is only ever entered innermost.

use super::pending::{Pending, VerbDone};
use super::side::PortSide;
use super::status::StatusLog;
use super::{RegistrationMode, SrpAdapterConfig};
use access_layer::cm::{CmConfig, CmEndpoint, ConnId};
use access_layer::gsi::port::{GsiPort, GsiPortConfig};
use access_layer::mad::cm::CmRep;
use access_layer::verbs::{CaStats, ChannelInterface, MrSpec, SyncCa};
use hca::engine::{CqId, Engine, QpId};
use hca::inline_one::InlineOne;
use hca::mem::MemBlock;
use hca::mr::{Access, MrKey, MrKeys, PdId};
use hca::time::Time;
use hca::verbs::SendWr;
use hca::wire::PathMtu;
use hca::{Gid, Lkey, Qpn};
use srp::initiator::registration::{
    AllMemoryStrategy, FrmrConfig, FrmrStrategy, MapHandle, Registration, Strategy,
};
use srp::initiator::{CmdId, DataDir, InitiatorChannel, InitiatorConfig, LoginParams, TmfId};
use srp::wire::IoClass;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Bytes per IU slot (send and receive): 68 + 8192 immediate bytes fit.
pub(crate) const SLOT: u64 = 9 << 10;
/// Send slots.
pub(crate) const SEND_SLOTS: usize = 128;
/// Receive buffers kept posted.
pub(crate) const RECV_SLOTS: usize = 64;
/// I/O address of the control memory.
pub(crate) const CTRL_IOVA: u64 = 0x1000_0000;
/// I/O address of the all-physical-memory region (TrustTarget); clear of the control
/// memory and of the FRMR pool's IOVAs.
pub(crate) const MEMORY_IOVA: u64 = 0x2000_0000_0000;
/// Bytes of an SRP_CMD before its descriptors (no additional CDB), and of an indirect
/// descriptor's table descriptor and total length, and of one direct descriptor (SRP r16a
/// 5.2.2, 6.8): what bounds an inline descriptor list by the IU length.
const CMD_HEADER: u32 = 48;
const INDIRECT_HEADER: u32 = 20;
const DESC: u32 = 16;
/// Work request ids of SENDs and receives (bits 32..40; the registration uses 40..56).
pub(crate) const SEND_WR: u64 = 1 << 32;
/// See [`SEND_WR`].
pub(crate) const RECV_WR: u64 = 2 << 32;

// The path MTU a REQ offers when the port's link MTU is unknown (rxe's on plain Ethernet).
#[cfg(target_os = "linux")]
use hca::driver::link::FALLBACK_MTU;
/// The path MTU a REQ offers when the port's link MTU is unknown (rxe's on plain Ethernet,
/// as `hca::driver::link::FALLBACK_MTU` on Linux).
#[cfg(not(target_os = "linux"))]
const FALLBACK_MTU: PathMtu = PathMtu::Mtu1024;

/// The channel adapter an adapter runs on: the access layer's verbs ([`ChannelInterface`])
/// and what the adapter takes from the device itself — its clock, and its engine for the
/// MAD services (QP1 under the GSI port and the CM), the P_Key table and port counters.
///
/// On Linux it is the soft HCA under the access layer's `SoftCa`. No other provider exists:
/// elsewhere HwFindAdapter fails with [`OpenError::NoProvider`] (on Windows the CA would
/// come from the platform's HCA driver through IBAL's interface, with IBAL's CM and MAD
/// services in place of the engine's; see docs/architecture.md, "Windows portability").
pub(crate) trait AdapterCa: ChannelInterface {
    /// The device's clock, without taking the engine's lock.
    fn now(&self) -> Time;
    /// Runs `f` once on the device's engine (what the device produces is sent and its
    /// events dispatched before this returns).
    fn with_engine(&self, f: &mut dyn FnMut(&mut Engine, Time));
    /// How the adapter used the CA's verbs.
    fn stats(&self) -> CaStats;
    /// Puts the device in a power state (the access layer's `PowerSwitch`: the soft HCA's
    /// ports go inactive in D3); completes when it is there.
    fn set_power(
        &self,
        state: access_layer::power::PowerState,
    ) -> access_layer::verbs::Completion<()>;
}

impl dyn AdapterCa {
    /// [`AdapterCa::with_engine`] with a result.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Engine, Time) -> R) -> R {
        let mut f = Some(f);
        let mut r = None;
        self.with_engine(&mut |e, now| r = f.take().map(|f| f(e, now)));
        r.expect("the engine runs a routine exactly once")
    }
}

#[cfg(target_os = "linux")]
impl AdapterCa for access_layer::verbs::SoftCa {
    fn now(&self) -> Time {
        self.hca().now()
    }

    fn with_engine(&self, f: &mut dyn FnMut(&mut Engine, Time)) {
        self.hca().with(f);
    }

    fn stats(&self) -> CaStats {
        access_layer::verbs::SoftCa::stats(self)
    }

    fn set_power(
        &self,
        state: access_layer::power::PowerState,
    ) -> access_layer::verbs::Completion<()> {
        access_layer::power::PowerSwitch::set_power(self, state)
    }
}

/// Opens the adapter's channel adapter: the soft HCA on a UDP port (or the simulated net).
#[cfg(target_os = "linux")]
fn open_ca(cfg: &SrpAdapterConfig) -> Result<Arc<dyn AdapterCa>, OpenError> {
    use hca::driver::{Hca, HcaConfig};
    let hca = Hca::open(HcaConfig {
        first_qpn: cfg.first_qpn,
        sim: cfg.sim.clone(),
        ..HcaConfig::new(cfg.node_guid, vec![cfg.local])
    })
    .map_err(|e| OpenError::Hca(e.to_string()))?;
    let ca = access_layer::verbs::SoftCa::new(hca).map_err(|e| OpenError::Hca(e.to_string()))?;
    Ok(Arc::new(ca))
}

/// No channel adapter provider here: the soft HCA's driver is Linux only.
#[cfg(not(target_os = "linux"))]
fn open_ca(_cfg: &SrpAdapterConfig) -> Result<Arc<dyn AdapterCa>, OpenError> {
    Err(OpenError::NoProvider)
}

/// A command the channel core holds for an SRB.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) srb: crate::port::Srb<super::SrbExt>,
    pub(crate) handle: MapHandle,
    /// Direction, to register the SRB's pages again after a reconnect.
    pub(crate) dir: DataDir,
}

/// A management SRB (ABORT_COMMAND, RESET_LOGICAL_UNIT) waiting for its TMF's answer.
#[derive(Debug)]
pub(crate) struct Mgmt {
    pub(crate) srb: crate::port::Srb<super::SrbExt>,
    /// The command an ABORT_COMMAND is for (it completes ABORTED when the abort works).
    pub(crate) abort_of: Option<CmdId>,
}

/// State under the adapter lock.
pub(crate) struct Inner {
    pub(crate) gsi: GsiPort,
    pub(crate) cm: CmEndpoint,
    pub(crate) channel: InitiatorChannel,
    pub(crate) cq: CqId,
    pub(crate) qp: Option<(QpId, Qpn)>,
    pub(crate) conn: Option<ConnId>,
    /// The current connection attempt: a verb's completion for an older one is stale.
    pub(crate) attempt: u64,
    /// A login's REQ private data, while its QP is being created.
    pub(crate) creating: Option<Vec<u8>>,
    /// The target's REP, while the QP is being connected (RTR, RTS).
    pub(crate) rep: Option<CmRep>,
    pub(crate) cmds: HashMap<CmdId, Active>,
    /// Management SRBs by the core's TMF id.
    pub(crate) mgmt: HashMap<TmfId, Mgmt>,
    /// REG_MRs of mapped commands not sent yet, by command.
    pub(crate) pending_reg: HashMap<CmdId, InlineOne<SendWr>>,
    /// The send chain being built (REG_MRs, then the SEND; or LOCAL_INVs), kept between
    /// posts so that posting allocates nothing.
    pub(crate) chain: Vec<SendWr>,
    /// The ids of a LOCAL_INV chain, kept alike.
    pub(crate) chain_ids: Vec<u64>,
    pub(crate) send_free: Vec<usize>,
    /// LOCAL_INVs posted and not completed (reported flushed if the QP goes).
    pub(crate) inflight_inv: HashSet<u64>,
    /// The port was paused until the first login.
    pub(crate) paused: bool,
    /// The QP failed: report a disconnect to the core on this round.
    pub(crate) qp_failed: bool,
    /// The DPC's completion array, kept between rounds.
    pub(crate) wcs: Vec<hca::verbs::Wc>,
    /// The IOC's Device Management watch, if configured.
    pub(crate) watch: Option<super::watch::IocWatch>,
    /// The bus or device reset running, if one is ([`super::reset`]).
    pub(crate) target_reset: Option<super::reset::TargetReset>,
    /// LUNs the target answered commands for: what a bus reset resets.
    pub(crate) known_luns: std::collections::BTreeSet<u8>,
}

/// The adapter.
pub(crate) struct Adapter {
    pub(crate) cfg: SrpAdapterConfig,
    /// The channel adapter: every verb goes through its [`ChannelInterface`].
    pub(crate) ca: Arc<dyn AdapterCa>,
    /// The path MTU our REQ offers: the port's active MTU (its link's, as rxe derives it).
    pub(crate) mtu: PathMtu,
    /// Completions of the asynchronous verbs, for the DPC.
    pub(crate) pending: Arc<Pending>,
    pub(crate) pd: PdId,
    pub(crate) ctrl: Arc<MemBlock>,
    pub(crate) ctrl_mr: MrKeys,
    /// The machine's memory (the port's): SRB buffers' pages, registered where they are.
    pub(crate) memory: Arc<crate::port::SystemMemory>,
    pub(crate) reg: Mutex<Registration>,
    pub(crate) inner: Mutex<Inner>,
    /// How BuildIo mapped buffers: (immediate, fast-registered).
    pub(crate) mapped: (AtomicU64, AtomicU64),
    /// Buffers BuildIo described through the all-memory region.
    pub(crate) mapped_all_memory: AtomicU64,
    /// Held commands registered again after a reconnect.
    pub(crate) remapped: AtomicU64,
    /// Logins, losses and the last failure, for [`super::SrpMiniport::status`].
    pub(crate) status: Mutex<StatusLog>,
    /// What bus and device resets did.
    pub(crate) resets: super::reset::ResetCounters,
    /// The port: its DPC runs the adapter's (queued by the device's CQ notifications and
    /// by work queued from outside the DPC).
    pub(crate) port: Arc<dyn PortSide>,
}

/// Why the adapter could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The soft HCA.
    #[error("HCA: {0}")]
    Hca(String),
    /// A verb or the registration pool.
    #[error("setup: {0}")]
    Setup(String),
    /// No channel adapter provider on this platform: the soft HCA runs on Linux only, and
    /// a Windows build's CA must come from the platform's HCA driver.
    #[error(
        "no channel adapter on this platform: the soft HCA is Linux only; \
         the CA must come from the platform's HCA driver"
    )]
    NoProvider,
}

impl Adapter {
    /// The channel-core configuration for `cfg`.
    pub(crate) fn channel_config(cfg: &SrpAdapterConfig) -> InitiatorConfig {
        let login = LoginParams::new(
            cfg.login_via.form(),
            cfg.initiator_port_id,
            cfg.target_port_id,
        );
        let mut c = InitiatorConfig::new(login);
        c.timers = cfg.timers;
        c.cmd_timeout = cfg.cmd_timeout;
        c.login_timeout = cfg.login_timeout;
        c.max_queued = cfg.queue_depth as usize * usize::from(cfg.max_luns);
        c
    }

    /// Opens everything (passive level).
    pub(crate) fn open(
        cfg: SrpAdapterConfig,
        port: Arc<dyn PortSide>,
    ) -> Result<Adapter, OpenError> {
        let ca = open_ca(&cfg)?;
        let sync = SyncCa::new(ca.clone());
        let setup = |what: &str| {
            let what = what.to_string();
            move |e: access_layer::verbs::VerbsError| OpenError::Setup(format!("{what}: {e}"))
        };
        // The "interrupt": every event of the device (CQ notifications above all) queues
        // the DPC (StorPortIssueDpc from the ISR).
        let p = port.clone();
        let attr = sync
            .open_ca(Arc::new(move |_| {
                p.wake();
            }))
            .map_err(setup("open_ca"))?;
        let mtu = attr
            .ports
            .first()
            .and_then(|p| p.link_mtu)
            .unwrap_or(FALLBACK_MTU);
        // One partition: the one the adapter logs in on (its REQ, QP1 and RC QP use it).
        ca.with(|e, _| e.set_pkey_table(1, vec![cfg.partition]))
            .map_err(|e| OpenError::Setup(format!("P_Key table: {e}")))?;
        let gsi = ca
            .with(|e, now| GsiPort::open(e, now, 1, GsiPortConfig::default()))
            .map_err(|e| OpenError::Setup(format!("GSI: {e}")))?;
        let ctrl_len = (SEND_SLOTS + RECV_SLOTS) as u64 * SLOT;
        let ctrl = MemBlock::new(ctrl_len as usize);
        let memory = port
            .system_memory()
            .ok_or_else(|| OpenError::Setup("the port has no system memory".into()))?;
        let pd = sync.alloc_pd().map_err(setup("alloc_pd"))?;
        let ctrl_mr = sync
            .reg_mr(
                pd,
                MrSpec {
                    block: ctrl.clone(),
                    offset: 0,
                    len: ctrl_len,
                    iova: CTRL_IOVA,
                    access: Access::LOCAL_WRITE,
                },
            )
            .map_err(setup("reg_mr"))?;
        let cq = sync.create_cq(8192).map_err(setup("create_cq"))?;
        let strategy = Self::strategy(&sync, pd, &cfg, memory.block())?;
        let mut cm = CmEndpoint::new(CmConfig {
            local_ca_guid: cfg.node_guid,
            local_gid: Gid::from_ip(cfg.local),
            port: 1,
            time_wait: Duration::from_millis(20),
            agent_id: 0x5e1f,
            first_comm_id: cfg
                .sim
                .as_ref()
                .map_or_else(access_layer::cm::random_comm_id, |n| n.random() as u32),
        });
        cm.set_pkey_table(vec![cfg.partition]);
        let inner = Inner {
            gsi,
            cm,
            channel: InitiatorChannel::new(Self::channel_config(&cfg)),
            cq,
            qp: None,
            conn: None,
            attempt: 0,
            creating: None,
            rep: None,
            cmds: HashMap::new(),
            mgmt: HashMap::new(),
            pending_reg: HashMap::new(),
            chain: Vec::new(),
            chain_ids: Vec::new(),
            send_free: (0..SEND_SLOTS).rev().collect(),
            inflight_inv: HashSet::new(),
            paused: false,
            qp_failed: false,
            wcs: Vec::with_capacity(256),
            target_reset: None,
            known_luns: std::collections::BTreeSet::new(),
            watch: cfg.ioc_watch.map(|period| {
                super::watch::IocWatch::new(ca.now(), Gid::from_ip(cfg.target), period)
            }),
        };
        let target = format!(
            "IOC {:#018x} at {} ({})",
            cfg.target_port_id.guid(IoClass::SrpR16a).0,
            cfg.target,
            cfg.login_via.as_str()
        );
        Ok(Adapter {
            memory,
            cfg,
            ca,
            mtu,
            pending: Arc::new(Pending::new(port.clone())),
            pd,
            ctrl,
            ctrl_mr,
            reg: Mutex::new(Registration::new(strategy)),
            inner: Mutex::new(inner),
            mapped: (AtomicU64::new(0), AtomicU64::new(0)),
            mapped_all_memory: AtomicU64::new(0),
            remapped: AtomicU64::new(0),
            status: Mutex::new(StatusLog::new(target)),
            resets: super::reset::ResetCounters::default(),
            port,
        })
    }

    /// The registration strategy `cfg` asks for. PerIo: an FRMR pool for the whole window,
    /// up to 4 regions per command. TrustTarget: one region over all of system memory, remote read and
    /// write, its warning logged here (HwFindAdapter), and as many descriptors per command
    /// as the port hands SG elements (NumberOfPhysicalBreaks + 1, one page each), all
    /// inline in the SRP_CMD, so bounded by the IU length we ask for too. The target must
    /// accept that many table entries (srp-target's default: one per 4 KiB of max_transfer).
    fn strategy(
        sync: &SyncCa<dyn AdapterCa>,
        pd: PdId,
        cfg: &SrpAdapterConfig,
        block: &Arc<MemBlock>,
    ) -> Result<Strategy, OpenError> {
        let per_transfer = (cfg.max_transfer as usize).div_ceil(crate::port::PAGE_SIZE) + 1;
        match cfg.registration {
            RegistrationMode::PerIo => {
                let frmr = FrmrConfig {
                    window: cfg.queue_depth as usize * usize::from(cfg.max_luns),
                    mrs_per_cmd: 4,
                    max_pages: per_transfer,
                    ..FrmrConfig::default()
                };
                let s = FrmrStrategy::allocate(frmr, |pages| {
                    sync.alloc_fast_reg_mr(pd, pages)
                        .map(|k| MrKey::from(k.lkey))
                })
                .map_err(|e| OpenError::Setup(format!("FRMR pool: {e}")))?;
                Ok(Strategy::PerIo(s))
            }
            RegistrationMode::TrustTarget => {
                let iu = Self::channel_config(cfg).login.req_it_iu_len;
                let inline = iu.saturating_sub(CMD_HEADER + INDIRECT_HEADER) / DESC;
                let max_descriptors = per_transfer.min(inline as usize);
                let region_err = |e: String| OpenError::Setup(format!("all-memory region: {e}"));
                let keys = sync
                    .reg_mr(
                        pd,
                        MrSpec {
                            block: block.clone(),
                            offset: 0,
                            len: block.len() as u64,
                            iova: MEMORY_IOVA,
                            access: AllMemoryStrategy::ACCESS,
                        },
                    )
                    .map_err(|e| region_err(e.to_string()))?;
                let (s, warning) =
                    AllMemoryStrategy::new(block, keys, MEMORY_IOVA, max_descriptors)
                        .map_err(|e| region_err(e.to_string()))?;
                tracing::warn!(%warning, max_descriptors, "trust-target registration");
                Ok(Strategy::TrustTarget(s))
            }
        }
    }

    /// The adapter lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The registration lock.
    pub(crate) fn reg(&self) -> MutexGuard<'_, Registration> {
        self.reg.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The status lock (a leaf: taken under the adapter lock or alone).
    pub(crate) fn status(&self) -> MutexGuard<'_, StatusLog> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives up a mapping whose REG_MRs may not have run (never posted, or posted on a QP
    /// that died) and replaces its regions with fresh ones: no LOCAL_INV could name them.
    /// A mapping without regions (immediate data, the all-memory region) has nothing to give
    /// up. Non-blocking: the old region is deregistered and a new one allocated by
    /// asynchronous verbs (the provider runs them in order); the DPC puts the new one in
    /// the pool when it completes ([`VerbDone::Replaced`]).
    pub(crate) fn discard(&self, handle: MapHandle) {
        if handle.keys().is_empty() {
            return;
        }
        let mut reg = self.reg();
        if reg.discard(handle).is_ok() {
            for d in reg.take_discarded() {
                let old = MrKeys {
                    lkey: Lkey(d.key.0),
                    rkey: None,
                };
                // A region that cannot be deregistered is lost to the pool, not reused.
                self.ca
                    .dereg_mr(old)
                    .on_complete(self.pending.routine(|result| VerbDone::Released {
                        what: "a discarded FRMR region",
                        result,
                    }));
                let slot = d.slot;
                self.ca.alloc_fast_reg_mr(self.pd, d.max_pages).on_complete(
                    self.pending
                        .routine(move |result| VerbDone::Replaced { slot, result }),
                );
            }
        }
    }
}

/// Dropping the adapter (the port dropped with the device extension) tears down what is
/// left of the channel: the DREQ goes out, the QP is destroyed. Non-blocking.
impl Drop for Adapter {
    fn drop(&mut self) {
        let mut s = self.lock();
        if s.conn.is_some() || s.qp.is_some() {
            self.teardown(&mut s);
            self.flush_cm(&mut s);
        }
    }
}
