//! The appliance changed live by a reload ([`crate::reload`]): new LUNs opened beside the
//! running ones, then the LUN set, the IOCs (their exports, ACLs, states) and the target
//! port groups replaced at once by the daemon's loop between two turns.

use super::{Appliance, Ioc, StartErrors, open_lun};
use crate::backend::medium::MediumLayer;
use crate::config::{IocConfig, TargetConfig};
use crate::exec::LogicalUnit;
use crate::io::NexusInfo;
use crate::lu::{PortIdentity, TargetPortGroup};
use scsi::Lun;
use srp::wire::PortId;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

impl Appliance {
    /// Opens the LUNs of `config` named in `names` (new ones, beside the running), with
    /// this appliance's copy manager and limits; every failure, or all of them opened.
    pub fn open_luns(
        &self,
        config: &TargetConfig,
        names: &[String],
        layer: Option<&MediumLayer>,
    ) -> Result<Vec<(String, Arc<LogicalUnit>)>, StartErrors> {
        let mut opened = Vec::new();
        let mut errors = Vec::new();
        for l in config.luns.iter().filter(|l| names.contains(&l.name)) {
            match open_lun(l, config, &self.copy, &self.limits, layer) {
                Ok(lu) => opened.push((l.name.clone(), lu.into_shared())),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(opened)
        } else {
            Err(StartErrors(errors))
        }
    }

    /// Becomes `config`: LUNs it no longer names are dropped (channels still holding one
    /// keep it until they let go), `opened` ones join, and the IOCs are laid out again in
    /// its order with their exports, ACLs and ALUA states — IOC *i* stays relative port
    /// `port_base` + *i*. `enabled` says whether IOC *i* accepts logins (a reload keeps the state an
    /// operator set unless the file changed it).
    pub fn reconfigure(
        &mut self,
        config: &TargetConfig,
        opened: Vec<(String, Arc<LogicalUnit>)>,
        enabled: impl Fn(usize, &IocConfig) -> bool,
    ) {
        self.luns.retain(|name, _| config.lun(name).is_some());
        self.luns.extend(opened);
        let n = u16::try_from(config.iocs.len()).unwrap_or(u16::MAX);
        let groups = port_groups(config);
        let mut iocs = Vec::new();
        for (c, i) in config.iocs.iter().zip(0u16..n) {
            let Some(port) = PortIdentity::for_ioc_from(config.target.port_base, i) else {
                continue;
            };
            iocs.push(ioc(c, port, &self.luns, enabled(usize::from(i), c)));
        }
        self.copy.set_exports(iocs.iter().flat_map(|i| {
            i.exports
                .iter()
                .map(move |(lun, lu)| (i.port.relative_port, *lun, lu))
        }));
        self.iocs = iocs;
        self.groups = groups;
    }

    /// The IOC named `name`.
    pub fn ioc(&self, name: &str) -> Option<&Ioc> {
        self.iocs.iter().find(|i| i.config.name == name)
    }

    /// What a channel of `initiator` on `ioc` sees: its LUs by LUN and its I_T nexus (the
    /// LUN list, the target port, every port group).
    pub fn exports_for(
        &self,
        ioc: &Ioc,
        initiator: PortId,
    ) -> (Vec<(Lun, Arc<LogicalUnit>)>, Arc<NexusInfo>) {
        let luns = ioc
            .lun_list
            .iter()
            .filter_map(|l| Some((*l, ioc.exports.get(l)?.clone())))
            .collect();
        let nexus = Arc::new(NexusInfo {
            initiator,
            luns: ioc.lun_list.clone(),
            port: ioc.port,
            groups: self.groups.clone(),
        });
        (luns, nexus)
    }
}

/// IOC `c` at `port`, exporting from `luns` (validation guarantees every exported name is
/// a configured LUN).
pub(super) fn ioc(
    c: &IocConfig,
    port: PortIdentity,
    luns: &BTreeMap<String, Arc<LogicalUnit>>,
    enabled: bool,
) -> Ioc {
    let exports: BTreeMap<Lun, Arc<LogicalUnit>> = c
        .exports
        .iter()
        .filter_map(|(lun, name)| Some((*lun, luns.get(name)?.clone())))
        .collect();
    Ioc {
        config: c.clone(),
        port,
        enabled: AtomicBool::new(enabled),
        lun_list: exports.keys().copied().collect(),
        exports,
    }
}

/// Every target port group `config` describes: its IOCs' from `port_base`, in their ALUA
/// states, and its peers' (`[[peer]]`), in identifier order.
pub(super) fn port_groups(config: &TargetConfig) -> Vec<TargetPortGroup> {
    let states: Vec<_> = config.iocs.iter().map(|c| c.alua).collect();
    let peers: Vec<_> = config
        .peers
        .iter()
        .flat_map(|p| p.port_groups.iter().map(move |&g| (g, p.alua)))
        .collect();
    TargetPortGroup::layout(config.target.port_base, &states, &peers)
}
