//! Descriptor-format sense data, response codes 72h (current) and 73h (deferred)
//! (SPC-4): an 8-byte header and a list of sense data descriptors.
//!
//! Information (00h), command-specific information (01h) and sense key specific (02h)
//! descriptors are decoded; any other descriptor, or one of these with an unexpected length
//! or a cleared VALID/SKSV bit, is kept as raw bytes so it survives a round trip.

use super::{SenseCode, SenseError, SenseKey, SenseKeySpecific};
use alloc::vec::Vec;
use wirekit::WireRepr;
use zerocopy::network_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The 8-byte descriptor-format header (SPC-4).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct DescriptorSenseHdr {
    /// Bits 6:0: response code 72h/73h.
    pub response: u8,
    /// Bits 3:0: SENSE KEY.
    pub key: u8,
    /// ADDITIONAL SENSE CODE.
    pub asc: u8,
    /// ADDITIONAL SENSE CODE QUALIFIER.
    pub ascq: u8,
    /// Bit 7 of the first byte: SDAT_OVFL; otherwise reserved.
    pub reserved: [u8; 3],
    /// ADDITIONAL SENSE LENGTH: total length of the descriptors.
    pub additional_len: u8,
}
const _: () = assert!(size_of::<DescriptorSenseHdr>() == 8);

/// An information (00h) or command-specific information (01h) descriptor (SPC-4 tables
/// 29 and 30): 12 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct U64Desc {
    /// DESCRIPTOR TYPE.
    pub kind: u8,
    /// ADDITIONAL LENGTH: 0Ah.
    pub len: u8,
    /// Information: bit 7 VALID (shall be one); command-specific: reserved.
    pub valid: u8,
    /// Reserved.
    pub reserved: u8,
    /// INFORMATION or COMMAND-SPECIFIC INFORMATION.
    pub value: U64,
}
const _: () = assert!(size_of::<U64Desc>() == 12);

/// A sense key specific descriptor (02h, SPC-4): 8 bytes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct SksDesc {
    /// DESCRIPTOR TYPE: 02h.
    pub kind: u8,
    /// ADDITIONAL LENGTH: 06h.
    pub len: u8,
    /// Reserved.
    pub reserved: [u8; 2],
    /// SKSV and SENSE KEY SPECIFIC.
    pub sks: [u8; 3],
    /// Reserved.
    pub reserved2: u8,
}
const _: () = assert!(size_of::<SksDesc>() == 8);

/// Response code of current descriptor-format sense.
pub const RESPONSE_DESC_CURRENT: u8 = 0x72;
/// Response code of deferred descriptor-format sense.
pub const RESPONSE_DESC_DEFERRED: u8 = 0x73;

const TYPE_INFORMATION: u8 = 0x00;
const TYPE_COMMAND_SPECIFIC: u8 = 0x01;
const TYPE_SKS: u8 = 0x02;
const VALID: u8 = 0x80;

/// One sense data descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SenseDescriptor {
    /// Information (00h) with VALID=1, e.g. the LBA in error.
    Information(u64),
    /// Command-specific information (01h).
    CommandSpecific(u64),
    /// Sense key specific (02h) with SKSV=1.
    SenseKeySpecific(SenseKeySpecific),
    /// Any other descriptor, as received.
    Other {
        /// DESCRIPTOR TYPE.
        kind: u8,
        /// The bytes after the ADDITIONAL LENGTH byte (at most 255).
        data: Vec<u8>,
    },
}

impl SenseDescriptor {
    /// Bytes this descriptor occupies.
    fn len(&self) -> usize {
        match self {
            SenseDescriptor::Information(_) | SenseDescriptor::CommandSpecific(_) => 12,
            SenseDescriptor::SenseKeySpecific(_) => 8,
            SenseDescriptor::Other { data, .. } => 2 + data.len(),
        }
    }

    /// Decodes one descriptor (whole bytes, header included) under sense key `key`.
    fn decode(key: SenseKey, d: &[u8]) -> SenseDescriptor {
        if let Ok(u) = U64Desc::read_from_bytes(d) {
            match u.kind {
                TYPE_INFORMATION if u.len == 0x0a && u.valid & VALID != 0 => {
                    return SenseDescriptor::Information(u.value.get());
                }
                TYPE_COMMAND_SPECIFIC if u.len == 0x0a => {
                    return SenseDescriptor::CommandSpecific(u.value.get());
                }
                _ => {}
            }
        }
        if let Ok(s) = SksDesc::read_from_bytes(d) {
            if s.kind == TYPE_SKS && s.len == 0x06 {
                if let Some(sks) = SenseKeySpecific::decode(key, s.sks) {
                    return SenseDescriptor::SenseKeySpecific(sks);
                }
            }
        }
        let kind = d.first().copied().unwrap_or(0);
        SenseDescriptor::Other {
            kind,
            data: d.get(2..).unwrap_or_default().to_vec(),
        }
    }

