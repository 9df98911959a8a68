//! The reload plan: every kind of live change found, every unsupported one refused with
//! its key and reason, and nothing else reported.

use super::*;

const BASE: &str = r#"
[target]
node_guid = "0x0002c90300a1b2c0"
name = "t"
state_dir = "/tmp/srp-plan-tests"
control_socket = "/tmp/srp-plan-tests.sock"

[[port]]
name = "p0"
address = "127.0.0.1"

[[lun]]
name = "vol1"
file = "/tmp/srp-plan-vol1.img"
size = "1MiB"

[[lun]]
name = "vol2"
ram = true
size = "1MiB"

[[ioc]]
name = "ioc-a"
guid = "0x0002c90300a1b2c3"
ports = ["p0"]
exports = { 0 = "vol1" }
allow = ["any"]

[[ioc]]
name = "ioc-b"
guid = "0x0002c90300a1b2c4"
ports = ["p0"]
exports = { 0 = "vol1", 1 = "vol2" }
allow = ["any"]
"#;

fn config(text: &str) -> TargetConfig {
    TargetConfig::from_str(text, "t.toml")
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .config
}

fn with(from: &str, to: &str) -> TargetConfig {
    assert!(BASE.contains(from), "{from:?} not in the base");
    config(&BASE.replacen(from, to, 1))
}

fn refused(new: &TargetConfig) -> Vec<String> {
    plan(&config(BASE), new)
        .expect_err("refused")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_same_file_is_an_empty_plan() {
    let p = plan(&config(BASE), &config(BASE)).expect("plan");
    assert!(p.is_empty());
    assert!(p.describe(&config(BASE)).is_empty());
}

#[test]
fn a_lun_added_and_exported() {
    let new = with(
        "[[ioc]]\nname = \"ioc-a\"",
        "[[lun]]\nname = \"vol3\"\nram = true\nsize = \"2MiB\"\n\n[[ioc]]\nname = \"ioc-a\"",
    );
    let new = TargetConfig {
        iocs: new
            .iocs
            .iter()
            .cloned()
            .map(|mut i| {
                if i.name == "ioc-a" {
                    i.exports
                        .insert(scsi::Lun::from_number(1).expect("lun"), "vol3".into());
                }
                i
            })
            .collect(),
        ..new
    };
    let p = plan(&config(BASE), &new).expect("plan");
    assert_eq!(p.luns_added, ["vol3"]);
    assert_eq!(
        p.iocs_changed,
        [IocChange {
            name: "ioc-a".into(),
            exports: true,
            ..IocChange::default()
        }]
    );
    assert_eq!(
        p.describe(&new),
        [
            "lun vol3 added: ram (2097152 bytes)",
            "ioc ioc-a: exports LUN 0 = vol1, LUN 1 = vol3"
        ]
    );
}

#[test]
fn a_lun_removed_with_its_exports() {
    let new = with(
        "exports = { 0 = \"vol1\", 1 = \"vol2\" }",
        "exports = { 0 = \"vol1\" }",
    );
    let new = TargetConfig {
        luns: new.luns.into_iter().filter(|l| l.name != "vol2").collect(),
        ..new
    };
    let p = plan(&config(BASE), &new).expect("plan");
    assert_eq!(p.luns_removed, ["vol2"]);
    assert_eq!(p.iocs_changed.len(), 1);
    assert!(p.iocs_changed[0].exports && p.iocs_changed[0].name == "ioc-b");
}

#[test]
fn a_file_lun_grows_but_never_shrinks() {
    let p = plan(&config(BASE), &with("size = \"1MiB\"", "size = \"3MiB\"")).expect("plan");
    assert_eq!(p.luns_grown, [("vol1".to_owned(), 1 << 20, 3 << 20)]);
    assert_eq!(
        p.describe(&config(BASE)),
        ["lun vol1 grown from 1048576 to 3145728 bytes"]
    );
    let r = refused(&with("size = \"1MiB\"", "size = \"512KiB\""));
    assert_eq!(r.len(), 1);
    assert!(
        r[0].starts_with("lun vol1.size: shrinking from 1048576 to 524288 bytes"),
        "{r:?}"
    );
}

#[test]
fn acl_enabled_alua_and_nexus_rules_change_live() {
    let new = with(
        "exports = { 0 = \"vol1\" }\nallow = [\"any\"]",
        "exports = { 0 = \"vol1\" }\nallow = [\"guid:0x0002c90300000001\"]\nenabled = false\n\
         alua = \"standby\"\nnexus_from_any_address = true",
    );
    let p = plan(&config(BASE), &new).expect("plan");
    assert_eq!(
        p.iocs_changed,
        [IocChange {
            name: "ioc-a".into(),
            exports: false,
            allow: true,
            enabled: Some(false),
            alua: Some(AluaState::Standby),
            nexus_from_any_address: true,
        }]
    );
    assert_eq!(p.describe(&new).len(), 4);
}

#[test]
fn iocs_added_at_the_end_and_removed_from_it() {
    let added = config(&format!(
        "{BASE}\n[[ioc]]\nname = \"ioc-c\"\nguid = \"0x0002c90300a1b2c5\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol2\" }}\nallow = [\"any\"]\n"
    ));
    let p = plan(&config(BASE), &added).expect("plan");
    assert_eq!(p.iocs_added, ["ioc-c"]);
    assert_eq!(
        p.describe(&added),
        ["ioc ioc-c added (relative target port 3)"]
    );
    let p = plan(&added, &config(BASE)).expect("plan");
    assert_eq!(p.iocs_removed, ["ioc-c"]);
}

#[test]
fn an_ioc_removed_from_the_middle_is_refused_by_its_successor() {
    let base = config(BASE);
    let mut new = base.clone();
    new.iocs.remove(0);
    let r = plan(&base, &new).expect_err("refused");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].what, "ioc ioc-b");
    assert!(
        r[0].why
            .starts_with("would move from relative target port 2 to 1"),
        "{r:?}"
    );
}

