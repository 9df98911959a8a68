//! The target config file: the example parses to the expected values; every error names
//! file, key path and reason exactly; all errors are reported at once.

use access_layer::mad::ServiceId;
use access_layer::verbs::ProviderKind;
use hca::{Guid, PKey};
use srp::wire::{IoClass, PortId};
use srp_target::config::{
    Acl, AclEntry, Backing, ChannelGuards, ConfigErrorKind, IocConfig, Location, LoginForms,
    LunConfig, PartitionConfig, PortConfig, TargetConfig, TargetSettings,
};
use srp_target::lu::AluaState;
use srp_target::{BlockSize, Oui};
use std::collections::BTreeMap;
use std::path::Path;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/target.toml");

/// A small valid config that the error tests edit.
const BASE: &str = r#"
[target]
node_guid = "0x0002c90300a1b2c0"

[[port]]
name = "p0"
address = "192.0.2.10"

[[port]]
name = "p1"
address = "192.0.2.11"

[[lun]]
name = "vol1"
ram = true
size = "64MiB"

[[lun]]
name = "vol2"
file = "/srv/vol2.img"

[[ioc]]
name = "a"
guid = "0x0002c90300000001"
ports = ["p0"]
exports = { 0 = "vol1", 1 = "vol2" }
allow = ["any"]
"#;

/// `BASE` with `from` replaced by `to` (which must occur).
fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "BASE lacks {from:?}");
    BASE.replacen(from, to, 1)
}

/// The error lines `text` produces (it must fail).
fn errors(text: &str) -> Vec<String> {
    match TargetConfig::from_str(text, "target.toml") {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => {
            let lines: Vec<String> = e.0.iter().map(ToString::to_string).collect();
            assert_eq!(e.to_string(), lines.join("\n"), "one error per line");
            lines
        }
    }
}

/// Asserts that `text` fails with exactly the error `want`.
fn fails(text: &str, want: &str) {
    assert_eq!(errors(text), [want], "for config:\n{text}");
}

fn ram_lun(name: &str, size_bytes: u64) -> LunConfig {
    LunConfig {
        name: name.into(),
        backing: Backing::Ram { size_bytes },
        block_size: BlockSize::B512,
        physical_block_size: None,
        read_only: false,
        allow_claimed: false,
        write_cache: true,
        write_cache_changeable: false,
        record_writes: None,
    }
}

#[test]
fn base_is_valid() {
    let loaded = TargetConfig::from_str(BASE, "target.toml").expect("BASE is valid");
    assert!(loaded.warnings.is_empty());
    let c = loaded.config;
    assert_eq!(c.luns[0], ram_lun("vol1", 64 << 20));
    assert_eq!(
        c.luns[1].backing,
        Backing::File {
            path: "/srv/vol2.img".into(),
            size_bytes: None
        }
    );
    // Defaults: id_ext and service ID are the GUID (as ib_srpt), enabled, active/optimized.
    let ioc = &c.iocs[0];
    assert_eq!(ioc.id_ext, 0x0002_c903_0000_0001);
    assert_eq!(ioc.service_id, ServiceId(0x0002_c903_0000_0001));
    assert!(ioc.enabled);
    assert_eq!(ioc.alua, AluaState::ActiveOptimized);
    assert_eq!(c.target.oui, Oui::new(0x001405).expect("24 bits"));
    assert_eq!(c.target.rdma_cm_port, 5555, "the default RDMA-CM port");
    let socket = c.target.control_socket.to_str().expect("UTF-8");
    assert!(
        socket.starts_with("/run/srp-target/") && socket.ends_with(".sock"),
        "the default control socket: {socket}"
    );
}