    /// Writes the descriptor to `out`, which is exactly [`SenseDescriptor::len`] bytes.
    fn encode(&self, out: &mut [u8]) -> Result<(), SenseError> {
        let too_small = || SenseError::BufferTooSmall {
            need: self.len(),
            have: 0,
        };
        match self {
            SenseDescriptor::Information(v) | SenseDescriptor::CommandSpecific(v) => {
                let info = matches!(self, SenseDescriptor::Information(_));
                let d = U64Desc {
                    kind: if info {
                        TYPE_INFORMATION
                    } else {
                        TYPE_COMMAND_SPECIFIC
                    },
                    len: 0x0a,
                    valid: if info { VALID } else { 0 },
                    reserved: 0,
                    value: U64::new(*v),
                };
                d.write_to(out).map_err(|_| too_small())
            }
            SenseDescriptor::SenseKeySpecific(sks) => {
                let d = SksDesc {
                    kind: TYPE_SKS,
                    len: 0x06,
                    reserved: [0; 2],
                    sks: sks.encode()?,
                    reserved2: 0,
                };
                d.write_to(out).map_err(|_| too_small())
            }
            SenseDescriptor::Other { kind, data } => {
                let len = u8::try_from(data.len()).map_err(|_| SenseError::OutOfRange {
                    field: "descriptor ADDITIONAL LENGTH",
                    value: data.len() as u64,
                })?;
                let (hdr, rest) = out.split_at_mut_checked(2).ok_or_else(too_small)?;
                hdr.copy_from_slice(&[*kind, len]);
                rest.get_mut(..data.len())
                    .ok_or_else(too_small)?
                    .copy_from_slice(data);
                Ok(())
            }
        }
    }
}

/// Descriptor-format sense data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescriptorSense {
    /// Deferred error (73h) rather than current (72h).
    pub deferred: bool,
    /// Sense key, ASC, ASCQ.
    pub code: SenseCode,
    /// The sense data descriptors, in order.
    pub descriptors: Vec<SenseDescriptor>,
}

impl<'a> WireRepr<'a> for DescriptorSense {
    type Error = SenseError;

    fn parse(buf: &'a [u8]) -> Result<Self, SenseError> {
        let (h, _) =
            DescriptorSenseHdr::read_from_prefix(buf).map_err(|_| SenseError::Truncated {
                need: 8,
                have: buf.len(),
            })?;
        let deferred = match h.response & 0x7f {
            RESPONSE_DESC_CURRENT => false,
            RESPONSE_DESC_DEFERRED => true,
            other => return Err(SenseError::UnknownResponseCode(other)),
        };
        let total = 8 + usize::from(h.additional_len);
        let mut rest = buf.get(8..total).ok_or(SenseError::Truncated {
            need: total,
            have: buf.len(),
        })?;
        let code = SenseCode::new((h.key & 0x0f).into(), h.asc, h.ascq);
        // Bounded: each pass consumes at least the 2-byte descriptor header of <= 255 bytes.
        let mut descriptors = Vec::new();
        while !rest.is_empty() {
            let len = 2 + usize::from(*rest.get(1).ok_or(SenseError::BadDescriptorLength)?);
            let d = rest.get(..len).ok_or(SenseError::BadDescriptorLength)?;
            descriptors.push(SenseDescriptor::decode(code.key, d));
            rest = &rest[len..];
        }
        Ok(DescriptorSense {
            deferred,
            code,
            descriptors,
        })
    }

