//! IOControllerProfile (attribute 0x0011, modifier = slot), 128 bytes (IBTA Vol1 16.3.3.4
//! via python-rdma `DMIOControllerProfile`; Linux `struct ib_dm_ioc_profile`;
//! srp-linux.md §2.3 for what SRP puts in it).
#[allow(unused_imports)]
use crate::prelude::*;

use super::{IoClass, SRP_IO_SUBCLASS, SRP_PROTOCOL, SRP_PROTOCOL_VERSION};
use crate::mad::{MadError, check_width, read_fixed, write_fixed};
use ib_verbs::Guid;
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of the ID string.
pub const ID_STRING_LEN: usize = 64;

/// IOControllerProfile as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct IocProfileRaw {
    /// 0 IOC GUID.
    pub guid: U64,
    /// 8 VendorID (31:8), reserved (7:0).
    pub vendor_id: U32,
    /// 12 DeviceID.
    pub device_id: U32,
    /// 16 DeviceVersion.
    pub device_version: U16,
    /// 18 Reserved.
    pub reserved1: U16,
    /// 20 SubsystemVendorID (31:8), reserved (7:0).
    pub subsystem_vendor_id: U32,
    /// 24 SubsystemID.
    pub subsystem_id: U32,
    /// 28 IOClass.
    pub io_class: U16,
    /// 30 IOSubclass.
    pub io_subclass: U16,
    /// 32 Protocol.
    pub protocol: U16,
    /// 34 ProtocolVersion.
    pub protocol_version: U16,
    /// 36 Reserved (Linux: `service_conn`, `initiators_supported`; "not used" in SRP B.7).
    pub reserved2: [u8; 4],
    /// 40 SendMessageQueueDepth.
    pub send_queue_depth: U16,
    /// 42 Reserved.
    pub reserved3: u8,
    /// 43 RDMAReadQueueDepth.
    pub rdma_read_depth: u8,
    /// 44 SendMessageSize.
    pub send_size: U32,
    /// 48 RDMATransferSize.
    pub rdma_size: U32,
    /// 52 ControllerOperationsCapabilityMask.
    pub op_cap_mask: u8,
    /// 53 ControllerServicesCapabilityMask (reserved in IBA 1.2; Linux `svc_cap_mask`).
    pub svc_cap_mask: u8,
    /// 54 ServiceEntries.
    pub num_svc_entries: u8,
    /// 55 Reserved.
    pub reserved4: [u8; 9],
    /// 64 IDString.
    pub id_string: [u8; ID_STRING_LEN],
}
const _: () = assert!(size_of::<IocProfileRaw>() == 128);

bitflags::bitflags! {
    /// ControllerOperationsCapabilityMask (ib_srpt `SRP_SEND_TO_IOC` …; srp-linux.md §2.3).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct ControllerOps: u8 {
        /// ST: send messages to the IOC.
        const SEND_TO_IOC = 0x01;
        /// SF: send messages from the IOC.
        const SEND_FROM_IOC = 0x02;
        /// RT: RDMA read requests to the IOC.
        const RDMA_READ_TO_IOC = 0x04;
        /// RF: RDMA read requests from the IOC.
        const RDMA_READ_FROM_IOC = 0x08;
        /// WT: RDMA write requests to the IOC.
        const RDMA_WRITE_TO_IOC = 0x10;
        /// WF: RDMA write requests from the IOC.
        const RDMA_WRITE_FROM_IOC = 0x20;
        /// AT: atomic operations to the IOC.
        const ATOMIC_TO_IOC = 0x40;
        /// AF: atomic operations from the IOC.
        const ATOMIC_FROM_IOC = 0x80;
    }
}

impl ControllerOps {
    /// What an SRP target offers: ST, SF, RF, WF (= 0x2B; ib_srpt `srpt_get_ioc`).
    pub const SRP: ControllerOps = ControllerOps::SEND_TO_IOC
        .union(ControllerOps::SEND_FROM_IOC)
        .union(ControllerOps::RDMA_READ_FROM_IOC)
        .union(ControllerOps::RDMA_WRITE_FROM_IOC);
}

