//! The daemon's IOC bus — what IBAL's ibiou is to a Windows host: the access layer's PnP
//! manager holds the I/O units and controllers each watched session's adapter found through
//! Device Management (the adapter's own DM client on its GSI port, `ioc_watch`), and the
//! bus, registered with it for IOU and IOC events, acts on an IOC leaving a unit that still
//! answers: the sessions to it lose their device as their model's port sees it — the
//! iSCSI-model driver is surprise-removed (it fails what it holds NO_DEVICE at once), the
//! StorPort miniport sees a bus change whose re-enumeration finds the IOC's LUs gone (the
//! port removes them; what the miniport holds fails as a path failure) — so multipath
//! moves the I/O to another path, and the session is dropped; the next sweep logs in again
//! when the IOC comes back. A unit that stops answering (a cut link, a target down) takes
//! its IOCs out of the tree too, but that is not acted on: a silent portal is a path
//! problem, for the transport timers and multipath (`no_path_retry`).
//!
//! An IOC arriving in a unit (a watched session's sweep finds an IOC it did not list
//! before) drives its login: when no session serves it, the sweeper sweeps that portal at
//! once, logging in as a sweep does (rules, configured IOC lists); the periodic portal
//! sweep stays the fallback.
//!
//! The tree is the original bus drivers' HCA → IOU → IOC → SRP device: each watched
//! session's adapter is a CA of its own (on the wire they share the host's node GUID;
//! [`ca_of`] names it by session), its watch adds the I/O unit and its controllers, and
//! the session itself is the SRP device attached to its IOC ([`device_of`]) once its watch
//! has found that IOC. The bus acts on the device's removal, which the tree makes before
//! its IOC's (the IOC leaving, or changing, takes its devices with it). PnP callbacks run
//! at dispatch level and only queue; the sweeper thread takes the queue each tick.

use access_layer::dm::DmEvent;
use access_layer::mad::MadAddress;
use access_layer::pnp::{ClientHandle, EventClasses, PnpConfig, PnpEvent, PnpManager};
use access_layer::verbs::{CaAttr, PortAttr};
use ib_verbs::{Gid, Guid};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// The PnP name of session `id`'s adapter.
pub(super) fn ca_of(id: u32) -> Guid {
    Guid(0x0253_4341_0000_0000 | u64::from(id))
}

/// The PnP id of session `id` as a device of its IOC.
pub(super) fn device_of(id: u32) -> String {
    format!("SRP\\session-{id}")
}

/// SRP device removals the PnP client queued: (the adapter's CA, the unit's portal, the
/// IOC's GUID).
#[derive(Default)]
struct Inbox {
    removed: Mutex<Vec<(Guid, Gid, Guid)>>,
    /// IOC arrivals: (the adapter's CA, the IOC's GUID).
    arrived: Mutex<Vec<(Guid, Guid)>>,
}

/// The bus (see the module doc).
pub(super) struct IocBus {
    pnp: PnpManager,
    /// Sessions in the tree whose device is not attached yet (their watch has not found
    /// their IOC): session → its IOC's GUID.
    unattached: Mutex<std::collections::BTreeMap<u32, Guid>>,
    inbox: Arc<Inbox>,
    client: Mutex<Option<ClientHandle<PnpEvent>>>,
}

impl IocBus {
    /// A bus with no CA, its client registered for IOC events.
    pub(super) fn new() -> IocBus {
        let pnp = PnpManager::new(PnpConfig::default());
        let inbox = Arc::new(Inbox::default());
        let classes = EventClasses::IOC | EventClasses::IOU | EventClasses::DEVICE;
        let client = pnp.register(inbox.clone(), classes, |inbox, ev| match ev {
            PnpEvent::IocRemoved { ca, guid, addr } => {
                tracing::info!(ca = %format!("{:#018x}", ca.0), ioc = %format!("{:#018x}", guid.0), portal = ?addr.gid, "PnP: IOC removed");
            }
            PnpEvent::DeviceArrived { ioc, id, .. } => {
                tracing::debug!(ioc = %format!("{:#018x}", ioc.0), device = %id, "PnP: SRP device attached to its IOC");
            }
            PnpEvent::DeviceRemoved { ca, addr, ioc, id } => {
                tracing::info!(ioc = %format!("{:#018x}", ioc.0), device = %id, portal = ?addr.gid, "PnP: SRP device removed");
                inbox
                    .removed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((*ca, addr.gid, *ioc));
            }
            PnpEvent::IouRemoved { ca, addr } => {
                // The unit stopped answering (its IOCs and their devices went just
                // before): a silent portal is a path problem, not an IOC leaving — the
                // transport timers and multipath decide, so those removals are not acted
                // on.
                let mut removed = inbox.removed.lock().unwrap_or_else(PoisonError::into_inner);
                let before = removed.len();
                removed.retain(|(c, g, _)| !(c == ca && *g == addr.gid));
                if removed.len() < before {
                    tracing::info!(portal = ?addr.gid, "PnP: the I/O unit stopped answering; its IOCs are not removed (the transport timers decide)");
                }
            }
            PnpEvent::IocArrived { ca, record, .. } => {
                tracing::debug!(ioc = %format!("{:#018x}", record.profile.guid.0), "PnP: IOC arrived");
                inbox
                    .arrived
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((*ca, record.profile.guid));
            }
            _ => {}
        });
        IocBus {
            pnp,
            unattached: Mutex::new(std::collections::BTreeMap::new()),
            inbox,
            client: Mutex::new(Some(client)),
        }
    }

