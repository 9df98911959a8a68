//! RTU, ReadyToUse (attribute 0x0014): the active side's last handshake message
//! (IBTA Vol1 table 111 via `ibta_vol1_c12.h`).
#[allow(unused_imports)]
use crate::prelude::*;

use super::CM_MSG_LEN;
use crate::mad::{CommId, MadError, PrivateData, read_fixed, write_fixed};
use wirekit::WireRepr;
use zerocopy::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of private data in an RTU (and a DREP).
pub const RTU_PRIVATE_DATA_LEN: usize = 224;

/// RTU (and DREP) as laid out on the wire: two communication IDs and private data.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct IdsAndDataRaw {
    /// 0 Local communication ID.
    pub local_comm_id: U32,
    /// 4 Remote communication ID.
    pub remote_comm_id: U32,
    /// 8 Private data.
    pub private_data: [u8; RTU_PRIVATE_DATA_LEN],
}
const _: () = assert!(size_of::<IdsAndDataRaw>() == CM_MSG_LEN);

/// The fields of an RTU or DREP: local and remote communication IDs and private data.
pub(crate) type IdsAndData = (CommId, CommId, PrivateData<RTU_PRIVATE_DATA_LEN>);

impl IdsAndDataRaw {
    /// Reads the layout shared by RTU and DREP.
    pub(crate) fn read(what: &'static str, buf: &[u8]) -> Result<IdsAndData, MadError> {
        let r: IdsAndDataRaw = read_fixed(what, buf)?;
        Ok((
            CommId(r.local_comm_id.get()),
            CommId(r.remote_comm_id.get()),
            PrivateData(r.private_data),
        ))
    }

    /// Writes the layout shared by RTU and DREP.
    pub(crate) fn write(
        what: &'static str,
        (local, remote, data): IdsAndData,
        buf: &mut [u8],
    ) -> Result<usize, MadError> {
        let r = IdsAndDataRaw {
            local_comm_id: U32::new(local.0),
            remote_comm_id: U32::new(remote.0),
            private_data: data.0,
        };
        write_fixed(what, &r, buf)
    }
}

/// The validated RTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmRtu {
    /// Local communication ID.
    pub local_comm_id: CommId,
    /// Remote communication ID.
    pub remote_comm_id: CommId,
    /// Private data.
    pub private_data: PrivateData<RTU_PRIVATE_DATA_LEN>,
}

impl<'a> WireRepr<'a> for CmRtu {
    type Error = MadError;

    fn parse(buf: &'a [u8]) -> Result<Self, MadError> {
        let (local_comm_id, remote_comm_id, private_data) = IdsAndDataRaw::read("CM RTU", buf)?;
        Ok(CmRtu {
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
        IdsAndDataRaw::write("CM RTU", fields, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    fn rtu_bytes() -> [u8; 232] {
        let mut b = [0u8; 232];
        b[..8].copy_from_slice(&[
            0x12, 0x34, 0x56, 0x78, // 0 LocalCommID (the requester's)
            0x9a, 0xbc, 0xde, 0xf0, // 4 RemoteCommID
        ]);
        b[231] = 0x01; // 8 private data, last byte set
        b
    }

    fn rtu() -> CmRtu {
        let mut pd = [0u8; RTU_PRIVATE_DATA_LEN];
        pd[223] = 1;
        CmRtu {
            local_comm_id: CommId(0x1234_5678),
            remote_comm_id: CommId(0x9abc_def0),
            private_data: PrivateData(pd),
        }
    }

    #[test]
    fn rtu_decodes_known_bytes() {
        check::decodes(&rtu_bytes(), &rtu());
    }

    #[test]
    fn rtu_emits_known_bytes() {
        check::emits(&rtu(), &rtu_bytes());
    }

    #[test]
    fn rtu_round_trips() {
        check::round_trips(&rtu(), &mut Vec::new());
    }

    #[test]
    fn rtu_truncated_errors() {
        check::truncation_errors::<CmRtu>(&rtu_bytes());
    }
}
