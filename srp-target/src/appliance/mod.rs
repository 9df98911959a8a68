//! The appliance built from a validated configuration: every LUN opened, every IOC with its
//! target port identity, login policy, ACL and export table. It starts whole or not at all:
//! [`Appliance::build`] opens every backend and reports every failure together.
//!
//! This is what the daemon serves from: a login on IOC *i* is decided by
//! [`Appliance::decide_login`], a command on it finds its LUN with [`Ioc::lun`] and runs
//! with the [`Appliance::nexus`] for its initiator.
//!
//! Files: [`limits`] ([`ChannelLimits`]), [`error`] ([`StartError`]), [`geometry`] (the
//! LUN's physical block, alignment and unmap unit, checked against a block device's).

pub mod error;
pub mod geometry;
pub mod limits;
mod reconfigure;

pub use error::{StartError, StartErrors};
pub use limits::ChannelLimits;

use crate::backend::medium::MediumLayer;
use crate::backend::{Backend, FileBackend, RamBackend};
use crate::config::{Backing, IocConfig, LunConfig, TargetConfig};
use crate::exec::{LogicalUnit, LuConfig, Nexus};
use crate::login::{ChannelId, LoginDecision, LoginPolicy, decide};
use crate::lu::{LunIdentity, PortIdentity, TargetPortGroup};
use scsi::Lun;
use srp::wire::PortId;
use srp::wire::login::LoginReq;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One I/O controller at run time.
#[derive(Debug)]
pub struct Ioc {
    config: IocConfig,
    port: PortIdentity,
    enabled: AtomicBool,
    exports: BTreeMap<Lun, Arc<LogicalUnit>>,
    lun_list: Vec<Lun>,
}

impl Ioc {
    /// Its configuration.
    pub fn config(&self) -> &IocConfig {
        &self.config
    }

    /// Its relative target port and target port group.
    pub fn port(&self) -> PortIdentity {
        self.port
    }

    /// Whether logins are accepted (the control socket can change it).
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Enables or disables logins; existing channels are the caller's to close.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// The logical unit exported at `lun`.
    pub fn lun(&self, lun: Lun) -> Option<&Arc<LogicalUnit>> {
        self.exports.get(&lun)
    }

    /// The LUN numbers it exports, ascending (REPORT LUNS).
    pub fn luns(&self) -> &[Lun] {
        &self.lun_list
    }
}

/// The running appliance's configuration-derived state.
#[derive(Debug)]
pub struct Appliance {
    iocs: Vec<Ioc>,
    luns: BTreeMap<String, Arc<LogicalUnit>>,
    groups: Vec<TargetPortGroup>,
    limits: ChannelLimits,
    /// The one copy manager of every LU (EXTENDED COPY between them, ODX tokens valid on
    /// all); its export table follows the IOCs'.
    copy: Arc<crate::exec::copy::CopyManager>,
}

fn open_backend(
    l: &LunConfig,
    layer: Option<&MediumLayer>,
    shared: bool,
    appliance: u64,
) -> Result<Box<dyn Backend>, StartError> {
    let backend_err = |source| StartError::Backend {
        lun: l.name.clone(),
        source,
    };
    let file = match &l.backing {
        Backing::File {
            path,
            size_bytes: Some(size),
        } => FileBackend::create(path, *size, l.block_size).map_err(backend_err)?,
        Backing::File {
            path,
            size_bytes: None,
        }
        | Backing::Device { path } => FileBackend::open_as(
            path,
            l.block_size,
            crate::backend::OpenMode {
                read_only: l.read_only,
                allow_claimed: l.allow_claimed,
            },
        )
        .map_err(backend_err)?,
        Backing::Ram { size_bytes } => {
            return Ok(Box::new(
                RamBackend::new(size_bytes / u64::from(l.block_size.bytes()), l.block_size)
                    .map_err(backend_err)?,
            ));
        }
        #[cfg(target_os = "linux")]
        Backing::Rbd(b) => {
            let spec = crate::backend::RbdSpec {
                shared,
                appliance,
                ..crate::backend::RbdSpec::from(b)
            };
            return Ok(Box::new(
                crate::backend::RbdBackend::open(&spec, l.block_size).map_err(backend_err)?,
            ));
        }
        #[cfg(not(target_os = "linux"))]
        Backing::Rbd(b) => {
            let _ = (shared, appliance);
            return Err(backend_err(crate::backend::BackendError::Io {
                op: crate::backend::Op::Open,
                path: format!("rbd:{}", b.name()).into(),
                source: std::io::Error::from(std::io::ErrorKind::Unsupported),
            }));
        }
    };
    let file = match layer {
        Some(layer) => file.interpose(|m| (layer.0)(&l.name, m)),
        None => file,
    };
    let Some(log) = &l.record_writes else {
        return Ok(Box::new(file));
    };
    let file = file
        .record_writes(log)
        .map_err(|source| StartError::WriteLog {
            lun: l.name.clone(),
            source,
        })?;
    tracing::warn!(lun = %l.name, log = %log.display(),
        "recording every write, flush and discard of this LUN (record_writes): a diagnostic mode; the log grows with every write");
    Ok(Box::new(file))
}

