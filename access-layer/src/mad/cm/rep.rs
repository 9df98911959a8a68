//! REP, ConnectReply (attribute 0x0013): 36 bytes of fields and 196 of private data
//! (IBTA Vol1 table 110 via `ibta_vol1_c12.h`).
#[allow(unused_imports)]
use crate::prelude::*;

use super::{CM_MSG_LEN, hi24, pack24};
use crate::mad::{CommId, MadError, PrivateData, check_width, read_fixed, write_fixed};
use ib_verbs::{Guid, Psn, QKey, Qpn};
use wirekit::WireRepr;
use zerocopy::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of private data in a REP.
pub const REP_PRIVATE_DATA_LEN: usize = 196;

/// REP as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RepRaw {
    /// 0 Local communication ID.
    pub local_comm_id: U32,
    /// 4 Remote communication ID.
    pub remote_comm_id: U32,
    /// 8 Local Q_Key.
    pub local_qkey: U32,
    /// 12 Local QPN (31:8), reserved (7:0).
    pub local_qpn: U32,
    /// 16 Local EE context number (31:8), reserved.
    pub local_eecn: U32,
    /// 20 Starting PSN (31:8), reserved.
    pub starting_psn: U32,
    /// 24 Responder resources.
    pub responder_resources: u8,
    /// 25 Initiator depth.
    pub initiator_depth: u8,
    /// 26 Target ACK delay (7:3), failover accepted (2:1), end-to-end flow control (0).
    pub ack_delay_failover_e2e: u8,
    /// 27 RNR retry count (7:5), SRQ (4), reserved (3:0).
    pub rnr_srq: u8,
    /// 28 Local CA GUID.
    pub local_ca_guid: U64,
    /// 36 Private data.
    pub private_data: [u8; REP_PRIVATE_DATA_LEN],
}
const _: () = assert!(size_of::<RepRaw>() == CM_MSG_LEN);

/// The validated REP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmRep {
    /// Local (the replier's) communication ID.
    pub local_comm_id: CommId,
    /// Remote (the requester's) communication ID.
    pub remote_comm_id: CommId,
    /// Local Q_Key.
    pub local_qkey: QKey,
    /// Local QPN.
    pub local_qpn: Qpn,
    /// Local EECN, 24 bits.
    pub local_eecn: u32,
    /// Starting PSN: the PSN the sender of this message expects to receive first, as Linux
    /// reads it (the receiver sends from it; [`crate::cm::QpPsns`]).
    pub starting_psn: Psn,
    /// Responder resources.
    pub responder_resources: u8,
    /// Initiator depth.
    pub initiator_depth: u8,
    /// Target ACK delay, 5 bits.
    pub target_ack_delay: u8,
    /// Failover accepted, 2 bits (0 accepted, 1 not supported, 2 rejected).
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub e2e_flow_control: bool,
    /// RNR retry count, 3 bits.
    pub rnr_retry_count: u8,
    /// The replier uses an SRQ.
    pub srq: bool,
    /// Local CA GUID.
    pub local_ca_guid: Guid,
    /// Private data (SRP_LOGIN_RSP for ib_srpt).
    pub private_data: PrivateData<REP_PRIVATE_DATA_LEN>,
}

