//! The 24-byte MAD common header (IBTA Vol1 13.4.3, table 145; Linux `struct ib_mad_hdr`), its
//! code points, and helpers for a whole 256-byte MAD.
#[allow(unused_imports)]
use crate::prelude::*;

use super::{MadError, Tid, read_fixed, write_fixed};
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes in the common MAD header.
pub const MAD_HEADER_LEN: usize = 24;
/// Bytes of class data after the common header.
pub const MAD_DATA_LEN: usize = 232;
/// Bytes in a MAD on the GSI (IBTA Vol1 13.4.2; Linux `IB_MGMT_MAD_SIZE`).
pub const MAD_LEN: usize = 256;
/// The only base version IB defines (Linux `IB_MGMT_BASE_VERSION`).
pub const BASE_VERSION: u8 = 1;
/// Response bit of the method byte (Linux `IB_MGMT_METHOD_RESP`).
pub const METHOD_RESPONSE: u8 = 0x80;

/// The common MAD header as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct MadHdr {
    /// BaseVersion, 1.
    pub base_version: u8,
    /// MgmtClass.
    pub mgmt_class: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// R (bit 7) and Method (bits 6:0).
    pub method: u8,
    /// Status.
    pub status: U16,
    /// ClassSpecific.
    pub class_specific: U16,
    /// TransactionID.
    pub tid: U64,
    /// AttributeID.
    pub attr_id: U16,
    /// Reserved.
    pub reserved: U16,
    /// AttributeModifier.
    pub attr_mod: U32,
}
const _: () = assert!(size_of::<MadHdr>() == MAD_HEADER_LEN);

wirekit::open_enum! {
    /// Management class (IBTA Vol1 table 144; Linux `IB_MGMT_CLASS_*`).
    pub enum MgmtClass(u8) {
        /// Subnet management, LID routed.
        SubnLidRouted = 0x01,
        /// Subnet management, directed route.
        SubnDirectedRoute = 0x81,
        /// Subnet administration.
        SubnAdm = 0x03,
        /// Performance management.
        PerfMgmt = 0x04,
        /// Baseboard management.
        BoardMgmt = 0x05,
        /// Device management.
        DeviceMgmt = 0x06,
        /// Communication management.
        Cm = 0x07,
        /// SNMP tunnelling.
        Snmp = 0x08,
        /// Device administration.
        DeviceAdm = 0x10,
        /// Boot management.
        BootMgmt = 0x11,
        /// Boot integrity service.
        Bis = 0x12,
        /// Congestion management.
        CongMgmt = 0x21,
    }
}

wirekit::open_enum! {
    /// Method, without the response bit (IBTA Vol1 table 146; SA methods table 187).
    pub enum Method(u8) {
        /// Get (response: GetResp 0x81).
        Get = 0x01,
        /// Set.
        Set = 0x02,
        /// Send (all CM messages).
        Send = 0x03,
        /// Trap.
        Trap = 0x05,
        /// Report (response: ReportResp 0x86).
        Report = 0x06,
        /// TrapRepress.
        TrapRepress = 0x07,
        /// SA GetTable (response: GetTableResp 0x92).
        GetTable = 0x12,
        /// SA GetTraceTable.
        GetTraceTable = 0x13,
        /// SA GetMulti.
        GetMulti = 0x14,
        /// SA Delete.
        Delete = 0x15,
    }
}

wirekit::open_enum! {
    /// MAD status, the common codes (IBTA Vol1 table 147; Linux `IB_MGMT_MAD_STATUS_*`).
    /// Bits 15:8 are class specific: see [`crate::mad::dm::DmStatus`].
    pub enum MadStatus(u16) {
        /// Success.
        Success = 0x0000,
        /// Busy: the request was discarded, retry later.
        Busy = 0x0001,
        /// Redirect required (see ClassPortInfo).
        RedirectRequired = 0x0002,
        /// Bad base or class version.
        BadVersion = 0x0004,
        /// Method not supported.
        UnsupportedMethod = 0x0008,
        /// Method/attribute combination not supported.
        UnsupportedMethodAttr = 0x000c,
        /// One or more fields of the attribute or modifier are invalid.
        InvalidAttrValue = 0x001c,
    }
}

impl MadStatus {
    /// Bit 0: busy.
    pub fn is_busy(self) -> bool {
        u16::from(self) & 0x0001 != 0
    }

    /// Bit 1: redirect required.
    pub fn is_redirect(self) -> bool {
        u16::from(self) & 0x0002 != 0
    }

    /// Bits 4:2: the invalid-field code (0 = none; 1 bad version, 2 unsupported method,
    /// 3 unsupported method/attribute, 7 invalid attribute value).
    pub fn invalid_field_code(self) -> u8 {
        ((u16::from(self) >> 2) & 0x7) as u8
    }

    /// Bits 15:8: the class-specific status.
    pub fn class_specific(self) -> u8 {
        (u16::from(self) >> 8) as u8
    }
}

