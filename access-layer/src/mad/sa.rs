//! Subnet Administration (class 0x03, class version 2): the 20-byte SA header and the 64-byte
//! PathRecord (IBTA Vol1 15.2.1 and 15.2.5.16; Linux `struct ib_sa_hdr`, `sa_query.c
//! path_rec_table`, `IB_SA_PATH_REC_*` component-mask bits).
//!
//! An SA MAD is the common header (24), the RMPP header (12), the SA header (20) and 200 data
//! bytes; records sit at `56 + n × AttributeOffset × 8`.
#[allow(unused_imports)]
use crate::prelude::*;

use super::{MadError, ServiceId, check_width, read_fixed, write_fixed};
use ib_verbs::{Gid, Lid, PKey};
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// SA class version.
pub const SA_CLASS_VERSION: u8 = 2;
/// Bytes in the SA header.
pub const SA_HEADER_LEN: usize = 20;
/// Offset of SA data in the MAD (common + RMPP + SA headers; Linux `IB_MGMT_SA_HDR`).
pub const SA_DATA_OFFSET: usize = 56;
/// Bytes of SA data in one MAD (Linux `IB_MGMT_SA_DATA`).
pub const SA_DATA_LEN: usize = 200;
/// Bytes in a PathRecord.
pub const PATH_RECORD_LEN: usize = 64;

wirekit::open_enum! {
    /// SA attribute IDs (IBTA Vol1 table 185; Linux `IB_SA_ATTR_*`).
    pub enum SaAttr(u16) {
        /// ClassPortInfo.
        ClassPortInfo = 0x0001,
        /// Notice.
        Notice = 0x0002,
        /// InformInfo.
        InformInfo = 0x0003,
        /// NodeRecord.
        NodeRecord = 0x0011,
        /// PortInfoRecord.
        PortInfoRecord = 0x0012,
        /// ServiceRecord.
        ServiceRecord = 0x0031,
        /// PathRecord.
        PathRecord = 0x0035,
        /// MCMemberRecord.
        McMemberRecord = 0x0038,
        /// MultiPathRecord.
        MultiPathRecord = 0x003a,
    }
}

wirekit::open_enum! {
    /// SA-specific MAD status values (bits 15:8; IBTA Vol1 table 186 via OpenSM `IB_SA_MAD_STATUS_*`).
    pub enum SaStatus(u16) {
        /// Insufficient resources.
        NoResources = 0x0100,
        /// Invalid request.
        ReqInvalid = 0x0200,
        /// No records match.
        NoRecords = 0x0300,
        /// Too many records for a Get.
        TooManyRecords = 0x0400,
        /// Invalid GID.
        ReqInvalidGid = 0x0500,
        /// Insufficient components in the mask.
        ReqInsufficientComponents = 0x0600,
        /// Access denied.
        Denied = 0x0700,
        /// Priority suggested.
        PrioSuggested = 0x0800,
    }
}

/// The SA header as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct SaHdr {
    /// SM_Key.
    pub sm_key: U64,
    /// AttributeOffset, in 8-byte words.
    pub attr_offset: U16,
    /// Reserved.
    pub reserved: U16,
    /// ComponentMask.
    pub comp_mask: U64,
}
const _: () = assert!(size_of::<SaHdr>() == SA_HEADER_LEN);

/// The validated SA header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SaHeader {
    /// SM_Key (0 from ordinary clients).
    pub sm_key: u64,
    /// AttributeOffset: record size in 8-byte words (PathRecord: 8) in GetTable responses.
    pub attr_offset: u16,
    /// ComponentMask: which record fields a query matches on (for PathRecord:
    /// [`PathRecordMask`]).
    pub comp_mask: u64,
}

impl<'a> WireRepr<'a> for SaHeader {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let h: SaHdr = read_fixed("SA header", buf)?;
        Ok(SaHeader {
            sm_key: h.sm_key.get(),
            attr_offset: h.attr_offset.get(),
            comp_mask: h.comp_mask.get(),
        })
    }

    fn buffer_len(&self) -> usize {
        SA_HEADER_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        let h = SaHdr {
            sm_key: U64::new(self.sm_key),
            attr_offset: U16::new(self.attr_offset),
            reserved: U16::ZERO,
            comp_mask: U64::new(self.comp_mask),
        };
        write_fixed("SA header", &h, buf)
    }
}

