//! The asynchronous verbs the adapter starts at dispatch level (creating, connecting and
//! destroying the login's QP, replacing a discarded FRMR region) and their completions.
//!
//! A completion routine runs on the provider's dispatcher, at dispatch level, and must not
//! take the adapter lock (the verb may have been started under it): it only queues its
//! result here and queues the DPC, as a real miniport's IRP completion routine queues a
//! DPC. The DPC takes the results up at the start of its next round ([`Adapter::verbs_done`]),
//! under the adapter lock, where the state they continue lives. Each QP verb carries the
//! connection attempt it was started for: a result for an older attempt is stale (the
//! login timed out, the target disconnected meanwhile) and only its QP is released.
//!
//! [`Adapter::verbs_done`]: super::adapter::Adapter
#[allow(unused_imports)]
use crate::prelude::*;

use super::side::PortSide;
use access_layer::verbs::VerbsError;
use alloc::sync::Arc;
use ib_verbs::QpId;
use ib_verbs::mr::MrKey;
use ib_verbs::sync::Lock;

/// One completed asynchronous verb.
#[derive(Debug)]
pub(crate) enum VerbDone {
    /// The QP of connection attempt `attempt` was created (or not).
    QpCreated {
        attempt: u64,
        result: Result<QpId, VerbsError>,
    },
    /// The QP of connection attempt `attempt` reached RTS (or not).
    Connected {
        attempt: u64,
        result: Result<(), VerbsError>,
    },
    /// The fresh region (or window) for the discarded pool slot `slot`.
    Replaced {
        slot: usize,
        result: Result<MrKey, VerbsError>,
    },
    /// Something was released (a QP, a region); only a failure is worth a line.
    Released {
        what: &'static str,
        result: Result<(), VerbsError>,
    },
}

/// The completions waiting for the DPC (a leaf lock).
pub(crate) struct Pending {
    done: Lock<Vec<VerbDone>>,
    port: Arc<dyn PortSide>,
}

impl Pending {
    pub(crate) fn new(port: Arc<dyn PortSide>) -> Pending {
        Pending {
            done: Lock::new(Vec::new()),
            port,
        }
    }

    /// A completion routine that queues `f(result)` and the DPC.
    pub(crate) fn routine<T>(
        self: &Arc<Self>,
        f: impl FnOnce(Result<T, VerbsError>) -> VerbDone + Send + 'static,
    ) -> impl FnOnce(Result<T, VerbsError>) + Send + 'static {
        let me = self.clone();
        move |result| {
            me.done.lock().push(f(result));
            me.port.wake();
        }
    }

    /// Takes every queued completion, oldest first.
    pub(crate) fn take(&self) -> Vec<VerbDone> {
        core::mem::take(&mut *self.done.lock())
    }
}
