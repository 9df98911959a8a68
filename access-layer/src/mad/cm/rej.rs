//! REJ, ConnectReject (attribute 0x0012): reason, up to 72 bytes of additional rejection
//! information (ARI) and 148 bytes of private data (IBTA Vol1 table 108 via
//! `ibta_vol1_c12.h`; reasons: table 109 via Linux `enum ib_cm_rej_reason`).
#[allow(unused_imports)]
use crate::prelude::*;

use super::CM_MSG_LEN;
use crate::mad::{CommId, MadError, PrivateData, check_width, read_fixed, write_fixed};
use wirekit::WireRepr;
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of private data in a REJ.
pub const REJ_PRIVATE_DATA_LEN: usize = 148;
/// Bytes of the ARI field.
pub const REJ_ARI_LEN: usize = 72;

/// REJ as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RejRaw {
    /// 0 Local communication ID.
    pub local_comm_id: U32,
    /// 4 Remote communication ID.
    pub remote_comm_id: U32,
    /// 8 Message rejected (7:6), reserved.
    pub message_rejected: u8,
    /// 9 Rejected info length (7:1), reserved (0).
    pub ari_len: u8,
    /// 10 Reason.
    pub reason: U16,
    /// 12 Additional rejection information.
    pub ari: [u8; REJ_ARI_LEN],
    /// 84 Private data.
    pub private_data: [u8; REJ_PRIVATE_DATA_LEN],
}
const _: () = assert!(size_of::<RejRaw>() == CM_MSG_LEN);

wirekit::open_enum! {
    /// Which message a REJ rejects, 2 bits (Linux `CM_MSG_RESPONSE_*`).
    pub enum RejMessage(u8) {
        /// The REQ.
        Req = 0,
        /// The REP.
        Rep = 1,
        /// No message (e.g. a timeout while waiting for one).
        Other = 2,
    }
}

wirekit::open_enum! {
    /// REJ reason (IBTA Vol1 table 109; Linux `enum ib_cm_rej_reason`). 34 is unassigned
    /// in Linux and stays `Unknown(34)`.
    pub enum CmRejReason(u16) {
        /// No QP available.
        NoQp = 1,
        /// No EEC available.
        NoEec = 2,
        /// No resources available.
        NoResources = 3,
        /// Timeout.
        Timeout = 4,
        /// Unsupported request.
        Unsupported = 5,
        /// Invalid communication ID.
        InvalidCommId = 6,
        /// Invalid communication instance.
        InvalidCommInstance = 7,
        /// Invalid service ID.
        InvalidServiceId = 8,
        /// Invalid transport service type.
        InvalidTransportType = 9,
        /// Stale connection.
        StaleConn = 10,
        /// RDC does not exist.
        RdcNotExist = 11,
        /// Primary remote port GID rejected (ARI: acceptable GID).
        InvalidGid = 12,
        /// Primary remote port LID rejected.
        InvalidLid = 13,
        /// Primary SL rejected.
        InvalidSl = 14,
        /// Primary traffic class rejected.
        InvalidTrafficClass = 15,
        /// Primary hop limit rejected.
        InvalidHopLimit = 16,
        /// Primary packet rate rejected.
        InvalidPacketRate = 17,
        /// Alternate remote port GID rejected.
        InvalidAltGid = 18,
        /// Alternate remote port LID rejected.
        InvalidAltLid = 19,
        /// Alternate SL rejected.
        InvalidAltSl = 20,
        /// Alternate traffic class rejected.
        InvalidAltTrafficClass = 21,
        /// Alternate hop limit rejected.
        InvalidAltHopLimit = 22,
        /// Alternate packet rate rejected.
        InvalidAltPacketRate = 23,
        /// Port CM redirect (ARI: ClassPortInfo).
        PortCmRedirect = 24,
        /// Port redirect.
        PortRedirect = 25,
        /// Invalid path MTU.
        InvalidMtu = 26,
        /// Insufficient responder resources.
        InsufficientRespResources = 27,
        /// Consumer defined (ib_srpt: SRP_LOGIN_REJ in the private data).
        ConsumerDefined = 28,
        /// Invalid RNR retry count.
        InvalidRnrRetry = 29,
        /// Duplicate local communication ID.
        DuplicateLocalCommId = 30,
        /// Invalid class version.
        InvalidClassVersion = 31,
        /// Invalid primary flow label.
        InvalidFlowLabel = 32,
        /// Invalid alternate flow label.
        InvalidAltFlowLabel = 33,
        /// Vendor option not supported.
        VendorOptionNotSupported = 35,
    }
}

