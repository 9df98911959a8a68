//! The file as written: serde structs that mirror the TOML tables, with every field optional
//! so that a missing key is reported by validation with a hint instead of by serde.
//!
//! To report every problem rather than the first, each table is checked key by key: an
//! unknown key is an error of its own, and each known key is deserialized alone, so one bad
//! value does not hide the next. Only a table whose keys all pass is deserialized whole.

use super::error::{ConfigErrorKind, KeyPath, Location, Sink};
use serde::de::{self, DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeSet;
use std::fmt;

/// The top level: `[target]`, `[[partition]]`, `[[port]]`, `[[ioc]]`, `[[lun]]`, `[[peer]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) target: Option<toml::Table>,
    pub(super) partition: Option<Vec<toml::Table>>,
    pub(super) port: Option<Vec<toml::Table>>,
    pub(super) ioc: Option<Vec<toml::Table>>,
    pub(super) lun: Option<Vec<toml::Table>>,
    pub(super) peer: Option<Vec<toml::Table>>,
}

/// `[target]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTarget {
    pub(super) node_guid: Option<String>,
    pub(super) oui: Option<IntOrText>,
    pub(super) name: Option<String>,
    pub(super) rdma_cm_port: Option<i64>,
    pub(super) login_forms: Option<Vec<String>>,
    pub(super) control_socket: Option<String>,
    pub(super) control_group: Option<String>,
    pub(super) state_dir: Option<String>,
    pub(super) idle_probe: Option<String>,
    pub(super) max_channels: Option<i64>,
    pub(super) max_channels_per_address: Option<i64>,
    pub(super) max_half_open: Option<i64>,
    pub(super) port_base: Option<i64>,
}

/// `[[peer]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPeer {
    pub(super) name: Option<String>,
    pub(super) port_groups: Option<Vec<i64>>,
    pub(super) alua: Option<String>,
}

/// `[[port]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPort {
    pub(super) name: Option<String>,
    pub(super) address: Option<String>,
    pub(super) partitions: Option<Vec<String>>,
    pub(super) provider: Option<String>,
    pub(super) device: Option<String>,
    pub(super) device_port: Option<i64>,
    pub(super) gid_index: Option<i64>,
}

/// `[[partition]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPartition {
    pub(super) name: Option<String>,
    pub(super) pkey: Option<String>,
}

/// `[[ioc]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIoc {
    pub(super) name: Option<String>,
    pub(super) guid: Option<String>,
    pub(super) id_ext: Option<String>,
    pub(super) service_id: Option<String>,
    pub(super) ports: Option<Vec<String>>,
    pub(super) enabled: Option<bool>,
    pub(super) alua: Option<String>,
    /// A table `{ 0 = "vol1" }` or an array of [`RawExport`]; shape checked by validation.
    pub(super) exports: Option<toml::Value>,
    pub(super) allow: Option<Vec<String>>,
    pub(super) nexus_from_any_address: Option<bool>,
    pub(super) partitions: Option<Vec<String>>,
}

/// One element of the array form of `exports`: `{ lun = 0, name = "vol1" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExport {
    pub(super) lun: Option<i64>,
    pub(super) name: Option<String>,
}

/// `[[lun]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLun {
    pub(super) name: Option<String>,
    pub(super) file: Option<String>,
    pub(super) device: Option<String>,
    pub(super) ram: Option<bool>,
    pub(super) rbd: Option<String>,
    pub(super) ceph_conf: Option<String>,
    pub(super) ceph_client: Option<String>,
    pub(super) ceph_keyring: Option<String>,
    pub(super) size: Option<IntOrText>,
    pub(super) block_size: Option<i64>,
    pub(super) physical_block_size: Option<i64>,
    pub(super) read_only: Option<bool>,
    pub(super) allow_claimed: Option<bool>,
    pub(super) write_cache: Option<bool>,
    pub(super) write_cache_changeable: Option<bool>,
    pub(super) record_writes: Option<String>,
}

/// A value written either as a TOML integer or as a string (`size = 4096` or `"64MiB"`,
/// `oui = 0x001405` or `"00:14:05"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "an integer or a string")]
pub(super) enum IntOrText {
    /// A TOML integer.
    Int(i64),
    /// A string.
    Text(String),
}

