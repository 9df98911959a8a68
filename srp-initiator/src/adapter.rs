//! One adapter (one IOC): what HwFindAdapter opens at passive level — the channel adapter
//! (a [`Device`] from the configuration's fabric: the software HCA, an RDMA device through
//! rdma-core, or the simulator's), its connection manager (the access layer's over QP1 with
//! the IOC watch's Device Management client, or the provider's), the RC CQ, the control
//! memory for IUs and the registration (a
//! fast-registration pool over the SRBs' own pages, or under
//! [`RegistrationMode::TrustTarget`] one region over all of the machine's memory) — and the
//! state the routines and the DPC share. Data buffers are the
//! SRBs' pages in system memory, registered as they are: no bounce memory, no copy.
//!
//! Every verb of the RC channel goes through the access layer's [`ChannelInterface`]: the
//! resources of HwFindAdapter through its blocking wrapper (passive level), the data path
//! (posts, polls, arming) as direct calls, and the resource verbs a login or a loss needs
//! at dispatch level (create, connect and destroy the QP, replace a discarded FRMR) as
//! asynchronous verbs whose completions the DPC takes up ([`super::pending`]). The CM is
//! reached through the access layer's connection-manager seam, whoever carries it.
//!
//! Locks (spin locks in a real miniport, held briefly, never across a wait): `inner`
//! (channel core, CM, queue pair, outstanding commands) before `reg` (registration pool)
//! before the system memory's; `status` and the pending completions are leaves; a
//! provider's own locks are only ever entered innermost.
#[allow(unused_imports)]
use crate::prelude::*;

use super::pending::{Pending, VerbDone};
use super::side::PortSide;
use super::status::StatusLog;
use super::{RegistrationMode, SrpAdapterConfig};
use access_layer::cm::{CmSetup, ConnId, ConnectionManager, DeviceManagement};
use access_layer::dm::{DmClient, DmClientConfig};
use access_layer::mad::MadAddress;
use access_layer::verbs::{CaCaps, ChannelInterface, Device, MrSpec, PortInterface, SyncCa};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::sync::Arc;
use core::sync::atomic::AtomicU64;
use core::time::Duration;
use ib_verbs::PathMtu;
use ib_verbs::inline_one::InlineOne;
use ib_verbs::mem::MemBlock;
use ib_verbs::mr::{Access, MrKey, MrKeys, PdId};
use ib_verbs::sync::{Lock, LockGuard};
use ib_verbs::wr::SendWr;
use ib_verbs::{CqId, Gid, IdTable, Lkey, QpId, Qpn};
use srp::initiator::registration::{
    AllMemoryStrategy, FrmrConfig, FrmrStrategy, MapHandle, RegionKind, Registration, Strategy,
    WindowConfig, WindowStrategy,
};
use srp::initiator::{CmdId, DataDir, InitiatorChannel, InitiatorConfig, LoginParams, TmfId};
use srp::wire::IoClass;

/// Bytes per IU slot (send and receive): 68 + 8192 immediate bytes fit.
pub(crate) const SLOT: u64 = 9 << 10;
/// Send slots.
pub(crate) const SEND_SLOTS: usize = 128;
/// Receive buffers kept posted.
pub(crate) const RECV_SLOTS: usize = 64;
/// The send queue depth under fast registration or the all-memory region.
pub(crate) const BASE_SQ_DEPTH: usize = 2048;
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

/// The path MTU a REQ offers when the port's link MTU is unknown (rxe's on plain
/// Ethernet).
const FALLBACK_MTU: PathMtu = PathMtu::Mtu1024;

/// A command the channel core holds for an SRB.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) srb: win_port::Srb<super::SrbExt>,
    pub(crate) handle: MapHandle,
    /// Direction, to register the SRB's pages again after a reconnect.
    pub(crate) dir: DataDir,
}

/// A management SRB (ABORT_COMMAND, RESET_LOGICAL_UNIT) waiting for its TMF's answer.
#[derive(Debug)]
pub(crate) struct Mgmt {
    pub(crate) srb: win_port::Srb<super::SrbExt>,
    /// The command an ABORT_COMMAND is for (it completes ABORTED when the abort works).
    pub(crate) abort_of: Option<CmdId>,
}

/// State under the adapter lock, in three parts: the connection to the IOC, the channel
/// core with what it holds, and the work requests being posted.
pub(crate) struct Inner {
    /// The CM connection, the QP and the login attempt.
    pub(crate) link: Link,
    /// The SRP channel core and the requests it holds.
    pub(crate) ch: ChannelState,
    /// Registration and posting: REG_MR and LOCAL_INV chains, send slots, the CQ.
    pub(crate) post: Posting,
}

