//! The iSCSI-model management surface's persistent logins against a real target: the host
//! sweeps its portal but is limited to IOC A; an operator logs in to IOC B persistently
//! under the iSCSI driver model; after a host daemon restart the persistent login is
//! established again (same IOC, same driver model) beside the configured one, and once
//! forgotten it is not. Loopback 127.0.137.x; the daemons stop even when an assertion
//! fails.

mod common;

use common::TempDir;

use srp_hostd::control::{HostAnswer, HostControlError, HostRequest, LoginSpec};
use srp_hostd::{HostConfig, HostDaemon};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::path::Path;

const IOC_A: &str = "0x0002c90300f13701";
const IOC_B: &str = "0x0002c90300f13702";

fn target() -> Daemon {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f13700\"\nname = \"persist\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.137.1\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"8MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"{IOC_A}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"{IOC_B}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n"
    );
    let config = TargetConfig::from_str(&text, "persist.toml")
        .expect("config valid")
        .config;
    Daemon::start(config, DaemonOptions::new(providers::system())).expect("target starts")
}

fn host_config(dir: &Path) -> HostConfig {
    let text = format!(
        "[host]\nname = \"persist\"\nnode_guid = \"0x0002c90300f13710\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nstate_dir = \"{}\"\n\
         sweep_interval = \"300ms\"\nlogin_timeout = \"3s\"\n\n\
         [[portal]]\naddress = \"127.0.137.1\"\nlocal = [\"127.0.137.2\", \"127.0.137.3\"]\n\
         iocs = [\"{IOC_A}\"]\n",
        dir.join("disks").display(),
        dir.join("host.sock").display(),
        dir.join("state").display()
    );
    HostConfig::from_str(&text, "host.toml").expect("host config valid")
}

/// (IOC GUID, driver model) of each session, sorted.
fn sessions(host: &HostDaemon) -> Vec<(String, String)> {
    let mut v: Vec<_> = host
        .sessions()
        .into_iter()
        .map(|s| (s.ioc_guid, s.driver))
        .collect();
    v.sort();
    v
}

fn call(host: &HostDaemon, r: HostRequest) -> Result<HostAnswer, HostControlError> {
    host.control().call(r)
}

#[test]
fn a_persistent_login_comes_back_after_a_host_daemon_restart_until_forgotten() {
    let dir = TempDir::new("persist");
    let _target = target();
    let config = host_config(dir.path());
    let configured = (IOC_A.to_owned(), "storport".to_owned());
    let persistent = (IOC_B.to_owned(), "iscsi-model".to_owned());

    let host = HostDaemon::start_in_process(config.clone(), providers::system());
    assert_eq!(
        sessions(&host),
        vec![configured.clone()],
        "the sweep: IOC A only"
    );
    let spec = LoginSpec {
        ioc_guid: Some(IOC_B.into()),
        persistent: true,
        driver: Some("iscsi-model".into()),
        ..LoginSpec::to("127.0.137.1".parse().expect("ip"))
    };
    let mut bad = spec.clone();
    bad.driver = Some("scsiport".into());
    assert!(
        matches!(call(&host, HostRequest::Login(bad)), Err(HostControlError::BadRequest(t)) if t.contains("iscsi-model")),
        "an unknown driver model is refused with the choices"
    );
    match call(&host, HostRequest::Login(spec.clone())) {
        Ok(HostAnswer::LoggedIn(v)) => {
            assert_eq!(v.len(), 1);
            assert_eq!(v[0].driver, "iscsi-model");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sessions(&host),
        vec![configured.clone(), persistent.clone()]
    );
    match call(&host, HostRequest::PersistentLogins) {
        Ok(HostAnswer::Persistent(v)) => {
            assert_eq!(v.len(), 1);
            assert!(v[0].same_login(&spec) && v[0].persistent);
        }
        other => panic!("{other:?}"),
    }
    host.shutdown();

    // The restart: the persistent login is established again at start.
    let host = HostDaemon::start_in_process(config.clone(), providers::system());
    assert_eq!(
        sessions(&host),
        vec![configured.clone(), persistent.clone()],
        "the persistent login came back with its driver model"
    );
    assert!(
        host.sessions().iter().all(|s| s.state == "running"),
        "{:?}",
        host.sessions()
    );
    // The management lists: both IOCs found at the portal, each with its session; the
    // configured portal swept, with both SRP services.
    match call(&host, HostRequest::Targets) {
        Ok(HostAnswer::Targets(v)) => {
            let mut found: Vec<_> = v
                .iter()
                .map(|t| (t.ioc_guid.clone(), t.sessions.len()))
                .collect();
            found.sort();
            assert_eq!(found, vec![(IOC_A.into(), 1), (IOC_B.into(), 1)], "{v:?}");
        }
        other => panic!("{other:?}"),
    }
    match call(&host, HostRequest::Portals) {
        Ok(HostAnswer::Portals(v)) => {
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(v[0].configured && v[0].last_sweep == Some(Ok(2)), "{v:?}");
        }
        other => panic!("{other:?}"),
    }
    match call(&host, HostRequest::RemovePersistent { index: 1 }) {
        Err(HostControlError::NoSuchPersistent(1)) => {}
        other => panic!("{other:?}"),
    }
    match call(&host, HostRequest::RemovePersistent { index: 0 }) {
        Ok(HostAnswer::Forgotten(s)) => assert!(s.same_login(&spec)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sessions(&host).len(),
        2,
        "forgetting does not log out the session"
    );
    host.shutdown();

    let host = HostDaemon::start_in_process(config, providers::system());
    assert_eq!(sessions(&host), vec![configured], "forgotten: not back");
    host.shutdown();
}
