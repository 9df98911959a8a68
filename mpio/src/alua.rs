//! Asymmetric logical unit access (SPC-4 5.15): the TPGS field of standard INQUIRY data
//! and REPORT TARGET PORT GROUPS parameter data, and the state of the group a path's
//! target port belongs to.
#[allow(unused_imports)]
use crate::prelude::*;

/// An asymmetric access state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AluaState {
    /// Active/optimized: the preferred way in.
    ActiveOptimized,
    /// Active/non-optimized: works, slower.
    ActiveNonOptimized,
    /// Standby: only management commands.
    Standby,
    /// Unavailable.
    Unavailable,
    /// Offline.
    Offline,
    /// Transitioning between states.
    Transitioning,
    /// A reserved value.
    Other(u8),
}

impl AluaState {
    /// From the ASYMMETRIC ACCESS STATE field.
    pub fn from_code(code: u8) -> AluaState {
        match code & 0x0f {
            0 => AluaState::ActiveOptimized,
            1 => AluaState::ActiveNonOptimized,
            2 => AluaState::Standby,
            3 => AluaState::Unavailable,
            0xe => AluaState::Offline,
            0xf => AluaState::Transitioning,
            c => AluaState::Other(c),
        }
    }

    /// Whether READ and WRITE may go through a port in this state.
    pub fn serves_io(self) -> bool {
        matches!(
            self,
            AluaState::ActiveOptimized | AluaState::ActiveNonOptimized
        )
    }

    /// The name shown to operators.
    pub fn as_str(self) -> &'static str {
        match self {
            AluaState::ActiveOptimized => "active/optimized",
            AluaState::ActiveNonOptimized => "active/non-optimized",
            AluaState::Standby => "standby",
            AluaState::Unavailable => "unavailable",
            AluaState::Offline => "offline",
            AluaState::Transitioning => "transitioning",
            AluaState::Other(_) => "reserved",
        }
    }
}

/// Whether standard INQUIRY data says the LU supports implicit or explicit ALUA (TPGS≠0).
pub fn supports_alua(inquiry: &[u8]) -> bool {
    inquiry.get(5).is_some_and(|b| (b >> 4) & 0x3 != 0)
}

/// One target port group of REPORT TARGET PORT GROUPS data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortGroup {
    /// Its state.
    pub state: AluaState,
    /// PREF: the preferred group.
    pub preferred: bool,
    /// TARGET PORT GROUP.
    pub id: u16,
    /// RELATIVE TARGET PORT IDENTIFIERs of its ports.
    pub ports: Vec<u16>,
}

/// The groups in REPORT TARGET PORT GROUPS parameter data (length format 0); a truncated
/// list yields the complete descriptors.
pub fn parse_groups(data: &[u8]) -> Vec<PortGroup> {
    let Some(len) = data
        .get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    else {
        return Vec::new();
    };
    let end = (4 + len).min(data.len());
    let mut rest = data.get(4..end).unwrap_or_default();
    let mut out = Vec::new();
    while rest.len() >= 8 {
        let count = rest[7] as usize;
        let Some(ports) = rest.get(8..8 + 4 * count) else {
            break;
        };
        out.push(PortGroup {
            state: AluaState::from_code(rest[0]),
            preferred: rest[0] & 0x80 != 0,
            id: u16::from_be_bytes([rest[2], rest[3]]),
            ports: ports
                .chunks_exact(4)
                .map(|p| u16::from_be_bytes([p[2], p[3]]))
                .collect(),
        });
        rest = &rest[8 + 4 * count..];
    }
    out
}

/// The group of relative target port `port` (or of group id `group`, when the VPD page
/// named it) in `groups`.
pub fn group_of(groups: &[PortGroup], port: Option<u16>, group: Option<u16>) -> Option<&PortGroup> {
    groups
        .iter()
        .find(|g| group.is_some_and(|id| id == g.id))
        .or_else(|| {
            groups
                .iter()
                .find(|g| port.is_some_and(|p| g.ports.contains(&p)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_states_and_ports() {
        let mut d = vec![0, 0, 0, 0];
        d.extend([0x80, 0x0f, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]); // AO, preferred, group 1: port 1
        d.extend([0x02, 0x0f, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3]); // standby, group 2
        let len = (d.len() - 4) as u32;
        d[..4].copy_from_slice(&len.to_be_bytes());
        let g = parse_groups(&d);
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[0].state, g[0].preferred, g[0].id),
            (AluaState::ActiveOptimized, true, 1)
        );
        assert_eq!(g[1].ports, vec![2, 3]);
        assert_eq!(group_of(&g, Some(3), None).map(|g| g.id), Some(2));
        assert_eq!(
            group_of(&g, None, Some(1)).map(|g| g.state),
            Some(AluaState::ActiveOptimized)
        );
        assert!(group_of(&g, Some(9), None).is_none());
        assert!(!AluaState::Standby.serves_io());
        d.truncate(d.len() - 3);
        assert_eq!(parse_groups(&d).len(), 1, "the cut descriptor is dropped");
        assert!(parse_groups(&[0, 0]).is_empty());
    }

    #[test]
    fn tpgs_bits() {
        let mut inq = vec![0u8; 36];
        assert!(!supports_alua(&inq));
        inq[5] = 0x10;
        assert!(supports_alua(&inq));
        assert!(!supports_alua(&[0; 4]));
    }
}
