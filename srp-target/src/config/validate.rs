//! From raw tables to a [`TargetConfig`]: each section on its own, then the checks across
//! sections (unique names, GUIDs, service IDs, addresses and backing paths; references from
//! IOCs to ports and LUNs). Every problem is recorded; the result exists only if none was.

use super::error::{ConfigErrorKind as E, ConfigErrors, KeyPath, Location, Sink, WarningKind};
use super::file::{self, RawExport, RawFile, RawIoc, RawLun, RawPort, RawTarget};
use super::partition::Partitions;
use super::peer;
use super::{
    Acl, Backing, ChannelGuards, DEFAULT_CONTROL_DIR, DEFAULT_OUI, DEFAULT_RDMA_CM_PORT,
    DEFAULT_STATE_DIR, IocConfig, Loaded, LoginForms, LunConfig, PortConfig, RbdBacking,
    TargetConfig, TargetSettings, acl, unique, values,
};
use crate::backend::BlockSize;
use crate::lu::{AluaState, Oui};
use access_layer::mad::ServiceId;
use access_layer::verbs::ProviderKind;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Validates the TOML `text` of the file named `origin`.
pub(super) fn validate(text: &str, origin: &str) -> Result<Loaded, ConfigErrors> {
    let mut sink = Sink::new(origin);
    let Some(mut root) = file::parse(text, &mut sink) else {
        return Err(ConfigErrors(sink.errors));
    };
    let top = KeyPath::default();
    for key in ["port", "ioc", "lun", "partition", "peer"] {
        if matches!(root.get(key), Some(toml::Value::Table(_))) {
            sink.key(&top.key(key), E::NotArrayOfTables(key));
            root.remove(key);
        }
    }
    let raw = file::entry::<RawFile>(&root, &top, &mut sink).map_or(
        RawFile {
            target: None,
            partition: None,
            port: None,
            ioc: None,
            lun: None,
            peer: None,
        },
        |e| e.raw,
    );
    let target = target(raw.target.as_ref(), &mut sink);
    let port_tables = raw.port.unwrap_or_default();
    let ioc_tables = raw.ioc.unwrap_or_default();
    let lun_tables = raw.lun.unwrap_or_default();
    for (what, n, why) in [
        ("port", port_tables.len(), "IOCs would be reachable nowhere"),
        ("ioc", ioc_tables.len(), "the target would export nothing"),
        (
            "lun",
            lun_tables.len(),
            "the target would have nothing to export",
        ),
    ] {
        if n == 0 {
            sink.at(Location::File, E::Empty { what, why });
        }
    }

    let (partitions, partition_list) =
        Partitions::declare(raw.partition.as_deref().unwrap_or_default(), &mut sink);
    let port_names = Names::declare("port", "port", &port_tables, &mut sink);
    let lun_names = Names::declare("lun", "LUN", &lun_tables, &mut sink);
    let ioc_names = Names::declare("ioc", "ioc", &ioc_tables, &mut sink);
    let ports: Vec<_> = port_tables
        .iter()
        .enumerate()
        .map(|(i, t)| port(t, &port_names.paths[i], &partitions, &mut sink))
        .collect();
    let luns: Vec<_> = lun_tables
        .iter()
        .enumerate()
        .map(|(i, t)| lun(t, &lun_names.paths[i], &mut sink))
        .collect();
    let refs = Refs {
        ports: &port_names,
        luns: &lun_names,
        partitions: &partitions,
    };
    let iocs: Vec<_> = ioc_tables
        .iter()
        .enumerate()
        .map(|(i, t)| ioc(t, &ioc_names.paths[i], &refs, &mut sink))
        .collect();
    unique::unique_addresses(&ports, &port_names.paths, &mut sink);
    unique::unique_backings(&luns, &lun_names.paths, &mut sink);
    unique::unique_ioc_ids(&iocs, &ioc_names.paths, &mut sink);
    partitions_on_ports(&iocs, &ports, &ioc_names.paths, &partitions, &mut sink);
    let peers = peer::declare(raw.peer.as_deref().unwrap_or_default(), &mut sink);
    if let (Some(t), Some(p)) = (&target, &peers) {
        peer::check_groups(t.port_base, ioc_tables.len(), p, &mut sink);
    }

    let (Some(target), Some(ports), Some(iocs), Some(luns), Some(peers)) = (
        target,
        ports.into_iter().collect::<Option<Vec<_>>>(),
        iocs.into_iter().collect::<Option<Vec<_>>>(),
        luns.into_iter().collect::<Option<Vec<_>>>(),
        peers,
    ) else {
        return Err(ConfigErrors(sink.errors));
    };
    if !sink.errors.is_empty() {
        return Err(ConfigErrors(sink.errors));
    }
    for (lun, path) in luns.iter().zip(&lun_names.paths) {
        if !iocs
            .iter()
            .any(|i| i.exports.values().any(|n| *n == lun.name))
        {
            sink.warn(path, WarningKind::NotExported);
        }
    }
    Ok(Loaded {
        config: TargetConfig {
            target,
            partitions: partition_list,
            ports,
            iocs,
            luns,
            peers,
        },
        warnings: sink.warnings,
    })
}

