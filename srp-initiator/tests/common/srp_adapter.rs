//! The SRP adapter configuration the end-to-end tests share: an adapter at `local` with
//! node GUID `guid` logging in to `target_port_id` at `target` over IB CM; 256 KiB
//! transfers, one LU, per-I/O FRMR, the CQ polled every 100 µs; and the one-LUN target
//! daemon they log in to ([`OneLunTarget`], [`daemon_options`]).
#![allow(dead_code, unreachable_pub)]

use ib_verbs::Guid;
use srp::initiator::TransportTimers;
use srp::wire::{IoClass, PortId};
use srp_initiator::{RegistrationMode, SrpAdapterConfig};
use std::net::IpAddr;
use std::time::Duration;

/// What differs between the tests' adapters.
pub struct Adapter {
    /// Our address.
    pub local: IpAddr,
    /// The target port's address.
    pub target: IpAddr,
    /// Our node GUID (the low half of our initiator port ID).
    pub guid: u64,
    /// The IOC's target port ID.
    pub target_port_id: PortId,
    /// The IOC's CM service ID.
    pub service_id: access_layer::mad::ServiceId,
    /// Credits asked for.
    pub queue_depth: u32,
    /// Reconnect delay, fast_io_fail and dev_loss.
    pub timers: TransportTimers,
    /// Per-command timeout.
    pub cmd_timeout: Duration,
}

impl Adapter {
    /// The full configuration, with per-I/O FRMR registration (set `registration` on the
    /// result for the all-memory region).
    pub fn config(self) -> SrpAdapterConfig {
        SrpAdapterConfig {
            local: self.local,
            target: self.target,
            node_guid: Guid(self.guid),
            first_qpn: 0,
            initiator_port_id: PortId::new(0, Guid(self.guid), IoClass::SrpR16a),
            target_port_id: self.target_port_id,
            service_id: self.service_id,
            login_via: srp_initiator::LoginVia::IbCm,
            max_transfer: 256 << 10,
            max_luns: 1,
            queue_depth: self.queue_depth,
            timers: self.timers,
            cmd_timeout: self.cmd_timeout,
            login_timeout: Duration::from_secs(5),
            max_wait: Duration::from_millis(100),
            registration: RegistrationMode::PerIo,
            partition: ib_verbs::PKey::DEFAULT,
            ioc_watch: None,
            provider: access_layer::verbs::ProviderKind::Soft,
            device: None,
            device_port: None,
            gid_index: None,
            fabric: providers::system(),
        }
    }
}

/// Transport timers of `reconnect`, `fast_io_fail` and `dev_loss` seconds.
pub fn timers(reconnect: u64, fast_io_fail: u64, dev_loss: u64) -> TransportTimers {
    TransportTimers::new(
        Some(Duration::from_secs(reconnect)),
        Some(Duration::from_secs(fast_io_fail)),
        Some(Duration::from_secs(dev_loss)),
    )
    .expect("timers valid")
}

/// What backs a [`OneLunTarget`]'s LUN.
pub enum Backing<'a> {
    /// A RAM disk.
    Ram,
    /// A file (created at this size if absent), write cache off: every write reaches it
    /// before the answer.
    File(&'a std::path::Path),
}

/// A target daemon's configuration: one port at `address`, one LUN exported as LUN 0 by one
/// IOC that allows any initiator.
pub struct OneLunTarget<'a> {
    /// The target's name (its log lines and INQUIRY's product revision stay the same).
    pub name: &'a str,
    /// The port's address.
    pub address: IpAddr,
    /// The target's node GUID.
    pub node_guid: u64,
    /// The IOC's GUID.
    pub ioc_guid: u64,
    /// The RDMA-CM TCP port, when not the default.
    pub rdma_cm_port: Option<u16>,
    /// The LUN's name.
    pub lun: &'a str,
    /// What backs it.
    pub backing: Backing<'a>,
    /// Its size, as the configuration writes it (`"16MiB"`).
    pub size: &'a str,
}

impl OneLunTarget<'_> {
    /// The configuration, parsed and checked as the daemon's own file would be.
    pub fn config(&self) -> srp_target::config::TargetConfig {
        let rdma_cm = self
            .rdma_cm_port
            .map_or_else(String::new, |p| format!("rdma_cm_port = {p}\n"));
        let backing = match self.backing {
            Backing::Ram => "ram = true".to_owned(),
            Backing::File(path) => format!("file = \"{}\"\nwrite_cache = false", path.display()),
        };
        let text = format!(
            r#"
[target]
node_guid = "{node_guid:#018x}"
name = "{name}"
{rdma_cm}
[[port]]
name = "p0"
address = "{address}"

[[lun]]
name = "{lun}"
{backing}
size = "{size}"

[[ioc]]
name = "ioc-a"
guid = "{ioc_guid:#018x}"
ports = ["p0"]
exports = {{ 0 = "{lun}" }}
allow = ["any"]
"#,
            node_guid = self.node_guid,
            name = self.name,
            address = self.address,
            lun = self.lun,
            size = self.size,
            ioc_guid = self.ioc_guid,
        );
        srp_target::config::TargetConfig::from_str(&text, &format!("{}.toml", self.name))
            .expect("config valid")
            .config
    }
}

/// The daemon options the end-to-end tests share: window 16, 256 KiB transfers, at most 64
/// descriptors in an indirect table.
pub fn daemon_options() -> srp_target::daemon::DaemonOptions {
    let mut options = srp_target::daemon::DaemonOptions::new(providers::system());
    options.limits.window = 16;
    options.limits.max_transfer = 256 << 10;
    options.limits.max_table_entries = 64;
    options
}
