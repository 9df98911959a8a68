//! `config_target`: [`TargetConfig::from_str`] on any UTF-8 text, and on TOML-ish text
//! built from the target's schema ([`crate::toml_gen`]).
//!
//! Checks: it never panics; it fails with at least one error, each naming the file and
//! where in it: a key path, or a line and column inside the text for TOML syntax, or the
//! file as a whole only for a missing kind of table; warnings name a key. A config's
//! meaning is its TOML data, not its layout: the same data re-serialized (`toml`'s
//! writer) gives the same config and warnings, or the same errors.

use crate::input::Input;
use crate::toml_gen::{self, Table};
use srp_target::config::{ConfigErrorKind, ConfigErrors, Location, TargetConfig};

const ORIGIN: &str = "fuzz.toml";

const SCHEMA: &[Table] = &[
    (
        "target",
        false,
        &[
            (
                "node_guid",
                &["\"0x0002c90300a1b2c0\"", "\"0\"", "\"0x\"", "1"],
            ),
            (
                "oui",
                &["0x001405", "\"00:14:05\"", "0x1000000", "-1", "\"0x\""],
            ),
            ("name", &["\"array-1\"", "\"bad name!\"", "\"\""]),
            ("rdma_cm_port", &["5555", "0", "70000"]),
            (
                "login_forms",
                &["[\"ib-cm\", \"rdma-cm\"]", "[\"rdma-cm\"]", "[]", "[\"x\"]"],
            ),
            (
                "control_socket",
                &["\"/run/srp-target/a.sock\"", "\"rel.sock\""],
            ),
            (
                "control_group",
                &["\"root\"", "\"0\"", "\"no-such-group-here\""],
            ),
            ("state_dir", &["\"/var/lib/srp-target/a\"", "\"rel\""]),
            ("idle_probe", &["\"30s\"", "\"0s\"", "\"off\"", "\"soon\""]),
            ("max_channels", &["64", "0", "-5"]),
            ("max_channels_per_address", &["8", "0", "100000"]),
            ("max_half_open", &["16", "0", "-1"]),
        ],
    ),
    (
        "port",
        true,
        &[
            ("name", &["\"p0\"", "\"p1\"", "\"bad name\""]),
            (
                "address",
                &[
                    "\"192.0.2.10\"",
                    "\"192.0.2.10:4791\"",
                    "\"[::1]:4791\"",
                    "\"0.0.0.0\"",
                    "\"x\"",
                ],
            ),
        ],
    ),
    (
        "lun",
        true,
        &[
            ("name", &["\"vol1\"", "\"vol2\"", "\"vol1\""]),
            ("file", &["\"/srv/srp/vol1.img\"", "\"rel.img\""]),
            ("device", &["\"/dev/sdb\"", "\"/dev/null\""]),
            ("ram", &["true", "false"]),
            (
                "size",
                &["\"64MiB\"", "4096", "\"0\"", "\"1.5GiB\"", "-1", "\"64XB\""],
            ),
            ("block_size", &["512", "4096", "1000"]),
            ("read_only", &["true", "false"]),
            ("write_cache", &["false", "true"]),
            ("write_cache_changeable", &["true", "false"]),
            ("record_writes", &["\"/tmp/rec.log\"", "\"rel\""]),
        ],
    ),
    (
        "ioc",
        true,
        &[
            ("name", &["\"ioc-a\"", "\"ioc-b\""]),
            (
                "guid",
                &[
                    "\"0002:c903:00a1:b2c3\"",
                    "\"0x0002c90300a1b2c4\"",
                    "\"0\"",
                    "\"0x\"",
                ],
            ),
            ("id_ext", &["\"0x0000000000000001\"", "\"x\""]),
            (
                "service_id",
                &["\"0x0002c90300a1b2c3\"", "\"0x0000000106000000\""],
            ),
            (
                "ports",
                &[
                    "[\"p0\"]",
                    "[\"p0\", \"p1\"]",
                    "[\"p9\"]",
                    "[]",
                    "[\"p0\", \"p0\"]",
                ],
            ),
            ("enabled", &["true", "false"]),
            ("alua", &["\"active/optimized\"", "\"standby\"", "\"x\""]),
            (
                "exports",
                &[
                    "{ 0 = \"vol1\" }",
                    "{ 0 = \"vol1\", 1 = \"vol2\" }",
                    "[{ lun = 0, name = \"vol1\" }]",
                    "[{ lun = 0 }]",
                    "{ x = \"vol1\" }",
                    "{ 0 = \"vol9\" }",
                    "{ 16384 = \"vol1\" }",
                ],
            ),
            (
                "allow",
                &[
                    "[\"any\"]",
                    "[\"guid:0002:c903:00a1:b2c3\"]",
                    "[]",
                    "[\"0x00000000000000010002c90300a1b2c3\"]",
                    "[\"nonsense\"]",
                ],
            ),
            ("nexus_from_any_address", &["true", "false"]),
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

/// The errors as the operator reads them.
fn rendered(e: &ConfigErrors) -> String {
    e.to_string()
}

/// The checks of the module doc on `text`.
pub fn check(text: &str) {
    let result = TargetConfig::from_str(text, ORIGIN);
    // The same TOML data, written by `toml` (if it is TOML at all).
    let again = text
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| toml::to_string(&t).ok());
    match result {
        Ok(loaded) => {
            for w in &loaded.warnings {
                assert!(matches!(&w.location, Location::Key(k) if !k.is_empty()));
            }
            let again = again.expect("a valid config is TOML that re-serializes");
            let back = TargetConfig::from_str(&again, ORIGIN).map_err(|e| rendered(&e));
            assert_eq!(back, Ok(loaded), "re-serialized:\n{again}");
        }
        Err(errors) => {
            assert!(!errors.0.is_empty(), "an error list with no error");
            let lines = text.split('\n').count();
            for e in &errors.0 {
                assert_eq!(e.origin, ORIGIN);
                match &e.location {
                    Location::File => {
                        assert!(matches!(e.kind, ConfigErrorKind::Empty { .. }), "{e}");
                    }
                    Location::Key(k) => assert!(!k.is_empty(), "{e}"),
                    Location::Position { line, column } => {
                        assert!(matches!(e.kind, ConfigErrorKind::Syntax(_)), "{e}");
                        assert!((1..=lines).contains(line) && *column >= 1, "{e}");
                    }
                }
                assert!(e.to_string().starts_with(ORIGIN));
            }
            let syntax = errors
                .0
                .iter()
                .any(|e| matches!(e.kind, ConfigErrorKind::Syntax(_)));
            if let (Some(again), false) = (again, syntax) {
                let back = TargetConfig::from_str(&again, ORIGIN).map(|_| ());
                assert_eq!(
                    back.map_err(|e| rendered(&e)),
                    Err(rendered(&errors)),
                    "re-serialized:\n{again}"
                );
            }
        }
    }
}