/// The names of one kind of entry, and the key path each entry is reported under: `lun
/// "vol1"` for LUNs with a valid unique name (a LUN is known by its name), otherwise
/// `lun[3]`; `port[0]` and `ioc[1]` always. Duplicate names are reported here.
struct Names {
    /// Valid names in file order, first occurrence only.
    defined: Vec<String>,
    /// Key path of each entry.
    paths: Vec<KeyPath>,
}

impl Names {
    fn declare(kind: &str, label: &'static str, tables: &[toml::Table], sink: &mut Sink) -> Names {
        let mut first: HashMap<&str, KeyPath> = HashMap::new();
        let mut names = Names {
            defined: Vec::new(),
            paths: Vec::new(),
        };
        for (i, table) in tables.iter().enumerate() {
            let indexed = KeyPath::default().key(kind).index(i);
            let name = table
                .get("name")
                .and_then(toml::Value::as_str)
                .filter(|n| values::name(n).is_ok());
            let Some(name) = name else {
                names.paths.push(indexed);
                continue;
            };
            if let Some(prev) = first.get(name) {
                sink.key(
                    &indexed.key("name"),
                    E::DuplicateName {
                        kind: label,
                        name: name.to_owned(),
                        first: prev.to_string(),
                    },
                );
                names.paths.push(indexed);
                continue;
            }
            let path = if kind == "lun" {
                KeyPath::named(kind, name)
            } else {
                indexed.clone()
            };
            first.insert(name, indexed);
            names.defined.push(name.to_owned());
            names.paths.push(path);
        }
        names
    }

    fn contains(&self, name: &str) -> bool {
        self.defined.iter().any(|n| n == name)
    }

    fn list(&self) -> String {
        if self.defined.is_empty() {
            "none".to_owned()
        } else {
            self.defined.join(", ")
        }
    }
}

/// What an IOC may refer to.
struct Refs<'a> {
    ports: &'a Names,
    luns: &'a Names,
    partitions: &'a Partitions,
}

/// Every partition an IOC is exported on must be on each of its ports.
fn partitions_on_ports(
    iocs: &[Option<IocConfig>],
    ports: &[Option<PortConfig>],
    paths: &[KeyPath],
    partitions: &Partitions,
    sink: &mut Sink,
) {
    for (ioc, path) in iocs.iter().zip(paths) {
        let Some(ioc) = ioc else { continue };
        for port in ports
            .iter()
            .flatten()
            .filter(|p| ioc.ports.contains(&p.name))
        {
            for (i, k) in ioc.partitions.iter().enumerate() {
                if !port.partitions.iter().any(|pk| pk.base() == k.base()) {
                    sink.key(
                        &path.key("partitions").index(i),
                        E::PartitionNotOnPort {
                            partition: partitions.name_of(*k),
                            port: port.name.clone(),
                        },
                    );
                }
            }
        }
    }
}

/// Records a missing required key unless the key was present but bad (already reported).
fn require<T>(
    value: Option<T>,
    entry: &file::Entry<impl Sized>,
    path: &KeyPath,
    key: &str,
    hint: &str,
    sink: &mut Sink,
) -> Option<T> {
    if value.is_none() && !entry.bad.contains(key) {
        let hint = hint.to_owned();
        sink.key(&path.key(key), E::Missing { hint });
    }
    value
}