#[test]
fn example_parses_to_expected_values() {
    let loaded = TargetConfig::from_path(Path::new(EXAMPLE)).expect("example is valid");
    assert_eq!(loaded.warnings, []);
    let lun = |n: u32| scsi::Lun::from_number(n).expect("LUN number");
    let want = TargetConfig {
        target: TargetSettings {
            node_guid: Guid(0x0002_c903_00a1_b2c0),
            oui: Oui::new(0x001405).expect("24 bits"),
            name: Some("array-1".into()),
            rdma_cm_port: 5555,
            login_forms: LoginForms::default(),
            control_socket: "/run/srp-target/array-1.sock".into(),
            control_group: None,
            state_dir: "/var/lib/srp-target/array-1".into(),
            guards: ChannelGuards::default(),
            port_base: 1,
        },
        partitions: vec![PartitionConfig {
            name: "storage".into(),
            pkey: PKey(0x8001),
        }],
        ports: vec![
            PortConfig {
                name: "p0".into(),
                address: "192.0.2.10:4791".parse().expect("addr"),
                partitions: vec![PKey::DEFAULT],
                provider: ProviderKind::Soft,
                device: None,
                device_port: None,
                gid_index: None,
            },
            PortConfig {
                name: "p1".into(),
                address: "198.51.100.10:4791".parse().expect("addr"),
                partitions: vec![PKey::DEFAULT, PKey(0x8001)],
                provider: ProviderKind::Soft,
                device: None,
                device_port: None,
                gid_index: None,
            },
        ],
        iocs: vec![
            IocConfig {
                name: "ioc-a".into(),
                guid: Guid(0x0002_c903_00a1_b2c3),
                id_ext: 0x0002_c903_00a1_b2c3,
                service_id: ServiceId(0x0002_c903_00a1_b2c3),
                ports: vec!["p0".into(), "p1".into()],
                enabled: true,
                alua: AluaState::ActiveOptimized,
                exports: BTreeMap::from([
                    (lun(0), "vol1".into()),
                    (lun(1), "db-log".into()),
                    (lun(2), "iso".into()),
                ]),
                allow: Acl::Any,
                nexus_from_any_address: false,
                partitions: vec![PKey::DEFAULT],
            },
            IocConfig {
                name: "ioc-b".into(),
                guid: Guid(0x0002_c903_00a1_b2c4),
                id_ext: 1,
                service_id: ServiceId(0x0002_c903_00a1_b2c4),
                ports: vec!["p1".into()],
                enabled: true,
                alua: AluaState::ActiveNonOptimized,
                exports: BTreeMap::from([(lun(0), "vol1".into()), (lun(7), "scratch".into())]),
                allow: Acl::Only(vec![
                    AclEntry::PortId(PortId::new(
                        0,
                        Guid(0x0002_c903_00be_ef01),
                        IoClass::SrpR16a,
                    )),
                    AclEntry::Guid(Guid(0x0002_c903_00be_ef02)),
                ]),
                nexus_from_any_address: false,
                partitions: vec![PKey(0x8001)],
            },
        ],
        luns: vec![
            LunConfig {
                name: "vol1".into(),
                backing: Backing::File {
                    path: "/srv/srp/vol1.img".into(),
                    size_bytes: Some(64 << 30),
                },
                block_size: BlockSize::B512,
                physical_block_size: Some(4096),
                read_only: false,
                allow_claimed: false,
                write_cache: true,
                write_cache_changeable: false,
                record_writes: None,
            },
            LunConfig {
                name: "db-log".into(),
                backing: Backing::Device {
                    path: "/dev/disk/by-id/nvme-example-part1".into(),
                },
                block_size: BlockSize::B4096,
                physical_block_size: None,
                read_only: false,
                allow_claimed: false,
                write_cache: false,
                write_cache_changeable: false,
                record_writes: None,
            },
            ram_lun("scratch", 1 << 30),
            LunConfig {
                name: "iso".into(),
                backing: Backing::File {
                    path: "/srv/srp/install.iso".into(),
                    size_bytes: None,
                },
                block_size: BlockSize::B512,
                physical_block_size: None,
                read_only: true,
                allow_claimed: false,
                write_cache: true,
                write_cache_changeable: false,
                record_writes: None,
            },
        ],
        peers: Vec::new(),
    };
    assert_eq!(loaded.config, want);
    let b = &loaded.config.iocs[1];
    assert_eq!(
        b.target_port_id(),
        PortId::new(1, Guid(0x0002_c903_00a1_b2c4), IoClass::SrpR16a)
    );
    let guid_only = PortId::new(0x99, Guid(0x0002_c903_00be_ef02), IoClass::SrpR16a);
    assert!(b.allow.allows(guid_only));
    assert!(!b.allow.allows(PortId::new(
        0x99,
        Guid(0x0002_c903_00be_ef01),
        IoClass::SrpR16a
    )));
    assert_eq!(loaded.config.lun("iso").map(|l| l.read_only), Some(true));
    assert!(loaded.config.port("p1").is_some());
}

#[test]
fn unreadable_file() {
    let err =
        TargetConfig::from_path(Path::new("/nonexistent/target.toml")).expect_err("no such file");
    assert_eq!(err.0.len(), 1);
    assert_eq!(err.0[0].location, Location::File);
    assert!(matches!(err.0[0].kind, ConfigErrorKind::Read(_)));
    assert!(
        err.to_string()
            .starts_with("/nonexistent/target.toml: cannot read the file: "),
        "{err}"
    );
}

#[test]
fn syntax_error_has_line_and_column() {
    fails(
        &edit("ports = [\"p0\"]", "ports = [\"p0\""),
        "target.toml:26:1: TOML syntax error: missing comma between array elements, expected `,`",
    );
    let dup = edit("name = \"a\"", "name = \"a\"\nname = \"b\"");
    fails(&dup, "target.toml:24:1: TOML syntax error: duplicate key");
}

#[test]
fn unknown_keys_are_rejected_everywhere() {
    fails(
        &format!("{BASE}\nfoo = 1"),
        "target.toml: ioc[0].foo: unknown key; expected one of: name, guid, id_ext, service_id, ports, enabled, alua, exports, allow, nexus_from_any_address, partitions",
    );
    fails(
        &format!("bar = 1\n{BASE}"),
        "target.toml: bar: unknown key; expected one of: target, partition, port, ioc, lun, peer",
    );
    fails(
        &edit("size = \"64MiB\"", "size = \"64MiB\"\nsise = 1"),
        "target.toml: lun \"vol1\".sise: unknown key; expected one of: name, file, device, ram, rbd, ceph_conf, ceph_client, ceph_keyring, size, block_size, physical_block_size, read_only, allow_claimed, write_cache, write_cache_changeable, record_writes",
    );
    fails(
        &edit("[target]", "[target]\nnode = 1"),
        "target.toml: target.node: unknown key; expected one of: node_guid, oui, name, rdma_cm_port, login_forms, control_socket, control_group, state_dir, idle_probe, max_channels, max_channels_per_address, max_half_open, port_base",
    );
    fails(
        &edit(
            "exports = { 0 = \"vol1\", 1 = \"vol2\" }",
            "exports = [{ lun = 0, name = \"vol1\", x = 1 }, { lun = 1, name = \"vol2\" }]",
        ),
        "target.toml: ioc[0].exports[0].x: unknown key; expected one of: lun, name",
    );
}

#[test]
fn wrong_types_name_the_key() {
    fails(
        &edit("ram = true", "ram = \"yes\""),
        "target.toml: lun \"vol1\".ram: invalid type: string \"yes\", expected a boolean",
    );
    fails(
        &edit("size = \"64MiB\"", "size = 1.5"),
        "target.toml: lun \"vol1\".size: an integer or a string",
    );
    fails(
        &edit("ports = [\"p0\"]", "ports = [\"p0\"]\nenabled = \"yes\""),
        "target.toml: ioc[0].enabled: invalid type: string \"yes\", expected a boolean",
    );
    fails(
        &edit("ports = [\"p0\"]", "ports = \"p0\""),
        "target.toml: ioc[0].ports: invalid type: string \"p0\", expected a sequence",
    );
    // The IOC's reference to p0 fails too: there is no port left to define it.
    assert_eq!(
        errors(
            &edit("[[port]]\nname = \"p1\"\naddress = \"192.0.2.11\"\n", "")
                .replacen("[[port]]", "[port]", 1)
        ),
        [
            "target.toml: port: must be an array of tables: write [[port]], not [port]",
            "target.toml: no [[port]] is defined; IOCs would be reachable nowhere",
            "target.toml: ioc[0].ports[0]: port \"p0\" is not defined (defined: none)",
        ]
    );
}