#[test]
fn identity_ports_and_target_settings_are_refused_each_by_name() {
    let r = refused(&config(
        &BASE
            .replace("name = \"t\"", "name = \"u\"")
            .replace("0x0002c90300a1b2c3", "0x0002c90300a1b2c9")
            .replace("address = \"127.0.0.1\"", "address = \"127.0.0.2\""),
    ));
    let whats: Vec<&str> = r
        .iter()
        .map(|l| l.split(':').next().unwrap_or(""))
        .collect();
    // The id_ext and service ID default to the GUID: they change with it.
    assert_eq!(
        whats,
        [
            "target.name",
            "port p0",
            "ioc ioc-a.guid",
            "ioc ioc-a.id_ext",
            "ioc ioc-a.service_id"
        ],
        "{r:#?}"
    );
}

#[test]
fn lun_settings_that_are_fixed_while_open_are_refused() {
    let r = refused(&with(
        "size = \"1MiB\"\n\n[[lun]]\nname = \"vol2\"",
        "size = \"1MiB\"\nblock_size = 4096\nread_only = true\n\n[[lun]]\nname = \"vol2\"",
    ));
    let whats: Vec<&str> = r
        .iter()
        .map(|l| l.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(
        whats,
        ["lun vol1.block_size", "lun vol1.read_only"],
        "{r:#?}"
    );
    let r = refused(&with(
        "ram = true\nsize = \"1MiB\"",
        "ram = true\nsize = \"2MiB\"",
    ));
    assert_eq!(r.len(), 1);
    assert!(r[0].starts_with("lun vol2.size: a RAM LUN"), "{r:?}");
    let r = refused(&with(
        "file = \"/tmp/srp-plan-vol1.img\"",
        "file = \"/tmp/srp-plan-other.img\"",
    ));
    assert_eq!(r.len(), 1);
    assert!(r[0].starts_with("lun vol1.backing:"), "{r:?}");
}

#[test]
fn the_guards_change_live() {
    let new = with(
        "name = \"t\"",
        "name = \"t\"\nidle_probe = \"30s\"\nmax_channels = 8",
    );
    let p = plan(&config(BASE), &new).expect("plan");
    assert_eq!(p.guards, Some(new.target.guards));
    assert_eq!(p.guards.map(|g| g.max_channels), Some(8));
}

#[test]
fn peers_change_live_and_port_base_takes_a_restart() {
    let peered = config(&format!(
        "{BASE}\n[[peer]]\nname = \"array-2\"\nport_groups = [3, 4]\nalua = \"standby\"\n"
    ));
    let p = plan(&config(BASE), &peered).expect("plan");
    assert!(p.peers, "{p:?}");
    assert_eq!(
        p.describe(&peered),
        ["peer appliances' port groups: array-2 [3, 4] Standby"]
    );
    assert!(plan(&peered, &config(BASE)).expect("plan").peers);
    let moved = config(&BASE.replace("name = \"t\"\n", "name = \"t\"\nport_base = 5\n"));
    let refusals = plan(&config(BASE), &moved).expect_err("refused");
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].what, "target.port_base");
    assert!(refusals[0].why.contains("1 to 5"), "{}", refusals[0]);
}
