//! REQ, ConnectRequest (attribute 0x0010): 140 bytes of fields and 92 of private data
//! (IBTA Vol1 table 106 via `ibta_vol1_c12.h`).
#[allow(unused_imports)]
use crate::prelude::*;

use super::{CM_MSG_LEN, hi24, pack24};
use crate::mad::{
    CommId, MadError, Mtu, PrivateData, ServiceId, check_width, read_fixed, write_fixed,
};
use ib_verbs::{Gid, Guid, Lid, PKey, Psn, QKey, Qpn};
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of private data in a REQ.
pub const REQ_PRIVATE_DATA_LEN: usize = 92;

/// One path of a REQ (primary at 52, alternate at 96), 44 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct PathRaw {
    /// +0 Local port LID.
    pub local_lid: U16,
    /// +2 Remote port LID.
    pub remote_lid: U16,
    /// +4 Local port GID.
    pub local_gid: [u8; 16],
    /// +20 Remote port GID.
    pub remote_gid: [u8; 16],
    /// +36 Flow label (31:12), reserved (11:6), packet rate (5:0).
    pub flow_label_rate: U32,
    /// +40 Traffic class.
    pub traffic_class: u8,
    /// +41 Hop limit.
    pub hop_limit: u8,
    /// +42 SL (7:4), subnet local (bit 3), reserved (2:0).
    pub sl_subnet_local: u8,
    /// +43 Local ACK timeout (7:3); alternate only: SAP supported (bit 2); reserved.
    pub ack_timeout: u8,
}
const _: () = assert!(size_of::<PathRaw>() == 44);

/// REQ as laid out on the wire (the CM data area).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ReqRaw {
    /// 0 Local communication ID.
    pub local_comm_id: U32,
    /// 4 Reserved.
    pub reserved0: [u8; 4],
    /// 8 Service ID.
    pub service_id: U64,
    /// 16 Local CA GUID.
    pub local_ca_guid: U64,
    /// 24 Reserved.
    pub reserved1: [u8; 4],
    /// 28 Local Q_Key.
    pub local_qkey: U32,
    /// 32 Local QPN (31:8), responder resources (7:0).
    pub local_qpn_rr: U32,
    /// 36 Local EECN (31:8), initiator depth (7:0).
    pub local_eecn_id: U32,
    /// 40 Remote EECN (31:8); byte 43: remote CM response timeout (7:3), transport service
    /// type (2:1), end-to-end flow control (0).
    pub remote_eecn_tt: U32,
    /// 44 Starting PSN (31:8); byte 47: local CM response timeout (7:3), retry count (2:0).
    pub psn_timeout_retry: U32,
    /// 48 P_Key.
    pub pkey: U16,
    /// 50 Path MTU (7:4), RDC exists (3), RNR retry count (2:0).
    pub mtu_rdc_rnr: u8,
    /// 51 Max CM retries (7:4), SRQ (3), extended transport type (2:0).
    pub retries_srq_ext: u8,
    /// 52 Primary path.
    pub primary: PathRaw,
    /// 96 Alternate path.
    pub alternate: PathRaw,
    /// 140 Private data.
    pub private_data: [u8; REQ_PRIVATE_DATA_LEN],
}
const _: () = assert!(size_of::<ReqRaw>() == CM_MSG_LEN);

wirekit::open_enum! {
    /// Transport service type, 2 bits (Linux `cm_req_set_qp_type`: XRC is 3 with extended
    /// transport type 1).
    pub enum TransportType(u8) {
        /// Reliable connection.
        Rc = 0,
        /// Unreliable connection.
        Uc = 1,
        /// Reliable datagram.
        Rd = 2,
        /// Extended (XRC with extended transport type 1).
        Extended = 3,
    }
}

/// One path of a REQ. On RoCE, LIDs are the permissive LID and GIDs are IP addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CmPath {
    /// Local port LID.
    pub local_lid: Lid,
    /// Remote port LID.
    pub remote_lid: Lid,
    /// Local port GID.
    pub local_gid: Gid,
    /// Remote port GID.
    pub remote_gid: Gid,
    /// Flow label, 20 bits.
    pub flow_label: u32,
    /// Packet rate (IB rate code), 6 bits.
    pub packet_rate: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Service level, 4 bits.
    pub sl: u8,
    /// Subnet local: no GRH needed (IB only).
    pub subnet_local: bool,
    /// Local ACK timeout, 5 bits: 4.096 µs × 2^value.
    pub local_ack_timeout: u8,
}

