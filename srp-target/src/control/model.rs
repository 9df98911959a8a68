//! What the control interface asks and answers, as plain data: the lists (IOCs, ports,
//! LUNs, sessions) with their counters, and the run-time switches.

use crate::exec::counters::LuCountersSnapshot;
use crate::io::SessionCounters;
use ib_verbs::{PortCounters, Resources};
use serde::{Deserialize, Serialize};
use srp::wire::PortId;
use std::net::SocketAddr;
use thiserror::Error;

#[path = "model_serde.rs"]
mod model_serde;

/// One I/O controller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IocStatus {
    /// The `[[ioc]]` name.
    pub name: String,
    /// Its GUID.
    pub guid: u64,
    /// Its identifier extension.
    pub id_ext: u64,
    /// Its IB CM service ID.
    pub service_id: u64,
    /// Whether it accepts logins.
    pub enabled: bool,
    /// LUNs it exports.
    pub luns: u32,
    /// Live sessions (channels) on it.
    pub sessions: u32,
}

/// One HCA port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStatus {
    /// The `[[port]]` name.
    pub name: String,
    /// Its RoCEv2 address.
    pub address: SocketAddr,
    /// Whether the port is up (an operator can take it down).
    pub active: bool,
    /// The verbs provider (`soft`, `rdma-core`) and the device and port it is on, as
    /// `rdma-core rxe0 port 1 gid 1`. Absent from an older daemon's answer: empty.
    #[serde(default)]
    pub provider: String,
    /// Live sessions (channels) on it.
    pub sessions: u32,
    /// Live device objects (QPs including GSI, CQs, MRs): a leak shows here.
    #[serde(with = "model_serde::resources")]
    pub resources: Resources,
    /// The port's counters by name, as its provider counts them: packets both ways and,
    /// on the software HCA, drops by reason (ICRC, unknown QP, P_Key, wrong peer or state,
    /// malformed, …), NAKs sent and received, retransmits; under rdma-core the kernel's
    /// port and hardware counters. On the socket: an object of the counters by name, in
    /// the provider's order (one a reader misses reads 0).
    #[serde(with = "model_serde::counters")]
    pub hca: PortCounters,
}

/// One logical unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LunStatus {
    /// The `[[lun]]` name (its identity).
    pub name: String,
    /// The NAA designator of VPD page 83h.
    pub naa: [u8; 16],
    /// Capacity in blocks.
    pub blocks: u64,
    /// Logical block size in bytes.
    pub block_size: u32,
    /// Write protected.
    pub read_only: bool,
    /// The caching page's WCE now.
    pub write_cache: bool,
    /// A flush failed and is latched: flushes and durable writes are refused until cleared.
    pub flush_failed: bool,
    /// What it has executed.
    pub counters: LuCountersSnapshot,
    /// Its service times (READ, medium-modifying, SYNCHRONIZE CACHE).
    #[serde(default)]
    pub latency: crate::exec::counters::LuLatency,
}

/// How a session was established.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LoginForm {
    /// The native IB CM form (SRP_LOGIN_REQ in the REQ's private data).
    IbCm,
    /// The RDMA-CM form (the IP CM header, then the SRP_LOGIN_REQ).
    RdmaCm,
}

impl LoginForm {
    /// Its name in events and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginForm::IbCm => "IB CM",
            LoginForm::RdmaCm => "RDMA-CM",
        }
    }
}

/// One session: an SRP channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// The channel's id (as in the daemon's events).
    pub channel: u64,
    /// The IOC's name.
    pub ioc: String,
    /// The port's name.
    pub port: String,
    /// The initiator port ID (on the socket: its `0x…` text).
    #[serde(with = "model_serde::port_id")]
    pub initiator: PortId,
    /// The login form.
    pub form: LoginForm,
    /// Credits granted at login (the window).
    pub window: u32,
    /// Negotiated initiator-to-target IU length.
    pub max_it_iu_len: u32,
    /// Commands in flight now.
    pub in_flight: u32,
    /// Seconds since login.
    pub age_secs: u64,
    /// What it has done.
    pub counters: SessionCounters,
}