    fn buffer_len(&self) -> usize {
        8 + self
            .descriptors
            .iter()
            .map(SenseDescriptor::len)
            .sum::<usize>()
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
        let have = buf.len();
        let out = buf
            .get_mut(..need)
            .ok_or(SenseError::BufferTooSmall { need, have })?;
        let h = DescriptorSenseHdr {
            response: if self.deferred {
                RESPONSE_DESC_DEFERRED
            } else {
                RESPONSE_DESC_CURRENT
            },
            key,
            asc: self.code.asc,
            ascq: self.code.ascq,
            reserved: [0; 3],
            additional_len,
        };
        let (hdr, mut rest) = out.split_at_mut(8);
        hdr.copy_from_slice(h.as_bytes());
        for d in &self.descriptors {
            let (this, tail) = rest.split_at_mut(d.len());
            d.encode(this)?;
            rest = tail;
        }
        Ok(need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sense::FieldPointer;
    use wirekit::wire_repr::check;

    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST with a field pointer, an information
    /// descriptor and a vendor descriptor (layout: SPC-4, tables 27-31).
    const BAD_PARAM: [u8; 32] = [
        0x72, // response code 72h (current, descriptor)
        0x05, // sense key 5h ILLEGAL REQUEST
        0x26, 0x00, // ASC/ASCQ: INVALID FIELD IN PARAMETER LIST
        0, 0, 0,    // reserved
        0x18, // ADDITIONAL SENSE LENGTH: 24
        0x02, 0x06, // sense key specific descriptor, additional length 6
        0, 0, // reserved
        0x8b, 0x00, 0x10, // SKSV=1, C/D=0 (parameter list), BPV=1 bit 3; FIELD POINTER 16
        0x00, // reserved
        0x00, 0x0a, // information descriptor, additional length 10
        0x80, 0x00, // VALID=1, reserved
        0, 0, 0, 0, 0, 0, 0x12, 0x34, // INFORMATION
        0x80, 0x02, // vendor descriptor type 80h, additional length 2
        0xca, 0xfe, // vendor data
    ];

    fn bad_param() -> DescriptorSense {
        DescriptorSense {
            deferred: false,
            code: SenseCode::INVALID_FIELD_IN_PARAMETER_LIST,
            descriptors: vec![
                SenseDescriptor::SenseKeySpecific(SenseKeySpecific::FieldPointer(FieldPointer {
                    in_cdb: false,
                    bit: Some(3),
                    byte: 16,
                })),
                SenseDescriptor::Information(0x1234),
                SenseDescriptor::Other {
                    kind: 0x80,
                    data: vec![0xca, 0xfe],
                },
            ],
        }
    }

    /// Deferred ABORTED COMMAND with a command-specific information descriptor only.
    const ABORTED: [u8; 20] = [
        0x73, // response code 73h (deferred, descriptor)
        0x0b, // sense key Bh ABORTED COMMAND
        0x00, 0x00, // ASC/ASCQ: NO ADDITIONAL SENSE INFORMATION
        0, 0, 0,    // reserved
        0x0c, // ADDITIONAL SENSE LENGTH: 12
        0x01, 0x0a, // command-specific information descriptor, additional length 10
        0, 0, // reserved
        1, 2, 3, 4, 5, 6, 7, 8, // COMMAND-SPECIFIC INFORMATION
    ];

    fn aborted() -> DescriptorSense {
        DescriptorSense {
            deferred: true,
            code: SenseCode::ABORTED_COMMAND,
            descriptors: vec![SenseDescriptor::CommandSpecific(0x0102_0304_0506_0708)],
        }
    }

    #[test]
    fn descriptor_decodes_known_bytes() {
        check::decodes(&BAD_PARAM, &bad_param());
        check::decodes(&ABORTED, &aborted());
    }

    #[test]
    fn descriptor_emits_known_bytes() {
        check::emits(&bad_param(), &BAD_PARAM);
        check::emits(&aborted(), &ABORTED);
    }

    #[test]
    fn descriptor_round_trips() {
        check::round_trips(&bad_param(), &mut Vec::new());
        check::round_trips(&aborted(), &mut Vec::new());
    }

    #[test]
    fn descriptor_truncated_errors() {
        check::truncation_errors::<DescriptorSense>(&BAD_PARAM);
        check::truncation_errors::<DescriptorSense>(&ABORTED);
    }

    #[test]
    fn odd_known_descriptors_stay_raw() {
        // Information descriptor with VALID=0 and an SKS descriptor with SKSV=0.
        let b = [
            0x72, 0x05, 0x24, 0x00, 0, 0, 0, 20, //
            0x00, 0x0a, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 1, //
            0x02, 0x06, 0, 0, 0x00, 0, 5, 0,
        ];
        let s = DescriptorSense::parse(&b).expect("parses");
        assert!(matches!(
            s.descriptors[0],
            SenseDescriptor::Other { kind: 0, .. }
        ));
        assert!(matches!(
            s.descriptors[1],
            SenseDescriptor::Other { kind: 2, .. }
        ));
        let mut out = [0u8; 28];
        assert_eq!(s.emit(&mut out), Ok(28));
        assert_eq!(out, b);
    }

    #[test]
    fn descriptor_overrunning_the_length_errors() {
        let b = [0x72, 0x05, 0x24, 0x00, 0, 0, 0, 3, 0x80, 0x05, 0];
        assert_eq!(
            DescriptorSense::parse(&b),
            Err(SenseError::BadDescriptorLength)
        );
    }
}
