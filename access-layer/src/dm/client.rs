//! The DM discovery client: sweeps configured portals and reports IOUs and IOCs coming and
//! going, sans-IO (srp_daemon's per-port walk without the SA part, since RoCE has no SM;
//! WinOF `al_ioc_pnp.c` for the change-ID check and the add/remove diff).
//!
//! A sweep of one portal is a chain of Gets, one outstanding at a time: IOUnitInfo; if its
//! change ID equals the one recorded, the sweep ends there (as WinOF); else each present
//! slot's IOControllerProfile, then that IOC's ServiceEntries four at a time. At the end the
//! new [`IouRecord`] is compared with the old one by IOC GUID. A request that times out after
//! the GSI agent's retries, or an IOUnitInfo answered with an error, means the portal is gone:
//! its IOCs are removed, then the IOU.
//!
//! Inputs: [`DmClient::add_portal`], [`DmClient::handle_timeout`], [`DmClient::handle_event`]
//! (the GSI agent's responses and timeouts); outputs: [`DmClient::poll_event`],
//! [`DmClient::poll_timeout`]. Requests go out through the `&mut GsiAgent` the inputs take.
#[allow(unused_imports)]
use crate::prelude::*;

use super::DmError;
use crate::gsi::{GsiAgent, GsiError, GsiEvent, RequestOptions};
use crate::mad::dm::{
    DM_CLASS_VERSION, DM_DATA_LEN, DmAttr, IocProfile, ServiceEntriesRange, ServiceEntry,
    SlotState, service_entries::ENTRIES_PER_MAD,
};
use crate::mad::{
    AnyMad, DmAttribute, MadAddress, MadBody, MadBuf, MadError, MadHeader, MadStatus, Method,
    MgmtClass, RmppHeader, Tid, parse_any,
};
use alloc::collections::{BTreeMap, VecDeque};
use core::time::Duration;
use ib_verbs::Guid;
use ib_verbs::time::Time;

/// Settings of the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmClientConfig {
    /// Every portal is swept again this often.
    pub rescan_period: Duration,
    /// Timeout and retries of each Get (default: WinOF's 250 ms × 4 retries).
    pub request: RequestOptions,
    /// When the GSI agent's request pool is full, try again after this long.
    pub pool_backoff: Duration,
}

impl Default for DmClientConfig {
    fn default() -> Self {
        DmClientConfig {
            rescan_period: Duration::from_secs(60), // srp_daemon's systemd unit: -R 60
            request: RequestOptions::default(),
            pool_backoff: Duration::from_millis(10),
        }
    }
}

/// One IOC as discovered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IocRecord {
    /// Its slot in the unit.
    pub slot: u8,
    /// IOControllerProfile.
    pub profile: IocProfile,
    /// All its service entries, in order.
    pub entries: Vec<ServiceEntry>,
}

/// One I/O unit (a portal that answered) as discovered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IouRecord {
    /// The portal.
    pub addr: MadAddress,
    /// IOUnitInfo change ID at the sweep.
    pub change_id: u16,
    /// Its IOCs, by slot.
    pub iocs: Vec<IocRecord>,
}

/// What a sweep found changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DmEvent {
    /// A portal answered for the first time (or again after it was removed); its IOCs follow
    /// as [`DmEvent::IocArrived`].
    IouArrived {
        /// The portal.
        addr: MadAddress,
        /// IOUnitInfo change ID.
        change_id: u16,
    },
    /// An IOC appeared.
    IocArrived {
        /// Its portal.
        addr: MadAddress,
        /// What was read.
        record: IocRecord,
    },
    /// An IOC that was there before has a different profile, slot or entries.
    IocUpdated {
        /// Its portal.
        addr: MadAddress,
        /// What was read.
        record: IocRecord,
    },
    /// An IOC went away (or its portal stopped answering).
    IocRemoved {
        /// Its portal.
        addr: MadAddress,
        /// Its GUID.
        guid: Guid,
    },
    /// A portal stopped answering (after its IOCs' removals) or was removed.
    IouRemoved {
        /// The portal.
        addr: MadAddress,
    },
}

/// Counters of the client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmClientStats {
    /// Sweeps started.
    pub sweeps: u64,
    /// Sweeps ended early because the change ID had not moved.
    pub unchanged: u64,
    /// Gets sent.
    pub queries: u64,
    /// Gets that timed out after all retries.
    pub timeouts: u64,
    /// Answers with an error status or that did not parse (the slot or IOC is skipped).
    pub errors: u64,
}

