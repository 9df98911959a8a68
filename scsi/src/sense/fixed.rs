//! Fixed-format sense data, response codes 70h (current) and 71h (deferred) (SPC-4).

use super::{SenseCode, SenseError, SenseKeySpecific};
use alloc::vec::Vec;
use wirekit::WireRepr;
use zerocopy::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The 18 bytes of standard fixed-format sense data (SPC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct FixedSenseHdr {
    /// Bit 7: VALID (INFORMATION is defined); bits 6:0: response code 70h/71h.
    pub response: u8,
    /// Obsolete.
    pub obsolete: u8,
    /// Bit 7 FILEMARK, bit 6 EOM, bit 5 ILI, bit 4 SDAT_OVFL; bits 3:0 SENSE KEY.
    pub flags_key: u8,
    /// INFORMATION.
    pub information: U32,
    /// ADDITIONAL SENSE LENGTH: bytes after byte 7 (10 for the standard 18 bytes).
    pub additional_len: u8,
    /// COMMAND-SPECIFIC INFORMATION.
    pub command_specific: U32,
    /// ADDITIONAL SENSE CODE.
    pub asc: u8,
    /// ADDITIONAL SENSE CODE QUALIFIER.
    pub ascq: u8,
    /// FIELD REPLACEABLE UNIT CODE.
    pub fru: u8,
    /// SKSV and SENSE KEY SPECIFIC.
    pub sks: [u8; 3],
}
const _: () = assert!(size_of::<FixedSenseHdr>() == FIXED_LEN);

/// Length of standard fixed-format sense data.
pub const FIXED_LEN: usize = 18;
/// Response code of current fixed-format sense.
pub const RESPONSE_FIXED_CURRENT: u8 = 0x70;
/// Response code of deferred fixed-format sense.
pub const RESPONSE_FIXED_DEFERRED: u8 = 0x71;

const VALID: u8 = 0x80;
const FILEMARK: u8 = 0x80;
const EOM: u8 = 0x40;
const ILI: u8 = 0x20;

/// Fixed-format sense data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedSense {
    /// Deferred error (71h) rather than current (70h).
    pub deferred: bool,
    /// Sense key, ASC, ASCQ.
    pub code: SenseCode,
    /// INFORMATION when VALID=1 (e.g. the first LBA in error).
    pub information: Option<u32>,
    /// COMMAND-SPECIFIC INFORMATION.
    pub command_specific: u32,
    /// FILEMARK (sequential-access devices).
    pub filemark: bool,
    /// EOM: end of medium or partition.
    pub eom: bool,
    /// ILI: incorrect length indicator.
    pub ili: bool,
    /// FIELD REPLACEABLE UNIT CODE.
    pub fru: u8,
    /// SENSE KEY SPECIFIC when SKSV=1.
    pub sense_key_specific: Option<SenseKeySpecific>,
    /// ADDITIONAL SENSE BYTES after byte 17.
    pub additional: Vec<u8>,
}

impl FixedSense {
    /// Current sense with only `code` set.
    pub fn new(code: SenseCode) -> FixedSense {
        FixedSense {
            deferred: false,
            code,
            information: None,
            command_specific: 0,
            filemark: false,
            eom: false,
            ili: false,
            fru: 0,
            sense_key_specific: None,
            additional: Vec::new(),
        }
    }
}

impl<'a> WireRepr<'a> for FixedSense {
    type Error = SenseError;

    /// Accepts an ADDITIONAL SENSE LENGTH below 10 (older devices report only the fields
    /// they fill): the missing fields read as zero.
    fn parse(buf: &'a [u8]) -> Result<Self, SenseError> {
        let add_len = *buf.get(7).ok_or(SenseError::Truncated {
            need: 8,
            have: buf.len(),
        })?;
        let total = 8 + usize::from(add_len);
        let msg = buf.get(..total).ok_or(SenseError::Truncated {
            need: total,
            have: buf.len(),
        })?;
        let mut std = [0u8; FIXED_LEN];
        let n = msg.len().min(FIXED_LEN);
        std[..n].copy_from_slice(&msg[..n]);
        let h = FixedSenseHdr::read_from_bytes(&std).map_err(|_| SenseError::Truncated {
            need: FIXED_LEN,
            have: std.len(),
        })?;
        let deferred = match h.response & !VALID {
            RESPONSE_FIXED_CURRENT => false,
            RESPONSE_FIXED_DEFERRED => true,
            other => return Err(SenseError::UnknownResponseCode(other)),
        };
        let code = SenseCode::new((h.flags_key & 0x0f).into(), h.asc, h.ascq);
        Ok(FixedSense {
            deferred,
            code,
            information: (h.response & VALID != 0).then(|| h.information.get()),
            command_specific: h.command_specific.get(),
            filemark: h.flags_key & FILEMARK != 0,
            eom: h.flags_key & EOM != 0,
            ili: h.flags_key & ILI != 0,
            fru: h.fru,
            sense_key_specific: SenseKeySpecific::decode(code.key, h.sks),
            additional: msg.get(FIXED_LEN..).unwrap_or_default().to_vec(),
        })
    }