    /// Session `id`'s adapter (from `local`) joins the tree; the session joins as a device
    /// of IOC `ioc` once its watch finds it there.
    pub(super) fn add(&self, id: u32, local: IpAddr, ioc: Guid) {
        let attr = CaAttr {
            node_guid: ca_of(id),
            ports: vec![PortAttr {
                port: 1,
                gid: Gid::from_ip(local),
                active: true,
                link_mtu: None,
            }],
            caps: Default::default(),
        };
        match self.pnp.ca_added(&attr) {
            Ok(()) => {
                self.unattached
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, ioc);
            }
            Err(e) => {
                tracing::warn!(session = id, %e, "PnP: the session's adapter could not join the IOC bus")
            }
        }
    }

    /// Session `id`'s adapter leaves the tree (its units and IOCs with it, unreported to
    /// the bus's own client as anything to act on: the session is gone already).
    pub(super) fn remove(&self, id: u32) {
        // Not in the tree (not watched): nothing to do.
        self.unattached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        let _ = self.pnp.ca_removed(ca_of(id));
    }

    /// What session `id`'s watch found, into the tree.
    /// The session's device is attached to its IOC when the IOC arrives.
    pub(super) fn feed(&self, id: u32, events: Vec<DmEvent>) {
        let wanted = self
            .unattached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .copied();
        let mut found: Option<MadAddress> = None;
        for ev in events {
            if let DmEvent::IocArrived { addr, record } | DmEvent::IocUpdated { addr, record } = &ev
                && Some(record.profile.guid) == wanted
            {
                found = Some(*addr);
            }
            if let Err(e) = self.pnp.dm_event(ca_of(id), ev) {
                tracing::warn!(session = id, %e, "PnP: a DM event the tree refused");
            }
        }
        if let (Some(ioc), Some(addr)) = (wanted, found) {
            match self.pnp.device_added(ca_of(id), addr, ioc, &device_of(id)) {
                Ok(()) => {
                    self.unattached
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&id);
                }
                Err(e) => {
                    tracing::warn!(session = id, %e, "PnP: the session could not join its IOC as a device")
                }
            }
        }
    }

    /// The tree as a new PnP client would have it replayed (HCA → IOU → IOC → device).
    pub(super) fn snapshot(&self) -> Vec<PnpEvent> {
        self.pnp.snapshot()
    }

    /// The SRP device removals (an IOC gone from its unit, with its devices) queued since
    /// the last call: (session, IOC GUID).
    pub(super) fn take_removed(&self) -> Vec<(u32, Guid)> {
        std::mem::take(
            &mut *self
                .inbox
                .removed
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
        .into_iter()
        .map(|(ca, _, ioc)| ((ca.0 & 0xffff_ffff) as u32, ioc))
        .collect()
    }

    /// The IOC arrivals queued since the last call: (the session whose watch saw it, IOC
    /// GUID).
    pub(super) fn take_arrived(&self) -> Vec<(u32, Guid)> {
        std::mem::take(
            &mut *self
                .inbox
                .arrived
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
        .into_iter()
        .map(|(ca, ioc)| ((ca.0 & 0xffff_ffff) as u32, ioc))
        .collect()
    }

    /// Closes the bus's PnP client (no callback runs after this returns).
    pub(super) fn close(&self) {
        if let Some(c) = self
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = c.close();
        }
    }
}
