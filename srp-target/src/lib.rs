//! The SRP target appliance: its configuration, LUN backends, the SCSI execution engine
//! every command runs through, and the sans-IO SRP side (login decisions, one channel's
//! protocol core). The storage side ([`backend`], [`lu`], [`exec`]) sits on the
//! transport-free [`scsi`] crate and sees SRP only as the initiator port identifier that
//! names an I_T nexus for persistent reservations; the SRP side sits on [`srp`].
//!
//! Contract: [`exec::LogicalUnit::execute`] takes a CDB, the data-out the transport already
//! fetched, and fills the data-in; SCSI failures come back as `Ok` with CHECK CONDITION and
//! the exact SPC sense, transport failures as `Err(`[`exec::TransportError`]`)`. Backends are
//! synchronous and `Send + Sync`, to be called from backend workers, never from the RDMA
//! engine's thread. A LUN's identity (serial, NAA) is a pure function of its configured
//! name, so it is the same through every IOC and across restarts (multipath relies on it).
//!
//! # Architecture
//! - [`appliance`]: [`appliance::Appliance`], a validated configuration made real: every LUN
//!   opened (all failures reported together), IOCs with login policy, ACL and exports.
//! - [`backend`]: the [`backend::Backend`] trait; [`backend::FileBackend`] (regular file or
//!   block device, FUA = write + fdatasync, UNMAP = punch hole; its system calls through a
//!   [`backend::medium::Medium`]), [`backend::RamBackend`].
//! - [`config`]: the TOML config file, validated into a plain [`config::TargetConfig`]
//!   (every error with file, key path and reason; nothing opened).
//! - [`lu`]: [`lu::identity`] (serial and NAA 6 from the unique name), [`lu::port`]
//!   (relative target ports, target port groups, ALUA states).
//! - [`channel`]: [`channel::TargetChannel`], one SRP channel sans-IO (parked IUs until RTU,
//!   credits, tags, descriptor plans, responses, aborts, T_LOGOUT on protocol faults).
//! - [`login`]: [`login::decide()`] (an SRP_LOGIN_REQ to LOGIN_RSP or LOGIN_REJ, sans-IO) and
//!   [`login::NexusTable`] (channels by I_T nexus).
//! - [`io`]: [`io::ChannelIo`], one channel's data path on an RC QP of the port's device
//!   (receive ring, RDMA READ/WRITE through bounded bounce buffers, responses), and the
//!   [`io::Executor`] boundary with its bounded pool [`io::Workers`].
//! - [`daemon`]: [`daemon::Daemon`], the running target: one device per configured port
//!   (whichever provider it names), CM listeners for both login forms, DM agents where the
//!   provider gives QP1, a [`io::ChannelIo`] per accepted login,
//!   T_LOGOUT and DREQ on shutdown.
//! - [`control`]: what an operator asks a running daemon (IOCs, ports, LUNs, sessions and
//!   their counters; IOCs and ports switched at run time; the running configuration and its
//!   reload), in process and on the control socket (JSON bodies, as the host daemon's).
//! - [`reload`]: a changed configuration applied live: the plan of changes, or every change
//!   that takes a restart with its reason.
//! - [`exec`]: [`exec::LogicalUnit`] and the command handlers: `inquiry`, `io`,
//!   `provisioning`, `mode`, `report`, `pr` (persistent reservations per I_T nexus).
//!
//! - [`writelog`]: crash-consistency testing — a recording layer beneath the file backend
//!   (every write, flush and discard that reached the file) and the checker that replays it
//!   to every crash point a power cut allows.
//!
//! Not yet here: REGISTER AND MOVE and SPEC_I_PT of persistent reservations (refused with
//! their exact sense; see [`exec::pr`]).
#![deny(unsafe_code)]

pub mod appliance;
pub mod atomic;
pub mod backend;
pub mod channel;
pub mod config;
pub mod control;
pub mod daemon;
pub mod exec;
pub mod io;
pub mod login;
pub mod lu;
pub mod reload;
pub mod state;
pub mod writelog;

pub use backend::{Backend, BackendError, BlockSize, FileBackend, MemSpan, RamBackend};
pub use exec::pr::ItNexus;
pub use exec::{CmdOutput, DataOut, LogicalUnit, LuConfig, Nexus, TransportError, check_condition};
pub use lu::{LunIdentity, Oui, PortIdentity, TargetPortGroup};