/// The connection to the IOC: what a login creates and a loss tears down.
pub(crate) struct Link {
    /// The connection manager (with the IOC watch's Device Management client, if any).
    pub(crate) cm: Box<dyn ConnectionManager>,
    pub(crate) qp: Option<(QpId, Qpn)>,
    pub(crate) conn: Option<ConnId>,
    /// The current connection attempt: a verb's completion for an older one is stale.
    pub(crate) attempt: u64,
    /// A login's REQ private data, while its QP is being created.
    pub(crate) creating: Option<Vec<u8>>,
    /// The REP's private data (the SRP_LOGIN_RSP), while the QP is being connected.
    pub(crate) rep: Option<Vec<u8>>,
    /// The QP failed: report a disconnect to the core on this round.
    pub(crate) qp_failed: bool,
    /// The IOC's Device Management watch, if configured: what its sweeps reported
    /// (the client itself sweeps inside the connection manager's MAD service).
    pub(crate) watch: Option<super::watch::IocWatch>,
}

/// The channel core and the SRBs it holds for the port.
pub(crate) struct ChannelState {
    pub(crate) channel: InitiatorChannel,
    pub(crate) cmds: IdTable<CmdId, Active>,
    /// Management SRBs by the core's TMF id.
    pub(crate) mgmt: BTreeMap<TmfId, Mgmt>,
    /// LUNs the target answered commands for: what a bus reset resets.
    pub(crate) known_luns: alloc::collections::BTreeSet<u8>,
    /// The bus or device reset running, if one is ([`super::reset`]).
    pub(crate) target_reset: Option<super::reset::TargetReset>,
    /// The port was paused until the first login.
    pub(crate) paused: bool,
}

/// Registration and posting state: what the send queue is given and in what chains.
pub(crate) struct Posting {
    pub(crate) cq: CqId,
    /// REG_MRs of mapped commands not sent yet, by command.
    pub(crate) pending_reg: IdTable<CmdId, InlineOne<SendWr>>,
    /// The send chain being built (REG_MRs, then the SEND; or LOCAL_INVs), kept between
    /// posts so that posting allocates nothing.
    pub(crate) chain: Vec<SendWr>,
    /// The ids of a LOCAL_INV chain, kept alike.
    pub(crate) chain_ids: Vec<u64>,
    pub(crate) send_free: Vec<usize>,
    /// LOCAL_INVs posted and not completed (reported flushed if the QP goes).
    pub(crate) inflight_inv: BTreeSet<u64>,
    /// The DPC's completion array, kept between rounds.
    pub(crate) wcs: Vec<ib_verbs::wr::Wc>,
}

/// The adapter.
pub(crate) struct Adapter {
    pub(crate) cfg: SrpAdapterConfig,
    /// The channel adapter: every verb goes through its [`ChannelInterface`].
    pub(crate) ca: Arc<dyn ChannelInterface>,
    /// The device's port beside it: its clock, P_Key table, counters, power.
    pub(crate) device: Arc<dyn PortInterface>,
    /// The path MTU our REQ offers: the port's active MTU (its link's, as rxe derives it).
    pub(crate) mtu: PathMtu,
    /// Completions of the asynchronous verbs, for the DPC.
    pub(crate) pending: Arc<Pending>,
    pub(crate) pd: PdId,
    pub(crate) ctrl: Arc<MemBlock>,
    pub(crate) ctrl_mr: MrKeys,
    /// The machine's memory (the port's): SRB buffers' pages, registered where they are.
    pub(crate) memory: Arc<win_port::SystemMemory>,
    pub(crate) reg: Lock<Registration>,
    pub(crate) inner: Lock<Inner>,
    /// The RC QP's send queue depth (the registration strategy's need).
    pub(crate) sq_depth: usize,
    /// How BuildIo mapped buffers: (immediate, fast-registered or windowed).
    pub(crate) mapped: (AtomicU64, AtomicU64),
    /// Buffers BuildIo described through the all-memory region.
    pub(crate) mapped_all_memory: AtomicU64,
    /// Held commands registered again after a reconnect.
    pub(crate) remapped: AtomicU64,
    /// Logins, losses and the last failure, for [`crate::SrpTransport::status`].
    pub(crate) status: Lock<StatusLog>,
    /// What bus and device resets did.
    pub(crate) resets: super::reset::ResetCounters,
    /// The port: its DPC runs the adapter's (queued by the device's CQ notifications and
    /// by work queued from outside the DPC).
    pub(crate) port: Arc<dyn PortSide>,
}