#[test]
fn missing_required_keys_say_what_to_write() {
    fails(
        &edit("allow = [\"any\"]", ""),
        "target.toml: ioc[0].allow: missing; state who may log in: allow = [\"any\"], or initiator port IDs and \"guid:...\" entries",
    );
    fails(
        &edit("node_guid = \"0x0002c90300a1b2c0\"", ""),
        "target.toml: target.node_guid: missing; the HCA node GUID, as node_guid = \"0x0002c90300a1b2c0\"",
    );
    fails(
        &edit("[target]\nnode_guid = \"0x0002c90300a1b2c0\"\n", ""),
        "target.toml: target: missing; add a [target] table with node_guid = \"0x...\"",
    );
    fails(
        &edit("guid = \"0x0002c90300000001\"\n", ""),
        "target.toml: ioc[0].guid: missing; the IOC GUID, as guid = \"0x0002c90300a1b2c3\"",
    );
    fails(
        &edit("ports = [\"p0\"]\n", ""),
        "target.toml: ioc[0].ports: missing; list the ports it is reachable on, as ports = [\"p0\"]",
    );
    fails(
        &edit("size = \"64MiB\"\n", ""),
        "target.toml: lun \"vol1\".size: missing; a RAM LUN needs a size, as size = \"1GiB\"",
    );
    fails(
        &edit("name = \"p1\"\n", ""),
        "target.toml: port[1].name: missing",
    );
    fails(
        &edit("address = \"192.0.2.10\"\n", ""),
        "target.toml: port[0].address: missing; the port's IP address, as address = \"192.0.2.10\"",
    );
    assert_eq!(
        errors(&edit(
            "exports = { 0 = \"vol1\", 1 = \"vol2\" }",
            "exports = [{ name = \"vol1\" }, { lun = 1 }]"
        )),
        [
            "target.toml: ioc[0].exports[0].lun: missing; the LUN number, as lun = 0",
            "target.toml: ioc[0].exports[1].name: missing; the LUN name, as name = \"vol1\"",
        ]
    );
}

#[test]
fn duplicate_names_and_identifiers() {
    fails(
        &edit("name = \"p1\"", "name = \"p0\""),
        "target.toml: port[1].name: port name \"p0\" is already used by port[0]",
    );
    fails(
        &edit("address = \"192.0.2.11\"", "address = \"192.0.2.10:4791\""),
        "target.toml: port[1].address: address 192.0.2.10:4791 is already used by port[0]",
    );
    fails(
        &edit("name = \"vol2\"", "name = \"vol1\"").replace(", 1 = \"vol2\"", ""),
        "target.toml: lun[1].name: LUN name \"vol1\" is already used by lun[0]",
    );
    let second = |extra: &str| {
        format!("{BASE}\n[[ioc]]\nname = \"b\"\nports = [\"p1\"]\nallow = [\"any\"]\n{extra}")
    };
    fails(
        &second("guid = \"0x0002c90300000002\"").replace("name = \"b\"", "name = \"a\""),
        "target.toml: ioc[1].name: ioc name \"a\" is already used by ioc[0]",
    );
    fails(
        &second("guid = \"0002:c903:0000:0001\""),
        "target.toml: ioc[1].guid: IOC GUID 0002:c903:0000:0001 is already used by ioc[0]",
    );
    fails(
        &second("guid = \"0x0002c90300000002\"\nservice_id = \"0x0002c90300000001\""),
        "target.toml: ioc[1].service_id: service ID 0x0002c90300000001 is already used by ioc[0]",
    );
    fails(
        &second("guid = \"0x0002c90300000002\"\nservice_id = \"0x0000000001061144\""),
        "target.toml: ioc[1].service_id: service ID 0x0000000001061144 lies in the RDMA-CM TCP/UDP port space; choose another or leave it unset (default: the IOC GUID)",
    );
    // Two IOCs may export one LUN (multipath): no error.
    let ok = second("guid = \"0x0002c90300000002\"\nexports = { 5 = \"vol1\" }");
    assert!(TargetConfig::from_str(&ok, "t").is_ok());
}

#[test]
fn port_references() {
    fails(
        &edit("ports = [\"p0\"]", "ports = [\"p0\", \"p9\"]"),
        "target.toml: ioc[0].ports[1]: port \"p9\" is not defined (defined: p0, p1)",
    );
    fails(
        &edit("ports = [\"p0\"]", "ports = []"),
        "target.toml: ioc[0].ports: an IOC must be reachable on at least one port",
    );
    fails(
        &edit("ports = [\"p0\"]", "ports = [\"p0\", \"p0\"]"),
        "target.toml: ioc[0].ports[1]: port \"p0\" is listed twice",
    );
}

