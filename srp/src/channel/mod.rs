//! The sans-IO channel logic both ends of an SRP RDMA channel share: request-limit (credit)
//! accounting, outstanding-tag tracking, and turning data buffer descriptors into a plan of
//! RDMA transfers with residuals.
//!
//! Nothing here touches a queue pair, a clock or a thread: callers feed in the IUs they
//! received and the negotiated login parameters, and get back decisions (accept, reject with a
//! [`ChannelError`], the REQUEST LIMIT DELTA to put in a response, the RDMA operations to post).
//!
//! Files: [`credits`] (target and initiator views of the request limit), [`tags`] (the
//! outstanding-tag table), [`data`] (descriptor validation, external descriptor tables, RDMA
//! operation splitting, residuals), `error` ([`ChannelError`]).

pub mod credits;
pub mod data;
mod error;
pub mod tags;

pub use credits::{InitiatorCredits, Spend, TargetCredits};
pub use data::{Buffer, DataLimits, DataPlan, RdmaOp};
pub use error::ChannelError;
pub use tags::TagTable;
