//! SENSE KEY SPECIFIC: the three bytes whose meaning depends on the sense key (SPC-4),
//! shared by fixed-format bytes 15..=17 and the type 02h sense descriptor.

use super::{SenseError, SenseKey};

/// SKSV: the sense-key-specific bytes are valid (bit 7 of the first byte).
const SKSV: u8 = 0x80;
/// C/D: the field pointer addresses the CDB (1) or the parameter list (0).
const CD: u8 = 0x40;
/// BPV: the BIT POINTER is valid.
const BPV: u8 = 0x08;

/// Which field of a CDB or parameter list is in error (SPC-4, ILLEGAL REQUEST).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldPointer {
    /// C/D: the field is in the CDB (`true`) or the parameter list (`false`).
    pub in_cdb: bool,
    /// BIT POINTER with BPV: the bit in error, or the most-significant bit of a multi-bit
    /// field; `None` when the whole byte is meant. 0..=7.
    pub bit: Option<u8>,
    /// FIELD POINTER: the byte in error (the first byte of a multi-byte field).
    pub byte: u16,
}

/// The sense-key-specific information, decoded by the sense key; present only when SKSV=1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SenseKeySpecific {
    /// ILLEGAL REQUEST: the field in error.
    FieldPointer(FieldPointer),
    /// NO SENSE or NOT READY: PROGRESS INDICATION, the fraction done in units of 1/65536.
    Progress(u16),
    /// Any other sense key (retry counts, segment pointers, …): bits 6:0 of the first byte
    /// and the other two bytes as received.
    Raw([u8; 3]),
}

impl SenseKeySpecific {
    /// Decodes the three bytes for `key`; `None` when SKSV is zero.
    pub(crate) fn decode(key: SenseKey, b: [u8; 3]) -> Option<SenseKeySpecific> {
        if b[0] & SKSV == 0 {
            return None;
        }
        let low16 = u16::from_be_bytes([b[1], b[2]]);
        Some(match key {
            SenseKey::IllegalRequest => SenseKeySpecific::FieldPointer(FieldPointer {
                in_cdb: b[0] & CD != 0,
                bit: (b[0] & BPV != 0).then_some(b[0] & 0x07),
                byte: low16,
            }),
            SenseKey::NoSense | SenseKey::NotReady => SenseKeySpecific::Progress(low16),
            _ => SenseKeySpecific::Raw([b[0] & !SKSV, b[1], b[2]]),
        })
    }

    /// The three bytes with SKSV set. Errors on a bit pointer above 7 or a raw first byte
    /// with bit 7 set (that bit is SKSV).
    pub(crate) fn encode(self) -> Result<[u8; 3], SenseError> {
        match self {
            SenseKeySpecific::FieldPointer(fp) => {
                let [hi, lo] = fp.byte.to_be_bytes();
                let mut b0 = SKSV;
                if fp.in_cdb {
                    b0 |= CD;
                }
                if let Some(bit) = fp.bit {
                    if bit > 7 {
                        return Err(SenseError::OutOfRange {
                            field: "BIT POINTER",
                            value: bit.into(),
                        });
                    }
                    b0 |= BPV | bit;
                }
                Ok([b0, hi, lo])
            }
            SenseKeySpecific::Progress(p) => {
                let [hi, lo] = p.to_be_bytes();
                Ok([SKSV, hi, lo])
            }
            SenseKeySpecific::Raw([b0, b1, b2]) if b0 & SKSV == 0 => Ok([SKSV | b0, b1, b2]),
            SenseKeySpecific::Raw([b0, ..]) => Err(SenseError::OutOfRange {
                field: "sense key specific byte 0",
                value: b0.into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_pointer_bytes() {
        // SPC-4 figure: SKSV=1, C/D=1, BPV=1, bit 7, field byte 2 -> c8 00 02... plus bit.
        let fp = FieldPointer {
            in_cdb: true,
            bit: Some(7),
            byte: 2,
        };
        let b = SenseKeySpecific::FieldPointer(fp)
            .encode()
            .expect("encodes");
        assert_eq!(b, [0xcf, 0x00, 0x02]);
        assert_eq!(
            SenseKeySpecific::decode(SenseKey::IllegalRequest, b),
            Some(SenseKeySpecific::FieldPointer(fp))
        );
        let whole = FieldPointer {
            in_cdb: false,
            bit: None,
            byte: 0x1234,
        };
        let b = SenseKeySpecific::FieldPointer(whole)
            .encode()
            .expect("encodes");
        assert_eq!(b, [0x80, 0x12, 0x34]);
    }

    #[test]
    fn decoding_follows_the_key_and_sksv() {
        assert_eq!(
            SenseKeySpecific::decode(SenseKey::IllegalRequest, [0x4f, 1, 2]),
            None
        );
        assert_eq!(
            SenseKeySpecific::decode(SenseKey::NotReady, [0x80, 0x80, 0x00]),
            Some(SenseKeySpecific::Progress(0x8000))
        );
        assert_eq!(
            SenseKeySpecific::decode(SenseKey::MediumError, [0x81, 0, 3]),
            Some(SenseKeySpecific::Raw([0x01, 0, 3]))
        );
        assert!(SenseKeySpecific::Raw([0x80, 0, 0]).encode().is_err());
        let bad = FieldPointer {
            in_cdb: true,
            bit: Some(8),
            byte: 0,
        };
        assert!(SenseKeySpecific::FieldPointer(bad).encode().is_err());
    }
}