/// LUN `l` of `config` opened (a LUN of an appliance with `[[peer]]`s is shared).
fn open_lun(
    l: &LunConfig,
    config: &TargetConfig,
    copy: &Arc<crate::exec::copy::CopyManager>,
    limits: &ChannelLimits,
    layer: Option<&MediumLayer>,
) -> Result<LogicalUnit, StartError> {
    let (oui, state_dir) = (config.target.oui, config.target.state_dir.as_path());
    let backend = open_backend(
        l,
        layer,
        !config.peers.is_empty(),
        config.target.node_guid.0,
    )?;
    // After the open: a file LUN's file exists then.
    let geometry = geometry::geometry(l)?;
    let mut lu = LuConfig::new(LunIdentity::derive(&l.name, oui));
    lu.atomic_log = atomic_log(l, backend.as_ref(), state_dir)?;
    lu.physical_block_bytes = geometry.physical_block_bytes;
    lu.alignment = geometry.alignment;
    lu.copy_manager = Some(copy.clone());
    lu.read_only = l.read_only;
    lu.write_cache = l.write_cache;
    // Persistent reservations persist here under APTPL; a saved state is the LU's state.
    let pr_file = state_dir.join(format!("lun-{}.pr", l.name));
    lu.saved_pr =
        crate::exec::pr::persist::load(&pr_file).map_err(|reason| StartError::SavedState {
            lun: l.name.clone(),
            reason,
        })?;
    lu.pr_file = Some(pr_file);
    // An image other appliances serve too: its reservations are kept in the cluster.
    #[cfg(target_os = "linux")]
    if let (Backing::Rbd(b), false) = (&l.backing, config.peers.is_empty()) {
        let spec = crate::backend::RbdSpec {
            appliance: config.target.node_guid.0,
            ..crate::backend::RbdSpec::from(b)
        };
        let shared = crate::backend::rbd_pr::RbdSharedPr::open(&spec).map_err(|source| {
            StartError::Backend {
                lun: l.name.clone(),
                source,
            }
        })?;
        lu.shared_pr = Some(Arc::new(shared));
    }
    if l.write_cache_changeable {
        // The caching page is savable: start from the saved one, if any.
        let saved = state_dir.join(format!("lun-{}.mode", l.name));
        let wce =
            crate::exec::mode::load_saved_wce(&saved).map_err(|reason| StartError::SavedState {
                lun: l.name.clone(),
                reason,
            })?;
        lu.wce_changeable = true;
        lu.default_write_cache = Some(l.write_cache);
        lu.saved_write_cache = wce;
        lu.write_cache = wce.unwrap_or(l.write_cache);
        lu.saved_pages = Some(saved);
    }
    // VPD B0h tells hosts what one channel accepts per command.
    lu.max_transfer_bytes = u32::try_from(limits.max_transfer).unwrap_or(u32::MAX);
    Ok(LogicalUnit::new(backend, lu))
}