/// The validated common MAD header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MadHeader {
    /// Management class.
    pub mgmt_class: MgmtClass,
    /// Class version (CM 2, SA 2, DM 1).
    pub class_version: u8,
    /// Method, without the response bit (at most 0x7f).
    pub method: Method,
    /// Response bit: this MAD answers a request.
    pub response: bool,
    /// Status.
    pub status: MadStatus,
    /// Class-specific field (unused by CM, SA and DM: zero).
    pub class_specific: u16,
    /// Transaction ID.
    pub tid: Tid,
    /// Attribute ID (per class: [`crate::mad::cm::CmAttr`], [`crate::mad::sa::SaAttr`],
    /// [`crate::mad::dm::DmAttr`]).
    pub attr_id: u16,
    /// Attribute modifier.
    pub attr_mod: u32,
}

impl MadHeader {
    /// A request header: status 0, no response bit, class-specific 0.
    pub fn request(
        mgmt_class: MgmtClass,
        class_version: u8,
        method: Method,
        tid: Tid,
        attr_id: u16,
        attr_mod: u32,
    ) -> Self {
        MadHeader {
            mgmt_class,
            class_version,
            method,
            response: false,
            status: MadStatus::Success,
            class_specific: 0,
            tid,
            attr_id,
            attr_mod,
        }
    }

    /// The header of the response to this request: same class, TID, attribute and modifier,
    /// the response bit set, and `status`. A Get or Set is answered by GetResp (Vol1 13.4.5).
    pub fn response_to(&self, status: MadStatus) -> Self {
        let method = match self.method {
            Method::Set => Method::Get,
            m => m,
        };
        MadHeader {
            method,
            response: true,
            status,
            ..*self
        }
    }

    /// The method byte as on the wire (response bit included).
    pub fn method_byte(&self) -> u8 {
        u8::from(self.method) | if self.response { METHOD_RESPONSE } else { 0 }
    }
}

impl<'a> WireRepr<'a> for MadHeader {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let h: MadHdr = read_fixed("MAD header", buf)?;
        if h.base_version != BASE_VERSION {
            // Linux ib_mad `validate_mad` drops these too.
            return Err(MadError::BadField {
                what: "MAD header",
                field: "BaseVersion",
                value: h.base_version.into(),
                why: "only base version 1 is defined",
            });
        }
        Ok(MadHeader {
            mgmt_class: h.mgmt_class.into(),
            class_version: h.class_version,
            method: (h.method & !METHOD_RESPONSE).into(),
            response: h.method & METHOD_RESPONSE != 0,
            status: h.status.get().into(),
            class_specific: h.class_specific.get(),
            tid: Tid(h.tid.get()),
            attr_id: h.attr_id.get(),
            attr_mod: h.attr_mod.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        MAD_HEADER_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        super::check_width("MAD header", "Method", u8::from(self.method).into(), 7)?;
        let h = MadHdr {
            base_version: BASE_VERSION,
            mgmt_class: self.mgmt_class.into(),
            class_version: self.class_version,
            method: self.method_byte(),
            status: U16::new(self.status.into()),
            class_specific: U16::new(self.class_specific),
            tid: U64::new(self.tid.0),
            attr_id: U16::new(self.attr_id),
            reserved: U16::ZERO,
            attr_mod: U32::new(self.attr_mod),
        };
        write_fixed("MAD header", &h, buf)
    }
}

/// A whole MAD read from a buffer: the header and the 232 class-data bytes it borrows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mad<'a> {
    /// Common header.
    pub header: MadHeader,
    /// Class data (CM message, or RMPP/SA/DM headers and data).
    pub data: &'a [u8; MAD_DATA_LEN],
}

impl<'a> WireRepr<'a> for Mad<'a> {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let header = MadHeader::parse(buf)?;
        let data = buf
            .get(MAD_HEADER_LEN..MAD_LEN)
            .and_then(|d| <&[u8; MAD_DATA_LEN]>::try_from(d).ok())
            .ok_or(MadError::Truncated {
                what: "MAD",
                need: MAD_LEN,
                have: buf.len(),
            })?;
        Ok(Mad { header, data })
    }

    fn buffer_len(&self) -> usize {
        MAD_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        let have = buf.len();
        let out = buf.get_mut(..MAD_LEN).ok_or(MadError::BufferTooSmall {
            what: "MAD",
            need: MAD_LEN,
            have,
        })?;
        self.header.emit(out)?;
        out[MAD_HEADER_LEN..].copy_from_slice(self.data);
        Ok(MAD_LEN)
    }
}

/// An owned 256-byte MAD buffer, for building a MAD to send or keeping a received one.
#[derive(Clone, PartialEq, Eq)]
pub struct MadBuf(pub [u8; MAD_LEN]);

impl MadBuf {
    /// All zeros.
    pub fn zeroed() -> Self {
        MadBuf([0; MAD_LEN])
    }

