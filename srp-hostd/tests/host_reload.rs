//! Issue #17: the host daemon's configuration reloaded from its file — a portal's IOC
//! filter lifted (the next sweep logs in to the IOC it allowed now), a change of identity
//! refused with its key and nothing changed, a file that is not valid refused, the same
//! file again a no-op. Loopback 127.0.154.x; the daemons stop even when an assertion fails.

mod common;

use common::TempDir;
use srp_hostd::{HostConfig, HostDaemon};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::path::Path;
use std::time::{Duration, Instant};

const IOC_A: &str = "0x0002c90300f15401";
const IOC_B: &str = "0x0002c90300f15402";

fn target() -> Daemon {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f15400\"\nname = \"hreload\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.154.1\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"8MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"{IOC_A}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"{IOC_B}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n"
    );
    let config = TargetConfig::from_str(&text, "t.toml")
        .expect("valid")
        .config;
    Daemon::start(config, DaemonOptions::new(providers::system())).expect("target starts")
}

fn write(dir: &Path, guid: &str, iocs: &str) -> std::path::PathBuf {
    let file = dir.join("host.toml");
    let text = format!(
        "[host]\nname = \"hreload\"\nnode_guid = \"{guid}\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nstate_dir = \"{}\"\n\
         sweep_interval = \"200ms\"\nlogin_timeout = \"3s\"\n\n\
         [[portal]]\naddress = \"127.0.154.1\"\nlocal = [\"127.0.154.2\", \"127.0.154.3\"]\n{iocs}",
        dir.join("disks").display(),
        dir.join("host.sock").display(),
        dir.join("state").display()
    );
    std::fs::write(&file, text).expect("host.toml");
    file
}

fn iocs(host: &HostDaemon) -> Vec<String> {
    let mut v: Vec<String> = host.sessions().into_iter().map(|s| s.ioc_guid).collect();
    v.sort();
    v
}

#[test]
fn the_host_configuration_reloads_from_its_file() {
    let dir = TempDir::new("hreload");
    let _target = target();
    let guid = "0x0002c90300f15410";
    let file = write(dir.path(), guid, &format!("iocs = [\"{IOC_A}\"]\n"));
    let host = HostDaemon::start_in_process(
        HostConfig::from_file(&file).expect("valid"),
        providers::system(),
    );
    assert_eq!(iocs(&host), [IOC_A]);
    // The same file: nothing.
    assert_eq!(host.reload().expect("reloaded"), Vec::<String>::new());
    // The filter lifted: swept and logged in to IOC B, no restart.
    write(dir.path(), guid, "");
    let changes = host.reload().expect("reloaded");
    assert_eq!(
        changes,
        ["portal 127.0.154.1 changed: its next logins follow the new settings"]
    );
    let end = Instant::now() + Duration::from_secs(10);
    while iocs(&host).len() < 2 {
        assert!(
            Instant::now() < end,
            "IOC B not logged in to: {:?}",
            iocs(&host)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Another identity: refused by key, nothing changed.
    write(dir.path(), "0x0002c90300f154ff", "");
    let e = host.reload().expect_err("refused").to_string();
    assert!(
        e.contains("host.node_guid: fixed while the daemon runs"),
        "{e}"
    );
    assert_eq!(host.config().node_guid.0, 0x0002_c903_00f1_5410);
    // Not valid: refused.
    std::fs::write(&file, "[host\n").expect("garble");
    let e = host.reload().expect_err("refused").to_string();
    assert!(
        e.contains("not valid; the running configuration is unchanged"),
        "{e}"
    );
    assert_eq!(iocs(&host), [IOC_A, IOC_B]);
    host.shutdown();
}
