//! Device Management (class 0x06, class version 1): the 64-byte DM framing and the
//! attributes SRP discovery uses (IBTA Vol1 16.3; Linux `ib_dm_mad.h`; rdma-core
//! `srp_daemon.h`; python-rdma `iba_16_3.xml` for the IBA bit layout).
//!
//! A DM MAD is the common header (24), the RMPP header (12, inactive), 28 reserved bytes and
//! 192 data bytes. Files: [`iou_info`], [`ioc_profile`], [`service_entries`].

pub mod ioc_profile;
pub mod iou_info;
pub mod service_entries;

pub use ioc_profile::{ControllerOps, IocProfile};
pub use iou_info::{IouInfo, SlotState};
pub use service_entries::{ServiceEntries, ServiceEntriesRange, ServiceEntry};

/// The text of a NUL-padded field (IDString, ServiceName) up to its first NUL, if UTF-8.
fn nul_padded_str(field: &[u8]) -> Option<&str> {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    core::str::from_utf8(field.get(..end)?).ok()
}

/// DM class version.
pub const DM_CLASS_VERSION: u8 = 1;
/// Offset of DM data in the MAD (Linux `IB_MGMT_DEVICE_HDR`).
pub const DM_DATA_OFFSET: usize = 64;
/// Bytes of DM data in one MAD (Linux `IB_MGMT_DEVICE_DATA`).
pub const DM_DATA_LEN: usize = 192;
/// Reserved bytes between the RMPP header and the DM data.
pub const DM_RESERVED_LEN: usize = 28;

wirekit::open_enum! {
    /// DM attribute IDs (IBTA Vol1 table 294; Linux `DM_ATTR_*`).
    pub enum DmAttr(u16) {
        /// ClassPortInfo.
        ClassPortInfo = 0x0001,
        /// Notice.
        Notice = 0x0002,
        /// IOUnitInfo.
        IouInfo = 0x0010,
        /// IOControllerProfile (modifier: slot, 1-based).
        IocProfile = 0x0011,
        /// ServiceEntries (modifier: slot << 16 | last << 8 | first).
        ServiceEntries = 0x0012,
        /// DiagnosticTimeout.
        DiagnosticTimeout = 0x0020,
        /// PrepareToTest.
        PrepareToTest = 0x0021,
        /// TestDeviceOnce.
        TestDeviceOnce = 0x0022,
        /// TestDeviceLoop.
        TestDeviceLoop = 0x0023,
        /// DiagCode.
        DiagCode = 0x0024,
    }
}

wirekit::open_enum! {
    /// DM-specific MAD status values (class-specific bits 15:8; OpenSM
    /// `IB_DM_MAD_STATUS_*`, Linux `DM_MAD_STATUS_NO_IOC`). The common codes are
    /// [`MadStatus`](crate::mad::MadStatus).
    pub enum DmStatus(u16) {
        /// No IOC in that slot / the IOC does not respond (ib_srpt: slot out of range).
        NoIoc = 0x0100,
        /// No service entries in the requested range.
        NoServiceEntries = 0x0200,
        /// IOC failure.
        IocFailure = 0x8000,
    }
}

impl From<DmStatus> for crate::mad::MadStatus {
    fn from(s: DmStatus) -> Self {
        u16::from(s).into()
    }
}

wirekit::open_enum! {
    /// IOControllerProfile IOClass (SRP r16a annex B; srp-linux.md §2.3).
    pub enum IoClass(u16) {
        /// SRP r16a.
        Srp = 0x0100,
        /// SRP rev 10 (early targets; ib_srp accepts it via `io_class=ff00`).
        SrpRev10 = 0xff00,
    }
}

/// IOSubclass of SRP: the low 16 bits of the NCITS OUI (0x00609E).
pub const SRP_IO_SUBCLASS: u16 = 0x609e;
/// Protocol of SRP.
pub const SRP_PROTOCOL: u16 = 0x0108;
/// ProtocolVersion of SRP.
pub const SRP_PROTOCOL_VERSION: u16 = 0x0001;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::MadStatus;

    #[test]
    fn dm_code_points_match_ib_dm_mad_h() {
        assert_eq!(u16::from(DmAttr::IouInfo), 0x0010);
        assert_eq!(u16::from(DmAttr::IocProfile), 0x0011);
        assert_eq!(u16::from(DmAttr::ServiceEntries), 0x0012);
        assert_eq!(u16::from(MadStatus::from(DmStatus::NoIoc)), 0x0100);
        assert_eq!(DmStatus::from(0x0200u16), DmStatus::NoServiceEntries);
        assert_eq!(u16::from(IoClass::Srp), 0x0100);
        assert_eq!(IoClass::from(0xff00u16), IoClass::SrpRev10);
    }
}
