//! A validated configuration written back as a file of the same schema: what
//! `srpctl target config` prints for a running daemon (as targetcli's `saveconfig`), every
//! default spelled out. Reading the text back yields the same [`TargetConfig`] (tested).

use super::{Acl, AclEntry, Backing, PartitionConfig, TargetConfig};
use crate::lu::AluaState;
use toml::{Table, Value};

/// `config` as TOML text of the target.toml schema.
pub fn to_toml(config: &TargetConfig) -> String {
    let mut root = Table::new();
    root.insert("target".into(), Value::Table(target(config)));
    if !config.partitions.is_empty() {
        root.insert(
            "partition".into(),
            array(config.partitions.iter().map(|p| {
                table([
                    ("name", text(&p.name)),
                    ("pkey", text(format!("{:#06x}", p.pkey.0))),
                ])
            })),
        );
    }
    root.insert(
        "port".into(),
        array(config.ports.iter().map(|p| {
            let mut t = table([
                ("name", text(&p.name)),
                ("address", text(p.address.to_string())),
            ]);
            if p.partitions != [ib_verbs::PKey::DEFAULT] {
                t.insert(
                    "partitions".into(),
                    names(&config.partitions, &p.partitions),
                );
            }
            t
        })),
    );
    if !config.luns.is_empty() {
        root.insert("lun".into(), array(config.luns.iter().map(lun)));
    }
    if !config.iocs.is_empty() {
        root.insert(
            "ioc".into(),
            array(config.iocs.iter().map(|i| ioc(config, i))),
        );
    }
    if !config.peers.is_empty() {
        root.insert(
            "peer".into(),
            array(config.peers.iter().map(|p| {
                table([
                    ("name", text(&p.name)),
                    (
                        "port_groups",
                        Value::Array(p.port_groups.iter().map(|&g| int(g)).collect()),
                    ),
                    ("alua", text(alua(p.alua))),
                ])
            })),
        );
    }
    let body = toml::to_string(&root).unwrap_or_else(|e| format!("# cannot be written: {e}\n"));
    format!(
        "# The running configuration, every default spelled out (srpctl target config).\n{body}"
    )
}

fn text(s: impl Into<String>) -> Value {
    Value::String(s.into())
}

fn int(n: impl TryInto<i64>) -> Value {
    Value::Integer(n.try_into().unwrap_or(i64::MAX))
}

fn table<const N: usize>(pairs: [(&str, Value); N]) -> Table {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn array(tables: impl Iterator<Item = Table>) -> Value {
    Value::Array(tables.map(Value::Table).collect())
}

/// The partition names of `keys` (the implicit default one is "default").
fn names(declared: &[PartitionConfig], keys: &[ib_verbs::PKey]) -> Value {
    Value::Array(
        keys.iter()
            .map(|k| match declared.iter().find(|p| p.pkey == *k) {
                Some(p) => text(&p.name),
                None => text(super::DEFAULT_PARTITION),
            })
            .collect(),
    )
}

fn target(c: &TargetConfig) -> Table {
    let t = &c.target;
    let mut out = table([
        ("node_guid", text(format!("{:#018x}", t.node_guid.0))),
        ("oui", int(t.oui.get())),
        ("rdma_cm_port", int(t.rdma_cm_port)),
        ("control_socket", text(t.control_socket.to_string_lossy())),
        ("state_dir", text(t.state_dir.to_string_lossy())),
        (
            "idle_probe",
            text(match t.guards.idle_probe {
                Some(d) => format!("{}ms", d.as_millis()),
                None => "0s".into(),
            }),
        ),
        ("max_channels", int(t.guards.max_channels)),
        (
            "max_channels_per_address",
            int(t.guards.max_channels_per_address),
        ),
        ("max_half_open", int(t.guards.max_half_open)),
        ("port_base", int(t.port_base)),
    ]);
    if let Some(name) = &t.name {
        out.insert("name".into(), text(name));
    }
    let mut forms = Vec::new();
    if t.login_forms.ib_cm {
        forms.push(text("ib-cm"));
    }
    if t.login_forms.rdma_cm {
        forms.push(text("rdma-cm"));
    }
    out.insert("login_forms".into(), Value::Array(forms));
    if let Some(g) = t.control_group {
        out.insert("control_group".into(), text(g.to_string()));
    }
    out
}

fn lun(l: &super::LunConfig) -> Table {
    let mut t = table([
        ("name", text(&l.name)),
        ("block_size", int(l.block_size.bytes())),
        ("read_only", Value::Boolean(l.read_only)),
        ("write_cache", Value::Boolean(l.write_cache)),
        (
            "write_cache_changeable",
            Value::Boolean(l.write_cache_changeable),
        ),
    ]);
    match &l.backing {
        Backing::File { path, size_bytes } => {
            t.insert("file".into(), text(path.to_string_lossy()));
            if let Some(n) = size_bytes {
                t.insert("size".into(), int(*n));
            }
        }
        Backing::Device { path } => {
            t.insert("device".into(), text(path.to_string_lossy()));
        }
        Backing::Ram { size_bytes } => {
            t.insert("ram".into(), Value::Boolean(true));
            t.insert("size".into(), int(*size_bytes));
        }
        Backing::Rbd(b) => {
            t.insert("rbd".into(), text(b.name()));
            t.insert("ceph_conf".into(), text(b.conf.to_string_lossy()));
            if let Some(c) = &b.client {
                t.insert("ceph_client".into(), text(c.as_str()));
            }
            if let Some(k) = &b.keyring {
                t.insert("ceph_keyring".into(), text(k.to_string_lossy()));
            }
        }
    }
    if let Some(p) = l.physical_block_size {
        t.insert("physical_block_size".into(), int(p));
    }
    if let Some(w) = &l.record_writes {
        t.insert("record_writes".into(), text(w.to_string_lossy()));
    }
    if l.allow_claimed {
        t.insert("allow_claimed".into(), Value::Boolean(true));
    }
    t
}

fn alua(state: AluaState) -> &'static str {
    match state {
        AluaState::ActiveOptimized => "active/optimized",
        AluaState::ActiveNonOptimized => "active/non-optimized",
        AluaState::Standby => "standby",
        // Transitioning is never configured (validation refuses it).
        AluaState::Unavailable | AluaState::Transitioning => "unavailable",
    }
}

