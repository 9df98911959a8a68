//! Issue #17: the target's metrics scraped over the control socket after known I/O through
//! the access-layer initiator — every family named and typed once, the LUN's commands,
//! bytes and latency histogram counts, the session's counters, the IOC and port gauges,
//! the HCA counters and the daemon's tally exactly what the I/O was; a second scrape
//! after more I/O moves by exactly that. Loopback 127.0.149.x only.

mod common;
mod host;

use common::{TempDir, pattern, read10, write10};
use host::node::{Form, Node};
use srp_target::config::TargetConfig;
use srp_target::control::TargetClient;
use srp_target::daemon::{Daemon, DaemonOptions};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 149, host))
}

/// Every sample of an exposition by its series (`name{labels}`), after checking each
/// family has one HELP and one TYPE line before its samples.
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut typed = BTreeMap::new();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(
                typed.insert(name.to_owned(), kind.to_owned()).is_none(),
                "{name} typed twice"
            );
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("series value");
        let name = series.split('{').next().expect("name");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| typed.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(
            typed.contains_key(family),
            "{name}: a sample before its TYPE"
        );
        out.insert(series.to_owned(), value.parse().expect("a number"));
    }
    out
}

#[test]
fn metrics_count_exactly_the_io_done() {
    let dir = TempDir::new("daemon-metrics");
    let text = format!(
        "[target]\nnode_guid = \"0x0002c90300ac0000\"\nstate_dir = \"{}\"\n\
         [[port]]\nname = \"p0\"\naddress = \"{}\"\n\
         [[lun]]\nname = \"vol1\"\nfile = \"{}\"\nsize = \"1MiB\"\n\
         [[ioc]]\nname = \"ioc-a\"\nguid = \"0x0002c90300ac00a1\"\nports = [\"p0\"]\n\
         exports = {{ 0 = \"vol1\" }}\nallow = [\"any\"]\n",
        dir.path().join("state").display(),
        ip(1),
        dir.path().join("vol1.img").display(),
    );
    let config = TargetConfig::from_str(&text, "metrics.toml")
        .expect("valid")
        .config;
    let mut options = DaemonOptions::new(providers::system());
    options.limits.window = 8;
    options.limits.max_transfer = 64 << 10;
    options.shutdown_step = std::time::Duration::from_millis(300);
    options.control_socket = Some(dir.path().join("t.sock"));
    let daemon = Daemon::start(config.clone(), options).expect("starts");
    let mut c = TargetClient::connect(daemon.control_socket().expect("served")).expect("socket");
    let mut a = Node::open(ip(2), ip(1), 0xac01, &config.iocs[0], Form::IbCm, false);
    let before = samples(&c.metrics().expect("metrics"));
    assert_eq!(before["srp_target_logins_total"], 1.0);
    assert_eq!(before["srp_target_ioc_sessions{ioc=\"ioc-a\"}"], 1.0);
    assert_eq!(before["srp_target_port_up{port=\"p0\"}"], 1.0);
    assert_eq!(
        before["srp_target_lun_size_bytes{lun=\"vol1\"}"],
        1_048_576.0
    );
    let lun = |s: &BTreeMap<String, f64>, name: &str| s[&format!("{name}{{lun=\"vol1\"}}")];
    let lat = |s: &BTreeMap<String, f64>, op: &str| {
        s[&format!("srp_target_lun_latency_seconds_count{{lun=\"vol1\",op=\"{op}\"}}")]
    };
    // Known I/O: 3 writes of 4 KiB, 2 reads of 4 KiB, one SYNCHRONIZE CACHE.
    for i in 0..3 {
        a.good(0, &write10(i * 8, 8, false), &pattern(4096, i as u8), 0);
    }
    for i in 0..2 {
        a.good(0, &read10(i * 8, 8), &[], 4096);
    }
    a.good(0, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[], 0);
    let after = samples(&c.metrics().expect("metrics"));
    let moved = |name: &str| lun(&after, name) - lun(&before, name);
    assert_eq!(moved("srp_target_lun_writes_total"), 3.0);
    assert_eq!(moved("srp_target_lun_reads_total"), 2.0);
    assert_eq!(moved("srp_target_lun_written_bytes_total"), 12_288.0);
    assert_eq!(moved("srp_target_lun_read_bytes_total"), 8_192.0);
    assert_eq!(moved("srp_target_lun_commands_total"), 6.0);
    assert_eq!(moved("srp_target_lun_check_conditions_total"), 0.0);
    assert_eq!(lat(&after, "write") - lat(&before, "write"), 3.0);
    assert_eq!(lat(&after, "read") - lat(&before, "read"), 2.0);
    assert_eq!(lat(&after, "flush") - lat(&before, "flush"), 1.0);
    let session = after
        .iter()
        .find(|(k, _)| k.starts_with("srp_target_session_data_out_bytes_total{"))
        .map(|(_, v)| *v)
        .expect("the session's counters");
    assert_eq!(session, 12_288.0);
    let rx =
        |s: &BTreeMap<String, f64>| s["srp_target_hca_total{port=\"p0\",counter=\"rx_packets\"}"];
    assert!(rx(&after) > rx(&before), "the HCA received the I/O");
    assert_eq!(after["srp_target_events_dropped_total"], 0.0);
    drop(a);
    drop(daemon);
}
