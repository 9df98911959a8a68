//! One SRP RDMA channel of the target, sans-IO: the IUs the initiator sent go in as bytes,
//! requests to act on and the bytes of our responses come out.
//!
//! The channel owns the credit window and the outstanding-tag table ([`srp::channel`]), turns
//! each SRP_CMD's descriptors into a [`srp::channel::DataPlan`], and decides what a hostile or
//! broken initiator gets: a CHECK CONDITION for a bad command, or a [`Fault`] (send
//! SRP_T_LOGOUT with its reason and disconnect this channel only) for a broken protocol.
//! IUs arriving before the CM RTU are parked and replayed on [`TargetChannel::on_rtu`], as
//! ib_srpt does.
//!
//! Files: [`state`] (the channel state machine, table-driven), [`core`] ([`TargetChannel`]:
//! receive, respond, abort), [`fault`] ([`Fault`] and its T_LOGOUT reasons).

pub mod core;
pub mod fault;
pub mod state;

pub use self::core::{Request, TargetChannel};
pub use fault::Fault;
pub use state::{ChannelEvent, ChannelState};
