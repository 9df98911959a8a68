//! What identifies a logical unit and the ports it is reached through: [`identity`] (serial,
//! NAA designator), [`port`] (relative target port, target port groups, ALUA states).

pub mod identity;
pub mod port;

pub use identity::{LunIdentity, Oui};
pub use port::{AluaState, PortIdentity, RelativePortId, TargetPortGroup, TargetPortGroupId};