/// The validated IOControllerProfile.
///
/// VendorID and SubsystemVendorID are 24-bit OUIs in the **top** 24 bits of their 32-bit
/// words, as IBA lays them out and srp_daemon reads them (`be32 >> 8`). Linux ib_srpt writes
/// `cpu_to_be32(vendor_id)` instead, so its OUI shows shifted (srp-linux.md §2.3); we follow
/// IBA, and a profile from ib_srpt reads back with `vendor_id` = its OUI's low 16 bits << 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IocProfile {
    /// IOC GUID.
    pub guid: Guid,
    /// VendorID, 24-bit OUI.
    pub vendor_id: u32,
    /// DeviceID.
    pub device_id: u32,
    /// DeviceVersion.
    pub device_version: u16,
    /// SubsystemVendorID, 24-bit OUI.
    pub subsystem_vendor_id: u32,
    /// SubsystemID.
    pub subsystem_id: u32,
    /// IOClass.
    pub io_class: IoClass,
    /// IOSubclass.
    pub io_subclass: u16,
    /// Protocol.
    pub protocol: u16,
    /// ProtocolVersion.
    pub protocol_version: u16,
    /// SendMessageQueueDepth.
    pub send_queue_depth: u16,
    /// RDMAReadQueueDepth.
    pub rdma_read_depth: u8,
    /// SendMessageSize: largest message to the IOC (SRP: max initiator→target IU).
    pub send_size: u32,
    /// RDMATransferSize: largest single RDMA transfer.
    pub rdma_size: u32,
    /// ControllerOperationsCapabilityMask.
    pub op_cap: ControllerOps,
    /// ControllerServicesCapabilityMask (unused by SRP: 0).
    pub svc_cap: u8,
    /// Number of service entries.
    pub service_entries: u8,
    /// IDString, NUL-padded ASCII.
    pub id_string: [u8; ID_STRING_LEN],
}

impl IocProfile {
    /// An SRP target's profile (IOClass 0x0100, subclass 0x609E, protocol 0x0108 version 1,
    /// ops ST|SF|RF|WF, one service entry); vendor and device IDs zero, to be filled in.
    pub fn srp(
        guid: Guid,
        send_queue_depth: u16,
        rdma_read_depth: u8,
        send_size: u32,
        rdma_size: u32,
        id_string: &str,
    ) -> Result<Self, MadError> {
        let mut p = IocProfile {
            guid,
            vendor_id: 0,
            device_id: 0,
            device_version: 0,
            subsystem_vendor_id: 0,
            subsystem_id: 0,
            io_class: IoClass::Srp,
            io_subclass: SRP_IO_SUBCLASS,
            protocol: SRP_PROTOCOL,
            protocol_version: SRP_PROTOCOL_VERSION,
            send_queue_depth,
            rdma_read_depth,
            send_size,
            rdma_size,
            op_cap: ControllerOps::SRP,
            svc_cap: 0,
            service_entries: 1,
            id_string: [0; ID_STRING_LEN],
        };
        p.set_id_string(id_string)?;
        Ok(p)
    }

    /// Sets the ID string (at most 64 bytes; NUL-padded).
    pub fn set_id_string(&mut self, s: &str) -> Result<(), MadError> {
        let b = s.as_bytes();
        let out = self
            .id_string
            .get_mut(..b.len())
            .ok_or(MadError::BadField {
                what: "IOControllerProfile",
                field: "IDString",
                value: b.len() as u64,
                why: "longer than 64 bytes",
            })?;
        out.copy_from_slice(b);
        self.id_string[b.len()..].fill(0);
        Ok(())
    }

    /// The ID string up to the first NUL, if it is UTF-8.
    pub fn id_string_str(&self) -> Option<&str> {
        super::nul_padded_str(&self.id_string)
    }
}

