//! The discovery rules file (srp_daemon's `srp_daemon.conf`, in TOML): which SRP services
//! the sweeps log in to, and with which login options. `[host] rules = "/etc/srp/host/h1.rules"`.
//!
//! ```toml
//! default = "allow"                  # a service no rule matches: "allow" (default) or "deny"
//!
//! [[rule]]
//! action = "deny"                    # "allow" or "deny"
//! ioc_guid = "0x0002c90300a1b2c4"    # matchers, all optional, all must match:
//!                                    # id_ext, ioc_guid, service_id, portal, partition
//!
//! [[rule]]
//! action = "allow"
//! portal = "192.0.2.10"
//! partition = "0x8001"
//! queue_depth = 64                   # login options for what it allows (default: [host]'s)
//! max_transfer = "512KiB"
//! registration = "trust-target"      # or "per-io"
//! ```
//!
//! Contract: the first rule whose matchers all match a service decides; none matching, the
//! `default` does. [`Rules::parse`] reports every problem at once, each with its rule
//! index and key, as the configuration does. The daemon reads the file at start and again
//! whenever it changes (at the next sweep): an invalid new file is logged at error level
//! and the rules in force stay. Each decision is logged once (and again when it changes):
//! which rule, allowed or denied.

use ib_verbs::{Guid, PKey};
use serde::Deserialize;
use srp_initiator_storport::srp::RegistrationMode;
use std::net::IpAddr;
use std::path::Path;

/// What a rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Log in.
    Allow,
    /// Do not log in.
    Deny,
}

/// What a service is matched on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The IOC's identifier extension.
    pub id_ext: u64,
    /// The IOC's GUID.
    pub ioc_guid: Guid,
    /// The SRP service ID.
    pub service_id: u64,
    /// The portal it was found at.
    pub portal: IpAddr,
    /// The partition of the sweep that found it.
    pub partition: PKey,
}

/// Login options a rule sets (unset: the host's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoginOptions {
    /// Per-LU queue depth.
    pub queue_depth: Option<u32>,
    /// Largest transfer per command, in bytes.
    pub max_transfer: Option<u32>,
    /// Memory registration.
    pub registration: Option<RegistrationMode>,
}

/// One rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Allow or deny.
    pub action: Action,
    id_ext: Option<u64>,
    ioc_guid: Option<Guid>,
    service_id: Option<u64>,
    portal: Option<IpAddr>,
    partition: Option<PKey>,
    /// Its login options.
    pub options: LoginOptions,
}

impl Rule {
    fn matches(&self, t: &Target) -> bool {
        self.id_ext.is_none_or(|v| v == t.id_ext)
            && self.ioc_guid.is_none_or(|v| v == t.ioc_guid)
            && self.service_id.is_none_or(|v| v == t.service_id)
            && self.portal.is_none_or(|v| v == t.portal)
            && self
                .partition
                .is_none_or(|v| v.base() == t.partition.base())
    }
}

/// The rules in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    default: Action,
    rules: Vec<Rule>,
}

impl Default for Rules {
    /// No file: everything allowed with the host's options.
    fn default() -> Rules {
        Rules {
            default: Action::Allow,
            rules: Vec::new(),
        }
    }
}

/// What the rules say of one service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Log in or not.
    pub action: Action,
    /// The deciding rule's index, `None` for the default.
    pub rule: Option<usize>,
    /// Its login options.
    pub options: LoginOptions,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.action {
            Action::Allow => "allowed",
            Action::Deny => "denied",
        };
        match self.rule {
            Some(i) => write!(f, "{what} by rule[{i}]"),
            None => write!(f, "{what} by the default (no rule matched)"),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    default: Option<String>,
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    action: Option<String>,
    id_ext: Option<String>,
    ioc_guid: Option<String>,
    service_id: Option<String>,
    portal: Option<String>,
    partition: Option<String>,
    queue_depth: Option<i64>,
    max_transfer: Option<toml::Value>,
    registration: Option<String>,
}

fn action(text: &str) -> Result<Action, String> {
    match text {
        "allow" => Ok(Action::Allow),
        "deny" => Ok(Action::Deny),
        _ => Err(format!("{text:?}: expected \"allow\" or \"deny\"")),
    }
}