fn target(table: Option<&toml::Table>, sink: &mut Sink) -> Option<TargetSettings> {
    let path = KeyPath::default().key("target");
    let Some(table) = table else {
        let hint = "; add a [target] table with node_guid = \"0x...\"".to_owned();
        sink.key(&path, E::Missing { hint });
        return None;
    };
    let e = file::entry::<RawTarget>(table, &path, sink)?;
    let guid = require(
        e.raw.node_guid.as_deref(),
        &e,
        &path,
        "node_guid",
        "; the HCA node GUID, as node_guid = \"0x0002c90300a1b2c0\"",
        sink,
    );
    let node_guid = guid.and_then(|g| sink.check(&path.key("node_guid"), values::guid(g)));
    let oui = match &e.raw.oui {
        Some(v) => sink.check(&path.key("oui"), values::oui(v)),
        None => Oui::new(DEFAULT_OUI),
    };
    let name = match &e.raw.name {
        Some(n) => Some(sink.check(&path.key("name"), values::name(n))?),
        None => None,
    };
    let rdma_cm_port = match e.raw.rdma_cm_port {
        Some(p) => sink.check(&path.key("rdma_cm_port"), values::rdma_cm_port(p))?,
        None => DEFAULT_RDMA_CM_PORT,
    };
    let login_forms = match &e.raw.login_forms {
        Some(l) => sink.check(&path.key("login_forms"), values::login_forms(l))?,
        None => LoginForms::default(),
    };
    let control_socket = match &e.raw.control_socket {
        Some(p) => sink.check(&path.key("control_socket"), values::socket_path(p))?,
        None => Path::new(DEFAULT_CONTROL_DIR)
            .join(format!("{}.sock", name.as_deref().unwrap_or("target"))),
    };
    let state_dir = match &e.raw.state_dir {
        Some(p) => sink.check(&path.key("state_dir"), values::absolute_dir(p))?,
        None => Path::new(DEFAULT_STATE_DIR).join(name.as_deref().unwrap_or("target")),
    };
    let control_group = match &e.raw.control_group {
        Some(g) => Some(sink.check(&path.key("control_group"), values::group(g))?),
        None => None,
    };
    let guards = guards(&e.raw, &path, sink);
    let port_base = match e.raw.port_base {
        Some(b) => sink.check(&path.key("port_base"), peer::port_base(b))?,
        None => peer::DEFAULT_PORT_BASE,
    };
    (e.bad.is_empty()).then_some(())?;
    Some(TargetSettings {
        node_guid: node_guid?,
        oui: oui?,
        name,
        rdma_cm_port,
        login_forms,
        control_socket,
        control_group,
        state_dir,
        guards: guards?,
        port_base,
    })
}

/// `idle_probe`, `max_channels`, `max_channels_per_address`, `max_half_open`.
fn guards(raw: &RawTarget, path: &KeyPath, sink: &mut Sink) -> Option<ChannelGuards> {
    let d = ChannelGuards::default();
    let idle_probe = match &raw.idle_probe {
        Some(t) => sink.check(&path.key("idle_probe"), values::idle_probe(t)),
        None => Some(d.idle_probe),
    };
    let mut count = |key: &'static str, v: Option<i64>, default: usize| match v {
        Some(n) => sink.check(&path.key(key), values::count(key, n)),
        None => Some(default),
    };
    let max_channels = count("max_channels", raw.max_channels, d.max_channels);
    let per_address = count(
        "max_channels_per_address",
        raw.max_channels_per_address,
        d.max_channels_per_address,
    );
    let half_open = count("max_half_open", raw.max_half_open, d.max_half_open);
    Some(ChannelGuards {
        idle_probe: idle_probe?,
        max_channels: max_channels?,
        max_channels_per_address: per_address?,
        max_half_open: half_open?,
    })
}

