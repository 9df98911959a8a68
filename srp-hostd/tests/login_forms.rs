//! The host's login forms against a target that serves only RDMA-CM logins, as Linux
//! ib_srpt on a RoCE port does (it answers an IB CM REQ with REJ "invalid service ID";
//! linux-interop.md): `login = "auto"` is refused in the IB CM form, logs in over RDMA-CM
//! and keeps that form; `login = "ib-cm"` fails with the CM's reason named; the target
//! reports the refused REQ. Loopback 127.0.160.x; the daemons stop even when an assertion
//! fails.

mod common;

use common::TempDir;

use srp_hostd::{HostConfig, HostDaemon};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonEvent, DaemonOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn rdma_cm_only_target() -> Daemon {
    let text = "[target]\nnode_guid = \"0x0002c90300f16000\"\nname = \"forms\"\n\
                rdma_cm_port = 5590\nlogin_forms = [\"rdma-cm\"]\n\n\
                [[port]]\nname = \"p0\"\naddress = \"127.0.160.1\"\n\n\
                [[lun]]\nname = \"vol\"\nram = true\nsize = \"8MiB\"\n\n\
                [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300f16001\"\nports = [\"p0\"]\n\
                exports = { 0 = \"vol\" }\nallow = [\"any\"]\n";
    let config = TargetConfig::from_str(text, "forms.toml")
        .expect("config valid")
        .config;
    Daemon::start(config, DaemonOptions::new(providers::system())).expect("target starts")
}

fn host_config(dir: &Path, login: &str, local: &str) -> HostConfig {
    let text = format!(
        "[host]\nname = \"forms-{login}\"\nnode_guid = \"0x0002c90300f16100\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nsweep_interval = \"300ms\"\n\
         login_timeout = \"3s\"\nlogin = \"{login}\"\nrdma_cm_port = 5590\n\n\
         [[portal]]\naddress = \"127.0.160.1\"\nlocal = [\"{local}\"]\n",
        dir.join("disks").display(),
        dir.join("host.sock").display()
    );
    HostConfig::from_str(&text, "host.toml").expect("host config valid")
}

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn auto_falls_back_to_rdma_cm_and_ib_cm_alone_names_the_refusal() {
    let target = rdma_cm_only_target();
    let dir = TempDir::new("forms");

    // "auto": the IB CM REQ is refused, the RDMA-CM one logs in.
    // In process: no block files or socket needed.
    let host = HostDaemon::start_in_process(
        host_config(dir.path(), "auto", "127.0.160.2"),
        providers::system(),
    );
    wait_for("an RDMA-CM session", Duration::from_secs(20), || {
        host.sessions()
            .iter()
            .any(|s| s.state == "running" && s.login == "rdma-cm")
    });
    let s = &host.sessions()[0];
    assert_eq!(s.login, "rdma-cm");
    assert!(s.hca["rx_packets"] > 0, "{:?}", s.hca);
    assert_eq!(s.hca["dropped"], 0, "{:?}", s.hca);
    host.shutdown();

    // "ib-cm" alone: never logs in; the reason reaches the target's events too.
    let host = HostDaemon::start_in_process(
        host_config(dir.path(), "ib-cm", "127.0.160.3"),
        providers::system(),
    );
    let mut refused = Vec::new();
    wait_for(
        "the target to report the refused REQ",
        Duration::from_secs(20),
        || {
            while let Ok(ev) = target.events().try_recv() {
                if let DaemonEvent::CmRefused { .. } = ev {
                    refused.push(ev.to_string());
                }
            }
            refused.iter().any(|e| e.contains("127.0.160.3"))
        },
    );
    assert!(host.sessions().is_empty(), "{:?}", host.sessions());
    assert!(
        refused[0].contains("CM REJ reason 8") && refused[0].contains("0x0002c90300f16001"),
        "{refused:?}"
    );
    host.shutdown();
    drop(target.shutdown());
}
