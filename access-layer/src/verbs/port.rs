//! [`PortInterface`]: one port of a device beside its verbs — which provider and device it
//! is, its attributes and state, its P_Key table, its counters and live objects,
//! administrative up and down (drills), its clock, and the connection manager of a
//! provider that owns one.
//!
//! A provider implements it with the [`super::ChannelInterface`] of the same device; the
//! pair is a [`super::Device`]. Every call is short and non-blocking.
#[allow(unused_imports)]
use crate::prelude::*;

use super::VerbsError;
use super::ci::PortAttr;
use super::device::ProviderKind;
use crate::cm::{CmError, CmSetup, ConnectionManager};
use core::fmt;
use ib_verbs::{PKey, PortCounters, Resources, Time};

/// Which port of which device on which provider: what listings show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortIdentity {
    /// The provider.
    pub provider: ProviderKind,
    /// The device: `soft:<ip>:<udp port>` for the software HCA, the RDMA device's name
    /// (`rxe0`, `mlx5_0`) under rdma-core, `sim:<ip>` on a simulated net.
    pub device: String,
    /// The port number, 1-based.
    pub port: u8,
    /// The GID table index the port's traffic uses, where the provider has a table.
    pub gid_index: Option<u8>,
}

impl fmt::Display for PortIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} port {}", self.provider, self.device, self.port)?;
        if let Some(i) = self.gid_index {
            write!(f, " gid {i}")?;
        }
        Ok(())
    }
}

/// One port of a device. See the module doc.
pub trait PortInterface: Send + Sync + fmt::Debug {
    /// Which port of which device this is.
    fn identity(&self) -> PortIdentity;

    /// The port's attributes now (its GID, state, link MTU).
    fn attr(&self) -> PortAttr;

    /// The device's clock: the time every core on this port is driven with (CM timers,
    /// the channel cores' timers). A simulated net's is virtual.
    fn now(&self) -> Time;

    /// Sets the P_Key table: the partitions the port's QPs may be bound to (`pkey_index`)
    /// and, with QP1, those its MADs are accepted on. 1 to 64 distinct partitions, none 0.
    /// A provider that cannot set its table (a real port's is the subnet manager's)
    /// accepts only partitions the table already has.
    fn set_pkey_table(&self, table: Vec<PKey>) -> Result<(), VerbsError>;

    /// The P_Key table, index 0 first.
    fn pkey_table(&self) -> Vec<PKey>;

    /// The port's counters.
    fn counters(&self) -> PortCounters;

    /// The device's live objects (QPs, CQs, SRQs, MRs): what a leak check compares.
    fn resources(&self) -> Resources;

    /// Brings the port administratively down (it drops traffic both ways; peers time out)
    /// or up again: the failover drills' "link down". A provider that cannot refuses with
    /// [`VerbsError::Unsupported`].
    fn set_active(&self, active: bool) -> Result<(), VerbsError>;

    /// The provider's own connection manager, where the provider (its kernel) owns QP1 and
    /// the CM — rdma-core's, through librdmacm. `None`: the provider gives the access layer
    /// QP1 and the access layer runs its own CM over it
    /// ([`crate::mads::MadService`]; [`crate::mads::open_connection_manager`] picks).
    fn connection_manager(
        &self,
        setup: &CmSetup,
    ) -> Option<Result<Box<dyn ConnectionManager>, CmError>> {
        let _ = setup;
        None
    }
}
