//! THIRD-PARTY COPY OUT (83h) and IN (84h) CDBs (SPC-4): EXTENDED COPY (LID1), POPULATE
//! TOKEN and WRITE USING TOKEN; RECEIVE COPY STATUS / OPERATING PARAMETERS / FAILURE
//! DETAILS (LID1) and RECEIVE ROD TOKEN INFORMATION. Their parameter data is in
//! [`crate::copy`].

use super::{CdbError, Command, put, read};
use zerocopy::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// THIRD-PARTY COPY OUT service actions.
pub const SA_EXTENDED_COPY_LID1: u8 = 0x00;
/// POPULATE TOKEN.
pub const SA_POPULATE_TOKEN: u8 = 0x10;
/// WRITE USING TOKEN.
pub const SA_WRITE_USING_TOKEN: u8 = 0x11;

/// THIRD-PARTY COPY IN (RECEIVE COPY RESULTS) service actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyResults {
    /// 00h RECEIVE COPY STATUS (LID1).
    Status = 0x00,
    /// 03h RECEIVE COPY OPERATING PARAMETERS.
    OperatingParameters = 0x03,
    /// 04h RECEIVE COPY FAILURE DETAILS (LID1).
    FailureDetails = 0x04,
    /// 07h RECEIVE ROD TOKEN INFORMATION.
    RodTokenInformation = 0x07,
}

/// The 16-byte THIRD-PARTY COPY CDB: bytes 2..=9 carry the service action's identifier
/// fields (a LID1 list identifier in byte 2; a 32-bit LIST IDENTIFIER in bytes 2..=5 or
/// 6..=9), bytes 10..=13 a length.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct CopyCdb {
    /// OPERATION CODE (83h or 84h).
    pub opcode: u8,
    /// SERVICE ACTION.
    pub service_action: u8,
    /// Bytes 2..=9.
    pub ids: [u8; 8],
    /// PARAMETER LIST LENGTH or ALLOCATION LENGTH.
    pub length: U32,
    /// GROUP NUMBER (POPULATE TOKEN, WRITE USING TOKEN) or reserved.
    pub group: u8,
    /// CONTROL.
    pub control: u8,
}
const _: () = assert!(size_of::<CopyCdb>() == 16);

/// A THIRD-PARTY COPY OUT command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyOut {
    /// SERVICE ACTION ([`SA_EXTENDED_COPY_LID1`], [`SA_POPULATE_TOKEN`],
    /// [`SA_WRITE_USING_TOKEN`]).
    pub action: u8,
    /// LIST IDENTIFIER (bytes 6..=9; 0 for EXTENDED COPY (LID1), whose list identifier is
    /// in its parameter list).
    pub list_id: u32,
    /// PARAMETER LIST LENGTH.
    pub param_len: u32,
}

/// A THIRD-PARTY COPY IN command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyIn {
    /// What is asked for.
    pub action: CopyResults,
    /// LIST IDENTIFIER: byte 2 for the LID1 service actions, bytes 2..=5 for RECEIVE ROD
    /// TOKEN INFORMATION, 0 for OPERATING PARAMETERS.
    pub list_id: u32,
    /// ALLOCATION LENGTH.
    pub alloc_len: u32,
}

fn cdb(opcode: u8, sa: u8, ids: [u8; 8], length: u32) -> CopyCdb {
    CopyCdb {
        opcode,
        service_action: sa,
        ids,
        length: U32::new(length),
        group: 0,
        control: 0,
    }
}

impl CopyOut {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let mut ids = [0u8; 8];
        if self.action == SA_EXTENDED_COPY_LID1 {
            if self.list_id != 0 {
                let value = self.list_id.into();
                return Err(CdbError::OutOfRange {
                    field: "LIST IDENTIFIER of EXTENDED COPY (LID1) (it is in the parameter list)",
                    value,
                });
            }
        } else {
            ids[4..].copy_from_slice(&self.list_id.to_be_bytes());
        }
        put(out, &cdb(0x83, self.action, ids, self.param_len))
    }
}

impl CopyIn {
    pub(super) fn emit(&self, out: &mut [u8]) -> Result<(), CdbError> {
        let mut ids = [0u8; 8];
        match self.action {
            CopyResults::Status | CopyResults::FailureDetails => {
                ids[0] = super::fit("LIST IDENTIFIER", self.list_id)?;
            }
            CopyResults::OperatingParameters if self.list_id != 0 => {
                let value = self.list_id.into();
                return Err(CdbError::OutOfRange {
                    field: "LIST IDENTIFIER of OPERATING PARAMETERS",
                    value,
                });
            }
            CopyResults::OperatingParameters => {}
            CopyResults::RodTokenInformation => {
                ids[..4].copy_from_slice(&self.list_id.to_be_bytes());
            }
        }
        put(out, &cdb(0x84, self.action as u8, ids, self.alloc_len))
    }
}

pub(super) fn copy_out(c: &[u8]) -> Result<Command, CdbError> {
    let h: CopyCdb = read(c)?;
    let [.., a, b, cc, d] = h.ids;
    Ok(Command::CopyOut(CopyOut {
        action: h.service_action & 0x1f,
        list_id: u32::from_be_bytes([a, b, cc, d]),
        param_len: h.length.get(),
    }))
}

