//! Target ports and ALUA target port groups (SPC-4 5.15): one group per IOC, each with the
//! one relative target port of that IOC, all active/optimized unless configured otherwise.

/// RELATIVE TARGET PORT IDENTIFIER (SPC-4; 1..=65535, 0 is reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelativePortId(pub u16);

/// TARGET PORT GROUP identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetPortGroupId(pub u16);

/// The port a command arrived through: what VPD 83h reports as the target port
/// designators, so it differs per IOC while the LUN's own designators do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortIdentity {
    /// The relative target port of this IOC.
    pub relative_port: RelativePortId,
    /// The target port group of this IOC.
    pub group: TargetPortGroupId,
}

impl PortIdentity {
    /// The port of IOC `index` (0-based) in the one-group-per-IOC layout: relative port and
    /// group `index + 1`. `None` past 65534 IOCs.
    pub fn for_ioc(index: u16) -> Option<PortIdentity> {
        let id = index.checked_add(1)?;
        Some(PortIdentity {
            relative_port: RelativePortId(id),
            group: TargetPortGroupId(id),
        })
    }
}

/// ASYMMETRIC ACCESS STATE (SPC-4 Table 163).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluaState {
    /// 0h: active/optimized.
    ActiveOptimized = 0x0,
    /// 1h: active/non-optimized.
    ActiveNonOptimized = 0x1,
    /// 2h: standby.
    Standby = 0x2,
    /// 3h: unavailable.
    Unavailable = 0x3,
    /// Fh: transitioning.
    Transitioning = 0xf,
}

/// One target port group as REPORT TARGET PORT GROUPS describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetPortGroup {
    /// The group's identifier.
    pub id: TargetPortGroupId,
    /// Its asymmetric access state.
    pub state: AluaState,
    /// PREF: the preferred group.
    pub preferred: bool,
    /// The relative target ports in the group.
    pub ports: Vec<RelativePortId>,
}

impl TargetPortGroup {
    /// The default layout for `iocs` IOCs: group `i + 1` holds port `i + 1`, all
    /// active/optimized (matching [`PortIdentity::for_ioc`]).
    pub fn one_per_ioc(iocs: u16) -> Vec<TargetPortGroup> {
        (0..iocs)
            .filter_map(PortIdentity::for_ioc)
            .map(|p| TargetPortGroup {
                id: p.group,
                state: AluaState::ActiveOptimized,
                preferred: false,
                ports: vec![p.relative_port],
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_group_per_ioc() {
        let g = TargetPortGroup::one_per_ioc(2);
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].id, TargetPortGroupId(2));
        assert_eq!(g[1].ports, vec![RelativePortId(2)]);
        assert_eq!(PortIdentity::for_ioc(1).map(|p| p.group), Some(g[1].id));
        assert_eq!(PortIdentity::for_ioc(u16::MAX), None);
    }
}
