//! What exists, sans-IO: CAs and their ports, the I/O units and controllers found through
//! them, and the devices attached to each controller (HCA → IOU → IOC → device). Each input updates the state and returns the events it makes, in
//! delivery order (parents arrive first, children go first); [`Topology::replay`] lists
//! the current state as arrivals. Refused inputs change nothing.
#[allow(unused_imports)]
use crate::prelude::*;

use super::{ChildDevice, PnpError, PnpEvent};
use crate::dm::{DmEvent, IocRecord};
use crate::mad::MadAddress;
use crate::verbs::CaAttr;
use alloc::collections::BTreeMap;
use ib_verbs::Guid;

#[derive(Debug)]
struct CaState {
    /// Port number → active.
    ports: BTreeMap<u8, bool>,
}

#[derive(Debug)]
struct IouState {
    change_id: u16,
    iocs: BTreeMap<Guid, IocRecord>,
    /// Per IOC, the devices attached to it, in arrival order.
    devices: BTreeMap<Guid, Vec<String>>,
}

impl IouState {
    /// Removes IOC `guid`'s devices (last attached first) and then the IOC, if known.
    fn remove_ioc(&mut self, ca: Guid, addr: MadAddress, guid: Guid, out: &mut Vec<PnpEvent>) {
        let devices = self.devices.remove(&guid).unwrap_or_default();
        out.extend(devices.into_iter().rev().map(|id| PnpEvent::DeviceRemoved {
            ca,
            addr,
            ioc: guid,
            id,
        }));
        if self.iocs.remove(&guid).is_some() {
            out.push(PnpEvent::IocRemoved { ca, addr, guid });
        }
    }
}

/// An I/O unit is known per CA and portal (the portal names our port).
type IouKey = (Guid, MadAddress);

/// The state. See the module doc.
#[derive(Debug)]
pub(super) struct Topology {
    children: Vec<ChildDevice>,
    cas: BTreeMap<Guid, CaState>,
    ious: BTreeMap<IouKey, IouState>,
}

impl Topology {
    /// Nothing present; `children` are created on their ports.
    pub(super) fn new(children: Vec<ChildDevice>) -> Topology {
        Topology {
            children,
            cas: BTreeMap::new(),
            ious: BTreeMap::new(),
        }
    }

    /// The CA `attr.node_guid` and its ports arrived.
    pub(super) fn ca_added(&mut self, attr: &CaAttr) -> Result<Vec<PnpEvent>, PnpError> {
        let ca = attr.node_guid;
        if self.cas.contains_key(&ca) {
            return Err(PnpError::DuplicateCa(ca));
        }
        let ports = attr.ports.iter().map(|p| (p.port, p.active)).collect();
        self.cas.insert(ca, CaState { ports });
        Ok(self.ca_arrivals(ca))
    }

    /// The CA went away: what was reached through it, its ports and itself.
    pub(super) fn ca_removed(&mut self, ca: Guid) -> Result<Vec<PnpEvent>, PnpError> {
        let state = self.cas.get(&ca).ok_or(PnpError::UnknownCa(ca))?;
        let ports: Vec<u8> = state.ports.keys().copied().collect();
        let mut out = Vec::new();
        for port in ports {
            let ious: Vec<IouKey> = self
                .ious
                .keys()
                .filter(|(c, a)| *c == ca && a.port == port)
                .copied()
                .collect();
            for key in ious {
                self.remove_iou(key, &mut out);
            }
            out.extend(
                self.children_of(ca, port)
                    .rev()
                    .map(|id| PnpEvent::ChildRemoved { ca, port, id }),
            );
            out.push(PnpEvent::PortRemoved { ca, port });
        }
        self.cas.remove(&ca);
        out.push(PnpEvent::CaRemoved { ca });
        Ok(out)
    }

    /// Port `port` of `ca` became active (`up`) or went down; nothing if it already was.
    pub(super) fn port_state(
        &mut self,
        ca: Guid,
        port: u8,
        up: bool,
    ) -> Result<Vec<PnpEvent>, PnpError> {
        let state = self.port_mut(ca, port)?;
        if *state == up {
            return Ok(Vec::new());
        }
        *state = up;
        Ok(vec![if up {
            PnpEvent::PortUp { ca, port }
        } else {
            PnpEvent::PortDown { ca, port }
        }])
    }

    /// What the DM client of `ca` found changed.
    pub(super) fn dm_event(&mut self, ca: Guid, ev: DmEvent) -> Result<Vec<PnpEvent>, PnpError> {
        let addr = match &ev {
            DmEvent::IouArrived { addr, .. }
            | DmEvent::IocArrived { addr, .. }
            | DmEvent::IocUpdated { addr, .. }
            | DmEvent::IocRemoved { addr, .. }
            | DmEvent::IouRemoved { addr } => *addr,
        };
        self.port_mut(ca, addr.port)?;
        let key = (ca, addr);
        let mut out = Vec::new();
        match ev {
            DmEvent::IouArrived { change_id, .. } => match self.ious.get_mut(&key) {
                // Already known (a sweep after a missed removal): just the new change ID.
                Some(iou) => iou.change_id = change_id,
                None => {
                    self.ious.insert(
                        key,
                        IouState {
                            change_id,
                            iocs: BTreeMap::new(),
                            devices: BTreeMap::new(),
                        },
                    );
                    out.push(PnpEvent::IouArrived {
                        ca,
                        addr,
                        change_id,
                    });
                }
            },
            DmEvent::IocArrived { record, .. } | DmEvent::IocUpdated { record, .. } => {
                let iou = self
                    .ious
                    .get_mut(&key)
                    .ok_or(PnpError::UnknownIou { ca, addr })?;
                let guid = record.profile.guid;
                match iou.iocs.get(&guid) {
                    Some(old) if *old == record => {}
                    Some(_) => {
                        // A changed IOC goes (its devices first) and arrives again bare.
                        iou.remove_ioc(ca, addr, guid, &mut out);
                        iou.iocs.insert(guid, record.clone());
                        out.push(PnpEvent::IocArrived { ca, addr, record });
                    }
                    None => {
                        iou.iocs.insert(guid, record.clone());
                        out.push(PnpEvent::IocArrived { ca, addr, record });
                    }
                }
            }
            DmEvent::IocRemoved { guid, .. } => {
                if let Some(iou) = self.ious.get_mut(&key) {
                    iou.remove_ioc(ca, addr, guid, &mut out);
                }
            }
            DmEvent::IouRemoved { .. } => self.remove_iou(key, &mut out),
        }
        Ok(out)
    }

