//! What exists, sans-IO: CAs and their ports, and the I/O units and controllers found
//! through them. Each input updates the state and returns the events it makes, in
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
                match iou.iocs.insert(guid, record.clone()) {
                    Some(old) if old == record => {}
                    Some(_) => {
                        out.push(PnpEvent::IocRemoved { ca, addr, guid });
                        out.push(PnpEvent::IocArrived { ca, addr, record });
                    }
                    None => out.push(PnpEvent::IocArrived { ca, addr, record }),
                }
            }
            DmEvent::IocRemoved { guid, .. } => {
                let removed = self
                    .ious
                    .get_mut(&key)
                    .and_then(|iou| iou.iocs.remove(&guid));
                if removed.is_some() {
                    out.push(PnpEvent::IocRemoved { ca, addr, guid });
                }
            }
            DmEvent::IouRemoved { .. } => self.remove_iou(key, &mut out),
        }
        Ok(out)
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
            out.extend(iou.iocs.values().map(|record| PnpEvent::IocArrived {
                ca,
                addr,
                record: record.clone(),
            }));
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
        let Some(iou) = self.ious.remove(&key) else {
            return;
        };
        let (ca, addr) = key;
        out.extend(
            iou.iocs
                .into_keys()
                .map(|guid| PnpEvent::IocRemoved { ca, addr, guid }),
        );
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
