//! `config_host`: [`HostConfig::from_str`] on any UTF-8 text, and on TOML-ish text built
//! from the host's schema ([`crate::toml_gen`]).
//!
//! Checks: it never panics; it fails with at least one problem, each naming the file and
//! where: a key path (`host.…`, `timers…`, `multipath.…`, `portal[i]…`, or the missing
//! `[[portal]]`), or, for what the TOML reader refuses, a line and column. A config's
//! meaning is its TOML data, not its layout: the same data re-serialized gives the same
//! config, or the same problems.

use crate::input::Input;
use crate::toml_gen::{self, Table};
use srp_hostd::HostConfig;

const ORIGIN: &str = "fuzz.toml";

/// How a problem found by validation (not by the TOML reader) begins.
const KEYED: [&str; 5] = ["host.", "timers", "multipath.", "portal[", "no [[portal]]"];

const SCHEMA: &[Table] = &[
    (
        "host",
        false,
        &[
            ("name", &["\"srp-host\"", "\"bad name!\"", "\"\""]),
            ("node_guid", &["\"0x0002c90300beef01\"", "\"0\"", "\"0x\""]),
            ("initiator_ext", &["\"0x0\"", "\"0x12345678901234567\""]),
            ("disks_dir", &["\"/run/srp-host/disks\"", "\"rel\""]),
            (
                "control_socket",
                &["\"/run/srp-host/h.sock\"", "\"rel.sock\""],
            ),
            (
                "control_group",
                &["\"root\"", "\"0\"", "\"no-such-group-here\""],
            ),
            (
                "registration",
                &["\"per-io\"", "\"trust-target\"", "\"yolo\""],
            ),
            ("queue_depth", &["32", "0", "256"]),
            (
                "max_transfer",
                &["\"256KiB\"", "4096", "\"3MB\"", "\"9MiB\"", "true"],
            ),
            ("max_luns", &["16", "0", "256"]),
            ("cmd_timeout", &["\"30s\"", "\"0s\"", "\"soon\""]),
            ("login_timeout", &["\"10s\"", "\"1.5s\""]),
            ("sweep_interval", &["\"5s\"", "\"500ms\"", "\"10\""]),
            ("login", &["\"auto\"", "\"ib-cm\"", "\"rdma-cm\"", "\"x\""]),
            ("rdma_cm_port", &["5555", "0", "70000"]),
        ],
    ),
    (
        "timers",
        false,
        &[
            ("reconnect_delay", &["\"10s\"", "\"off\"", "\"0s\""]),
            ("fast_io_fail", &["\"15s\"", "\"off\"", "\"700s\""]),
            ("dev_loss", &["\"600s\"", "\"off\"", "\"1s\""]),
        ],
    ),
    (
        "multipath",
        false,
        &[
            (
                "policy",
                &[
                    "\"round-robin\"",
                    "\"fastest\"",
                    "3",
                    "9",
                    "\"least-blocks\"",
                ],
            ),
            ("failback", &["true", "false"]),
            ("no_path_retry", &["\"30s\"", "\"0s\""]),
            ("verify_period", &["\"30s\"", "\"0s\""]),
            ("flap_failures", &["3", "0", "101"]),
            ("flap_window", &["\"60s\"", "\"0s\""]),
            ("flap_hold", &["\"5s\"", "\"1h\""]),
        ],
    ),
    (
        "portal",
        true,
        &[
            (
                "address",
                &[
                    "\"192.0.2.10\"",
                    "\"127.0.0.1\"",
                    "\"::1\"",
                    "\"target.example\"",
                ],
            ),
            (
                "local",
                &[
                    "[\"192.0.2.20\"]",
                    "[\"127.0.0.2\", \"127.0.0.2\"]",
                    "[\"x\"]",
                    "[]",
                ],
            ),
            (
                "iocs",
                &[
                    "[\"0x0002c90300a1b401\"]",
                    "[\"0002:c903:00a1:b401\"]",
                    "[\"zz\"]",
                ],
            ),
            ("preferred", &["true", "false"]),
            ("weight", &["1", "-1", "4294967296"]),
            ("login", &["\"rdma-cm\"", "\"auto\"", "\"x\""]),
            ("rdma_cm_port", &["5555", "0"]),
        ],
    ),
];

/// One input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let text = match input.u8() % 2 {
        0 => String::from_utf8_lossy(input.rest()).into_owned(),
        _ => toml_gen::text(&mut input, SCHEMA),
    };
    check(&text);
}

/// The checks of the module doc on `text`.
pub fn check(text: &str) {
    let result = HostConfig::from_str(text, ORIGIN);
    let again = text
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| toml::to_string(&t).ok());
    match result {
        Ok(config) => {
            let again = again.expect("a valid config is TOML that re-serializes");
            let back = HostConfig::from_str(&again, ORIGIN);
            assert_eq!(back, Ok(config), "re-serialized:\n{again}");
        }
        Err(e) => {
            assert_eq!(e.origin, ORIGIN);
            assert!(!e.problems.is_empty(), "an error with no problem");
            let keyed = |p: &String| KEYED.iter().any(|k| p.starts_with(k));
            for p in &e.problems {
                assert!(
                    keyed(p) || p.contains(" at line "),
                    "a problem that names neither a key nor a line: {p:?}"
                );
            }
            if let (Some(again), true) = (again, e.problems.iter().all(keyed)) {
                let back = HostConfig::from_str(&again, ORIGIN);
                assert_eq!(back, Err(e), "re-serialized:\n{again}");
            }
        }
    }
}
