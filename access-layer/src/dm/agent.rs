//! The DM agent of an I/O unit: a registry of IOCs and the answers to DM requests, sans-IO
//! (IBTA Vol1 16.3.3; ib_srpt `srpt_mgmt_method_get`, srp-linux.md §2 and §4.5).
//!
//! Input: [`DmAgent::handle_request`] with a DM request the GSI agent delivered. Output:
//! [`DmAgent::poll_transmit`], the GetResp to hand to `GsiAgent::send`. [`DmAgent::answer`]
//! is the pure core. Registry changes ([`DmAgent::add_ioc`], [`DmAgent::remove_ioc`]) bump
//! IOUnitInfo's change ID so clients know to read the profiles again.
#[allow(unused_imports)]
use crate::prelude::*;

use super::DmError;
use crate::mad::class_port_info::ClassPortInfo;
use crate::mad::dm::{
    DM_CLASS_VERSION, DM_DATA_LEN, DmAttr, DmStatus, IocProfile, IouInfo, ServiceEntries,
    ServiceEntriesRange, ServiceEntry, SlotState, service_entries::ENTRIES_PER_MAD,
};
use crate::mad::{
    AnyMad, DmAttribute, MadAddress, MadBuf, MadHeader, MadOut, MadStatus, Method, MgmtClass,
};
use alloc::collections::{BTreeMap, VecDeque};

/// Most answers queued; requests beyond are dropped (the client retries).
const MAX_QUEUED: usize = 256;
/// A zeroed DM data area, the body of an error answer.
const NO_DATA: [u8; DM_DATA_LEN] = [0; DM_DATA_LEN];

/// Settings of the I/O unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmAgentConfig {
    /// Slots of the unit (IOUnitInfo MaxControllers; ib_srpt: 16).
    pub max_controllers: u8,
    /// ClassPortInfo RespTimeValue (ib_srpt: 20, 4.096 µs × 2^20 ≈ 4.3 s).
    pub resp_time_value: u8,
}

impl Default for DmAgentConfig {
    fn default() -> Self {
        DmAgentConfig {
            max_controllers: 16,
            resp_time_value: 20,
        }
    }
}

/// One installed IOC.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ioc {
    profile: IocProfile,
    entries: Vec<ServiceEntry>,
}

/// An I/O unit's DM agent.
#[derive(Debug)]
pub struct DmAgent {
    config: DmAgentConfig,
    iocs: BTreeMap<u8, Ioc>,
    change_id: u16,
    transmit: VecDeque<MadOut>,
    dropped: u64,
}

impl DmAgent {
    /// A unit with every slot empty, change ID 1 (as ib_srpt).
    pub fn new(config: DmAgentConfig) -> Self {
        DmAgent {
            config,
            iocs: BTreeMap::new(),
            change_id: 1,
            transmit: VecDeque::new(),
            dropped: 0,
        }
    }

    /// IOUnitInfo's change ID.
    pub fn change_id(&self) -> u16 {
        self.change_id
    }

    /// Requests dropped because answers were not drained.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Installs an IOC in `slot` (1-based) with its service entries; the profile's
    /// ServiceEntries count is set from `entries`.
    pub fn add_ioc(
        &mut self,
        slot: u8,
        mut profile: IocProfile,
        entries: Vec<ServiceEntry>,
    ) -> Result<(), DmError> {
        self.check_slot(slot)?;
        if self.iocs.contains_key(&slot) {
            return Err(DmError::SlotInUse(slot));
        }
        profile.service_entries =
            u8::try_from(entries.len()).map_err(|_| DmError::TooManyEntries(entries.len()))?;
        self.iocs.insert(slot, Ioc { profile, entries });
        self.bump();
        Ok(())
    }

    /// Removes the IOC in `slot`; returns its profile.
    pub fn remove_ioc(&mut self, slot: u8) -> Result<IocProfile, DmError> {
        let ioc = self.iocs.remove(&slot).ok_or(DmError::NoIoc(slot))?;
        self.bump();
        Ok(ioc.profile)
    }

    /// The profile in `slot`.
    pub fn ioc(&self, slot: u8) -> Option<&IocProfile> {
        self.iocs.get(&slot).map(|i| &i.profile)
    }