/// The intent log of a file or device LUN (`crate::atomic`), at `state_dir/atomic/
/// <name>.log`, after replaying what it held onto the medium (a crash during an atomic
/// write); none for a RAM LU (lost whole) or a read-only one (it writes nothing — a log
/// left with records is reported, not replayed: the LU would have to be writable), and
/// none for an RBD image: a log on this machine could replay old bytes over what another
/// client (another appliance after a failover) wrote since, so WRITE ATOMIC there is what
/// one RADOS write guarantees — a physical block, inside one object.
fn atomic_log(
    l: &LunConfig,
    backend: &dyn Backend,
    state_dir: &std::path::Path,
) -> Result<Option<Arc<std::sync::Mutex<crate::atomic::IntentLog>>>, StartError> {
    use crate::atomic::{IntentLog, record::Header};
    if matches!(l.backing, Backing::Ram { .. } | Backing::Rbd(_)) {
        return Ok(None);
    }
    let path = state_dir.join("atomic").join(format!("{}.log", l.name));
    let err = |reason: String| StartError::AtomicLog {
        lun: l.name.clone(),
        reason,
    };
    if l.read_only {
        let pending = std::fs::read(&path)
            .ok()
            .map(|b| {
                crate::atomic::parse_records(
                    b.get(crate::atomic::record::HEADER_LEN..).unwrap_or(&[]),
                    l.block_size.bytes(),
                )
            })
            .map_or(0, |p| p.writes.len());
        if pending > 0 {
            tracing::warn!(lun = %l.name, log = %path.display(), pending,
                "a read-only LUN's intent log holds atomic writes a crash interrupted: not replayed (make the LUN writable once to repair them)");
        }
        return Ok(None);
    }
    let header = Header {
        block_size: l.block_size.bytes(),
        size_bytes: backend.blocks() * u64::from(l.block_size.bytes()),
    };
    let (mut log, pending) = IntentLog::open(&path, header).map_err(|e| err(e.to_string()))?;
    let bs = u64::from(l.block_size.bytes());
    let replayed = log
        .recover(
            &pending,
            |lba, data| {
                let end = lba.saturating_add(data.len() as u64 / bs);
                if end > backend.blocks() {
                    return Err(crate::backend::BackendError::OutOfRange {
                        op: crate::backend::Op::Write,
                        path: path.clone(),
                        lba: scsi::Lba(lba),
                        len_blocks: data.len() as u64 / bs,
                        blocks: backend.blocks(),
                    });
                }
                backend.write_at(scsi::Lba(lba), data)
            },
            || backend.flush(),
        )
        .map_err(|e| err(e.to_string()))?;
    if replayed > 0 || pending.torn_bytes > 0 {
        tracing::warn!(lun = %l.name, log = %path.display(), replayed, torn_bytes = pending.torn_bytes,
            "WRITE ATOMIC: atomic writes a crash interrupted were completed from the intent log (a torn last record, never begun in place, was dropped)");
    }
    Ok(Some(Arc::new(std::sync::Mutex::new(log))))
}

impl Appliance {
    /// Opens every LUN of `config` and lays out its IOCs; fails with every error if any LUN
    /// cannot be opened (nothing is left open then).
    pub fn build(config: &TargetConfig, limits: ChannelLimits) -> Result<Appliance, StartErrors> {
        Self::build_layered(config, limits, None)
    }

    /// As [`Appliance::build`], with `layer` beneath every file LUN's backend.
    pub fn build_layered(
        config: &TargetConfig,
        limits: ChannelLimits,
        layer: Option<&MediumLayer>,
    ) -> Result<Appliance, StartErrors> {
        let mut errors = Vec::new();
        let mut luns = BTreeMap::new();
        // One copy manager for every LU: EXTENDED COPY between them, ODX tokens valid on all.
        let copy = crate::exec::copy::CopyManager::new();
        for l in &config.luns {
            match open_lun(l, config, &copy, &limits, layer) {
                Ok(lu) => {
                    luns.insert(l.name.clone(), lu.into_shared());
                }
                Err(e) => errors.push(e),
            }
        }
        let Ok(n_iocs) = u16::try_from(config.iocs.len()) else {
            errors.push(StartError::TooManyIocs(config.iocs.len()));
            return Err(StartErrors(errors));
        };
        if !errors.is_empty() {
            return Err(StartErrors(errors));
        }
        let groups = reconfigure::port_groups(config);
        let iocs: Vec<Ioc> = config
            .iocs
            .iter()
            .zip(0u16..n_iocs)
            .filter_map(|(c, i)| {
                let port = PortIdentity::for_ioc_from(config.target.port_base, i)?;
                Some(reconfigure::ioc(c, port, &luns, c.enabled))
            })
            .collect();
        copy.set_exports(iocs.iter().flat_map(|i| {
            i.exports
                .iter()
                .map(move |(lun, lu)| (i.port.relative_port, *lun, lu))
        }));
        Ok(Appliance {
            iocs,
            luns,
            groups,
            limits,
            copy,
        })
    }