/// The client's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    /// Mark every portal for a new sweep.
    Rescan = 0,
    /// Start due sweeps and requests that found the pool full.
    Kick = 1,
}
const TIMERS: usize = 2;

/// A Get of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Query {
    IouInfo,
    Profile(u8),
    Entries(ServiceEntriesRange),
}

/// A sweep in progress.
#[derive(Debug, Default)]
struct Sweep {
    change_id: u16,
    /// Present slots not yet read.
    slots: VecDeque<u8>,
    /// The IOC whose entries are being read.
    current: Option<IocRecord>,
    iocs: Vec<IocRecord>,
    /// The next Get; `None` once the sweep is complete.
    next: Option<Query>,
    /// The Get awaiting its answer.
    inflight: Option<Tid>,
}

#[derive(Debug)]
struct Portal {
    known: Option<IouRecord>,
    due: bool,
    sweep: Option<Sweep>,
}

/// The discovery client.
///
/// Order of calls for a driver (with the GSI agent's input already fed): when `now` reaches
/// [`DmClient::poll_timeout`], [`DmClient::handle_timeout`]; each GSI response or timeout
/// event to [`DmClient::handle_event`]; then drain [`DmClient::poll_event`].
#[derive(Debug)]
pub struct DmClient {
    config: DmClientConfig,
    portals: BTreeMap<MadAddress, Portal>,
    tids: BTreeMap<Tid, MadAddress>,
    timers: [Option<Time>; TIMERS],
    events: VecDeque<DmEvent>,
    stats: DmClientStats,
}

