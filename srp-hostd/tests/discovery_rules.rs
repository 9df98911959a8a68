//! Issue #17: the discovery rules file through real sweeps — a target with two IOCs, a
//! rule denying one: the sweeps log in to the other only; the file rewritten to allow it:
//! the next sweep logs in to it too, without a restart; a file made invalid: the rules in
//! force stay. A host configuration naming an invalid rules file is refused with the rule
//! and key. Loopback 127.0.153.x; the daemons stop even when an assertion fails.

mod common;

use common::TempDir;
use srp_hostd::{HostConfig, HostDaemon};
use srp_target::config::TargetConfig;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::path::Path;
use std::time::{Duration, Instant};

const IOC_A: &str = "0x0002c90300f15301";
const IOC_B: &str = "0x0002c90300f15302";

fn target() -> Daemon {
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300f15300\"\nname = \"rules\"\n\n\
         [[port]]\nname = \"p0\"\naddress = \"127.0.153.1\"\n\n\
         [[lun]]\nname = \"vol\"\nram = true\nsize = \"8MiB\"\n\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"{IOC_A}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n\n\
         [[ioc]]\nname = \"ioc-b\"\nguid = \"{IOC_B}\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol\" }}\nallow = [\"any\"]\n"
    );
    let config = TargetConfig::from_str(&text, "rules.toml")
        .expect("valid")
        .config;
    Daemon::start(config, DaemonOptions::new(providers::system())).expect("target starts")
}

fn host_config(dir: &Path, rules: &Path) -> Result<HostConfig, String> {
    let text = format!(
        "[host]\nname = \"rules\"\nnode_guid = \"0x0002c90300f15310\"\n\
         disks_dir = \"{}\"\ncontrol_socket = \"{}\"\nstate_dir = \"{}\"\n\
         sweep_interval = \"200ms\"\nlogin_timeout = \"3s\"\nrules = \"{}\"\n\n\
         [[portal]]\naddress = \"127.0.153.1\"\nlocal = [\"127.0.153.2\", \"127.0.153.3\"]\n",
        dir.join("disks").display(),
        dir.join("host.sock").display(),
        dir.join("state").display(),
        rules.display()
    );
    HostConfig::from_str(&text, "host.toml").map_err(|e| e.to_string())
}

fn iocs(host: &HostDaemon) -> Vec<String> {
    let mut v: Vec<String> = host.sessions().into_iter().map(|s| s.ioc_guid).collect();
    v.sort();
    v
}

#[test]
fn rules_decide_what_the_sweeps_log_in_to_and_follow_the_file() {
    let dir = TempDir::new("rules");
    let _target = target();
    let rules = dir.path().join("host.rules");
    std::fs::write(
        &rules,
        format!(
            "[[rule]]\naction = \"deny\"\nioc_guid = \"{IOC_B}\"\n\n\
             [[rule]]\naction = \"allow\"\nportal = \"127.0.153.1\"\nqueue_depth = 8\n"
        ),
    )
    .expect("rules");
    let config = host_config(dir.path(), &rules).expect("valid");
    let host = HostDaemon::start_in_process(config.clone(), providers::system());
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(iocs(&host), [IOC_A], "ioc-b denied, over several sweeps");
    // Allowed now: the next sweep logs in, no restart.
    std::fs::write(&rules, "default = \"allow\"\n").expect("rules");
    let end = Instant::now() + Duration::from_secs(10);
    while iocs(&host).len() < 2 {
        assert!(
            Instant::now() < end,
            "ioc-b not logged in to: {:?}",
            iocs(&host)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(iocs(&host), [IOC_A, IOC_B]);
    // A file made invalid: the rules in force stay, nothing is logged out.
    std::fs::write(&rules, "[[rule]]\naction = \"perhaps\"\n").expect("rules");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(iocs(&host), [IOC_A, IOC_B]);
    host.shutdown();
    // `host check` and the daemon refuse a configuration whose rules file is not valid.
    let e = host_config(dir.path(), &rules).expect_err("invalid rules");
    assert!(e.contains("rule[0].action"), "{e}");
}