fn acl_entry(e: &AclEntry) -> String {
    match e {
        AclEntry::PortId(p) => p.to_string(),
        AclEntry::Guid(g) => format!("guid:{:#018x}", g.0),
        AclEntry::Address(a) => format!("addr:{a}"),
        AclEntry::PortIdFrom(p, a) => format!("{p}@{a}"),
        AclEntry::GuidFrom(g, a) => format!("guid:{:#018x}@{a}", g.0),
    }
}

fn ioc(c: &TargetConfig, i: &super::IocConfig) -> Table {
    let exports: Table = i
        .exports
        .iter()
        .filter_map(|(lun, name)| Some((lun.number().ok()?.to_string(), text(name))))
        .collect();
    let allow = match &i.allow {
        Acl::Any => vec![text("any")],
        Acl::Only(entries) => entries.iter().map(|e| text(acl_entry(e))).collect(),
    };
    let mut t = table([
        ("name", text(&i.name)),
        ("guid", text(format!("{:#018x}", i.guid.0))),
        ("id_ext", text(format!("{:#018x}", i.id_ext))),
        ("service_id", text(format!("{:#018x}", i.service_id.0))),
        ("ports", Value::Array(i.ports.iter().map(text).collect())),
        ("enabled", Value::Boolean(i.enabled)),
        ("alua", text(alua(i.alua))),
        ("exports", Value::Table(exports)),
        ("allow", Value::Array(allow)),
        (
            "nexus_from_any_address",
            Value::Boolean(i.nexus_from_any_address),
        ),
    ]);
    if i.partitions != [ib_verbs::PKey::DEFAULT] {
        t.insert("partitions".into(), names(&c.partitions, &i.partitions));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) {
        let c = TargetConfig::from_str(text, "t.toml")
            .unwrap_or_else(|e| panic!("{e}"))
            .config;
        let emitted = to_toml(&c);
        let back = TargetConfig::from_str(&emitted, "emitted")
            .unwrap_or_else(|e| panic!("{e}\n{emitted}"))
            .config;
        assert_eq!(back, c, "{emitted}");
    }

    #[test]
    fn the_annotated_example_reads_back_the_same() {
        round_trip(include_str!("../../examples/target.toml"));
    }

    #[test]
    fn every_kind_of_value_reads_back_the_same() {
        round_trip(
            r#"
[target]
node_guid = "0x0002c90300a1b2c0"
oui = "00:14:05"
rdma_cm_port = 6000
login_forms = ["rdma-cm"]
state_dir = "/tmp/srp-emit"
control_socket = "/tmp/srp-emit.sock"
idle_probe = "0s"
max_channels = 9
port_base = 5

[[partition]]
name = "storage"
pkey = "0x8001"

[[port]]
name = "p0"
address = "127.0.0.1:4792"
partitions = ["default", "storage"]

[[lun]]
name = "vol1"
file = "/tmp/srp-emit-vol1.img"
size = "1MiB"
block_size = 4096
write_cache = false

[[lun]]
name = "vol.two:b_c-d"
file = "/tmp/srp-emit-vol2.img"
size = "64KiB"
physical_block_size = 4096
record_writes = "/tmp/srp-emit.log"

[[lun]]
name = "mem"
ram = true
size = "64KiB"

[[lun]]
name = "dev"
device = "/dev/null-not-opened"
read_only = true

[[lun]]
name = "ceph"
rbd = "rbd/vol.3"
ceph_conf = "/etc/ceph/other.conf"
ceph_client = "srp"
ceph_keyring = "/etc/ceph/ceph.client.srp.keyring"

[[lun]]
name = "ceph-default"
rbd = "pool2/img"

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300a1b2c3"
id_ext = "0x0000000000000001"
service_id = "0002:c903:00a1:ffff"
ports = ["p0"]
enabled = false
alua = "standby"
exports = { 0 = "vol1", 7 = "vol.two:b_c-d", 300 = "dev", 1 = "mem" }
allow = ["0x11223344556677880002c90300010a2b", "guid:0x0002c90300010a2b", "addr:192.0.2.20",
         "guid:0x0002c90300010a2c@192.0.2.21", "0x11223344556677880002c90300010a2c@::1"]
nexus_from_any_address = true
partitions = ["storage"]

[[peer]]
name = "array-2"
port_groups = [1, 3]
alua = "active/non-optimized"

[[peer]]
name = "array-3"
port_groups = [9]
"#,
        );
    }
}