impl CmPath {
    fn from_raw(p: &PathRaw) -> Self {
        let flr = p.flow_label_rate.get();
        CmPath {
            local_lid: Lid(p.local_lid.get()),
            remote_lid: Lid(p.remote_lid.get()),
            local_gid: Gid(p.local_gid),
            remote_gid: Gid(p.remote_gid),
            flow_label: flr >> 12,
            packet_rate: (flr & 0x3f) as u8,
            traffic_class: p.traffic_class,
            hop_limit: p.hop_limit,
            sl: p.sl_subnet_local >> 4,
            subnet_local: p.sl_subnet_local & 0x08 != 0,
            local_ack_timeout: p.ack_timeout >> 3,
        }
    }

    fn to_raw(self, sap_supported: bool) -> Result<PathRaw, MadError> {
        const W: &str = "CM REQ path";
        check_width(W, "FlowLabel", self.flow_label.into(), 20)?;
        check_width(W, "PacketRate", self.packet_rate.into(), 6)?;
        check_width(W, "SL", self.sl.into(), 4)?;
        check_width(W, "LocalAckTimeout", self.local_ack_timeout.into(), 5)?;
        Ok(PathRaw {
            local_lid: U16::new(self.local_lid.0),
            remote_lid: U16::new(self.remote_lid.0),
            local_gid: self.local_gid.0,
            remote_gid: self.remote_gid.0,
            flow_label_rate: U32::new((self.flow_label << 12) | u32::from(self.packet_rate)),
            traffic_class: self.traffic_class,
            hop_limit: self.hop_limit,
            sl_subnet_local: (self.sl << 4) | if self.subnet_local { 0x08 } else { 0 },
            ack_timeout: (self.local_ack_timeout << 3) | if sap_supported { 0x04 } else { 0 },
        })
    }
}

/// The validated REQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmReq {
    /// Local communication ID.
    pub local_comm_id: CommId,
    /// Service ID the passive side listens on.
    pub service_id: ServiceId,
    /// Local CA GUID.
    pub local_ca_guid: Guid,
    /// Local Q_Key (UD/RD only; Linux writes 0 for RC).
    pub local_qkey: QKey,
    /// Local QPN.
    pub local_qpn: Qpn,
    /// Responder resources: RDMA reads/atomics the sender accepts in flight.
    pub responder_resources: u8,
    /// Local EECN (RD only), 24 bits.
    pub local_eecn: u32,
    /// Initiator depth: RDMA reads/atomics the sender will issue in flight.
    pub initiator_depth: u8,
    /// Remote EECN (RD only), 24 bits.
    pub remote_eecn: u32,
    /// Remote CM response timeout, 5 bits: 4.096 µs × 2^value.
    pub remote_cm_response_timeout: u8,
    /// Transport service type.
    pub transport: TransportType,
    /// End-to-end flow control.
    pub e2e_flow_control: bool,
    /// Starting PSN: the PSN the sender of this message expects to receive first, as Linux
    /// reads it (the receiver sends from it; [`crate::cm::QpPsns`]).
    pub starting_psn: Psn,
    /// Local CM response timeout, 5 bits.
    pub local_cm_response_timeout: u8,
    /// Retry count, 3 bits.
    pub retry_count: u8,
    /// Partition key.
    pub pkey: PKey,
    /// Path MTU, 4 bits.
    pub path_mtu: Mtu,
    /// RDC exists (RD only).
    pub rdc_exists: bool,
    /// RNR retry count, 3 bits (7 = infinite).
    pub rnr_retry_count: u8,
    /// Max CM retries, 4 bits.
    pub max_cm_retries: u8,
    /// The sender uses an SRQ.
    pub srq: bool,
    /// Extended transport type, 3 bits (1 = XRC).
    pub ext_transport_type: u8,
    /// Primary path.
    pub primary_path: CmPath,
    /// Alternate path (all zero when there is none).
    pub alternate_path: CmPath,
    /// SAP supported (byte 139 bit 2).
    pub sap_supported: bool,
    /// Private data (SRP_LOGIN_REQ for ib_srp; RDMA-CM puts its 36-byte header first).
    pub private_data: PrivateData<REQ_PRIVATE_DATA_LEN>,
}