#[test]
fn exports() {
    let exports = |x: &str| edit("exports = { 0 = \"vol1\", 1 = \"vol2\" }", x);
    fails(
        &exports("exports = { 0 = \"vol1\", 1 = \"vol2\", 3 = \"vol9\" }"),
        "target.toml: ioc[0].exports.3: LUN \"vol9\" is not defined (defined: vol1, vol2)",
    );
    fails(
        &exports("exports = { 0 = \"vol1\", 16384 = \"vol2\" }"),
        "target.toml: ioc[0].exports.16384: LUN 16384 is above 16383, the largest single-level (flat space) LUN",
    );
    fails(
        &exports("exports = { 0 = \"vol1\", x = \"vol2\" }"),
        "target.toml: ioc[0].exports.x: invalid LUN number \"x\": expected an integer 0..=16383",
    );
    fails(
        &exports("exports = { 3 = \"vol1\", 03 = \"vol2\" }"),
        "target.toml: ioc[0].exports.3: LUN number 3 is already exported by this IOC at ioc[0].exports.03",
    );
    fails(
        &exports("exports = [{ lun = 1, name = \"vol1\" }, { lun = 1, name = \"vol2\" }]"),
        "target.toml: ioc[0].exports[1]: LUN number 1 is already exported by this IOC at ioc[0].exports[0]",
    );
    fails(
        &exports("exports = [{ lun = -1, name = \"vol1\" }, { lun = 1, name = \"vol2\" }]"),
        "target.toml: ioc[0].exports[0].lun: invalid LUN number \"-1\": expected an integer 0..=16383",
    );
    fails(
        &exports("exports = { 0 = \"vol1\", 1 = \"vol2\", 2 = \"vol1\" }"),
        "target.toml: ioc[0].exports.2: LUN \"vol1\" is already exported by this IOC at ioc[0].exports.0",
    );
    fails(
        &exports("exports = { 0 = \"vol1\", 1 = 2 }"),
        "target.toml: ioc[0].exports.1: expected a LUN name (a string)",
    );
    fails(
        &exports("exports = \"vol1\""),
        "target.toml: ioc[0].exports: expected a table of LUN number = \"LUN name\", or an array of { lun = N, name = \"...\" }",
    );
    fails(
        &exports("exports = [\"vol1\"]"),
        "target.toml: ioc[0].exports[0]: expected a table of LUN number = \"LUN name\", or an array of { lun = N, name = \"...\" }",
    );
}

#[test]
fn sizes_and_block_sizes() {
    let size = |s: &str| edit("size = \"64MiB\"", s);
    fails(
        &size("size = 0"),
        "target.toml: lun \"vol1\".size: size must be greater than zero",
    );
    fails(
        &size("size = \"9000000TiB\""),
        "target.toml: lun \"vol1\".size: size \"9000000TiB\" is too large (the largest is 9223372036854775807 bytes, the largest file offset)",
    );
    fails(
        &size("size = \"64mb\""),
        "target.toml: lun \"vol1\".size: invalid size \"64mb\": expected bytes or a number with a unit, as \"4096\", \"64MiB\", \"1GiB\" or \"10GB\" (KiB MiB GiB TiB, KB MB GB TB)",
    );
    fails(
        &size("size = 1000"),
        "target.toml: lun \"vol1\".size: size 1000 bytes is not a multiple of the block size 512",
    );
    fails(
        &size("size = \"1MB\"\nblock_size = 4096"),
        "target.toml: lun \"vol1\".size: size 1000000 bytes is not a multiple of the block size 4096",
    );
    fails(
        &size("size = \"1MiB\"\nblock_size = 1024"),
        "target.toml: lun \"vol1\".block_size: block size 1024 is not supported: expected 512 or 4096",
    );
    for (text, bytes) in [
        ("4096", 4096u64),
        ("\"64MiB\"", 64 << 20),
        ("\"1GiB\"", 1 << 30),
        ("\"512KB\"", 512_000),
        ("\"1 GB\"", 1_000_000_000),
    ] {
        let c = TargetConfig::from_str(&size(&format!("size = {text}")), "t").expect(text);
        assert_eq!(
            c.config.luns[0].backing,
            Backing::Ram { size_bytes: bytes },
            "{text}"
        );
    }
}

#[test]
fn backing_stores() {
    let vol2 = |b: &str| edit("file = \"/srv/vol2.img\"", b);
    fails(
        &vol2("file = \"/srv//vol2.img\"\n[[lun]]\nname = \"vol3\"\nfile = \"/srv/vol2.img\"")
            .replace("1 = \"vol2\"", "1 = \"vol2\", 2 = \"vol3\""),
        "target.toml: lun \"vol3\".file: backing \"/srv/vol2.img\" is already used by lun \"vol2\"",
    );
    fails(
        &vol2(""),
        "target.toml: lun \"vol2\": no backing store: set exactly one of file = \"/path\", device = \"/dev/...\", ram = true or rbd = \"pool/image\"",
    );
    fails(
        &vol2("ram = false"),
        "target.toml: lun \"vol2\": no backing store: set exactly one of file = \"/path\", device = \"/dev/...\", ram = true or rbd = \"pool/image\"",
    );
    fails(
        &vol2("file = \"/a\"\ndevice = \"/dev/sdb\""),
        "target.toml: lun \"vol2\": more than one backing store: set exactly one of file, device, ram = true or rbd",
    );
    fails(
        &vol2("device = \"/dev/sdb\"\nsize = \"1GiB\""),
        "target.toml: lun \"vol2\".size: size is not allowed for a block device; its size is the device's",
    );
    fails(
        &vol2("file = \"vol2.img\""),
        "target.toml: lun \"vol2\".file: backing path \"vol2.img\" must be absolute",
    );
    let c = TargetConfig::from_str(&vol2("file = \"/srv/vol2.img\"\nsize = \"1GiB\""), "t")
        .expect("file with size");
    assert_eq!(
        c.config.luns[1].backing,
        Backing::File {
            path: "/srv/vol2.img".into(),
            size_bytes: Some(1 << 30)
        }
    );
}

