//! The ACK extended transport header: syndrome and MSN, 4 bytes (IBTA Vol 1 9.3.5, 9.7.5.1;
//! softrdma.md §1.5, §1.6).

use super::WireError;
use super::error::{fit, read_fixed, write_fixed};
use wirekit::WireRepr;
use zerocopy::network_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

wirekit::open_enum! {
    /// A NAK code: the whole syndrome byte of a NAK (type bits 6:5 = 11).
    pub enum NakCode(u8) {
        /// PSN sequence error: the responder expected an earlier PSN (it carries that PSN).
        PsnSequenceError = 0x60,
        /// Invalid request (unsupported opcode, missing First/Last, length error).
        InvalidRequest = 0x61,
        /// Remote access error (R_Key, bounds or access rights).
        RemoteAccessError = 0x62,
        /// Remote operational error.
        RemoteOperationalError = 0x63,
        /// Invalid RD request (RD only; tshark's name).
        InvalidRdRequest = 0x64,
    }
}

/// Credit count meaning "no flow-control credits advertised" (rxe always sends it).
pub const CREDITS_UNLIMITED: u8 = 0x1f;

/// What an AETH says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syndrome {
    /// Positive acknowledge with an end-to-end credit count (0..=0x1f;
    /// [`CREDITS_UNLIMITED`] = none advertised).
    Ack {
        /// Credit count code.
        credits: u8,
    },
    /// Receiver not ready: retry after [`rnr_timer_us`]`(timer)`.
    RnrNak {
        /// RNR timer code (0..=31).
        timer: u8,
    },
    /// Negative acknowledge.
    Nak(NakCode),
    /// A reserved syndrome (bit 7 set, or type 10), kept as the raw byte.
    Reserved(u8),
}

const TYPE_MASK: u8 = 0x60;
const VALUE_MASK: u8 = 0x1f;

impl Syndrome {
    /// ACK with no credits advertised, what rxe and this HCA send.
    pub const ACK_UNLIMITED: Syndrome = Syndrome::Ack {
        credits: CREDITS_UNLIMITED,
    };

    /// Decodes a syndrome byte.
    pub fn from_byte(b: u8) -> Self {
        if b & 0x80 != 0 {
            return Syndrome::Reserved(b);
        }
        match b & TYPE_MASK {
            0x00 => Syndrome::Ack {
                credits: b & VALUE_MASK,
            },
            0x20 => Syndrome::RnrNak {
                timer: b & VALUE_MASK,
            },
            0x60 => Syndrome::Nak(NakCode::from(b)),
            _ => Syndrome::Reserved(b),
        }
    }

    /// The syndrome byte; fails on a credit or timer code over 5 bits, a NAK code outside
    /// 0x60..=0x7f, or a `Reserved` byte that names a defined syndrome.
    pub fn to_byte(self) -> Result<u8, WireError> {
        let bad = |field, value: u8, why| WireError::BadField {
            what: "AETH",
            field,
            value: value.into(),
            why,
        };
        match self {
            Syndrome::Ack { credits } => Ok(fit("AETH", "credits", credits.into(), 5)? as u8),
            Syndrome::RnrNak { timer } => {
                Ok(0x20 | fit("AETH", "RNR timer", timer.into(), 5)? as u8)
            }
            Syndrome::Nak(code) => {
                let b = u8::from(code);
                if b & 0xe0 == 0x60 {
                    Ok(b)
                } else {
                    Err(bad("NAK code", b, "not a NAK syndrome (0x60..=0x7f)"))
                }
            }
            Syndrome::Reserved(b) => match Syndrome::from_byte(b) {
                Syndrome::Reserved(_) => Ok(b),
                _ => Err(bad("syndrome", b, "not a reserved syndrome")),
            },
        }
    }
}

/// RNR NAK timer code to microseconds (IBTA table 45; rxe `rnrnak_usec[]`). Code 25 is
/// 61.44 ms as the spec names it (`IB_RNR_TIMER_061_44`); rxe's table has 61410, a typo.
/// Only the low five bits of `code` are used.
pub fn rnr_timer_us(code: u8) -> u32 {
    const TABLE: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    TABLE[usize::from(code & VALUE_MASK)]
}

/// The AETH as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct AethHdr {
    /// Syndrome(31:24) | MSN(23:0).
    pub syndrome_msn: U32,
}
const _: () = assert!(size_of::<AethHdr>() == 4);

