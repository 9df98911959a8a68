//! SRP_I_LOGOUT (initiator ends a channel) and SRP_T_LOGOUT (target ends a channel), 16 bytes
//! each (SRP r16a; Linux `struct srp_i_logout`/`srp_t_logout`).

use super::error::{expect_type, read_fixed, write_fixed};
use super::{IuType, Tag, WireError};
use wirekit::WireRepr;
use zerocopy::network_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// SRP_I_LOGOUT as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct ILogoutHdr {
    /// 0x03.
    pub iu_type: u8,
    /// Reserved.
    pub reserved: [u8; 7],
    /// Tag.
    pub tag: U64,
}
const _: () = assert!(size_of::<ILogoutHdr>() == 16);

/// SRP_I_LOGOUT: the initiator asks the target to end this RDMA channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ILogout {
    /// Tag.
    pub tag: Tag,
}

impl<'a> WireRepr<'a> for ILogout {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: ILogoutHdr = read_fixed("SRP_I_LOGOUT", buf)?;
        expect_type("SRP_I_LOGOUT", IuType::ILogout.into(), h.iu_type)?;
        Ok(ILogout {
            tag: Tag(h.tag.get()),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<ILogoutHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = ILogoutHdr {
            iu_type: IuType::ILogout.into(),
            reserved: [0; 7],
            tag: U64::new(self.tag.0),
        };
        write_fixed("SRP_I_LOGOUT", &h, buf)
    }
}

wirekit::open_enum! {
    /// Why a target logs a channel out.
    ///
    /// Sources disagree: iPXE's `srp.h` (written against SRP r16a) numbers the descriptor
    /// format errors 5 (data-out) and 6 (data-in) and adds 8 (invalid IU length); the 2005
    /// WinOF `srp.h` (an earlier draft) uses 6/7 for the formats and 8/9 for invalid
    /// descriptor counts. We follow r16a as iPXE has it, because Linux `srp.h`, our interop
    /// peer, is written against r16a too. On input the WinOF-only codes 7 and 9 stay
    /// `Unknown` but [`TLogoutReason::description`] still names them: an initiator only logs
    /// the reason, so reading either numbering is harmless.
    pub enum TLogoutReason(u32) {
        /// No reason specified.
        NoReason = 0,
        /// Inactive RDMA channel (the target reclaims resources).
        InactiveChannel = 1,
        /// The target received an invalid IU type code.
        InvalidIuType = 2,
        /// The initiator sent a response with no corresponding request.
        SpuriousResponse = 3,
        /// Disconnected by the multi-channel action of a new login.
        MultiChannelAction = 4,
        /// Unsupported format code in a data-out buffer descriptor.
        UnsupportedDataOutFormat = 5,
        /// Unsupported format code in a data-in buffer descriptor.
        UnsupportedDataInFormat = 6,
        /// Invalid length for the IU type.
        InvalidIuLength = 8,
    }
}

impl TLogoutReason {
    /// A human-readable reason, including the 2005 WinOF draft codes 7 and 9.
    pub fn description(self) -> &'static str {
        match self {
            TLogoutReason::NoReason => "no reason specified",
            TLogoutReason::InactiveChannel => "inactive RDMA channel",
            TLogoutReason::InvalidIuType => "invalid IU type received by the target",
            TLogoutReason::SpuriousResponse => "response with no corresponding request",
            TLogoutReason::MultiChannelAction => "multi-channel action of a new login",
            TLogoutReason::UnsupportedDataOutFormat => "unsupported data-out descriptor format",
            TLogoutReason::UnsupportedDataInFormat => "unsupported data-in descriptor format",
            TLogoutReason::InvalidIuLength => "invalid length for the IU type",
            TLogoutReason::Unknown(7) => "unsupported data-in descriptor format (SRP draft code)",
            TLogoutReason::Unknown(9) => "invalid data-in descriptor count (SRP draft code)",
            TLogoutReason::Unknown(_) => "unknown reason",
        }
    }
}

/// SRP_T_LOGOUT as laid out on the wire.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct TLogoutHdr {
    /// 0x80.
    pub iu_type: u8,
    /// Bit 0: SOLNT (solicited notification requested at login).
    pub flags: u8,
    /// Reserved.
    pub reserved: [u8; 2],
    /// Reason code.
    pub reason: U32,
    /// Tag.
    pub tag: U64,
}
const _: () = assert!(size_of::<TLogoutHdr>() == 16);

/// SOLNT bit of SRP_T_LOGOUT, SRP_CRED_REQ, SRP_AER_REQ and SRP_RSP byte 1.
pub const FLAG_SOLNT: u8 = 0x01;