#[test]
fn identifiers_addresses_and_names() {
    fails(
        &edit("address = \"192.0.2.10\"", "address = \"storage.example\""),
        "target.toml: port[0].address: invalid address \"storage.example\": expected an IP address, optionally with :port (host names are not resolved)",
    );
    fails(
        &edit("address = \"192.0.2.10\"", "address = \"0.0.0.0\""),
        "target.toml: port[0].address: invalid address \"0.0.0.0\": a port needs the unicast address of one interface",
    );
    fails(
        &edit("address = \"192.0.2.10\"", "address = \"192.0.2.10:0\""),
        "target.toml: port[0].address: invalid address \"192.0.2.10:0\": UDP port 0 cannot be listened on by name; omit the port for 4791",
    );
    fails(
        &edit("guid = \"0x0002c90300000001\"", "guid = \"0x2c9\""),
        "target.toml: ioc[0].guid: invalid GUID \"0x2c9\": expected 16 hex digits, as \"0x0002c90300a1b2c3\" or \"0002:c903:00a1:b2c3\"",
    );
    fails(
        &edit(
            "guid = \"0x0002c90300000001\"",
            "guid = \"0x0002c90300000001\"\nid_ext = \"x\"",
        ),
        "target.toml: ioc[0].id_ext: invalid id_ext \"x\": expected 16 hex digits, as \"0x0002c90300a1b2c3\" or \"0002:c903:00a1:b2c3\"",
    );
    fails(
        &edit(
            "node_guid = \"0x0002c90300a1b2c0\"",
            "node_guid = \"0000:0000:0000:0000\"",
        ),
        "target.toml: target.node_guid: GUID 0 is not a valid GUID",
    );
    for bad in ["0", "65536", "-1"] {
        fails(
            &edit("[target]", &format!("[target]\nrdma_cm_port = {bad}")),
            &format!(
                "target.toml: target.rdma_cm_port: RDMA-CM port {bad} is not a TCP port number (1..=65535)"
            ),
        );
    }
    for bad in ["[]", "[\"ib-cm\", \"srp\"]"] {
        fails(
            &edit("[target]", &format!("[target]\nlogin_forms = {bad}")),
            &format!(
                "target.toml: target.login_forms: login forms {:?}: expected a non-empty list of \"ib-cm\" and \"rdma-cm\"",
                toml::from_str::<std::collections::BTreeMap<String, Vec<String>>>(&format!(
                    "x = {bad}"
                ))
                .expect("list")["x"]
            ),
        );
    }
    for bad in ["run/t.sock".to_string(), format!("/{}", "x".repeat(107))] {
        fails(
            &edit("[target]", &format!("[target]\ncontrol_socket = \"{bad}\"")),
            &format!(
                "target.toml: target.control_socket: control socket path {bad:?} must be absolute and at most 107 bytes"
            ),
        );
    }
    fails(
        &edit(
            "[target]",
            "[target]\ncontrol_group = \"no-such-group-here\"",
        ),
        "target.toml: target.control_group: control group \"no-such-group-here\" does not exist on this host (a group name or numeric ID)",
    );
    fails(
        &edit("[target]", "[target]\noui = 0x1000000"),
        "target.toml: target.oui: invalid OUI 16777216: expected a 24-bit IEEE company ID, as 0x001405 or \"00:14:05\"",
    );
    fails(
        &edit("name = \"a\"", "name = \"a b\""),
        "target.toml: ioc[0].name: invalid name \"a b\": use 1 to 64 of A-Z a-z 0-9 . _ - :",
    );
    fails(
        &edit(
            "ports = [\"p0\"]",
            "ports = [\"p0\"]\nalua = \"transitioning\"",
        ),
        "target.toml: ioc[0].alua: invalid ALUA state \"transitioning\": expected \"active/optimized\", \"active/non-optimized\", \"standby\" or \"unavailable\"",
    );
}

#[test]
fn acls() {
    let allow = |a: &str| edit("allow = [\"any\"]", a);
    fails(
        &allow("allow = []"),
        "target.toml: ioc[0].allow: an empty allow list admits nobody; list initiators, or write allow = [\"any\"] (use enabled = false to take the IOC offline)",
    );
    fails(
        &allow("allow = [\"any\", \"guid:0x0002c90300000009\"]"),
        "target.toml: ioc[0].allow: \"any\" admits every initiator; remove the other entries or remove \"any\"",
    );
    fails(
        &allow("allow = [\"0002:c903:0000:0009\"]"),
        "target.toml: ioc[0].allow[0]: invalid initiator \"0002:c903:0000:0009\": 16 hex digits is a GUID; write \"guid:...\" to match a port GUID",
    );
    fails(
        &allow("allow = [\"0x1234\"]"),
        "target.toml: ioc[0].allow[0]: invalid initiator \"0x1234\": expected an initiator port ID of 32 hex digits (\"0x\" and colons allowed), \"guid:\" and a GUID, or \"any\"",
    );
    fails(
        &allow("allow = [\"0xzz\"]"),
        "target.toml: ioc[0].allow[0]: invalid initiator \"0xzz\": not hexadecimal",
    );
    fails(
        &allow("allow = [\"guid:12\"]"),
        "target.toml: ioc[0].allow[0]: invalid initiator \"guid:12\": expected guid: and 16 hex digits, as \"guid:0x0002c90300a1b2c3\"",
    );
    fails(
        &allow("allow = [\"guid:0x0002c90300000009\", \"guid:0002:c903:0000:0009\"]"),
        "target.toml: ioc[0].allow[1]: initiator \"guid:0002:c903:0000:0009\" is listed twice",
    );
    let c = TargetConfig::from_str(
        &allow("allow = [\"0x00000000000000010002c90300000009\"]"),
        "t",
    )
    .expect("port ID ACL");
    let id = PortId::new(1, Guid(0x0002_c903_0000_0009), IoClass::SrpR16a);
    assert_eq!(
        c.config.iocs[0].allow,
        Acl::Only(vec![AclEntry::PortId(id)])
    );
}

#[test]
fn empty_config() {
    assert_eq!(
        errors(""),
        [
            "target.toml: target: missing; add a [target] table with node_guid = \"0x...\"",
            "target.toml: no [[port]] is defined; IOCs would be reachable nowhere",
            "target.toml: no [[ioc]] is defined; the target would export nothing",
            "target.toml: no [[lun]] is defined; the target would have nothing to export",
        ]
    );
}

#[test]
fn unexported_lun_is_a_warning() {
    let text = edit("1 = \"vol2\"", "2 = \"vol1\"")
        .replace("{ 0 = \"vol1\", 2 = \"vol1\" }", "{ 0 = \"vol1\" }");
    let loaded = TargetConfig::from_str(&text, "target.toml").expect("valid");
    let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        ["target.toml: warning: lun \"vol2\": not exported by any IOC; no initiator can reach it"]
    );
}

