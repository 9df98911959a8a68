//! The Device Management agent of one daemon port: each IOC reachable on the port in its
//! own slot (1-based, configuration order), with the SRP profile and the one service entry
//! hosts need to log in ("SRP.T10:<id_ext>" naming the IOC's CM service ID), as ib_srpt
//! serves them.

use super::DaemonError;
use crate::appliance::ChannelLimits;
use crate::config::{PortConfig, TargetConfig};
use crate::login::cm::RESPONDER_RESOURCES;
use access_layer::dm::{DmAgent, DmAgentConfig};
use access_layer::mad::dm::{IocProfile, ServiceEntry};

/// The agent for port `p`: every IOC of `config` reachable on it, advertised with the
/// queue depth, message size and transfer size of `limits`.
pub fn agent(
    config: &TargetConfig,
    p: &PortConfig,
    limits: &ChannelLimits,
) -> Result<DmAgent, DaemonError> {
    let fail = |reason: String| DaemonError::Dm {
        name: p.name.clone(),
        reason,
    };
    let mut dm = DmAgent::new(DmAgentConfig::default());
    let iocs = config.iocs.iter().filter(|i| i.ports.contains(&p.name));
    for (slot, ioc) in (1u8..).zip(iocs) {
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
        dm.add_ioc(slot, profile, entries)
            .map_err(|e| fail(format!("IOC {}: slot {slot}: {e}", ioc.name)))?;
    }
    Ok(dm)
}
