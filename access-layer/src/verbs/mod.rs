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
//! [`ci`] (the [`ChannelInterface`] trait), [`port`] ([`PortInterface`]: a port's
//! attributes, P_Key table, counters and clock), [`device`] (a provider's device opened
//! through a [`Fabric`]: the one seam where a provider is chosen) and [`sync`]
//! ([`SyncCa`]). Providers implement these interfaces over the `ib-verbs` vocabulary: the
//! software HCA (`hca`), rdma-core (`rdma-core-provider`) and the simulator's net.
#[allow(unused_imports)]
use crate::prelude::*;

pub mod ci;
pub mod completion;
pub mod device;
pub mod dispatch;
#[cfg(feature = "std")]
pub mod doorbell;
pub mod kernel_thread;
pub mod kernel_wait;
pub mod port;
pub mod sync;
pub mod verifier;

pub use ci::{CaAttr, CaCaps, CaStats, ChannelInterface, EventHandler, MrSpec, PortAttr};
pub use completion::{Completer, Completion, CompletionPool};
pub use device::{Device, DeviceSpec, Fabric, OpenError, PortInfo, ProviderKind};
pub use dispatch::{DispatchGuard, KernelLevel, at_dispatch, in_dispatch, install_kernel_level};
#[cfg(feature = "std")]
pub use doorbell::Doorbell;
pub use kernel_thread::{
    KernelThread, KernelThreadError, KernelThreads, install_kernel_threads, spawn_thread,
};
pub use kernel_wait::{KernelEvent, KernelWait, install_kernel_wait, new_event};
pub use port::PortInterface;
pub use sync::SyncCa;

/// Why a verb failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// The provider refused the verb.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A chained post was refused at request `index`; the requests before it stay posted.
    #[error("post_send_list: request {index} refused: {source}")]
    PostList {
        /// Index of the refused request in the list.
        index: usize,
        /// Why.
        source: ProviderError,
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

/// Why a provider refused a verb: what kind of refusal, and the provider's own words
/// (which name the object and the rule).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    /// What kind of refusal.
    pub kind: ProviderErrorKind,
    /// The provider's message.
    pub message: String,
}

impl ProviderError {
    /// A refusal of `kind` saying `message`.
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> ProviderError {
        ProviderError {
            kind,
            message: message.into(),
        }
    }
}

/// The kinds of refusal every provider can report (rdma-core's errno values map onto them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProviderErrorKind {
    /// No such object (EINVAL on a handle, ENOENT).
    NoSuch,
    /// The object is still used by another (EBUSY).
    InUse,
    /// An argument, attribute or state transition the provider does not accept (EINVAL).
    Invalid,
    /// A queue or table is full, or memory ran out (ENOMEM, EAGAIN, ENOSPC).
    Exhausted,
    /// The request is not permitted (EPERM, EACCES).
    Denied,
    /// The provider or device does not support it (EOPNOTSUPP).
    Unsupported,
    /// The device failed or went away (EIO, ENODEV).
    Device,
    /// Anything else.
    Other,
}
