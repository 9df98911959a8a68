//! Sense data (SPC-4): what a CHECK CONDITION carries.
//!
//! - [`key`]: [`SenseKey`]; [`code`]: [`SenseCode`] and the named conditions;
//! - [`sks`]: [`SenseKeySpecific`] (field pointer, progress);
//! - [`fixed`]: fixed format (70h/71h); [`descriptor`]: descriptor format (72h/73h);
//! - [`Sense`]: either format; [`Sense::parse`] lets the response code decide, and the
//!   constructors build fixed format, which every initiator reads (Linux, Windows, ESXi).

use alloc::vec;
use alloc::vec::Vec;
pub mod code;
pub mod descriptor;
pub mod fixed;
pub mod key;
pub mod sks;

pub use code::SenseCode;
pub use descriptor::{DescriptorSense, SenseDescriptor};
pub use fixed::FixedSense;
pub use key::SenseKey;
pub use sks::{FieldPointer, SenseKeySpecific};

use wirekit::WireRepr;

/// Why bytes are not valid sense data, or why sense data could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SenseError {
    /// The bytes end before the sense data its ADDITIONAL SENSE LENGTH describes.
    #[error("sense data truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes the sense data needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The response code is not 70h-73h.
    #[error("sense response code {0:#04x} is not 70h-73h")]
    UnknownResponseCode(u8),
    /// A sense data descriptor runs past the ADDITIONAL SENSE LENGTH.
    #[error("a sense data descriptor runs past the additional sense length")]
    BadDescriptorLength,
    /// A field holds a value its wire width cannot carry (emit).
    #[error("{field} = {value:#x} does not fit its field")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// The output buffer is smaller than the sense data.
    #[error("output buffer is {have} bytes, the sense data needs {need}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

/// Sense data in either format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sense {
    /// Fixed format (70h/71h).
    Fixed(FixedSense),
    /// Descriptor format (72h/73h).
    Descriptor(DescriptorSense),
}