fn port(
    table: &toml::Table,
    path: &KeyPath,
    partitions: &Partitions,
    sink: &mut Sink,
) -> Option<PortConfig> {
    let e = file::entry::<RawPort>(table, path, sink)?;
    let pkeys = partitions.resolve(e.raw.partitions.as_ref(), &path.key("partitions"), sink);
    let name = require(e.raw.name.as_deref(), &e, path, "name", "", sink)
        .and_then(|n| sink.check(&path.key("name"), values::name(n)));
    let address = require(
        e.raw.address.as_deref(),
        &e,
        path,
        "address",
        "; the port's IP address, as address = \"192.0.2.10\"",
        sink,
    )
    .and_then(|a| sink.check(&path.key("address"), values::address(a)));
    let r = &e.raw;
    let provider = match r.provider.as_deref() {
        None => Some(ProviderKind::Soft),
        Some(p) => sink.check(&path.key("provider"), values::provider(p)),
    };
    let device_port = r
        .device_port
        .map(|n| sink.check(&path.key("device_port"), values::small("device_port", n, 1)));
    let gid_index = r
        .gid_index
        .map(|n| sink.check(&path.key("gid_index"), values::small("gid_index", n, 0)));
    let provider = provider?;
    let device_port = device_port.map_or(Some(None), |v| v.map(Some))?;
    let gid_index = gid_index.map_or(Some(None), |v| v.map(Some))?;
    if provider != ProviderKind::RdmaCore {
        // The device keys name an RDMA device: meaningless for the software HCA.
        for (key, given) in [
            ("device", r.device.is_some()),
            ("device_port", device_port.is_some()),
            ("gid_index", gid_index.is_some()),
        ] {
            if given {
                sink.key(
                    &path.key(key),
                    E::BadValue {
                        key: "provider",
                        why: format!("{key} names an RDMA device: set provider = \"rdma-core\""),
                    },
                );
                return None;
            }
        }
    }
    (e.bad.is_empty()).then_some(())?;
    Some(PortConfig {
        name: name?,
        address: address?,
        partitions: pkeys?,
        provider,
        device: r.device.clone(),
        device_port,
        gid_index,
    })
}

fn lun(table: &toml::Table, path: &KeyPath, sink: &mut Sink) -> Option<LunConfig> {
    let e = file::entry::<RawLun>(table, path, sink)?;
    let r = &e.raw;
    let name = require(r.name.as_deref(), &e, path, "name", "", sink)
        .and_then(|n| sink.check(&path.key("name"), values::name(n)));
    let block_size = match r.block_size {
        Some(b) => sink.check(&path.key("block_size"), values::block_size(b)),
        None => Some(BlockSize::B512),
    };
    let size_key = path.key("size");
    let size = r
        .size
        .as_ref()
        .map(|s| sink.check(&size_key, values::size(s)));
    if let (Some(Some(size_bytes)), Some(bs)) = (size, block_size) {
        if size_bytes % u64::from(bs.bytes()) != 0 {
            let block_size = bs.bytes();
            sink.key(
                &size_key,
                E::SizeNotBlocks {
                    size_bytes,
                    block_size,
                },
            );
        }
    }
    let physical_block_size = match (r.physical_block_size, block_size) {
        (None, _) => Some(None),
        (Some(p), Some(bs)) => sink
            .check(
                &path.key("physical_block_size"),
                values::physical_block_size(p, bs),
            )
            .map(Some),
        // The block size is wrong already: reported once.
        (Some(_), None) => None,
    };
    let backing = backing(&e, path, size, sink);
    let record_writes = match (&r.record_writes, &backing) {
        (None, _) => Some(None),
        (Some(_), Some(Backing::Ram { .. } | Backing::Rbd(_))) => {
            let why = "record_writes needs a file or device backing (a RAM or RBD LUN's writes do not pass through the target's file layer)";
            sink.key(&path.key("record_writes"), E::Backing(why));
            None
        }
        (Some(p), _) => {
            let check = if Path::new(p).is_absolute() {
                Ok(Some(PathBuf::from(p)))
            } else {
                Err(E::RelativePath(p.to_owned()))
            };
            sink.check(&path.key("record_writes"), check)
        }
    };
    let allow_claimed = r.allow_claimed.unwrap_or(false);
    if allow_claimed
        && !(r.read_only == Some(true) && matches!(backing, Some(Backing::Device { .. })))
    {
        sink.key(
            &path.key("allow_claimed"),
            E::Backing(
                "allow_claimed shares a claimed block device, and only read-only: it needs device = … and read_only = true",
            ),
        );
        return None;
    }
    (e.bad.is_empty()).then_some(())?;
    Some(LunConfig {
        name: name?,
        backing: backing?,
        block_size: block_size?,
        physical_block_size: physical_block_size?,
        read_only: r.read_only.unwrap_or(false),
        allow_claimed,
        write_cache: r.write_cache.unwrap_or(true),
        write_cache_changeable: r.write_cache_changeable.unwrap_or(false),
        record_writes: record_writes?,
    })
}