impl<'a> WireRepr<'a> for CmRep {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: RepRaw = read_fixed("CM REP", buf)?;
        let b26 = r.ack_delay_failover_e2e;
        Ok(CmRep {
            local_comm_id: CommId(r.local_comm_id.get()),
            remote_comm_id: CommId(r.remote_comm_id.get()),
            local_qkey: QKey(r.local_qkey.get()),
            local_qpn: Qpn::from_wire(hi24(r.local_qpn.get())),
            local_eecn: hi24(r.local_eecn.get()),
            starting_psn: Psn::from_wire(hi24(r.starting_psn.get())),
            responder_resources: r.responder_resources,
            initiator_depth: r.initiator_depth,
            target_ack_delay: b26 >> 3,
            failover_accepted: (b26 >> 1) & 0x3,
            e2e_flow_control: b26 & 0x01 != 0,
            rnr_retry_count: r.rnr_srq >> 5,
            srq: r.rnr_srq & 0x10 != 0,
            local_ca_guid: Guid(r.local_ca_guid.get()),
            private_data: PrivateData(r.private_data),
        })
    }

    fn buffer_len(&self) -> usize {
        CM_MSG_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        const W: &str = "CM REP";
        check_width(W, "LocalEECN", self.local_eecn.into(), 24)?;
        check_width(W, "TargetACKDelay", self.target_ack_delay.into(), 5)?;
        check_width(W, "FailoverAccepted", self.failover_accepted.into(), 2)?;
        check_width(W, "RNRRetryCount", self.rnr_retry_count.into(), 3)?;
        let r = RepRaw {
            local_comm_id: U32::new(self.local_comm_id.0),
            remote_comm_id: U32::new(self.remote_comm_id.0),
            local_qkey: U32::new(self.local_qkey.0),
            local_qpn: U32::new(pack24(self.local_qpn.get(), 0)),
            local_eecn: U32::new(pack24(self.local_eecn, 0)),
            starting_psn: U32::new(pack24(self.starting_psn.get(), 0)),
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            ack_delay_failover_e2e: (self.target_ack_delay << 3)
                | (self.failover_accepted << 1)
                | u8::from(self.e2e_flow_control),
            rnr_srq: (self.rnr_retry_count << 5) | if self.srq { 0x10 } else { 0 },
            local_ca_guid: U64::new(self.local_ca_guid.0),
            private_data: self.private_data.0,
        };
        write_fixed(W, &r, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    fn rep_bytes() -> [u8; 232] {
        let mut b = [0u8; 232];
        let fields: [u8; 36] = [
            0x9a, 0xbc, 0xde, 0xf0, // 0 LocalCommID
            0x12, 0x34, 0x56, 0x78, // 4 RemoteCommID (the REQ's)
            0x00, 0x00, 0x00, 0x00, // 8 Local Q_Key
            0x00, 0x00, 0x22, 0x00, // 12 LocalQPN 0x22, reserved
            0x00, 0x00, 0x00, 0x00, // 16 LocalEECN, reserved
            0x12, 0x34, 0x56, 0x00, // 20 StartingPSN 0x123456, reserved
            0x04, // 24 ResponderResources 4
            0x04, // 25 InitiatorDepth 4
            0x83, // 26 TargetACKDelay 16, FailoverAccepted 1 (not supported), E2E FC
            0xf0, // 27 RNRRetryCount 7, SRQ, reserved
            0x00, 0x02, 0xc9, 0x03, 0x00, 0x0b, 0x0c, 0x0d, // 28 LocalCA GUID
        ];
        b[..36].copy_from_slice(&fields);
        b[36] = 0xc1; // 36 private data: SRP_LOGIN_RSP IU type …
        b[231] = 0x5a; // … and the last private-data byte
        b
    }

    fn rep() -> CmRep {
        let mut pd = [0u8; REP_PRIVATE_DATA_LEN];
        pd[0] = 0xc1;
        pd[195] = 0x5a;
        CmRep {
            local_comm_id: CommId(0x9abc_def0),
            remote_comm_id: CommId(0x1234_5678),
            local_qkey: QKey(0),
            local_qpn: Qpn::from_wire(0x22),
            local_eecn: 0,
            starting_psn: Psn::from_wire(0x12_3456),
            responder_resources: 4,
            initiator_depth: 4,
            target_ack_delay: 16,
            failover_accepted: 1,
            e2e_flow_control: true,
            rnr_retry_count: 7,
            srq: true,
            local_ca_guid: Guid(0x0002_c903_000b_0c0d),
            private_data: PrivateData(pd),
        }
    }

    #[test]
    fn rep_decodes_known_bytes() {
        check::decodes(&rep_bytes(), &rep());
    }

    #[test]
    fn rep_emits_known_bytes() {
        check::emits(&rep(), &rep_bytes());
    }

    #[test]
    fn rep_round_trips() {
        check::round_trips(&rep(), &mut Vec::new());
    }

    #[test]
    fn rep_truncated_errors() {
        check::truncation_errors::<CmRep>(&rep_bytes());
    }
}
