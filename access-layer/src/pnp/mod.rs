//! Plug and play: registered clients learn of channel adapters, ports, I/O units and I/O
//! controllers coming and going (IBAL's `ib_reg_pnp`, the model the seeds' bus drivers —
//! ibbus creating IOU PDOs, ibiou creating IOC PDOs — sit on; windows.md §1.8), and of the
//! per-port child devices configured by id, like the IPoIB PDO (ARCHITECTURE §3 item 9).
//!
//! Contract:
//! - **Inputs.** The HCA side reports CAs ([`PnpManager::ca_added`],
//!   [`PnpManager::ca_removed`]) and port state ([`PnpManager::hca_event`], fed from
//!   `Hca::set_event_handler` or a CA's event handler: `PortActive`/`PortDown`). The DM
//!   client's [`DmEvent`](crate::dm::DmEvent)s become IOU/IOC events
//!   ([`PnpManager::dm_event`]), tied to the CA whose ports discovered them.
//! - **Registration replays** the current state to the new client as arrival events (CAs,
//!   their ports and children, port-up, IOUs, their IOCs), then
//!   [`PnpEvent::RegistrationComplete`]; later events follow in order.
//! - **Order.** Arrivals go parent first, removals children first: a port's children
//!   appear right after it and go before it; an IOU's IOCs go before the IOU; the IOUs
//!   reached through a port go before the port, its ports before the CA.
//! - **Delivery.** One callback at a time per manager, in event order, at dispatch level
//!   (callbacks may run on an HCA port thread or a CA's dispatcher, so they must not
//!   block; the verifier says so deterministically). They run on the thread of an input or
//!   registration call. At passive level such a call returns once its events reached
//!   every client (delivering them itself if no other thread is), so a caller must not
//!   hold a lock a callback takes. At dispatch level, and from callbacks, a call never
//!   waits: its events are queued and delivered after the current callback, never nested.
//! - **Lifetime** ([`lifetime`]): registering takes a reference on the client's owner,
//!   held until the client is closed; after [`ClientHandle::close`] returns, none of that
//!   client's callbacks runs again, whatever is being delivered concurrently.
//!
//! Modules: [`lifetime`] (client reference counting), `topology` (the sans-IO state: what
//! exists and which events a change makes) and `manager` ([`PnpManager`]: queueing and
//! delivery).
#[allow(unused_imports)]
use crate::prelude::*;

#[cfg(feature = "std")]
pub mod lifetime;
#[cfg(feature = "std")]
mod manager;
#[cfg(feature = "std")]
mod topology;

#[cfg(feature = "std")]
pub use lifetime::{ClientHandle, Closed};
#[cfg(feature = "std")]
pub use manager::PnpManager;

use crate::dm::IocRecord;
use crate::mad::MadAddress;
use ib_verbs::Guid;

bitflags::bitflags! {
    /// Which events a client wants (IBAL's `IB_PNP_CA`, `IB_PNP_PORT`, `IB_PNP_IOU`,
    /// `IB_PNP_IOC` classes, plus the configured children).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct EventClasses: u8 {
        /// CA arrival and removal.
        const CA = 0x01;
        /// Port arrival, removal, up and down.
        const PORT = 0x02;
        /// I/O unit arrival and removal.
        const IOU = 0x04;
        /// I/O controller arrival and removal.
        const IOC = 0x08;
        /// Configured child device creation and removal.
        const CHILD = 0x10;
        /// Devices attached to an I/O controller (the driver stack on an IOC's PDO in
        /// IBAL; for the host, an SRP session to that IOC) arriving and going.
        const DEVICE = 0x20;
    }
}

/// A configured child device of a port (the IPoIB PDO's kind): created when the port
/// arrives, removed before the port goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChildDevice {
    /// The CA's node GUID.
    pub ca: Guid,
    /// The port, 1-based.
    pub port: u8,
    /// The child's id, e.g. `"IBA\\IPoIB"` or a kernel client's name.
    pub id: String,
}

/// Settings of a [`PnpManager`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PnpConfig {
    /// Child devices, created per port in this order.
    pub children: Vec<ChildDevice>,
}