impl Rules {
    /// Reads and validates the file at `path`.
    pub fn from_file(path: &Path) -> Result<Rules, Vec<String>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| vec![format!("{}: cannot read: {e}", path.display())])?;
        Rules::parse(&text).map_err(|p| {
            p.into_iter()
                .map(|e| format!("{}: {e}", path.display()))
                .collect()
        })
    }

    /// Parses and validates `text`; every problem at once.
    pub fn parse(text: &str) -> Result<Rules, Vec<String>> {
        let raw: RawFile = toml::from_str(text).map_err(|e| vec![e.to_string()])?;
        let mut p = Vec::new();
        let default = match raw.default.as_deref().map(action) {
            None => Action::Allow,
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                p.push(format!("default: {e}"));
                Action::Allow
            }
        };
        let mut rules = Vec::new();
        for (i, r) in raw.rule.into_iter().enumerate() {
            let mut bad = |key: &str, e: String| p.push(format!("rule[{i}].{key}: {e}"));
            let act = match r.action.as_deref().map(action) {
                Some(Ok(a)) => a,
                Some(Err(e)) => {
                    bad("action", e);
                    continue;
                }
                None => {
                    bad("action", "missing: \"allow\" or \"deny\"".into());
                    continue;
                }
            };
            let id = |key: &str, v: &Option<String>, bad: &mut dyn FnMut(&str, String)| {
                v.as_deref()
                    .and_then(|t| crate::config::parse_id64(t).map_err(|e| bad(key, e)).ok())
            };
            let id_ext = id("id_ext", &r.id_ext, &mut bad);
            let ioc_guid = id("ioc_guid", &r.ioc_guid, &mut bad).map(Guid);
            let service_id = id("service_id", &r.service_id, &mut bad);
            let portal = r.portal.as_deref().and_then(|t| {
                t.parse::<IpAddr>()
                    .map_err(|_| bad("portal", format!("{t:?}: not an IP address")))
                    .ok()
            });
            let partition = r.partition.as_deref().and_then(|t| {
                t.parse::<PKey>()
                    .map_err(|e| bad("partition", format!("{t:?}: {e}")))
                    .ok()
            });
            let queue_depth = r.queue_depth.and_then(|q| {
                u32::try_from(q)
                    .ok()
                    .filter(|q| (1..=4096).contains(q))
                    .or_else(|| {
                        bad("queue_depth", format!("{q}: expected 1..=4096"));
                        None
                    })
            });
            let max_transfer = r.max_transfer.as_ref().and_then(|v| {
                crate::config::parse_size(v)
                    .ok()
                    .filter(|n| (4096..=(16 << 20)).contains(n) && n % 4096 == 0)
                    .and_then(|n| u32::try_from(n).ok())
                    .or_else(|| {
                        bad(
                            "max_transfer",
                            format!("{v}: expected 4KiB..16MiB in whole 4 KiB pages"),
                        );
                        None
                    })
            });
            let registration = match r.registration.as_deref() {
                None => None,
                Some("per-io") => Some(RegistrationMode::PerIo),
                Some("trust-target") => Some(RegistrationMode::TrustTarget),
                Some(o) => {
                    bad(
                        "registration",
                        format!("{o:?}: expected \"per-io\" or \"trust-target\""),
                    );
                    None
                }
            };
            rules.push(Rule {
                action: act,
                id_ext,
                ioc_guid,
                service_id,
                portal,
                partition,
                options: LoginOptions {
                    queue_depth,
                    max_transfer,
                    registration,
                },
            });
        }
        if p.is_empty() {
            Ok(Rules { default, rules })
        } else {
            Err(p)
        }
    }

    /// What the rules say of `t`.
    pub fn decide(&self, t: &Target) -> Decision {
        match self.rules.iter().position(|r| r.matches(t)) {
            Some(i) => Decision {
                action: self.rules[i].action,
                rule: Some(i),
                options: self.rules[i].options,
            },
            None => Decision {
                action: self.default,
                rule: None,
                options: LoginOptions::default(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(ioc: u64, portal: &str, pkey: u16) -> Target {
        Target {
            id_ext: ioc,
            ioc_guid: Guid(ioc),
            service_id: ioc,
            portal: portal.parse().expect("ip"),
            partition: PKey(pkey),
        }
    }

    const FILE: &str = r#"
default = "deny"

[[rule]]
action = "deny"
ioc_guid = "0x0002c90300a1b2c4"

[[rule]]
action = "allow"
portal = "192.0.2.10"
queue_depth = 64
max_transfer = "512KiB"
registration = "trust-target"

[[rule]]
action = "allow"
partition = "0x8001"
"#;

    #[test]
    fn the_first_matching_rule_decides_with_its_options() {
        let r = Rules::parse(FILE).expect("valid");
        let d = r.decide(&target(0x0002_c903_00a1_b2c4, "192.0.2.10", 0xffff));
        assert_eq!((d.action, d.rule), (Action::Deny, Some(0)));
        let d = r.decide(&target(0x0002_c903_00a1_b2c3, "192.0.2.10", 0xffff));
        assert_eq!((d.action, d.rule), (Action::Allow, Some(1)));
        assert_eq!(
            d.options,
            LoginOptions {
                queue_depth: Some(64),
                max_transfer: Some(512 << 10),
                registration: Some(RegistrationMode::TrustTarget),
            }
        );
        assert_eq!(d.to_string(), "allowed by rule[1]");
        // The partition matches by its base, whatever the membership bit.
        let d = r.decide(&target(7, "198.51.100.1", 0x0001));
        assert_eq!((d.action, d.rule), (Action::Allow, Some(2)));
        let d = r.decide(&target(7, "198.51.100.1", 0xffff));
        assert_eq!((d.action, d.rule), (Action::Deny, None));
        assert_eq!(d.to_string(), "denied by the default (no rule matched)");
        // No file: everything allowed.
        assert_eq!(
            Rules::default()
                .decide(&target(7, "10.0.0.1", 0xffff))
                .action,
            Action::Allow
        );
    }

    #[test]
    fn every_problem_is_named_by_its_rule_and_key() {
        let e = Rules::parse(
            "default = \"maybe\"\n[[rule]]\nportal = \"x\"\n\
             [[rule]]\naction = \"allow\"\nportal = \"nowhere\"\nioc_guid = \"zz\"\n\
             queue_depth = 0\nmax_transfer = \"3KiB\"\nregistration = \"all\"\npartition = \"0x0\"\n",
        )
        .expect_err("invalid");
        let keys: Vec<&str> = e
            .iter()
            .map(|l| l.split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(
            keys,
            [
                "default",
                "rule[0].action",
                "rule[1].ioc_guid",
                "rule[1].portal",
                "rule[1].partition",
                "rule[1].queue_depth",
                "rule[1].max_transfer",
                "rule[1].registration"
            ],
            "{e:#?}"
        );
        assert!(Rules::parse("[[rule]]\naction = \"allow\"\nname = \"x\"\n").is_err());
    }
}