/// The validated REJ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmRej {
    /// Local (the rejecter's) communication ID.
    pub local_comm_id: CommId,
    /// Remote communication ID (0 if unknown).
    pub remote_comm_id: CommId,
    /// Which message is rejected.
    pub message_rejected: RejMessage,
    /// Reason.
    pub reason: CmRejReason,
    /// Rejected info length: bytes of [`CmRej::ari`] in use, at most 72.
    pub ari_len: u8,
    /// Additional rejection information (72 bytes; the first `ari_len` are meaningful).
    pub ari: [u8; REJ_ARI_LEN],
    /// Private data (SRP_LOGIN_REJ for ib_srpt with reason 28).
    pub private_data: PrivateData<REJ_PRIVATE_DATA_LEN>,
}

impl CmRej {
    /// A REJ of `message_rejected` with `reason`, no ARI and `private_data`.
    pub fn new(
        local_comm_id: CommId,
        remote_comm_id: CommId,
        message_rejected: RejMessage,
        reason: CmRejReason,
        private_data: PrivateData<REJ_PRIVATE_DATA_LEN>,
    ) -> Self {
        CmRej {
            local_comm_id,
            remote_comm_id,
            message_rejected,
            reason,
            ari_len: 0,
            ari: [0; REJ_ARI_LEN],
            private_data,
        }
    }

    /// Sets the ARI to `ari` (zero-padded); fails if it is longer than 72 bytes.
    pub fn with_ari(mut self, ari: &[u8]) -> Result<Self, MadError> {
        let pd = PrivateData::<REJ_ARI_LEN>::new(ari).map_err(|_| MadError::BadField {
            what: "CM REJ",
            field: "RejectedInfoLength",
            value: ari.len() as u64,
            why: "the ARI field holds 72 bytes",
        })?;
        self.ari = pd.0;
        self.ari_len = ari.len() as u8;
        Ok(self)
    }

    /// The meaningful ARI bytes.
    pub fn ari_bytes(&self) -> &[u8] {
        &self.ari[..usize::from(self.ari_len).min(REJ_ARI_LEN)]
    }
}

fn check_ari_len(len: u8) -> Result<(), MadError> {
    if usize::from(len) <= REJ_ARI_LEN {
        Ok(())
    } else {
        Err(MadError::BadField {
            what: "CM REJ",
            field: "RejectedInfoLength",
            value: len.into(),
            why: "the ARI field holds 72 bytes",
        })
    }
}

