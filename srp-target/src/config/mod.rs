//! The target's configuration file (TOML): HCA ports, I/O controllers with their exports
//! and ACLs, and LUNs, validated into plain typed data.
//!
//! Contract: [`TargetConfig::from_path`] / [`TargetConfig::from_str`] either return a
//! complete, cross-checked [`TargetConfig`] (plus [`ConfigWarning`]s) or [`ConfigErrors`]
//! listing every problem found, each with the file, the key path and the reason, e.g.
//! `target.toml: ioc[1].exports.3: LUN "vol9" is not defined (defined: vol1, vol2)`.
//! Nothing here opens a backing file or touches the network: the daemon does that at start,
//! from a config that is already known to be whole, so it never starts half-configured.
//!
//! # Architecture
//! - [`file`](mod@file): serde structs mirroring the TOML, checked key by key so every
//!   unknown key and bad value is reported, not just the first.
//! - [`values`]: single-value parsers (names, GUIDs, sizes, addresses, LUN numbers).
//! - [`acl`]: [`Acl`] and its entries (port IDs, GUIDs).
//! - `validate`: raw structs to typed sections, then the cross-checks (names,
//!   references from IOCs to ports and LUNs); `unique` (addresses, backing paths, GUIDs
//!   and service IDs that must not repeat).
//! - [`error`]: [`ConfigError`] (file, [`Location`], [`ConfigErrorKind`]), [`ConfigErrors`],
//!   [`ConfigWarning`].
//!
//! The schema, with `examples/target.toml` as the complete annotated example:
//!
//! ```toml
//! [target]
//! node_guid = "0x0002c90300a1b2c0"   # required
//! oui = 0x001405                     # NAA company ID of LUN identities; default 0x001405
//! name = "array-1"                   # optional
//! rdma_cm_port = 5555                # RDMA-CM-form logins; default 5555
//! login_forms = ["ib-cm", "rdma-cm"] # the login forms served (default both); Linux
//!                                    # ib_srpt on RoCE serves only "rdma-cm"
//! control_socket = "/run/srp-target/array-1.sock"  # default: from the name
//! control_group = "srpadmin"   # optional: its members may use the socket (else root only)
//! state_dir = "/var/lib/srp-target/array-1"         # default: from the name
//! port_base = 1                # ALUA group and relative port of the first IOC (default 1)
//!
//! [[port]]
//! name = "p0"
//! address = "192.0.2.10"             # UDP 4791 unless ":port" is given
//!
//! [[lun]]
//! name = "vol1"                      # the LUN's identity (serial, NAA) derives from it
//! file = "/srv/srp/vol1.img"         # or device = "/dev/...", or ram = true
//! size = "64GiB"                     # required for RAM; creates a missing file
//! block_size = 512                   # or 4096
//! physical_block_size = 4096         # optional: 4 KiB sectors under 512-byte blocks
//! read_only = false
//! write_cache = true
//!
//! [[ioc]]
//! name = "ioc-a"
//! guid = "0002:c903:00a1:b2c3"
//! id_ext = "0x0002c90300a1b2c3"      # default: the GUID
//! service_id = "0x0002c90300a1b2c3"  # default: the GUID
//! ports = ["p0"]
//! enabled = true
//! alua = "active/optimized"
//! exports = { 0 = "vol1" }           # or [{ lun = 0, name = "vol1" }]
//! allow = ["any"]                    # required; or port IDs / "guid:..." entries
//!
//! [[peer]]                           # another appliance serving the same LUs (RBD)
//! name = "array-2"
//! port_groups = [3, 4]               # its groups; none may be this appliance's
//! alua = "active/non-optimized"
//! ```

pub mod acl;
pub mod emit;
pub mod error;
pub mod file;
pub mod partition;
pub mod peer;
pub mod values;

mod unique;
mod validate;

pub use acl::{Acl, AclEntry};
pub use error::{ConfigError, ConfigErrorKind, ConfigErrors, ConfigWarning, Location, WarningKind};
pub use partition::{DEFAULT_NAME as DEFAULT_PARTITION, PartitionConfig};
pub use peer::{DEFAULT_PORT_BASE, PeerConfig};

