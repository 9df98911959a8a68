//! The Device Management agents of one daemon port, one per partition of its P_Key table:
//! each IOC reachable on the port has its own slot (1-based, configuration order, the same
//! in every agent), with the SRP profile and the one service entry hosts need to log in
//! ("SRP.T10:<id_ext>" naming the IOC's CM service ID), as ib_srpt serves them. A query is
//! answered by the agent of the partition it came on, which shows only the IOCs exported
//! on that partition (the others' slots are empty): discovery on a partition finds what a
//! login there may reach, and nothing of the rest. A disabled IOC keeps its slot but is
//! not installed in it (IOUnitInfo shows the slot empty, so discovery sweeps see the IOC go
//! and come back with the switch).

use super::DaemonError;
use crate::appliance::ChannelLimits;
use crate::config::{PortConfig, TargetConfig};
use crate::login::cm::RESPONDER_RESOURCES;
use access_layer::dm::{DmAgent, DmAgentConfig};
use access_layer::mad::dm::{IocProfile, ServiceEntry};

/// What one slot advertises when its IOC is enabled, in one partition's agent.
#[derive(Clone, Debug)]
pub struct Advert {
    /// The IOC's name.
    pub ioc: String,
    /// The agent (the partition's index in the port's P_Key table).
    pub agent: usize,
    /// Its slot on this port.
    pub slot: u8,
    profile: IocProfile,
    entries: Vec<ServiceEntry>,
}

impl Advert {
    /// Installs (`on`) or removes the IOC in its slot; a no-op when already so.
    pub fn apply(&self, dm: &mut DmAgent, on: bool) {
        let installed = dm.ioc(self.slot).is_some();
        if on && !installed {
            // The slot is ours and checked at start: this cannot fail.
            let _ = dm.add_ioc(self.slot, self.profile, self.entries.clone());
        } else if !on && installed {
            let _ = dm.remove_ioc(self.slot);
        }
    }
}

/// The agents for port `p`, one per entry of its P_Key table (in order): each with every
/// enabled IOC of `config` reachable on the port and exported on that partition,
/// advertised with the queue depth, message size and transfer size of `limits`; and every
/// such advert, for the run-time switch.
pub fn agents(
    config: &TargetConfig,
    p: &PortConfig,
    limits: &ChannelLimits,
) -> Result<(Vec<DmAgent>, Vec<Advert>), DaemonError> {
    let mut agents = Vec::new();
    let mut adverts = Vec::new();
    for (index, pkey) in p.partitions.iter().enumerate() {
        let (dm, mut a) = agent(config, p, limits, index, *pkey)?;
        agents.push(dm);
        adverts.append(&mut a);
    }
    Ok((agents, adverts))
}

/// The agent of partition `pkey` (index `index` of the port's table).
fn agent(
    config: &TargetConfig,
    p: &PortConfig,
    limits: &ChannelLimits,
    index: usize,
    pkey: ib_verbs::PKey,
) -> Result<(DmAgent, Vec<Advert>), DaemonError> {
    let fail = |reason: String| DaemonError::Dm {
        name: p.name.clone(),
        reason,
    };
    let mut dm = DmAgent::new(DmAgentConfig::default());
    let mut adverts = Vec::new();
    let iocs = config.iocs.iter().filter(|i| i.ports.contains(&p.name));
    for (slot, ioc) in (1u8..).zip(iocs) {
        if !ioc.partitions.iter().any(|k| k.base() == pkey.base()) {
            continue;
        }
        let profile = IocProfile::srp(
            ioc.guid,
            u16::try_from(limits.window).unwrap_or(u16::MAX),
            RESPONDER_RESOURCES,
            limits.max_it_iu_len,
            u32::try_from(limits.max_transfer).unwrap_or(u32::MAX),
            &ioc.name,
        )
        .map_err(|e| fail(format!("IOC {}: profile: {e}", ioc.name)))?;
        let entries = vec![ServiceEntry::srp(ioc.id_ext, ioc.service_id)];
        dm.add_ioc(slot, profile, entries.clone())
            .map_err(|e| fail(format!("IOC {}: slot {slot}: {e}", ioc.name)))?;
        let advert = Advert {
            ioc: ioc.name.clone(),
            agent: index,
            slot,
            profile,
            entries,
        };
        advert.apply(&mut dm, ioc.enabled);
        adverts.push(advert);
    }
    Ok((dm, adverts))
}