/// Why the adapter could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The device could not be opened (its provider says what to install or configure).
    #[error("device: {0}")]
    Device(#[from] access_layer::verbs::OpenError),
    /// A verb, the connection manager or the registration pool.
    #[error("setup: {0}")]
    Setup(String),
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
        let Device { ca, port: device } = cfg.fabric.open(&cfg.device_spec())?;
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
        device
            .set_pkey_table(vec![cfg.partition])
            .map_err(|e| OpenError::Setup(format!("P_Key table: {e}")))?;
        let dm = DeviceManagement {
            agents: Vec::new(),
            client: cfg.ioc_watch.map(|period| {
                let mut client = DmClient::new(DmClientConfig {
                    rescan_period: period,
                    ..DmClientConfig::default()
                });
                // A fresh client has no portal: adding the one cannot fail.
                let portal = MadAddress::gsi(1, Gid::from_ip(cfg.target));
                let _ = client.add_portal(device.now(), portal);
                client
            }),
        };
        let setup_cm = CmSetup {
            time_wait: Duration::from_millis(20),
            agent_id: 0x5e1f,
            // A simulated run draws it from the net's seed, so the run replays.
            first_comm_id: (cfg.fabric.random() as u32).max(1),
        };
        let dev = Device {
            ca: ca.clone(),
            port: device.clone(),
        };
        let mut cm = access_layer::mads::open_connection_manager(&dev, &setup_cm, dm)
            .map_err(|e| OpenError::Setup(format!("connection manager: {e}")))?;
        let watch = match (cfg.ioc_watch, cm.device_management().is_some()) {
            (Some(_), true) => Some(super::watch::IocWatch::default()),
            (Some(_), false) => {
                // Under rdma-core the kernel owns QP1: no Device Management to watch with.
                tracing::warn!(
                    device = %device.identity(),
                    "IOC watch not available: the provider owns QP1 (no Device Management)"
                );
                None
            }
            (None, _) => None,
        };
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
        let strategy = Self::strategy(&sync, pd, &cfg, attr.caps, memory.block())?;
        // The send queue holds every command's binds or REG_MRs, its SEND and its
        // LOCAL_INVs; the CQ every signaled one of those and the receives.
        let sq_depth = match &strategy {
            Strategy::PerIoWindows(w) => {
                let c = w.config();
                (2 * c.windows_per_cmd + 2) * c.window + SEND_SLOTS
            }
            _ => BASE_SQ_DEPTH,
        };
        let cq = sync
            .create_cq((sq_depth + RECV_SLOTS).max(8192))
            .map_err(setup("create_cq"))?;
        let inner = Inner {
            link: Link {
                cm,
                qp: None,
                conn: None,
                attempt: 0,
                creating: None,
                rep: None,
                qp_failed: false,
                watch,
            },
            ch: ChannelState {
                channel: InitiatorChannel::new(Self::channel_config(&cfg)),
                cmds: IdTable::new(),
                mgmt: BTreeMap::new(),
                known_luns: alloc::collections::BTreeSet::new(),
                target_reset: None,
                paused: false,
            },
            post: Posting {
                cq,
                pending_reg: IdTable::new(),
                chain: Vec::new(),
                chain_ids: Vec::new(),
                send_free: (0..SEND_SLOTS).rev().collect(),
                inflight_inv: BTreeSet::new(),
                wcs: Vec::with_capacity(256),
            },
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
            device,
            mtu,
            pending: Arc::new(Pending::new(port.clone())),
            pd,
            ctrl,
            ctrl_mr,
            reg: Lock::new(Registration::new(strategy)),
            sq_depth,
            inner: Lock::new(inner),
            mapped: (AtomicU64::new(0), AtomicU64::new(0)),
            mapped_all_memory: AtomicU64::new(0),
            remapped: AtomicU64::new(0),
            status: Lock::new(StatusLog::new(target)),
            resets: super::reset::ResetCounters::default(),
            port,
        })
    }

    /// The registration strategy `cfg` asks for. PerIo: an FRMR pool for the whole window,
    /// up to 4 regions per command, where the device has fast registration; else (user
    /// space over rdma-core) type-2 memory windows over one region of system memory with
    /// no remote rights, one window per page run (a buffer's pages are scattered, so up to
    /// one per page), enough for one LU's full queue of the largest transfers (more asks
    /// get BUSY until windows come back); a device with neither is refused, naming
    /// `trust-target` as the weaker choice. TrustTarget: one region over all of system memory, remote read and
    /// write, its warning logged here (HwFindAdapter), and as many descriptors per command
    /// as the port hands SG elements (NumberOfPhysicalBreaks + 1, one page each), all
    /// inline in the SRP_CMD, so bounded by the IU length we ask for too. The target must
    /// accept that many table entries (srp-target's default: one per 4 KiB of max_transfer).
    fn strategy(
        sync: &SyncCa<dyn ChannelInterface>,
        pd: PdId,
        cfg: &SrpAdapterConfig,
        caps: CaCaps,
        block: &Arc<MemBlock>,
    ) -> Result<Strategy, OpenError> {
        let per_transfer = (cfg.max_transfer as usize).div_ceil(win_port::PAGE_SIZE) + 1;
        match cfg.registration {
            RegistrationMode::PerIo if !caps.fast_reg && caps.mem_windows => {
                let keys = Self::register_memory(sync, pd, block, WindowStrategy::REGION_ACCESS)
                    .map_err(|e| OpenError::Setup(format!("window region: {e}")))?;
                let config = WindowConfig {
                    window: cfg.queue_depth as usize,
                    windows_per_cmd: per_transfer,
                    wr_id_tag: 0xf5e7,
                };
                let s = WindowStrategy::allocate(config, block, keys.lkey, MEMORY_IOVA, || {
                    sync.alloc_mw(pd).map(MrKey::from)
                })
                .map_err(|e| OpenError::Setup(format!("memory windows: {e}")))?;
                Ok(Strategy::PerIoWindows(s))
            }
            RegistrationMode::PerIo if !caps.fast_reg => Err(OpenError::Setup(
                "per-I/O registration: this device has neither fast registration nor memory \
                 windows, so the target's access cannot be fenced per I/O; registration = \
                 \"trust-target\" opens all of the host's memory to the target instead"
                    .into(),
            )),
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
                let keys = Self::register_memory(sync, pd, block, AllMemoryStrategy::ACCESS)
                    .map_err(|e| region_err(e.to_string()))?;
                let (s, warning) =
                    AllMemoryStrategy::new(block, keys, MEMORY_IOVA, max_descriptors)
                        .map_err(|e| region_err(e.to_string()))?;
                tracing::warn!(%warning, max_descriptors, "trust-target registration");
                Ok(Strategy::TrustTarget(s))
            }
        }
    }

    /// One region over all of system memory at [`MEMORY_IOVA`] with `access`.
    fn register_memory(
        sync: &SyncCa<dyn ChannelInterface>,
        pd: PdId,
        block: &Arc<MemBlock>,
        access: Access,
    ) -> Result<MrKeys, access_layer::verbs::VerbsError> {
        sync.reg_mr(
            pd,
            MrSpec {
                block: block.clone(),
                offset: 0,
                len: block.len() as u64,
                iova: MEMORY_IOVA,
                access,
            },
        )
    }

    /// The adapter lock.
    pub(crate) fn lock(&self) -> LockGuard<'_, Inner> {
        self.inner.lock()
    }

    /// The registration lock.
    pub(crate) fn reg(&self) -> LockGuard<'_, Registration> {
        self.reg.lock()
    }

    /// The status lock (a leaf: taken under the adapter lock or alone).
    pub(crate) fn status(&self) -> LockGuard<'_, StatusLog> {
        self.status.lock()
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
                let slot = d.slot;
                let replaced = self
                    .pending
                    .routine(move |result| VerbDone::Replaced { slot, result });
                // A region or window that cannot be released is lost to the pool, not
                // reused.
                match d.kind {
                    RegionKind::FastReg { max_pages } => {
                        let old = MrKeys {
                            lkey: Lkey(d.key.0),
                            rkey: None,
                        };
                        self.ca
                            .dereg_mr(old)
                            .on_complete(self.pending.routine(|result| VerbDone::Released {
                                what: "a discarded FRMR region",
                                result,
                            }));
                        self.ca
                            .alloc_fast_reg_mr(self.pd, max_pages)
                            .on_complete(move |r| replaced(r.map(|k| MrKey::from(k.lkey))));
                    }
                    RegionKind::Window => {
                        self.ca.dealloc_mw(ib_verbs::Rkey(d.key.0)).on_complete(
                            self.pending.routine(|result| VerbDone::Released {
                                what: "a discarded memory window",
                                result,
                            }),
                        );
                        self.ca
                            .alloc_mw(self.pd)
                            .on_complete(move |r| replaced(r.map(MrKey::from)));
                    }
                }
            }
        }
    }
}

/// Dropping the adapter (the port dropped with the device extension) tears down what is
/// left of the channel: the DREQ goes out, the QP is destroyed. Non-blocking.
impl Drop for Adapter {
    fn drop(&mut self) {
        let mut s = self.lock();
        if s.link.conn.is_some() || s.link.qp.is_some() {
            self.teardown(&mut s);
        }
    }
}