    /// The IOCs, in configuration order (IOC *i* is relative port and group *i* + 1).
    pub fn iocs(&self) -> &[Ioc] {
        &self.iocs
    }

    /// The IOC whose target port identifier is `id`.
    pub fn ioc_for_target(&self, id: PortId) -> Option<(usize, &Ioc)> {
        self.iocs
            .iter()
            .enumerate()
            .find(|(_, i)| i.config.target_port_id() == id)
    }

    /// The logical unit named `name`.
    pub fn lun_by_name(&self, name: &str) -> Option<&Arc<LogicalUnit>> {
        self.luns.get(name)
    }

    /// Every logical unit with its name, in name order.
    pub fn luns(&self) -> impl Iterator<Item = (&str, &Arc<LogicalUnit>)> {
        self.luns.iter().map(|(n, l)| (n.as_str(), l))
    }

    /// The target port groups (REPORT TARGET PORT GROUPS).
    pub fn groups(&self) -> &[TargetPortGroup] {
        &self.groups
    }

    /// The channel limits.
    pub fn limits(&self) -> &ChannelLimits {
        &self.limits
    }

    /// The login policy of IOC `ioc`.
    pub fn policy(&self, ioc: &Ioc) -> LoginPolicy {
        LoginPolicy {
            target_port_id: ioc.config.target_port_id(),
            enabled: ioc.is_enabled(),
            max_it_iu_len: self.limits.max_it_iu_len,
            max_ti_iu_len: self.limits.max_ti_iu_len,
            window: self.limits.window,
            formats: self.limits.formats,
            immediate: self.limits.immediate,
            max_channels_per_nexus: self.limits.max_channels_per_nexus,
        }
    }

    /// Decides a login that arrived for IOC `ioc` (its ACL applied), given the live
    /// channels of the request's I_T nexus.
    pub fn decide_login(
        &self,
        ioc: &Ioc,
        req: &LoginReq,
        nexus_channels: &[ChannelId],
    ) -> LoginDecision {
        self.decide_login_from(ioc, req, nexus_channels, None)
    }

    /// [`Appliance::decide_login`] for a login from `from` (ACL entries that name an
    /// address match only it; with `None` they match nothing).
    pub fn decide_login_from(
        &self,
        ioc: &Ioc,
        req: &LoginReq,
        nexus_channels: &[ChannelId],
        from: Option<std::net::IpAddr>,
    ) -> LoginDecision {
        let admits = ioc.config.allow.allows_from(req.initiator_port_id, from);
        decide(req, &self.policy(ioc), admits, nexus_channels)
    }

    /// [`Appliance::decide_login_from`] knowing more of the login: `elsewhere`, whether
    /// the nexus's live channels came from another address than `from` (refused unless the
    /// IOC has `nexus_from_any_address`), and `pkey`, the partition it came on (refused if
    /// the IOC is not exported there).
    pub fn decide_login_at(
        &self,
        ioc: &Ioc,
        req: &LoginReq,
        nexus_channels: &[ChannelId],
        from: Option<std::net::IpAddr>,
        elsewhere: bool,
        pkey: ib_verbs::PKey,
    ) -> LoginDecision {
        let c = &ioc.config;
        let facts = crate::login::LoginFacts {
            acl_admits: c.allow.allows_from(req.initiator_port_id, from),
            nexus_channels,
            nexus_elsewhere: elsewhere && !c.nexus_from_any_address,
            wrong_partition: (!c.partitions.iter().any(|k| k.base() == pkey.base()))
                .then_some(pkey.0),
        };
        crate::login::decide_with(req, &self.policy(ioc), &facts)
    }

    /// The nexus a command from `initiator` through `ioc` runs with.
    pub fn nexus<'a>(&'a self, ioc: &'a Ioc, initiator: PortId) -> Nexus<'a> {
        Nexus {
            initiator,
            luns: &ioc.lun_list,
            port: ioc.port,
            groups: &self.groups,
            abort: None,
            may_wait: true,
            pr_epoch: None,
        }
    }
}
