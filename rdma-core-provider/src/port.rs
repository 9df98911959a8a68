//! [`RdmaPort`]: the port interface of an RDMA device's port — its identity, state, P_Key
//! table, the kernel's counters (sysfs), the device's live objects, and the connection
//! manager (librdmacm's: the kernel owns QP1 and the CM).

use crate::ca::RdmaCa;
use crate::cm::RdmaCm;
use crate::ffi::types::IBV_PORT_ACTIVE;
use access_layer::cm::{CmError, CmSetup, ConnectionManager};
use access_layer::verbs::port::PortIdentity;
use access_layer::verbs::{
    PortAttr, PortInterface, ProviderError, ProviderErrorKind, ProviderKind, VerbsError,
};
use ib_verbs::{PKey, PortCounters, Resources, Time};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// One port of an RDMA device. See the module doc.
#[derive(Debug)]
pub struct RdmaPort {
    ca: Arc<RdmaCa>,
    /// The clock's epoch.
    epoch: Instant,
    /// The consumer's P_Key table (each entry the device's at the same index).
    pkeys: Mutex<Vec<PKey>>,
}

impl RdmaPort {
    /// The port of `ca`'s device.
    pub(crate) fn new(ca: Arc<RdmaCa>) -> RdmaPort {
        RdmaPort {
            ca,
            epoch: Instant::now(),
            pkeys: Mutex::new(vec![PKey::DEFAULT]),
        }
    }
}

impl PortInterface for RdmaPort {
    fn identity(&self) -> PortIdentity {
        let dev = &self.ca.shared.dev;
        PortIdentity {
            provider: ProviderKind::RdmaCore,
            device: dev.ctx.name().to_owned(),
            port: dev.port,
            gid_index: Some(dev.gid_index),
        }
    }

    fn attr(&self) -> PortAttr {
        let dev = &self.ca.shared.dev;
        let pa = dev.port_attr().ok();
        PortAttr {
            port: 1,
            gid: dev.gid,
            active: pa.is_some_and(|p| p.state == IBV_PORT_ACTIVE),
            link_mtu: pa.as_ref().and_then(crate::device::DeviceCore::active_mtu),
        }
    }

    fn now(&self) -> Time {
        Time(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// A real port's table is the subnet manager's (on RoCE, one entry: 0xFFFF): the
    /// consumer's table must name the device's partitions at the device's indices.
    fn set_pkey_table(&self, table: Vec<PKey>) -> Result<(), VerbsError> {
        let dev = &self.ca.shared.dev;
        for (i, want) in table.iter().enumerate() {
            let index = u16::try_from(i).unwrap_or(u16::MAX);
            let have = dev.ctx.pkey(dev.port, index).ok();
            if have.is_none_or(|h| PKey(h).base() != want.base()) {
                return Err(VerbsError::Provider(ProviderError::new(
                    ProviderErrorKind::Invalid,
                    format!(
                        "{} port {} has no P_Key {:#06x} at index {i} (its table is the \
                         subnet manager's; on RoCE one entry, 0xffff)",
                        dev.ctx.name(),
                        dev.port,
                        want.0
                    ),
                )));
            }
        }
        *self.pkeys.lock().unwrap_or_else(PoisonError::into_inner) = table;
        Ok(())
    }

    fn pkey_table(&self) -> Vec<PKey> {
        self.pkeys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn counters(&self) -> PortCounters {
        let dev = &self.ca.shared.dev;
        crate::sysfs::counters(dev.ctx.name(), dev.port)
    }

    fn resources(&self) -> Resources {
        self.ca.resources()
    }

    fn set_active(&self, _active: bool) -> Result<(), VerbsError> {
        Err(VerbsError::Provider(ProviderError::new(
            ProviderErrorKind::Unsupported,
            "a real RDMA port is not taken down by the stack: take its link down \
             (ip link set <netdev> down, or the switch port)",
        )))
    }

    fn connection_manager(
        &self,
        setup: &CmSetup,
    ) -> Option<Result<Box<dyn ConnectionManager>, CmError>> {
        let _ = setup;
        Some(RdmaCm::new(self.ca.clone()).map(|cm| Box::new(cm) as Box<dyn ConnectionManager>))
    }
}
