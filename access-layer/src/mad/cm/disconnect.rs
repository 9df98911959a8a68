//! DREQ, DisconnectRequest (0x0015), and DREP, DisconnectReply (0x0016)
//! (IBTA Vol1 tables 112–113 via `ibta_vol1_c12.h`).
#[allow(unused_imports)]
use crate::prelude::*;

use super::rtu::{IdsAndDataRaw, RTU_PRIVATE_DATA_LEN};
use super::{CM_MSG_LEN, hi24, pack24};
use crate::mad::{CommId, MadError, PrivateData, read_fixed, write_fixed};
use ib_verbs::Qpn;
use wirekit::WireRepr;
use zerocopy::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of private data in a DREQ.
pub const DREQ_PRIVATE_DATA_LEN: usize = 220;
/// Bytes of private data in a DREP.
pub const DREP_PRIVATE_DATA_LEN: usize = RTU_PRIVATE_DATA_LEN;

/// DREQ as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct DreqRaw {
    /// 0 Local communication ID.
    pub local_comm_id: U32,
    /// 4 Remote communication ID.
    pub remote_comm_id: U32,
    /// 8 Remote QPN/EECN (31:8), reserved.
    pub remote_qpn: U32,
    /// 12 Private data.
    pub private_data: [u8; DREQ_PRIVATE_DATA_LEN],
}
const _: () = assert!(size_of::<DreqRaw>() == CM_MSG_LEN);

/// The validated DREQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmDreq {
    /// Local communication ID.
    pub local_comm_id: CommId,
    /// Remote communication ID.
    pub remote_comm_id: CommId,
    /// The receiver's QPN (or EECN).
    pub remote_qpn: Qpn,
    /// Private data.
    pub private_data: PrivateData<DREQ_PRIVATE_DATA_LEN>,
}

impl<'a> WireRepr<'a> for CmDreq {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let r: DreqRaw = read_fixed("CM DREQ", buf)?;
        Ok(CmDreq {
            local_comm_id: CommId(r.local_comm_id.get()),
            remote_comm_id: CommId(r.remote_comm_id.get()),
            remote_qpn: Qpn::from_wire(hi24(r.remote_qpn.get())),
            private_data: PrivateData(r.private_data),
        })
    }

    fn buffer_len(&self) -> usize {
        CM_MSG_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        let r = DreqRaw {
            local_comm_id: U32::new(self.local_comm_id.0),
            remote_comm_id: U32::new(self.remote_comm_id.0),
            remote_qpn: U32::new(pack24(self.remote_qpn.get(), 0)),
            private_data: self.private_data.0,
        };
        write_fixed("CM DREQ", &r, buf)
    }
}

/// The validated DREP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmDrep {
    /// Local communication ID.
    pub local_comm_id: CommId,
    /// Remote communication ID.
    pub remote_comm_id: CommId,
    /// Private data.
    pub private_data: PrivateData<DREP_PRIVATE_DATA_LEN>,
}

impl<'a> WireRepr<'a> for CmDrep {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let (local_comm_id, remote_comm_id, private_data) = IdsAndDataRaw::read("CM DREP", buf)?;
        Ok(CmDrep {
            local_comm_id,
            remote_comm_id,
            private_data,
        })
    }

    fn buffer_len(&self) -> usize {
        CM_MSG_LEN
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, MadError> {
        let fields = (self.local_comm_id, self.remote_comm_id, self.private_data);
        IdsAndDataRaw::write("CM DREP", fields, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    fn dreq_bytes() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[..12].copy_from_slice(&[
            0x12, 0x34, 0x56, 0x78, // 0 LocalCommID
            0x9a, 0xbc, 0xde, 0xf0, // 4 RemoteCommID
            0x00, 0x00, 0x22, 0x00, // 8 RemoteQPN 0x22, reserved
        ]);
        b[12] = 0xdd; // 12 private data
        b
    }

    fn dreq() -> CmDreq {
        let mut pd = [0u8; DREQ_PRIVATE_DATA_LEN];
        pd[0] = 0xdd;
        CmDreq {
            local_comm_id: CommId(0x1234_5678),
            remote_comm_id: CommId(0x9abc_def0),
            remote_qpn: Qpn::from_wire(0x22),
            private_data: PrivateData(pd),
        }
    }

    fn drep_bytes() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[..8].copy_from_slice(&[
            0x9a, 0xbc, 0xde, 0xf0, // 0 LocalCommID
            0x12, 0x34, 0x56, 0x78, // 4 RemoteCommID
        ]);
        b
    }

    fn drep() -> CmDrep {
        CmDrep {
            local_comm_id: CommId(0x9abc_def0),
            remote_comm_id: CommId(0x1234_5678),
            private_data: PrivateData::default(),
        }
    }

    #[test]
    fn dreq_decodes_known_bytes() {
        check::decodes(&dreq_bytes(), &dreq());
    }

    #[test]
    fn dreq_emits_known_bytes() {
        check::emits(&dreq(), &dreq_bytes());
    }

    #[test]
    fn dreq_round_trips() {
        check::round_trips(&dreq(), &mut Vec::new());
    }

    #[test]
    fn dreq_truncated_errors() {
        check::truncation_errors::<CmDreq>(&dreq_bytes());
    }

    #[test]
    fn drep_decodes_known_bytes() {
        check::decodes(&drep_bytes(), &drep());
    }

    #[test]
    fn drep_emits_known_bytes() {
        check::emits(&drep(), &drep_bytes());
    }

    #[test]
    fn drep_round_trips() {
        check::round_trips(&drep(), &mut Vec::new());
    }

    #[test]
    fn drep_truncated_errors() {
        check::truncation_errors::<CmDrep>(&drep_bytes());
    }
}
