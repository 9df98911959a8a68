//! Config errors and warnings: each names the file, where in it (a key path such as
//! `ioc[1].exports.3`, or a line and column for TOML syntax), and why.

use core::fmt;
use std::io;

/// Where in the file a problem is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// The file as a whole (it cannot be read, or something is missing from all of it).
    File,
    /// A key path: `target.node_guid`, `port[0].address`, `lun "vol1".size`, `ioc[1].exports.3`.
    Key(String),
    /// A TOML syntax error: 1-based line and column (in characters).
    Position {
        /// Line, from 1.
        line: usize,
        /// Column, from 1.
        column: usize,
    },
}

/// Why a config is rejected. The doc comment of each variant is its message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Read(#[source] io::Error),
    /// TOML syntax, as the toml parser words it.
    #[error("TOML syntax error: {0}")]
    Syntax(String),
    /// A key the schema does not have (a typo, or a setting in the wrong table).
    #[error("unknown key; expected one of: {expected}")]
    UnknownKey {
        /// The keys allowed here, comma-separated.
        expected: String,
    },
    /// A value of the wrong TOML type, as serde words it.
    #[error("{0}")]
    Type(String),
    /// A required key or table is absent.
    #[error("missing{hint}")]
    Missing {
        /// What to write, starting with "; ", or empty.
        hint: String,
    },
    /// `[[port]]`, `[[ioc]]` or `[[lun]]` written as a single table.
    #[error("must be an array of tables: write [[{0}]], not [{0}]")]
    NotArrayOfTables(&'static str),
    /// Nothing of a kind the target needs.
    #[error("no [[{what}]] is defined; {why}")]
    Empty {
        /// `ioc`, `lun` or `port`.
        what: &'static str,
        /// What the target cannot do without one.
        why: &'static str,
    },
    /// A port, IOC or LUN name outside the allowed alphabet.
    #[error("invalid name {0:?}: use 1 to 64 of A-Z a-z 0-9 . _ - :")]
    BadName(String),
    /// Two entries of one kind share a name.
    #[error("{kind} name {name:?} is already used by {first}")]
    DuplicateName {
        /// `port`, `ioc` or `LUN`.
        kind: &'static str,
        /// The name.
        name: String,
        /// Key path of the first entry with it.
        first: String,
    },
    /// A 64-bit identifier that does not parse.
    #[error(
        "invalid {what} {text:?}: expected 16 hex digits, as \"0x0002c90300a1b2c3\" or \"0002:c903:00a1:b2c3\""
    )]
    BadId64 {
        /// `GUID`, `id_ext` or `service ID`.
        what: &'static str,
        /// The text.
        text: String,
    },
    /// GUID 0, which InfiniBand reserves (no port, node or IOC has it).
    #[error("GUID 0 is not a valid GUID")]
    ZeroGuid,
    /// An OUI that does not fit 24 bits or does not parse.
    #[error("invalid OUI {0}: expected a 24-bit IEEE company ID, as 0x001405 or \"00:14:05\"")]
    BadOui(String),
    /// Two IOCs with one GUID.
    #[error("IOC GUID {guid} is already used by {first}")]
    DuplicateGuid {
        /// The GUID (`xxxx:xxxx:xxxx:xxxx`).
        guid: String,
        /// Key path of the first IOC with it.
        first: String,
    },
    /// Two IOCs listening on one CM service ID.
    #[error("service ID {id:#018x} is already used by {first}")]
    DuplicateServiceId {
        /// The service ID.
        id: u64,
        /// Key path of the first IOC with it (its default is its GUID).
        first: String,
    },
    /// A service ID RDMA-CM owns (IBTA Annex A11 TCP/UDP port spaces).
    #[error(
        "service ID {0:#018x} lies in the RDMA-CM TCP/UDP port space; choose another or leave it unset (default: the IOC GUID)"
    )]
    RdmaCmServiceId(u64),
    /// An address that does not parse or cannot be a port's.
    #[error("invalid address {text:?}: {why}")]
    BadAddress {
        /// The text.
        text: String,
        /// Why.
        why: &'static str,
    },
    /// Two ports with one address.
    #[error("address {addr} is already used by {first}")]
    DuplicateAddress {
        /// The address.
        addr: String,
        /// Key path of the first port with it.
        first: String,
    },
    /// An IOC names a port that no `[[port]]` defines.
    #[error("port {name:?} is not defined (defined: {defined})")]
    UnknownPort {
        /// The name.
        name: String,
        /// The defined port names, comma-separated.
        defined: String,
    },
    /// A `partitions` list names a partition no `[[partition]]` defines.
    #[error("partition {name:?} is not defined (defined: {defined})")]
    UnknownPartition {
        /// The name.
        name: String,
        /// The defined partition names, comma-separated.
        defined: String,
    },
    /// A `partitions` list names a partition twice.
    #[error("partition {0:?} is listed twice")]
    DuplicatePartitionRef(String),
    /// A `partitions` list that is empty.
    #[error("an empty partitions list leaves it on no partition; omit the key for the default one")]
    NoPartitions,
    /// Two partitions with one name or one P_Key (the membership bit aside), or one named
    /// `default` (the default partition's name).
    #[error(
        "partition {name:?} repeats partition {other:?} (names and P_Keys must be unique; \"default\" is 0xFFFF)"
    )]
    DuplicatePartition {
        /// The new one.
        name: String,
        /// The one it repeats.
        other: String,
    },
    /// An IOC is exported on a partition one of its ports is not on.
    #[error("partition {partition:?} is not on port {port:?} (add it to the port's partitions)")]
    PartitionNotOnPort {
        /// The partition's name.
        partition: String,
        /// The port.
        port: String,
    },
    /// An IOC lists no port.
    #[error("an IOC must be reachable on at least one port")]
    NoPorts,
    /// An IOC lists one port twice.
    #[error("port {0:?} is listed twice")]
    DuplicatePortRef(String),
    /// An ALUA state that is not configurable.
    #[error(
        "invalid ALUA state {0:?}: expected \"active/optimized\", \"active/non-optimized\", \"standby\" or \"unavailable\""
    )]
    BadAlua(String),
    /// `exports` of the wrong shape.
    #[error(
        "expected a table of LUN number = \"LUN name\", or an array of {{ lun = N, name = \"...\" }}"
    )]
    BadExports,
    /// An export value that is not a LUN name.
    #[error("expected a LUN name (a string)")]
    BadExportName,
    /// A LUN number that does not parse.
    #[error("invalid LUN number {0:?}: expected an integer 0..=16383")]
    BadLunNumber(String),
    /// A LUN number that parses but cannot be encoded single-level.
    #[error("{0}")]
    LunNumber(#[from] scsi::LunError),
    /// One LUN number twice in one IOC.
    #[error("LUN number {lun} is already exported by this IOC at {first}")]
    DuplicateLunNumber {
        /// The number.
        lun: u32,
        /// Key path of the first export of it.
        first: String,
    },
    /// One LUN at two numbers in one IOC: two paths on one I_T nexus confuse multipath.
    #[error("LUN {name:?} is already exported by this IOC at {first}")]
    DuplicateExport {
        /// The LUN name.
        name: String,
        /// Key path of the first export of it.
        first: String,
    },
    /// An export names a LUN that no `[[lun]]` defines.
    #[error("LUN {name:?} is not defined (defined: {defined})")]
    UnknownLun {
        /// The name.
        name: String,
        /// The defined LUN names, comma-separated.
        defined: String,
    },
    /// `allow = []`.
    #[error(
        "an empty allow list admits nobody; list initiators, or write allow = [\"any\"] (use enabled = false to take the IOC offline)"
    )]
    EmptyAllow,
    /// `"any"` beside other entries.
    #[error("\"any\" admits every initiator; remove the other entries or remove \"any\"")]
    AnyWithOthers,
    /// An ACL entry that does not parse.
    #[error("invalid initiator {text:?}: {why}")]
    BadInitiator {
        /// The text.
        text: String,
        /// Why.
        why: &'static str,
    },
    /// One ACL entry twice.
    #[error("initiator {0:?} is listed twice")]
    DuplicateInitiator(String),
    /// A LUN with no backing, or more than one.
    #[error("{0}")]
    Backing(&'static str),
    /// A relative backing path.
    #[error("backing path {0:?} must be absolute")]
    RelativePath(String),
    /// An `rbd` value that is not `pool/image`.
    #[error("rbd = {0:?}: write the image as \"pool/image\" (one slash, neither part empty)")]
    BadRbdImage(String),
    /// A control socket path that is relative or longer than a Unix socket address holds.
    #[error("control socket path {0:?} must be absolute and at most 107 bytes")]
    BadSocketPath(String),
    /// A control group this host does not have.
    #[error("control group {0:?} does not exist on this host (a group name or numeric ID)")]
    UnknownGroup(String),
    /// Two LUNs on one file or device.
    #[error("backing {path:?} is already used by {first}")]
    DuplicateBacking {
        /// The path.
        path: String,
        /// Key path of the first LUN on it.
        first: String,
    },
    /// A size that does not parse.
    #[error(
        "invalid size {0:?}: expected bytes or a number with a unit, as \"4096\", \"64MiB\", \"1GiB\" or \"10GB\" (KiB MiB GiB TiB, KB MB GB TB)"
    )]
    BadSize(String),
    /// Size zero.
    #[error("size must be greater than zero")]
    ZeroSize,
    /// A size past the largest file offset.
    #[error(
        "size {0} is too large (the largest is 9223372036854775807 bytes, the largest file offset)"
    )]
    SizeTooLarge(String),
    /// A size that is not whole blocks.
    #[error("size {size_bytes} bytes is not a multiple of the block size {block_size}")]
    SizeNotBlocks {
        /// The size.
        size_bytes: u64,
        /// The block size.
        block_size: u32,
    },
    /// A RAM LUN larger than the machine's memory.
    #[error(
        "a RAM LUN of {size_bytes} bytes is larger than this machine's memory ({memory_bytes} bytes)"
    )]
    RamTooLarge {
        /// The LUN's size.
        size_bytes: u64,
        /// MemTotal.
        memory_bytes: u64,
    },
    /// A block size other than 512 or 4096.
    #[error("block size {0} is not supported: expected 512 or 4096")]
    BadBlockSize(i64),
    /// A physical block size that is not a power-of-two multiple of the logical block size
    /// within READ CAPACITY(16)'s 4-bit exponent.
    #[error(
        "physical_block_size {value}: expected the block size {block_size} times a power of two up to 32768 (as 4096 for 512-byte blocks)"
    )]
    BadPhysicalBlockSize {
        /// The value.
        value: i64,
        /// The LUN's logical block size.
        block_size: u32,
    },
    /// An RDMA-CM port outside 1..=65535.
    #[error("RDMA-CM port {0} is not a TCP port number (1..=65535)")]
    BadRdmaCmPort(i64),
    /// A value outside what its key accepts.
    #[error("{why}")]
    BadValue {
        /// The key.
        key: &'static str,
        /// What is wrong and what is expected.
        why: String,
    },
    /// A login form other than "ib-cm" or "rdma-cm", or none at all.
    #[error("login forms {0}: expected a non-empty list of \"ib-cm\" and \"rdma-cm\"")]
    BadLoginForms(String),
}

