//! SRP information units, byte-exact (T10 SRP r16a, plus the SRP-2 immediate-data fields and
//! the RDMA-CM login form that Linux ib_srp and ib_srpt speak).
//!
//! Each IU is a zerocopy struct of its fixed part (`#[repr(C)]`, byte and big-endian fields, size
//! asserted at compile time) under a validated representation that implements
//! [`wirekit::WireRepr`]: `parse` never panics and accepts trailing bytes (IUs arrive in receive
//! buffers and CM private data larger than themselves); `emit` writes every byte, reserved
//! ones as zero. Code points are open enums, so an unknown value survives a round trip.
//!
//! Files: [`iu`] (IU type codes, tags, the any-IU parser), [`port_id`], [`login`] (REQ, RSP,
//! REJ), [`logout`] (I_LOGOUT, T_LOGOUT), [`tsk_mgmt`], [`cmd`], [`desc`] (direct, indirect and
//! immediate data descriptors), [`rsp`], [`cred`] (CRED_REQ/RSP), [`aer`] (AER_REQ/RSP).

pub mod aer;
pub mod cmd;
pub mod cred;
pub mod desc;
mod error;
pub mod iu;
pub mod login;
pub mod logout;
pub mod port_id;
pub mod rsp;
pub mod tsk_mgmt;

pub use error::WireError;
pub use iu::{AnyIu, IuType, SolicitFlags, Tag};
pub use port_id::{IoClass, PortId, PortIdParseError};
