//! SAM logical unit numbers: the 8-byte LUN field and the single-level encodings we use.
//!
//! SAM-5 §4.7: byte 0 bits 7:6 are the address method. We produce and accept single-level LUNs
//! only: peripheral device addressing (method 00b, bus 0) for LUNs 0..=255 and flat space
//! addressing (method 01b) for 256..=16383, as LIO, SCST and Linux `int_to_scsilun` do for
//! these ranges. The remaining six bytes (second to fourth levels) must be zero.

use core::fmt;

/// Why an 8-byte LUN field is not a LUN we can address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LunError {
    /// A LUN number above 16383 cannot be encoded single-level.
    #[error("LUN {0} is above 16383, the largest single-level (flat space) LUN")]
    TooLarge(u32),
    /// The field uses a hierarchical (multi-level) form.
    #[error("LUN {0} uses more than one addressing level; only single-level LUNs are supported")]
    MultiLevel(Lun),
    /// The field uses an address method other than peripheral (bus 0) or flat space.
    #[error(
        "LUN {lun} uses address method {method:#04b}{extra}; only peripheral (bus 0) and flat space are supported"
    )]
    UnsupportedMethod {
        /// The field.
        lun: Lun,
        /// Bits 7:6 of byte 0.
        method: u8,
        /// Detail, e.g. a nonzero bus.
        extra: &'static str,
    },
}

/// The 8-byte SAM LUN field exactly as on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Lun(pub [u8; 8]);

impl Lun {
    /// LUN 0, which every target must answer REPORT LUNS on.
    pub const ZERO: Lun = Lun([0; 8]);

    /// Encodes LUN `n` single-level: peripheral for 0..=255, flat space for 256..=16383.
    pub fn from_number(n: u32) -> Result<Lun, LunError> {
        match n {
            0..=255 => Ok(Lun([0, n as u8, 0, 0, 0, 0, 0, 0])),
            256..=16383 => Ok(Lun([0x40 | (n >> 8) as u8, n as u8, 0, 0, 0, 0, 0, 0])),
            _ => Err(LunError::TooLarge(n)),
        }
    }

    /// Decodes a single-level LUN number.
    pub fn number(self) -> Result<u32, LunError> {
        if self.0[2..].iter().any(|&b| b != 0) {
            return Err(LunError::MultiLevel(self));
        }
        let method = self.0[0] >> 6;
        match method {
            0b00 if self.0[0] == 0 => Ok(u32::from(self.0[1])),
            0b00 => Err(LunError::UnsupportedMethod {
                lun: self,
                method,
                extra: " with bus != 0",
            }),
            0b01 => Ok((u32::from(self.0[0] & 0x3f) << 8) | u32::from(self.0[1])),
            _ => Err(LunError::UnsupportedMethod {
                lun: self,
                method,
                extra: "",
            }),
        }
    }

    /// The field as a big-endian u64 (how REPORT LUNS lists are often compared).
    pub fn to_u64(self) -> u64 {
        u64::from_be_bytes(self.0)
    }
}

impl fmt::Debug for Lun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lun({self})")
    }
}

/// The LUN number when single-level, else the 16 hex digits of the field.
impl fmt::Display for Lun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.number() {
            Ok(n) => write!(f, "{n}"),
            Err(_) => write!(f, "{:016x}", self.to_u64()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peripheral_and_flat_encodings() {
        assert_eq!(Lun::from_number(0), Ok(Lun::ZERO));
        assert_eq!(
            Lun::from_number(5).map(|l| l.0),
            Ok([0, 5, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(
            Lun::from_number(255).map(|l| l.0),
            Ok([0, 0xff, 0, 0, 0, 0, 0, 0])
        );
        // SAM-5 table 13: flat space, LUN 256 = 0x4100.
        assert_eq!(
            Lun::from_number(256).map(|l| l.0),
            Ok([0x41, 0x00, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(
            Lun::from_number(16383).map(|l| l.0),
            Ok([0x7f, 0xff, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(Lun::from_number(16384), Err(LunError::TooLarge(16384)));
    }

    #[test]
    fn decode_round_trips_and_rejects_other_forms() {
        for n in [0, 1, 17, 255, 256, 1000, 16383] {
            let lun = Lun::from_number(n).expect("encodable");
            assert_eq!(lun.number(), Ok(n));
        }
        // Flat space may also encode small LUNs.
        assert_eq!(Lun([0x40, 0x07, 0, 0, 0, 0, 0, 0]).number(), Ok(7));
        assert!(matches!(
            Lun([0x01, 0x07, 0, 0, 0, 0, 0, 0]).number(),
            Err(LunError::UnsupportedMethod { method: 0, .. })
        ));
        assert!(matches!(
            Lun([0x80, 0x07, 0, 0, 0, 0, 0, 0]).number(),
            Err(LunError::UnsupportedMethod { method: 2, .. })
        ));
        assert!(matches!(
            Lun([0, 1, 0, 2, 0, 0, 0, 0]).number(),
            Err(LunError::MultiLevel(_))
        ));
        assert_eq!(Lun::from_number(300).expect("flat").to_string(), "300");
        assert_eq!(
            Lun([0xc0, 0, 0, 0, 0, 0, 0, 1]).to_string(),
            "c000000000000001"
        );
    }
}
