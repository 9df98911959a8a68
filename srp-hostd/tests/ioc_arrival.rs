//! An IOC arriving drives its login (issue #31, Deliver 5): a host daemon logged in to a
//! target's one enabled IOC (loopback 127.0.157.x) watches the target's I/O unit through
//! that session's adapter; when the operator enables the target's second IOC, the watch
//! sees it arrive in the unit (the access layer's PnP) and the daemon sweeps the portal at
//! once and logs in to it — well before the periodic portal sweep (16 s here), which stays
//! the fallback. Each session is then the SRP device of its IOC in the daemon's PnP tree
//! (HCA → IOU → IOC → SRP device); when the operator disables ioc-b again (torn down
//! without a word, as a dead controller), the watch sees it leave, the tree removes its
//! device, and the daemon drops that session as the IOC leaving (not as a lost path): the
//! disk keeps its other path. Under both driver models. Needs root and /dev/fuse.

mod common;

use access_layer::pnp::PnpEvent;
use common::TempDir;
use common::verify::wait_for;
use ib_verbs::Guid;
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
fn an_ioc_arriving_is_logged_in_to_at_once_and_leaving_takes_its_srp_device() {
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
    // The tree: each session's device right under its IOC, under its unit, under its CA
    // (a new session's device joins once its watch's first sweep found its IOC).
    let has_device = |tree: &[PnpEvent], id: u32| {
        let id = format!("SRP\\session-{id}");
        tree.iter()
            .any(|e| matches!(e, PnpEvent::DeviceArrived { id: i, .. } if *i == id))
    };
    wait_for(
        "every session's SRP device",
        Duration::from_secs(10),
        || {
            let tree = host.ioc_tree();
            host.sessions().iter().all(|s| has_device(&tree, s.id))
        },
    );
    let tree = host.ioc_tree();
    for s in host.sessions() {
        let ioc = session_ioc(&s.ioc_name, &s.ioc_guid);
        let id = format!("SRP\\session-{}", s.id);
        let dev = tree
            .iter()
            .position(|e| matches!(e, PnpEvent::DeviceArrived { ioc: g, id: i, .. } if *g == ioc && *i == id))
            .unwrap_or_else(|| panic!("{driver}: no device {id} under IOC {ioc:?} in {tree:#?}"));
        let PnpEvent::DeviceArrived { ca, addr, .. } = &tree[dev] else {
            unreachable!()
        };
        let parent = tree[..dev]
            .iter()
            .rposition(|e| !matches!(e, PnpEvent::DeviceArrived { .. }));
        assert!(
            parent.is_some_and(|p| matches!(&tree[p], PnpEvent::IocArrived { ca: c, addr: a, record } if c == ca && a == addr && record.profile.guid == ioc)),
            "{driver}: {id} follows its IOC: {tree:#?}"
        );
        assert!(tree.iter().any(
            |e| matches!(e, PnpEvent::IouArrived { ca: c, addr: a, .. } if c == ca && a == addr)
        ));
        assert!(
            tree.iter()
                .any(|e| matches!(e, PnpEvent::CaArrived { ca: c } if c == ca))
        );
    }
    // ioc-b leaves (torn down silently): its device goes, and its session with it.
    let b = host
        .sessions()
        .into_iter()
        .find(|s| s.ioc_name == "ioc-b")
        .expect("the ioc-b session");
    match target.control().call(ControlRequest::SetIoc {
        name: "ioc-b".into(),
        enabled: false,
        mode: DisableMode::Drop,
    }) {
        Ok(ControlAnswer::Done { .. }) => {}
        other => panic!("disabling ioc-b: {other:?}"),
    }
    let disabled = Instant::now();
    wait_for("the ioc-b session to go", Duration::from_secs(10), || {
        host.sessions().iter().all(|s| s.id != b.id)
    });
    eprintln!(
        "{driver}: ioc-b's session dropped {:?} after the IOC left",
        disabled.elapsed()
    );
    let gone = format!("SRP\\session-{}", b.id);
    assert!(
        !host
            .ioc_tree()
            .iter()
            .any(|e| matches!(e, PnpEvent::DeviceArrived { id, .. } if *id == gone)),
        "{driver}: {gone} left the tree"
    );
    wait_for("the disk back to one path", Duration::from_secs(10), || {
        host.disks().first().is_some_and(|d| d.paths.len() == 1)
    });
    host.shutdown();
    drop(target.shutdown());
}

/// A session's IOC GUID as the control model lists it (`0x…`).
fn session_ioc(name: &str, guid: &str) -> Guid {
    let hex = guid.trim_start_matches("0x");
    Guid(u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{name}: IOC GUID {guid:?}: {e}")))
}