    fn buffer_len(&self) -> usize {
        FIXED_LEN + self.additional.len()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, SenseError> {
        let need = self.buffer_len();
        let additional_len = u8::try_from(need - 8).map_err(|_| SenseError::OutOfRange {
            field: "ADDITIONAL SENSE LENGTH",
            value: need as u64 - 8,
        })?;
        let key = u8::from(self.code.key);
        if key > 0x0f {
            return Err(SenseError::OutOfRange {
                field: "SENSE KEY",
                value: key.into(),
            });
        }
        let mut response = if self.deferred {
            RESPONSE_FIXED_DEFERRED
        } else {
            RESPONSE_FIXED_CURRENT
        };
        if self.information.is_some() {
            response |= VALID;
        }
        let mut flags_key = key;
        for (set, bit) in [(self.filemark, FILEMARK), (self.eom, EOM), (self.ili, ILI)] {
            if set {
                flags_key |= bit;
            }
        }
        let h = FixedSenseHdr {
            response,
            obsolete: 0,
            flags_key,
            information: U32::new(self.information.unwrap_or(0)),
            additional_len,
            command_specific: U32::new(self.command_specific),
            asc: self.code.asc,
            ascq: self.code.ascq,
            fru: self.fru,
            sks: self
                .sense_key_specific
                .map(SenseKeySpecific::encode)
                .transpose()?
                .unwrap_or([0; 3]),
        };
        let have = buf.len();
        let out = buf
            .get_mut(..need)
            .ok_or(SenseError::BufferTooSmall { need, have })?;
        out[..FIXED_LEN].copy_from_slice(h.as_bytes());
        out[FIXED_LEN..].copy_from_slice(&self.additional);
        Ok(need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sense::{FieldPointer, SenseKey};
    use wirekit::wire_repr::check;

    /// ILLEGAL REQUEST, INVALID FIELD IN CDB, field pointer CDB byte 1 bit 4 (as Linux
    /// `scsi_build_sense` + LIO `transport_send_check_condition_and_sense` lay it out).
    const INVALID_FIELD: [u8; 18] = [
        0x70, // VALID=0, response code 70h (current, fixed)
        0x00, // obsolete
        0x05, // FILEMARK=0 EOM=0 ILI=0, sense key 5h ILLEGAL REQUEST
        0, 0, 0, 0,    // INFORMATION
        0x0a, // ADDITIONAL SENSE LENGTH: 10
        0, 0, 0, 0,    // COMMAND-SPECIFIC INFORMATION
        0x24, // ASC: INVALID FIELD IN CDB
        0x00, // ASCQ
        0x00, // FRU code
        0xcc, // SKSV=1, C/D=1 (CDB), BPV=1, bit pointer 4
        0x00, 0x01, // FIELD POINTER: byte 1
    ];

    fn invalid_field() -> FixedSense {
        FixedSense {
            sense_key_specific: Some(SenseKeySpecific::FieldPointer(FieldPointer {
                in_cdb: true,
                bit: Some(4),
                byte: 1,
            })),
            ..FixedSense::new(SenseCode::INVALID_FIELD_IN_CDB)
        }
    }

    /// Deferred MEDIUM ERROR, UNRECOVERED READ ERROR at LBA 0x1234 (VALID, INFORMATION),
    /// ILI, a retry count of 3, and two vendor additional sense bytes.
    const READ_ERROR: [u8; 20] = [
        0xf1, // VALID=1, response code 71h (deferred, fixed)
        0x00, // obsolete
        0x23, // ILI=1, sense key 3h MEDIUM ERROR
        0x00, 0x00, 0x12, 0x34, // INFORMATION: LBA 0x1234
        0x0c, // ADDITIONAL SENSE LENGTH: 12
        0xde, 0xad, 0xbe, 0xef, // COMMAND-SPECIFIC INFORMATION
        0x11, 0x00, // ASC/ASCQ: UNRECOVERED READ ERROR
        0x07, // FRU code
        0x80, 0x00, 0x03, // SKSV=1, ACTUAL RETRY COUNT 3
        0xaa, 0xbb, // additional sense bytes
    ];

    fn read_error() -> FixedSense {
        FixedSense {
            deferred: true,
            information: Some(0x1234),
            command_specific: 0xdead_beef,
            ili: true,
            fru: 7,
            sense_key_specific: Some(SenseKeySpecific::Raw([0, 0, 3])),
            additional: vec![0xaa, 0xbb],
            ..FixedSense::new(SenseCode::UNRECOVERED_READ_ERROR)
        }
    }

    #[test]
    fn fixed_decodes_known_bytes() {
        check::decodes(&INVALID_FIELD, &invalid_field());
        check::decodes(&READ_ERROR, &read_error());
    }

    #[test]
    fn fixed_emits_known_bytes() {
        check::emits(&invalid_field(), &INVALID_FIELD);
        check::emits(&read_error(), &READ_ERROR);
    }

    #[test]
    fn fixed_round_trips() {
        check::round_trips(&invalid_field(), &mut Vec::new());
        check::round_trips(&read_error(), &mut Vec::new());
        let odd = FixedSense::new(SenseCode::new(SenseKey::Unknown(0xc), 0x80, 0x81));
        check::round_trips(&odd, &mut Vec::new());
    }

    #[test]
    fn fixed_truncated_errors() {
        check::truncation_errors::<FixedSense>(&INVALID_FIELD);
        check::truncation_errors::<FixedSense>(&READ_ERROR);
    }

    #[test]
    fn short_additional_length_reads_missing_fields_as_zero() {
        // Additional sense length 4: ASC/ASCQ (bytes 12, 13) are beyond the data.
        let short = [0x70, 0, 0x06, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0x29, 0x00];
        let s = FixedSense::parse(&short).expect("parses");
        assert_eq!(s.code, SenseCode::new(SenseKey::UnitAttention, 0, 0));
    }

    #[test]
    fn bad_response_code_and_key() {
        let mut b = INVALID_FIELD;
        b[0] = 0x72;
        assert_eq!(
            FixedSense::parse(&b),
            Err(SenseError::UnknownResponseCode(0x72))
        );
        let bad = FixedSense::new(SenseCode::new(SenseKey::Unknown(0x10), 0, 0));
        assert!(bad.emit(&mut [0; 18]).is_err());
    }
}
