//! Several appliances serving one LU (a Ceph RBD image): `[target] port_base`, where this
//! appliance's ALUA target port groups and relative target ports start, and `[[peer]]`, the
//! other appliances' groups, which REPORT TARGET PORT GROUPS lists beside this appliance's
//! own so that every appliance answers it the same way (SPC-4 5.15: the groups of every
//! port the LU is reached through). Relative target ports and groups must differ across
//! the appliances (reservations are per I_T nexus, which names the relative port), so the
//! groups of a peer may not overlap this appliance's.
//!
//! ```toml
//! [target]
//! port_base = 1                     # IOC i is group and relative port port_base + i
//!
//! [[peer]]
//! name = "array-2"                  # for logs
//! port_groups = [3, 4]              # its groups (each holds the relative port of its number)
//! alua = "active/non-optimized"     # their state as this appliance reports it
//! ```

use super::error::{ConfigErrorKind as E, KeyPath, Sink};
use super::file::{self, RawPeer};
use super::values;
use crate::lu::AluaState;
use std::collections::BTreeMap;

/// `[[peer]]`: another appliance serving this appliance's shared LUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    /// A name for logs.
    pub name: String,
    /// Its target port groups; each holds the relative target port of the same number.
    pub port_groups: Vec<u16>,
    /// Their asymmetric access state, as this appliance reports it.
    pub alua: AluaState,
}

/// The default `port_base`: the first IOC is group and relative port 1.
pub const DEFAULT_PORT_BASE: u16 = 1;

/// `port_base`: 1..=65535.
pub(super) fn port_base(value: i64) -> Result<u16, E> {
    u16::try_from(value)
        .ok()
        .filter(|&b| b >= 1)
        .ok_or_else(|| E::BadValue {
            key: "port_base",
            why: format!(
                "{value} is not a relative target port identifier (1..=65535: 0 is reserved)"
            ),
        })
}

/// Reads every `[[peer]]` table, reporting bad ones, duplicate names and groups named
/// twice.
pub(super) fn declare(tables: &[toml::Table], sink: &mut Sink) -> Option<Vec<PeerConfig>> {
    let mut peers = Vec::new();
    let mut ok = true;
    let mut names: BTreeMap<String, KeyPath> = BTreeMap::new();
    let mut groups: BTreeMap<u16, KeyPath> = BTreeMap::new();
    for (i, t) in tables.iter().enumerate() {
        let path = KeyPath::default().key("peer").index(i);
        let Some(e) = file::entry::<RawPeer>(t, &path, sink) else {
            ok = false;
            continue;
        };
        let name = match e.raw.name.as_deref() {
            Some(n) => sink.check(&path.key("name"), values::name(n)),
            None => {
                let hint = "; the peer appliance's name, for logs".to_owned();
                sink.key(&path.key("name"), E::Missing { hint });
                None
            }
        };
        if let Some(n) = &name {
            if let Some(first) = names.get(n) {
                sink.key(
                    &path.key("name"),
                    E::DuplicateName {
                        kind: "peer",
                        name: n.clone(),
                        first: first.to_string(),
                    },
                );
                ok = false;
            } else {
                names.insert(n.clone(), path.clone());
            }
        }
        let port_groups = match e.raw.port_groups.as_deref() {
            Some([]) | None => {
                let hint = "; its target port groups, as port_groups = [3, 4] (its own \
                            port_base and IOCs)"
                    .to_owned();
                sink.key(&path.key("port_groups"), E::Missing { hint });
                None
            }
            Some(list) => {
                let mut out = Vec::new();
                let mut bad = false;
                for (k, &g) in list.iter().enumerate() {
                    let at = path.key("port_groups").index(k);
                    match port_base(g) {
                        Ok(g) => {
                            if let Some(first) = groups.get(&g) {
                                sink.key(
                                    &at,
                                    E::BadValue {
                                        key: "port_groups",
                                        why: format!(
                                            "target port group {g} is already named at {first}"
                                        ),
                                    },
                                );
                                bad = true;
                            } else {
                                groups.insert(g, at);
                                out.push(g);
                            }
                        }
                        Err(E::BadValue { why, .. }) => {
                            sink.key(
                                &at,
                                E::BadValue {
                                    key: "port_groups",
                                    why: why.replace(
                                        "relative target port identifier",
                                        "target port group",
                                    ),
                                },
                            );
                            bad = true;
                        }
                        Err(other) => {
                            sink.key(&at, other);
                            bad = true;
                        }
                    }
                }
                (!bad).then_some(out)
            }
        };
        let alua = match &e.raw.alua {
            Some(a) => sink.check(&path.key("alua"), values::alua(a)),
            None => Some(AluaState::ActiveOptimized),
        };
        match (name, port_groups, alua, e.bad.is_empty()) {
            (Some(name), Some(port_groups), Some(alua), true) => peers.push(PeerConfig {
                name,
                port_groups,
                alua,
            }),
            _ => ok = false,
        }
    }
    ok.then_some(peers)
}

/// Checks that this appliance's groups (`port_base` .. for `iocs` IOCs) fit the 16-bit
/// identifiers and overlap no peer's.
pub(super) fn check_groups(base: u16, iocs: usize, peers: &[PeerConfig], sink: &mut Sink) {
    let path = KeyPath::default().key("target").key("port_base");
    let last = u32::from(base) + u32::try_from(iocs).unwrap_or(u32::MAX) - 1;
    if iocs > 0 && last > u32::from(u16::MAX) {
        sink.key(
            &path,
            E::BadValue {
                key: "port_base",
                why: format!(
                    "port_base {base} with {iocs} IOCs runs past 65535, the last relative \
                     target port identifier"
                ),
            },
        );
        return;
    }
    for (i, p) in peers.iter().enumerate() {
        for &g in &p.port_groups {
            if iocs > 0 && u32::from(g) >= u32::from(base) && u32::from(g) <= last {
                sink.key(
                    &KeyPath::default().key("peer").index(i).key("port_groups"),
                    E::BadValue {
                        key: "port_groups",
                        why: format!(
                            "target port group {g} is one of this appliance's own ({base}..={last}: \
                             port_base and its IOCs); give each appliance its own port_base"
                        ),
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_base_is_a_relative_port() {
        assert_eq!(port_base(1).ok(), Some(1));
        assert_eq!(port_base(65535).ok(), Some(65535));
        assert!(port_base(0).is_err());
        assert!(port_base(65536).is_err());
        assert!(port_base(-3).is_err());
    }
}