/// The one backing store of a LUN. `size` is `None` if absent, `Some(None)` if invalid.
fn backing(
    e: &file::Entry<RawLun>,
    path: &KeyPath,
    size: Option<Option<u64>>,
    sink: &mut Sink,
) -> Option<Backing> {
    let r = &e.raw;
    let ram = r.ram == Some(true);
    let given = usize::from(r.file.is_some())
        + usize::from(r.device.is_some())
        + usize::from(ram)
        + usize::from(r.rbd.is_some());
    let ceph_keys = [
        ("ceph_conf", r.ceph_conf.is_some()),
        ("ceph_client", r.ceph_client.is_some()),
        ("ceph_keyring", r.ceph_keyring.is_some()),
    ];
    if r.rbd.is_none() {
        if let Some((key, _)) = ceph_keys.iter().find(|(_, set)| *set) {
            sink.key(
                &path.key(key),
                E::Backing("ceph_conf, ceph_client and ceph_keyring go with rbd = \"pool/image\""),
            );
            return None;
        }
    }
    let absolute = |key: &str, p: &str, sink: &mut Sink| -> Option<PathBuf> {
        let check = if Path::new(p).is_absolute() {
            Ok(PathBuf::from(p))
        } else {
            Err(E::RelativePath(p.to_owned()))
        };
        sink.check(&path.key(key), check)
    };
    match (given, &r.file, &r.device) {
        (0, ..)
            if ["file", "device", "ram", "rbd"]
                .iter()
                .any(|k| e.bad.contains(*k)) =>
        {
            None
        }
        (0, ..) => {
            let why = "no backing store: set exactly one of file = \"/path\", device = \"/dev/...\", ram = true or rbd = \"pool/image\"";
            sink.key(path, E::Backing(why));
            None
        }
        (2.., ..) => {
            sink.key(
                path,
                E::Backing(
                    "more than one backing store: set exactly one of file, device, ram = true or rbd",
                ),
            );
            None
        }
        (_, _, _) if r.rbd.is_some() => {
            let spec = r.rbd.as_deref().unwrap_or_default();
            if size.is_some() {
                sink.key(
                    &path.key("size"),
                    E::Backing("size is not allowed for an RBD image; its size is the image's"),
                );
                return None;
            }
            let parts = spec.split_once('/').filter(|(p, i)| {
                !p.is_empty() && !i.is_empty() && !i.contains('/') && !spec.contains('\0')
            });
            let Some((pool, image)) = parts else {
                sink.key(&path.key("rbd"), E::BadRbdImage(spec.to_owned()));
                return None;
            };
            let conf = absolute(
                "ceph_conf",
                r.ceph_conf.as_deref().unwrap_or("/etc/ceph/ceph.conf"),
                sink,
            );
            let keyring = match &r.ceph_keyring {
                Some(k) => Some(absolute("ceph_keyring", k, sink)?),
                None => None,
            };
            let client = match &r.ceph_client {
                Some(c) if c.is_empty() || c.starts_with("client.") || c.contains('\0') => {
                    sink.key(
                        &path.key("ceph_client"),
                        E::Backing("ceph_client is the client id without \"client.\", as ceph_client = \"srp\""),
                    );
                    return None;
                }
                c => c.clone(),
            };
            Some(Backing::Rbd(RbdBacking {
                pool: pool.to_owned(),
                image: image.to_owned(),
                conf: conf?,
                client,
                keyring,
            }))
        }
        (_, Some(f), _) => {
            let path = absolute("file", f, sink);
            let size_bytes = match size {
                None => None,
                Some(s) => Some(s?),
            };
            Some(Backing::File {
                path: path?,
                size_bytes,
            })
        }
        (_, _, Some(d)) => {
            if size.is_some() {
                sink.key(
                    &path.key("size"),
                    E::Backing("size is not allowed for a block device; its size is the device's"),
                );
                return None;
            }
            Some(Backing::Device {
                path: absolute("device", d, sink)?,
            })
        }
        _ => {
            let size = require(
                size,
                e,
                path,
                "size",
                "; a RAM LUN needs a size, as size = \"1GiB\"",
                sink,
            )?;
            let size_bytes = size?;
            // Larger than the machine's memory can never start: said now, not at start.
            if let Some(total) = crate::backend::memory_total() {
                if size_bytes > total {
                    sink.key(
                        &path.key("size"),
                        E::RamTooLarge {
                            size_bytes,
                            memory_bytes: total,
                        },
                    );
                    return None;
                }
            }
            Some(Backing::Ram { size_bytes })
        }
    }
}

