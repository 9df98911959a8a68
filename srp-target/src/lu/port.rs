//! Target ports and ALUA target port groups (SPC-4 5.15): one group per IOC, each with the
//! one relative target port of that IOC, numbered from `[target] port_base`, all
//! active/optimized unless configured otherwise; and the groups of peer appliances that
//! serve the same LUs (`[[peer]]`), reported alike by every appliance.

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
        PortIdentity::for_ioc_from(1, index)
    }

    /// The port of IOC `index` (0-based) on an appliance whose first IOC is relative port
    /// and group `base` (`[target] port_base`). `None` past 65535.
    pub fn for_ioc_from(base: u16, index: u16) -> Option<PortIdentity> {
        let id = base.checked_add(index).filter(|&id| id > 0)?;
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
        TargetPortGroup::layout(1, &vec![AluaState::ActiveOptimized; usize::from(iocs)], &[])
    }

    /// Every group an LU of this appliance is reached through, in identifier order: one
    /// per IOC from `base` in the state `states[i]` says, and each peer appliance's
    /// `(group, state)` (`[[peer]]`), each group holding the relative port of its number —
    /// what every appliance serving the LU reports alike.
    pub fn layout(
        base: u16,
        states: &[AluaState],
        peers: &[(u16, AluaState)],
    ) -> Vec<TargetPortGroup> {
        let own = states.iter().zip(0u16..).filter_map(|(&state, i)| {
            let p = PortIdentity::for_ioc_from(base, i)?;
            Some((p.group.0, state))
        });
        let mut groups: Vec<TargetPortGroup> = own
            .chain(peers.iter().copied())
            .map(|(id, state)| TargetPortGroup {
                id: TargetPortGroupId(id),
                state,
                preferred: false,
                ports: vec![RelativePortId(id)],
            })
            .collect();
        groups.sort_by_key(|g| g.id);
        groups
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

    #[test]
    fn two_appliances_report_one_layout() {
        use AluaState::{ActiveNonOptimized as Non, ActiveOptimized as Opt};
        // Appliance A: IOCs at 1 and 2, optimized; B: IOCs at 3 and 4, non-optimized.
        let a = TargetPortGroup::layout(1, &[Opt, Opt], &[(3, Non), (4, Non)]);
        let b = TargetPortGroup::layout(3, &[Non, Non], &[(1, Opt), (2, Opt)]);
        assert_eq!(
            a, b,
            "both appliances answer REPORT TARGET PORT GROUPS alike"
        );
        assert_eq!(
            a.iter()
                .map(|g| (g.id.0, g.ports[0].0, g.state))
                .collect::<Vec<_>>(),
            vec![(1, 1, Opt), (2, 2, Opt), (3, 3, Non), (4, 4, Non)]
        );
        assert_eq!(
            PortIdentity::for_ioc_from(3, 1).map(|p| (p.relative_port.0, p.group.0)),
            Some((4, 4))
        );
        assert_eq!(PortIdentity::for_ioc_from(65535, 1), None);
    }
}