/// A plug-and-play event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PnpEvent {
    /// A channel adapter appeared; its ports follow.
    CaArrived {
        /// Its node GUID.
        ca: Guid,
    },
    /// A channel adapter went away, after its ports.
    CaRemoved {
        /// Its node GUID.
        ca: Guid,
    },
    /// A port appeared (down until [`PnpEvent::PortUp`]); its children follow.
    PortArrived {
        /// Its CA.
        ca: Guid,
        /// Port number, 1-based.
        port: u8,
    },
    /// A port went away, after its children and the IOUs reached through it.
    PortRemoved {
        /// Its CA.
        ca: Guid,
        /// Port number.
        port: u8,
    },
    /// A port became active.
    PortUp {
        /// Its CA.
        ca: Guid,
        /// Port number.
        port: u8,
    },
    /// A port went down.
    PortDown {
        /// Its CA.
        ca: Guid,
        /// Port number.
        port: u8,
    },
    /// An I/O unit answered DM queries; its IOCs follow.
    IouArrived {
        /// The CA whose port reaches it (`addr.port`).
        ca: Guid,
        /// Its portal.
        addr: MadAddress,
        /// IOUnitInfo change ID.
        change_id: u16,
    },
    /// An I/O unit went away, after its IOCs.
    IouRemoved {
        /// The CA whose port reached it.
        ca: Guid,
        /// Its portal.
        addr: MadAddress,
    },
    /// An I/O controller appeared, with its profile and service entries. A changed IOC
    /// is removed and arrives again (IBAL has no update event).
    IocArrived {
        /// The CA whose port reaches it.
        ca: Guid,
        /// Its unit's portal.
        addr: MadAddress,
        /// Slot, IOControllerProfile and ServiceEntries.
        record: IocRecord,
    },
    /// An I/O controller went away.
    IocRemoved {
        /// The CA whose port reached it.
        ca: Guid,
        /// Its unit's portal.
        addr: MadAddress,
        /// Its GUID.
        guid: Guid,
    },
    /// A device attached to an I/O controller (after the IOC's arrival).
    DeviceArrived {
        /// The CA whose port reaches the IOC.
        ca: Guid,
        /// The IOC's unit's portal.
        addr: MadAddress,
        /// The IOC's GUID.
        ioc: Guid,
        /// The device's id (e.g. `"SRP\\session-3"`).
        id: String,
    },
    /// A device attached to an I/O controller went away: removed by its driver, or, before
    /// its IOC, because the IOC (or its unit, or the CA) did.
    DeviceRemoved {
        /// The CA whose port reached the IOC.
        ca: Guid,
        /// The IOC's unit's portal.
        addr: MadAddress,
        /// The IOC's GUID.
        ioc: Guid,
        /// The device's id.
        id: String,
    },
    /// A configured child device of a port was created.
    ChildCreated {
        /// Its CA.
        ca: Guid,
        /// Its port.
        port: u8,
        /// Its id.
        id: String,
    },
    /// A configured child device of a port was removed.
    ChildRemoved {
        /// Its CA.
        ca: Guid,
        /// Its port.
        port: u8,
        /// Its id.
        id: String,
    },
    /// The replay of what existed at registration is over (IBAL `IB_PNP_REG_COMPLETE`);
    /// delivered whatever the client's classes.
    RegistrationComplete,
}

impl PnpEvent {
    /// The class a client registers for to receive this event; `None` for
    /// [`PnpEvent::RegistrationComplete`], which every client receives.
    pub fn class(&self) -> Option<EventClasses> {
        Some(match self {
            PnpEvent::CaArrived { .. } | PnpEvent::CaRemoved { .. } => EventClasses::CA,
            PnpEvent::PortArrived { .. }
            | PnpEvent::PortRemoved { .. }
            | PnpEvent::PortUp { .. }
            | PnpEvent::PortDown { .. } => EventClasses::PORT,
            PnpEvent::IouArrived { .. } | PnpEvent::IouRemoved { .. } => EventClasses::IOU,
            PnpEvent::IocArrived { .. } | PnpEvent::IocRemoved { .. } => EventClasses::IOC,
            PnpEvent::ChildCreated { .. } | PnpEvent::ChildRemoved { .. } => EventClasses::CHILD,
            PnpEvent::DeviceArrived { .. } | PnpEvent::DeviceRemoved { .. } => EventClasses::DEVICE,
            PnpEvent::RegistrationComplete => return None,
        })
    }
}

/// Why a PnP input was refused; the state is unchanged and nothing is delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PnpError {
    /// The CA was already added.
    #[error("CA {0:?} is already present")]
    DuplicateCa(Guid),
    /// No such CA.
    #[error("CA {0:?} is not present")]
    UnknownCa(Guid),
    /// The CA has no such port.
    #[error("CA {ca:?} has no port {port}")]
    UnknownPort {
        /// The CA.
        ca: Guid,
        /// The port.
        port: u8,
    },
    /// An IOC was reported for an I/O unit that has not arrived.
    #[error("no I/O unit at {addr:?} on CA {ca:?}")]
    UnknownIou {
        /// The CA.
        ca: Guid,
        /// The portal.
        addr: MadAddress,
    },
    /// A device was attached to an IOC the unit does not list.
    #[error("no IOC {ioc:?} in the I/O unit at {addr:?} on CA {ca:?}")]
    UnknownIoc {
        /// The CA.
        ca: Guid,
        /// The portal.
        addr: MadAddress,
        /// The IOC.
        ioc: Guid,
    },
    /// The IOC already has a device of that id.
    #[error("IOC {ioc:?} already has device {id:?}")]
    DuplicateDevice {
        /// The IOC.
        ioc: Guid,
        /// The device's id.
        id: String,
    },
    /// The IOC has no device of that id.
    #[error("IOC {ioc:?} has no device {id:?}")]
    UnknownDevice {
        /// The IOC.
        ioc: Guid,
        /// The device's id.
        id: String,
    },
}