impl DmClient {
    /// A client with no portal.
    pub fn new(config: DmClientConfig) -> Self {
        DmClient {
            config,
            portals: BTreeMap::new(),
            tids: BTreeMap::new(),
            timers: [None; TIMERS],
            events: VecDeque::new(),
            stats: DmClientStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> DmClientStats {
        self.stats
    }

    /// What the last complete sweep of each answering portal found.
    pub fn records(&self) -> impl Iterator<Item = &IouRecord> {
        self.portals.values().filter_map(|p| p.known.as_ref())
    }

    /// Adds a portal to sweep (its first sweep starts at the next `handle_timeout`).
    pub fn add_portal(&mut self, now: Time, addr: MadAddress) -> Result<(), DmError> {
        if self.portals.contains_key(&addr) {
            return Err(DmError::DuplicatePortal);
        }
        self.portals.insert(
            addr,
            Portal {
                known: None,
                due: true,
                sweep: None,
            },
        );
        self.set_timer(Timer::Kick, now);
        if self.timer(Timer::Rescan).is_none() {
            self.set_timer(Timer::Rescan, now + self.config.rescan_period);
        }
        Ok(())
    }

    /// Stops sweeping `addr`; what it had is reported removed. Returns whether it was there.
    pub fn remove_portal(&mut self, gsi: &mut GsiAgent, addr: MadAddress) -> bool {
        let Some(mut p) = self.portals.remove(&addr) else {
            return false;
        };
        if let Some(tid) = p.sweep.take().and_then(|s| s.inflight) {
            self.tids.remove(&tid);
            gsi.cancel(tid);
        }
        self.report_lost(addr, p.known.take());
        true
    }

    /// Sweeps every portal again now (at the next `handle_timeout`), as on a port event.
    pub fn rescan(&mut self, now: Time) {
        self.portals.values_mut().for_each(|p| p.due = true);
        self.set_timer(Timer::Kick, now);
    }

    /// Fires expired timers: marks portals for the periodic rescan, starts due sweeps and
    /// sends requests that waited for room in the GSI agent's pool.
    pub fn handle_timeout(&mut self, now: Time, gsi: &mut GsiAgent) {
        if self.timer(Timer::Rescan).is_some_and(|t| t <= now) {
            self.portals.values_mut().for_each(|p| p.due = true);
            self.set_timer(Timer::Rescan, now + self.config.rescan_period);
        }
        if self.timer(Timer::Kick).is_some_and(|t| t <= now) {
            self.timers[Timer::Kick as usize] = None;
        }
        let addrs: Vec<MadAddress> = self.portals.keys().copied().collect();
        for addr in addrs {
            let Some(p) = self.portals.get_mut(&addr) else {
                continue;
            };
            if p.due && p.sweep.is_none() {
                p.due = false;
                p.sweep = Some(Sweep {
                    next: Some(Query::IouInfo),
                    ..Sweep::default()
                });
                self.stats.sweeps += 1;
            }
            self.issue(now, gsi, addr);
        }
    }

    /// Takes a GSI event if it answers (or times out) one of our requests; returns whether it
    /// did. The next request of that sweep is sent through `gsi`.
    pub fn handle_event(&mut self, now: Time, gsi: &mut GsiAgent, ev: &GsiEvent) -> bool {
        let (tid, answer) = match ev {
            GsiEvent::Response { tid, mad, .. } => (*tid, Some(mad)),
            GsiEvent::Timeout { tid, .. } => (*tid, None),
            GsiEvent::Request { .. } => return false,
        };
        let Some(addr) = self.tids.remove(&tid) else {
            return false;
        };
        let Some(sweep) = self
            .portals
            .get_mut(&addr)
            .and_then(|p| p.sweep.as_mut())
            .filter(|s| s.inflight == Some(tid))
        else {
            return true;
        };
        sweep.inflight = None;
        let query = sweep.next;
        match (query, answer) {
            (Some(q), Some(mad)) => self.on_answer(addr, q, mad),
            _ => {
                self.stats.timeouts += 1;
                self.lose(addr);
            }
        }
        self.issue(now, gsi, addr);
        true
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<DmEvent> {
        self.events.pop_front()
    }

    /// The earliest timer.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timers.iter().flatten().min().copied()
    }

    fn timer(&self, t: Timer) -> Option<Time> {
        self.timers[t as usize]
    }

    fn set_timer(&mut self, t: Timer, at: Time) {
        self.timers[t as usize] = Some(at);
    }

    /// Sends the sweep's next Get if none is in flight, or finishes the sweep.
    fn issue(&mut self, now: Time, gsi: &mut GsiAgent, addr: MadAddress) {
        let Some(sweep) = self.portals.get_mut(&addr).and_then(|p| p.sweep.as_mut()) else {
            return;
        };
        if sweep.inflight.is_some() {
            return;
        }
        let Some(query) = sweep.next else {
            self.finish(addr);
            return;
        };
        let sent = dm_get(query)
            .map_err(GsiError::from)
            .and_then(|mad| gsi.send_request(now, addr, mad, self.config.request));
        match sent {
            Ok(tid) => {
                sweep.inflight = Some(tid);
                self.tids.insert(tid, addr);
                self.stats.queries += 1;
            }
            Err(GsiError::PoolFull { .. } | GsiError::TransmitQueueFull { .. }) => {
                let at = now + self.config.pool_backoff;
                if self.timer(Timer::Kick).is_none_or(|t| t > at) {
                    self.set_timer(Timer::Kick, at);
                }
            }
            Err(_) => {
                // Not registered as a DM client, or a MAD we cannot build: no sweep can work.
                self.stats.errors += 1;
                if let Some(p) = self.portals.get_mut(&addr) {
                    p.sweep = None;
                }
            }
        }
    }

    /// Advances the sweep of `addr` past the answer `mad` to `query`.
    fn on_answer(&mut self, addr: MadAddress, query: Query, mad: &MadBuf) {
        let parsed = parse_any(mad.as_bytes()).ok();
        let (status, attr) = match &parsed {
            Some(AnyMad {
                header,
                body: MadBody::Dm { attr, .. },
            }) => (header.status, Some(*attr)),
            _ => (MadStatus::Unknown(0xffff), None),
        };
        if status != MadStatus::Success {
            self.stats.errors += 1;
        }
        let ok = status == MadStatus::Success;
        let Some(portal) = self.portals.get_mut(&addr) else {
            return;
        };
        let Some(sweep) = portal.sweep.as_mut() else {
            return;
        };
        match (query, attr) {
            (Query::IouInfo, Some(DmAttribute::IouInfo(info))) if ok => {
                if portal.known.as_ref().map(|k| k.change_id) == Some(info.change_id) {
                    self.stats.unchanged += 1;
                    portal.sweep = None;
                    return;
                }
                sweep.change_id = info.change_id;
                sweep.slots = (1..=u16::from(info.max_controllers))
                    .filter(|&s| info.slot(s) == Some(SlotState::Present))
                    .filter_map(|s| u8::try_from(s).ok())
                    .collect();
                sweep.next_slot();
            }
            // An I/O unit that does not answer IOUnitInfo is no I/O unit.
            (Query::IouInfo, _) => self.lose(addr),
            (Query::Profile(slot), Some(DmAttribute::IocProfile(profile))) if ok => {
                sweep.current = Some(IocRecord {
                    slot,
                    profile,
                    entries: Vec::new(),
                });
                sweep.next_entries(0);
            }
            (Query::Entries(range), Some(DmAttribute::ServiceEntries(se))) if ok => {
                let count = range.count().unwrap_or(0);
                if let Some(cur) = sweep.current.as_mut() {
                    cur.entries.extend(se.entries.iter().take(count).copied());
                }
                sweep.next_entries(usize::from(range.last) + 1);
            }
            (Query::Entries(_), _) => {
                // Skip this IOC: its entries cannot be read.
                sweep.current = None;
                sweep.next_slot();
            }
            (Query::Profile(_), _) => sweep.next_slot(),
        }
    }

    /// Ends the sweep of `addr` and reports the difference from the previous one.
    fn finish(&mut self, addr: MadAddress) {
        let Some(portal) = self.portals.get_mut(&addr) else {
            return;
        };
        let Some(sweep) = portal.sweep.take() else {
            return;
        };
        let new = IouRecord {
            addr,
            change_id: sweep.change_id,
            iocs: sweep.iocs,
        };
        let Some(old) = portal.known.replace(new.clone()) else {
            self.events.push_back(DmEvent::IouArrived {
                addr,
                change_id: new.change_id,
            });
            for record in new.iocs {
                self.events.push_back(DmEvent::IocArrived { addr, record });
            }
            return;
        };
        let guid_in =
            |iocs: &[IocRecord], g: Guid| iocs.iter().find(|i| i.profile.guid == g).cloned();
        for o in &old.iocs {
            if guid_in(&new.iocs, o.profile.guid).is_none() {
                let guid = o.profile.guid;
                self.events.push_back(DmEvent::IocRemoved { addr, guid });
            }
        }
        for record in new.iocs {
            match guid_in(&old.iocs, record.profile.guid) {
                None => self.events.push_back(DmEvent::IocArrived { addr, record }),
                Some(o) if o != record => {
                    self.events.push_back(DmEvent::IocUpdated { addr, record });
                }
                Some(_) => {}
            }
        }
    }

    /// `addr` stopped answering: its sweep ends and what it had is removed.
    fn lose(&mut self, addr: MadAddress) {
        let Some(portal) = self.portals.get_mut(&addr) else {
            return;
        };
        portal.sweep = None;
        let known = portal.known.take();
        self.report_lost(addr, known);
    }

    fn report_lost(&mut self, addr: MadAddress, known: Option<IouRecord>) {
        let Some(old) = known else {
            return;
        };
        for ioc in old.iocs {
            let guid = ioc.profile.guid;
            self.events.push_back(DmEvent::IocRemoved { addr, guid });
        }
        self.events.push_back(DmEvent::IouRemoved { addr });
    }
}

impl Sweep {
    /// Files the IOC being read (if any) and moves to the next present slot's profile.
    fn next_slot(&mut self) {
        if let Some(done) = self.current.take() {
            self.iocs.push(done);
        }
        self.next = self.slots.pop_front().map(Query::Profile);
    }

    /// Asks for the current IOC's entries from `first` (four at most), or files the IOC when
    /// there are no more.
    fn next_entries(&mut self, first: usize) {
        let Some(cur) = self.current.as_ref() else {
            self.next_slot();
            return;
        };
        let total = usize::from(cur.profile.service_entries);
        if first >= total {
            self.next_slot();
            return;
        }
        let last = (first + ENTRIES_PER_MAD).min(total) - 1;
        // Both fit: they are below `service_entries`, a u8.
        let (Ok(first), Ok(last)) = (u8::try_from(first), u8::try_from(last)) else {
            self.next_slot();
            return;
        };
        self.next = Some(Query::Entries(ServiceEntriesRange {
            slot: cur.slot.into(),
            first,
            last,
        }));
    }
}

/// A DM Get for `query` (TID filled in by the GSI agent).
fn dm_get(query: Query) -> Result<MadBuf, MadError> {
    let (attr, attr_mod) = match query {
        Query::IouInfo => (DmAttr::IouInfo, 0),
        Query::Profile(slot) => (DmAttr::IocProfile, u32::from(slot)),
        Query::Entries(range) => (DmAttr::ServiceEntries, range.to_attr_mod()),
    };
    const ZERO: [u8; DM_DATA_LEN] = [0; DM_DATA_LEN];
    AnyMad {
        header: MadHeader::request(
            MgmtClass::DeviceMgmt,
            DM_CLASS_VERSION,
            Method::Get,
            Tid(0),
            attr.into(),
            attr_mod,
        ),
        body: MadBody::Dm {
            rmpp: RmppHeader::INACTIVE,
            attr: DmAttribute::Raw(&ZERO),
        },
    }
    .to_buf()
}