/// How disabling an IOC treats its live sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DisableMode {
    /// SRP_T_LOGOUT, then a CM DREQ: the initiator is told.
    Logout,
    /// Torn down without a word: the initiator sees its transfers time out, as when the
    /// serving controller dies. For failover drills.
    Drop,
}

/// A control request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlRequest {
    /// The IOCs.
    ListIocs,
    /// The HCA ports.
    ListPorts,
    /// The LUNs.
    ListLuns,
    /// The live sessions.
    ListSessions,
    /// Enables or disables an IOC: a disabled one rejects logins and ends its sessions.
    SetIoc {
        /// The IOC's name.
        name: String,
        /// On or off.
        enabled: bool,
        /// When turning off: what its sessions get.
        mode: DisableMode,
    },
    /// Brings an HCA port up or down: a down port carries nothing either way, and its
    /// sessions end without a word.
    SetPort {
        /// The port's name.
        name: String,
        /// Up or down.
        enabled: bool,
    },
    /// Clears a LUN's latched flush error (the operator has dealt with its cause).
    ClearFlushError {
        /// The LUN's name.
        name: String,
    },
    /// The running configuration, as TOML text of the file's schema.
    RunningConfig,
    /// The metrics in the Prometheus text format ([`super::metrics`]).
    Metrics,
    /// Re-reads the daemon's configuration file and applies it
    /// ([`crate::reload`]); the control socket's form of SIGHUP. Turned into
    /// [`ControlRequest::Apply`] by whoever knows the file (the socket's service).
    Reload,
    /// Applies a validated configuration to the running daemon ([`crate::reload`]): all
    /// of it, or nothing with every reason it cannot be applied live.
    Apply(Box<crate::config::TargetConfig>),
}

/// The answer to a [`ControlRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControlAnswer {
    /// To ListIocs.
    Iocs(Vec<IocStatus>),
    /// To ListPorts.
    Ports(Vec<PortStatus>),
    /// To ListLuns.
    Luns(Vec<LunStatus>),
    /// To ListSessions.
    Sessions(Vec<SessionStatus>),
    /// To SetIoc and SetPort: how many sessions were ended; to ClearFlushError: 1 if a
    /// flush error was latched, else 0.
    Done {
        /// Sessions ended.
        sessions_ended: u32,
    },
    /// To RunningConfig: the TOML text, one line per entry (paged on the socket).
    Config(Vec<String>),
    /// To Metrics: the exposition text, one line per entry (paged on the socket).
    Metrics(Vec<String>),
    /// To Reload and Apply: what changed.
    Reloaded(ReloadReport),
}

/// What a reload changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadReport {
    /// One line per change carried out (`lun vol3 added (exported as LUN 2 by ioc-a)`);
    /// empty when the file equals the running configuration.
    pub changes: Vec<String>,
    /// Sessions logged out because their IOC went away or stopped admitting them.
    pub sessions_ended: u32,
}

/// Why a control request failed.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum ControlError {
    /// No IOC has that name.
    #[error("no IOC named {0:?}")]
    NoSuchIoc(String),
    /// No port has that name.
    #[error("no port named {0:?}")]
    NoSuchPort(String),
    /// No LUN has that name.
    #[error("no LUN named {0:?}")]
    NoSuchLun(String),
    /// The daemon is stopping or stopped.
    #[error("the daemon is not running")]
    Stopped,
    /// The daemon did not answer in time.
    #[error("the daemon did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The request could not be carried out; why (an answer too large for the socket, a
    /// request the daemon could not parse).
    #[error("{0}")]
    Failed(String),
    /// The configuration file is not valid: every error, as `srpctl target check` lists
    /// them. Nothing was changed.
    #[error("{0}\nnot valid; the running configuration is unchanged")]
    InvalidConfig(String),
    /// The configuration is valid but some of its changes cannot be made while running:
    /// each with its reason. Nothing was changed.
    #[error(
        "cannot apply without a restart; the running configuration is unchanged:\n  {}",
        .0.join("\n  ")
    )]
    ReloadRefused(Vec<String>),
    /// The daemon was started without a configuration file to re-read.
    #[error("the daemon has no configuration file to reload (started from a config in memory)")]
    NoConfigFile,
}