impl CmReq {
    /// An RC REQ with Linux's defaults (RDMA-CM: CM response timeouts 20, max CM retries
    /// 15; ib_srp: retry count 7, RNR retry 7), no alternate path and Q_Key 0.
    #[allow(clippy::too_many_arguments)]
    pub fn rc(
        local_comm_id: CommId,
        service_id: ServiceId,
        local_ca_guid: Guid,
        local_qpn: Qpn,
        starting_psn: Psn,
        path_mtu: Mtu,
        primary_path: CmPath,
        private_data: PrivateData<REQ_PRIVATE_DATA_LEN>,
    ) -> Self {
        CmReq {
            local_comm_id,
            service_id,
            local_ca_guid,
            local_qkey: QKey(0),
            local_qpn,
            responder_resources: 0,
            local_eecn: 0,
            initiator_depth: 0,
            remote_eecn: 0,
            remote_cm_response_timeout: 20,
            transport: TransportType::Rc,
            e2e_flow_control: false,
            starting_psn,
            local_cm_response_timeout: 20,
            retry_count: 7,
            pkey: PKey::DEFAULT,
            path_mtu,
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            ext_transport_type: 0,
            primary_path,
            alternate_path: CmPath::default(),
            sap_supported: false,
            private_data,
        }
    }
}

