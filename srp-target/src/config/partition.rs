//! `[[partition]]`: named InfiniBand partitions (P_Keys), and the `partitions` lists of
//! ports (their HCA P_Key table) and IOCs (where they are exported). The name `default`
//! is the default partition, 0xFFFF, which every port and IOC is on unless its list says
//! otherwise.

use super::error::{ConfigErrorKind as E, KeyPath, Sink};
use super::file::{self, RawPartition};
use super::values;
use ib_verbs::PKey;
use std::collections::BTreeMap;

/// The name of the default partition.
pub const DEFAULT_NAME: &str = "default";

/// `[[partition]]`: a name for a P_Key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionConfig {
    /// The name ports and IOCs refer to it by.
    pub name: String,
    /// The P_Key: bit 15 set for full membership (the target's ports are normally full
    /// members; a limited member cannot talk to another limited member).
    pub pkey: PKey,
}

/// The partitions a file defines, by name (`default` included).
pub(super) struct Partitions {
    by_name: BTreeMap<String, PKey>,
}

impl Partitions {
    /// Reads every `[[partition]]` table, reporting bad and duplicate ones.
    pub(super) fn declare(
        tables: &[toml::Table],
        sink: &mut Sink,
    ) -> (Partitions, Vec<PartitionConfig>) {
        let mut by_name = BTreeMap::from([(DEFAULT_NAME.to_owned(), PKey::DEFAULT)]);
        let mut list = Vec::new();
        for (i, t) in tables.iter().enumerate() {
            let path = KeyPath::default().key("partition").index(i);
            let Some(e) = file::entry::<RawPartition>(t, &path, sink) else {
                continue;
            };
            let name = match e.raw.name.as_deref() {
                Some(n) => sink.check(&path.key("name"), values::name(n)),
                None => {
                    sink.key(
                        &path.key("name"),
                        E::Missing {
                            hint: String::new(),
                        },
                    );
                    None
                }
            };
            let pkey = match e.raw.pkey.as_deref() {
                Some(k) => sink.check(&path.key("pkey"), values::pkey(k)),
                None => {
                    let hint = "; the P_Key, as pkey = \"0x8001\"".to_owned();
                    sink.key(&path.key("pkey"), E::Missing { hint });
                    None
                }
            };
            let (Some(name), Some(pkey)) = (name, pkey) else {
                continue;
            };
            if let Some((other, _)) = by_name
                .iter()
                .find(|(n, k)| **n == name || k.base() == pkey.base())
            {
                sink.key(
                    &path,
                    E::DuplicatePartition {
                        name: name.clone(),
                        other: other.clone(),
                    },
                );
                continue;
            }
            by_name.insert(name.clone(), pkey);
            list.push(PartitionConfig { name, pkey });
        }
        (Partitions { by_name }, list)
    }

    /// A `partitions` list resolved to P_Keys, in order; absent: the default partition.
    pub(super) fn resolve(
        &self,
        names: Option<&Vec<String>>,
        path: &KeyPath,
        sink: &mut Sink,
    ) -> Option<Vec<PKey>> {
        let Some(names) = names else {
            return Some(vec![PKey::DEFAULT]);
        };
        if names.is_empty() {
            sink.key(path, E::NoPartitions);
            return None;
        }
        let mut keys = Vec::new();
        let mut ok = true;
        for (i, n) in names.iter().enumerate() {
            match self.by_name.get(n) {
                Some(k) if !keys.contains(k) => keys.push(*k),
                Some(_) => {
                    sink.key(&path.index(i), E::DuplicatePartitionRef(n.clone()));
                    ok = false;
                }
                None => {
                    let defined = self.by_name.keys().cloned().collect::<Vec<_>>().join(", ");
                    sink.key(
                        &path.index(i),
                        E::UnknownPartition {
                            name: n.clone(),
                            defined,
                        },
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(keys)
    }

    /// The name of the partition with `pkey`'s base, for messages.
    pub(super) fn name_of(&self, pkey: PKey) -> String {
        self.by_name
            .iter()
            .find(|(_, k)| k.base() == pkey.base())
            .map_or_else(|| format!("{:#06x}", pkey.0), |(n, _)| n.clone())
    }
}