/// One problem in a config file.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    /// The file (as the caller named it).
    pub origin: String,
    /// Where in it.
    pub location: Location,
    /// Why.
    #[source]
    pub kind: ConfigErrorKind,
}

impl ConfigError {
    fn render(&self) -> String {
        match &self.location {
            Location::File => format!("{}: {}", self.origin, self.kind),
            Location::Key(key) => format!("{}: {}: {}", self.origin, key, self.kind),
            Location::Position { line, column } => {
                format!("{}:{}:{}: {}", self.origin, line, column, self.kind)
            }
        }
    }
}

/// Every problem found in a config, in file order within each check; never empty.
#[derive(Debug)]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// One error per line.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// What a warning is about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarningKind {
    /// A LUN no IOC exports: no initiator can reach it.
    NotExported,
}

impl fmt::Display for WarningKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WarningKind::NotExported => "not exported by any IOC; no initiator can reach it",
        })
    }
}

/// Something legal but probably not meant; the daemon logs it and starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The file.
    pub origin: String,
    /// Where in it.
    pub location: Location,
    /// What.
    pub kind: WarningKind,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Location::Key(key) => write!(f, "{}: warning: {}: {}", self.origin, key, self.kind),
            _ => write!(f, "{}: warning: {}", self.origin, self.kind),
        }
    }
}

