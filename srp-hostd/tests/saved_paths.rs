//! Issue #17: an operator's run-time changes survive a host daemon restart — a disk's
//! policy set with `policy set` and a path taken down with `path fail` come back as they
//! were left (the state file in `state_dir`), the path taken down stays down and the other
//! carries the I/O; a path returned to service is saved as such. Loopback 127.0.152.x;
//! the daemons stop even when an assertion fails.

mod common;

use common::TempDir;
use scsi::Lba;
use srp_host::BlockDevice;
use srp_hostd::control::{DiskInfo, HostAnswer, HostRequest};
use srp_hostd::{HostConfig, HostDaemon};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::path::Path;

fn target() -> Daemon {
    let text = "[target]\nnode_guid = \"0x0002c90300f15200\"\nname = \"saved\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.152.1\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"8MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300f15201\"\nports = [\"p0\"]\n\
         exports = { 0 = \"vol\" }\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300f15202\"\nports = [\"p0\"]\n\
         exports = { 0 = \"vol\" }\nallow = [\"any\"]\n";
    let config = TargetConfig::from_str(text, "saved.toml")
        .expect("config valid")
        .config;
    Daemon::start(config, DaemonOptions::new(providers::system())).expect("target starts")
}

fn host_config(dir: &Path) -> HostConfig {
    let text = format!(
        "[host]\nname = \"saved\"\nnode_guid = \"0x0002c90300f15210\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nstate_dir = \"{}\"\n\
         sweep_interval = \"300ms\"\nlogin_timeout = \"3s\"\n\n\
         [[portal]]\naddress = \"127.0.152.1\"\nlocal = [\"127.0.152.2\", \"127.0.152.3\"]\n",
        dir.join("disks").display(),
        dir.join("host.sock").display(),
        dir.join("state").display()
    );
    HostConfig::from_str(&text, "host.toml").expect("host config valid")
}

fn disk(host: &HostDaemon) -> DiskInfo {
    let d = host.disks();
    assert_eq!(d.len(), 1, "one disk over both IOCs: {d:?}");
    d.into_iter().next().expect("one")
}

/// The disk's path through IOC `ioc`: (session, state).
fn path(d: &DiskInfo, ioc: &str) -> (u32, String) {
    let p = d
        .paths
        .iter()
        .find(|p| p.ioc_name == ioc)
        .unwrap_or_else(|| panic!("no path through {ioc}: {d:?}"));
    (p.session, p.state.clone())
}

#[test]
fn a_policy_and_a_failed_path_survive_a_restart() {
    let dir = TempDir::new("saved");
    let _target = target();
    let config = host_config(dir.path());
    let host = HostDaemon::start_in_process(config.clone(), providers::system());
    let d = disk(&host);
    assert_eq!(d.paths.len(), 2, "{d:?}");
    assert_ne!(d.policy, "least-queue-depth");
    let c = host.control();
    assert!(matches!(
        c.call(HostRequest::SetPolicy {
            disk: d.name.clone(),
            policy: "least-queue-depth".into()
        }),
        Ok(HostAnswer::Done { .. })
    ));
    let (b, _) = path(&d, "ioc-b");
    assert!(matches!(
        c.call(HostRequest::SetPath {
            session: b,
            enabled: false
        }),
        Ok(HostAnswer::Done { .. })
    ));
    assert_eq!(path(&disk(&host), "ioc-b").1, "admin-down");
    host.shutdown();

    // The restart: new sessions, the same policy and the same path down.
    let host = HostDaemon::start_in_process(config.clone(), providers::system());
    let d = disk(&host);
    assert_eq!(d.policy, "least-queue-depth", "the saved policy");
    assert_eq!(path(&d, "ioc-b").1, "admin-down", "{d:?}");
    assert_ne!(path(&d, "ioc-a").1, "admin-down", "{d:?}");
    // I/O goes on the path left in service.
    let dev = host.disk(&d.name).expect("the disk in process");
    let data = vec![0x5a; 4096];
    dev.write(Lba(0), &data, false).expect("write");
    let mut back = vec![0; 4096];
    dev.read(Lba(0), &mut back).expect("read");
    assert_eq!(back, data);
    let d = disk(&host);
    let b = d.paths.iter().find(|p| p.ioc_name == "ioc-b").expect("b");
    assert_eq!((b.reads, b.writes), (0, 0), "nothing on the path left down");
    // Returned to service: saved as such.
    let (b, _) = path(&d, "ioc-b");
    assert!(matches!(
        host.control().call(HostRequest::SetPath {
            session: b,
            enabled: true
        }),
        Ok(HostAnswer::Done { .. })
    ));
    host.shutdown();
    let host = HostDaemon::start_in_process(config, providers::system());
    assert_ne!(
        path(&disk(&host), "ioc-b").1,
        "admin-down",
        "restored, and saved so"
    );
    host.shutdown();
}