fn ioc(table: &toml::Table, path: &KeyPath, refs: &Refs<'_>, sink: &mut Sink) -> Option<IocConfig> {
    let e = file::entry::<RawIoc>(table, path, sink)?;
    let r = &e.raw;
    let name = require(r.name.as_deref(), &e, path, "name", "", sink)
        .and_then(|n| sink.check(&path.key("name"), values::name(n)));
    let guid = require(
        r.guid.as_deref(),
        &e,
        path,
        "guid",
        "; the IOC GUID, as guid = \"0x0002c90300a1b2c3\"",
        sink,
    )
    .and_then(|g| sink.check(&path.key("guid"), values::guid(g)));
    let id_ext = optional_id64(r.id_ext.as_deref(), "id_ext", path, sink);
    let service_id = optional_id64(r.service_id.as_deref(), "service ID", path, sink);
    let service_id = service_id.and_then(|s| {
        let s = s.map(ServiceId);
        match s {
            Some(id) if id.carries_cma_header() => {
                sink.key(&path.key("service_id"), E::RdmaCmServiceId(id.0));
                None
            }
            _ => Some(s),
        }
    });
    let partitions = refs
        .partitions
        .resolve(r.partitions.as_ref(), &path.key("partitions"), sink);
    let ports = require(
        r.ports.as_ref(),
        &e,
        path,
        "ports",
        "; list the ports it is reachable on, as ports = [\"p0\"]",
        sink,
    )
    .and_then(|p| port_refs(p, &path.key("ports"), refs.ports, sink));
    let alua = match &r.alua {
        Some(a) => sink.check(&path.key("alua"), values::alua(a)),
        None => Some(AluaState::ActiveOptimized),
    };
    let exports = match &r.exports {
        Some(x) => exports(x, &path.key("exports"), refs.luns, sink),
        None => Some(BTreeMap::new()),
    };
    let allow = require(
        r.allow.as_ref(),
        &e,
        path,
        "allow",
        "; state who may log in: allow = [\"any\"], or initiator port IDs and \"guid:...\" entries",
        sink,
    )
    .and_then(|a| allow(a, &path.key("allow"), sink));
    (e.bad.is_empty()).then_some(())?;
    let guid = guid?;
    Some(IocConfig {
        name: name?,
        guid,
        id_ext: id_ext?.unwrap_or(guid.0),
        service_id: service_id?.unwrap_or(ServiceId(guid.0)),
        ports: ports?,
        enabled: r.enabled.unwrap_or(true),
        alua: alua?,
        exports: exports?,
        allow: allow?,
        nexus_from_any_address: r.nexus_from_any_address.unwrap_or(false),
        partitions: partitions?,
    })
}

/// An optional 64-bit ID: `Some(None)` if absent, `None` if invalid (recorded).
fn optional_id64(
    text: Option<&str>,
    what: &'static str,
    path: &KeyPath,
    sink: &mut Sink,
) -> Option<Option<u64>> {
    let key = if what == "id_ext" {
        "id_ext"
    } else {
        "service_id"
    };
    match text {
        Some(t) => sink.check(&path.key(key), values::id64(what, t)).map(Some),
        None => Some(None),
    }
}

fn port_refs(
    names: &[String],
    path: &KeyPath,
    ports: &Names,
    sink: &mut Sink,
) -> Option<Vec<String>> {
    if names.is_empty() {
        sink.key(path, E::NoPorts);
        return None;
    }
    let mut ok = true;
    for (i, name) in names.iter().enumerate() {
        let kind = if names[..i].contains(name) {
            E::DuplicatePortRef(name.clone())
        } else if !ports.contains(name) {
            E::UnknownPort {
                name: name.clone(),
                defined: ports.list(),
            }
        } else {
            continue;
        };
        sink.key(&path.index(i), kind);
        ok = false;
    }
    ok.then(|| names.to_vec())
}