use crate::backend::BlockSize;
use crate::lu::{AluaState, Oui};
use access_layer::mad::ServiceId;
use access_layer::verbs::{DeviceSpec, ProviderKind};
use ib_verbs::Guid;
use srp::wire::{IoClass, PortId};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The default company ID for LUN NAA designators: 00-14-05, the one LIO uses, so that a
/// config without `oui` still yields identities that never change with the hardware.
pub const DEFAULT_OUI: u32 = 0x00_1405;

/// A whole, validated target configuration. Plain data: nothing is opened or bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetConfig {
    /// `[target]`.
    pub target: TargetSettings,
    /// `[[partition]]`: named P_Keys (the default partition is implicit).
    pub partitions: Vec<PartitionConfig>,
    /// `[[port]]`, in file order.
    pub ports: Vec<PortConfig>,
    /// `[[ioc]]`, in file order (IOC `i` is DM slot `i + 1`, ALUA group and relative port
    /// `port_base + i`).
    pub iocs: Vec<IocConfig>,
    /// `[[lun]]`, in file order.
    pub luns: Vec<LunConfig>,
    /// `[[peer]]`: other appliances serving the same LUs ([`peer`]).
    pub peers: Vec<PeerConfig>,
}

/// A validated config and what was legal but suspicious in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    /// The config.
    pub config: TargetConfig,
    /// Warnings for the log (e.g. a LUN no IOC exports).
    pub warnings: Vec<ConfigWarning>,
}

/// `[target]`: the appliance as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetSettings {
    /// Node GUID of the (soft) HCA.
    pub node_guid: Guid,
    /// Company ID for LUN NAA designators ([`crate::lu::LunIdentity::derive`]).
    pub oui: Oui,
    /// A name for logs and the control socket.
    pub name: Option<String>,
    /// The RDMA-CM (TCP port space) port logins in the RDMA-CM form name (Linux ib_srp
    /// `dest=ip:port`); default [`DEFAULT_RDMA_CM_PORT`].
    pub rdma_cm_port: u16,
    /// The login forms served; a REQ in another form is refused by the CM (invalid
    /// service ID), as ib_srpt on a RoCE port refuses the IB CM form.
    pub login_forms: LoginForms,
    /// Where the daemon serves its control socket; default
    /// `/run/srp-target/<name>.sock` (`target.sock` without a name).
    pub control_socket: PathBuf,
    /// A group (its ID, resolved from `control_group`) whose members may use the control
    /// socket too (mode 0660); without one, root and the daemon's user only (0600).
    pub control_group: Option<u32>,
    /// Where the target keeps state that must survive a restart (saved mode pages); default
    /// `/var/lib/srp-target/<name>` (`target` without a name).
    pub state_dir: PathBuf,
    /// Bounds on channels and the probing of idle ones.
    pub guards: ChannelGuards,
    /// The ALUA target port group and relative target port of the first IOC; IOC `i` is
    /// `port_base + i` ([`peer`]). Default [`DEFAULT_PORT_BASE`].
    pub port_base: u16,
}

/// What keeps a flood of logins, or initiators that vanish without a word, from pinning
/// the target's memory: every channel holds its registered buffers until it closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelGuards {
    /// A channel that has heard nothing from its initiator for this long is probed (an
    /// SRP_CRED_REQ, which the initiator's RC QP must acknowledge): a peer that is gone
    /// fails the probe's retries and the channel closes. `None`: never probed.
    pub idle_probe: Option<std::time::Duration>,
    /// Channels at once, all IOCs and ports.
    pub max_channels: usize,
    /// Channels at once whose logins came from one address (whatever initiator port IDs
    /// they claim).
    pub max_channels_per_address: usize,
    /// Accepted logins whose initiator has not yet confirmed the connection (REP sent, no
    /// RTU and no IU yet).
    pub max_half_open: usize,
}