impl AethHdr {
    /// The syndrome.
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.syndrome_msn.get().to_be_bytes()[0])
    }

    /// The message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        self.syndrome_msn.get() & 0x00ff_ffff
    }
}

/// An ACK extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aeth {
    /// ACK, RNR NAK or NAK.
    pub syndrome: Syndrome,
    /// Message sequence number: the responder's count of completed messages (24 bits).
    pub msn: u32,
}

impl<'a> WireRepr<'a> for Aeth {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: AethHdr = read_fixed("AETH", buf)?;
        Ok(Aeth {
            syndrome: h.syndrome(),
            msn: h.msn(),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<AethHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let syndrome = u32::from(self.syndrome.to_byte()?);
        let msn = fit("AETH", "MSN", self.msn, 24)?;
        let h = AethHdr {
            syndrome_msn: U32::new(syndrome << 24 | msn),
        };
        write_fixed("AETH", &h, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// AETH of the golden ACK in softrdma.md §1.7.
    const ACK_AETH: [u8; 4] = [
        0x1f, // syndrome: ACK, credits 0x1f (unlimited)
        0x00, 0x00, 0x01, // MSN 1
    ];

    fn ack_aeth() -> Aeth {
        Aeth {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 1,
        }
    }

    /// RNR NAK, timer code 14 (1.28 ms), MSN 0xabcdef.
    const RNR_AETH: [u8; 4] = [
        0x2e, // syndrome: type 01 (RNR NAK), timer 14
        0xab, 0xcd, 0xef, // MSN
    ];

    #[test]
    fn aeth_decodes_known_bytes() {
        check::decodes(&ACK_AETH, &ack_aeth());
        let rnr = Aeth {
            syndrome: Syndrome::RnrNak { timer: 14 },
            msn: 0xab_cdef,
        };
        check::decodes(&RNR_AETH, &rnr);
    }

    #[test]
    fn aeth_emits_known_bytes() {
        check::emits(&ack_aeth(), &ACK_AETH);
        let rnr = Aeth {
            syndrome: Syndrome::RnrNak { timer: 14 },
            msn: 0xab_cdef,
        };
        check::emits(&rnr, &RNR_AETH);
    }

    #[test]
    fn aeth_round_trips() {
        for s in [
            0x00, 0x1f, 0x20, 0x3f, 0x60, 0x63, 0x64, 0x7f, 0x40, 0x80, 0xff,
        ] {
            let a = Aeth {
                syndrome: Syndrome::from_byte(s),
                msn: 0xff_ffff,
            };
            check::round_trips(&a, &mut Vec::new());
        }
    }

    #[test]
    fn aeth_truncated_errors() {
        check::truncation_errors::<Aeth>(&ACK_AETH);
    }

    #[test]
    fn syndromes_decode_as_tshark() {
        assert_eq!(
            Syndrome::from_byte(0x60),
            Syndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            Syndrome::from_byte(0x62),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            Syndrome::from_byte(0x65),
            Syndrome::Nak(NakCode::Unknown(0x65))
        );
        assert_eq!(Syndrome::from_byte(0x45), Syndrome::Reserved(0x45));
        assert_eq!(Syndrome::from_byte(0x05), Syndrome::Ack { credits: 5 });
    }

    #[test]
    fn invalid_syndromes_and_msn_do_not_emit() {
        let mut buf = [0u8; 4];
        for s in [
            Syndrome::Ack { credits: 0x20 },
            Syndrome::RnrNak { timer: 32 },
            Syndrome::Nak(NakCode::Unknown(0x05)),
            Syndrome::Reserved(0x1f),
        ] {
            let a = Aeth {
                syndrome: s,
                msn: 0,
            };
            assert!(a.emit(&mut buf).is_err(), "{s:?}");
        }
        let a = Aeth {
            msn: 0x100_0000,
            ..ack_aeth()
        };
        assert!(a.emit(&mut buf).is_err());
    }

    #[test]
    fn rnr_timer_table() {
        assert_eq!(rnr_timer_us(0), 655_360);
        assert_eq!(rnr_timer_us(1), 10);
        assert_eq!(rnr_timer_us(14), 1_280);
        assert_eq!(rnr_timer_us(25), 61_440);
        assert_eq!(rnr_timer_us(31), 491_520);
        assert_eq!(rnr_timer_us(0x20 | 1), 10, "high bits ignored");
    }
}