#[test]
fn all_errors_are_reported_together() {
    let text = BASE
        .replace("address = \"192.0.2.11\"", "address = \"nowhere\"")
        .replace("size = \"64MiB\"", "size = 1000\ncolour = \"red\"")
        .replace("ports = [\"p0\"]", "ports = [\"p0\", \"p7\"]")
        .replace("1 = \"vol2\"", "1 = \"vol2\", 3 = \"vol9\"")
        .replace("allow = [\"any\"]", "");
    assert_eq!(
        errors(&text),
        [
            "target.toml: port[1].address: invalid address \"nowhere\": expected an IP address, optionally with :port (host names are not resolved)",
            "target.toml: lun \"vol1\".colour: unknown key; expected one of: name, file, device, ram, rbd, ceph_conf, ceph_client, ceph_keyring, size, block_size, physical_block_size, read_only, allow_claimed, write_cache, write_cache_changeable, record_writes",
            "target.toml: lun \"vol1\".size: size 1000 bytes is not a multiple of the block size 512",
            "target.toml: ioc[0].ports[1]: port \"p7\" is not defined (defined: p0, p1)",
            "target.toml: ioc[0].exports.3: LUN \"vol9\" is not defined (defined: vol1, vol2)",
            "target.toml: ioc[0].allow: missing; state who may log in: allow = [\"any\"], or initiator port IDs and \"guid:...\" entries",
        ]
    );
}

#[test]
fn operators_guide_shows_the_example_verbatim() {
    let guide = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/target.md");
    let guide = std::fs::read_to_string(guide).expect("docs/target.md");
    let example = std::fs::read_to_string(EXAMPLE).expect("example");
    assert!(
        guide.contains(example.trim_end()),
        "docs/target.md must quote srp-target/examples/target.toml unchanged"
    );
}

#[test]
fn a_control_group_is_resolved_by_name_or_number() {
    for g in ["root", "0"] {
        let text = edit("[target]", &format!("[target]\ncontrol_group = \"{g}\""));
        let c = TargetConfig::from_str(&text, "target.toml")
            .expect("root's group exists")
            .config;
        assert_eq!(c.target.control_group, Some(0), "{g}");
    }
    let c = TargetConfig::from_str(BASE, "target.toml")
        .expect("base")
        .config;
    assert_eq!(
        c.target.control_group, None,
        "root and the daemon's user only"
    );
}

#[test]
fn a_ram_lun_larger_than_the_machine_is_refused_by_check() {
    let text = BASE.replacen(
        "[[ioc]]",
        "[[lun]]\nname = \"huge\"\nram = true\nsize = \"1048576TiB\"\n\n[[ioc]]",
        1,
    );
    let e = errors(&text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("target.toml: lun \"huge\".size: a RAM LUN of 1152921504606846976 bytes is larger than this machine's memory"),
        "{e:?}"
    );
}

#[test]
fn record_writes_needs_an_absolute_path_and_a_file_or_device() {
    let c = TargetConfig::from_str(
        &edit(
            "file = \"/srv/vol2.img\"",
            "file = \"/srv/vol2.img\"\nrecord_writes = \"/srv/vol2.wlog\"",
        ),
        "target.toml",
    )
    .expect("valid");
    assert_eq!(
        c.config.luns[1].record_writes.as_deref(),
        Some(std::path::Path::new("/srv/vol2.wlog"))
    );
    assert_eq!(c.config.luns[0].record_writes, None);
    let relative = errors(&edit(
        "file = \"/srv/vol2.img\"",
        "file = \"/srv/vol2.img\"\nrecord_writes = \"vol2.wlog\"",
    ));
    assert_eq!(relative.len(), 1, "{relative:?}");
    assert!(
        relative[0].starts_with("target.toml: lun \"vol2\".record_writes: ")
            && relative[0].contains("vol2.wlog"),
        "{relative:?}"
    );
    let ram = errors(&edit(
        "ram = true",
        "ram = true\nrecord_writes = \"/srv/vol1.wlog\"",
    ));
    assert_eq!(ram.len(), 1, "{ram:?}");
    assert!(
        ram[0].contains("record_writes needs a file or device backing"),
        "{ram:?}"
    );
}

#[test]
fn channel_guards_parse_and_refuse_nonsense() {
    let with = |lines: &str| {
        BASE.replacen(
            "node_guid = \"0x0002c90300a1b2c0\"",
            &format!("node_guid = \"0x0002c90300a1b2c0\"\n{lines}"),
            1,
        )
    };
    let c = TargetConfig::from_str(
        &with("idle_probe = \"500ms\"\nmax_channels = 8\nmax_channels_per_address = 2\nmax_half_open = 1"),
        "target.toml",
    )
    .expect("valid")
    .config;
    assert_eq!(
        c.target.guards,
        ChannelGuards {
            idle_probe: Some(std::time::Duration::from_millis(500)),
            max_channels: 8,
            max_channels_per_address: 2,
            max_half_open: 1,
        }
    );
    let off = TargetConfig::from_str(&with("idle_probe = \"0s\""), "target.toml")
        .expect("valid")
        .config;
    assert_eq!(off.target.guards.idle_probe, None);
    assert_eq!(
        errors(&with("idle_probe = \"10\"")),
        ["target.toml: target.idle_probe: invalid duration \"10\": the unit must be ms, s, m or h"]
    );
    assert_eq!(
        errors(&with("idle_probe = \"50ms\"")),
        [
            "target.toml: target.idle_probe: \"50ms\" is under 100ms; write \"0s\" to turn probing off"
        ]
    );
    assert_eq!(
        errors(&with("max_half_open = 0")),
        ["target.toml: target.max_half_open: 0 is not a count from 1 to 65536"]
    );
}

