//! MRA, MessageReceiptAcknowledgement (attribute 0x0011): asks the peer to wait longer
//! (IBTA Vol1 table 107 via `ibta_vol1_c12.h`).
#[allow(unused_imports)]
use crate::prelude::*;

use super::CM_MSG_LEN;
use crate::mad::{CommId, MadError, PrivateData, check_width, read_fixed, write_fixed};
use wirekit::WireRepr;
use zerocopy::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of private data in an MRA.
pub const MRA_PRIVATE_DATA_LEN: usize = 222;

/// MRA as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct MraRaw {
    /// 0 Local communication ID.
    pub local_comm_id: U32,
    /// 4 Remote communication ID.
    pub remote_comm_id: U32,
    /// 8 Message MRAed (7:6), reserved.
    pub message_mraed: u8,
    /// 9 Service timeout (7:3), reserved.
    pub service_timeout: u8,
    /// 10 Private data.
    pub private_data: [u8; MRA_PRIVATE_DATA_LEN],
}
const _: () = assert!(size_of::<MraRaw>() == CM_MSG_LEN);

wirekit::open_enum! {
    /// Which message an MRA acknowledges, 2 bits (Linux `CM_MSG_RESPONSE_*`).
    pub enum MraMessage(u8) {
        /// A REQ.
        Req = 0,
        /// A REP.
        Rep = 1,
        /// Another message (LAP).
        Other = 2,
    }
}

/// The validated MRA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmMra {
    /// Local communication ID.
    pub local_comm_id: CommId,
    /// Remote communication ID.
    pub remote_comm_id: CommId,
    /// Message acknowledged.
    pub message_mraed: MraMessage,
    /// Service timeout, 5 bits: 4.096 µs × 2^value.
    pub service_timeout: u8,
    /// Private data.
    pub private_data: PrivateData<MRA_PRIVATE_DATA_LEN>,
}

impl<'a> WireRepr<'a> for CmMra {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: MraRaw = read_fixed("CM MRA", buf)?;
        Ok(CmMra {
            local_comm_id: CommId(r.local_comm_id.get()),
            remote_comm_id: CommId(r.remote_comm_id.get()),
            message_mraed: (r.message_mraed >> 6).into(),
            service_timeout: r.service_timeout >> 3,
            private_data: PrivateData(r.private_data),
        })
    }

    fn buffer_len(&self) -> usize {
        CM_MSG_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        check_width(
            "CM MRA",
            "MessageMRAed",
            u8::from(self.message_mraed).into(),
            2,
        )?;
        check_width("CM MRA", "ServiceTimeout", self.service_timeout.into(), 5)?;
        let r = MraRaw {
            local_comm_id: U32::new(self.local_comm_id.0),
            remote_comm_id: U32::new(self.remote_comm_id.0),
            message_mraed: u8::from(self.message_mraed) << 6,
            service_timeout: self.service_timeout << 3,
            private_data: self.private_data.0,
        };
        write_fixed("CM MRA", &r, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    fn mra_bytes() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[..10].copy_from_slice(&[
            0x00, 0x00, 0x00, 0x09, // 0 LocalCommID
            0x12, 0x34, 0x56, 0x78, // 4 RemoteCommID
            0x40, // 8 MessageMRAed: REP (1 << 6)
            0xa0, // 9 ServiceTimeout 20 (<< 3)
        ]);
        b[10] = 0x11; // 10 private data, first byte
        b[231] = 0x22; // last private-data byte
        b
    }

    fn mra() -> CmMra {
        let mut pd = [0u8; MRA_PRIVATE_DATA_LEN];
        pd[0] = 0x11;
        pd[221] = 0x22;
        CmMra {
            local_comm_id: CommId(9),
            remote_comm_id: CommId(0x1234_5678),
            message_mraed: MraMessage::Rep,
            service_timeout: 20,
            private_data: PrivateData(pd),
        }
    }

    #[test]
    fn mra_decodes_known_bytes() {
        check::decodes(&mra_bytes(), &mra());
    }

    #[test]
    fn mra_emits_known_bytes() {
        check::emits(&mra(), &mra_bytes());
    }

    #[test]
    fn mra_round_trips() {
        check::round_trips(&mra(), &mut Vec::new());
    }

    #[test]
    fn mra_truncated_errors() {
        check::truncation_errors::<CmMra>(&mra_bytes());
    }

    #[test]
    fn mra_message_codes() {
        assert_eq!(MraMessage::from(0u8), MraMessage::Req);
        assert_eq!(u8::from(MraMessage::Other), 2);
        assert!(
            CmMra {
                service_timeout: 32,
                ..mra()
            }
            .emit(&mut [0u8; 232])
            .is_err()
        );
    }
}