    /// The first 256 bytes of `bytes`, if there are that many.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, MadError> {
        bytes
            .get(..MAD_LEN)
            .and_then(|b| <[u8; MAD_LEN]>::try_from(b).ok())
            .map(MadBuf)
            .ok_or(MadError::Truncated {
                what: "MAD",
                need: MAD_LEN,
                have: bytes.len(),
            })
    }

    /// The parsed header.
    pub fn header(&self) -> Result<MadHeader, MadError> {
        MadHeader::parse(&self.0)
    }

    /// Overwrites the header.
    pub fn set_header(&mut self, header: &MadHeader) -> Result<(), MadError> {
        header.emit(&mut self.0).map(|_| ())
    }

    /// The 232 class-data bytes.
    pub fn data(&self) -> &[u8] {
        &self.0[MAD_HEADER_LEN..]
    }

    /// The 232 class-data bytes, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.0[MAD_HEADER_LEN..]
    }

    /// All 256 bytes.
    pub fn as_bytes(&self) -> &[u8; MAD_LEN] {
        &self.0
    }
}

impl core::fmt::Debug for MadBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("MadBuf").field(&self.header()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// DM GetResp IOControllerProfile, status NoIOC (layout: Linux `struct ib_mad_hdr`).
    const HDR: [u8; 24] = [
        0x01, // BaseVersion
        0x06, // MgmtClass: Device Management
        0x01, // ClassVersion
        0x81, // R=1, Method Get: GetResp
        0x01, 0x00, // Status: 0x0100 (DM NoIOC)
        0x00, 0x00, // ClassSpecific
        0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x10, 0x01, // TID
        0x00, 0x11, // AttributeID: IOControllerProfile
        0x00, 0x00, // reserved
        0x00, 0x00, 0x00, 0x03, // AttributeModifier: slot 3
    ];

    fn hdr() -> MadHeader {
        MadHeader {
            mgmt_class: MgmtClass::DeviceMgmt,
            class_version: 1,
            method: Method::Get,
            response: true,
            status: MadStatus::Unknown(0x0100),
            class_specific: 0,
            tid: Tid(0x0000_002a_0000_1001),
            attr_id: 0x0011,
            attr_mod: 3,
        }
    }

    #[test]
    fn header_decodes_known_bytes() {
        check::decodes(&HDR, &hdr());
    }

    #[test]
    fn header_emits_known_bytes() {
        check::emits(&hdr(), &HDR);
    }

    #[test]
    fn header_round_trips() {
        check::round_trips(&hdr(), &mut Vec::new());
    }

    #[test]
    fn header_truncated_errors() {
        check::truncation_errors::<MadHeader>(&HDR);
    }

    #[test]
    fn header_rejects_other_base_versions() {
        let mut b = HDR;
        b[0] = 0x80; // OPA base version
        assert!(matches!(
            MadHeader::parse(&b),
            Err(MadError::BadField {
                field: "BaseVersion",
                ..
            })
        ));
    }

    #[test]
    fn header_refuses_a_method_with_the_response_bit() {
        let h = MadHeader {
            method: Method::Unknown(0x81),
            ..hdr()
        };
        assert!(h.emit(&mut [0u8; 24]).is_err());
    }

    #[test]
    fn response_to_a_set_is_a_get_resp() {
        let req = MadHeader {
            method: Method::Set,
            response: false,
            ..hdr()
        };
        let rsp = req.response_to(MadStatus::UnsupportedMethodAttr);
        assert_eq!(rsp.method_byte(), 0x81);
        assert_eq!(rsp.tid, req.tid);
    }

    #[test]
    fn code_points_match_ib_mad_h() {
        assert_eq!(u8::from(MgmtClass::SubnAdm), 0x03);
        assert_eq!(u8::from(MgmtClass::DeviceMgmt), 0x06);
        assert_eq!(u8::from(MgmtClass::Cm), 0x07);
        assert_eq!(u8::from(MgmtClass::SubnDirectedRoute), 0x81);
        assert_eq!(MgmtClass::from(0x21u8), MgmtClass::CongMgmt);
        assert_eq!(u8::from(Method::Send), 0x03);
        assert_eq!(u8::from(Method::GetTable), 0x12);
        assert_eq!(u8::from(Method::Delete), 0x15);
        assert_eq!(u16::from(MadStatus::UnsupportedMethodAttr), 0x000c);
        assert_eq!(u16::from(MadStatus::InvalidAttrValue), 0x001c);
        assert_eq!(MadStatus::InvalidAttrValue.invalid_field_code(), 7);
        assert_eq!(MadStatus::from(0x0100u16).class_specific(), 1);
        assert!(MadStatus::Busy.is_busy() && MadStatus::RedirectRequired.is_redirect());
    }

    #[test]
    fn whole_mad_round_trips_and_needs_256_bytes() {
        let mut bytes = [0u8; MAD_LEN];
        bytes[..24].copy_from_slice(&HDR);
        bytes[24] = 0x77;
        let mad = Mad::parse(&bytes).expect("256 bytes");
        assert_eq!(mad.header, hdr());
        assert_eq!(mad.data[0], 0x77);
        check::emits(&mad, &bytes);
        check::truncation_errors::<Mad<'_>>(&bytes);
        let buf = MadBuf::from_slice(&bytes).expect("256 bytes");
        assert_eq!(buf.header(), Ok(hdr()));
        assert_eq!(buf.data()[0], 0x77);
    }
}
