//! `srpctl discover` as an operator runs it, against the real `srpctl target run` on
//! loopback 127.0.112.x: the two IOCs reachable on the portal with their GUIDs, service IDs
//! and id_ext (JSON), the ib_srp add_target strings, and a clear error for a portal where
//! nothing answers.

#[path = "../../srp-target/tests/common/mod.rs"]
mod common;
mod process;
mod run;

use common::TempDir;
use process::TargetProcess;
use run::srpctl;
use serde_json::Value;

#[test]
fn discover_lists_the_portals_iocs_like_ibsrpdm() {
    let dir = TempDir::new("discover-cli");
    let cfg = dir.path().join("target.toml");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f0f000\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.112.1\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300f0f001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300f0f002\"\nid_ext = \"0x0000000000000007\"\n\
         service_id = \"0x0002c90300f0f0b0\"\nports = [\"p0\"]\n\
         exports = {{ 1 = \"vol\" }}\nallow = [\"any\"]\n",
        dir.path().join("ctl.sock").display()
    );
    std::fs::write(&cfg, text).expect("write config");
    let _target = TargetProcess::start(&cfg);

    let (ok, out, err) = srpctl(&[
        "discover",
        "127.0.112.1",
        "--local",
        "127.0.112.2",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let iocs = v.as_array().expect("array");
    assert_eq!(iocs.len(), 2, "{out}");
    assert_eq!(iocs[0]["ioc_guid"], "0002c90300f0f001");
    assert_eq!(iocs[0]["io_class"], "0x0100");
    assert_eq!(iocs[0]["services"][0]["id_ext"], "0002c90300f0f001");
    assert_eq!(iocs[0]["services"][0]["service_id"], "0x0002c90300f0f001");
    assert_eq!(iocs[1]["ioc_guid"], "0002c90300f0f002");
    assert_eq!(iocs[1]["services"][0]["id_ext"], "0000000000000007");
    assert_eq!(iocs[1]["services"][0]["service_id"], "0x0002c90300f0f0b0");
    assert_eq!(iocs[1]["services"][0]["name"], "SRP.T10:0000000000000007");

    let (ok, out, err) = srpctl(&[
        "discover",
        "127.0.112.1",
        "--local",
        "127.0.112.3",
        "--login-strings",
        "--ib-cm",
    ]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "id_ext=0002c90300f0f001,ioc_guid=0002c90300f0f001,dgid=00000000000000000000ffff7f007001,pkey=ffff,service_id=0002c90300f0f001",
            "id_ext=0000000000000007,ioc_guid=0002c90300f0f002,dgid=00000000000000000000ffff7f007001,pkey=ffff,service_id=0002c90300f0f0b0",
        ]
    );
    // The RDMA-CM form, what Linux ib_srp over RoCE takes (the default).
    let (ok, out, err) = srpctl(&[
        "discover",
        "127.0.112.1",
        "--local",
        "127.0.112.3",
        "--login-strings",
        "--rdma-cm-port",
        "5560",
    ]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "id_ext=0002c90300f0f001,ioc_guid=0002c90300f0f001,dest=127.0.112.1:5560",
            "id_ext=0000000000000007,ioc_guid=0002c90300f0f002,dest=127.0.112.1:5560",
        ]
    );

    // Nothing serves at .9: a clear error, non-zero exit, bounded in time.
    let (ok, _, err) = srpctl(&[
        "discover",
        "127.0.112.9",
        "--local",
        "127.0.112.4",
        "--timeout",
        "3",
    ]);
    assert!(!ok);
    assert!(err.contains("127.0.112.9: no"), "{err}");
}

#[test]
fn discover_on_a_partition_lists_the_iocs_exported_there() {
    let dir = TempDir::new("discover-partition");
    let cfg = dir.path().join("target.toml");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f0f100\"\ncontrol_socket = \"{}\"\n\n\
         [[partition]]\nname = \"storage\"\npkey = \"0x8001\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.112.11\"\npartitions = [\"default\", \"storage\"]\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"1MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300f0f101\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300f0f102\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\npartitions = [\"storage\"]\n",
        dir.path().join("ctl.sock").display()
    );
    std::fs::write(&cfg, text).expect("write config");
    let _target = TargetProcess::start(&cfg);
    let guids = |args: &[&str]| {
        let mut a = vec![
            "discover",
            "127.0.112.11",
            "--local",
            "127.0.112.12",
            "--json",
        ];
        a.extend_from_slice(args);
        let (ok, out, err) = srpctl(&a);
        assert!(ok, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        v.as_array()
            .expect("array")
            .iter()
            .map(|i| i["ioc_guid"].as_str().expect("guid").to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(guids(&[]), ["0002c90300f0f101"], "the default partition");
    assert_eq!(
        guids(&["--partition", "0x8001"]),
        ["0002c90300f0f102"],
        "storage"
    );
    let (ok, out, err) = srpctl(&[
        "discover",
        "127.0.112.11",
        "--local",
        "127.0.112.13",
        "--partition",
        "8001",
        "--login-strings",
        "--ib-cm",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains(",pkey=8001,"), "{out}");
    let (ok, _, err) = srpctl(&["discover", "127.0.112.11", "--partition", "0x8000"]);
    assert!(!ok && err.contains("not a P_Key"), "{err}");
}