bitflags::bitflags! {
    /// PathRecord component-mask bits (Linux `IB_SA_PATH_REC_*`; bit 7 is reserved).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct PathRecordMask: u64 {
        /// ServiceID (bits 0 and 1: the two halves of the 64-bit field).
        const SERVICE_ID = 0b11;
        /// DGID.
        const DGID = 1 << 2;
        /// SGID.
        const SGID = 1 << 3;
        /// DLID.
        const DLID = 1 << 4;
        /// SLID.
        const SLID = 1 << 5;
        /// RawTraffic.
        const RAW_TRAFFIC = 1 << 6;
        /// FlowLabel.
        const FLOW_LABEL = 1 << 8;
        /// HopLimit.
        const HOP_LIMIT = 1 << 9;
        /// TClass.
        const TRAFFIC_CLASS = 1 << 10;
        /// Reversible.
        const REVERSIBLE = 1 << 11;
        /// NumbPath.
        const NUMB_PATH = 1 << 12;
        /// P_Key.
        const PKEY = 1 << 13;
        /// QoSClass.
        const QOS_CLASS = 1 << 14;
        /// SL.
        const SL = 1 << 15;
        /// MTUSelector.
        const MTU_SELECTOR = 1 << 16;
        /// MTU.
        const MTU = 1 << 17;
        /// RateSelector.
        const RATE_SELECTOR = 1 << 18;
        /// Rate.
        const RATE = 1 << 19;
        /// PacketLifeTimeSelector.
        const PACKET_LIFE_TIME_SELECTOR = 1 << 20;
        /// PacketLifeTime.
        const PACKET_LIFE_TIME = 1 << 21;
        /// Preference.
        const PREFERENCE = 1 << 22;
    }
}

wirekit::open_enum! {
    /// MTU/rate/packet-lifetime selector, 2 bits (IBTA Vol1 table 209).
    pub enum Selector(u8) {
        /// Greater than the value.
        GreaterThan = 0,
        /// Less than the value.
        LessThan = 1,
        /// Exactly the value.
        Exactly = 2,
        /// The largest available (MTU, rate) or smallest (packet lifetime).
        Best = 3,
    }
}

/// The all-zero selector (what an empty record holds).
impl Default for Selector {
    fn default() -> Self {
        Selector::GreaterThan
    }
}

/// PathRecord as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PathRecordRaw {
    /// 0 ServiceID.
    pub service_id: U64,
    /// 8 DGID.
    pub dgid: [u8; 16],
    /// 24 SGID.
    pub sgid: [u8; 16],
    /// 40 DLID.
    pub dlid: U16,
    /// 42 SLID.
    pub slid: U16,
    /// 44 RawTraffic (31), reserved (30:28), FlowLabel (27:8), HopLimit (7:0).
    pub raw_fl_hop: U32,
    /// 48 TClass.
    pub traffic_class: u8,
    /// 49 Reversible (7), NumbPath (6:0).
    pub reversible_numb_path: u8,
    /// 50 P_Key.
    pub pkey: U16,
    /// 52 QoSClass (15:4), SL (3:0).
    pub qos_sl: U16,
    /// 54 MTUSelector (7:6), MTU (5:0).
    pub mtu: u8,
    /// 55 RateSelector (7:6), Rate (5:0).
    pub rate: u8,
    /// 56 PacketLifeTimeSelector (7:6), PacketLifeTime (5:0).
    pub packet_life_time: u8,
    /// 57 Preference.
    pub preference: u8,
    /// 58 Reserved.
    pub reserved: [u8; 6],
}
const _: () = assert!(size_of::<PathRecordRaw>() == PATH_RECORD_LEN);

/// The validated PathRecord.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PathRecord {
    /// Service ID.
    pub service_id: ServiceId,
    /// Destination GID.
    pub dgid: Gid,
    /// Source GID.
    pub sgid: Gid,
    /// Destination LID.
    pub dlid: Lid,
    /// Source LID.
    pub slid: Lid,
    /// Raw traffic (no GRH/transport headers).
    pub raw_traffic: bool,
    /// Flow label, 20 bits.
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Reversible path.
    pub reversible: bool,
    /// Number of paths wanted (query), 7 bits.
    pub numb_path: u8,
    /// Partition key (0 in an empty record).
    pub pkey: PKey,
    /// QoS class, 12 bits.
    pub qos_class: u16,
    /// Service level, 4 bits.
    pub sl: u8,
    /// MTU selector.
    pub mtu_selector: Selector,
    /// MTU code, 6 bits ([`crate::mad::Mtu`] values).
    pub mtu: u8,
    /// Rate selector.
    pub rate_selector: Selector,
    /// Rate code, 6 bits.
    pub rate: u8,
    /// Packet lifetime selector.
    pub packet_life_time_selector: Selector,
    /// Packet lifetime, 6 bits.
    pub packet_life_time: u8,
    /// Preference (0 = best).
    pub preference: u8,
}