/// One export as written: its key path, its LUN number and its LUN name (`None` when
/// invalid, already reported).
type Export = (KeyPath, Option<(u32, scsi::Lun)>, Option<String>);

/// `exports`: a table `{ "0" = "vol1" }` or an array of `{ lun = 0, name = "vol1" }`.
fn exports(
    value: &toml::Value,
    path: &KeyPath,
    luns: &Names,
    sink: &mut Sink,
) -> Option<BTreeMap<scsi::Lun, String>> {
    let mut items: Vec<Export> = Vec::new();
    match value {
        toml::Value::Table(t) => {
            for (key, v) in t {
                let at = path.key(key);
                let lun = sink.check(&at, values::lun_key(key));
                let name = v.as_str().map(str::to_owned);
                if name.is_none() {
                    sink.key(&at, E::BadExportName);
                }
                items.push((at, lun, name));
            }
        }
        toml::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                let at = path.index(i);
                let Some(t) = v.as_table() else {
                    sink.key(&at, E::BadExports);
                    items.push((at, None, None));
                    continue;
                };
                let Some(e) = file::entry::<RawExport>(t, &at, sink) else {
                    items.push((at, None, None));
                    continue;
                };
                let lun = require(
                    e.raw.lun,
                    &e,
                    &at,
                    "lun",
                    "; the LUN number, as lun = 0",
                    sink,
                )
                .and_then(|n| sink.check(&at.key("lun"), values::lun_int(n)));
                let name = require(
                    e.raw.name.clone(),
                    &e,
                    &at,
                    "name",
                    "; the LUN name, as name = \"vol1\"",
                    sink,
                );
                items.push((at, lun, name));
            }
        }
        _ => {
            sink.key(path, E::BadExports);
            return None;
        }
    }
    let mut map = BTreeMap::new();
    let mut first_number: HashMap<u32, KeyPath> = HashMap::new();
    let mut first_name: HashMap<String, KeyPath> = HashMap::new();
    let mut ok = true;
    for (at, lun, name) in items {
        if let Some(name) = &name {
            if !luns.contains(name) {
                let defined = luns.list();
                sink.key(
                    &at,
                    E::UnknownLun {
                        name: name.clone(),
                        defined,
                    },
                );
                ok = false;
            } else if let Some(prev) = first_name.get(name) {
                let first = prev.to_string();
                sink.key(
                    &at,
                    E::DuplicateExport {
                        name: name.clone(),
                        first,
                    },
                );
                ok = false;
            } else {
                first_name.insert(name.clone(), at.clone());
            }
        }
        if let Some((n, _)) = lun {
            if let Some(prev) = first_number.get(&n) {
                let first = prev.to_string();
                sink.key(&at, E::DuplicateLunNumber { lun: n, first });
                ok = false;
            } else {
                first_number.insert(n, at.clone());
            }
        }
        match (lun, name) {
            (Some((_, lun)), Some(name)) => {
                map.insert(lun, name);
            }
            _ => ok = false,
        }
    }
    ok.then_some(map)
}

/// `allow`: `["any"]`, or port IDs and `guid:` entries.
fn allow(entries: &[String], path: &KeyPath, sink: &mut Sink) -> Option<Acl> {
    if entries.is_empty() {
        sink.key(path, E::EmptyAllow);
        return None;
    }
    if entries.iter().any(|e| e == "any") {
        if entries.len() == 1 {
            return Some(Acl::Any);
        }
        sink.key(path, E::AnyWithOthers);
        return None;
    }
    let mut parsed = Vec::new();
    let mut ok = true;
    for (i, text) in entries.iter().enumerate() {
        match acl::entry(text) {
            Ok(entry) if parsed.contains(&entry) => {
                sink.key(&path.index(i), E::DuplicateInitiator(text.clone()));
                ok = false;
            }
            Ok(entry) => parsed.push(entry),
            Err(kind) => {
                sink.key(&path.index(i), kind);
                ok = false;
            }
        }
    }
    ok.then_some(Acl::Only(parsed))
}