/// Collects errors and warnings while a file is validated.
#[derive(Debug)]
pub(super) struct Sink {
    origin: String,
    pub(super) errors: Vec<ConfigError>,
    pub(super) warnings: Vec<ConfigWarning>,
}

impl Sink {
    pub(super) fn new(origin: &str) -> Sink {
        Sink {
            origin: origin.to_owned(),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Records an error at `location`.
    pub(super) fn at(&mut self, location: Location, kind: ConfigErrorKind) {
        self.errors.push(ConfigError {
            origin: self.origin.clone(),
            location,
            kind,
        });
    }

    /// Records an error at key path `key`.
    pub(super) fn key(&mut self, key: &KeyPath, kind: ConfigErrorKind) {
        self.at(Location::Key(key.to_string()), kind);
    }

    /// Records a warning at key path `key`.
    pub(super) fn warn(&mut self, key: &KeyPath, kind: WarningKind) {
        self.warnings.push(ConfigWarning {
            origin: self.origin.clone(),
            location: Location::Key(key.to_string()),
            kind,
        });
    }

    /// Records the error of `result`, if any, at `key`, and passes on its value.
    pub(super) fn check<T>(
        &mut self,
        key: &KeyPath,
        result: Result<T, ConfigErrorKind>,
    ) -> Option<T> {
        result.map_err(|kind| self.key(key, kind)).ok()
    }
}

/// A dotted key path, built as validation descends (`ioc[1]` then `ioc[1].exports` ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct KeyPath(String);

impl KeyPath {
    /// The path of a top-level entry whose own name is its label: `lun "vol1"`.
    pub(super) fn named(kind: &str, name: &str) -> KeyPath {
        KeyPath(format!("{kind} {name:?}"))
    }

    /// `self.key` (or `key` at the top). A key that is not a bare TOML key (empty, or
    /// holding a dot, a space, a quote…) is written quoted, as in TOML, so that the path
    /// still names it, and unambiguously: `""`, `target."a.b"`.
    pub(super) fn key(&self, key: &str) -> KeyPath {
        let bare = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let key = if bare {
            key.to_owned()
        } else {
            toml::Value::String(key.to_owned()).to_string()
        };
        if self.0.is_empty() {
            KeyPath(key)
        } else {
            KeyPath(format!("{}.{key}", self.0))
        }
    }

    /// `self[index]`.
    pub(super) fn index(&self, index: usize) -> KeyPath {
        KeyPath(format!("{}[{index}]", self.0))
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TargetConfig;

    #[test]
    fn key_paths_quote_keys_that_are_not_bare() {
        let top = KeyPath::default();
        let p = top.key("ioc").index(1).key("exports").key("3");
        assert_eq!(p.to_string(), "ioc[1].exports.3");
        assert_eq!(top.key("target").key("a.b").to_string(), r#"target."a.b""#);
        // Found by the config_target fuzz target: an empty key was reported with an
        // empty path ("t.toml: : unknown key").
        assert_eq!(top.key("").to_string(), r#""""#);
        let e = TargetConfig::from_str("\"\" = 1\n", "t.toml").expect_err("unknown key");
        let first = e.to_string();
        assert!(
            first.starts_with(r#"t.toml: "": unknown key; expected one of: target"#),
            "{first}"
        );
    }
}