impl<'a> WireRepr<'a> for CmRej {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: RejRaw = read_fixed("CM REJ", buf)?;
        let ari_len = r.ari_len >> 1;
        check_ari_len(ari_len)?;
        Ok(CmRej {
            local_comm_id: CommId(r.local_comm_id.get()),
            remote_comm_id: CommId(r.remote_comm_id.get()),
            message_rejected: (r.message_rejected >> 6).into(),
            reason: r.reason.get().into(),
            ari_len,
            ari: r.ari,
            private_data: PrivateData(r.private_data),
        })
    }

    fn buffer_len(&self) -> usize {
        CM_MSG_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        check_width(
            "CM REJ",
            "MessageRejected",
            u8::from(self.message_rejected).into(),
            2,
        )?;
        check_ari_len(self.ari_len)?;
        let r = RejRaw {
            local_comm_id: U32::new(self.local_comm_id.0),
            remote_comm_id: U32::new(self.remote_comm_id.0),
            message_rejected: u8::from(self.message_rejected) << 6,
            ari_len: self.ari_len << 1,
            reason: U16::new(self.reason.into()),
            ari: self.ari,
            private_data: self.private_data.0,
        };
        write_fixed("CM REJ", &r, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// ib_srpt rejecting a login: reason 28 with an SRP_LOGIN_REJ in the private data, and
    /// (to exercise the field) a 16-byte ARI.
    fn rej_bytes() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[..12].copy_from_slice(&[
            0x00, 0x00, 0x00, 0x07, // 0 LocalCommID
            0x12, 0x34, 0x56, 0x78, // 4 RemoteCommID
            0x00, // 8 MessageRejected: REQ (0 << 6)
            0x20, // 9 RejectedInfoLength 16 (<< 1)
            0x00, 0x1c, // 10 Reason 28: consumer defined
        ]);
        b[12..28].copy_from_slice(&[0xfe; 16]); // 12 ARI (16 of 72 bytes used)
        b[84] = 0xc2; // 84 private data: SRP_LOGIN_REJ IU type
        b[85..88].copy_from_slice(&[0, 0, 0]);
        b[88..92].copy_from_slice(&[0x00, 0x01, 0x00, 0x04]); // reason 0x00010004
        b
    }

    fn rej() -> CmRej {
        let mut pd = [0u8; REJ_PRIVATE_DATA_LEN];
        pd[0] = 0xc2;
        pd[4..8].copy_from_slice(&[0x00, 0x01, 0x00, 0x04]);
        CmRej::new(
            CommId(7),
            CommId(0x1234_5678),
            RejMessage::Req,
            CmRejReason::ConsumerDefined,
            PrivateData(pd),
        )
        .with_ari(&[0xfe; 16])
        .expect("16 bytes fit")
    }

    #[test]
    fn rej_decodes_known_bytes() {
        check::decodes(&rej_bytes(), &rej());
    }

    #[test]
    fn rej_emits_known_bytes() {
        check::emits(&rej(), &rej_bytes());
    }

    #[test]
    fn rej_round_trips() {
        check::round_trips(&rej(), &mut Vec::new());
        let odd = CmRej {
            reason: CmRejReason::Unknown(34),
            message_rejected: RejMessage::Unknown(3),
            ..rej()
        };
        check::round_trips(&odd, &mut Vec::new());
    }

    #[test]
    fn rej_truncated_errors() {
        check::truncation_errors::<CmRej>(&rej_bytes());
    }

    #[test]
    fn rej_refuses_an_ari_longer_than_its_field() {
        let mut b = rej_bytes();
        b[9] = 73 << 1;
        assert!(matches!(
            CmRej::parse(&b),
            Err(MadError::BadField {
                field: "RejectedInfoLength",
                ..
            })
        ));
        assert!(rej().with_ari(&[0; 73]).is_err());
        assert_eq!(rej().ari_bytes(), &[0xfe; 16]);
    }

    #[test]
    fn rej_reasons_match_ib_cm_h() {
        assert_eq!(CmRejReason::from(1u16), CmRejReason::NoQp);
        assert_eq!(u16::from(CmRejReason::InvalidServiceId), 8);
        assert_eq!(u16::from(CmRejReason::StaleConn), 10);
        assert_eq!(u16::from(CmRejReason::InvalidAltPacketRate), 23);
        assert_eq!(u16::from(CmRejReason::PortCmRedirect), 24);
        assert_eq!(u16::from(CmRejReason::ConsumerDefined), 28);
        assert_eq!(u16::from(CmRejReason::InvalidAltFlowLabel), 33);
        assert_eq!(CmRejReason::from(34u16), CmRejReason::Unknown(34));
        assert_eq!(u16::from(CmRejReason::VendorOptionNotSupported), 35);
        let known = (1..=40u16)
            .filter(|&r| CmRejReason::from(r).is_known())
            .count();
        assert_eq!(known, 34, "1..=35 except 34");
        assert_eq!(u8::from(RejMessage::Other), 2);
    }
}