impl Default for ChannelGuards {
    fn default() -> Self {
        ChannelGuards {
            idle_probe: Some(std::time::Duration::from_secs(10)),
            max_channels: 256,
            max_channels_per_address: 64,
            max_half_open: 16,
        }
    }
}

/// Which login forms the target serves (architecture decision 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginForms {
    /// The native IB CM form: each IOC's service ID.
    pub ib_cm: bool,
    /// The RDMA-CM form: the RDMA-CM port's service ID.
    pub rdma_cm: bool,
}

impl Default for LoginForms {
    /// Both.
    fn default() -> Self {
        LoginForms {
            ib_cm: true,
            rdma_cm: true,
        }
    }
}

/// The state directory's parent unless `[target] state_dir` says otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/srp-target";

/// The control socket's directory unless `[target] control_socket` says otherwise.
pub const DEFAULT_CONTROL_DIR: &str = "/run/srp-target";

/// The RDMA-CM port the target listens on unless `[target] rdma_cm_port` says otherwise.
pub const DEFAULT_RDMA_CM_PORT: u16 = 5555;

/// `[[port]]`: one HCA port, a RoCEv2 address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// The name IOCs refer to it by.
    pub name: String,
    /// IP address and UDP port (4791 unless configured). Under rdma-core: the address
    /// whose GID the RDMA device's port carries (its RDMA-CM address); the UDP port is the
    /// NIC's.
    pub address: SocketAddr,
    /// Its HCA P_Key table, in order (index 0 first): the partitions it is on. Default:
    /// the default partition only.
    pub partitions: Vec<ib_verbs::PKey>,
    /// The verbs provider: the software RoCE HCA (default) or an RDMA device through
    /// rdma-core (`provider = "rdma-core"`).
    pub provider: ProviderKind,
    /// rdma-core: the RDMA device (`device = "rxe0"`); `None`: the one whose GID table
    /// holds `address`.
    pub device: Option<String>,
    /// rdma-core: the device's port number; `None`: the port holding `address`'s GID.
    pub device_port: Option<u8>,
    /// rdma-core: the GID index; `None`: `address`'s RoCEv2 GID.
    pub gid_index: Option<u8>,
}

impl PortConfig {
    /// The device to open for this port; a software device gets `node_guid`.
    pub fn device_spec(&self, node_guid: Guid) -> DeviceSpec {
        DeviceSpec {
            provider: self.provider,
            address: self.address,
            node_guid,
            device: self.device.clone(),
            port: self.device_port,
            gid_index: self.gid_index,
            first_qpn: 0,
            gso: true,
        }
    }
}

/// `[[ioc]]`: one I/O controller, i.e. one SRP target port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IocConfig {
    /// Its name.
    pub name: String,
    /// IOC GUID (DM IOControllerProfile, low half of the target port ID).
    pub guid: Guid,
    /// Identifier extension (high half of the target port ID; ServiceName
    /// `SRP.T10:<id_ext>`). Defaults to the GUID, as ib_srpt's `srpt_service_guid`.
    pub id_ext: u64,
    /// IB CM service ID it listens on. Defaults to the IOC GUID, as ib_srpt, which uses
    /// `srpt_service_guid` as IOC GUID, id_ext and `ib_cm_listen` service ID alike
    /// (../shared/research/srp-linux.md §2.4, §4.1).
    pub service_id: ServiceId,
    /// Names of the [`PortConfig`]s it is reachable on (at least one, all defined).
    pub ports: Vec<String>,
    /// Whether it accepts logins at start (the control socket can change it).
    pub enabled: bool,
    /// ALUA state of its target port group.
    pub alua: AluaState,
    /// LUN number → name of a [`LunConfig`].
    pub exports: BTreeMap<scsi::Lun, String>,
    /// Who may log in.
    pub allow: Acl,
    /// Whether a login may join or replace (MULTI-CHANNEL ACTION) the channels of an I_T
    /// nexus that came from another address; default false: an initiator port ID's
    /// channels all come from one address, so a host cannot take over another's nexus
    /// (its reservations included) by claiming its port ID.
    pub nexus_from_any_address: bool,
    /// The partitions it is exported on: a login on another is refused. Each is on every
    /// port of the IOC. Default: the default partition.
    pub partitions: Vec<ib_verbs::PKey>,
}