/// SRP_T_LOGOUT: the target ends this RDMA channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TLogout {
    /// Solicited notification: the initiator asked for it (LOSOLNT) at login.
    pub solicited: bool,
    /// Why.
    pub reason: TLogoutReason,
    /// Tag.
    pub tag: Tag,
}

impl<'a> WireRepr<'a> for TLogout {
    type Error = WireError;

    fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let h: TLogoutHdr = read_fixed("SRP_T_LOGOUT", buf)?;
        expect_type("SRP_T_LOGOUT", IuType::TLogout.into(), h.iu_type)?;
        Ok(TLogout {
            solicited: h.flags & FLAG_SOLNT != 0,
            reason: h.reason.get().into(),
            tag: Tag(h.tag.get()),
        })
    }

    fn buffer_len(&self) -> usize {
        size_of::<TLogoutHdr>()
    }

    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = TLogoutHdr {
            iu_type: IuType::TLogout.into(),
            flags: if self.solicited { FLAG_SOLNT } else { 0 },
            reserved: [0; 2],
            reason: U32::new(self.reason.into()),
            tag: U64::new(self.tag.0),
        };
        write_fixed("SRP_T_LOGOUT", &h, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirekit::wire_repr::check;

    /// SRP_I_LOGOUT, tag 0x0102030405060708 (layout: Linux `struct srp_i_logout`).
    const I_LOGOUT: [u8; 16] = [
        0x03, // IU type: SRP_I_LOGOUT
        0, 0, 0, 0, 0, 0, 0, // reserved
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // tag
    ];

    fn i_logout() -> ILogout {
        ILogout {
            tag: Tag(0x0102_0304_0506_0708),
        }
    }

    #[test]
    fn i_logout_decodes_known_bytes() {
        check::decodes(&I_LOGOUT, &i_logout());
    }

    #[test]
    fn i_logout_emits_known_bytes() {
        check::emits(&i_logout(), &I_LOGOUT);
    }

    #[test]
    fn i_logout_round_trips() {
        check::round_trips(&i_logout(), &mut Vec::new());
    }

    #[test]
    fn i_logout_truncated_errors() {
        check::truncation_errors::<ILogout>(&I_LOGOUT);
    }

    /// SRP_T_LOGOUT, SOLNT, reason 4 (multi-channel action), tag 0x2a (layout: iPXE `srp.h`).
    const T_LOGOUT: [u8; 16] = [
        0x80, // IU type: SRP_T_LOGOUT
        0x01, // flags: SOLNT
        0, 0, // reserved
        0x00, 0x00, 0x00, 0x04, // reason: multi-channel action
        0, 0, 0, 0, 0, 0, 0, 0x2a, // tag
    ];

    fn t_logout() -> TLogout {
        TLogout {
            solicited: true,
            reason: TLogoutReason::MultiChannelAction,
            tag: Tag(0x2a),
        }
    }

    #[test]
    fn t_logout_decodes_known_bytes() {
        check::decodes(&T_LOGOUT, &t_logout());
    }

    #[test]
    fn t_logout_emits_known_bytes() {
        check::emits(&t_logout(), &T_LOGOUT);
    }

    #[test]
    fn t_logout_round_trips() {
        check::round_trips(&t_logout(), &mut Vec::new());
        let odd = TLogout {
            solicited: false,
            reason: TLogoutReason::Unknown(9),
            tag: Tag(1),
        };
        check::round_trips(&odd, &mut Vec::new());
    }

    #[test]
    fn t_logout_truncated_errors() {
        check::truncation_errors::<TLogout>(&T_LOGOUT);
    }

    #[test]
    fn t_logout_reasons_follow_r16a_and_name_draft_codes() {
        assert_eq!(
            TLogoutReason::from(5),
            TLogoutReason::UnsupportedDataOutFormat
        );
        assert_eq!(
            TLogoutReason::from(6),
            TLogoutReason::UnsupportedDataInFormat
        );
        assert_eq!(TLogoutReason::from(8), TLogoutReason::InvalidIuLength);
        assert!(TLogoutReason::from(9).description().contains("draft"));
    }

    #[test]
    fn wrong_type_byte_is_rejected() {
        let mut b = I_LOGOUT;
        b[0] = 0x80;
        assert_eq!(
            ILogout::parse(&b),
            Err(WireError::WrongType {
                iu: "SRP_I_LOGOUT",
                expected: 0x03,
                got: 0x80
            })
        );
    }
}