impl Sense {
    /// Current fixed-format sense for `code`, with nothing else set.
    pub fn new(code: SenseCode) -> Sense {
        Sense::Fixed(FixedSense::new(code))
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN CDB, pointing at CDB byte `byte`, bit `bit`
    /// (`None`: the whole byte; for a multi-bit field, its most-significant bit).
    pub fn invalid_field_in_cdb(byte: u16, bit: Option<u8>) -> Sense {
        Sense::with_field_pointer(
            SenseCode::INVALID_FIELD_IN_CDB,
            FieldPointer {
                in_cdb: true,
                bit,
                byte,
            },
        )
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST, pointing at parameter list byte
    /// `byte`, bit `bit`.
    pub fn invalid_field_in_parameter_list(byte: u16, bit: Option<u8>) -> Sense {
        Sense::with_field_pointer(
            SenseCode::INVALID_FIELD_IN_PARAMETER_LIST,
            FieldPointer {
                in_cdb: false,
                bit,
                byte,
            },
        )
    }

    /// Fixed-format sense for `code` with a field pointer (sense key specific, SKSV=1).
    pub fn with_field_pointer(code: SenseCode, pointer: FieldPointer) -> Sense {
        Sense::Fixed(FixedSense {
            sense_key_specific: Some(SenseKeySpecific::FieldPointer(pointer)),
            ..FixedSense::new(code)
        })
    }

    /// Fixed-format sense for `code` whose INFORMATION field (VALID=1) holds `information`,
    /// e.g. the first LBA in error of a MEDIUM ERROR, or the offset of a miscompare.
    /// Falls back to descriptor format when `information` does not fit the fixed 32 bits.
    pub fn with_information(code: SenseCode, information: u64) -> Sense {
        match u32::try_from(information) {
            Ok(info) => Sense::Fixed(FixedSense {
                information: Some(info),
                ..FixedSense::new(code)
            }),
            Err(_) => Sense::Descriptor(DescriptorSense {
                deferred: false,
                code,
                descriptors: vec![SenseDescriptor::Information(information)],
            }),
        }
    }

    /// Sense key, ASC and ASCQ.
    pub fn code(&self) -> SenseCode {
        match self {
            Sense::Fixed(f) => f.code,
            Sense::Descriptor(d) => d.code,
        }
    }

    /// Whether this reports a deferred error (71h/73h).
    pub fn is_deferred(&self) -> bool {
        match self {
            Sense::Fixed(f) => f.deferred,
            Sense::Descriptor(d) => d.deferred,
        }
    }

    /// INFORMATION, when valid.
    pub fn information(&self) -> Option<u64> {
        match self {
            Sense::Fixed(f) => f.information.map(u64::from),
            Sense::Descriptor(d) => d.descriptors.iter().find_map(|x| match x {
                SenseDescriptor::Information(v) => Some(*v),
                _ => None,
            }),
        }
    }

    /// SENSE KEY SPECIFIC, when SKSV=1.
    pub fn sense_key_specific(&self) -> Option<SenseKeySpecific> {
        match self {
            Sense::Fixed(f) => f.sense_key_specific,
            Sense::Descriptor(d) => d.descriptors.iter().find_map(|x| match x {
                SenseDescriptor::SenseKeySpecific(s) => Some(*s),
                _ => None,
            }),
        }
    }

    /// The same condition in descriptor format (REQUEST SENSE with DESC=1, or the D_SENSE
    /// bit of the control mode page). Information, command-specific information and sense key
    /// specific carry over; FILEMARK/EOM/ILI, FRU and additional bytes are dropped.
    pub fn to_descriptor(&self) -> DescriptorSense {
        match self {
            Sense::Descriptor(d) => d.clone(),
            Sense::Fixed(f) => {
                let mut descriptors = Vec::new();
                if let Some(info) = f.information {
                    descriptors.push(SenseDescriptor::Information(info.into()));
                }
                if f.command_specific != 0 {
                    descriptors.push(SenseDescriptor::CommandSpecific(f.command_specific.into()));
                }
                if let Some(sks) = f.sense_key_specific {
                    descriptors.push(SenseDescriptor::SenseKeySpecific(sks));
                }
                DescriptorSense {
                    deferred: f.deferred,
                    code: f.code,
                    descriptors,
                }
            }
        }
    }
}

impl From<SenseCode> for Sense {
    fn from(code: SenseCode) -> Sense {
        Sense::new(code)
    }
}

impl<'a> WireRepr<'a> for Sense {
    type Error = SenseError;

    /// The response code (bits 6:0 of byte 0) selects the format.
    fn parse(buf: &'a [u8]) -> Result<Self, SenseError> {
        let first = *buf
            .first()
            .ok_or(SenseError::Truncated { need: 8, have: 0 })?;
        match first & 0x7f {
            fixed::RESPONSE_FIXED_CURRENT | fixed::RESPONSE_FIXED_DEFERRED => {
                FixedSense::parse(buf).map(Sense::Fixed)
            }
            descriptor::RESPONSE_DESC_CURRENT | descriptor::RESPONSE_DESC_DEFERRED => {
                DescriptorSense::parse(buf).map(Sense::Descriptor)
            }
            other => Err(SenseError::UnknownResponseCode(other)),
        }
    }

    fn buffer_len(&self) -> usize {
        match self {
            Sense::Fixed(f) => f.buffer_len(),
            Sense::Descriptor(d) => d.buffer_len(),
        }
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, SenseError> {
        match self {
            Sense::Fixed(f) => f.emit(buf),
            Sense::Descriptor(d) => d.emit(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// `Sense::invalid_field_in_cdb(2, Some(7))`: INQUIRY with EVPD=0 and a page code.
    const INVALID_FIELD_BYTE2: [u8; 18] = [
        0x70, // current, fixed
        0x00, // obsolete
        0x05, // ILLEGAL REQUEST
        0, 0, 0, 0,    // INFORMATION
        0x0a, // ADDITIONAL SENSE LENGTH
        0, 0, 0, 0, // COMMAND-SPECIFIC INFORMATION
        0x24, 0x00, // INVALID FIELD IN CDB
        0x00, // FRU
        0xcf, 0x00, 0x02, // SKSV, C/D=1, BPV=1, bit 7; FIELD POINTER 2
    ];

    #[test]
    fn sense_decodes_known_bytes() {
        check::decodes(
            &INVALID_FIELD_BYTE2,
            &Sense::invalid_field_in_cdb(2, Some(7)),
        );
    }

    #[test]
    fn sense_emits_known_bytes() {
        check::emits(
            &Sense::invalid_field_in_cdb(2, Some(7)),
            &INVALID_FIELD_BYTE2,
        );
    }

    #[test]
    fn sense_round_trips_both_formats() {
        check::round_trips(
            &Sense::invalid_field_in_parameter_list(4, None),
            &mut Vec::new(),
        );
        let d = Sense::Descriptor(Sense::invalid_field_in_cdb(1, Some(0)).to_descriptor());
        check::round_trips(&d, &mut Vec::new());
        check::round_trips(
            &Sense::with_information(SenseCode::WRITE_ERROR, 1 << 40),
            &mut Vec::new(),
        );
    }

    #[test]
    fn sense_truncated_errors() {
        check::truncation_errors::<Sense>(&INVALID_FIELD_BYTE2);
    }

    #[test]
    fn parse_lets_the_response_code_decide() {
        let mut b = [0u8; 18];
        let n = Sense::Descriptor(Sense::new(SenseCode::POWER_ON_RESET).to_descriptor())
            .emit(&mut b)
            .expect("fits");
        let s = Sense::parse(&b[..n]).expect("parses");
        assert!(matches!(s, Sense::Descriptor(_)));
        assert_eq!(s.code(), SenseCode::POWER_ON_RESET);
        assert_eq!(
            Sense::parse(&[0x7f, 0, 0, 0, 0, 0, 0, 0]),
            Err(SenseError::UnknownResponseCode(0x7f))
        );
    }

    /// A deterministic stand-in for the `scsi_sense` fuzz target.
    #[test]
    fn random_sense_never_panics_and_round_trips() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut parsed = 0;
        for i in 0..100_000 {
            let mut b = [0u8; 64];
            for v in b.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *v = if x % 4 == 0 {
                    x as u8
                } else {
                    (x as u8) & 0x0f
                };
            }
            b[0] = 0x70 + (i % 4) as u8;
            b[7] = (x >> 24) as u8 % 60;
            let len = (x >> 40) as usize % 65;
            if let Ok(s) = Sense::parse(&b[..len]) {
                parsed += 1;
                check::round_trips(&s, &mut Vec::new());
                check::round_trips(&Sense::Descriptor(s.to_descriptor()), &mut Vec::new());
            }
        }
        assert!(parsed > 1000, "only {parsed} random sense buffers parsed");
    }

    #[test]
    fn accessors_agree_across_formats() {
        let f = Sense::with_information(SenseCode::UNRECOVERED_READ_ERROR, 77);
        let d = Sense::Descriptor(f.to_descriptor());
        assert_eq!(f.information(), Some(77));
        assert_eq!(d.information(), Some(77));
        let c = Sense::invalid_field_in_cdb(9, None);
        let cd = Sense::Descriptor(c.to_descriptor());
        assert_eq!(c.sense_key_specific(), cd.sense_key_specific());
        assert!(!cd.is_deferred());
        assert_eq!(Sense::from(SenseCode::NO_SENSE).code(), SenseCode::NO_SENSE);
    }
}