#[test]
fn partitions_are_named_resolved_and_checked_against_the_ports() {
    let with = |partitions: &str, port: &str, ioc: &str| {
        let text = BASE
            .replacen(
                "[[port]]\nname = \"p0\"\naddress = \"192.0.2.10\"\n",
                &format!(
                    "{partitions}\n[[port]]\nname = \"p0\"\naddress = \"192.0.2.10\"\n{port}\n"
                ),
                1,
            )
            .replacen(
                "allow = [\"any\"]\n",
                &format!("allow = [\"any\"]\n{ioc}\n"),
                1,
            );
        assert!(text.contains("[[port]]"));
        text
    };
    let storage = "[[partition]]\nname = \"storage\"\npkey = \"0x8001\"\n";
    let ok = TargetConfig::from_str(
        &with(
            storage,
            "partitions = [\"default\", \"storage\"]",
            "partitions = [\"storage\"]",
        ),
        "target.toml",
    )
    .expect("valid")
    .config;
    assert_eq!(ok.ports[0].partitions, [PKey::DEFAULT, PKey(0x8001)]);
    assert_eq!(ok.ports[1].partitions, [PKey::DEFAULT]);
    assert_eq!(ok.iocs[0].partitions, [PKey(0x8001)]);
    assert_eq!(
        errors(&with(storage, "", "partitions = [\"storage\"]")),
        [
            "target.toml: ioc[0].partitions[0]: partition \"storage\" is not on port \"p0\" (add it to the port's partitions)"
        ]
    );
    assert_eq!(
        errors(&with(storage, "partitions = [\"nope\"]", "")),
        [
            "target.toml: port[0].partitions[0]: partition \"nope\" is not defined (defined: default, storage)"
        ]
    );
    let twice = format!("{storage}[[partition]]\nname = \"again\"\npkey = \"0x0001\"\n");
    assert_eq!(errors(&with(&twice, "", "")).len(), 1);
    let reserved = "[[partition]]\nname = \"default\"\npkey = \"0x8005\"\n";
    assert_eq!(errors(&with(reserved, "", "")).len(), 1);
    let bad = "[[partition]]\nname = \"zero\"\npkey = \"0x8000\"\n";
    assert!(
        errors(&with(bad, "", ""))[0].contains("not a P_Key"),
        "{:?}",
        errors(&with(bad, "", ""))
    );
}

#[test]
fn physical_block_size_is_a_power_of_two_multiple() {
    let lun = |extra: &str| {
        format!(
            "[target]\nnode_guid = \"0x0002c90300a1b2c0\"\n[[port]]\nname = \"p0\"\naddress = \"127.0.0.1\"\n\
             [[lun]]\nname = \"v\"\nram = true\nsize = \"1MiB\"\n{extra}\n\
             [[ioc]]\nname = \"a\"\nguid = \"0x0002c90300a1b2c1\"\nports = [\"p0\"]\nexports = {{ 0 = \"v\" }}\nallow = [\"any\"]\n"
        )
    };
    let ok = TargetConfig::from_str(&lun("physical_block_size = 4096"), "t.toml").expect("valid");
    assert_eq!(ok.config.luns[0].physical_block_size, Some(4096));
    fails(
        &lun("physical_block_size = 3072"),
        "target.toml: lun \"v\".physical_block_size: physical_block_size 3072: expected the block size 512 times a power of two up to 32768 (as 4096 for 512-byte blocks)",
    );
    fails(
        &lun("block_size = 4096\nphysical_block_size = 512"),
        "target.toml: lun \"v\".physical_block_size: physical_block_size 512: expected the block size 4096 times a power of two up to 32768 (as 4096 for 512-byte blocks)",
    );
}

#[test]
fn an_rdma_core_port_names_its_device() {
    let text = edit(
        "name = \"p1\"\naddress = \"192.0.2.11\"",
        "name = \"p1\"\naddress = \"192.0.2.11\"\nprovider = \"rdma-core\"\ndevice = \"mlx5_0\"\ndevice_port = 2\ngid_index = 3",
    );
    let c = TargetConfig::from_str(&text, "target.toml").expect("valid");
    let p = &c.config.ports[1];
    assert_eq!(p.provider, ProviderKind::RdmaCore);
    assert_eq!(
        (p.device.as_deref(), p.device_port, p.gid_index),
        (Some("mlx5_0"), Some(2), Some(3))
    );
    let spec = p.device_spec(Guid(1));
    assert_eq!(spec.provider, ProviderKind::RdmaCore);
    assert_eq!(
        (spec.device.as_deref(), spec.port, spec.gid_index),
        (Some("mlx5_0"), Some(2), Some(3))
    );
    // Without a device: the one whose GID table holds the address.
    let text = edit(
        "name = \"p1\"\naddress = \"192.0.2.11\"",
        "name = \"p1\"\naddress = \"192.0.2.11\"\nprovider = \"rdma-core\"",
    );
    let c = TargetConfig::from_str(&text, "target.toml").expect("valid");
    assert_eq!(c.config.ports[1].device, None);
}

#[test]
fn provider_mistakes_name_the_key() {
    let errs = errors(&edit(
        "name = \"p1\"\naddress = \"192.0.2.11\"",
        "name = \"p1\"\naddress = \"192.0.2.11\"\nprovider = \"verbs\"",
    ));
    assert!(errs.iter().any(|e| e.contains("provider")), "{errs:?}");
    let errs = errors(&edit(
        "name = \"p1\"\naddress = \"192.0.2.11\"",
        "name = \"p1\"\naddress = \"192.0.2.11\"\ndevice = \"rxe0\"",
    ));
    assert!(
        errs.iter()
            .any(|e| e.contains("device names an RDMA device: set provider = \"rdma-core\"")),
        "{errs:?}"
    );
    let errs = errors(&edit(
        "name = \"p1\"\naddress = \"192.0.2.11\"",
        "name = \"p1\"\naddress = \"192.0.2.11\"\nprovider = \"rdma-core\"\ndevice_port = 0",
    ));
    assert!(errs.iter().any(|e| e.contains("device_port")), "{errs:?}");
}