pub(super) fn copy_in(c: &[u8]) -> Result<Command, CdbError> {
    let h: CopyCdb = read(c)?;
    let action = match h.service_action & 0x1f {
        0x00 => CopyResults::Status,
        0x03 => CopyResults::OperatingParameters,
        0x04 => CopyResults::FailureDetails,
        0x07 => CopyResults::RodTokenInformation,
        // The table routes no other service action here.
        _ => return Err(CdbError::InvalidField { byte: 1, bit: 4 }),
    };
    let list_id = match action {
        CopyResults::Status | CopyResults::FailureDetails => h.ids[0].into(),
        CopyResults::OperatingParameters => 0,
        CopyResults::RodTokenInformation => {
            u32::from_be_bytes([h.ids[0], h.ids[1], h.ids[2], h.ids[3]])
        }
    };
    Ok(Command::CopyIn(CopyIn {
        action,
        list_id,
        alloc_len: h.length.get(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::WireRepr;

    /// EXTENDED COPY (LID1) with a 108-byte parameter list (sg_xcopy's two CSCDs and one
    /// segment).
    const XCOPY: [u8; 16] = [
        0x83, 0x00, // THIRD-PARTY COPY OUT, EXTENDED COPY (LID1)
        0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0, 0, 0, 108,  // PARAMETER LIST LENGTH
        0x00, // reserved
        0x00, // CONTROL
    ];
    fn xcopy() -> Command {
        Command::CopyOut(CopyOut {
            action: SA_EXTENDED_COPY_LID1,
            list_id: 0,
            param_len: 108,
        })
    }
    wire_tests!(extended_copy: Command, XCOPY, xcopy());

    /// WRITE USING TOKEN, list 0x01020304, 552 bytes of parameters.
    const WUT: [u8; 16] = [
        0x83, 0x11, // WRITE USING TOKEN
        0, 0, 0, 0, // reserved
        0x01, 0x02, 0x03, 0x04, // LIST IDENTIFIER
        0, 0, 0x02, 0x28, // PARAMETER LIST LENGTH 552
        0x00, // GROUP NUMBER
        0x00, // CONTROL
    ];
    fn wut() -> Command {
        Command::CopyOut(CopyOut {
            action: SA_WRITE_USING_TOKEN,
            list_id: 0x0102_0304,
            param_len: 552,
        })
    }
    wire_tests!(write_using_token: Command, WUT, wut());

    /// RECEIVE COPY STATUS (LID1) of list 7.
    const STATUS: [u8; 16] = [
        0x84, 0x00, // THIRD-PARTY COPY IN, RECEIVE COPY STATUS (LID1)
        0x07, // LIST IDENTIFIER
        0, 0, 0, 0, 0, 0, 0, // reserved
        0, 0, 0, 12,   // ALLOCATION LENGTH
        0x00, // reserved
        0x00, // CONTROL
    ];
    fn status() -> Command {
        Command::CopyIn(CopyIn {
            action: CopyResults::Status,
            list_id: 7,
            alloc_len: 12,
        })
    }
    wire_tests!(receive_copy_status: Command, STATUS, status());

    /// RECEIVE COPY OPERATING PARAMETERS, as sg_copy_results sends it.
    const OPS: [u8; 16] = [
        0x84, 0x03, // RECEIVE COPY OPERATING PARAMETERS
        0, 0, 0, 0, 0, 0, 0, 0, // reserved
        0, 0, 0x02, 0x08, // ALLOCATION LENGTH 520
        0x00, 0x00,
    ];
    fn ops() -> Command {
        Command::CopyIn(CopyIn {
            action: CopyResults::OperatingParameters,
            list_id: 0,
            alloc_len: 520,
        })
    }
    wire_tests!(receive_copy_operating_parameters: Command, OPS, ops());

    /// RECEIVE ROD TOKEN INFORMATION of list 0xaabbccdd.
    const RRTI: [u8; 16] = [
        0x84, 0x07, // RECEIVE ROD TOKEN INFORMATION
        0xaa, 0xbb, 0xcc, 0xdd, // LIST IDENTIFIER
        0, 0, 0, 0, // reserved
        0, 0, 0x04, 0x00, // ALLOCATION LENGTH 1024
        0x00, 0x00,
    ];
    fn rrti() -> Command {
        Command::CopyIn(CopyIn {
            action: CopyResults::RodTokenInformation,
            list_id: 0xaabb_ccdd,
            alloc_len: 1024,
        })
    }
    wire_tests!(receive_rod_token_information: Command, RRTI, rrti());

    #[test]
    fn operating_parameters_has_no_list_identifier() {
        let mut c = OPS;
        c[2] = 1;
        assert_eq!(
            Command::parse(&c),
            Err(CdbError::InvalidField { byte: 2, bit: 0 })
        );
        let mut o = ops();
        if let Command::CopyIn(i) = &mut o {
            i.list_id = 1;
        }
        assert!(o.emit(&mut [0u8; 16]).is_err());
    }
}