fn split_sel(b: u8) -> (Selector, u8) {
    ((b >> 6).into(), b & 0x3f)
}

fn join_sel(field: &'static str, sel: Selector, v: u8) -> Result<u8, MadError> {
    check_width("PathRecord", field, v.into(), 6)?;
    check_width("PathRecord", "selector", u8::from(sel).into(), 2)?;
    Ok((u8::from(sel) << 6) | v)
}

impl<'a> WireRepr<'a> for PathRecord {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: PathRecordRaw = read_fixed("PathRecord", buf)?;
        let rfh = r.raw_fl_hop.get();
        let qs = r.qos_sl.get();
        let (mtu_selector, mtu) = split_sel(r.mtu);
        let (rate_selector, rate) = split_sel(r.rate);
        let (packet_life_time_selector, packet_life_time) = split_sel(r.packet_life_time);
        Ok(PathRecord {
            service_id: ServiceId(r.service_id.get()),
            dgid: Gid(r.dgid),
            sgid: Gid(r.sgid),
            dlid: Lid(r.dlid.get()),
            slid: Lid(r.slid.get()),
            raw_traffic: rfh >> 31 != 0,
            flow_label: (rfh >> 8) & 0x000f_ffff,
            hop_limit: rfh as u8,
            traffic_class: r.traffic_class,
            reversible: r.reversible_numb_path & 0x80 != 0,
            numb_path: r.reversible_numb_path & 0x7f,
            pkey: PKey(r.pkey.get()),
            qos_class: qs >> 4,
            sl: (qs & 0xf) as u8,
            mtu_selector,
            mtu,
            rate_selector,
            rate,
            packet_life_time_selector,
            packet_life_time,
            preference: r.preference,
        })
    }

    fn buffer_len(&self) -> usize {
        PATH_RECORD_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        const W: &str = "PathRecord";
        check_width(W, "FlowLabel", self.flow_label.into(), 20)?;
        check_width(W, "NumbPath", self.numb_path.into(), 7)?;
        check_width(W, "QoSClass", self.qos_class.into(), 12)?;
        check_width(W, "SL", self.sl.into(), 4)?;
        let r = PathRecordRaw {
            service_id: U64::new(self.service_id.0),
            dgid: self.dgid.0,
            sgid: self.sgid.0,
            dlid: U16::new(self.dlid.0),
            slid: U16::new(self.slid.0),
            raw_fl_hop: U32::new(
                (u32::from(self.raw_traffic) << 31)
                    | (self.flow_label << 8)
                    | u32::from(self.hop_limit),
            ),
            traffic_class: self.traffic_class,
            reversible_numb_path: (u8::from(self.reversible) << 7) | self.numb_path,
            pkey: U16::new(self.pkey.0),
            qos_sl: U16::new((self.qos_class << 4) | u16::from(self.sl)),
            mtu: join_sel("MTU", self.mtu_selector, self.mtu)?,
            rate: join_sel("Rate", self.rate_selector, self.rate)?,
            packet_life_time: join_sel(
                "PacketLifeTime",
                self.packet_life_time_selector,
                self.packet_life_time,
            )?,
            preference: self.preference,
            reserved: [0; 6],
        };
        write_fixed(W, &r, buf)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use wirekit::wire_repr::check;

    /// SA header of a PathRecord Get: SGID, DGID, P_Key and NumbPath in the mask.
    const SA_HDR: [u8; 20] = [
        0, 0, 0, 0, 0, 0, 0, 0, // SM_Key 0
        0x00, 0x08, // AttributeOffset: 8 words (64 bytes)
        0x00, 0x00, // reserved
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x30,
        0x0c, // ComponentMask: DGID|SGID|NUMB_PATH|PKEY
    ];

    fn sa_hdr() -> SaHeader {
        let mask = PathRecordMask::DGID
            | PathRecordMask::SGID
            | PathRecordMask::NUMB_PATH
            | PathRecordMask::PKEY;
        SaHeader {
            sm_key: 0,
            attr_offset: 8,
            comp_mask: mask.bits(),
        }
    }

    #[test]
    fn sa_header_decodes_known_bytes() {
        check::decodes(&SA_HDR, &sa_hdr());
    }

    #[test]
    fn sa_header_emits_known_bytes() {
        check::emits(&sa_hdr(), &SA_HDR);
    }

    #[test]
    fn sa_header_round_trips() {
        check::round_trips(&sa_hdr(), &mut Vec::new());
    }

    #[test]
    fn sa_header_truncated_errors() {
        check::truncation_errors::<SaHeader>(&SA_HDR);
    }

    /// A PathRecord answer (layout: sa_query.c `path_rec_table`, word/bit offsets).
    pub(crate) const PATH: [u8; 64] = [
        0x00, 0x00, 0x00, 0x00, 0x01, 0x06, 0x15, 0xb3, // w0-1 ServiceID
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2, // w2-5 DGID ::ffff:10.0.0.2
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1, // w6-9 SGID ::ffff:10.0.0.1
        0x00, 0x05, // w10 DLID 5
        0x00, 0x03, // w10 SLID 3
        0x80, 0x12, 0x34, 0x40, // w11 RawTraffic 1, FlowLabel 0x01234, HopLimit 64
        0x22, // w12 TClass 0x22
        0x81, // w12 Reversible 1, NumbPath 1
        0xff, 0xff, // w12 P_Key
        0x12, 0x35, // w13 QoSClass 0x123, SL 5
        0x84, // w13 MTUSelector 2 (exactly), MTU 4 (2048)
        0x83, // w13 RateSelector 2, Rate 3 (10 Gb/s)
        0x92, // w14 PacketLifeTimeSelector 2, PacketLifeTime 18
        0x00, // w14 Preference
        0, 0, 0, 0, 0, 0, // w14-15 reserved
    ];

    pub(crate) fn path() -> PathRecord {
        PathRecord {
            service_id: ServiceId(0x0106_15b3),
            dgid: Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 2)),
            sgid: Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1)),
            dlid: Lid(5),
            slid: Lid(3),
            raw_traffic: true,
            flow_label: 0x01234,
            hop_limit: 64,
            traffic_class: 0x22,
            reversible: true,
            numb_path: 1,
            pkey: PKey::DEFAULT,
            qos_class: 0x123,
            sl: 5,
            mtu_selector: Selector::Exactly,
            mtu: 4,
            rate_selector: Selector::Exactly,
            rate: 3,
            packet_life_time_selector: Selector::Exactly,
            packet_life_time: 18,
            preference: 0,
        }
    }

    #[test]
    fn path_record_decodes_known_bytes() {
        check::decodes(&PATH, &path());
    }

    #[test]
    fn path_record_emits_known_bytes() {
        check::emits(&path(), &PATH);
    }

    #[test]
    fn path_record_round_trips() {
        check::round_trips(&path(), &mut Vec::new());
        let max = PathRecord {
            flow_label: 0xf_ffff,
            numb_path: 0x7f,
            qos_class: 0xfff,
            sl: 15,
            mtu_selector: Selector::Best,
            mtu: 0x3f,
            ..path()
        };
        check::round_trips(&max, &mut Vec::new());
    }

    #[test]
    fn path_record_truncated_errors() {
        check::truncation_errors::<PathRecord>(&PATH);
    }

    #[test]
    fn path_record_refuses_wide_fields() {
        assert!(
            PathRecord {
                numb_path: 0x80,
                ..path()
            }
            .emit(&mut [0u8; 64])
            .is_err()
        );
        assert!(
            PathRecord {
                mtu: 0x40,
                ..path()
            }
            .emit(&mut [0u8; 64])
            .is_err()
        );
    }

    #[test]
    fn component_mask_bits_match_ib_sa_h() {
        assert_eq!(PathRecordMask::SERVICE_ID.bits(), 0x3);
        assert_eq!(PathRecordMask::DGID.bits(), 1 << 2);
        assert_eq!(PathRecordMask::PKEY.bits(), 1 << 13);
        assert_eq!(PathRecordMask::SL.bits(), 1 << 15);
        assert_eq!(PathRecordMask::PREFERENCE.bits(), 1 << 22);
        assert_eq!(u16::from(SaAttr::PathRecord), 0x0035);
        assert_eq!(u8::from(Selector::Best), 3);
        assert_eq!(u16::from(SaStatus::NoRecords), 0x0300);
    }
}
