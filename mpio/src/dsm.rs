//! The Device Specific Module interface, modelled on Microsoft MPIO's DSM callbacks
//! (msdsm `intrface.c`): the multipath layer ([`crate::MultipathDisk`]) asks the DSM to
//! claim path devices, to tell whether two are the same logical unit, whether a path may
//! carry I/O, what to do with an error, which path the next I/O takes, and how to verify a
//! path. [`crate::SrpDsm`] is the implementation for SRP logical units.
#[allow(unused_imports)]
use crate::prelude::*;

use crate::alua::AluaState;
use crate::outcome::Outcome;
use crate::policy::{Candidate, Selector};
use core::time::Duration;

/// What a DSM claims a path device as (`DsmInquire`'s DsmIdentifier).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DsmIdentifier {
    /// The logical unit's identity (VPD 0x83, named): the multipath grouping key.
    pub identity: String,
    /// Whether the LU reports ALUA (INQUIRY TPGS ≠ 0).
    pub alua: bool,
    /// The path's relative target port, from VPD 0x83 (ALUA group lookup).
    pub relative_port: Option<u16>,
    /// The path's target port group, from VPD 0x83.
    pub port_group: Option<u16>,
}

/// Why a DSM declined a device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Decline {
    /// Not a direct-access block device.
    #[error("peripheral device type {0:#04x} is not a disk")]
    NotADisk(u8),
    /// The LU reports no identity to group paths by.
    #[error("no logical-unit designator in VPD page 0x83")]
    NoIdentity,
    /// The INQUIRY data is too short.
    #[error("INQUIRY data of {0} bytes")]
    ShortInquiry(usize),
}

/// What to do after a command completed on a path (`DsmInterpretError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It succeeded.
    Done,
    /// The device answered: report it to the disk's user, do not try another path
    /// (medium error, invalid request, reservation conflict).
    Surface,
    /// Send it again (on whatever path the policy picks) after this long: unit attention,
    /// BUSY, an ALUA transition, a reset.
    Retry(Duration),
    /// The path failed: take it out of service and send the command on another path.
    Failover,
}

/// Controller information for administration (`DsmGetControllerInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerInfo {
    /// The I/O controller's GUID, hex.
    pub ioc_guid: String,
    /// Its name.
    pub ioc_name: String,
    /// The target port address.
    pub portal: String,
}

/// The callbacks (see the module doc).
pub trait Dsm: Send + Sync {
    /// `DsmInquire`: claim a path device from its standard INQUIRY and VPD 0x83 data, or
    /// decline it. `nexus` names the target port and LUN the device answered at: the
    /// identity of a device whose VPD 0x83 names no logical unit (a LUN is scoped by its
    /// target port, SAM-5 4.6.18, so every channel to that port reaches the same LU; no two
    /// target ports are assumed to share one). Without it such a device is declined.
    fn inquire(
        &self,
        inquiry: &[u8],
        vpd83: &[u8],
        nexus: Option<&str>,
    ) -> Result<DsmIdentifier, Decline>;

    /// `DsmCompareDevices`: whether two claimed devices are the same logical unit.
    fn compare_devices(&self, a: &DsmIdentifier, b: &DsmIdentifier) -> bool;

    /// `DsmIsPathActive`: whether a path in this state, with this ALUA state of its group,
    /// may carry READ and WRITE.
    fn is_path_active(&self, usable: bool, alua: Option<AluaState>) -> bool;

    /// `DsmSetDeviceInfo`'s preference: the ALUA tier of a path (0 best).
    fn tier(&self, alua: Option<AluaState>) -> u8;

    /// `DsmInterpretError`: the verdict on `outcome`, the `tries`-th send of the command.
    fn interpret_error(&self, outcome: &Outcome, tries: u32) -> Verdict;

    /// `DsmLBGetPath`: the path for the next I/O.
    fn lb_get_path(&self, selector: &mut Selector, paths: &[Candidate]) -> Option<usize> {
        selector.select(paths)
    }

    /// `DsmPathVerify`: the CDB sent to verify a path.
    fn path_verify_cdb(&self) -> Vec<u8>;

    /// `DsmPathVerify`'s judgement of the answer.
    fn path_verified(&self, outcome: &Outcome) -> bool;
}
