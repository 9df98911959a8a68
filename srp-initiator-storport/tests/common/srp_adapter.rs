//! The SRP adapter configuration the end-to-end tests share: an adapter at `local` with
//! node GUID `guid` logging in to `target_port_id` at `target` over IB CM; 256 KiB
//! transfers, one LU, per-I/O FRMR, the CQ polled every 100 µs.
#![allow(unreachable_pub)]

use hca::Guid;
use srp::initiator::TransportTimers;
use srp::wire::{IoClass, PortId};
use srp_initiator_storport::srp::{RegistrationMode, SrpAdapterConfig};
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
            login_via: srp_initiator_storport::srp::LoginVia::IbCm,
            max_transfer: 256 << 10,
            max_luns: 1,
            queue_depth: self.queue_depth,
            timers: self.timers,
            cmd_timeout: self.cmd_timeout,
            login_timeout: Duration::from_secs(5),
            max_wait: Duration::from_millis(100),
            registration: RegistrationMode::PerIo,
            partition: hca::PKey::DEFAULT,
            ioc_watch: None,
            sim: None,
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
