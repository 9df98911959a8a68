//! The IB access layer (IBAL): everything between the verbs of the `hca` crate and the SRP
//! initiator and target.
//!
//! Contract today: byte-exact **MAD wire formats** for the General Services Interface (QP1):
//! the common MAD and RMPP headers, Communication Manager messages (and the RDMA-CM
//! private-data header), Subnet Administration PathRecords, Device Management attributes,
//! and [`mad::parse_any`], which turns 256 received bytes into a typed MAD. Parsing never
//! panics; emitting writes every byte. Later: verbs wrappers, MAD services (GSI agent,
//! transactions, retries), CM state machines, DM agent, IOC PnP and power management.
//!
//! It sits on `hca` (identity newtypes: [`hca::Guid`], [`hca::Gid`], [`hca::Qpn`] …) and
//! `wirekit` (the [`wirekit::WireRepr`] contract and open enums).
//!
//! # Architecture
//! - [`mad`]: wire formats, a file per concept —
//!   [`mad::common`] (24-byte header, code points, whole-MAD helpers), [`mad::rmpp`],
//!   [`mad::ids`] (ServiceId, CommId, Tid, MTU codes), [`mad::class_port_info`],
//!   [`mad::cm`] (REQ, REP, REJ, MRA, RTU, DREQ, DREP, RDMA-CM header), [`mad::sa`]
//!   (SA header, PathRecord), [`mad::dm`] (IOUnitInfo, IOControllerProfile,
//!   ServiceEntries, SRP constants) and [`mad::any`] (the dispatching parser).
#![deny(unsafe_code)]

pub mod cm;
pub mod ctl;
pub mod dm;
pub mod gsi;
pub mod mad;
pub mod pnp;
pub mod power;
pub mod verbs;