#[test]
fn rbd_luns_and_their_errors() {
    let ok = edit(
        "name = \"vol2\"\nfile = \"/srv/vol2.img\"",
        "name = \"vol2\"\nrbd = \"rbd/vol2\"\nceph_client = \"srp\"\nceph_keyring = \"/etc/ceph/k\"",
    );
    let c = TargetConfig::from_str(&ok, "target.toml")
        .expect("valid")
        .config;
    let Backing::Rbd(b) = &c.luns[1].backing else {
        panic!("an RBD backing: {:?}", c.luns[1].backing)
    };
    assert_eq!(
        (
            b.pool.as_str(),
            b.image.as_str(),
            b.conf.as_path(),
            b.client.as_deref()
        ),
        ("rbd", "vol2", Path::new("/etc/ceph/ceph.conf"), Some("srp")),
        "pool, image, the default configuration file, the client"
    );
    let rbd = |v: &str| edit("file = \"/srv/vol2.img\"", v);
    for bad in [
        "rbd = \"noslash\"",
        "rbd = \"/img\"",
        "rbd = \"pool/\"",
        "rbd = \"a/b/c\"",
    ] {
        let e = errors(&rbd(bad));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("lun \"vol2\".rbd: ") && e[0].contains("\"pool/image\""),
            "{e:?}"
        );
    }
    let e = errors(&rbd("rbd = \"rbd/x\"\nsize = \"1GiB\""));
    assert!(
        e[0].contains("size is not allowed for an RBD image"),
        "{e:?}"
    );
    let e = errors(&rbd("rbd = \"rbd/x\"\nceph_client = \"client.srp\""));
    assert!(e[0].contains("without \"client.\""), "{e:?}");
    let e = errors(&rbd("rbd = \"rbd/x\"\nceph_conf = \"ceph.conf\""));
    assert!(e[0].contains("must be absolute"), "{e:?}");
    let e = errors(&edit(
        "file = \"/srv/vol2.img\"",
        "file = \"/srv/vol2.img\"\nceph_client = \"srp\"",
    ));
    assert!(e[0].contains("go with rbd"), "{e:?}");
    let e = errors(&rbd("rbd = \"rbd/x\"\nram = true"));
    assert!(e[0].contains("more than one backing store"), "{e:?}");
    // One image, one LUN.
    let two = edit(
        "[[ioc]]",
        "[[lun]]\nname = \"vol3\"\nrbd = \"rbd/x\"\n\n[[lun]]\nname = \"vol4\"\nrbd = \"rbd/x\"\n\n[[ioc]]",
    );
    let e = errors(&two);
    assert!(e.iter().any(|l| l.contains("rbd rbd/x")), "{e:?}");
}

#[test]
fn peers_and_port_base_are_checked() {
    let with = |target: &str, tail: &str| {
        format!(
            "{}\n{tail}",
            BASE.replacen(
                "node_guid = \"0x0002c90300a1b2c0\"",
                &format!("node_guid = \"0x0002c90300a1b2c0\"\n{target}"),
                1,
            )
        )
    };
    let c = TargetConfig::from_str(
        &with(
            "port_base = 3",
            "[[peer]]\nname = \"array-1\"\nport_groups = [1, 2]\nalua = \"active/non-optimized\"\n",
        ),
        "target.toml",
    )
    .expect("valid")
    .config;
    assert_eq!(c.target.port_base, 3);
    assert_eq!(
        c.peers,
        [srp_target::config::PeerConfig {
            name: "array-1".into(),
            port_groups: vec![1, 2],
            alua: srp_target::lu::AluaState::ActiveNonOptimized,
        }]
    );
    assert_eq!(
        errors(&with("port_base = 0", "")),
        [
            "target.toml: target.port_base: 0 is not a relative target port identifier (1..=65535: 0 is reserved)"
        ]
    );
    // This appliance's groups are 1.. (one per IOC): a peer may not name one of them.
    let overlap = errors(&with("", "[[peer]]\nname = \"b\"\nport_groups = [1]\n"));
    assert_eq!(overlap.len(), 1, "{overlap:?}");
    assert!(
        overlap[0].starts_with(
            "target.toml: peer[0].port_groups: target port group 1 is one of this appliance's own"
        ),
        "{overlap:?}"
    );
    let twice = errors(&with(
        "port_base = 10",
        "[[peer]]\nname = \"b\"\nport_groups = [3]\n\n[[peer]]\nname = \"b\"\nport_groups = [3, 0]\nalua = \"sideways\"\n",
    ));
    assert_eq!(twice.len(), 4, "{twice:#?}");
    assert!(
        twice
            .iter()
            .any(|e| e.contains("peer[1].name: peer name \"b\" is already used by peer[0]")),
        "{twice:#?}"
    );
    assert!(
        twice.iter().any(|e| e.contains(
            "peer[1].port_groups[0]: target port group 3 is already named at peer[0].port_groups[0]"
        )),
        "{twice:#?}"
    );
    assert!(
        twice
            .iter()
            .any(|e| e.contains("peer[1].port_groups[1]: 0 is not a target port group")),
        "{twice:#?}"
    );
    assert!(
        twice.iter().any(|e| e.contains("peer[1].alua")),
        "{twice:#?}"
    );
    assert_eq!(
        errors(&with("", "[[peer]]\nname = \"b\"\n")),
        [
            "target.toml: peer[0].port_groups: missing; its target port groups, as port_groups = [3, 4] (its own port_base and IOCs)"
        ]
    );
    // One IOC at 65535 fits; a second runs past the last identifier.
    assert!(TargetConfig::from_str(&with("port_base = 65535", ""), "target.toml").is_ok());
    let second = "[[ioc]]\nname = \"b\"\nguid = \"0x0002c90300000002\"\nports = [\"p1\"]\n\
                  exports = { 0 = \"vol1\" }\nallow = [\"any\"]\n";
    assert_eq!(
        errors(&with("port_base = 65535", second)),
        [
            "target.toml: target.port_base: port_base 65535 with 2 IOCs runs past 65535, the last relative target port identifier"
        ]
    );
}
