//! [`IocWatch`]: what the adapter's own Device Management client reported — the client
//! sweeps the target's I/O unit every `ioc_watch` period inside the connection manager's
//! MAD service (`access_layer::mads`, on the adapter's QP1) — how a driver that sees its
//! device's life (the iSCSI model) learns that its IOC left the unit or came back, through
//! the access layer's PnP (IBAL's ibiou: the IOU's DM sweeps create and remove IOC
//! devices). The StorPort miniport runs without it: StorPort hides device removal from a
//! miniport. Under rdma-core there is no QP1 of ours, so no watch.
#[allow(unused_imports)]
use crate::prelude::*;

use access_layer::cm::ConnectionManager;
use access_layer::dm::DmEvent;

/// The sweeps' reports, oldest first, until taken.
#[derive(Debug, Default)]
pub(crate) struct IocWatch {
    /// What the sweeps reported, oldest first, until taken.
    pub(crate) events: Vec<DmEvent>,
}

impl IocWatch {
    /// Takes what the client reported since the last call; how many.
    pub(crate) fn collect(&mut self, cm: &mut dyn ConnectionManager) -> usize {
        let Some(client) = cm.device_management().and_then(|dm| dm.client.as_mut()) else {
            return 0;
        };
        let before = self.events.len();
        while let Some(ev) = client.poll_event() {
            tracing::debug!(?ev, "IOC watch");
            self.events.push(ev);
        }
        self.events.len() - before
    }
}