    /// Device `id` was attached to IOC `ioc` of the unit at `addr` reached through `ca`.
    pub(super) fn device_added(
        &mut self,
        ca: Guid,
        addr: MadAddress,
        ioc: Guid,
        id: &str,
    ) -> Result<Vec<PnpEvent>, PnpError> {
        let iou = self.ioc_mut(ca, addr, ioc)?;
        let devices = iou.devices.entry(ioc).or_default();
        if devices.iter().any(|d| d == id) {
            return Err(PnpError::DuplicateDevice {
                ioc,
                id: id.to_string(),
            });
        }
        devices.push(id.to_string());
        Ok(vec![PnpEvent::DeviceArrived {
            ca,
            addr,
            ioc,
            id: id.to_string(),
        }])
    }

    /// Device `id` of IOC `ioc` went away (its driver removed it).
    pub(super) fn device_removed(
        &mut self,
        ca: Guid,
        addr: MadAddress,
        ioc: Guid,
        id: &str,
    ) -> Result<Vec<PnpEvent>, PnpError> {
        let iou = self.ioc_mut(ca, addr, ioc)?;
        let devices = iou.devices.entry(ioc).or_default();
        let Some(at) = devices.iter().position(|d| d == id) else {
            return Err(PnpError::UnknownDevice {
                ioc,
                id: id.to_string(),
            });
        };
        devices.remove(at);
        Ok(vec![PnpEvent::DeviceRemoved {
            ca,
            addr,
            ioc,
            id: id.to_string(),
        }])
    }

    /// The unit holding a present IOC.
    fn ioc_mut(
        &mut self,
        ca: Guid,
        addr: MadAddress,
        ioc: Guid,
    ) -> Result<&mut IouState, PnpError> {
        let iou = self
            .ious
            .get_mut(&(ca, addr))
            .ok_or(PnpError::UnknownIou { ca, addr })?;
        if !iou.iocs.contains_key(&ioc) {
            return Err(PnpError::UnknownIoc { ca, addr, ioc });
        }
        Ok(iou)
    }

    /// The current state as arrival events, in the order they would have arrived.
    pub(super) fn replay(&self) -> Vec<PnpEvent> {
        let mut out = Vec::new();
        for &ca in self.cas.keys() {
            out.extend(self.ca_arrivals(ca));
        }
        for (&(ca, addr), iou) in &self.ious {
            out.push(PnpEvent::IouArrived {
                ca,
                addr,
                change_id: iou.change_id,
            });
            for (&guid, record) in &iou.iocs {
                out.push(PnpEvent::IocArrived {
                    ca,
                    addr,
                    record: record.clone(),
                });
                let devices = iou.devices.get(&guid).into_iter().flatten();
                out.extend(devices.map(|id| PnpEvent::DeviceArrived {
                    ca,
                    addr,
                    ioc: guid,
                    id: id.clone(),
                }));
            }
        }
        out
    }

    /// A present CA's arrival: the CA, then per port: the port, its children, port-up.
    fn ca_arrivals(&self, ca: Guid) -> Vec<PnpEvent> {
        let mut out = vec![PnpEvent::CaArrived { ca }];
        let Some(state) = self.cas.get(&ca) else {
            return out;
        };
        for (&port, &up) in &state.ports {
            out.push(PnpEvent::PortArrived { ca, port });
            out.extend(self.children_of(ca, port).map(|id| PnpEvent::ChildCreated {
                ca,
                port,
                id,
            }));
            if up {
                out.push(PnpEvent::PortUp { ca, port });
            }
        }
        out
    }

    /// Removes an I/O unit: its IOCs, then itself. Nothing if unknown.
    fn remove_iou(&mut self, key: IouKey, out: &mut Vec<PnpEvent>) {
        let Some(mut iou) = self.ious.remove(&key) else {
            return;
        };
        let (ca, addr) = key;
        let iocs: Vec<Guid> = iou.iocs.keys().copied().collect();
        for guid in iocs {
            iou.remove_ioc(ca, addr, guid, out);
        }
        out.push(PnpEvent::IouRemoved { ca, addr });
    }

    /// The ids of the children configured on `ca`'s `port`, in configuration order.
    fn children_of(&self, ca: Guid, port: u8) -> impl DoubleEndedIterator<Item = String> + '_ {
        self.children
            .iter()
            .filter(move |c| c.ca == ca && c.port == port)
            .map(|c| c.id.clone())
    }

    fn port_mut(&mut self, ca: Guid, port: u8) -> Result<&mut bool, PnpError> {
        self.cas
            .get_mut(&ca)
            .ok_or(PnpError::UnknownCa(ca))?
            .ports
            .get_mut(&port)
            .ok_or(PnpError::UnknownPort { ca, port })
    }
}