impl<'a> WireRepr<'a> for IocProfile {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: IocProfileRaw = read_fixed("IOControllerProfile", buf)?;
        Ok(IocProfile {
            guid: Guid(r.guid.get()),
            vendor_id: r.vendor_id.get() >> 8,
            device_id: r.device_id.get(),
            device_version: r.device_version.get(),
            subsystem_vendor_id: r.subsystem_vendor_id.get() >> 8,
            subsystem_id: r.subsystem_id.get(),
            io_class: r.io_class.get().into(),
            io_subclass: r.io_subclass.get(),
            protocol: r.protocol.get(),
            protocol_version: r.protocol_version.get(),
            send_queue_depth: r.send_queue_depth.get(),
            rdma_read_depth: r.rdma_read_depth,
            send_size: r.send_size.get(),
            rdma_size: r.rdma_size.get(),
            op_cap: ControllerOps::from_bits_retain(r.op_cap_mask),
            svc_cap: r.svc_cap_mask,
            service_entries: r.num_svc_entries,
            id_string: r.id_string,
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<IocProfileRaw>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        const W: &str = "IOControllerProfile";
        check_width(W, "VendorID", self.vendor_id.into(), 24)?;
        check_width(W, "SubsystemVendorID", self.subsystem_vendor_id.into(), 24)?;
        let r = IocProfileRaw {
            guid: U64::new(self.guid.0),
            vendor_id: U32::new(self.vendor_id << 8),
            device_id: U32::new(self.device_id),
            device_version: U16::new(self.device_version),
            reserved1: U16::ZERO,
            subsystem_vendor_id: U32::new(self.subsystem_vendor_id << 8),
            subsystem_id: U32::new(self.subsystem_id),
            io_class: U16::new(self.io_class.into()),
            io_subclass: U16::new(self.io_subclass),
            protocol: U16::new(self.protocol),
            protocol_version: U16::new(self.protocol_version),
            reserved2: [0; 4],
            send_queue_depth: U16::new(self.send_queue_depth),
            reserved3: 0,
            rdma_read_depth: self.rdma_read_depth,
            send_size: U32::new(self.send_size),
            rdma_size: U32::new(self.rdma_size),
            op_cap_mask: self.op_cap.bits(),
            svc_cap_mask: self.svc_cap,
            num_svc_entries: self.service_entries,
            reserved4: [0; 9],
            id_string: self.id_string,
        };
        write_fixed(W, &r, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// An SRP target profile like ib_srpt's (`srpt_get_ioc`), with the IBA VendorID layout.
    fn ioc_bytes() -> [u8; 128] {
        let mut b = [0u8; 128];
        b[..64].copy_from_slice(&[
            0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2b, // 0 IOC GUID
            0x00, 0x02, 0xc9, 0x00, // 8 VendorID 0x0002c9 (Mellanox OUI) << 8
            0x00, 0x00, 0x10, 0x17, // 12 DeviceID 0x1017
            0x00, 0x01, // 16 DeviceVersion 1
            0x00, 0x00, // 18 reserved
            0x00, 0x02, 0xc9, 0x00, // 20 SubsystemVendorID 0x0002c9 << 8
            0x00, 0x00, 0x00, 0x00, // 24 SubsystemID 0
            0x01, 0x00, // 28 IOClass SRP
            0x60, 0x9e, // 30 IOSubclass 0x609E
            0x01, 0x08, // 32 Protocol 0x0108
            0x00, 0x01, // 34 ProtocolVersion 1
            0, 0, 0, 0, // 36 reserved
            0x00, 0x80, // 40 SendMessageQueueDepth 128
            0x00, // 42 reserved
            0x04, // 43 RDMAReadQueueDepth 4
            0x00, 0x00, 0x10, 0x00, // 44 SendMessageSize 4096
            0x01, 0x00, 0x00, 0x00, // 48 RDMATransferSize 16 MiB
            0x2b, // 52 ops ST|SF|RF|WF
            0x00, // 53 services mask
            0x01, // 54 ServiceEntries 1
            0, 0, 0, 0, 0, 0, 0, 0, 0, // 55 reserved
        ]);
        b[64..80].copy_from_slice(b"Linux SRP target"); // 64 IDString, NUL-padded
        b
    }

    fn ioc() -> IocProfile {
        let mut p = IocProfile::srp(
            Guid(0x0002_c903_0001_0a2b),
            128,
            4,
            4096,
            16 << 20,
            "Linux SRP target",
        )
        .expect("16-byte ID");
        p.vendor_id = 0x0002c9;
        p.device_id = 0x1017;
        p.device_version = 1;
        p.subsystem_vendor_id = 0x0002c9;
        p
    }

    #[test]
    fn ioc_profile_decodes_known_bytes() {
        check::decodes(&ioc_bytes(), &ioc());
    }

    #[test]
    fn ioc_profile_emits_known_bytes() {
        check::emits(&ioc(), &ioc_bytes());
    }

    #[test]
    fn ioc_profile_round_trips() {
        check::round_trips(&ioc(), &mut Vec::new());
        let odd = IocProfile {
            io_class: IoClass::Unknown(0x1234),
            op_cap: ControllerOps::all(),
            ..ioc()
        };
        check::round_trips(&odd, &mut Vec::new());
    }

    #[test]
    fn ioc_profile_truncated_errors() {
        check::truncation_errors::<IocProfile>(&ioc_bytes());
    }

    #[test]
    fn srp_op_mask_is_0x2b() {
        assert_eq!(ControllerOps::SRP.bits(), 0x2b);
        assert_eq!(ControllerOps::SRP.bits(), 0x01 | 0x02 | 0x08 | 0x20);
    }

    #[test]
    fn id_string_and_vendor_width() {
        assert_eq!(ioc().id_string_str(), Some("Linux SRP target"));
        assert!(ioc().set_id_string(&"x".repeat(65)).is_err());
        assert!(
            IocProfile {
                vendor_id: 0x0100_0000,
                ..ioc()
            }
            .emit(&mut [0u8; 128])
            .is_err()
        );
        // ib_srpt's `cpu_to_be32(0x02c9)` reads back shifted under the IBA layout.
        let mut b = ioc_bytes();
        b[8..12].copy_from_slice(&[0x00, 0x00, 0x02, 0xc9]);
        assert_eq!(IocProfile::parse(&b).map(|p| p.vendor_id), Ok(0x0002));
    }
}
