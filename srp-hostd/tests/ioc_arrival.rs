//! An IOC arriving drives its login (issue #31, Deliver 5): a host daemon logged in to a
//! target's one enabled IOC (loopback 127.0.157.x) watches the target's I/O unit through
//! that session's adapter; when the operator enables the target's second IOC, the watch
//! sees it arrive in the unit (the access layer's PnP) and the daemon sweeps the portal at
//! once and logs in to it — well before the periodic portal sweep (16 s here), which stays
//! the fallback. Under both driver models. Needs root and /dev/fuse.

mod common;

use common::TempDir;
use common::verify::wait_for;
use srp_hostd::{HostConfig, HostDaemon};
use srp_target::config::TargetConfig;
use srp_target::control::{ControlAnswer, ControlRequest, DisableMode};
use srp_target::daemon::{Daemon, DaemonOptions};
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::{Duration, Instant};

const TARGET: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 157, 1));
const LOCAL_A: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 157, 2));
const LOCAL_B: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 157, 3));
const SWEEP: Duration = Duration::from_secs(16);

fn start_target() -> Daemon {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f7f000\"\nname = \"arrival\"\nrdma_cm_port = 5615\n\n\
         [[port]]\nname = \"p0\"\naddress = \"{TARGET}\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"4MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300f7f001\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"0x0002c90300f7f002\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\nenabled = false\n"
    );
    let config = TargetConfig::from_str(&text, "arrival.toml")
        .expect("config valid")
        .config;
    Daemon::start(config, DaemonOptions::new(providers::system())).expect("target starts")
}

fn host_config(dir: &Path, driver: &str) -> HostConfig {
    let text = format!(
        "[host]\nname = \"arrival\"\nnode_guid = \"0x0002c90300f7f100\"\ndriver = \"{driver}\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nsweep_interval = \"{}s\"\n\
         login_timeout = \"3s\"\n\n\
         [[portal]]\naddress = \"{TARGET}\"\nlocal = [\"{LOCAL_A}\", \"{LOCAL_B}\"]\n",
        dir.join("disks").display(),
        dir.join("host.sock").display(),
        SWEEP.as_secs()
    );
    HostConfig::from_str(&text, "host.toml").expect("host config valid")
}

#[test]
fn an_ioc_enabled_at_the_target_is_logged_in_to_before_the_next_sweep() {
    for driver in ["storport", "iscsi-model"] {
        eprintln!("driver model: {driver}");
        arrival(driver);
    }
}

fn arrival(driver: &str) {
    let dir = TempDir::new("arrival");
    let target = start_target();
    let host = HostDaemon::start(host_config(dir.path(), driver), providers::system())
        .expect("host daemon starts");
    let started = Instant::now();
    let sessions = host.sessions();
    assert_eq!(sessions.len(), 1, "only ioc-a is enabled: {sessions:?}");
    assert_eq!(sessions[0].ioc_name, "ioc-a");
    match target.control().call(ControlRequest::SetIoc {
        name: "ioc-b".into(),
        enabled: true,
        mode: DisableMode::Logout,
    }) {
        Ok(ControlAnswer::Done { .. }) => {}
        other => panic!("enabling ioc-b: {other:?}"),
    }
    let enabled = Instant::now();
    wait_for("a session to ioc-b", Duration::from_secs(20), || {
        host.sessions().iter().any(|s| s.ioc_name == "ioc-b")
    });
    let took = enabled.elapsed();
    eprintln!("{driver}: logged in to ioc-b {took:?} after it was enabled");
    assert!(
        started.elapsed() < SWEEP,
        "{driver}: the login came from the IOC's arrival, not the next portal sweep \
         ({:?} after the start)",
        started.elapsed()
    );
    // The new session's LUN scan follows its login: its path joins the disk then.
    wait_for(
        "ioc-b as the disk's second path",
        Duration::from_secs(10),
        || host.disks().first().is_some_and(|d| d.paths.len() == 2),
    );
    assert_eq!(host.disks().len(), 1, "one disk, two paths");
    host.shutdown();
    drop(target.shutdown());
}