impl<'a> WireRepr<'a> for CmReq {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: ReqRaw = read_fixed("CM REQ", buf)?;
        let qpn_rr = r.local_qpn_rr.get();
        let eecn_id = r.local_eecn_id.get();
        let reecn_tt = r.remote_eecn_tt.get();
        let psn_tr = r.psn_timeout_retry.get();
        let b43 = reecn_tt as u8;
        let b47 = psn_tr as u8;
        Ok(CmReq {
            local_comm_id: CommId(r.local_comm_id.get()),
            service_id: ServiceId(r.service_id.get()),
            local_ca_guid: Guid(r.local_ca_guid.get()),
            local_qkey: QKey(r.local_qkey.get()),
            local_qpn: Qpn::from_wire(hi24(qpn_rr)),
            responder_resources: qpn_rr as u8,
            local_eecn: hi24(eecn_id),
            initiator_depth: eecn_id as u8,
            remote_eecn: hi24(reecn_tt),
            remote_cm_response_timeout: b43 >> 3,
            transport: ((b43 >> 1) & 0x3).into(),
            e2e_flow_control: b43 & 0x01 != 0,
            starting_psn: Psn::from_wire(hi24(psn_tr)),
            local_cm_response_timeout: b47 >> 3,
            retry_count: b47 & 0x07,
            pkey: PKey(r.pkey.get()),
            path_mtu: (r.mtu_rdc_rnr >> 4).into(),
            rdc_exists: r.mtu_rdc_rnr & 0x08 != 0,
            rnr_retry_count: r.mtu_rdc_rnr & 0x07,
            max_cm_retries: r.retries_srq_ext >> 4,
            srq: r.retries_srq_ext & 0x08 != 0,
            ext_transport_type: r.retries_srq_ext & 0x07,
            primary_path: CmPath::from_raw(&r.primary),
            alternate_path: CmPath::from_raw(&r.alternate),
            sap_supported: r.alternate.ack_timeout & 0x04 != 0,
            private_data: PrivateData(r.private_data),
        })
    }

    fn buffer_len(&self) -> usize {
        CM_MSG_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        const W: &str = "CM REQ";
        check_width(W, "LocalEECN", self.local_eecn.into(), 24)?;
        check_width(W, "RemoteEECN", self.remote_eecn.into(), 24)?;
        check_width(
            W,
            "RemoteCMResponseTimeout",
            self.remote_cm_response_timeout.into(),
            5,
        )?;
        check_width(
            W,
            "TransportServiceType",
            u8::from(self.transport).into(),
            2,
        )?;
        check_width(
            W,
            "LocalCMResponseTimeout",
            self.local_cm_response_timeout.into(),
            5,
        )?;
        check_width(W, "RetryCount", self.retry_count.into(), 3)?;
        check_width(W, "PathMTU", u8::from(self.path_mtu).into(), 4)?;
        check_width(W, "RNRRetryCount", self.rnr_retry_count.into(), 3)?;
        check_width(W, "MaxCMRetries", self.max_cm_retries.into(), 4)?;
        check_width(
            W,
            "ExtendedTransportType",
            self.ext_transport_type.into(),
            3,
        )?;
        let b43 = (self.remote_cm_response_timeout << 3)
            | (u8::from(self.transport) << 1)
            | u8::from(self.e2e_flow_control);
        let b47 = (self.local_cm_response_timeout << 3) | self.retry_count;
        let r = ReqRaw {
            local_comm_id: U32::new(self.local_comm_id.0),
            reserved0: [0; 4],
            service_id: U64::new(self.service_id.0),
            local_ca_guid: U64::new(self.local_ca_guid.0),
            reserved1: [0; 4],
            local_qkey: U32::new(self.local_qkey.0),
            local_qpn_rr: U32::new(pack24(self.local_qpn.get(), self.responder_resources)),
            local_eecn_id: U32::new(pack24(self.local_eecn, self.initiator_depth)),
            remote_eecn_tt: U32::new(pack24(self.remote_eecn, b43)),
            psn_timeout_retry: U32::new(pack24(self.starting_psn.get(), b47)),
            pkey: U16::new(self.pkey.0),
            mtu_rdc_rnr: (u8::from(self.path_mtu) << 4)
                | if self.rdc_exists { 0x08 } else { 0 }
                | self.rnr_retry_count,
            retries_srq_ext: (self.max_cm_retries << 4)
                | if self.srq { 0x08 } else { 0 }
                | self.ext_transport_type,
            primary: self.primary_path.to_raw(false)?,
            alternate: self.alternate_path.to_raw(self.sap_supported)?,
            private_data: self.private_data.0,
        };
        write_fixed(W, &r, buf)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use wirekit::wire_repr::check;

    /// An RDMA-CM REQ as Linux ib_srp sends it over RoCEv2/IPv4 (192.168.1.10:40000 →
    /// 192.168.1.20, service ID for TCP port 5555 = 0x15b3), private data = the 36-byte cma
    /// header then the start of an SRP_LOGIN_REQ. Layout: IBTA table 106 via ibta_vol1_c12.h.
    ///
    /// Checked with tshark 4.0.17 (Debian 12), this vector behind a common header (CM, class
    /// version 2, Send, TID 0x0000000112345678, attribute 0x0010) in RoCEv2/UDP 4791, BTH UD
    /// SEND_ONLY (0x64) to QP 1, DETH Q_Key 0x80010000 src QP 1: "CM ConnectRequest", Local
    /// Communication ID 0x12345678, "IP CM ServiceID" prefix 0000000001 protocol 0x06 port
    /// 0x15b3, Local CA GUID 0x0002c90300010a2b, Local QPN 0x000011, Responder Resources
    /// 0x10, Initiator Depth 0x10, Remote/Local CM Response Timeout 0x14, Transport 0, Starting
    /// PSN 0xabcdef, Retry Count 7, Partition Key 0xffff, MTU 0x3, RNR Retry 7, Max CM Retries
    /// 0xf, LIDs 65535, GIDs 192.168.1.10 / 192.168.1.20, Hop Limit 0x40, Local ACK Timeout
    /// 0x12, "IP CM Private Data" IP version 4, source port 0x9c40, source 192.168.1.10,
    /// destination 192.168.1.20. Only the primary flow label and packet rate differ (tshark
    /// shows 0x00000 and 0x00): tshark 4.0 reads the flow label as 3 bytes at 88 and the rate
    /// from byte 88 (probing with 12 34 50 06 at 88 gave FL 0x00123, rate 0x12), whereas
    /// ibta_vol1_c12.h has `CM_FIELD32_LOC(88, 20)` and `CM_FIELD_BLOC(91, 2, 6)`; we follow
    /// Linux, the peer we interoperate with.
    pub(crate) const REQ: [u8; 232] = [
        0x12, 0x34, 0x56, 0x78, // 0 LocalCommID
        0, 0, 0, 0, // 4 reserved
        0x00, 0x00, 0x00, 0x00, 0x01, 0x06, 0x15, 0xb3, // 8 ServiceID: RDMA_PS_TCP, port 5555
        0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x0a, 0x2b, // 16 LocalCA GUID
        0, 0, 0, 0, // 24 reserved
        0x00, 0x00, 0x00, 0x00, // 28 Local Q_Key (RC: 0)
        0x00, 0x00, 0x11, 0x10, // 32 LocalQPN 0x11, ResponderResources 16
        0x00, 0x00, 0x00, 0x10, // 36 LocalEECN 0, InitiatorDepth 16
        0x00, 0x00, 0x00, 0xa0, // 40 RemoteEECN 0; RemoteCMRespTimeout 20, RC, no E2E FC
        0xab, 0xcd, 0xef,
        0xa7, // 44 StartingPSN 0xabcdef; LocalCMRespTimeout 20, RetryCount 7
        0xff, 0xff, // 48 P_Key
        0x37, // 50 PathMTU 1024 (3), no RDC, RNRRetryCount 7
        0xf0, // 51 MaxCMRetries 15, no SRQ, ExtTransport 0
        0xff, 0xff, // 52 primary LocalLID: permissive (RoCE)
        0xff, 0xff, // 54 primary RemoteLID: permissive
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 10, // 56 LocalGID
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 20, // 72 RemoteGID
        0x00, 0x00, 0x10, 0x06, // 88 FlowLabel 1, PacketRate 6 (IB rate code: 20 Gb/s)
        0x00, // 92 TrafficClass
        0x40, // 93 HopLimit 64
        0x00, // 94 SL 0, SubnetLocal 0
        0x90, // 95 LocalAckTimeout 18
        0, 0, 0, 0, // 96 alternate LIDs
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 100 alternate LocalGID
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // 116 alternate RemoteGID
        0, 0, 0, 0, // 132 alternate FlowLabel / PacketRate
        0, 0, 0, 0, // 136 alternate TC, HL, SL, AckTimeout/SAP
        // 140 private data (92): cma_hdr (36 bytes) …
        0x00, 0x40, 0x9c, 0x40, // cma_version 0, ip_version 4<<4, source port 40000
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 168, 1, 10, // src_addr (IPv4 in last 4)
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 168, 1, 20, // dst_addr
        // … then 56 bytes of user data: SRP_LOGIN_REQ opcode 0x00, tag 1, rest zero here.
        0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // IU type, reserved, tag
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, //
    ];

    pub(crate) fn req() -> CmReq {
        let mut pd = [0u8; REQ_PRIVATE_DATA_LEN];
        pd[..4].copy_from_slice(&[0x00, 0x40, 0x9c, 0x40]);
        pd[16..20].copy_from_slice(&[192, 168, 1, 10]);
        pd[32..36].copy_from_slice(&[192, 168, 1, 20]);
        pd[51] = 0x01;
        let path = CmPath {
            local_lid: Lid::PERMISSIVE,
            remote_lid: Lid::PERMISSIVE,
            local_gid: Gid::from_ipv4(Ipv4Addr::new(192, 168, 1, 10)),
            remote_gid: Gid::from_ipv4(Ipv4Addr::new(192, 168, 1, 20)),
            flow_label: 1,
            packet_rate: 6,
            traffic_class: 0,
            hop_limit: 64,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 18,
        };
        CmReq {
            responder_resources: 16,
            initiator_depth: 16,
            ..CmReq::rc(
                CommId(0x1234_5678),
                ServiceId(0x0000_0000_0106_15b3),
                Guid(0x0002_c903_0001_0a2b),
                Qpn::from_wire(0x11),
                Psn::from_wire(0xab_cdef),
                Mtu::Mtu1024,
                path,
                PrivateData(pd),
            )
        }
    }

    #[test]
    fn req_decodes_known_bytes() {
        check::decodes(&REQ, &req());
    }

    #[test]
    fn req_emits_known_bytes() {
        check::emits(&req(), &REQ);
    }

    #[test]
    fn req_round_trips() {
        check::round_trips(&req(), &mut Vec::new());
        // Every sub-byte field at its maximum, an alternate path and SAP.
        let alt = CmPath {
            flow_label: 0xf_ffff,
            packet_rate: 0x3f,
            sl: 15,
            subnet_local: true,
            local_ack_timeout: 31,
            ..req().primary_path
        };
        let full = CmReq {
            local_eecn: 0xff_ffff,
            remote_eecn: 0xff_ffff,
            transport: TransportType::Extended,
            e2e_flow_control: true,
            rdc_exists: true,
            srq: true,
            ext_transport_type: 7,
            path_mtu: Mtu::Unknown(15),
            remote_cm_response_timeout: 31,
            local_cm_response_timeout: 31,
            alternate_path: alt,
            sap_supported: true,
            ..req()
        };
        check::round_trips(&full, &mut Vec::new());
    }

    #[test]
    fn req_truncated_errors() {
        check::truncation_errors::<CmReq>(&REQ);
    }

    #[test]
    fn req_refuses_wide_fields() {
        let mut buf = [0u8; 232];
        assert!(
            CmReq {
                retry_count: 8,
                ..req()
            }
            .emit(&mut buf)
            .is_err()
        );
        assert!(
            CmReq {
                path_mtu: Mtu::Unknown(16),
                ..req()
            }
            .emit(&mut buf)
            .is_err()
        );
        let path = CmPath {
            sl: 16,
            ..req().primary_path
        };
        assert!(
            CmReq {
                primary_path: path,
                ..req()
            }
            .emit(&mut buf)
            .is_err()
        );
    }
}
