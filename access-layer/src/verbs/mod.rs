//! Verbs over a channel interface: what the access layer and everything above it use to
//! reach an HCA, so they never depend on one provider (ARCHITECTURE §3 item 2).
//!
//! Contract:
//! - **Verbs never block.** Resource verbs ([`ChannelInterface::alloc_pd`],
//!   [`ChannelInterface::create_qp`], …) return a [`Completion`] at once; the provider
//!   completes it later from its own thread, never inside the verb call (the IRP model of
//!   the 2005 IBAL "async verbs at DISPATCH" thread, windows.md §1.10). Data-path verbs
//!   (post, poll, arm) are direct calls returning `Result`.
//! - **Dispatch context.** Completion routines and asynchronous event handlers run at
//!   "dispatch level" ([`in_dispatch`]), as do the provider's completion thread and, later,
//!   the port-driver models. There, anything that blocks (e.g. [`Completion::wait`],
//!   every [`SyncCa`] verb) trips the [`verifier`]: a panic in debug and test builds,
//!   [`VerbsError::BlockingAtDispatch`] in release. The asynchronous path (register a
//!   routine, start the next verb from it) is always allowed.
//! - [`SyncCa`] is the blocking wrapper, for threads that may block.
//!
//! Modules: [`dispatch`] (the marker), [`verifier`], [`completion`] (the IRP analogue),
//! [`doorbell`] (what a CQ notification rings to wake the thread that serves it),
//! [`ci`] (the [`ChannelInterface`] trait), [`soft`] ([`SoftCa`], the provider over the
//! software HCA) and [`sync`] ([`SyncCa`]).

pub mod ci;
pub mod completion;
pub mod dispatch;
pub mod doorbell;
// The provider over the software HCA's UDP driver (`hca::driver`, Linux only). On Windows the
// `ChannelInterface` is implemented over the platform's kernel verbs provider instead.
#[cfg(target_os = "linux")]
pub mod soft;
pub mod sync;
pub mod verifier;

pub use ci::{CaAttr, CaStats, ChannelInterface, EventHandler, MrSpec, PortAttr};
pub use completion::{Completer, Completion, CompletionPool};
pub use dispatch::{DispatchGuard, at_dispatch, in_dispatch};
pub use doorbell::Doorbell;
#[cfg(target_os = "linux")]
pub use soft::SoftCa;
pub use sync::SyncCa;

/// Why a verb failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// The provider refused the verb.
    #[error(transparent)]
    Hca(#[from] hca::engine::VerbsError),
    /// A chained post was refused at request `index`; the requests before it stay posted.
    #[error("post_send_list: request {index} refused: {source}")]
    PostList {
        /// Index of the refused request in the list.
        index: usize,
        /// Why.
        source: hca::engine::VerbsError,
    },
    /// A blocking call was made at dispatch level (the verifier trips).
    #[error("blocking call `{call}` at dispatch level")]
    BlockingAtDispatch {
        /// The blocking call, e.g. `Completion::wait`.
        call: &'static str,
    },
    /// The channel adapter is not open: never opened, closed, or its provider went away.
    #[error("the channel adapter is not open")]
    Closed,
    /// A blocking wait gave up; the operation goes on.
    #[error("timed out waiting for a completion")]
    TimedOut,
    /// The provider dropped the operation without completing it.
    #[error("the operation was abandoned by its provider")]
    Abandoned,
    /// The result already went to another consumer of the same completion.
    #[error("the completion's result was already claimed by another consumer")]
    AlreadyClaimed,
    /// The provider does not implement this verb.
    #[error("verb `{verb}` is not supported by this provider")]
    Unsupported {
        /// The verb.
        verb: &'static str,
    },
    /// A device could not make a transition (a client device's power IRP failed).
    #[error("{device}: {reason}")]
    DeviceFailed {
        /// The device.
        device: String,
        /// Why.
        reason: String,
    },
    /// The HCA is powered down and its queue of requests to replay on power-up is full.
    #[error("the HCA is powered down and {max} requests already wait for power-up")]
    PoweredDownQueueFull {
        /// The queue's bound.
        max: usize,
    },
}
