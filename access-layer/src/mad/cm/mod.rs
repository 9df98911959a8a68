//! Communication Manager messages (class 0x07, class version 2, all sent with Method Send):
//! the 232-byte CM data area of REQ, REP, REJ, MRA, RTU, DREQ and DREP, and the RDMA-CM
//! private-data header (IBTA Vol1 12.6, tables 106–113, via Linux `ibta_vol1_c12.h`).
//!
//! Offsets in the comments are relative to the data area (MAD start + 24). Each `Repr`
//! parses and emits the data area only; [`crate::mad::AnyMad`] adds the common header, and
//! [`CmMessage::mad_header`](crate::mad::CmMessage::mad_header) builds it.

pub mod cma;
pub mod disconnect;
pub mod mra;
pub mod rej;
pub mod rep;
pub mod req;
pub mod rtu;

pub use cma::{CmaHeader, RdmaPortSpace};
pub use disconnect::{CmDrep, CmDreq};
pub use mra::{CmMra, MraMessage};
pub use rej::{CmRej, CmRejReason, RejMessage};
pub use rep::CmRep;
pub use req::{CmPath, CmReq, TransportType};
pub use rtu::CmRtu;

/// Bytes in every CM message (the MAD data area).
pub const CM_MSG_LEN: usize = 232;
/// CM class version (Linux `IB_CM_CLASS_VERSION`).
pub const CM_CLASS_VERSION: u8 = 2;

wirekit::open_enum! {
    /// CM attribute IDs (IBTA Vol1 table 105; Linux `CM_*_ATTR_ID` in `cm_msgs.h`).
    pub enum CmAttr(u16) {
        /// ClassPortInfo.
        ClassPortInfo = 0x0001,
        /// ConnectRequest.
        Req = 0x0010,
        /// MessageReceiptAcknowledgement.
        Mra = 0x0011,
        /// ConnectReject.
        Rej = 0x0012,
        /// ConnectReply.
        Rep = 0x0013,
        /// ReadyToUse.
        Rtu = 0x0014,
        /// DisconnectRequest.
        Dreq = 0x0015,
        /// DisconnectReply.
        Drep = 0x0016,
        /// ServiceIDResolutionRequest.
        SidrReq = 0x0017,
        /// ServiceIDResolutionResponse.
        SidrRep = 0x0018,
        /// LoadAlternatePath.
        Lap = 0x0019,
        /// AlternatePathResponse.
        Apr = 0x001a,
    }
}

/// The high 24 bits of a word (QPN, EECN, PSN fields: "32, 24" in `ibta_vol1_c12.h`).
pub(crate) fn hi24(word: u32) -> u32 {
    word >> 8
}

/// A 24-bit value in the high bits and a byte in the low bits.
pub(crate) fn pack24(hi: u32, lo: u8) -> u32 {
    (hi << 8) | u32::from(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_ids_match_ib_cm() {
        assert_eq!(u16::from(CmAttr::Req), 0x0010);
        assert_eq!(u16::from(CmAttr::Mra), 0x0011);
        assert_eq!(u16::from(CmAttr::Rej), 0x0012);
        assert_eq!(u16::from(CmAttr::Rep), 0x0013);
        assert_eq!(u16::from(CmAttr::Rtu), 0x0014);
        assert_eq!(u16::from(CmAttr::Dreq), 0x0015);
        assert_eq!(u16::from(CmAttr::Drep), 0x0016);
        assert_eq!(CmAttr::from(0x001au16), CmAttr::Apr);
    }
}