/// Parses TOML text into its root table; a syntax error is recorded with line and column.
pub(super) fn parse(text: &str, sink: &mut Sink) -> Option<toml::Table> {
    match text.parse::<toml::Table>() {
        Ok(table) => Some(table),
        Err(e) => {
            let location = match e.span() {
                Some(span) => position(text, span.start),
                None => Location::File,
            };
            sink.at(
                location,
                ConfigErrorKind::Syntax(e.message().trim().to_owned()),
            );
            None
        }
    }
}

/// The 1-based line and character column of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> Location {
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Location::Position {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

/// A table deserialized as far as it could be.
#[derive(Debug)]
pub(super) struct Entry<T> {
    /// The fields whose keys were known and values well-typed; the others are `None`.
    pub(super) raw: T,
    /// Keys that were present but rejected (already reported): validation must not call
    /// them missing as well.
    pub(super) bad: BTreeSet<String>,
}

/// Deserializes `table` at `path` into `T`, recording every unknown key and every value of
/// the wrong type, and keeping the rest. `None` only if serde rejects what remains, which
/// the key-by-key check makes impossible for structs whose fields are all `Option`.
pub(super) fn entry<T: DeserializeOwned>(
    table: &toml::Table,
    path: &KeyPath,
    sink: &mut Sink,
) -> Option<Entry<T>> {
    let fields = fields_of::<T>();
    let mut good = toml::Table::new();
    let mut bad = BTreeSet::new();
    for (key, value) in table {
        let at = path.key(key);
        if !fields.contains(&key.as_str()) {
            let expected = fields.join(", ");
            sink.key(&at, ConfigErrorKind::UnknownKey { expected });
            bad.insert(key.clone());
            continue;
        }
        let mut alone = toml::Table::new();
        alone.insert(key.clone(), value.clone());
        match T::deserialize(toml::Value::Table(alone)) {
            Ok(_) => {
                good.insert(key.clone(), value.clone());
            }
            Err(e) => {
                sink.key(&at, ConfigErrorKind::Type(e.message().to_owned()));
                bad.insert(key.clone());
            }
        }
    }
    match T::deserialize(toml::Value::Table(good)) {
        Ok(raw) => Some(Entry { raw, bad }),
        Err(e) => {
            sink.key(path, ConfigErrorKind::Type(e.message().to_owned()));
            None
        }
    }
}

/// The field names serde knows for struct `T`: asks `T::deserialize` of a deserializer
/// that only records what `deserialize_struct` is given.
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    // The probe always "fails" once it has the names; the error carries nothing.
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
}

struct FieldProbe<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct ProbeDone;

impl fmt::Display for ProbeDone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field probe")
    }
}

impl std::error::Error for ProbeDone {}

impl de::Error for ProbeDone {
    fn custom<M: fmt::Display>(_msg: M) -> Self {
        ProbeDone
    }
}

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = ProbeDone;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, ProbeDone> {
        Err(ProbeDone)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, ProbeDone> {
        *self.0 = fields;
        Err(ProbeDone)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_sees_every_field() {
        assert_eq!(
            fields_of::<RawPort>(),
            [
                "name",
                "address",
                "partitions",
                "provider",
                "device",
                "device_port",
                "gid_index"
            ]
        );
        assert_eq!(
            fields_of::<RawFile>(),
            ["target", "partition", "port", "ioc", "lun", "peer"]
        );
        assert_eq!(fields_of::<RawPeer>(), ["name", "port_groups", "alua"]);
        assert_eq!(fields_of::<RawLun>().len(), 16);
    }

    #[test]
    fn position_counts_lines_and_characters() {
        let text = "a = 1\nbé = [1,\nc = 3";
        assert_eq!(position(text, 0), Location::Position { line: 1, column: 1 });
        let c = text.find('c').unwrap_or(0);
        assert_eq!(position(text, c), Location::Position { line: 3, column: 1 });
        let eq = text.find("= [").unwrap_or(0);
        // "bé " is three characters (four bytes).
        assert_eq!(
            position(text, eq),
            Location::Position { line: 2, column: 4 }
        );
    }
}
