//! IOUnitInfo (attribute 0x0010), 132 bytes: which slots of an I/O unit hold controllers
//! (IBTA Vol1 16.3.3.3; Linux `struct ib_dm_iou_info`; python-rdma `DMIOUnitInfo` for the
//! DiagDeviceID/OptionROM bits).
#[allow(unused_imports)]
use crate::prelude::*;

use crate::mad::{MadError, read_fixed, write_fixed};
use wirekit::WireRepr;
use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of the controller list: 4 bits for each of 256 slots.
pub const CONTROLLER_LIST_LEN: usize = 128;
/// DiagDeviceID bit of byte 3 (IBA bit offset 30).
const DIAG_DEVICE_ID: u8 = 0x02;
/// OptionROM bit of byte 3 (IBA bit offset 31).
const OPTION_ROM: u8 = 0x01;

/// IOUnitInfo as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct IouInfoRaw {
    /// Change ID: bumped whenever an IOC comes or goes.
    pub change_id: U16,
    /// Max controllers.
    pub max_controllers: u8,
    /// Reserved (7:2), DiagDeviceID (1), OptionROM (0).
    pub diag_rom: u8,
    /// Controller list: slot 1 in the high nibble of byte 0.
    pub controller_list: [u8; CONTROLLER_LIST_LEN],
}
const _: () = assert!(size_of::<IouInfoRaw>() == 132);

wirekit::open_enum! {
    /// State of one slot in the controller list (`srp_daemon.h`, ib_srpt `srpt_set_ioc`).
    pub enum SlotState(u8) {
        /// No IOC installed.
        NotInstalled = 0x0,
        /// IOC present.
        Present = 0x1,
        /// No such slot.
        NoSlot = 0xf,
    }
}

/// The validated IOUnitInfo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IouInfo {
    /// Change ID.
    pub change_id: u16,
    /// Max controllers (slots in use of the list).
    pub max_controllers: u8,
    /// A diagnostic device ID is supported.
    pub diag_device_id: bool,
    /// An option ROM is present.
    pub option_rom: bool,
    /// The nibble list; use [`IouInfo::slot`] and [`IouInfo::set_slot`].
    pub controller_list: [u8; CONTROLLER_LIST_LEN],
}

impl IouInfo {
    /// An I/O unit of `max_controllers` slots, all empty.
    pub fn new(change_id: u16, max_controllers: u8) -> Self {
        IouInfo {
            change_id,
            max_controllers,
            diag_device_id: false,
            option_rom: false,
            controller_list: [0; CONTROLLER_LIST_LEN],
        }
    }

    /// The state of slot `n` (1..=256), or `None` for a slot number out of range.
    pub fn slot(&self, n: u16) -> Option<SlotState> {
        let i = usize::from(n.checked_sub(1)?);
        let byte = *self.controller_list.get(i / 2)?;
        let nibble = if i % 2 == 0 { byte >> 4 } else { byte & 0x0f };
        Some(nibble.into())
    }

    /// Sets slot `n` (1..=256); fails for a slot out of range or a state over 4 bits.
    pub fn set_slot(&mut self, n: u16, state: SlotState) -> Result<(), MadError> {
        let bad = |why| MadError::BadField {
            what: "IOUnitInfo",
            field: "slot",
            value: n.into(),
            why,
        };
        let v = u8::from(state);
        if v > 0xf {
            return Err(bad("slot state wider than 4 bits"));
        }
        let i = usize::from(
            n.checked_sub(1)
                .ok_or_else(|| bad("slots are numbered from 1"))?,
        );
        let byte = self
            .controller_list
            .get_mut(i / 2)
            .ok_or_else(|| bad("past slot 256"))?;
        *byte = if i % 2 == 0 {
            (*byte & 0x0f) | (v << 4)
        } else {
            (*byte & 0xf0) | v
        };
        Ok(())
    }
}

impl<'a> WireRepr<'a> for IouInfo {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: IouInfoRaw = read_fixed("IOUnitInfo", buf)?;
        Ok(IouInfo {
            change_id: r.change_id.get(),
            max_controllers: r.max_controllers,
            diag_device_id: r.diag_rom & DIAG_DEVICE_ID != 0,
            option_rom: r.diag_rom & OPTION_ROM != 0,
            controller_list: r.controller_list,
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<IouInfoRaw>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        let r = IouInfoRaw {
            change_id: U16::new(self.change_id),
            max_controllers: self.max_controllers,
            diag_rom: if self.diag_device_id {
                DIAG_DEVICE_ID
            } else {
                0
            } | if self.option_rom { OPTION_ROM } else { 0 },
            controller_list: self.controller_list,
        };
        write_fixed("IOUnitInfo", &r, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// What ib_srpt answers (`srpt_get_iou`): change ID 1, 16 controllers, slot 1 present,
    /// slots 2..16 not installed; plus OptionROM set here to exercise the bit.
    fn iou_bytes() -> [u8; 132] {
        let mut b = [0u8; 132];
        b[..5].copy_from_slice(&[
            0x00, 0x01, // ChangeID 1
            0x10, // MaxControllers 16
            0x01, // reserved, DiagDeviceID 0, OptionROM 1
            0x10, // slot 1 present (high nibble), slot 2 not installed
        ]);
        b[131] = 0x0f; // slot 256: no slot
        b
    }

    fn iou() -> IouInfo {
        let mut i = IouInfo::new(1, 16);
        i.option_rom = true;
        i.set_slot(1, SlotState::Present).expect("slot 1");
        i.set_slot(256, SlotState::NoSlot).expect("slot 256");
        i
    }

    #[test]
    fn iou_info_decodes_known_bytes() {
        check::decodes(&iou_bytes(), &iou());
    }

    #[test]
    fn iou_info_emits_known_bytes() {
        check::emits(&iou(), &iou_bytes());
    }

    #[test]
    fn iou_info_round_trips() {
        check::round_trips(&iou(), &mut Vec::new());
        let diag = IouInfo {
            diag_device_id: true,
            ..iou()
        };
        check::round_trips(&diag, &mut Vec::new());
    }

    #[test]
    fn iou_info_truncated_errors() {
        check::truncation_errors::<IouInfo>(&iou_bytes());
    }

    #[test]
    fn slots_are_nibbles_from_slot_one() {
        let mut i = iou();
        assert_eq!(i.slot(1), Some(SlotState::Present));
        assert_eq!(i.slot(2), Some(SlotState::NotInstalled));
        assert_eq!(i.slot(256), Some(SlotState::NoSlot));
        assert_eq!(i.slot(0), None);
        assert_eq!(i.slot(257), None);
        i.set_slot(2, SlotState::Present).expect("slot 2");
        assert_eq!(i.controller_list[0], 0x11);
        i.set_slot(1, SlotState::NotInstalled).expect("slot 1");
        assert_eq!(i.controller_list[0], 0x01);
        assert!(i.set_slot(0, SlotState::Present).is_err());
        assert!(i.set_slot(257, SlotState::Present).is_err());
        assert!(i.set_slot(3, SlotState::Unknown(0x10)).is_err());
        assert_eq!(i.slot(3), Some(SlotState::NotInstalled));
    }
}