impl IocConfig {
    /// The SRP target port identifier it answers to: `id_ext ‖ IOC GUID` (r16a).
    pub fn target_port_id(&self) -> PortId {
        PortId::new(self.id_ext, self.guid, IoClass::SrpR16a)
    }
}

/// `[[lun]]`: one logical unit and its backing store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LunConfig {
    /// Unique name; the LUN's identity is a pure function of it.
    pub name: String,
    /// Where the blocks live.
    pub backing: Backing,
    /// Logical block size.
    pub block_size: BlockSize,
    /// Physical block size in bytes, when configured (a power-of-two multiple of
    /// `block_size`); `None`: a block device's own, else `block_size`.
    pub physical_block_size: Option<u32>,
    /// Reject writes.
    pub read_only: bool,
    /// A read-only LUN of a block device may share it with whoever has claimed it (a
    /// mount, device-mapper, another exclusive opener): asked for explicitly; otherwise a
    /// claimed device is refused (`backend::claim`).
    pub allow_claimed: bool,
    /// Initial WCE; off makes every write durable before status.
    pub write_cache: bool,
    /// Whether an initiator may change WCE with MODE SELECT (saved across restarts in the
    /// state directory when it does so with SP=1); default off: WCE is the configuration's.
    pub write_cache_changeable: bool,
    /// A write log recording every write, flush and discard that reaches the backing file
    /// or device, for crash-consistency checking (`writelog`); `None`: not recorded.
    pub record_writes: Option<PathBuf>,
}

/// A LUN's backing store. Sizes are whole blocks of the LUN's block size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A regular file. With a size it is created if missing (and must have exactly that
    /// size if present); without, it must exist.
    File {
        /// Absolute path.
        path: PathBuf,
        /// Size in bytes, if configured.
        size_bytes: Option<u64>,
    },
    /// A block device; its size is the device's.
    Device {
        /// Absolute path.
        path: PathBuf,
    },
    /// Memory, zero-filled at start, lost at exit.
    Ram {
        /// Size in bytes.
        size_bytes: u64,
    },
    /// A Ceph RBD image; its size is the image's.
    Rbd(RbdBacking),
}

/// Where an RBD LUN's image is, and how to reach its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RbdBacking {
    /// The pool.
    pub pool: String,
    /// The image.
    pub image: String,
    /// The cluster's configuration file (`ceph_conf`, default `/etc/ceph/ceph.conf`).
    pub conf: PathBuf,
    /// The client id without `client.` (`ceph_client`); `None`: `admin`.
    pub client: Option<String>,
    /// The client's keyring (`ceph_keyring`); `None`: the one the configuration names.
    pub keyring: Option<PathBuf>,
}

impl RbdBacking {
    /// `pool/image`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.pool, self.image)
    }
}

impl TargetConfig {
    /// Reads and validates the file at `path`; errors name it as given.
    pub fn from_path(path: &Path) -> Result<Loaded, ConfigErrors> {
        let origin = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => TargetConfig::from_str(&text, &origin),
            Err(e) => Err(ConfigErrors(vec![ConfigError {
                origin,
                location: Location::File,
                kind: ConfigErrorKind::Read(e),
            }])),
        }
    }

    /// Validates `text`; `origin` names it in messages (usually the file path).
    pub fn from_str(text: &str, origin: &str) -> Result<Loaded, ConfigErrors> {
        validate::validate(text, origin)
    }

    /// The port named `name`.
    pub fn port(&self, name: &str) -> Option<&PortConfig> {
        self.ports.iter().find(|p| p.name == name)
    }

    /// The LUN named `name`.
    pub fn lun(&self, name: &str) -> Option<&LunConfig> {
        self.luns.iter().find(|l| l.name == name)
    }
}
