//! The driver glue between one sans-IO [`crate::channel::TargetChannel`] and one RC queue
//! pair of the port's device (any provider, through the access layer's verbs): receive
//! buffers, RDMA transfers, SCSI execution off the completion path, responses.
//!
//! The channel core decides (credits, tags, descriptor plans, faults); this module only
//! moves bytes. Per channel it registers one memory region (receive ring, response ring,
//! bounce buffers and descriptor-table buffers, all sized at creation from the login's
//! window, IU lengths and the transfer limit), so registered memory is bounded and released
//! when the channel closes. The QP is connected by the caller's CM step ([`crate::daemon`];
//! tests also connect it directly with the attributes a CM exchange would carry).
//!
//! Files: [`verbs`] (every verb of a channel in one place: create, connect, post, poll,
//! arm, and the teardown that drains the QP before its memory is released), [`send_queue`]
//! (the send queue's credits: a chain that does not fit waits for completions), [`memory`]
//! (the channel's registered region and its layout), [`executor`] (the
//! boundary to SCSI execution: [`Executor`], [`Inline`]), [`workers`] (a bounded thread
//! pool behind that boundary), [`command`] (one command in flight and work-request ids),
//! [`channel_io`] ([`ChannelIo`], the completion-driven loop, with its `transfer` steps —
//! table fetch, data-out READs, execution — and `respond` — data-in WRITEs chained before
//! the SRP_RSP (sent WITH INVALIDATE of the descriptors' one R_Key when the SRP_CMD asked:
//! docs/protocol-notes.md), CHECK CONDITION, task management — and `abort` — PREEMPT AND ABORT across
//! channels ([`NexusAbort`], [`settle_aborts`]) and SRP_CRED_REQ for credits owed by aborted
//! commands), [`counters`] (what each session has done, for the control socket).

pub mod channel_io;
pub mod command;
pub mod counters;
pub mod executor;
pub mod memory;
pub mod send_queue;
pub mod verbs;
pub mod workers;

pub use channel_io::{
    AbortScope, ChannelIo, ChannelIoConfig, IoError, IoState, NexusAbort, settle_aborts,
};
pub use counters::SessionCounters;
pub use executor::{AbortFlag, Done, Drain, Executor, Inline, Job, NexusInfo, Reply, Staging};
pub use memory::Layout;
pub use workers::Workers;