    /// Answers `mad` from `from` (queued for [`DmAgent::poll_transmit`]); MADs that are not
    /// DM requests are ignored.
    pub fn handle_request(&mut self, from: MadAddress, mad: &MadBuf) {
        let Some(answer) = self.answer(mad) else {
            return;
        };
        if self.transmit.len() >= MAX_QUEUED {
            self.dropped += 1;
            return;
        }
        self.transmit.push_back(MadOut {
            to: from,
            mad: answer,
        });
    }

    /// The next answer to send.
    pub fn poll_transmit(&mut self) -> Option<MadOut> {
        self.transmit.pop_front()
    }

    /// The GetResp to DM request `mad`, or `None` if it is not one. As ib_srpt: Get of the
    /// four attributes is served; Set is 0x000C; other methods 0x0008; every answer is a
    /// GetResp.
    pub fn answer(&self, mad: &MadBuf) -> Option<MadBuf> {
        let req = mad.header().ok()?;
        if req.response
            || req.mgmt_class != MgmtClass::DeviceMgmt
            || req.class_version != DM_CLASS_VERSION
        {
            return None;
        }
        let (status, attr) = match req.method {
            Method::Get => self.get(&req),
            Method::Set => (MadStatus::UnsupportedMethodAttr, DmAttribute::Raw(&NO_DATA)),
            _ => (MadStatus::UnsupportedMethod, DmAttribute::Raw(&NO_DATA)),
        };
        let mut rsp = AnyMad::dm_response(&req, status, attr);
        rsp.header.method = Method::Get; // GetResp, whatever the request's method
        rsp.to_buf().ok()
    }

    fn get(&self, req: &MadHeader) -> (MadStatus, DmAttribute<'static>) {
        let error = |s: MadStatus| (s, DmAttribute::Raw(&NO_DATA));
        match DmAttr::from(req.attr_id) {
            DmAttr::ClassPortInfo => (
                MadStatus::Success,
                DmAttribute::ClassPortInfo(ClassPortInfo::simple(
                    DM_CLASS_VERSION,
                    self.config.resp_time_value,
                )),
            ),
            DmAttr::IouInfo => (MadStatus::Success, DmAttribute::IouInfo(self.iou_info())),
            DmAttr::IocProfile => match self.ioc_at(req.attr_mod) {
                Some(ioc) => (MadStatus::Success, DmAttribute::IocProfile(ioc.profile)),
                None => error(DmStatus::NoIoc.into()),
            },
            DmAttr::ServiceEntries => {
                let range = ServiceEntriesRange::from_attr_mod(req.attr_mod);
                let Some(ioc) = u8::try_from(range.slot)
                    .ok()
                    .and_then(|s| self.ioc_at(s.into()))
                else {
                    return error(DmStatus::NoIoc.into());
                };
                match self.entries(ioc, range) {
                    Some(e) => (MadStatus::Success, DmAttribute::ServiceEntries(e)),
                    None => error(MadStatus::InvalidAttrValue),
                }
            }
            _ => error(MadStatus::UnsupportedMethodAttr),
        }
    }

    /// IOUnitInfo: present slots 1, others not installed.
    pub fn iou_info(&self) -> IouInfo {
        let mut info = IouInfo::new(self.change_id, self.config.max_controllers);
        for &slot in self.iocs.keys() {
            // Slots in the registry are within 1..=max_controllers ≤ 255.
            let _ = info.set_slot(slot.into(), SlotState::Present);
        }
        info
    }

    fn ioc_at(&self, attr_mod: u32) -> Option<&Ioc> {
        self.iocs.get(&u8::try_from(attr_mod).ok()?)
    }

    /// Entries `first..=last` of `ioc`, or `None` for a range that is reversed, longer than
    /// four, or past the last entry (ib_srpt answers these 0x001C too).
    fn entries(&self, ioc: &Ioc, range: ServiceEntriesRange) -> Option<ServiceEntries> {
        let count = range.count()?;
        debug_assert!(count <= ENTRIES_PER_MAD);
        let first = usize::from(range.first);
        let slice = ioc.entries.get(first..first + count)?;
        ServiceEntries::new(slice).ok()
    }

    fn check_slot(&self, slot: u8) -> Result<(), DmError> {
        if slot == 0 || slot > self.config.max_controllers {
            return Err(DmError::BadSlot {
                slot,
                max: self.config.max_controllers,
            });
        }
        Ok(())
    }

    fn bump(&mut self) {
        self.change_id = self.change_id.wrapping_add(1);
    }
}
